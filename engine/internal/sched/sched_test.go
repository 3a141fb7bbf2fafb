package sched

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

var t0 = time.Unix(1_000_000, 0)

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

// testCore is a core with a 2-processor machine's defaults.
func testCore(t *testing.T, cfg Config) *core {
	t.Helper()
	cfg.Cores = 2
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	c := newCore(cfg.withDefaults(), t0)
	return &c
}

func ids(ws []*waiter, all map[*waiter]string) []string {
	var out []string
	for _, w := range ws {
		out = append(out, all[w])
	}
	return out
}

// The regression guard of the live-first rule: while catch-up work runs,
// live work is never queued, and a catch-up unit that asks while live work
// runs waits for it (up to MaxDefer), even when a slot and budget are free.
func TestLiveGoesFirstWhileCatchUpRuns(t *testing.T) {
	c := testCore(t, Config{Cores: 2, Slots: 2, Share: 1})
	names := map[*waiter]string{}
	w := func(name string) *waiter { x := &waiter{}; names[x] = name; return x }
	a, b := w("a"), w("b")
	now := t0
	c.ask(a, now)
	if g, _ := c.grant(now); len(g) != 1 || g[0] != a {
		t.Fatalf("first catch-up unit not granted: %v", ids(g, names))
	}
	// Live work begins while a runs: nothing makes it wait.
	c.beginLive(now)
	if st := c.stats(); st.Live != 1 || st.Running != 1 {
		t.Fatalf("live work not admitted at once beside catch-up: %+v", st)
	}
	// b asks now: a slot and budget are free, but live work runs.
	now = now.Add(ms(0.1))
	c.ask(b, now)
	g, wake := c.grant(now)
	if len(g) != 0 {
		t.Fatalf("catch-up granted while live work runs: %v", ids(g, names))
	}
	if want := now.Add(c.cfg.MaxDefer); !wake.Equal(want) {
		t.Fatalf("wake at %v, want %v (the end of the deferral)", wake, want)
	}
	// Live work ends before the deferral: b goes at once.
	now = now.Add(ms(0.5))
	c.endLive(now)
	if g, _ := c.grant(now); len(g) != 1 || g[0] != b {
		t.Fatalf("b not granted once live work ended: %v", ids(g, names))
	}
	if st := c.stats(); st.Deferred != 1 {
		t.Fatalf("deferred %d, want 1", st.Deferred)
	}
}

// Live work that never stops slows catch-up down but does not starve it:
// a unit held back for MaxDefer runs.
func TestLiveWorkDefersCatchUpAtMostMaxDefer(t *testing.T) {
	c := testCore(t, Config{Share: 1, MaxDefer: ms(2)})
	c.beginLive(t0)
	w := &waiter{}
	c.ask(w, t0)
	if g, wake := c.grant(t0.Add(ms(1.999))); len(g) != 0 || !wake.Equal(t0.Add(ms(2))) {
		t.Fatalf("granted %d before MaxDefer (wake %v)", len(g), wake)
	}
	if g, _ := c.grant(t0.Add(ms(2))); len(g) != 1 {
		t.Fatal("not granted after MaxDefer")
	}
}

// Catch-up units never run more at once than Slots (default: one fewer
// than the processors), and waiters go in the order they asked.
func TestSlotsBoundConcurrentUnitsInOrder(t *testing.T) {
	c := testCore(t, Config{Share: 1, Burst: time.Second})
	if c.cfg.Slots != 1 {
		t.Fatalf("default slots on 2 processors = %d, want 1", c.cfg.Slots)
	}
	ws := []*waiter{{}, {}, {}}
	for i, w := range ws {
		c.ask(w, t0.Add(time.Duration(i)))
	}
	now := t0.Add(ms(1))
	for i, w := range ws {
		g, _ := c.grant(now)
		if len(g) != 1 || g[0] != w {
			t.Fatalf("turn %d: granted %d, want waiter %d alone", i, len(g), i)
		}
		if g, _ := c.grant(now); len(g) != 0 {
			t.Fatalf("turn %d: a second unit ran beside the first", i)
		}
		c.release(w, ms(0.1), now)
	}
}

// The budget: catch-up work gets Share of the processors over time. With
// units that each use 1 ms of processor time, the granted units over 1 s
// of simulated time come to Share × Cores × 1 s (plus the burst).
func TestBudgetBoundsCatchUpShare(t *testing.T) {
	for _, share := range []float64{0.1, 0.25, 0.5} {
		c := testCore(t, Config{Share: share, Burst: ms(10), IdleAfter: time.Hour})
		now := t0
		used := time.Duration(0)
		end := t0.Add(time.Second)
		for now.Before(end) {
			w := &waiter{}
			c.ask(w, now)
			g, wake := c.grant(now)
			for len(g) == 0 {
				if wake.IsZero() {
					t.Fatal("waiter stuck with no wake time")
				}
				now = wake
				g, wake = c.grant(now)
			}
			// The unit uses 1 ms of processor time and 1 ms of wall time.
			now = now.Add(ms(1))
			c.release(w, ms(1), now)
			used += ms(1)
		}
		want := time.Duration(share*2*float64(time.Second)) + ms(10)
		if used > want+ms(1) || used < want-ms(20) {
			t.Errorf("share %g: catch-up used %v of processor time in 1 s, want about %v", share, used, want)
		}
	}
}

// With no live work for IdleAfter there is nothing to protect: the budget
// neither holds units back nor is charged; the first live work brings it
// back at once.
func TestQuietNodeReplaysWithoutBudget(t *testing.T) {
	c := testCore(t, Config{Share: 0.1, Burst: ms(1), IdleAfter: time.Second})
	now := t0
	// Live work ran just now: the budget applies.
	c.beginLive(now)
	c.endLive(now)
	w := &waiter{}
	c.ask(w, now)
	c.grant(now)
	c.release(w, ms(1000), now) // budget: 1 ms - 1 s, 5 s to refill at 0.2
	c.ask(&waiter{}, now)
	if g, wake := c.grant(now); len(g) != 0 || !wake.Equal(now.Add(time.Second)) {
		t.Fatalf("budget spent while live work is recent: granted %d, wake %v; want none, and a wake when the node turns quiet (%v), before the refill", len(g), wake, now.Add(time.Second))
	}
	// A second later, nothing live has run: units go however much they use.
	now = now.Add(time.Second)
	for i := range 100 {
		g, _ := c.grant(now)
		if len(g) != 1 {
			t.Fatalf("unit %d held back on a quiet node", i)
		}
		c.release(g[0], ms(50), now)
		c.ask(&waiter{}, now)
	}
	// Live work begins: the budget applies again at once, and it was not
	// charged for the 100 units of the quiet spell (5 s of processor
	// time): it is what it was plus a second's refill (0.2 of a processor
	// at share 0.1 on 2), capped at nothing here: -999 ms + 200 ms.
	c.beginLive(now)
	c.endLive(now)
	if g, _ := c.grant(now); len(g) != 0 {
		t.Fatal("a unit ran on a spent budget right after live work")
	}
	if want := -ms(799); c.budget < want-ms(1) || c.budget > want+ms(1) {
		t.Fatalf("budget %v after the quiet spell, want about %v (quiet units are not charged)", c.budget, want)
	}
}

// A waiter that gives up is withdrawn; one that gives up just as it was
// granted must be released by its owner.
func TestCancel(t *testing.T) {
	c := testCore(t, Config{Share: 1})
	a, b := &waiter{}, &waiter{}
	c.ask(a, t0)
	c.ask(b, t0)
	g, _ := c.grant(t0)
	if len(g) != 1 || g[0] != a {
		t.Fatal("a not granted")
	}
	if c.cancel(b) {
		t.Fatal("b was not granted, cancel says it was")
	}
	if !c.cancel(a) {
		t.Fatal("a was granted, cancel says it was not")
	}
	c.release(a, 0, t0)
	if st := c.stats(); st.Running != 0 || st.Waiting != 0 {
		t.Fatalf("after cancel: %+v", st)
	}
}

// Release frees the slot for the next unit before the first is charged.
func TestReleaseFreesSlotBeforeEnd(t *testing.T) {
	c := testCore(t, Config{Share: 1})
	a, b := &waiter{}, &waiter{}
	c.ask(a, t0)
	c.ask(b, t0)
	c.grant(t0)
	c.free(a)
	if g, _ := c.grant(t0); len(g) != 1 || g[0] != b {
		t.Fatal("b not granted after a freed its slot")
	}
	c.release(a, ms(1), t0) // ends: charged, no second decrement of running
	if st := c.stats(); st.Running != 1 || st.CPU != ms(1) {
		t.Fatalf("after a ended: %+v", st)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, cfg := range []Config{{Share: -0.1}, {Share: 1.5}, {Slots: -1}, {Burst: -1}} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}

// The Scheduler around the core: turns are handed to goroutines, a unit's
// processor time is charged, and a context ends a wait.
func TestSchedulerTurns(t *testing.T) {
	s, err := New(Config{Cores: 2, Share: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t1, err := s.CatchUp(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A second unit waits while the first holds the only slot.
	got := make(chan *Turn)
	go func() {
		t2, err := s.CatchUp(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- t2
	}()
	waitFor(t, func() bool { return s.Stats().Waiting == 1 })
	spin(ms(3))
	t1.End()
	// (The goroutine stays on its thread from CatchUp to End, so the
	// thread's clock is the unit's.)
	t2 := <-got
	t2.End()
	st := s.Stats()
	if st.Units != 2 || st.Running != 0 || st.Waiting != 0 {
		t.Fatalf("stats %+v", st)
	}
	if st.CPU < ms(3) {
		t.Fatalf("charged %v for a unit that used 3 ms of processor time", st.CPU)
	}
	// A wait ends with its context.
	t3, _ := s.CatchUp(ctx)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.CatchUp(cctx); err == nil {
		t.Fatal("CatchUp with a cancelled context returned a turn while the slot was taken")
	}
	t3.End()
	if st := s.Stats(); st.Waiting != 0 || st.Running != 0 {
		t.Fatalf("after a cancelled wait: %+v", st)
	}
}

// A unit blocked after Release (a send to a slow client) lets the next
// unit run.
func TestSchedulerReleaseLetsNextRun(t *testing.T) {
	s, _ := New(Config{Cores: 2, Share: 1}, nil)
	ctx := context.Background()
	t1, _ := s.CatchUp(ctx)
	t1.Release()
	t2, err := s.CatchUp(ctx) // would block forever if t1 still held the slot
	if err != nil {
		t.Fatal(err)
	}
	t2.End()
	t1.End()
}

// spin uses d of processor time (on Linux, by the thread's own clock, so
// a busy machine only makes it take longer).
func spin(d time.Duration) {
	start, ok := threadCPU()
	for end := time.Now().Add(d); ; {
		if now, _ := threadCPU(); ok && now-start >= d {
			return
		}
		if !ok && !time.Now().Before(end) {
			return
		}
	}
}

// waitFor polls cond: the condition is reached by another goroutine, and
// only its order, not its speed, matters.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for !cond() {
		time.Sleep(100 * time.Microsecond)
	}
}

// The governor's rule: the budget's rate halves while the p99 delay is
// above the target, comes back by tenths below it, and stays within
// [1/64, 1] of Share.
func TestGovernorAIMD(t *testing.T) {
	now := t0
	s, err := New(Config{Cores: 2, Share: 0.5}, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	s.Live()() // live work just ran: the governor's rule applies
	target := ms(0.5)
	steps := []struct {
		p99  time.Duration
		want float64
	}{
		{ms(2), 0.5}, {ms(2), 0.25}, {ms(0.1), 0.35}, {ms(0.5), 0.45}, {ms(0.6), 0.225},
	}
	for i, st := range steps {
		s.observe(st.p99, target)
		if got := s.Stats().Factor; got < st.want-1e-9 || got > st.want+1e-9 {
			t.Fatalf("step %d (p99 %v): factor %g, want %g", i, st.p99, got, st.want)
		}
	}
	for range 20 {
		s.observe(ms(10), target)
	}
	if got := s.Stats().Factor; got != minFactor {
		t.Fatalf("factor after a long overload %g, want the floor %g", got, minFactor)
	}
	for range 30 {
		s.observe(0, target)
	}
	if got := s.Stats().Factor; got != 1 {
		t.Fatalf("factor after a quiet spell %g, want 1", got)
	}
	// With no live work for IdleAfter, delays are catch-up's own: ignored,
	// and the share is whole again for when live work returns.
	s.observe(ms(10), target)
	now = now.Add(time.Hour)
	s.observe(ms(10), target)
	if got := s.Stats().Factor; got != 1 {
		t.Fatalf("factor %g after a delay with no live work, want 1", got)
	}
	// The factor scales the refill: at factor 1/2 a spent budget takes
	// twice as long to come back.
	c := testCore(t, Config{Share: 0.5, Burst: ms(1), IdleAfter: time.Hour})
	c.release(&waiter{}, ms(1)+ms(1), t0) // budget: 1 ms - 2 ms = -1 ms
	c.ask(&waiter{}, t0)
	_, wake1 := c.grant(t0)
	c.setFactor(0.5, t0)
	_, wake2 := c.grant(t0)
	if d1, d2 := wake1.Sub(t0), wake2.Sub(t0); d2 < 2*d1-time.Microsecond || d2 > 2*d1+time.Microsecond {
		t.Fatalf("refill wait %v at factor 1, %v at 1/2", d1, d2)
	}
}

func TestDeltaQuantile(t *testing.T) {
	buckets := []float64{0, 1, 2, 3, 4}
	// 100 samples since prev: 90 in [0,1), 9 in [1,2), 1 in [3,4).
	prev := []uint64{10, 10, 10, 10}
	counts := []uint64{100, 19, 10, 11}
	if q, ok := deltaQuantile(counts, prev, buckets, 0.5); !ok || q != 0 {
		t.Errorf("p50 = %v %v", q, ok)
	}
	if q, _ := deltaQuantile(counts, prev, buckets, 0.95); q != 1 {
		t.Errorf("p95 = %v, want 1", q)
	}
	if q, _ := deltaQuantile(counts, prev, buckets, 0.995); q != 3 {
		t.Errorf("p99.5 = %v, want 3", q)
	}
	if _, ok := deltaQuantile(prev, prev, buckets, 0.99); ok {
		t.Error("no new samples, yet a quantile")
	}
}

// Live work the scheduler is not told about (a follower's raft writes for
// the leader's publishes) counts through Governor.Activity: a period in
// which a counter grew marks live work, so the budget applies.
func TestGovernorActivityCountsAsLiveWork(t *testing.T) {
	var now atomic.Int64
	now.Store(t0.UnixNano())
	s, err := New(Config{Cores: 2}, func() time.Time { return time.Unix(0, now.Load()) })
	if err != nil {
		t.Fatal(err)
	}
	var syncs atomic.Uint64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Governor{Period: time.Millisecond, Activity: []func() uint64{syncs.Load}}.Run(ctx, s)
	}()
	defer func() { cancel(); <-done }()
	now.Add(int64(time.Hour)) // long quiet
	// Writes keep coming (the governor reads the counter when it starts,
	// so one write before that would go unseen).
	waitFor(t, func() bool {
		syncs.Add(1)
		return s.Stats().LastLive.Equal(time.Unix(0, now.Load()))
	})
}
