// Package httpedge guards a node's HTTP port against slow, idle and
// foreign clients (issue 24): connection caps (listener.go), deadlines and
// a global budget for request bodies (body.go), the Host check against DNS
// rebinding (host.go), and the counters of what they refused (stats.go).
// It also serves the unary fast path (fastpath.go; the protocol is
// sdk/client/fastpath's): calls as frames on one HTTP/1.1 stream, each run
// through the node's handler as the request it describes, under the same
// body budget. engine.HTTPConfig composes them.
package httpedge

// Listener caps the connections a listener keeps open: in all,
// and from one source address. A connection beyond either cap is closed as
// soon as it is accepted, before a byte is read from it, and counted; the
// listener goes on accepting. A node whose descriptors all went to idle
// connections answers nothing, its members included (issue 24: 1,009 idle
// keep-alive connections exhausted a 1,024-descriptor limit), so the caps
// keep descriptors for the store, the members and well-behaved clients.
//
// The caps count TCP connections: wrap the TCP listener, then TLS over it,
// so a refused connection costs no handshake.

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// ConnLimits sets the caps. Zero or negative: no cap.
type ConnLimits struct {
	// Max is the most connections open at once.
	Max int
	// PerSource is the most connections open at once from one source: one
	// IPv4 address, or one IPv6 /64 (a host's usual share of addresses).
	PerSource int
}

// Stats counts what a Listener did since it was made.
type Stats struct {
	// Open is the connections open now.
	Open int64
	// RefusedTotal and RefusedPerSource count the connections closed at
	// accept for the global and for the per-source cap.
	RefusedTotal, RefusedPerSource uint64
}

// Listener is a net.Listener with caps. It is safe for concurrent use.
type Listener struct {
	net.Listener
	cfg ConnLimits
	mu  struct {
		sync.Mutex
		open  int
		bySrc map[netip.Prefix]int
	}
	refusedTotal, refusedSource atomic.Uint64
}

// NewListener wraps ln with the caps of cfg.
func NewListener(ln net.Listener, cfg ConnLimits) *Listener {
	l := &Listener{Listener: ln, cfg: cfg}
	l.mu.bySrc = map[netip.Prefix]int{}
	return l
}

// Accept returns the next connection within the caps; connections over a
// cap are closed and counted in between.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := Source(c.RemoteAddr())
		if ok := l.take(src); !ok {
			_ = c.Close()
			continue
		}
		return &conn{Conn: c, l: l, src: src}, nil
	}
}

// take counts a new connection from src, or refuses it.
func (l *Listener) take(src netip.Prefix) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cfg.Max > 0 && l.mu.open >= l.cfg.Max {
		l.refusedTotal.Add(1)
		counters.connsRefusedTotal.Add(1)
		return false
	}
	if l.cfg.PerSource > 0 && l.mu.bySrc[src] >= l.cfg.PerSource {
		l.refusedSource.Add(1)
		counters.connsRefusedSource.Add(1)
		return false
	}
	l.mu.open++
	l.mu.bySrc[src]++
	return true
}

func (l *Listener) release(src netip.Prefix) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.open--
	if l.mu.bySrc[src]--; l.mu.bySrc[src] <= 0 {
		delete(l.mu.bySrc, src) // the table holds open sources only
	}
}

// Stats returns the listener's counts.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	open := l.mu.open
	l.mu.Unlock()
	return Stats{Open: int64(open), RefusedTotal: l.refusedTotal.Load(), RefusedPerSource: l.refusedSource.Load()}
}

// Source is the key a connection from addr is counted under: its IPv4
// address, or its IPv6 /64. An address that is no IP (a pipe, a test
// listener) is the zero Prefix, one source for all.
func Source(addr net.Addr) netip.Prefix {
	var ip netip.Addr
	switch a := addr.(type) {
	case *net.TCPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	default:
		if ap, err := netip.ParseAddrPort(addr.String()); err == nil {
			ip = ap.Addr()
		}
	}
	return SourceOf(ip)
}

// SourceOf is Source for an address already parsed.
func SourceOf(ip netip.Addr) netip.Prefix {
	ip = ip.Unmap()
	if !ip.IsValid() {
		return netip.Prefix{}
	}
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}

// conn gives its slot back once, on the first Close.
type conn struct {
	net.Conn
	l    *Listener
	src  netip.Prefix
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.src) })
	return err
}
