//go:build failpoints

package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rewind-io/rewind/engine/internal/meta"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/tier"
	"github.com/rewind-io/rewind/internal/failpoint"
)

// tierSteps are the steps of one move of history to the tier store, in
// the order the mover (tierOut) takes them, and what a crash at each
// leaves once the node is back: whether the segment is in the manifest,
// and whether the local copy below it is gone. A crash inside Apply finds
// the command already synced in the raft log (a single member commits an
// entry only once it is durable), so the restart applies it again. A crash
// after a command was proposed but before it reached the log is a crash at
// the step before.
var tierSteps = []struct {
	name                string
	recorded, truncated bool
}{
	{failpoint.TierUploaded, false, false},
	{failpoint.TierRecording, true, false},
	{failpoint.TierRecorded, true, false},
	{failpoint.TierTruncatingLocal, true, true},
	{failpoint.TierTruncatedLocal, true, true},
}

// TestFailpointTierCrashAtEveryStep crashes a node (a power cut: Pebble's
// crashable filesystem keeps a random part of what was not synced, and the
// tier store keeps what was written to it until then) at every step of
// moving history to the tier store, reopens it on what survived, and
// checks that every acknowledged record is still read from the earliest
// at its offset, that the manifest and the local copy agree, and that the
// mover then finishes the move without tiering an offset twice. Each step
// runs twice: the mover resumes on the same history (an upload redone
// writes the same object), or after more records arrived (the redone
// upload covers more, so an object uploaded before the crash whose
// command never applied is an orphan, which the cleanup deletes once old
// enough and not before).
func TestFailpointTierCrashAtEveryStep(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 18))
	for _, step := range tierSteps {
		for _, more := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/more=%v", step.name, more), func(t *testing.T) {
				testTierCrashAt(t, rng, step.name, step.recorded, step.truncated, more)
			})
		}
	}
}

func testTierCrashAt(t *testing.T, rng *rand.Rand, step string, recorded, truncated, more bool) {
	ctx := context.Background()
	mem := vfs.NewCrashableMem()
	tierDir := t.TempDir()
	var clock atomic.Int64
	clock.Store(int64(time.Hour))
	b := openCfg(t, mem, &clock, func(c *Config) { c.Tier = fileStore(t, tierDir) })
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "h", Partitions: 1,
		Retention: meta.Retention{LocalMaxBytes: 2 << 10}}); err != nil {
		t.Fatal(err)
	}
	var want []string
	publish := func(b *Broker, batches int) {
		t.Helper()
		for range batches {
			var vals []string
			for range 10 {
				vals = append(vals, fmt.Sprintf("r%04d-padding-padding-padding-padding-padding", len(want)+len(vals)))
			}
			clock.Add(int64(time.Millisecond))
			publishTo(t, b, "h", 0, vals...)
			want = append(want, vals...)
		}
	}
	publish(b, 20)
	p := parts(t, b, "h")[0]

	// Run the mover until the step, and cut the power there.
	setFailpoint(t, step, "")
	done := make(chan error, 1)
	go func() { done <- b.tierOut(p) }()
	select {
	case <-failpoint.Reached(step):
	case err := <-done:
		t.Fatalf("the mover finished (%v) without reaching %s", err, step)
	case <-time.After(time.Minute):
		t.Fatalf("the mover did not reach %s within a minute", step)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rand.New(rand.NewPCG(rng.Uint64(), 1))})
	crashedTier := copyDir(t, tierDir)
	failpoint.Clear(step)
	if err := <-done; err != nil {
		t.Fatalf("the mover, let go on after the cut: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	st := fileStore(t, crashedTier)
	b = openCfg(t, crashed, &clock, func(c *Config) { c.Tier = st })
	defer b.Close()
	p = parts(t, b, "h")[0]
	checkTierState(t, b, p, st, want)
	rows := p.Tiered()
	if got := len(rows) > 0; got != recorded {
		t.Fatalf("after the restart the manifest is %+v: want the segment recorded: %v", rows, recorded)
	}
	if got := p.LocalStart() > 0; got != truncated {
		t.Fatalf("after the restart the local start is %d: want the local copy truncated: %v", p.LocalStart(), truncated)
	}
	uploaded := objectNamesOf(t, st)
	if len(uploaded) != 1 {
		t.Fatalf("the store holds %v after the cut, want the one object uploaded", uploaded)
	}

	// The mover resumes and finishes the move.
	if more {
		publish(b, 10)
	}
	if err := b.tierOut(p); err != nil {
		t.Fatal(err)
	}
	checkTierState(t, b, p, st, want)
	rows = p.Tiered()
	if len(rows) == 0 || p.LocalStart() != rows[len(rows)-1].End {
		t.Fatalf("after the mover resumed: manifest %+v, local start %d: want the local copy to start where the manifest ends", rows, p.LocalStart())
	}
	// Another pass has nothing left to do.
	if err := b.tierOut(p); err != nil {
		t.Fatal(err)
	}
	if again := p.Tiered(); !slices.Equal(again, rows) || p.LocalStart() != rows[len(rows)-1].End {
		t.Fatalf("a second pass changed the manifest %+v to %+v (local start %d)", rows, again, p.LocalStart())
	}

	// An object uploaded before the cut that no row names is an orphan only
	// when the resumed upload covered other offsets; young, it stays.
	var orphans []string
	named := manifestNames(rows)
	for _, n := range objectNamesOf(t, st) {
		if !named[n] {
			orphans = append(orphans, n)
		}
	}
	if wantOrphans := !recorded && more; (len(orphans) > 0) != wantOrphans || len(orphans) > 1 ||
		(wantOrphans && orphans[0] != uploaded[0]) {
		t.Fatalf("objects no row names: %v (uploaded before the cut: %v): want the pre-cut upload orphaned: %v", orphans, uploaded, wantOrphans)
	}
	if n, err := b.CollectTierGarbage(ctx, time.Now().Add(-tierOrphanAge)); err != nil || n != 0 {
		t.Fatalf("the cleanup deleted %d young objects (%v)", n, err)
	}
	n, err := b.CollectTierGarbage(ctx, time.Now().Add(time.Minute))
	if err != nil || n != len(orphans) {
		t.Fatalf("the cleanup deleted %d objects (%v), want the %d orphan(s)", n, err, len(orphans))
	}
	var left []string
	for _, r := range rows {
		left = append(left, r.Name)
	}
	if got := objectNamesOf(t, st); !slices.Equal(got, left) {
		t.Fatalf("after the cleanup the store holds %v, the manifest names %v", got, left)
	}
	checkTierState(t, b, p, st, want)
}

// checkTierState checks a partition with tiered history against what was
// acknowledged (want, by offset from 0): a replay from the earliest returns
// exactly it; the manifest's rows follow each other from the log start,
// each naming an object in the store that holds exactly its offsets; and
// the local copy starts nowhere past the manifest's end (no offset is
// neither local nor tiered).
func checkTierState(t *testing.T, b *Broker, p *partition.Partition, st tier.Store, want []string) {
	t.Helper()
	got := replayAll(t, b, "h")
	if len(got) != len(want) {
		t.Fatalf("replay from the earliest: %d records, want %d", len(got), len(want))
	}
	for i, r := range got {
		if r.GetOffset() != uint64(i) || string(r.GetValue()) != want[i] {
			t.Fatalf("replay from the earliest: %q at %d, want %q at %d", r.GetValue(), r.GetOffset(), want[i], i)
		}
	}
	rows := p.Tiered()
	end := p.Bounds().LogStart
	for _, r := range rows {
		if r.Base != end || r.End <= r.Base {
			t.Fatalf("manifest %+v: a row at %d does not follow the one ending at %d", rows, r.Base, end)
		}
		seg, err := tier.OpenSegment(context.Background(), st, r.Name)
		if err != nil {
			t.Fatalf("manifest row [%d, %d): %v", r.Base, r.End, err)
		}
		if seg.Footer.Base != r.Base || seg.Footer.End != r.End {
			t.Fatalf("object %s holds [%d, %d), its row says [%d, %d)", r.Name, seg.Footer.Base, seg.Footer.End, r.Base, r.End)
		}
		end = r.End
	}
	if ls := p.LocalStart(); ls > end {
		t.Fatalf("the local copy starts at %d, the manifest ends at %d", ls, end)
	}
}

func manifestNames(rows []partition.TierSegment) map[string]bool {
	out := map[string]bool{}
	for _, r := range rows {
		out[r.Name] = true
	}
	return out
}

func fileStore(t *testing.T, dir string) *tier.FileStore {
	t.Helper()
	st, err := tier.NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// copyDir copies the files under dir into a new directory: the tier store
// as it was at a crash (its writes are durable when they return).
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	to := t.TempDir()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(to, rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return to
}
