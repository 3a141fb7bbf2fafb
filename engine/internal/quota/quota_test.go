package quota

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// clock is a manual clock; sleeping advances it, so pacing is observed
// without waiting.
type clock struct {
	t     time.Time
	slept []time.Duration
}

func (c *clock) now() time.Time { return c.t }
func (c *clock) sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.slept = append(c.slept, d)
	c.t = c.t.Add(d)
	return nil
}

func limiter(lim map[string]Limits) (*Limiter, *clock) {
	c := &clock{t: time.Unix(1000, 0)}
	return New(func(p string) Limits { return lim[p] }).WithClock(c.now, c.sleep), c
}

func TestPublishOverItsRateIsRefusedWithTheWait(t *testing.T) {
	l, c := limiter(map[string]Limits{"etl": {PublishBytesPerSec: 1000}})
	// A full bucket (one second) admits requests until it is empty; the
	// last may take it into debt.
	for i := range 3 {
		if err := l.Publish("etl", 400); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	err := l.Publish("etl", 1)
	var ex *Exceeded
	if !errors.As(err, &ex) || !errors.Is(err, ErrExceeded) || ex.Kind != Publish || ex.RetryAfter != 200*time.Millisecond {
		t.Fatalf("publish over the rate: %v, want a refusal to retry after 200ms (the 200 bytes of debt)", err)
	}
	c.t = c.t.Add(ex.RetryAfter + time.Millisecond)
	if err := l.Publish("etl", 1); err != nil {
		t.Fatalf("after the wait: %v", err)
	}
	// Others are not affected; no limit means no limit.
	for range 100 {
		if err := l.Publish("other", 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	// A request larger than the burst still passes when the bucket has
	// tokens: quotas slow a tenant, they never wedge it.
	c.t = c.t.Add(time.Hour)
	if err := l.Publish("etl", 10_000); err != nil {
		t.Fatalf("a request above the burst on a full bucket: %v", err)
	}
}

func TestReplayIsPacedNotFailed(t *testing.T) {
	l, c := limiter(map[string]Limits{"analyst": {ReplayBytesPerSec: 1 << 20}})
	ctx := context.Background()
	start := c.t
	// 10 MiB in 64 KiB reads: the first MiB is the burst, the other 9
	// take 9 seconds of the principal's time, none refused.
	for range 160 {
		if err := l.Replay(ctx, "analyst", 64<<10); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.t.Sub(start); got < 9*time.Second-time.Millisecond || got > 9*time.Second+time.Millisecond {
		t.Fatalf("10 MiB at 1 MiB/s with a 1 MiB burst took %s, want 9s", got)
	}
	// A cancelled replay stops waiting.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.Replay(cctx, "analyst", 10<<20); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	var u Usage
	for _, x := range l.Usage() {
		if x.Principal == "analyst" {
			u = x
		}
	}
	if u.ReplayBytes != 20<<20 || u.PacedNanos == 0 {
		t.Fatalf("usage %+v", u)
	}
}

func TestFuelIsPaced(t *testing.T) {
	l, c := limiter(map[string]Limits{"f": {FilterFuelPerSec: 1000}})
	ctx := context.Background()
	if err := l.Fuel(ctx, "f", 3000); err != nil {
		t.Fatal(err)
	}
	if len(c.slept) != 1 || c.slept[0] != 2*time.Second {
		t.Fatalf("slept %v, want [2s] (3000 fuel at 1000/s, 1000 of burst)", c.slept)
	}
}

func TestStreamsAreCapped(t *testing.T) {
	l, _ := limiter(map[string]Limits{"s": {Streams: 2}})
	r1, err := l.OpenStream("s")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.OpenStream("s"); err != nil {
		t.Fatal(err)
	}
	_, err = l.OpenStream("s")
	var ex *Exceeded
	if !errors.As(err, &ex) || ex.Kind != Streams {
		t.Fatalf("third stream: %v", err)
	}
	r1()
	r1() // idempotent
	if _, err := l.OpenStream("s"); err != nil {
		t.Fatalf("after one ended: %v", err)
	}
	if _, err := l.OpenStream("s"); err == nil {
		t.Fatal("releasing twice freed two slots")
	}
}

// TestLimitsChangeAtOnce: the limits are read on every call, so a quota set
// (or removed) through the metadata group applies to the next request.
func TestLimitsChangeAtOnce(t *testing.T) {
	lim := map[string]Limits{"x": {PublishBytesPerSec: 10}}
	l, _ := limiter(lim)
	_ = l.Publish("x", 100)
	if err := l.Publish("x", 1); err == nil {
		t.Fatal("over the quota, admitted")
	}
	delete(lim, "x")
	if err := l.Publish("x", 1); err != nil {
		t.Fatalf("quota removed, still refused: %v", err)
	}
}

// TestCheckTopics: a creation passes while the principal stays within both
// caps (equal to a cap is within it), is refused past either with the
// limit, the usage and the request in the error, and zero limits nothing.
func TestCheckTopics(t *testing.T) {
	l := Limits{Topics: 3, Partitions: 16}
	for _, tc := range []struct {
		owned      Owned
		partitions uint32
		kind       Kind // "": admitted
		msg        string
	}{
		{Owned{}, 16, "", ""},
		{Owned{Topics: 2, Partitions: 8}, 8, "", ""},
		{Owned{}, 1024, Partitions, `principal "p" may have 16 partitions in all and has 0; a topic of 1024 would make 1024`},
		{Owned{Topics: 1, Partitions: 16}, 1, Partitions, "may have 16 partitions in all and has 16; a topic of 1 would make 17"},
		{Owned{Topics: 3, Partitions: 3}, 1, Topics, `principal "p" may have 3 topics and has 3`},
	} {
		err := CheckTopics("p", l, tc.owned, tc.partitions)
		if tc.kind == "" {
			if err != nil {
				t.Errorf("%+v + %d: %v, want admitted", tc.owned, tc.partitions, err)
			}
			continue
		}
		var ex *Exceeded
		if !errors.As(err, &ex) || ex.Kind != tc.kind || !errors.Is(err, ErrExceeded) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%+v + %d: %v, want %s refused saying %q", tc.owned, tc.partitions, err, tc.kind, tc.msg)
		}
	}
	if err := CheckTopics("p", Limits{}, Owned{Topics: 1 << 40, Partitions: 1 << 40}, 1024); err != nil {
		t.Errorf("no limits: %v", err)
	}
}
