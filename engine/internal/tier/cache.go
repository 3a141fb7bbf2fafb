package tier

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/rewind-io/rewind/engine/internal/record"
)

// Reading segments through a cache.
//
// A replay of tiered history reads a segment's batches in order; a range
// read per batch would pay the store's latency per batch (S3: tens of
// milliseconds). So reads go by window: the batches that start within one
// aligned WindowBytes span of the segment's batch area come in one range
// read and are checked batch by batch. Windows are aligned (window k holds
// the batches starting in [k·W, (k+1)·W) past the magic), so every reader
// of a segment asks for the same windows, whatever offset it started at,
// and they can be shared:
//
//  1. A Cache keeps recently read windows and opened segments (footer and
//     index, parsed) in memory, least recently used out first, within
//     MaxBytes. One Cache serves a node.
//  2. Concurrent requests for a part being read wait for that one read
//     instead of reading it again.
//  3. A part that failed is never kept: a store error, a missing object, or
//     a window with any batch failing its check (its good batches are
//     still returned to the readers that asked, the bad ones as errors).
//     The next request reads the store again.
//
// A reader moving into a window asks for the next one to be read in the
// background (Prefetch), so on a store with latency (S3) the next range
// read overlaps the delivery of the current window. At most
// CacheConfig.Prefetch such reads run at once per cache (further requests
// are dropped, never queued), and what they read is kept like any other
// read; Close cancels them and waits for them.
//
// A reader holds the window it is reading (Window) until it moves past it,
// so a full cache costs it no extra reads, and memory is bounded by
// MaxBytes plus, per reader, one window (at most WindowBytes plus one
// batch) and one segment index.

// Defaults of CacheConfig.
const (
	DefaultCacheBytes  = 64 << 20
	DefaultWindowBytes = 1 << 20
	DefaultPrefetch    = 8
)

// CacheConfig configures a Cache.
type CacheConfig struct {
	// MaxBytes bounds the parts the cache keeps: windows by their batch
	// bytes, opened segments by their index. Default DefaultCacheBytes
	// (64 MiB); negative: nothing is kept (concurrent reads of the same
	// part are still shared).
	MaxBytes int64
	// WindowBytes is the span of one window, so about the bytes of one
	// range read (at least one batch). Default DefaultWindowBytes
	// (1 MiB).
	WindowBytes int64
	// Prefetch bounds the background reads of next windows running at
	// once. Default DefaultPrefetch (8); negative: none (nor when
	// MaxBytes is negative: nothing would keep what they read).
	Prefetch int
}

// CacheStats counts a cache's work since it was made.
type CacheStats struct {
	// Hits are lookups answered from memory: a kept part, or a read
	// another request had in flight (Shared of them). Misses are lookups
	// that read the store. Hits/(Hits+Misses) is the hit ratio.
	Hits, Shared, Misses uint64
	// Prefetches are windows read ahead of a reader (Prefetch); they are
	// not lookups, so neither hits nor misses.
	Prefetches uint64
	// ReadBytes are the bytes read from the store (windows and indexes).
	ReadBytes uint64
	// Evictions are parts dropped to stay within MaxBytes.
	Evictions uint64
	// Bytes and Parts are what the cache keeps now.
	Bytes int64
	Parts int
}

// Cache keeps recently read segment parts in memory. It is safe for
// concurrent use.
type Cache struct {
	cfg                                                    CacheConfig
	hits, shared, misses, prefetches, readBytes, evictions atomic.Uint64
	// ctx is the prefetches' context; Close cancels it and waits for wg.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     struct {
		sync.Mutex
		parts       map[partKey]*part // kept and in flight
		lru         list.List         // kept parts (*part), most recent first
		bytes       int64             // Invariant: bytes <= max(cfg.MaxBytes, 0)
		prefetching int               // Invariant: prefetching <= cfg.Prefetch
		closed      bool
	}
}

// partKey names a part: an object's index (window -1) or one of its
// windows.
type partKey struct {
	name   string
	window int64
}

// part is a cached or in-flight part. Its fields other than elem are set
// once, before done is closed.
type part struct {
	key  partKey
	done chan struct{}
	seg  *Segment
	win  *Window
	err  error
	size int64
	elem *list.Element // in the LRU while kept; guarded by Cache.mu
}

// NewCache returns a cache configured by cfg (zero fields take defaults).
func NewCache(cfg CacheConfig) *Cache {
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultCacheBytes
	}
	if cfg.WindowBytes <= 0 {
		cfg.WindowBytes = DefaultWindowBytes
	}
	if cfg.Prefetch == 0 {
		cfg.Prefetch = DefaultPrefetch
	}
	if cfg.MaxBytes < 0 {
		cfg.Prefetch = -1
	}
	c := &Cache{cfg: cfg}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.mu.parts = map[partKey]*part{}
	return c
}

// Close cancels the prefetches in flight and waits for them; none start
// after it. Reads through the cache go on working.
func (c *Cache) Close() {
	c.mu.Lock()
	c.mu.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

// Prefetch reads the window of seg holding its i-th batch in the
// background, unless it is kept or being read, i is past the segment's
// end, or CacheConfig.Prefetch reads already run. Errors are dropped: the
// reader that needs the window reads it again.
func (c *Cache) Prefetch(st Store, seg *Segment, i int) {
	if c.cfg.Prefetch <= 0 || i >= len(seg.Entries) {
		return
	}
	w := c.windowOf(seg.Entries[i])
	k := partKey{seg.Name, w}
	c.mu.Lock()
	if c.mu.closed || c.mu.parts[k] != nil || c.mu.prefetching >= c.cfg.Prefetch {
		c.mu.Unlock()
		return
	}
	// In flight from now: a reader asking for it waits for this read.
	p := &part{key: k, done: make(chan struct{})}
	c.mu.parts[k] = p
	c.mu.prefetching++
	c.wg.Add(1)
	c.mu.Unlock()
	c.prefetches.Add(1)
	go func() {
		defer c.wg.Done()
		_ = c.fill(p, c.loadWindow(c.ctx, st, seg, w))
		c.mu.Lock()
		c.mu.prefetching--
		c.mu.Unlock()
	}()
}

// Stats returns the cache's counters and what it keeps now.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	b, n := c.mu.bytes, c.mu.lru.Len()
	c.mu.Unlock()
	return CacheStats{Hits: c.hits.Load(), Shared: c.shared.Load(), Misses: c.misses.Load(),
		Prefetches: c.prefetches.Load(), ReadBytes: c.readBytes.Load(), Evictions: c.evictions.Load(), Bytes: b, Parts: n}
}

// Segment opens object name of size bytes holding count batches (as the
// manifest records them), from memory or by one range read
// (OpenSegmentAt). Errors name the object.
func (c *Cache) Segment(ctx context.Context, st Store, name string, size int64, count uint32) (*Segment, error) {
	p, err := c.get(ctx, partKey{name, -1}, func(p *part) (bool, error) {
		seg, err := OpenSegmentAt(ctx, st, name, size, count)
		if err != nil {
			return false, err
		}
		c.readBytes.Add(uint64(int64(count)*entrySize + footerSize))
		// Parsed entries are 40 bytes in memory.
		p.seg, p.size = seg, int64(len(seg.Entries))*40+int64(len(name))+128
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return p.seg, nil
}

// Window returns the window of seg holding its i-th batch, from memory or
// by one range read. An error here is the read's (the store's, or a
// missing object); a batch that failed its check is reported by the
// window's Batch.
func (c *Cache) Window(ctx context.Context, st Store, seg *Segment, i int) (*Window, error) {
	k := c.windowOf(seg.Entries[i])
	p, err := c.get(ctx, partKey{seg.Name, k}, c.loadWindow(ctx, st, seg, k))
	if err != nil {
		return nil, fmt.Errorf("object %s, offset %d: %w", seg.Name, seg.Entries[i].Base, err)
	}
	return p.win, nil
}

// loadWindow returns the loader of window k of seg: kept only if every
// batch passed its check.
func (c *Cache) loadWindow(ctx context.Context, st Store, seg *Segment, k int64) func(*part) (bool, error) {
	return func(p *part) (bool, error) {
		w, err := c.readWindow(ctx, st, seg, k)
		if err != nil {
			return false, err
		}
		p.win, p.size = w, w.size
		return w.errs == nil, nil
	}
}

// windowOf returns the number of the window holding entry e.
func (c *Cache) windowOf(e Entry) int64 {
	return int64(e.Pos-uint64(len(magic))) / c.cfg.WindowBytes
}

// readWindow reads window k of seg and checks each of its batches.
func (c *Cache) readWindow(ctx context.Context, st Store, seg *Segment, k int64) (*Window, error) {
	es := seg.Entries
	lo := sort.Search(len(es), func(j int) bool { return c.windowOf(es[j]) >= k })
	hi := sort.Search(len(es), func(j int) bool { return c.windowOf(es[j]) > k })
	pos, end := es[lo].Pos, es[hi-1].Pos+uint64(es[hi-1].Len)
	data, err := st.ReadRange(ctx, seg.Name, int64(pos), int64(end-pos))
	if err != nil {
		return nil, err
	}
	c.readBytes.Add(uint64(len(data)))
	w := &Window{name: seg.Name, first: lo, batches: make([]record.Batch, hi-lo), size: int64(len(data)) + 64*int64(hi-lo)}
	for j := lo; j < hi; j++ {
		e := es[j]
		a := e.Pos - pos
		b, err := CheckBatch(e, data[a:a+uint64(e.Len):a+uint64(e.Len)])
		if err != nil {
			if w.errs == nil {
				w.errs = make([]error, hi-lo)
			}
			w.errs[j-lo] = fmt.Errorf("object %s: %w", seg.Name, err)
			continue
		}
		w.batches[j-lo] = b
	}
	return w, nil
}

// get returns the part named k: kept, being read by another request (it
// waits for that read), or read now by load, which fills in the part and
// says whether it may be kept.
func (c *Cache) get(ctx context.Context, k partKey, load func(*part) (bool, error)) (*part, error) {
	for {
		c.mu.Lock()
		if p := c.mu.parts[k]; p != nil {
			if p.elem != nil {
				c.mu.lru.MoveToFront(p.elem)
				c.mu.Unlock()
				c.hits.Add(1)
				return p, nil
			}
			c.mu.Unlock()
			c.hits.Add(1)
			c.shared.Add(1)
			select {
			case <-p.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			// The reader's context ended its read: ours may go on.
			if isContextErr(p.err) && ctx.Err() == nil {
				continue
			}
			return p, p.err
		}
		p := &part{key: k, done: make(chan struct{})}
		c.mu.parts[k] = p
		c.mu.Unlock()
		c.misses.Add(1)
		return p, c.fill(p, load)
	}
}

// fill reads in-flight part p with load, keeps or forgets it, and wakes
// the requests waiting for it.
func (c *Cache) fill(p *part, load func(*part) (bool, error)) error {
	keep, err := load(p)
	p.err = err
	c.settle(p, keep && err == nil)
	close(p.done)
	return err
}

// settle keeps a part just read, evicting the least recently used parts to
// make room, or forgets it.
func (c *Cache) settle(p *part, keep bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !keep || p.size > c.cfg.MaxBytes {
		delete(c.mu.parts, p.key)
		return
	}
	for c.mu.bytes+p.size > c.cfg.MaxBytes {
		old := c.mu.lru.Remove(c.mu.lru.Back()).(*part)
		old.elem = nil
		delete(c.mu.parts, old.key)
		c.mu.bytes -= old.size
		c.evictions.Add(1)
	}
	p.elem = c.mu.lru.PushFront(p)
	c.mu.bytes += p.size
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// Window is a run of consecutive batches of one segment, read together
// and checked batch by batch. It is never modified; it may be shared by
// many readers.
type Window struct {
	name    string
	first   int            // index of its first batch in the segment
	batches []record.Batch // by index - first
	errs    []error        // nil when every batch passed its check
	size    int64
}

// End is the index of the segment's first batch after the window.
func (w *Window) End() int { return w.first + len(w.batches) }

// Holds reports whether the window holds batch i of object name.
func (w *Window) Holds(name string, i int) bool {
	return w != nil && w.name == name && i >= w.first && i < w.first+len(w.batches)
}

// Batch returns the segment's i-th batch (which the window must hold), or
// the error its check found (ErrCorrupt, naming the object and offset).
func (w *Window) Batch(i int) (record.Batch, error) {
	if w.errs != nil && w.errs[i-w.first] != nil {
		return record.Batch{}, w.errs[i-w.first]
	}
	return w.batches[i-w.first], nil
}
