package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rewind-io/rewind/engine/internal/record"
)

// batches builds n contiguous batches of per records each from offset base.
func batches(t testing.TB, base uint64, n, per int) []Batch {
	t.Helper()
	var out []Batch
	var b record.Builder
	for i := range n {
		b.Reset(uint64(i+1), int64(1000+i))
		for j := range per {
			b.Add(&record.Record{Key: []byte(fmt.Sprintf("k%d", j)), Value: []byte(fmt.Sprintf("v%d-%d", i, j))})
		}
		data := bytes.Clone(b.Finish())
		out = append(out, Batch{Base: base, Span: uint32(per), AppendTime: int64(2000 + 10*i), Data: data})
		base += uint64(per)
	}
	return out
}

func TestSegmentRoundTrip(t *testing.T) {
	ctx := context.Background()
	st, err := Open("file://" + t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	in := batches(t, 100, 5, 3)
	obj, f, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	if f.Base != 100 || f.End != 115 || f.Count != 5 || f.FirstTime != 2000 || f.LastTime != 2040 {
		t.Fatalf("footer %+v", f)
	}
	name := Name(7, 2, f, obj)
	if !strings.HasPrefix(name, "topics/7/2/00000000000000000100-00000000000000000115-") {
		t.Fatalf("name %q", name)
	}
	if err := st.Put(ctx, name, obj); err != nil {
		t.Fatal(err)
	}
	seg, err := OpenSegment(ctx, st, name)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range in {
		b, err := seg.ReadBatch(ctx, st, i)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b.Bytes(), want.Data) || seg.Entries[i].Base != want.Base || seg.Entries[i].AppendTime != want.AppendTime {
			t.Fatalf("batch %d differs", i)
		}
	}
	for off, want := range map[uint64]int{99: -1, 100: 0, 102: 0, 103: 1, 114: 4, 115: -1} {
		if got := Find(seg.Entries, off); got != want {
			t.Errorf("Find(%d) = %d, want %d", off, got, want)
		}
	}
	for tm, want := range map[int64]int{0: 0, 2000: 0, 2001: 1, 2040: 4, 2041: 5} {
		if got := SeekTime(seg.Entries, tm); got != want {
			t.Errorf("SeekTime(%d) = %d, want %d", tm, got, want)
		}
	}
	objs, err := st.List(ctx, Prefix(7, 2))
	if err != nil || len(objs) != 1 || objs[0].Name != name || objs[0].Size != int64(len(obj)) ||
		time.Since(objs[0].Modified) > time.Hour || objs[0].Modified.After(time.Now().Add(time.Minute)) {
		t.Fatalf("list: %+v %v", objs, err)
	}
	if err := st.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSegment(ctx, st, name); !errors.Is(err, ErrNotFound) {
		t.Fatalf("open after delete: %v", err)
	}
	if err := st.Delete(ctx, name); err != nil {
		t.Fatalf("deleting twice: %v", err)
	}
}

func TestBuildRefusesGapsAndTimeTravel(t *testing.T) {
	in := batches(t, 0, 3, 2)
	gap := append([]Batch(nil), in...)
	gap[2].Base++
	if _, _, err := Build(gap); err == nil {
		t.Error("a gap between batches was accepted")
	}
	back := append([]Batch(nil), in...)
	back[2].AppendTime = 0
	if _, _, err := Build(back); err == nil {
		t.Error("a batch earlier than the one before was accepted")
	}
	if _, _, err := Build(nil); err == nil {
		t.Error("an empty segment was accepted")
	}
}

// TestCorruptObjectsAreReportedNeverDelivered flips every byte of a segment
// in turn (and truncates it): opening it or reading any batch fails with
// ErrCorrupt naming the object, or yields exactly the original batches.
func TestCorruptObjectsAreReportedNeverDelivered(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	in := batches(t, 10, 3, 2)
	obj, _, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	check := func(desc string, data []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "x.seg"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		cached(t, desc, st, len(obj), in)
		seg, err := OpenSegment(ctx, st, "x.seg")
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "x.seg") {
				t.Fatalf("%s: open: %v, want ErrCorrupt naming the object", desc, err)
			}
			return
		}
		for i := range seg.Entries {
			b, err := seg.ReadBatch(ctx, st, i)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "x.seg") {
					t.Fatalf("%s: batch %d: %v, want ErrCorrupt naming the object", desc, i, err)
				}
				continue
			}
			if !bytes.Equal(b.Bytes(), in[i].Data) || seg.Entries[i].Base != in[i].Base {
				t.Fatalf("%s: batch %d was delivered changed", desc, i)
			}
		}
	}
	for i := range obj {
		bad := bytes.Clone(obj)
		bad[i] ^= 0x5a
		check(fmt.Sprintf("byte %d flipped", i), bad)
	}
	for n := range len(obj) {
		check(fmt.Sprintf("cut to %d bytes", n), obj[:n])
	}
}

// cached reads object x.seg, which should be the segment of batches in
// of size bytes, through caches with a window per batch and with one
// window for all, and fails unless every batch is either exactly as built
// or an ErrCorrupt naming the object.
func cached(t *testing.T, desc string, st Store, size int, in []Batch) {
	t.Helper()
	ctx := context.Background()
	for _, window := range []int64{1, DefaultWindowBytes} {
		c := NewCache(CacheConfig{WindowBytes: window})
		seg, err := c.Segment(ctx, st, "x.seg", int64(size), uint32(len(in)))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "x.seg") {
				t.Fatalf("%s, window %d: open: %v, want ErrCorrupt naming the object", desc, window, err)
			}
			continue
		}
		for i := range seg.Entries {
			w, err := c.Window(ctx, st, seg, i)
			var b record.Batch
			if err == nil {
				b, err = w.Batch(i)
			}
			if err != nil {
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "x.seg") {
					t.Fatalf("%s, window %d: batch %d: %v, want ErrCorrupt naming the object", desc, window, i, err)
				}
				continue
			}
			if !bytes.Equal(b.Bytes(), in[i].Data) || seg.Entries[i].Base != in[i].Base {
				t.Fatalf("%s, window %d: batch %d was delivered changed", desc, window, i)
			}
		}
	}
}

func TestFileStoreNamesStayInsideItsDirectory(t *testing.T) {
	st, err := NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", "/etc/passwd", "../x", "a/../../x", `a\b`, "a//b"} {
		if err := st.Put(context.Background(), name, []byte("x")); err == nil {
			t.Errorf("Put(%q) was accepted", name)
		}
	}
}

func TestOpenURL(t *testing.T) {
	for _, bad := range []string{"file://relative/path", "file://host/path", "s3:///no-bucket", "s3://b/p?endpoint=ftp://x", "s3://b/p?path_style=maybe", "s3://b/p?bogus=1", "s3://b/p?credentials=/no/such/file", "ftp://x", "::"} {
		if _, err := Open(bad); err == nil {
			t.Errorf("Open(%q) was accepted", bad)
		}
	}
}

func FuzzParseSegment(f *testing.F) {
	var b record.Builder
	b.Reset(1, 1)
	b.Add(&record.Record{Value: []byte("v")})
	obj, _, err := Build([]Batch{{Base: 5, Span: 1, AppendTime: 9, Data: bytes.Clone(b.Finish())}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(obj)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < footerSize {
			return
		}
		ft, err := ParseFooter(data[len(data)-footerSize:], int64(len(data)))
		if err != nil {
			return
		}
		pos, n := ft.IndexRange()
		if pos+n != int64(len(data)) {
			t.Fatalf("index range %d+%d for %d bytes", pos, n, len(data))
		}
		entries, err := ParseIndex(data[pos:pos+n], ft)
		if err != nil {
			return
		}
		for _, e := range entries {
			_, _ = CheckBatch(e, data[e.Pos:e.Pos+uint64(e.Len)])
		}
	})
}
