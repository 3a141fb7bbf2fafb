package faultnet

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string { return recordingEchoServer(t, nil) }

// recordingEchoServer is echoServer that also sends every line it received
// to got (nil: nowhere).
func recordingEchoServer(t *testing.T, got chan<- string) string {
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
					if got != nil {
						got <- line
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

// TestOneWayCut: with the forward direction cut, what the dialer sends is
// held; with only the back direction cut, the target receives it but its
// answer is held. Healing releases both, in order.
func TestOneWayCut(t *testing.T) {
	got := make(chan string, 16) // what the target received
	p, err := Listen(recordingEchoServer(t, got))
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
	roundTrip(t, c, r, "warm")
	<-got

	p.SetCutDirection(Back, true)
	c.Write([]byte("answer held\n"))
	if line := <-got; line != "answer held\n" { // the request passes
		t.Fatalf("target got %q", line)
	}
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("an answer came back through a cut back direction")
	}
	c.SetReadDeadline(time.Time{})
	p.SetCutDirection(Back, false)
	if line, err := r.ReadString('\n'); err != nil || line != "answer held\n" {
		t.Fatalf("after the heal: %q, %v", line, err)
	}

	p.SetCutDirection(Forward, true)
	c.Write([]byte("request held\n"))
	select {
	case line := <-got:
		t.Fatalf("the target got %q through a cut forward direction", line)
	case <-time.After(100 * time.Millisecond): // nothing can arrive: the outcome does not depend on the wait
	}
	p.SetCutDirection(Forward, false)
	if line := <-got; line != "request held\n" {
		t.Fatalf("after the heal the target got %q", line)
	}
}

// TestDelayAndRateKeepTheData: a delayed, jittered and capped link still
// passes every byte, in order.
func TestDelayAndRateKeepTheData(t *testing.T) {
	p, err := Listen(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.SetDelay(time.Millisecond, time.Millisecond)
	p.SetRate(1 << 20)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	for i := range 20 {
		roundTrip(t, c, r, strings.Repeat(string(rune('a'+i)), 1000))
	}
}
