package check

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rewind-io/rewind/scenarios/history"
)

// step is one decision of a hand-written bank history: what the writer
// expected, how the append ended for it, and whether it is stored.
type step struct {
	op      history.BankOp
	amount  int64
	none    bool   // expected no record
	expect  uint64 // else: expected this version
	outcome string // "ok", "conflict", "unknown", "failed"
	stored  bool
	actual  uint64 // conflict: the version the refusal names
}

// bankHistory builds the history of one account, "acct-0" on partition 0
// of topic "bank", from steps: stored steps get the next offset and
// version, in order; an "ok" step that is not stored was acknowledged at
// an offset and version nothing holds (offset 99, version 99).
func bankHistory(steps ...step) *history.History {
	t := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := &history.History{Scenario: "lost-update", Start: t, Nodes: []uint64{1, 2, 3},
		Topics: []history.Topic{{Name: "bank", Partitions: 1}}}
	kr := history.KeyRead{Topic: "bank", Key: "acct-0"}
	for i, s := range steps {
		idem := fmt.Sprintf("w%d-%d", i%2, i)
		p := history.Publish{Publisher: i % 2, Seq: i, Topic: "bank", Key: "acct-0", IdemKey: idem,
			Value: history.BankValue(s.op, s.amount, idem), Start: t.Add(time.Duration(i) * time.Millisecond), Attempts: 1,
			Cond: &history.Condition{None: s.none, Version: s.expect}}
		p.End = p.Start.Add(time.Millisecond)
		if s.stored {
			r := history.Record{Offset: uint64(len(kr.Records)), Key: "acct-0", Value: p.Value, IdemKey: idem,
				AppendTime: p.End, KeyVersion: uint64(len(kr.Records))}
			kr.Records = append(kr.Records, r)
			p.Offset, p.Cond.KeyVersion = r.Offset, r.KeyVersion
		}
		switch s.outcome {
		case "ok":
			p.Outcome, p.MessageID = history.Acked, fmt.Sprintf("m-%d", i)
			if !s.stored {
				p.Offset, p.Cond.KeyVersion = 99, 99
			}
		case "conflict":
			p.Outcome, p.Err, p.Offset, p.Cond.KeyVersion = history.Failed, "failed_precondition", 0, 0
			p.Cond.Conflict, p.Cond.Actual, p.Cond.HasActual = true, s.actual, true
		case "unknown":
			p.Outcome, p.Err, p.Offset, p.Cond.KeyVersion = history.Unknown, "deadline exceeded", 0, 0
		default:
			p.Outcome, p.Err, p.Offset, p.Cond.KeyVersion = history.Failed, "unavailable", 0, 0
		}
		h.Publishes = append(h.Publishes, p)
	}
	if n := len(kr.Records); n > 0 {
		kr.Head, kr.HasHead = uint64(n-1), true
	}
	h.Keys = []history.KeyRead{kr}
	for _, node := range h.Nodes {
		rs := append([]history.Record(nil), kr.Records...)
		h.Replicas = append(h.Replicas, history.Replica{Node: node, Topic: "bank", End: uint64(len(rs)), Records: rs})
	}
	h.End = t.Add(time.Second)
	return h
}

// goodBank is a valid run of two writers: both open the account, one is
// refused; both withdraw from version 0, one is refused; a deposit of
// unknown outcome is stored, another is not.
func goodBank() []step {
	return []step{
		{op: history.Open, amount: 100, none: true, outcome: "ok", stored: true},
		{op: history.Open, amount: 100, none: true, outcome: "conflict", actual: 0},
		{op: history.Withdraw, amount: 60, expect: 0, outcome: "ok", stored: true},
		{op: history.Withdraw, amount: 60, expect: 0, outcome: "conflict", actual: 1},
		{op: history.Deposit, amount: 10, expect: 1, outcome: "unknown", stored: true},
		{op: history.Deposit, amount: 5, expect: 1, outcome: "unknown"},
		{op: history.Withdraw, amount: 30, expect: 2, outcome: "failed"},
	}
}

func TestAppendsAcceptsAValidHistory(t *testing.T) {
	h := bankHistory(goodBank()...)
	for _, v := range []Verdict{Appends(h), Log(h)} {
		if !v.OK || v.Skipped != "" {
			t.Fatalf("%s: OK %v, skipped %q:\n%s", v.Checker, v.OK, v.Skipped, describe(v))
		}
	}
	v := Appends(h)
	want := map[string]float64{"keys": 1, "appends": 7, "acked": 2, "conflicts": 2, "unknown": 2, "unknown_stored": 1, "failed": 1, "records": 3}
	for k, x := range want {
		if v.Stats[k] != x {
			t.Errorf("stats[%s] = %v, want %v (all: %v)", k, v.Stats[k], x, v.Stats)
		}
	}
}

func TestAppendsSkipsWithoutConditionalAppends(t *testing.T) {
	v := Appends(&history.History{Publishes: []history.Publish{{Topic: "t", Key: "k", Outcome: history.Acked}}})
	if !v.OK || v.Skipped == "" {
		t.Fatalf("OK %v, skipped %q", v.OK, v.Skipped)
	}
}

// TestAppendsCatchesEachViolation breaks the valid history in each way
// the checker guards against.
func TestAppendsCatchesEachViolation(t *testing.T) {
	keyRead := func(h *history.History) *history.KeyRead { return &h.Keys[0] }
	for _, tc := range []struct {
		name  string
		steps []step
		edit  func(h *history.History)
		want  []string // each in some violation
	}{
		{
			// What bug-skip-conditions does: both withdrawals from version
			// 0 are accepted, the second as version 2.
			name: "lost-update",
			steps: []step{
				{op: history.Open, amount: 100, none: true, outcome: "ok", stored: true},
				{op: history.Withdraw, amount: 60, expect: 0, outcome: "ok", stored: true},
				{op: history.Withdraw, amount: 60, expect: 0, outcome: "ok", stored: true},
			},
			want: []string{"2 accepted appends all expected version 0 (a lost update)",
				"goes below 0 at version 2 (offset 2): 60 withdrawn from a balance of 40"},
		},
		{
			name: "two-opens",
			steps: []step{
				{op: history.Open, amount: 100, none: true, outcome: "ok", stored: true},
				{op: history.Open, amount: 100, none: true, outcome: "unknown", stored: true},
			},
			want: []string{"2 accepted appends all expected no record", "an account opens only once"},
		},
		{
			name:  "unknown-outcome-against-a-stale-version",
			steps: append(goodBank(), step{op: history.Deposit, amount: 1, expect: 0, outcome: "unknown", stored: true}),
			want:  []string{"2 accepted appends all expected version 0"},
		},
		{
			name: "condition-not-enforced",
			steps: []step{
				{op: history.Open, amount: 100, none: true, outcome: "ok", stored: true},
				{op: history.Deposit, amount: 10, expect: 5, outcome: "ok", stored: true},
			},
			want: []string{"expected version 5 yet was stored as version 1 at offset 1: its condition was not enforced"},
		},
		{
			name: "first-entry-not-an-opening",
			steps: []step{
				{op: history.Deposit, amount: 10, none: true, outcome: "ok", stored: true},
			},
			want: []string{`its first entry, at offset 0, is "deposit 10 w0-0": an account opens with its first entry`},
		},
		{
			name: "overdraft-decided-from-the-right-version",
			steps: []step{
				{op: history.Open, amount: 100, none: true, outcome: "ok", stored: true},
				{op: history.Withdraw, amount: 150, expect: 0, outcome: "ok", stored: true},
			},
			want: []string{"goes below 0 at version 1 (offset 1): 150 withdrawn from a balance of 100"},
		},
		{
			name:  "acknowledged-append-lost",
			steps: append(goodBank(), step{op: history.Deposit, amount: 1, expect: 2, outcome: "ok"}),
			want:  []string{"(version 99 at offset 99) is missing from the key's history"},
		},
		{
			name:  "refused-append-stored",
			steps: append(goodBank()[:6], step{op: history.Deposit, amount: 1, expect: 1, outcome: "conflict", actual: 2, stored: true}),
			want:  []string{"was refused (a conflict) yet is stored as version 3"},
		},
		{
			name:  "failed-append-stored",
			steps: append(goodBank()[:6], step{op: history.Deposit, amount: 1, expect: 2, outcome: "failed", stored: true}),
			want:  []string{"failed (nothing stored) yet is stored as version 3"},
		},
		{
			name:  "refused-at-the-expected-version",
			steps: append(goodBank(), step{op: history.Deposit, amount: 1, expect: 2, outcome: "conflict", actual: 2}),
			want:  []string{"was refused although the key was at the version it expected, 2"},
		},
		{
			name:  "refused-at-a-version-never-reached",
			steps: append(goodBank(), step{op: history.Deposit, amount: 1, expect: 1, outcome: "conflict", actual: 7}),
			want:  []string{"was refused at version 7, which the key never reached"},
		},
		{
			name:  "refused-as-if-empty",
			steps: goodBank(),
			edit:  func(h *history.History) { h.Publishes[3].Cond.HasActual, h.Publishes[3].Cond.Actual = false, 0 },
			want:  []string{"expected version 0 and was refused as if the key had no record"},
		},
		{
			name:  "versions-not-dense",
			steps: goodBank(),
			edit:  func(h *history.History) { keyRead(h).Records[1].KeyVersion = 5 },
			want:  []string{"versions are not dense from 0: record 1 (offset 1) has version 5"},
		},
		{
			name:  "versions-out-of-offset-order",
			steps: goodBank(),
			edit:  func(h *history.History) { keyRead(h).Records[2].Offset = 0 },
			want:  []string{"version 2 at offset 0 does not come after version 1 at offset 1"},
		},
		{
			name:  "head-disagrees",
			steps: goodBank(),
			edit:  func(h *history.History) { keyRead(h).Head = 5 },
			want:  []string{"the read returned 3 records but reported head 5"},
		},
		{
			name:  "acknowledged-at-another-version",
			steps: goodBank(),
			edit:  func(h *history.History) { h.Publishes[2].Cond.KeyVersion = 2 },
			want:  []string{"was acknowledged as version 2 at offset 1 but is stored as version 1 at offset 1"},
		},
		{
			name:  "stored-twice",
			steps: goodBank(),
			edit: func(h *history.History) {
				kr := keyRead(h)
				r := kr.Records[1]
				r.Offset, r.KeyVersion = 3, 3
				kr.Records = append(kr.Records, r)
				kr.Head = 3
			},
			want: []string{"is stored twice, as versions 1 and 3"},
		},
		{
			name:  "never-appended",
			steps: goodBank(),
			edit: func(h *history.History) {
				kr := keyRead(h)
				kr.Records = append(kr.Records, history.Record{Offset: 3, Key: "acct-0", Value: "deposit 1000 ghost", IdemKey: "ghost", KeyVersion: 3})
				kr.Head = 3
			},
			want: []string{`version 3 at offset 3 (value "deposit 1000 ghost") was never appended by the workload`},
		},
		{
			name:  "replica-disagrees",
			steps: goodBank(),
			edit:  func(h *history.History) { h.Replicas[1].Records[2].KeyVersion = 7 },
			want:  []string{"node 2's replica of bank/0 disagrees with key \"acct-0\"'s history: the replica has version 7 at offset 2"},
		},
		{
			name:  "replica-misses-the-key",
			steps: goodBank(),
			edit:  func(h *history.History) { h.Replicas[2].Records = nil },
			want:  []string{"node 3's replica of bank/0 disagrees with key \"acct-0\"'s history: the replica holds 0 records of the key, the history 3"},
		},
		{
			name:  "history-not-read",
			steps: goodBank(),
			edit:  func(h *history.History) { h.Keys = nil },
			want:  []string{`key "acct-0" of bank was appended to but its final history was not read`},
		},
		{
			name:  "history-unreadable",
			steps: goodBank(),
			edit:  func(h *history.History) { keyRead(h).Err, keyRead(h).Records = "unavailable: no leader", nil },
			want:  []string{"its final history could not be read: unavailable: no leader"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := bankHistory(tc.steps...)
			if tc.edit != nil {
				tc.edit(h)
			}
			v := Appends(h)
			if v.OK {
				t.Fatalf("not caught (stats %v)", v.Stats)
			}
			for _, w := range tc.want {
				found := false
				for _, x := range v.Violations {
					found = found || strings.Contains(x.What, w)
				}
				if !found {
					t.Errorf("no violation says %q:\n%s", w, describe(v))
				}
			}
		})
	}
}
