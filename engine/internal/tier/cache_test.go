package tier

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingStore counts the range reads and size lookups of a file store,
// and can hold range reads until released.
type countingStore struct {
	*FileStore
	reads, sizes atomic.Int64
	gate         chan struct{} // when set, range reads wait for it to close
}

func (s *countingStore) ReadRange(ctx context.Context, name string, off, n int64) ([]byte, error) {
	s.reads.Add(1)
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.FileStore.ReadRange(ctx, name, off, n)
}

func (s *countingStore) Size(ctx context.Context, name string) (int64, error) {
	s.sizes.Add(1)
	return s.FileStore.Size(ctx, name)
}

// stored puts a segment of n batches of 3 records from offset base into a
// counting file store and returns its object, name and input batches.
func stored(t *testing.T, base uint64, n int) (*countingStore, []byte, string, []Batch) {
	t.Helper()
	fs, err := NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := &countingStore{FileStore: fs}
	in := batches(t, base, n, 3)
	obj, f, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	name := Name(1, 0, f, obj)
	if err := fs.Put(context.Background(), name, obj); err != nil {
		t.Fatal(err)
	}
	return st, obj, name, in
}

// TestCacheReadsByWindow: opening a segment whose size and count are known
// is one range read (no size lookup), and its batches come a window at a
// time: one range read per aligned window, each batch exactly as built.
// A seek is so at most one index read and one range read.
func TestCacheReadsByWindow(t *testing.T) {
	ctx := context.Background()
	st, obj, name, in := stored(t, 100, 20)
	window := int64(3 * len(in[0].Data)) // about three batches
	c := NewCache(CacheConfig{WindowBytes: window})
	seg, err := c.Segment(ctx, st, name, int64(len(obj)), 20)
	if err != nil {
		t.Fatal(err)
	}
	if st.reads.Load() != 1 || st.sizes.Load() != 0 {
		t.Fatalf("opening: %d range reads, %d size lookups; want 1 and 0", st.reads.Load(), st.sizes.Load())
	}
	w, err := c.Window(ctx, st, seg, 13) // a seek into the middle
	if err != nil {
		t.Fatal(err)
	}
	if st.reads.Load() != 2 {
		t.Fatalf("a seek took %d range reads, want 2 (index and window)", st.reads.Load())
	}
	if b, err := w.Batch(13); err != nil || !bytes.Equal(b.Bytes(), in[13].Data) {
		t.Fatalf("batch 13: %v", err)
	}
	windows := map[int64]bool{}
	var held *Window
	for i := range in {
		windows[c.windowOf(seg.Entries[i])] = true
		if !held.Holds(name, i) {
			if held, err = c.Window(ctx, st, seg, i); err != nil {
				t.Fatal(err)
			}
		}
		if b, err := held.Batch(i); err != nil || !bytes.Equal(b.Bytes(), in[i].Data) {
			t.Fatalf("batch %d: %v", i, err)
		}
	}
	if len(windows) < 5 {
		t.Fatalf("only %d windows of %d bytes over 20 batches", len(windows), window)
	}
	// Every window read once: the sequential pass found the seek's kept.
	if got := st.reads.Load(); got != int64(1+len(windows)) {
		t.Fatalf("%d range reads for %d windows and the index", got, len(windows))
	}
	s := c.Stats()
	if s.Misses != uint64(1+len(windows)) || s.Hits != 1 || s.ReadBytes == 0 || s.ReadBytes > uint64(len(obj)) {
		t.Fatalf("stats %+v", s)
	}
}

// TestCacheBoundAndEviction: the cache never keeps more than MaxBytes; it
// drops the least recently used part first; a part bigger than the bound,
// or any part with a negative bound, is not kept.
func TestCacheBoundAndEviction(t *testing.T) {
	ctx := context.Background()
	st, obj, name, in := stored(t, 0, 8) // batches of one size
	for _, b := range in {
		if len(b.Data) != len(in[0].Data) {
			t.Fatalf("batches of %d and %d bytes", len(b.Data), len(in[0].Data))
		}
	}
	// A window per batch, and room for three (the index is kept by
	// another cache).
	probe := NewCache(CacheConfig{WindowBytes: 1})
	seg, err := probe.Segment(ctx, st, name, int64(len(obj)), 8)
	if err != nil {
		t.Fatal(err)
	}
	idx := probe.Stats().Bytes
	if _, err := probe.Window(ctx, st, seg, 0); err != nil {
		t.Fatal(err)
	}
	win := probe.Stats().Bytes - idx
	c := NewCache(CacheConfig{WindowBytes: 1, MaxBytes: 3 * win})
	hit := func(i int) bool {
		t.Helper()
		before := c.Stats()
		if _, err := c.Window(ctx, st, seg, i); err != nil {
			t.Fatal(err)
		}
		s := c.Stats()
		if s.Bytes > c.cfg.MaxBytes || s.Parts > 3 {
			t.Fatalf("the cache keeps %d bytes in %d parts, over its bound %d", s.Bytes, s.Parts, c.cfg.MaxBytes)
		}
		return s.Hits > before.Hits
	}
	// Most recent first: [0] [1 0] [0 1] [2 0 1].
	if hit(0) || hit(1) || !hit(0) || hit(2) || c.Stats().Evictions != 0 {
		t.Fatalf("the first three windows: %+v", c.Stats())
	}
	// [3 2 0] (1 went) [1 3 2] (0 went) [2 1 3] [0 2 1] (3 went) [1 0 2].
	if hit(3) || hit(1) || !hit(2) || hit(0) || !hit(1) || c.Stats().Evictions != 3 {
		t.Fatalf("least recently used first: %+v", c.Stats())
	}

	none := NewCache(CacheConfig{MaxBytes: -1})
	for range 2 {
		if _, err := none.Segment(ctx, st, name, int64(len(obj)), 8); err != nil {
			t.Fatal(err)
		}
	}
	if s := none.Stats(); s.Misses != 2 || s.Hits != 0 || s.Bytes != 0 || s.Parts != 0 {
		t.Fatalf("a cache keeping nothing: %+v", s)
	}
	tiny := NewCache(CacheConfig{MaxBytes: 10})
	if _, err := tiny.Segment(ctx, st, name, int64(len(obj)), 8); err != nil {
		t.Fatal(err)
	}
	if s := tiny.Stats(); s.Bytes != 0 || s.Parts != 0 {
		t.Fatalf("a part over the bound was kept: %+v", s)
	}
}

// TestCacheSharesConcurrentReads: readers asking for a part that is being
// read wait for that read instead of reading it again.
func TestCacheSharesConcurrentReads(t *testing.T) {
	ctx := context.Background()
	st, obj, name, in := stored(t, 0, 4)
	c := NewCache(CacheConfig{})
	seg, err := c.Segment(ctx, st, name, int64(len(obj)), 4)
	if err != nil {
		t.Fatal(err)
	}
	st.gate = make(chan struct{})
	const readers = 8
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := c.Window(ctx, st, seg, i%4)
			if err == nil {
				var b Batch
				b, err = batchOf(w, i%4)
				if err == nil && !bytes.Equal(b.Data, in[i%4].Data) {
					err = errors.New("wrong bytes")
				}
			}
			errs <- err
		}()
	}
	// Wait until one reader reads and the others wait for it.
	deadline := time.Now().Add(time.Minute)
	for c.Stats().Shared != readers-1 {
		if time.Now().After(deadline) {
			t.Fatalf("readers never joined one read: %+v", c.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	close(st.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := st.reads.Load(); got != 2 { // the index, then one window
		t.Fatalf("%d range reads for %d concurrent readers of one window, want 1 (and the index)", got-1, readers)
	}
}

// TestCachePrefetches: a prefetch reads a window in the background, at
// most Prefetch at once (more are dropped), and a reader asking for it
// meanwhile joins that read; Close cancels prefetches in flight, keeps
// nothing they had not finished, and starts no more.
func TestCachePrefetches(t *testing.T) {
	ctx := context.Background()
	st, _, name, in := stored(t, 0, 8)
	seg, err := OpenSegment(ctx, st, name)
	if err != nil {
		t.Fatal(err)
	}
	st.gate = make(chan struct{})
	c := NewCache(CacheConfig{WindowBytes: 1, Prefetch: 1}) // a window per batch
	c.Prefetch(st, seg, 3)
	c.Prefetch(st, seg, 4) // dropped: one runs
	c.Prefetch(st, seg, 8) // past the end
	got := make(chan error, 1)
	go func() {
		w, err := c.Window(ctx, st, seg, 3)
		if err == nil {
			var b Batch
			if b, err = batchOf(w, 3); err == nil && !bytes.Equal(b.Data, in[3].Data) {
				err = errors.New("wrong bytes")
			}
		}
		got <- err
	}()
	deadline := time.Now().Add(time.Minute)
	for c.Stats().Shared != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the reader never joined the prefetch: %+v", c.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	close(st.gate)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Prefetches != 1 || s.Misses != 0 || s.Hits != 1 || st.reads.Load() != 1+2 { // OpenSegment's two
		t.Fatalf("after one prefetch: %+v, %d range reads", s, st.reads.Load())
	}
	if _, err := c.Window(ctx, st, seg, 4); err != nil || c.Stats().Misses != 1 {
		t.Fatalf("the dropped prefetch's window: %v %+v", err, c.Stats())
	}

	st.gate = make(chan struct{}) // no read in flight: safe to replace
	c2 := NewCache(CacheConfig{WindowBytes: 1})
	c2.Prefetch(st, seg, 6)
	c2.Close() // cancels the held read
	c2.Prefetch(st, seg, 7)
	if s := c2.Stats(); s.Parts != 0 || s.Prefetches != 1 {
		t.Fatalf("after Close: %+v", s)
	}
	close(st.gate)
	if w, err := c2.Window(ctx, st, seg, 6); err != nil || !w.Holds(name, 6) || c2.Stats().Misses != 1 {
		t.Fatalf("reading after Close: %v %+v", err, c2.Stats())
	}
	if none := NewCache(CacheConfig{MaxBytes: -1}); none.cfg.Prefetch > 0 {
		t.Fatal("a cache that keeps nothing prefetches")
	}
}

func batchOf(w *Window, i int) (Batch, error) {
	b, err := w.Batch(i)
	return Batch{Data: b.Bytes()}, err
}

// TestCacheKeepsNoErrors: a window with a corrupt batch returns its good
// batches and an error for the bad one naming the object and offset, and
// is not kept; nor is a failed read: once the object is whole or back,
// it reads.
func TestCacheKeepsNoErrors(t *testing.T) {
	ctx := context.Background()
	st, obj, name, in := stored(t, 50, 4)
	c := NewCache(CacheConfig{})
	seg, err := c.Segment(ctx, st, name, int64(len(obj)), 4)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(obj)
	bad[seg.Entries[2].Pos+10] ^= 1
	if err := st.Put(ctx, name, bad); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		w, err := c.Window(ctx, st, seg, 0)
		if err != nil {
			t.Fatal(err)
		}
		if b, err := w.Batch(1); err != nil || !bytes.Equal(b.Bytes(), in[1].Data) {
			t.Fatalf("a good batch beside a corrupt one: %v", err)
		}
		if _, err := w.Batch(2); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "offset 56") {
			t.Fatalf("the corrupt batch: %v, want ErrCorrupt naming %s and offset 56", err, name)
		}
	}
	if s := c.Stats(); s.Misses != 3 || s.Parts != 1 { // the index is kept; the window was read twice
		t.Fatalf("a corrupt window was kept: %+v", s)
	}
	if err := st.Put(ctx, name, obj); err != nil {
		t.Fatal(err)
	}
	w, err := c.Window(ctx, st, seg, 3)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := w.Batch(2); err != nil || !bytes.Equal(b.Bytes(), in[2].Data) {
		t.Fatalf("the object whole again: %v", err)
	}

	// A missing object, and a manifest that expects another count.
	if err := st.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	other := NewCache(CacheConfig{})
	if _, err := other.Segment(ctx, st, name, int64(len(obj)), 4); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a missing object: %v", err)
	}
	if err := st.Put(ctx, name, obj); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Segment(ctx, st, name, int64(len(obj)), 4); err != nil {
		t.Fatalf("the object back: %v", err)
	}
	if _, err := other.Segment(ctx, st, name+"x", int64(len(obj)), 3); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another name: %v", err)
	}
	if _, err := OpenSegmentAt(ctx, st, name, int64(len(obj)), 3); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), name) {
		t.Fatalf("the wrong batch count: %v", err)
	}
	if s := other.Stats(); s.Parts != 1 {
		t.Fatalf("failed opens kept: %+v", s)
	}
}
