// Package faultnet is the scenario runner's network: a TCP proxy on every
// directed link between two members (node A dials node B through the
// proxy of link A→B, given to A with `rewind serve --peer-via`), which can
// cut the link (both ways or one way), delay it (with jitter) or cap its
// bandwidth, without privileges.
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
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// Proxy forwards the connections made to its address to one target.
type Proxy struct {
	ln     net.Listener
	target string

	mu  sync.Mutex
	cut [2]bool // by Direction
	// heal is closed when a cut of that direction heals, replaced at
	// each cut.
	heal   [2]chan struct{}
	delay  time.Duration
	jitter time.Duration
	rate   int64 // bytes per second, each direction; 0: no cap
	rng    *rand.Rand
	conns  map[net.Conn]struct{}
	done   bool
	wg     sync.WaitGroup
}

// Direction is which way data flows on a connection through the proxy.
type Direction int

const (
	// Forward: from the dialer to the target (requests).
	Forward Direction = iota
	// Back: from the target to the dialer (answers).
	Back
)

// Listen starts a proxy to target on a free loopback port.
func Listen(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))}
	for d := range p.heal {
		p.heal[d] = make(chan struct{})
		close(p.heal[d]) // not cut
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address to dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is where the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// SetCut cuts the link both ways (true) or heals it (false).
func (p *Proxy) SetCut(cut bool) {
	p.SetCutDirection(Forward, cut)
	p.SetCutDirection(Back, cut)
}

// SetCutDirection cuts (or heals) one direction only: data flowing that
// way is held while the other way passes (one-way loss; TCP on top of it
// soon stalls both ways, as it would on a real network).
func (p *Proxy) SetCutDirection(d Direction, cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case cut && !p.cut[d]:
		p.heal[d] = make(chan struct{})
	case !cut && p.cut[d]:
		close(p.heal[d])
	}
	p.cut[d] = cut
}

// Cut reports whether the link is cut, either way.
func (p *Proxy) Cut() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut[Forward] || p.cut[Back]
}

// SetDelay holds every chunk of data for d plus a random part of jitter
// before passing it on (0: none), in both directions.
func (p *Proxy) SetDelay(d, jitter time.Duration) {
	p.mu.Lock()
	p.delay, p.jitter = d, jitter
	p.mu.Unlock()
}

// SetRate caps each direction of each connection at bytesPerSecond (0:
// no cap).
func (p *Proxy) SetRate(bytesPerSecond int64) {
	p.mu.Lock()
	p.rate = bytesPerSecond
	p.mu.Unlock()
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.done = true
	for c := range p.conns {
		c.Close()
	}
	for d := range p.cut {
		if p.cut[d] {
			close(p.heal[d]) // let waiters see the connections closed
			p.cut[d] = false
		}
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// pass waits while direction d of the link is cut and returns how long
// to hold a chunk of n bytes (delay, jitter and the rate cap); false once
// the proxy is closed.
func (p *Proxy) pass(d Direction, n int) (time.Duration, bool) {
	for {
		p.mu.Lock()
		cut, heal, done := p.cut[d], p.heal[d], p.done
		hold := p.delay
		if p.jitter > 0 {
			hold += time.Duration(p.rng.Int64N(int64(p.jitter)))
		}
		if p.rate > 0 {
			hold += time.Duration(int64(n) * int64(time.Second) / p.rate)
		}
		p.mu.Unlock()
		if done {
			return 0, false
		}
		if !cut {
			return hold, true
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
	if _, ok := p.pass(Forward, 0); !ok {
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
	go func() { defer wg.Done(); p.copy(out, in, Forward) }()
	go func() { defer wg.Done(); p.copy(in, out, Back) }()
	wg.Wait()
}

// copy passes data from src to dst (direction d) while the link lets it; it closes both
// ends when either fails, so the other direction ends too.
func (p *Proxy) copy(dst, src net.Conn, d Direction) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			hold, ok := p.pass(d, n)
			if !ok {
				return
			}
			if hold > 0 {
				time.Sleep(hold) // the injected latency or rate cap itself
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
