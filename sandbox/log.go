package sandbox

import (
	"bytes"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
)

// guestLog passes a module's log lines (rewind.log, stdout, stderr) to the
// server log: truncated, made printable, and rate-limited by a token bucket
// per module, so a flooding guest costs the server a counter, not a disk.
type guestLog struct {
	log      hclog.Logger
	rate     float64 // tokens per second
	burst    float64
	maxBytes int
	now      func() time.Time

	mu struct {
		sync.Mutex
		tokens  float64
		last    time.Time
		dropped uint64
	}
}

func newGuestLog(log hclog.Logger, lim Limits, now func() time.Time) *guestLog {
	g := &guestLog{log: log, rate: float64(lim.LogLinesPerSecond), maxBytes: lim.MaxLogLineBytes, now: now}
	g.burst = 10 * g.rate
	g.mu.tokens = g.burst
	return g
}

// line logs one guest line (or counts it as dropped).
func (g *guestLog) line(stream string, p []byte) {
	g.mu.Lock()
	now := g.now()
	if !g.mu.last.IsZero() {
		g.mu.tokens = min(g.burst, g.mu.tokens+now.Sub(g.mu.last).Seconds()*g.rate)
	}
	g.mu.last = now
	if g.mu.tokens < 1 {
		g.mu.dropped++
		g.mu.Unlock()
		return
	}
	g.mu.tokens--
	dropped := g.mu.dropped
	g.mu.dropped = 0
	g.mu.Unlock()
	truncated := len(p) > g.maxBytes
	if truncated {
		p = p[:g.maxBytes]
	}
	args := []any{"stream", stream, "line", printable(p)}
	if truncated {
		args = append(args, "truncated", true)
	}
	if dropped > 0 {
		args = append(args, "dropped-before", dropped)
	}
	g.log.Info("guest log", args...)
}

// printable returns p as a string with invalid UTF-8 and control characters
// escaped.
func printable(p []byte) string {
	clean := utf8.Valid(p)
	for _, c := range p {
		if c < 0x20 && c != '\t' || c == 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return string(p)
	}
	q := strconv.Quote(string(p))
	return q[1 : len(q)-1]
}

// lineWriter turns a guest's stdout or stderr into lines for guestLog. It
// holds at most maxBytes of an unfinished line.
type lineWriter struct {
	g      *guestLog
	stream string
	note   func([]byte) // sees every line, before rate limiting
	buf    []byte
}

func (w *lineWriter) line(p []byte) {
	if w.note != nil {
		w.note(p)
	}
	w.g.line(w.stream, p)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			room := w.g.maxBytes + 1 - len(w.buf)
			w.buf = append(w.buf, p[:max(0, min(len(p), room))]...)
			break
		}
		room := w.g.maxBytes + 1 - len(w.buf)
		w.buf = append(w.buf, p[:max(0, min(i, room))]...)
		w.line(w.buf)
		w.buf = w.buf[:0]
		p = p[i+1:]
	}
	return n, nil
}

// flush logs an unfinished line.
func (w *lineWriter) flush() {
	if len(w.buf) > 0 {
		w.line(w.buf)
		w.buf = w.buf[:0]
	}
}
