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
