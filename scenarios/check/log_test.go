package check

import (
	"testing"
	"time"

	"github.com/rewind-io/rewind/scenarios/history"
)

func TestLogCatches(t *testing.T) {
	runCorruptions(t, []corruption{
		{"lost acked record", Log, "is missing", func(h *history.History) bool {
			for p := range uint32(2) {
				rs := replicasOf(h, p)
				if rs[0].End == rs[0].Start || ackedAtOffset(h, p, rs[0].End-1) < 0 {
					continue
				}
				for _, r := range rs {
					r.Records = r.Records[:len(r.Records)-1]
					r.End--
				}
				return true
			}
			return false
		}},
		{"acked record lost on one replica only", Log, "node 2 holds", func(h *history.History) bool {
			r := replicasOf(h, 0)[1]
			for i, rec := range r.Records {
				if ackedAtOffset(h, 0, rec.Offset) >= 0 {
					r.Records[i].Value, r.Records[i].IdemKey = "overwritten", ""
					return true
				}
			}
			return false
		}},
		{"record at another offset", Log, "stored at another offset", func(h *history.History) bool {
			return swapAdjacent(h, func(a, b history.Record) bool {
				return ackedAtOffset(h, 0, a.Offset) >= 0 && ackedAtOffset(h, 0, b.Offset) >= 0
			})
		}},
		{"duplicate record", Log, "stored more than once", func(h *history.History) bool {
			i := ackedAtOffset(h, 0, replicasOf(h, 0)[0].End-1)
			if i < 0 {
				return false
			}
			pb := h.Publishes[i]
			appendRecord(h, 0, pb.Key, pb.Value, pb.IdemKey)
			return true
		}},
		{"unknown publish stored twice", Log, "(unknown) is stored more than once", func(h *history.History) bool {
			for _, pb := range h.Publishes {
				if pb.Outcome == history.Unknown && stored(h, pb.Value) && pb.Publisher%2 == 0 {
					appendRecord(h, 0, pb.Key, pb.Value, pb.IdemKey)
					return true
				}
			}
			return false
		}},
		{"never-attempted record", Log, "that no publish attempted", func(h *history.History) bool {
			appendRecord(h, 1, "k1", "ghost", "idem-ghost")
			return true
		}},
		{"gap in offsets", Log, "offsets are not dense", func(h *history.History) bool {
			r := replicasOf(h, 1)[1]
			if len(r.Records) < 3 {
				return false
			}
			r.Records = append(r.Records[:1], r.Records[2:]...)
			return true
		}},
		{"replica claims more than it holds", Log, "holds", func(h *history.History) bool {
			replicasOf(h, 1)[2].End++
			return true
		}},
		{"reordered publisher", Log, "order breaks", func(h *history.History) bool {
			return reorderPublisher(h)
		}},
		{"replicas differ", Log, "replicas of t/0 differ:", func(h *history.History) bool {
			r := replicasOf(h, 0)[2]
			if len(r.Records) == 0 || ackedAtOffset(h, 0, r.Records[0].Offset) >= 0 {
				return false // an unacknowledged record, so only the comparison of replicas sees it
			}
			r.Records[0].AppendTime = r.Records[0].AppendTime.Add(-time.Nanosecond)
			return true
		}},
		{"replica behind", Log, "differ in length", func(h *history.History) bool {
			r := replicasOf(h, 1)[2]
			if len(r.Records) == 0 {
				return false
			}
			r.Records = r.Records[:len(r.Records)-1]
			r.End--
			return true
		}},
		{"digests differ", Log, "different digests", func(h *history.History) bool {
			replicasOf(h, 0)[1].Digest = "crc-other"
			return true
		}},
		{"failed publish present", Log, "but is stored", func(h *history.History) bool {
			for i, pb := range h.Publishes {
				if pb.Outcome == history.Acked && pb.Offset >= replicasOf(h, pb.Partition)[0].Start {
					h.Publishes[i].Outcome, h.Publishes[i].Err = history.Failed, "not stored"
					return true
				}
			}
			return false
		}},
		{"duplicate ack pointing elsewhere", Log, "acknowledged as a duplicate at", func(h *history.History) bool {
			for i, pb := range h.Publishes {
				if pb.Outcome == history.Acked && pb.Offset > replicasOf(h, pb.Partition)[0].Start {
					h.Publishes[i].Duplicate = true
					h.Publishes[i].Offset--
					return true
				}
			}
			return false
		}},
		{"record carrying another idempotency key", Log, "idempotency key", func(h *history.History) bool {
			for _, r := range replicasOf(h, 0) {
				if len(r.Records) == 0 {
					return false
				}
				r.Records[0].IdemKey = "idem-other"
			}
			return true
		}},
		{"append time going back", Log, "append time goes back", func(h *history.History) bool {
			for _, r := range replicasOf(h, 1) {
				if len(r.Records) < 2 {
					return false
				}
				r.Records[1].AppendTime = r.Records[0].AppendTime.Add(-time.Millisecond)
			}
			return true
		}},
		{"acked partition without replicas", Log, "no replica of t/1 was recorded", func(h *history.History) bool {
			var kept []history.Replica
			for _, r := range h.Replicas {
				if r.Partition != 1 {
					kept = append(kept, r)
				}
			}
			h.Replicas = kept
			return true
		}},
	})
}

func TestLogRetentionExempt(t *testing.T) {
	h := generate(1)
	// Retention removes every record on node 3 beyond what the others
	// hold: its acknowledged records are exempt there, not lost.
	r := replicasOf(h, 0)[2]
	n := len(r.Records) / 2
	r.Records, r.Start = r.Records[n:], r.Start+uint64(n)
	v := Log(h)
	if !v.OK {
		t.Fatalf("retention on one replica reported:\n%s", describe(v))
	}
	if v.Stats["retention_exempt"] == 0 {
		t.Fatalf("no record exempt: %v", v.Stats)
	}
}

func TestSummaryCounts(t *testing.T) {
	h := generate(3)
	s := Summary(h)
	var acked, failed, unknown int
	for _, p := range h.Publishes {
		switch p.Outcome {
		case history.Acked:
			acked++
		case history.Failed:
			failed++
		case history.Unknown:
			unknown++
		}
	}
	if s.Publishes != len(h.Publishes) || s.Acked != acked || s.Failed != failed || s.Unknown != unknown ||
		s.Lost+s.Duplicated+s.Reordered != 0 || s.Faults != 1 || s.Unrecovered != 0 {
		t.Fatalf("summary %+v; want %d publishes, %d acked, %d failed, %d unknown, nothing lost, one fault", s, len(h.Publishes), acked, failed, unknown)
	}
	if want := len(h.Publishes) + len(h.Reads) + len(h.Follows) + count(h, history.Committed) + count(h, history.CommitRefused) + count(h, history.Reset); s.Operations != want {
		t.Fatalf("operations %d, want %d", s.Operations, want)
	}
	if s.RecoveryMax <= 0 || s.RecoveryP50 != s.RecoveryMax {
		t.Fatalf("one fault: recovery p50 %s and max %s must be equal and positive", s.RecoveryP50, s.RecoveryMax)
	}

	// One lost, one duplicated and one reordered record are counted once each.
	for seed := int64(1); seed <= 50; seed++ {
		bad := generate(seed)
		i := ackedAtOffset(bad, 0, replicasOf(bad, 0)[0].End-1)
		j := ackedAtOffset(bad, 1, replicasOf(bad, 1)[0].End-1)
		if i < 0 || j < 0 || !reorderPublisher(bad) {
			continue
		}
		pb := bad.Publishes[j]
		appendRecord(bad, 1, pb.Key, pb.Value, pb.IdemKey)
		for _, r := range replicasOf(bad, 0) {
			r.Records, r.End = r.Records[:len(r.Records)-1], r.End-1
		}
		s = Summary(bad)
		if s.Lost != 1 || s.Duplicated != 1 || s.Reordered != 1 {
			t.Fatalf("seed %d: lost %d, duplicated %d, reordered %d; want 1 each", seed, s.Lost, s.Duplicated, s.Reordered)
		}
		return
	}
	t.Fatal("no seed had a place for the corruptions")
}

func count(h *history.History, k history.GroupEventKind) int {
	n := 0
	for _, ev := range h.Groups {
		if ev.Kind == k {
			n++
		}
	}
	return n
}

// appendRecord stores one more record at the end of every replica of p.
func appendRecord(h *history.History, p uint32, key, value, idem string) {
	for _, r := range replicasOf(h, p) {
		at := h.End
		if len(r.Records) > 0 {
			at = r.Records[len(r.Records)-1].AppendTime
		}
		r.Records = append(r.Records, history.Record{Partition: p, Offset: r.End, Key: key, Value: value, IdemKey: idem, AppendTime: at})
		r.End++
	}
}

func stored(h *history.History, value string) bool {
	for _, r := range h.Replicas {
		for _, rec := range r.Records {
			if rec.Value == value {
				return true
			}
		}
	}
	return false
}

// swapAdjacent swaps the contents of the first two adjacent records of
// partition 0 that ok accepts, on every replica, keeping offsets and times.
func swapAdjacent(h *history.History, ok func(a, b history.Record) bool) bool {
	rs := replicasOf(h, 0)
	for i := 1; i < len(rs[0].Records); i++ {
		if !ok(rs[0].Records[i-1], rs[0].Records[i]) {
			continue
		}
		for _, r := range rs {
			a, b := &r.Records[i-1], &r.Records[i]
			a.Key, b.Key = b.Key, a.Key
			a.Value, b.Value = b.Value, a.Value
			a.IdemKey, b.IdemKey = b.IdemKey, a.IdemKey
		}
		return true
	}
	return false
}

// reorderPublisher swaps two consecutive acknowledged publishes of one
// publisher in partition 0, in the acknowledgements and in the replicas
// alike: everything is where it was acknowledged, but out of order.
func reorderPublisher(h *history.History) bool {
	start := replicasOf(h, 0)[0].Start
	last := map[int]int{} // publisher → index of its last acked publish in partition 0
	for i, pb := range h.Publishes {
		if pb.Outcome != history.Acked || pb.Partition != 0 || pb.Offset < start {
			continue
		}
		j, ok := last[pb.Publisher]
		if !ok {
			last[pb.Publisher] = i
			continue
		}
		a, b := &h.Publishes[j], &h.Publishes[i]
		for _, r := range replicasOf(h, 0) {
			ra, rb := &r.Records[a.Offset-r.Start], &r.Records[b.Offset-r.Start]
			ra.Value, rb.Value = rb.Value, ra.Value
			ra.IdemKey, rb.IdemKey = rb.IdemKey, ra.IdemKey
		}
		a.Offset, b.Offset = b.Offset, a.Offset
		a.MessageID, b.MessageID = b.MessageID, a.MessageID
		return true
	}
	return false
}
