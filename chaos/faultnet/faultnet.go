// Package faultnet is the scenario runner's network: a TCP proxy on every
// directed link between two members (node A dials node B through the
// proxy of link A→B, given to A with `rewind serve --peer-via`), which can
// cut the link or slow it down, without privileges.
//
// A cut stalls the link the way a blackhole route does: nothing passes in
// either direction, nothing is lost, and the connections stay open, so
// each end notices only by its own timeouts (raft heartbeats, HTTP/2
// pings); when the cut heals, what was held back flows again, as TCP would
// retransmit it. A connection made during a cut is accepted but not
// passed on until the cut heals (the dialer sees its handshake complete;
// its peer never answers).
package faultnet

import (
	"net"
	"sync"
	"time"
)

// Proxy forwards the connections made to its address to one target.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	delay time.Duration
	heal  chan struct{} // closed when a cut heals, replaced at each cut
	conns map[net.Conn]struct{}
	done  bool
	wg    sync.WaitGroup
}

// Listen starts a proxy to target on a free loopback port.
func Listen(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, heal: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.heal) // not cut
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address to dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is where the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// SetCut cuts the link (true) or heals it (false).
func (p *Proxy) SetCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case cut && !p.cut:
		p.heal = make(chan struct{})
	case !cut && p.cut:
		close(p.heal)
	}
	p.cut = cut
}

// Cut reports whether the link is cut.
func (p *Proxy) Cut() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut
}

// SetDelay holds every chunk of data for d before passing it on (0: none),
// in both directions.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.done = true
	for c := range p.conns {
		c.Close()
	}
	if p.cut {
		close(p.heal) // let waiters see the connections closed
		p.cut = false
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// pass waits while the link is cut and returns the delay to apply; false
// once the proxy is closed.
func (p *Proxy) pass() (time.Duration, bool) {
	for {
		p.mu.Lock()
		cut, heal, delay, done := p.cut, p.heal, p.delay, p.done
		p.mu.Unlock()
		if done {
			return 0, false
		}
		if !cut {
			return delay, true
		}
		<-heal
	}
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(c)
		}()
	}
}

// serve passes one connection on to the target once the link lets it.
func (p *Proxy) serve(in net.Conn) {
	defer p.untrack(in)
	if _, ok := p.pass(); !ok {
		return
	}
	out, err := net.DialTimeout("tcp", p.target, 3*time.Second)
	if err != nil {
		return // the dialer sees its connection closed, as a refused one
	}
	if !p.track(out) {
		return
	}
	defer p.untrack(out)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.copy(out, in) }()
	go func() { defer wg.Done(); p.copy(in, out) }()
	wg.Wait()
}

// copy passes data from src to dst while the link lets it; it closes both
// ends when either fails, so the other direction ends too.
func (p *Proxy) copy(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			delay, ok := p.pass()
			if !ok {
				return
			}
			if delay > 0 {
				time.Sleep(delay) // the injected latency itself
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a failure: either way this direction is over
		}
	}
}
