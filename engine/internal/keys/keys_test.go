package keys

import (
	"bytes"
	"testing"
)

func TestTimeKeysSortByTimeThenOffset(t *testing.T) {
	ordered := [][]byte{
		TimeKey(1, -5, 0), TimeKey(1, 0, 0), TimeKey(1, 0, 1), TimeKey(1, 7, 0), TimeKey(1, 1<<62, 3),
		TimeKey(2, -1<<62, 0),
	}
	for i := 1; i < len(ordered); i++ {
		if bytes.Compare(ordered[i-1], ordered[i]) >= 0 {
			t.Fatalf("key %d does not sort before key %d", i-1, i)
		}
	}
	if bytes.Compare(TimeSeekKey(1, 7), TimeKey(1, 7, 0)) > 0 || bytes.Compare(TimeSeekKey(1, 8), TimeKey(1, 7, 99)) <= 0 {
		t.Fatal("seek key out of place")
	}
	if b, ok := TimeKeyBase(TimeKey(4, 9, 12345)); !ok || b != 12345 {
		t.Fatalf("TimeKeyBase = %d, %v", b, ok)
	}
}

func TestOffsetKeys(t *testing.T) {
	if bytes.Compare(OffsetKey(1, 255), OffsetKey(1, 256)) >= 0 {
		t.Fatal("offset keys do not sort numerically")
	}
	s, e := GroupSpan(Offset, 1)
	if k := OffsetKey(1, ^uint64(0)); bytes.Compare(k, s) < 0 || bytes.Compare(k, e) >= 0 {
		t.Fatal("offset key outside its group span")
	}
	if b, ok := OffsetKeyBase(OffsetKey(3, 77)); !ok || b != 77 {
		t.Fatalf("OffsetKeyBase = %d, %v", b, ok)
	}
}

// TestKeyIndexRowsStayInTheirKeysSpan: a key's rows sort by version inside
// its span, and the rows of a key that extends it ("ab" after "a") or of a
// tag never fall into it: the length before the key keeps spans apart.
func TestKeyIndexRowsStayInTheirKeysSpan(t *testing.T) {
	lo, hi := KeySpan(3, []byte("a"))
	in := func(k []byte) bool { return bytes.Compare(k, lo) >= 0 && bytes.Compare(k, hi) < 0 }
	for _, v := range []uint64{0, 1, 255, 256, 1 << 40} {
		if !in(KeyVersionKey(3, []byte("a"), v)) {
			t.Fatalf("version %d of a is outside its span", v)
		}
		if got, ok := KeyVersionOf(KeyVersionKey(3, []byte("a"), v)); !ok || got != v {
			t.Fatalf("KeyVersionOf = %d %v, want %d", got, ok, v)
		}
	}
	if bytes.Compare(KeyVersionKey(3, []byte("a"), 1), KeyVersionKey(3, []byte("a"), 256)) >= 0 {
		t.Fatal("versions do not sort numerically")
	}
	for _, k := range [][]byte{KeyVersionKey(3, []byte("ab"), 0), KeyVersionKey(3, []byte(""), 7), KeyVersionKey(4, []byte("a"), 0), TagKey(3, []byte("a"), 0)} {
		if in(k) {
			t.Fatalf("row %x falls into a's span", k)
		}
	}
	tlo, thi := TagSpan(3, []byte("t:1"))
	row := AppendTagKey([]byte("scratch"), 3, []byte("t:1"), 42)[len("scratch"):]
	if bytes.Compare(row, tlo) < 0 || bytes.Compare(row, thi) >= 0 {
		t.Fatal("a tag row is outside its span")
	}
	if off, ok := TagKeyOffset(row); !ok || off != 42 {
		t.Fatalf("TagKeyOffset = %d %v", off, ok)
	}
}
