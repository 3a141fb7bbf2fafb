package enginetest

import (
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
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
// machine). The ports are below the kernel's range of ephemeral ports
// where it can: a port from that range, released, was taken as the local
// port of some outgoing connection before the server bound it ("address
// already in use" in CI, with many connections open).
func FreeAddrs(tb testing.TB, n int) []string {
	tb.Helper()
	var out []string
	low := ephemeralLow()
	for range n {
		ln, err := listenBelow(low)
		if err != nil {
			tb.Fatal(err)
		}
		defer ln.Close()
		out = append(out, ln.Addr().String())
	}
	return out
}

// listenBelow listens on a random free loopback port from 10000 up to
// low, or on any port (the kernel's choice) when low leaves no room or
// 100 tries found none free.
func listenBelow(low int) (net.Listener, error) {
	const first = 10000
	if low > first+1000 {
		for range 100 {
			port := first + rand.IntN(low-first)
			if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
				return ln, nil
			}
		}
	}
	return net.Listen("tcp", "127.0.0.1:0")
}

// ephemeralLow returns the first port of the kernel's ephemeral range
// (Linux: /proc/sys/net/ipv4/ip_local_port_range), 0 if unknown.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return low
}
