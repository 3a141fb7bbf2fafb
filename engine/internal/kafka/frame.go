package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// errFrame marks input the listener answers by closing the connection: a
// size prefix out of bounds, a header that does not parse, an API it does
// not serve, a body that does not decode. Kafka brokers close the
// connection on all of these too (a client cannot resynchronize a stream
// whose framing it got wrong).
var errFrame = errors.New("kafka: malformed request")

// request is one decoded request: its header and its body, decoded by
// kmsg at the version the header names.
type request struct {
	key, version  int16
	correlationID int32
	clientID      *string
	host          string // the client's address, for DescribeGroups
	// msg is the decoded body; nil for an ApiVersions request at a
	// version this listener does not know (answered with
	// UNSUPPORTED_VERSION at v0, as Kafka does, so the client can retry
	// at one it knows).
	msg kmsg.Request
}

// readFrame reads one size-prefixed frame into buf (grown as needed) and
// returns the frame's bytes. A size below the smallest header or above
// max is errFrame: the caller closes the connection before reading the
// body, so a 2 GiB prefix costs nothing.
func readFrame(r io.Reader, buf []byte, max int32) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 8 || n > max {
		return nil, fmt.Errorf("%w: frame size %d outside [8, %d]", errFrame, n, max)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// parseRequest decodes a frame: the request header (v1, or v2 with tagged
// fields for a flexible version) and the body through kmsg. It returns
// errFrame for an API this listener does not serve, a version outside its
// served range (ApiVersions aside), or bytes that do not decode.
func parseRequest(frame []byte) (*request, error) {
	if len(frame) < 8 {
		return nil, fmt.Errorf("%w: header of %d bytes", errFrame, len(frame))
	}
	req := &request{
		key:           int16(binary.BigEndian.Uint16(frame[0:])),
		version:       int16(binary.BigEndian.Uint16(frame[2:])),
		correlationID: int32(binary.BigEndian.Uint32(frame[4:])),
	}
	rest := frame[8:]
	if len(rest) < 2 {
		return nil, fmt.Errorf("%w: no client id", errFrame)
	}
	idLen := int16(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	switch {
	case idLen == -1:
	case idLen < 0 || int(idLen) > len(rest):
		return nil, fmt.Errorf("%w: client id of %d bytes in %d", errFrame, idLen, len(rest))
	default:
		id := string(rest[:idLen])
		req.clientID = &id
		rest = rest[idLen:]
	}
	api, ok := served[req.key]
	if !ok {
		return nil, fmt.Errorf("%w: api key %d (%s) not served", errFrame, req.key, kmsg.NameForKey(req.key))
	}
	if req.version < api.min || req.version > api.max {
		if req.key == kmsg.ApiVersions.Int16() {
			return req, nil // answered with UNSUPPORTED_VERSION
		}
		return nil, fmt.Errorf("%w: %s version %d outside [%d, %d]", errFrame, kmsg.NameForKey(req.key), req.version, api.min, api.max)
	}
	msg := kmsg.RequestForKey(req.key)
	msg.SetVersion(req.version)
	if msg.IsFlexible() {
		var err error
		if rest, err = skipTags(rest); err != nil {
			return nil, err
		}
	}
	if err := msg.ReadFrom(rest); err != nil {
		return nil, fmt.Errorf("%w: %s v%d body: %w", errFrame, kmsg.NameForKey(req.key), req.version, err)
	}
	req.msg = msg
	return req, nil
}

// skipTags skips a tagged-field section (an unsigned varint count, then
// per field an unsigned varint tag, an unsigned varint size and the
// bytes): the request header v2 carries one, which Rewind has no use for.
func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: header tags", errFrame)
	}
	b = b[k:]
	for range n {
		if _, k = binary.Uvarint(b); k <= 0 {
			return nil, fmt.Errorf("%w: header tag", errFrame)
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return nil, fmt.Errorf("%w: header tag size", errFrame)
		}
		b = b[k+int(size):]
	}
	return b, nil
}

// appendResponse appends resp's frame for req to dst: the size, the
// response header (v0: the correlation id; v1 adds an empty tagged-field
// section for a flexible version, except for ApiVersions, whose response
// header is always v0 so that a client that does not yet know the
// broker's versions can read it), and the body.
func appendResponse(dst []byte, req *request, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(req.correlationID))
	if resp.IsFlexible() && req.key != kmsg.ApiVersions.Int16() {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
