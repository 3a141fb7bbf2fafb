package auth

import (
	"fmt"
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// TestFailuresLimitAndAggregate: a source gets Burst failures, then is
// limited until its bucket refills at Rate; its audit lines are one per
// interval, each carrying the count left out before it; another source is
// not affected.
func TestFailuresLimitAndAggregate(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	f := NewFailures(FailureConfig{Rate: 2, Burst: 3, AuditInterval: 10 * time.Second}, clk.now)
	lines, left := 0, 0
	fail := func(src string) {
		if w, l := f.Fail(src); w {
			lines++
			left += l
		}
	}
	for i := range 3 {
		if _, limited := f.Limited("a"); limited {
			t.Fatalf("failure %d within the burst is limited", i)
		}
		fail("a")
	}
	retry, limited := f.Limited("a")
	if !limited || retry != 500*time.Millisecond {
		t.Fatalf("after the burst: limited %v retry %v, want true 500ms", limited, retry)
	}
	if _, limited := f.Limited("b"); limited {
		t.Fatal("another source is limited")
	}
	for range 100 { // refused unchecked, still counted
		fail("a")
	}
	if lines != 1 {
		t.Fatalf("%d audit lines within an interval, want 1", lines)
	}
	clk.t = clk.t.Add(500 * time.Millisecond)
	if _, limited := f.Limited("a"); limited {
		t.Fatal("still limited after a refill of one failure")
	}
	clk.t = clk.t.Add(10 * time.Second)
	fail("a")
	if lines != 2 || left != 102 {
		t.Fatalf("%d lines, %d failures left out counted, want 2 and 102", lines, left)
	}
	// The last failures of an attack that stopped come out of Pending.
	fail("a")
	clk.t = clk.t.Add(10 * time.Second)
	if p := f.Pending(); p["a"] != 1 || len(p) != 1 {
		t.Fatalf("pending %v, want a:1", p)
	}
	if p := f.Pending(); p != nil {
		t.Fatalf("pending again %v, want none", p)
	}
}

// TestFailuresTableIsBounded: a flood from many sources keeps at most
// MaxSources entries (plus the shared one), and the sources beyond them
// are limited together.
func TestFailuresTableIsBounded(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	f := NewFailures(FailureConfig{Rate: 1, Burst: 2, MaxSources: 100}, clk.now)
	for i := range 10_000 {
		f.Fail(fmt.Sprintf("10.0.%d.%d", i/256, i%256))
	}
	if n := f.Sources(); n > 101 {
		t.Fatalf("%d sources tracked, want at most 101", n)
	}
	if _, limited := f.Limited("192.0.2.1"); !limited {
		t.Fatal("a newcomer to a full table is not limited with the flood")
	}
	// Once the flood's buckets refill, the table makes room again.
	clk.t = clk.t.Add(time.Minute)
	f.Fail("192.0.2.1")
	if _, limited := f.Limited("192.0.2.1"); limited {
		t.Fatal("a newcomer after the flood is limited")
	}
}
