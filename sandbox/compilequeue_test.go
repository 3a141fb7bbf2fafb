package sandbox

import (
	"context"
	"errors"
	"testing"
	"time"
)

// waitFor polls cond until it holds, failing the test after a generous
// deadline (it never bounds how fast the machine is).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCompileQueueDropsGoneClients is finding 7h of issue 24: the compile
// queue compiled for clients that had gone, so a small filter waited
// behind their compiles. A compile whose only caller's context ends while
// it waits for its turn must leave the queue at once and never compile;
// compiles someone still wants (another waiter, Prepare, a caller told
// ErrCompiling) must go on.
func TestCompileQueueDropsGoneClients(t *testing.T) {
	r, started, _, open, calls := gatedRuntime(t, Limits{})
	// A holds the compile slot (Prepare: nobody waits, it is wanted).
	a := tinyModule(true, 10)
	r.Prepare(a)
	<-started

	// compileAsync starts a Compile of wasm and returns where its error
	// goes; it returns once the compile is queued.
	compileAsync := func(ctx context.Context, wasm []byte) chan error {
		errc := make(chan error, 1)
		go func() {
			m, err := r.Compile(ctx, wasm)
			if m != nil {
				m.Release()
			}
			errc <- err
		}()
		return errc
	}
	waitQueued := func(waiters int, wasm []byte) {
		t.Helper()
		sha := SHA256(wasm)
		waitFor(t, "a queued compile's waiters", func() bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			j := r.mu.jobs[sha]
			return j != nil && j.waiters == waiters
		})
	}

	// B: its only client goes while it waits behind A.
	b := tinyModule(true, 11)
	ctxB, cancelB := context.WithCancel(context.Background())
	errB := compileAsync(ctxB, b)
	waitQueued(1, b)
	cancelB()
	if err := <-errB; !errors.Is(err, context.Canceled) {
		t.Fatalf("Compile of B, its context cancelled: %v", err)
	}
	if s, _ := r.State(SHA256(b)); s != StateNone {
		t.Fatalf("State of B once its only client went: %v, want %v (out of the queue)", s, StateNone)
	}

	// C: two clients, one goes; the other still gets it.
	c := tinyModule(true, 12)
	ctxC, cancelC := context.WithCancel(context.Background())
	errC1 := compileAsync(ctxC, c)
	waitQueued(1, c)
	errC2 := compileAsync(context.Background(), c)
	waitQueued(2, c)
	cancelC()
	if err := <-errC1; !errors.Is(err, context.Canceled) {
		t.Fatalf("Compile of C, its context cancelled: %v", err)
	}

	// D: its client was told ErrCompiling (and will ask again), then went.
	d := tinyModule(true, 13)
	r.lim.CompileWaitMillis = 1
	if _, err := r.Compile(context.Background(), d); !errors.Is(err, ErrCompiling) {
		t.Fatalf("Compile of D with a 1 ms wait: %v; want ErrCompiling", err)
	}

	open() // A, C and D compile
	if err := <-errC2; err != nil {
		t.Fatalf("Compile of C by the client that stayed: %v", err)
	}
	r.compiling.Wait() // every job has ended or been dropped
	for _, m := range []struct {
		name string
		wasm []byte
		want State
	}{{"A (Prepare)", a, StateCompiled}, {"B (its client went)", b, StateNone}, {"C (one client stayed)", c, StateCompiled}, {"D (told ErrCompiling)", d, StateCompiled}} {
		if s, err := r.State(SHA256(m.wasm)); s != m.want {
			t.Errorf("State of %s: %v (%v), want %v", m.name, s, err, m.want)
		}
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("wazero compiled %d modules, want 3 (A, C, D; never B)", n)
	}
	if n := r.Stats().CompilesDropped; n != 1 {
		t.Errorf("Stats.CompilesDropped = %d, want 1", n)
	}
}
