package fastpath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strings"
)

// Path and ContentType are those of the HTTP/1.1 request that carries a
// fast-path stream: a POST whose chunked body is the client's frames and
// whose chunked response, status 200, is the server's.
const (
	Path        = "/rewind.fastpath/v1"
	ContentType = "application/x-rewind-fastpath"
)

// Header is the response header by which a server says it serves the
// fast path: a client sends its first call to a server the usual way, and
// opens a stream once an answer carried it. A server without it (an older
// node, a proxy) is never sent a stream.
const Header = "Rewind-Fastpath"

// Kind is a frame's type.
type Kind byte

// The frame kinds.
const (
	// KindRequest (client to server): a call. Payload: the path, the
	// header block, the body.
	KindRequest Kind = 1
	// KindResponse (server to client): the answer to the request of the
	// same id. Payload: the status, the header block, the body.
	KindResponse Kind = 2
	// KindCancel (client to server): the caller of the request of the same
	// id gave up; the server cancels its context. No payload.
	KindCancel Kind = 3
	// KindGoAway (server to client): the server answers no request with an
	// id above the frame's id (which it did not run) and closes the
	// connection once it has answered the others. No payload.
	KindGoAway Kind = 4
	// KindPing (client to server): is the server there? The server
	// answers with KindPong of the same id. No payload.
	KindPing Kind = 5
	// KindPong (server to client): the answer to a ping. No payload.
	KindPong Kind = 6
)

// HeaderLen is the size of a frame's fixed header: the length of the rest
// (4 bytes), the id (4) and the kind (1), big-endian.
const HeaderLen = 9

// Limits of a header block, on both sides.
const (
	MaxHeaders     = 256
	MaxHeaderBytes = 64 << 10
)

// ErrMalformed is wrapped by every decoding error: the peer does not speak
// the protocol, and the connection must be closed.
var ErrMalformed = errors.New("fastpath: malformed frame")

// Frame is a decoded frame. Body aliases the buffer it was decoded from.
type Frame struct {
	ID     uint32
	Kind   Kind
	Path   string // KindRequest
	Status int    // KindResponse
	Header http.Header
	Body   []byte
}

// AppendRequest appends a request frame to b.
func AppendRequest(b []byte, id uint32, path string, h http.Header, body []byte) []byte {
	return appendFrame(b, id, KindRequest, func(b []byte) []byte {
		b = appendString(b, path)
		b = appendHeader(b, h)
		return append(b, body...)
	})
}

// AppendResponse appends a response frame to b.
func AppendResponse(b []byte, id uint32, status int, h http.Header, body []byte) []byte {
	return appendFrame(b, id, KindResponse, func(b []byte) []byte {
		b = binary.AppendUvarint(b, uint64(status))
		b = appendHeader(b, h)
		return append(b, body...)
	})
}

// AppendControl appends a frame without payload (KindCancel, KindGoAway,
// KindPing, KindPong).
func AppendControl(b []byte, id uint32, k Kind) []byte {
	return appendFrame(b, id, k, func(b []byte) []byte { return b })
}

func appendFrame(b []byte, id uint32, k Kind, payload func([]byte) []byte) []byte {
	start := len(b)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint32(b, id)
	b = append(b, byte(k))
	b = payload(b)
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendHeader(b []byte, h http.Header) []byte {
	n := 0
	for _, vs := range h {
		n += len(vs)
	}
	b = binary.AppendUvarint(b, uint64(n))
	for k, vs := range h {
		for _, v := range vs {
			b = appendString(b, k)
			b = appendString(b, v)
		}
	}
	return b
}

// ReadHeader reads a frame's fixed header from r: the payload's length,
// the id and the kind. A length over max is an error (ErrMalformed).
func ReadHeader(r io.Reader, buf *[HeaderLen]byte, max int) (n int, id uint32, k Kind, err error) {
	if _, err := io.ReadFull(r, buf[:]); err != nil {
		return 0, 0, 0, err
	}
	l := binary.BigEndian.Uint32(buf[0:4])
	if l < 5 || uint64(l)-5 > uint64(max) {
		return 0, 0, 0, fmt.Errorf("%w: a frame of %d bytes (at most %d)", ErrMalformed, l, max+5)
	}
	return int(l) - 5, binary.BigEndian.Uint32(buf[4:8]), Kind(buf[8]), nil
}

// Decode decodes the payload p of a frame of kind k (read by ReadHeader).
// The frame's Body and header values alias p.
func Decode(id uint32, k Kind, p []byte) (Frame, error) {
	f := Frame{ID: id, Kind: k}
	var err error
	switch k {
	case KindRequest:
		if f.Path, p, err = readString(p); err != nil {
			return f, err
		}
	case KindResponse:
		s, n := binary.Uvarint(p)
		if n <= 0 || s < 100 || s > 999 {
			return f, fmt.Errorf("%w: bad status", ErrMalformed)
		}
		f.Status, p = int(s), p[n:]
	case KindCancel, KindGoAway, KindPing, KindPong:
		if len(p) != 0 {
			return f, fmt.Errorf("%w: a payload on a control frame", ErrMalformed)
		}
		return f, nil
	default:
		return f, fmt.Errorf("%w: unknown kind %d", ErrMalformed, k)
	}
	if f.Header, p, err = readHeader(p); err != nil {
		return f, err
	}
	f.Body = p
	return f, nil
}

func readString(p []byte) (string, []byte, error) {
	l, n := binary.Uvarint(p)
	if n <= 0 || l > uint64(len(p)-n) {
		return "", nil, fmt.Errorf("%w: truncated", ErrMalformed)
	}
	return string(p[n : n+int(l)]), p[n+int(l):], nil
}

func readHeader(p []byte) (http.Header, []byte, error) {
	c, n := binary.Uvarint(p)
	if n <= 0 || c > MaxHeaders {
		return nil, nil, fmt.Errorf("%w: bad header count", ErrMalformed)
	}
	p = p[n:]
	start := len(p)
	h := make(http.Header, c)
	for range c {
		var k, v string
		var err error
		if k, p, err = readString(p); err != nil {
			return nil, nil, err
		}
		if v, p, err = readString(p); err != nil {
			return nil, nil, err
		}
		if start-len(p) > MaxHeaderBytes {
			return nil, nil, fmt.Errorf("%w: headers over %d bytes", ErrMalformed, MaxHeaderBytes)
		}
		if !validName(k) || !validValue(v) {
			return nil, nil, fmt.Errorf("%w: invalid header field %q", ErrMalformed, k)
		}
		k = textproto.CanonicalMIMEHeaderKey(k)
		h[k] = append(h[k], v)
	}
	return h, p, nil
}

// validName reports whether k is an HTTP token (RFC 9110, 5.6.2).
func validName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// validValue reports whether v has no control character but tab.
func validValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
