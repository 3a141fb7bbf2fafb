package api

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"connectrpc.com/connect"
)

// envelopePrefix is the size of the prefix (a flags byte and a 4-byte
// length) before each message of the gRPC, gRPC-web and Connect streaming
// protocols.
const envelopePrefix = 5

// limitBody refuses a request whose body is over max bytes (one message of
// at most max bytes, and its envelope prefix) before the Connect handler
// reads it, with InvalidArgument: an oversized request is the client's
// mistake, not a rate limit, which is how clients read the
// ResourceExhausted (HTTP 429) that the Connect library answers. Nothing
// beyond the limit is read or buffered:
//
//  1. a Content-Length over the limit is refused before any body byte is
//     read;
//  2. an enveloped message whose prefix declares more than max bytes is
//     refused after those 5 bytes;
//  3. any other body is cut off once it passes the limit, and refused.
//
// A request that is no RPC (so no Connect error can be written) gets HTTP
// 413. Over HTTP/1 the connection is closed after the answer, since the
// rest of the body is never read. See docs/design.md §4.
func limitBody(h http.Handler, max int64) http.Handler {
	ew := connect.NewErrorWriter()
	refuse := func(w http.ResponseWriter, r *http.Request, what string) {
		if r.ProtoMajor == 1 {
			w.Header().Set("Connection", "close")
		}
		err := connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(
			"request too large: %s, over the limit of %d bytes a request message may take", what, max))
		if !ew.IsSupported(r) {
			http.Error(w, err.Message(), http.StatusRequestEntityTooLarge)
			return
		}
		ew.Write(w, r, err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit := max
		enveloped := isEnveloped(r.Header.Get("Content-Type"))
		if enveloped {
			limit += envelopePrefix
		}
		if r.ContentLength > limit {
			refuse(w, r, fmt.Sprintf("a body of %d bytes", r.ContentLength))
			return
		}
		body := &cappedBody{r: http.MaxBytesReader(w, r.Body, limit), c: r.Body, max: max}
		r.Body = body
		if enveloped {
			var prefix [envelopePrefix]byte
			n, err := io.ReadFull(body, prefix[:])
			if n == envelopePrefix {
				if size := binary.BigEndian.Uint32(prefix[1:]); int64(size) > max {
					refuse(w, r, fmt.Sprintf("a message of %d bytes", size))
					return
				}
			}
			// Whatever was read (all, some or none of the prefix, or an
			// error) is replayed to the handler, which reports it.
			rest := io.Reader(body)
			if err != nil {
				rest = &errReader{err}
			}
			r.Body = readCloser{io.MultiReader(bytes.NewReader(prefix[:n]), rest), body}
		}
		h.ServeHTTP(w, r)
	})
}

// isEnveloped reports whether a request body of this content type frames
// its messages with an envelope prefix (gRPC, gRPC-web, Connect streaming);
// a Connect unary body is the bare message.
func isEnveloped(contentType string) bool {
	if strings.HasPrefix(contentType, "application/grpc-web-text") {
		return false // base64 text, which the handlers refuse anyway
	}
	return strings.HasPrefix(contentType, "application/grpc") || strings.HasPrefix(contentType, "application/connect+")
}

// cappedBody reads a request body through http.MaxBytesReader (which also
// tells the HTTP/1 server to close the connection, so the rest is never
// read) and turns its error into an InvalidArgument Connect error, which
// the Connect handler returns as it is.
type cappedBody struct {
	r   io.Reader
	c   io.Closer
	max int64
	hit bool
}

func (b *cappedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	var mbe *http.MaxBytesError
	if err != nil && errors.As(err, &mbe) {
		b.hit = true
		err = connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(
			"request too large: the body goes past the limit of %d bytes a request message may take", b.max))
	}
	return n, err
}

// Close closes the body unless it went past the limit: closing an HTTP/1
// body reads up to 256 KiB more of it, which would hold the answer back
// behind a client that stopped sending. The server closes the connection
// after the answer instead.
func (b *cappedBody) Close() error {
	if b.hit {
		return nil
	}
	return b.c.Close()
}

type readCloser struct {
	io.Reader
	io.Closer
}

type errReader struct{ err error }

func (e *errReader) Read([]byte) (int, error) { return 0, e.err }
