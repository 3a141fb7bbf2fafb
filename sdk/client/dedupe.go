package client

// Deduper drops records a consumer has already seen, within a bounded
// window: delivery is at-least-once (retries, rebalances and replays
// re-deliver), and every record carries its idempotency key and message ID.
// A record is identified by its idempotency key when it has one (so a
// record published twice under the same key, outside the server's dedupe
// window, is still caught), else by its message ID. Not safe for
// concurrent use.
type Deduper struct {
	seen map[string]struct{}
	ring []string
	next int
}

// NewDeduper remembers the last window records (at least 1).
func NewDeduper(window int) *Deduper {
	window = max(window, 1)
	return &Deduper{seen: make(map[string]struct{}, window), ring: make([]string, window)}
}

// Seen reports whether r was seen within the window, and remembers it.
func (d *Deduper) Seen(r Record) bool {
	id := "m:" + r.MessageID
	if r.IdempotencyKey != "" {
		id = "k:" + r.IdempotencyKey
	}
	if _, ok := d.seen[id]; ok {
		return true
	}
	if old := d.ring[d.next]; old != "" {
		delete(d.seen, old)
	}
	d.ring[d.next] = id
	d.next = (d.next + 1) % len(d.ring)
	d.seen[id] = struct{}{}
	return false
}
