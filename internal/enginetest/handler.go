package enginetest

import (
	"net"
	"net/http"
	"testing"
)

// ServeHandler serves h on loopback with the HTTP server Rewind serves
// with (engine.HTTPConfig.Server: HTTP/1.1 and h2c, the same limits) until
// the test's end, and returns its base URL (http://127.0.0.1:PORT). It is
// for a fake node: handlers a test writes to refuse, hint or fail the way
// a real node might. WithListener, WithAddr and WithHTTP apply.
func ServeHandler(tb testing.TB, h http.Handler, opts ...Option) string {
	tb.Helper()
	o := collect(opts)
	ln, err := o.listen()
	if err != nil {
		tb.Fatal(err)
	}
	srv := o.http.Server(h)
	go srv.Serve(o.http.Listener(ln))
	tb.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// Listen opens a TCP listener on a free loopback port, closed at the
// test's end unless handed to WithListener first.
func Listen(tb testing.TB) net.Listener {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	return ln
}

// FreeAddr returns a 127.0.0.1 address whose port nothing listens on now,
// for a process that must be told its address before it listens (rewind
// serve --listen). Another process may take the port meanwhile: a process
// node's start checks that the node answering is its own (StartProcess).
func FreeAddr(tb testing.TB) string { return FreeAddrs(tb, 1)[0] }

// FreeAddrs returns n distinct free loopback addresses: it holds every
// listener open until all are chosen (one at a time, the kernel may hand
// out a port just released again: two members got one address on a busy
// machine).
func FreeAddrs(tb testing.TB, n int) []string {
	tb.Helper()
	var out []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		defer ln.Close()
		out = append(out, ln.Addr().String())
	}
	return out
}
