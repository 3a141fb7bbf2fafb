package tlsconf

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"time"
)

// NewListener is tls.NewListener, with one courtesy: a client that speaks
// plaintext HTTP/2 to the TLS port (an http:// address) gets an HTTP/2
// GOAWAY that says so before the connection closes, so its error reads
// "this port speaks TLS" rather than a bare broken connection. (Go's
// server already answers a plaintext HTTP/1 request with 400 "Client sent
// an HTTP request to an HTTPS server".)
func NewListener(inner net.Listener, cfg *tls.Config) net.Listener {
	return &listener{Listener: inner, cfg: cfg}
}

type listener struct {
	net.Listener
	cfg *tls.Config
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return tls.Server(&sniffConn{Conn: c}, l.cfg), nil
}

// h2Preface starts every HTTP/2 connection with prior knowledge.
var h2Preface = []byte("PRI * HTTP/2.0\r\n")

// plaintextDrain bounds how long a plaintext client's connection is read
// (and discarded) after its GOAWAY, until the client closes it.
const plaintextDrain = 2 * time.Second

// PlaintextHint is the GOAWAY debug text a plaintext HTTP/2 client gets.
const PlaintextHint = "this port speaks TLS: use https:// (rewind: --tls-ca)"

// sniffConn answers a plaintext HTTP/2 preface on its first read.
type sniffConn struct {
	net.Conn
	once sync.Once
}

func (c *sniffConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.once.Do(func() {
		if n > 0 && b[0] != 0x16 && bytes.HasPrefix(h2Preface, b[:min(n, len(h2Preface))]) {
			_, _ = c.Conn.Write(goAway(PlaintextHint))
			// Make sure the client reads it: end our side (FIN after the
			// GOAWAY), then read what the client still sends before the
			// connection closes. Closing with unread input would send a
			// reset, which can discard the GOAWAY before the client reads
			// it.
			if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite()
			}
			_ = c.Conn.SetReadDeadline(time.Now().Add(plaintextDrain))
			_, _ = io.Copy(io.Discard, c.Conn)
		}
	})
	return n, err
}

// goAway encodes an empty SETTINGS frame and a GOAWAY (no stream,
// PROTOCOL_ERROR) carrying debug.
func goAway(debug string) []byte {
	frame := func(typ byte, payload []byte) []byte {
		h := []byte{byte(len(payload) >> 16), byte(len(payload) >> 8), byte(len(payload)), typ, 0, 0, 0, 0, 0}
		return append(h, payload...)
	}
	p := binary.BigEndian.AppendUint32(nil, 0) // last stream id
	p = binary.BigEndian.AppendUint32(p, 1)    // PROTOCOL_ERROR
	p = append(p, debug...)
	return append(frame(0x4, nil), frame(0x7, p)...)
}
