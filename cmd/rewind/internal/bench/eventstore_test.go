package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
)

// TestEventStoreModes runs each event-store mode briefly against a node in
// this process and checks the counts it reports: the fill's records, the
// loaded entity's 20 events, appends stored (on one key: exactly its
// versions), no failures, and RESULT lines. Nothing here depends on the
// machine's speed: the append modes run for a fixed time and only counts
// are checked (whether 10 writers on one key meet a conflict is timing, so
// it is logged, not asserted).
func TestEventStoreModes(t *testing.T) {
	n := enginetest.StartNode(t, engine.Config{Dir: t.TempDir()})
	c := client.New(n.URL)
	ctx := context.Background()

	fill, err := EventStoreFill(ctx, c, FillOptions{Topic: "es", Events: 2000, EventsPerKey: 20, Size: 10, Partitions: 2, Batch: 300, Publishers: 3})
	if err != nil {
		t.Fatal(err)
	}
	if fill.Records != 2000 || fill.Case != "rewind-es-fill" || fill.Extra["keys"] != 100 {
		t.Fatalf("fill: %d records, case %q, %v keys; want 2000, rewind-es-fill, 100", fill.Records, fill.Case, fill.Extra["keys"])
	}
	load, err := EventStoreLoad(ctx, c, "es", "k42", 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(load.Latencies) != 5 || load.Extra["events"] != 20 {
		t.Fatalf("load: %d loads of %v events, want 5 of 20", len(load.Latencies), load.Extra["events"])
	}
	if _, err := EventStoreLoad(ctx, c, "es", "nope", 1); err == nil {
		t.Fatal("loading a key without records: no error")
	}
	// The key's versions are 0..19 in order: the fill gave it 20 records.
	res, err := c.ReadKey(ctx, "es", []byte("k42"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.HasHead || res.Head != 19 {
		t.Fatalf("k42's head: %d (has %v), want 19", res.Head, res.HasHead)
	}

	for _, tc := range []struct {
		name string
		run  func(context.Context, *client.Client, AppendOptions) (Report, error)
		o    AppendOptions
	}{
		{"append", EventStoreAppend, AppendOptions{Topic: "a", Partitions: 2, Writers: 10, Keys: 1}},
		{"dcb", EventStoreDCB, AppendOptions{Topic: "d", Partitions: 2, Writers: 10, Tags: 1}},
		{"dcb-many-tags", EventStoreDCB, AppendOptions{Topic: "d2", Partitions: 2, Writers: 4, Tags: 50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Duration = 500 * time.Millisecond
			r, err := tc.run(ctx, c, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if r.Records == 0 || len(r.Latencies) != int(r.Records) || r.Extra["failed"] != 0 {
				t.Fatalf("%d appends, %d latencies, %v failed", r.Records, len(r.Latencies), r.Extra["failed"])
			}
			t.Logf("%d appends, %v conflicts", r.Records, r.Extra["conflicts"])
			if tc.o.Writers > 1 && (tc.o.Keys == 1 || tc.o.Tags == 1) && r.Extra["conflicts"] == 0 {
				t.Logf("%d writers on one key or tag met no conflict in %d appends", tc.o.Writers, r.Records)
			}
			var out bytes.Buffer
			r.Print(&out, 0)
			if !strings.Contains(out.String(), "RESULT case=rewind-es-") || !strings.Contains(out.String(), "conflict_rate=") {
				t.Fatalf("output:\n%s", out.String())
			}
			if tc.name == "append" {
				// Every stored append is one version of the key: the head
				// counts them, conflicts never stored anything.
				res, err := c.ReadKey(ctx, "a", []byte("w0"), client.LastN(1))
				if err != nil {
					t.Fatal(err)
				}
				if res.Head+1 != r.Records {
					t.Fatalf("w0's head %d after %d appends", res.Head, r.Records)
				}
			}
		})
	}
}
