package msgid

import (
	"errors"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, id := range []ID{
		{}, {TopicID: 1, Partition: 0, Offset: 0}, {TopicID: 3, Partition: 1, Offset: 1_000_000},
		{TopicID: ^uint64(0), Partition: ^uint32(0), Offset: ^uint64(0)},
	} {
		s := id.String()
		got, err := Parse(s)
		if err != nil || got != id {
			t.Fatalf("Parse(%q) = %+v, %v; want %+v", s, got, err, id)
		}
	}
	if s := (ID{TopicID: 3, Partition: 1, Offset: 1_000_000}).String(); len(s) != 11 {
		t.Fatalf("%q is %d characters", s, len(s))
	}
}

func TestGarbageRejected(t *testing.T) {
	good := ID{TopicID: 7, Partition: 2, Offset: 99}.String()
	bad := []string{"", "x", "!!!!", good + "A", good[:len(good)-1], "AAAAAAAAAAAA",
		string(make([]byte, 100))}
	// Every single-character change of a valid id must be caught.
	for i := range len(good) {
		for _, c := range "AZaz09-_" {
			b := []byte(good)
			if b[i] == byte(c) {
				continue
			}
			b[i] = byte(c)
			bad = append(bad, string(b))
		}
	}
	caught := 0
	for _, s := range bad {
		if _, err := Parse(s); err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse(%q): %v is not ErrInvalid", s, err)
			}
			caught++
		}
	}
	// A 16-bit checksum lets about 1 in 65536 random changes through; over
	// this set none should.
	if caught != len(bad) {
		t.Fatalf("%d of %d corrupted ids were accepted", len(bad)-caught, len(bad))
	}
}

func FuzzParse(f *testing.F) {
	f.Add(ID{TopicID: 3, Partition: 1, Offset: 1000}.String())
	f.Add("")
	f.Add("AQEBAQ")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := Parse(s)
		if err != nil {
			return
		}
		if id.String() != s {
			t.Fatalf("Parse(%q) = %+v, which encodes to %q", s, id, id.String())
		}
	})
}

func BenchmarkString(b *testing.B) {
	b.ReportAllocs()
	id := ID{TopicID: 3, Partition: 1, Offset: 1_000_000}
	for b.Loop() {
		id.Offset++
		_ = id.String()
	}
}
