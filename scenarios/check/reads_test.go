package check

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rewind-io/rewind/scenarios/history"
)

func TestReadsCatch(t *testing.T) {
	runCorruptions(t, []corruption{
		{"offset start one late", Reads, "began at offset", func(h *history.History) bool {
			r := findRead(h, history.AtOffset, history.None, "", 2, nil)
			return r != nil && dropFirst(r)
		}},
		{"offset start one early", Reads, "began at offset", func(h *history.History) bool {
			r := findRead(h, history.AtOffset, history.AtOffset, "", 1, func(r *history.Read) bool {
				_, ok := refRecord(h, r.Partition, r.From.Offset-1)
				return r.From.Offset > 0 && ok
			})
			if r == nil {
				return false
			}
			prev, _ := refRecord(h, r.Partition, r.From.Offset-1)
			r.Records = slices.Insert(r.Records, 0, prev)
			return true
		}},
		{"message ID stop delivered", Reads, "at or past the stop offset", func(h *history.History) bool {
			r := findRead(h, history.Earliest, history.AtMessageID, "", 1, func(r *history.Read) bool {
				_, ok := refRecord(h, r.Partition, r.To.Offset)
				return ok
			})
			return r != nil && appendNext(h, r)
		}},
		{"offset stop one early", Reads, "ended before offset", func(h *history.History) bool {
			r := findRead(h, history.AtOffset, history.AtOffset, "", 1, nil)
			return r != nil && dropLast(r)
		}},
		{"to the end stopping before EndAtStart", Reads, "ended before offset", func(h *history.History) bool {
			r := findRead(h, history.AtOffset, history.None, "", 1, func(r *history.Read) bool {
				return r.Records[len(r.Records)-1].Offset+1 >= r.EndAtStart
			})
			if r == nil {
				return false
			}
			for len(r.Records) > 0 && r.Records[len(r.Records)-1].Offset+1 >= r.EndAtStart {
				dropLast(r)
			}
			return true
		}},
		{"time seek returning the record before T", Reads, "before the start time", func(h *history.History) bool {
			r := findRead(h, history.AtTime, history.None, "", 1, func(r *history.Read) bool {
				_, ok := refRecord(h, r.Partition, r.Records[0].Offset-1)
				return r.Records[0].Offset > 0 && ok
			})
			if r == nil {
				return false
			}
			prev, _ := refRecord(h, r.Partition, r.Records[0].Offset-1)
			r.Records = slices.Insert(r.Records, 0, prev)
			return true
		}},
		{"time seek one late", Reads, "is missing", func(h *history.History) bool {
			r := findRead(h, history.AtTime, history.None, "", 2, nil)
			return r != nil && dropFirst(r)
		}},
		{"time stop delivered", Reads, "at or after the stop time", func(h *history.History) bool {
			r := findRead(h, history.AtOffset, history.AtTime, "", 1, func(r *history.Read) bool {
				_, ok := refRecord(h, r.Partition, r.Records[len(r.Records)-1].Offset+1)
				return ok
			})
			return r != nil && appendNext(h, r)
		}},
		{"earliest skipping the first record", Reads, "is missing", func(h *history.History) bool {
			r := findRead(h, history.Earliest, history.None, "", 2, func(r *history.Read) bool {
				return r.Records[0].Offset >= replicasOf(h, r.Partition)[0].Start
			})
			return r != nil && dropFirst(r)
		}},
		{"last N one short", Reads, "records for the last", func(h *history.History) bool {
			r := findRead(h, history.LastN, history.None, "", 2, func(r *history.Read) bool {
				return r.Records[0].Offset > replicasOf(h, r.Partition)[0].Start
			})
			return r != nil && dropFirst(r)
		}},
		{"last N one long", Reads, "minus", func(h *history.History) bool {
			r := findRead(h, history.LastN, history.None, "", 1, func(r *history.Read) bool {
				_, ok := refRecord(h, r.Partition, r.Records[0].Offset-1)
				return r.Records[0].Offset > 0 && ok && r.EndAtStart == r.Records[len(r.Records)-1].Offset+1
			})
			if r == nil {
				return false
			}
			prev, _ := refRecord(h, r.Partition, r.Records[0].Offset-1)
			r.Records = slices.Insert(r.Records, 0, prev)
			return true
		}},
		{"record differing from the replicas", Reads, "differs from the replicas", func(h *history.History) bool {
			r := findRead(h, history.Earliest, history.None, "", 1, func(r *history.Read) bool {
				return r.Records[0].Offset >= replicasOf(h, r.Partition)[0].Start
			})
			if r == nil {
				return false
			}
			r.Records[0].Value = "tampered"
			return true
		}},
		{"record read twice", Reads, "delivered twice", func(h *history.History) bool {
			r := findRead(h, history.Earliest, history.None, "", 2, nil)
			if r == nil {
				return false
			}
			r.Records = slices.Insert(r.Records, 1, r.Records[0])
			return true
		}},
		{"failed read with a wrong prefix", Reads, "skipped offset", func(h *history.History) bool {
			for i := range h.Reads {
				r := &h.Reads[i]
				if r.Err != "" && r.Filter == "" && len(r.Records) >= 2 && r.Records[0].Offset >= replicasOf(h, r.Partition)[0].Start {
					r.Records = slices.Delete(r.Records, 1, 2)
					return true
				}
			}
			return false
		}},
		{"record below the replicas differing from its ack", Reads, "was acknowledged there", func(h *history.History) bool {
			for i := range h.Reads {
				r := &h.Reads[i]
				if r.Filter == "" && len(r.Records) > 0 && r.Records[0].Offset < replicasOf(h, r.Partition)[0].Start &&
					ackedAtOffset(h, r.Partition, r.Records[0].Offset) >= 0 {
					r.Records[0].Value = "v-9-9"
					return true
				}
			}
			return false
		}},
	})
}

func TestFiltersCatch(t *testing.T) {
	runCorruptions(t, []corruption{
		{"filtered replay missing a match", Filters, "is missing", func(h *history.History) bool {
			r := findRead(h, history.AtOffset, history.AtOffset, "even", 2, nil)
			return r != nil && dropFirst(r)
		}},
		{"filtered replay missing its last match", Filters, "ended before offset", func(h *history.History) bool {
			r := findRead(h, history.Earliest, history.AtTime, "even", 1, nil)
			return r != nil && dropLast(r)
		}},
		{"filtered replay with a record the predicate rejects", Filters, "does not pass the filter", func(h *history.History) bool {
			r := findRead(h, history.Earliest, history.None, "even", 2, nil)
			if r == nil {
				return false
			}
			for off := r.Records[0].Offset + 1; off < r.Records[1].Offset; off++ {
				if rec, ok := refRecord(h, r.Partition, off); ok && !even(rec) {
					r.Records = slices.Insert(r.Records, 1, rec)
					return true
				}
			}
			return false
		}},
		{"filtered replay out of order", Filters, "came after", func(h *history.History) bool {
			r := findRead(h, history.AtOffset, history.None, "even", 2, nil)
			if r == nil {
				return false
			}
			r.Records[0], r.Records[1] = r.Records[1], r.Records[0]
			return true
		}},
	})
}

func TestFiltersSkipWithoutPredicate(t *testing.T) {
	h := generate(1)
	h.Topics = []history.Topic{{Name: "t", Partitions: 2}}
	v := Filters(h)
	if !v.OK || !strings.Contains(v.Skipped, `no predicate in the history for filter even`) || v.Stats["no_predicate"] == 0 {
		t.Fatalf("OK %v, skipped %q, stats %v", v.OK, v.Skipped, v.Stats)
	}
	if v := Reads(h); !v.OK || v.Skipped != "" {
		t.Fatalf("unfiltered reads must still be judged: %+v", v)
	}
}

func TestFollowsCatch(t *testing.T) {
	runCorruptions(t, []corruption{
		{"follower skipping a record", Follows, "skipped offset", func(h *history.History) bool {
			f := findFollow(h, 3)
			if f == nil {
				return false
			}
			f.Records = slices.Delete(f.Records, 1, 2)
			return true
		}},
		{"follower seeing a record again after a reconnect", Follows, "came after", func(h *history.History) bool {
			f := findFollow(h, 3)
			if f == nil {
				return false
			}
			f.Records = slices.Insert(f.Records, 2, f.Records[0])
			return true
		}},
		{"follower starting late", Follows, "began at offset", func(h *history.History) bool {
			f := findFollow(h, 2)
			if f == nil {
				return false
			}
			f.Records = f.Records[1:]
			return true
		}},
		{"follower seeing another value", Follows, "differs from the replicas", func(h *history.History) bool {
			f := findFollow(h, 1)
			if f == nil || f.Records[0].Offset < replicasOf(h, f.Partition)[0].Start {
				return false
			}
			f.Records[0].AppendTime = f.Records[0].AppendTime.Add(time.Second)
			return true
		}},
		{"follower seeing a record no replica holds", Follows, "past the end of every replica", func(h *history.History) bool {
			f := findFollow(h, 1)
			r := replicasOf(h, f.Partition)[0]
			if f == nil || f.Records[len(f.Records)-1].Offset+1 != r.End {
				return false
			}
			f.Records = append(f.Records, history.Record{Partition: f.Partition, Offset: r.End, Value: "v-0-999"})
			return true
		}},
	})
}

func findFollow(h *history.History, n int) *history.Follow {
	for i := range h.Follows {
		if len(h.Follows[i].Records) >= n {
			return &h.Follows[i]
		}
	}
	return nil
}

func dropFirst(r *history.Read) bool {
	if len(r.Records) == 0 {
		return false
	}
	r.Records = r.Records[1:]
	return true
}

func dropLast(r *history.Read) bool {
	if len(r.Records) == 0 {
		return false
	}
	r.Records = r.Records[:len(r.Records)-1]
	return true
}

// appendNext adds the reference's record after the read's last (or at
// its stop offset when it is empty).
func appendNext(h *history.History, r *history.Read) bool {
	off := r.To.Offset
	if len(r.Records) > 0 {
		off = r.Records[len(r.Records)-1].Offset + 1
	}
	rec, ok := refRecord(h, r.Partition, off)
	if ok {
		r.Records = append(r.Records, rec)
	}
	return ok
}
