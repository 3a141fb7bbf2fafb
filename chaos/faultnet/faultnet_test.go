package faultnet

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, line string) {
	t.Helper()
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	got, err := r.ReadString('\n')
	if err != nil || got != line+"\n" {
		t.Fatalf("echo of %q: %q, %v", line, got, err)
	}
}

// TestCutStallsAndHealReleases: through the proxy data flows; while the
// link is cut nothing comes back, on an open connection or a new one; once
// healed what was held back arrives, in order, and the link works again.
func TestCutStallsAndHealReleases(t *testing.T) {
	p, err := Listen(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	roundTrip(t, c, r, "before")

	p.SetCut(true)
	if _, err := c.Write([]byte("held\n")); err != nil {
		t.Fatal(err)
	}
	fresh, err := net.Dial("tcp", p.Addr()) // accepted, not passed on
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if _, err := fresh.Write([]byte("fresh\n")); err != nil {
		t.Fatal(err)
	}
	// Nothing can come back while the link is cut: a read that times out
	// is the only possible outcome, however long the deadline.
	for _, conn := range []net.Conn{c, fresh} {
		conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		var b [1]byte
		if n, err := conn.Read(b[:]); n != 0 || err == nil {
			t.Fatalf("read %d bytes through a cut link", n)
		}
		conn.SetReadDeadline(time.Time{})
	}
	c.Close()
	c, err = net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	p.SetCut(false)
	fr := bufio.NewReader(fresh)
	if got, err := fr.ReadString('\n'); err != nil || got != "fresh\n" {
		t.Fatalf("after the heal, the connection made during the cut got %q, %v", got, err)
	}
	roundTrip(t, c, bufio.NewReader(c), "after")
}

// TestCloseEndsConnectionsHeldByACut: closing a proxy whose link is cut
// ends its connections instead of leaving them stalled.
func TestCloseEndsConnectionsHeldByACut(t *testing.T) {
	p, err := Listen(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	roundTrip(t, c, r, "x")
	p.SetCut(true)
	c.Write([]byte("y\n"))
	p.Close()
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("a connection stayed open after the proxy closed")
	}
}
