package check

import (
	"fmt"
	"slices"
	"time"

	"github.com/rewind-io/rewind/scenarios/history"
)

// bank adds the bank workload to a synthetic history, as a correct broker
// would have let the runner observe it: two accounts on partition 2 of
// topic "bank" (the test helpers that pick topic "t"'s partitions 0 and 1
// by number do not see it), three writers each, deciding from versions that are
// sometimes stale. An append from the current version is accepted
// (acknowledged, or of unknown outcome and stored); one from a stale
// version is refused with the actual version (or of unknown outcome and
// absent). Every checker must find this OK, the Log checker included: the
// appends are publishes like any other.
func (g *gen) bank() {
	const accounts, writers, bankPart = 2, 3, 2
	g.h.Topics = append(g.h.Topics, history.Topic{Name: "bank", Partitions: 3})
	type account struct {
		key      string
		versions []history.Record
	}
	var accts [accounts]account
	for a := range accts {
		accts[a].key = fmt.Sprintf("acct-%d", a)
	}
	var log []history.Record
	var seqs [accounts * writers]int
	for range 40 + g.rng.IntN(40) {
		w := g.rng.IntN(accounts * writers)
		a := &accts[w/writers]
		seq := seqs[w]
		seqs[w]++
		g.now = g.now.Add(time.Millisecond)
		// The writer loaded the account at head, or a version or two
		// before it (another writer got there first).
		n := len(a.versions)
		loaded := max(0, n-g.rng.IntN(3))
		if g.rng.IntN(3) != 0 {
			loaded = n
		}
		idem := fmt.Sprintf("w%d-%d", w, seq)
		op, amount := decideFrom(a.versions[:loaded], int64(1+g.rng.IntN(40)), g.rng.IntN(2) == 0)
		p := history.Publish{Publisher: 100 + w, Seq: seq, Topic: "bank", Key: a.key, IdemKey: idem,
			Value: history.BankValue(op, amount, idem), Start: g.now.Add(-time.Millisecond), End: g.now,
			Cond: &history.Condition{None: loaded == 0, Version: uint64(max(loaded, 1) - 1)}, Attempts: 1}
		stale := loaded != n
		switch r := g.rng.IntN(8); {
		case stale && r == 0:
			p.Outcome, p.Err = history.Unknown, "deadline exceeded" // and not stored
		case stale:
			p.Outcome, p.Cond.Conflict, p.Err = history.Failed, true, "failed_precondition"
			p.Cond.Actual, p.Cond.HasActual = uint64(n-1), true
		default:
			rec := history.Record{Partition: bankPart, Offset: uint64(len(log)), Key: a.key, Value: p.Value, IdemKey: idem,
				AppendTime: g.now, KeyVersion: uint64(n)}
			log = append(log, rec)
			a.versions = append(a.versions, rec)
			p.Outcome, p.Partition, p.Offset, p.MessageID, p.Cond.KeyVersion = history.Acked, bankPart, rec.Offset, fmt.Sprintf("b-%d", rec.Offset), rec.KeyVersion
			if r == 1 {
				p = history.Publish{Publisher: p.Publisher, Seq: p.Seq, Topic: p.Topic, Key: p.Key, IdemKey: idem, Value: p.Value,
					Start: p.Start, End: p.End, Cond: &history.Condition{None: p.Cond.None, Version: p.Cond.Version},
					Outcome: history.Unknown, Err: "deadline exceeded", Attempts: 2}
			}
		}
		g.h.Publishes = append(g.h.Publishes, p)
	}
	for _, node := range g.h.Nodes {
		g.h.Replicas = append(g.h.Replicas, history.Replica{Node: node, Topic: "bank", Partition: bankPart, End: uint64(len(log)), Records: slices.Clone(log)})
	}
	for _, a := range accts {
		kr := history.KeyRead{Topic: "bank", Key: a.key, Partition: bankPart, Records: slices.Clone(a.versions)}
		if n := len(a.versions); n > 0 {
			kr.Head, kr.HasHead = uint64(n-1), true
		}
		g.h.Keys = append(g.h.Keys, kr)
	}
}

// decideFrom is the bank's rule over a loaded history: open a new
// account; otherwise withdraw more than half of the balance when asked
// and there is money, else deposit.
func decideFrom(loaded []history.Record, amount int64, withdraw bool) (history.BankOp, int64) {
	if len(loaded) == 0 {
		return history.Open, 100
	}
	var balance int64
	for _, r := range loaded {
		switch op, x, _ := history.ParseBankValue(r.Value); op {
		case history.Withdraw:
			balance -= x
		default:
			balance += x
		}
	}
	if withdraw && balance > 0 {
		return history.Withdraw, balance/2 + 1 + amount%(balance-balance/2)
	}
	return history.Deposit, amount
}
