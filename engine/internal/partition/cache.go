package partition

import (
	"sort"
	"sync"
)

// Cache is the store-wide tail cache: the most recently applied batches of
// every partition, within a byte budget. Live subscribers read only from it.
// Eviction is first-in first-out across all partitions, because recency of
// append is what live readers need. Safe for concurrent use.
type Cache struct {
	mu struct {
		sync.Mutex
		max, bytes int64
		groups     map[uint64][]*Batch // per group, in offset order
		fifo       []cacheRef          // insertion order; head at fifoHead
		fifoHead   int
	}
}

type cacheRef struct {
	group uint64
	b     *Batch
}

// NewCache returns a cache holding at most maxBytes of batch data.
func NewCache(maxBytes int64) *Cache {
	c := &Cache{}
	c.mu.max = maxBytes
	c.mu.groups = make(map[uint64][]*Batch)
	return c
}

// Put adds b, the newest batch of group.
func (c *Cache) Put(group uint64, b *Batch) {
	size := b.size()
	c.mu.Lock()
	defer c.mu.Unlock()
	if size > c.mu.max {
		return
	}
	bs := c.mu.groups[group]
	if n := len(bs); n > 0 && bs[n-1].Base+uint64(bs[n-1].Span) != b.Base {
		// Not contiguous with what is cached (should not happen): start
		// over so Get never answers across a hole.
		c.dropLocked(group)
		bs = nil
	}
	c.mu.groups[group] = append(bs, b)
	c.mu.fifo = append(c.mu.fifo, cacheRef{group, b})
	c.mu.bytes += size
	for c.mu.bytes > c.mu.max && c.mu.fifoHead < len(c.mu.fifo) {
		ref := c.mu.fifo[c.mu.fifoHead]
		c.mu.fifo[c.mu.fifoHead] = cacheRef{}
		c.mu.fifoHead++
		if gs := c.mu.groups[ref.group]; len(gs) > 0 && gs[0] == ref.b {
			gs[0] = nil
			c.mu.groups[ref.group] = gs[1:]
			c.mu.bytes -= ref.b.size()
		}
	}
	if c.mu.fifoHead > len(c.mu.fifo)/2 && c.mu.fifoHead > 1024 {
		c.mu.fifo = append([]cacheRef(nil), c.mu.fifo[c.mu.fifoHead:]...)
		c.mu.fifoHead = 0
	}
}

// Get returns the cached batch of group containing offset, or nil.
func (c *Cache) Get(group, offset uint64) *Batch {
	c.mu.Lock()
	defer c.mu.Unlock()
	bs := c.mu.groups[group]
	if len(bs) == 0 || offset < bs[0].Base {
		return nil
	}
	i := sort.Search(len(bs), func(i int) bool { return bs[i].Base > offset }) - 1
	if b := bs[i]; offset < b.Base+uint64(b.Span) {
		return b
	}
	return nil
}

// Replace swaps the cached batch of group starting at b.Base for b (a
// compacted version), if it is cached.
func (c *Cache) Replace(group uint64, b *Batch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	bs := c.mu.groups[group]
	i := sort.Search(len(bs), func(i int) bool { return bs[i].Base >= b.Base })
	if i < len(bs) && bs[i].Base == b.Base && bs[i].Span == b.Span {
		c.mu.bytes += b.size() - bs[i].size()
		bs[i] = b
	}
}

// DropBelow forgets group's batches that end at or below offset.
func (c *Cache) DropBelow(group, offset uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	bs := c.mu.groups[group]
	n := 0
	for n < len(bs) && bs[n].End() <= offset {
		c.mu.bytes -= bs[n].size()
		bs[n] = nil
		n++
	}
	if n > 0 {
		c.mu.groups[group] = bs[n:]
	}
}

// Drop forgets every batch of group.
func (c *Cache) Drop(group uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(group)
}

func (c *Cache) dropLocked(group uint64) {
	for _, b := range c.mu.groups[group] {
		c.mu.bytes -= b.size()
	}
	delete(c.mu.groups, group)
	// Stale fifo refs are skipped at eviction (their batch is no longer
	// the group's front).
}

// Bytes returns the bytes cached.
func (c *Cache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.bytes
}
