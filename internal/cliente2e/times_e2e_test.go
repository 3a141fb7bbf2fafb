package cliente2e_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rewind-io/rewind/sdk/client"
)

// TestTimesOutsideNanosecondRange replays and resets a group at times an
// int64 of nanoseconds cannot hold (after 2262, before 1678): they saturate
// on the server instead of wrapping around (issue 13, item 1).
func TestTimesOutsideNanosecondRange(t *testing.T) {
	s := startServer(t, "")
	c := client.New(s.addr)
	// The deadline only turns a hang (the wrapped times of old made some
	// of these ranges end in the future) into a failure.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	read := func(opts ...client.SubscribeOption) []string {
		t.Helper()
		sub, err := c.Subscribe(ctx, "t", opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		var out []string
		for r, err := range sub.Records() {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(r.Value))
		}
		return out
	}
	if _, err := c.CreateTopic(ctx, "t", client.WithPartitions(2)); err != nil {
		t.Fatal(err)
	}
	publishN(t, c, "t", "v", 10)
	all := read(client.Until(client.End()))
	if len(all) != 10 {
		t.Fatalf("replay of everything: %d records", len(all))
	}
	pos := func(s string) client.Position {
		t.Helper()
		p, err := client.ParsePosition(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		from, until string
		want        int
	}{
		{"@9999-12-31T23:59:59Z", "end", 0},
		{"@253402300799000", "end", 0}, // the same in Unix milliseconds
		{"@2262-04-12T00:00:00Z", "end", 0},
		{"@1600-01-01T00:00:00Z", "end", 10},
		{"@0001-01-01T00:00:00Z", "end", 10},
		{"@-11676096000000", "end", 10}, // 1600 in Unix milliseconds
		{"earliest", "@1600-01-01T00:00:00Z", 0},
	} {
		got := read(client.From(pos(tc.from)), client.Until(pos(tc.until)))
		if len(got) != tc.want {
			t.Errorf("--from %s --to %s: %d records, want %d", tc.from, tc.until, len(got), tc.want)
		}
	}

	// A stop after 2262 is no bound: every stored record comes (and the
	// stream would then follow new ones).
	sub, err := c.Subscribe(ctx, "t", client.From(client.Earliest()), client.Until(pos("@9999-12-31T23:59:59Z")))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for r, err := range sub.Records() {
		if err != nil {
			t.Fatal(err)
		}
		if got = append(got, string(r.Value)); len(got) == len(all) {
			break
		}
	}
	sub.Close()
	slices.Sort(all)
	slices.Sort(got)
	if diff := cmp.Diff(all, got); diff != "" {
		t.Errorf("--to @9999: (-want +got)\n%s", diff)
	}

	// A group reset to a time after every record plans the end offsets.
	plan, err := c.ResetGroup(ctx, "g", "t", pos("@9999-12-31T00:00:00Z"), nil, true, client.CreateGroup())
	if err != nil {
		t.Fatal(err)
	}
	_, parts, err := c.DescribeTopic(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range plan.Rows {
		if end := parts[r.Partition].EndOffset; r.New != end || end == 0 {
			t.Errorf("reset to @9999: partition %d plans offset %d, want the end %d", r.Partition, r.New, end)
		}
	}
	plan, err = c.ResetGroup(ctx, "g", "t", pos("@1600-01-01T00:00:00Z"), nil, true, client.CreateGroup())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range plan.Rows {
		if r.New != 0 {
			t.Errorf("reset to @1600: partition %d plans offset %d, want 0", r.Partition, r.New)
		}
	}
}
