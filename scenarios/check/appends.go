package check

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/rewind-io/rewind/scenarios/history"
)

// Appends judges the conditional appends (publishes with Cond, the bank
// workload) against each key's final history (History.Keys) and every
// replica:
//
//  1. A key's history holds versions 0, 1, 2, ... in increasing offsets,
//     ending at the head the read reported.
//  2. Every record of it is an append the workload made that was
//     acknowledged or of unknown outcome, stored once, with its value; a
//     refused or failed append is absent.
//  3. An accepted append (acknowledged, or of unknown outcome and stored)
//     became exactly the version after the one it expected (0 for a new
//     key), so no two accepted appends claimed the same expected version:
//     that would be a lost update.
//  4. An acknowledged append is stored at the offset and version it was
//     acknowledged with.
//  5. A refusal named a version other than the expected one, and one the
//     key really reached (or, for an expected version, at least one).
//  6. The business rule (the bank's): an account opens with its first
//     entry only, and replaying it never takes its balance below 0.
//  7. Every replica holds the key's records with the versions of the
//     key's history (versions are assigned at apply on every replica).
//
// Stats: keys, appends, acked, conflicts, unknown, unknown_stored,
// failed, records, lost, claimed_twice (expected versions claimed by more
// than one accepted append), wrong_version, negative (accounts whose
// balance went below 0).
func Appends(h *history.History) Verdict {
	b := newVerdict("appends", "every key's versions are dense from 0; each accepted conditional append became the version after "+
		"the one it expected, so no two claimed the same; no acknowledged append is lost; refused ones are absent; "+
		"no account's balance goes below 0; every replica agrees on the versions")
	byKey := map[topicValue][]history.Publish{}
	for _, p := range h.Publishes {
		if p.Cond != nil {
			k := topicValue{p.Topic, p.Key}
			byKey[k] = append(byKey[k], p)
		}
	}
	if len(byKey) == 0 {
		return b.skip("no conditional appends recorded")
	}
	reads := map[topicValue]*history.KeyRead{}
	for i := range h.Keys {
		kr := &h.Keys[i]
		reads[topicValue{kr.Topic, kr.Key}] = kr
	}
	keys := make([]topicValue, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b topicValue) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), strings.Compare(a.value, b.value))
	})
	for _, stat := range []string{"appends", "acked", "conflicts", "unknown", "unknown_stored", "failed", "records", "lost", "claimed_twice", "wrong_version", "negative"} {
		b.set(stat, 0)
	}
	b.set("keys", float64(len(keys)))
	for _, k := range keys {
		for _, p := range byKey[k] {
			b.inc("appends")
			switch {
			case p.Outcome == history.Acked:
				b.inc("acked")
			case p.Cond.Conflict:
				b.inc("conflicts")
			case p.Outcome == history.Unknown:
				b.inc("unknown")
			default:
				b.inc("failed")
			}
		}
		kr := reads[k]
		switch {
		case kr == nil:
			b.addf(nil, byKey[k], "key %q of %s was appended to but its final history was not read", k.value, k.topic)
			continue
		case kr.Err != "":
			b.addf(nil, byKey[k], "key %q of %s: its final history could not be read: %s", k.value, k.topic, kr.Err)
			continue
		}
		b.v.Stats["records"] += float64(len(kr.Records))
		checkKeyHistory(b, kr)
		stored := checkStoredAppends(b, kr, byKey[k])
		checkAccepted(b, kr, byKey[k], stored)
		checkRefusals(b, kr, byKey[k])
		checkBalance(b, kr)
	}
	checkReplicaVersions(b, h, reads)
	return b.done()
}

// checkKeyHistory: versions 0, 1, 2, ... at increasing offsets, all of the
// key, ending at the reported head.
func checkKeyHistory(b *verdict, kr *history.KeyRead) {
	for i, r := range kr.Records {
		switch {
		case r.Key != kr.Key:
			b.addf(recs(r), nil, "key %q of %s: its history holds a record of key %q at offset %d", kr.Key, kr.Topic, r.Key, r.Offset)
			return
		case r.KeyVersion != uint64(i):
			b.addf(recs(r), nil, "key %q of %s: versions are not dense from 0: record %d (offset %d) has version %d",
				kr.Key, kr.Topic, i, r.Offset, r.KeyVersion)
			return
		case i > 0 && r.Offset <= kr.Records[i-1].Offset:
			b.addf(recs(kr.Records[i-1], r), nil, "key %q of %s: version %d at offset %d does not come after version %d at offset %d",
				kr.Key, kr.Topic, i, r.Offset, i-1, kr.Records[i-1].Offset)
			return
		}
	}
	n := uint64(len(kr.Records))
	if kr.HasHead != (n > 0) || (n > 0 && kr.Head != n-1) {
		b.addf(nil, nil, "key %q of %s: the read returned %d records but reported head %d (has head %v)", kr.Key, kr.Topic, n, kr.Head, kr.HasHead)
	}
}

// checkStoredAppends matches each record of the key's history with the
// append that made it, and returns the records by idempotency key. A
// record no append made, one stored twice, and one whose append was
// refused or failed are violations.
func checkStoredAppends(b *verdict, kr *history.KeyRead, ps []history.Publish) map[string]history.Record {
	byIdem := map[string]history.Publish{}
	for _, p := range ps {
		byIdem[p.IdemKey] = p
	}
	stored := map[string]history.Record{}
	for _, r := range kr.Records {
		p, ok := byIdem[r.IdemKey]
		switch {
		case !ok || p.Value != r.Value:
			b.addf(recs(r), nil, "key %q of %s: version %d at offset %d (value %q) was never appended by the workload",
				kr.Key, kr.Topic, r.KeyVersion, r.Offset, r.Value)
			continue
		case p.Outcome == history.Failed && p.Cond.Conflict:
			b.addf(recs(r), pubs(p), "key %q of %s: %s was refused (a conflict) yet is stored as version %d at offset %d",
				kr.Key, kr.Topic, nameOf(p), r.KeyVersion, r.Offset)
		case p.Outcome == history.Failed:
			b.addf(recs(r), pubs(p), "key %q of %s: %s failed (nothing stored) yet is stored as version %d at offset %d",
				kr.Key, kr.Topic, nameOf(p), r.KeyVersion, r.Offset)
		}
		if first, twice := stored[r.IdemKey]; twice {
			b.addf(recs(first, r), pubs(p), "key %q of %s: %s is stored twice, as versions %d and %d",
				kr.Key, kr.Topic, nameOf(p), first.KeyVersion, r.KeyVersion)
			continue
		}
		stored[r.IdemKey] = r
	}
	return stored
}

// checkAccepted: an acknowledged append is stored where and as what it
// was acknowledged; no two accepted appends expected the same version (a
// lost update, reported first); an accepted append became the version
// after the one it expected (reported apart from a lost update, which
// explains it).
func checkAccepted(b *verdict, kr *history.KeyRead, ps []history.Publish, stored map[string]history.Record) {
	type expectation struct {
		none    bool
		version uint64
	}
	claims := map[expectation][]history.Publish{}
	var order []expectation
	for _, p := range ps {
		r, in := stored[p.IdemKey]
		switch {
		case p.Outcome == history.Acked && !in:
			b.inc("lost")
			b.addf(nil, pubs(p), "key %q of %s: acknowledged %s (version %d at offset %d) is missing from the key's history",
				kr.Key, kr.Topic, nameOf(p), p.Cond.KeyVersion, p.Offset)
			continue
		case p.Outcome == history.Acked && (r.Offset != p.Offset || r.KeyVersion != p.Cond.KeyVersion):
			b.addf(recs(r), pubs(p), "key %q of %s: %s was acknowledged as version %d at offset %d but is stored as version %d at offset %d",
				kr.Key, kr.Topic, nameOf(p), p.Cond.KeyVersion, p.Offset, r.KeyVersion, r.Offset)
		case p.Outcome == history.Unknown && in:
			b.inc("unknown_stored")
		case !in || p.Outcome == history.Failed: // a stored failure is reported above
			continue
		}
		e := expectation{p.Cond.None, p.Cond.Version}
		if p.Cond.None {
			e.version = 0
		}
		if claims[e] == nil {
			order = append(order, e)
		}
		claims[e] = append(claims[e], p)
	}
	expected := func(e expectation) string {
		if e.none {
			return "no record"
		}
		return fmt.Sprintf("version %d", e.version)
	}
	for _, e := range order {
		if c := claims[e]; len(c) > 1 {
			b.inc("claimed_twice")
			var rs []history.Record
			for _, p := range c {
				rs = append(rs, stored[p.IdemKey])
			}
			b.addf(rs, c, "key %q of %s: %d accepted appends all expected %s (a lost update): %s",
				kr.Key, kr.Topic, len(c), expected(e), names(c))
		}
	}
	for _, e := range order {
		want := e.version + 1
		if e.none {
			want = 0
		}
		for _, p := range claims[e] {
			r := stored[p.IdemKey]
			if r.KeyVersion == want {
				continue
			}
			b.inc("wrong_version")
			if len(claims[e]) == 1 {
				b.addf(recs(r), pubs(p), "key %q of %s: %s expected %s yet was stored as version %d at offset %d: its condition was not enforced",
					kr.Key, kr.Topic, nameOf(p), expected(e), r.KeyVersion, r.Offset)
			}
		}
	}
}

// checkRefusals: a refusal names a version other than the one expected,
// and one the key reached; a refusal of an expected version names one
// (the writer had loaded that version, and versions are never removed).
func checkRefusals(b *verdict, kr *history.KeyRead, ps []history.Publish) {
	n := uint64(len(kr.Records))
	for _, p := range ps {
		c := p.Cond
		if !c.Conflict {
			continue
		}
		switch {
		case c.None && !c.HasActual:
			b.addf(nil, pubs(p), "key %q of %s: %s expected no record and was refused, yet the refusal names no version", kr.Key, kr.Topic, nameOf(p))
		case !c.None && !c.HasActual:
			b.addf(nil, pubs(p), "key %q of %s: %s expected version %d and was refused as if the key had no record", kr.Key, kr.Topic, nameOf(p), c.Version)
		case !c.None && c.Actual == c.Version:
			b.addf(nil, pubs(p), "key %q of %s: %s was refused although the key was at the version it expected, %d", kr.Key, kr.Topic, nameOf(p), c.Version)
		case c.Actual >= n:
			b.addf(nil, pubs(p), "key %q of %s: %s was refused at version %d, which the key never reached (its history ends at %d records)",
				kr.Key, kr.Topic, nameOf(p), c.Actual, n)
		}
	}
}

// checkBalance replays an account: opened by its first entry only (a
// second opening counts as a deposit), never below 0. It reports the first
// break of each rule.
func checkBalance(b *verdict, kr *history.KeyRead) {
	var balance int64
	reopened := false
	for i, r := range kr.Records {
		op, amount, ok := history.ParseBankValue(r.Value)
		switch {
		case !ok:
			b.addf(recs(r), nil, "account %q of %s: version %d at offset %d is no bank entry: %q", kr.Key, kr.Topic, r.KeyVersion, r.Offset, r.Value)
			return
		case i == 0 && op != history.Open:
			b.addf(recs(r), nil, "account %q of %s: its first entry, at offset %d, is %q: an account opens with its first entry",
				kr.Key, kr.Topic, r.Offset, r.Value)
			return
		case i > 0 && op == history.Open && !reopened:
			reopened = true
			b.addf(recs(r), nil, "account %q of %s: version %d at offset %d is %q: an account opens only once",
				kr.Key, kr.Topic, r.KeyVersion, r.Offset, r.Value)
		}
		if op != history.Withdraw {
			balance += amount
			continue
		}
		if balance-amount < 0 {
			b.inc("negative")
			b.addf(recs(r), nil, "account %q of %s goes below 0 at version %d (offset %d): %d withdrawn from a balance of %d",
				kr.Key, kr.Topic, r.KeyVersion, r.Offset, amount, balance)
			return
		}
		balance -= amount
	}
}

// checkReplicaVersions: every replica of a key's partition holds the
// key's records, from the replica's Start, with the offsets, versions and
// values of the key's history.
func checkReplicaVersions(b *verdict, h *history.History, reads map[topicValue]*history.KeyRead) {
	var krs []*history.KeyRead
	for _, kr := range reads {
		if kr.Err == "" {
			krs = append(krs, kr)
		}
	}
	slices.SortFunc(krs, func(a, b *history.KeyRead) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), strings.Compare(a.Key, b.Key))
	})
	for i := range h.Replicas {
		r := &h.Replicas[i]
		held := map[string][]history.Record{}
		for _, rec := range r.Records {
			held[rec.Key] = append(held[rec.Key], rec)
		}
		for _, kr := range krs {
			if kr.Topic != r.Topic || kr.Partition != r.Partition {
				continue
			}
			want := kr.Records
			for len(want) > 0 && want[0].Offset < r.Start {
				want = want[1:] // removed by retention on this replica
			}
			if d := versionDifference(held[kr.Key], want); d != "" {
				b.addf(nil, nil, "node %d's replica of %s/%d disagrees with key %q's history: %s", r.Node, r.Topic, r.Partition, kr.Key, d)
			}
		}
	}
}

// versionDifference names the first record on which a replica's records
// of a key (got) and the key's history (want) differ.
func versionDifference(got, want []history.Record) string {
	for i := range min(len(got), len(want)) {
		g, w := got[i], want[i]
		if g.Offset != w.Offset || g.KeyVersion != w.KeyVersion || g.IdemKey != w.IdemKey || g.Value != w.Value {
			return fmt.Sprintf("the replica has version %d at offset %d (%q), the history version %d at offset %d (%q)",
				g.KeyVersion, g.Offset, g.Value, w.KeyVersion, w.Offset, w.Value)
		}
	}
	switch {
	case len(got) > len(want):
		g := got[len(want)]
		return fmt.Sprintf("the replica holds %d records of the key, the history %d; the first extra is version %d at offset %d",
			len(got), len(want), g.KeyVersion, g.Offset)
	case len(got) < len(want):
		w := want[len(got)]
		return fmt.Sprintf("the replica holds %d records of the key, the history %d; the first missing is version %d at offset %d",
			len(got), len(want), w.KeyVersion, w.Offset)
	}
	return ""
}

// names lists publishes by name.
func names(ps []history.Publish) string {
	var out []string
	for _, p := range ps {
		out = append(out, nameOf(p))
	}
	return strings.Join(out, ", ")
}
