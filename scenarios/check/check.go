package check

import (
	"fmt"

	"github.com/rewind-io/rewind/scenarios/history"
)

// MaxViolations is how many violations a verdict keeps; the rest are only
// counted, in Stats["violations"] (all of them) and
// Stats["violations_dropped"] (those not kept), so that a badly broken
// run still gives a readable report.
const MaxViolations = 20

// Violation is one broken promise.
type Violation struct {
	// What is one precise sentence naming the topic, partition, offset,
	// value or member involved.
	What string
	// Records and Publishes are the data involved (copies).
	Records   []history.Record  `json:",omitempty"`
	Publishes []history.Publish `json:",omitempty"`
}

// Verdict is one checker's judgement of a history.
type Verdict struct {
	Checker     string // short name: log, appends, reads, follows, groups, filters, raft, gauntlet, liveness
	Description string // what the checker guarantees, one sentence
	// OK: no violation found. A skipped checker is OK (it found nothing)
	// and says why it did not check in Skipped.
	OK         bool
	Skipped    string `json:",omitempty"`
	Violations []Violation
	// Stats are the checker's figures (counts, seconds); the keys are
	// documented with each checker.
	Stats map[string]float64
}

// All runs every checker, in a fixed order: Log, Appends, Reads, Follows,
// Groups, Filters, RaftSafety, Gauntlet, Liveness.
func All(h *history.History) []Verdict {
	return []Verdict{Log(h), Appends(h), Reads(h), Follows(h), Groups(h), Filters(h), RaftSafety(h), Gauntlet(h), Liveness(h)}
}

// verdict builds a Verdict, keeping the first MaxViolations violations.
type verdict struct {
	v     Verdict
	count int
}

func newVerdict(checker, description string) *verdict {
	return &verdict{v: Verdict{Checker: checker, Description: description, Stats: map[string]float64{}}}
}

func (b *verdict) add(v Violation) {
	b.count++
	if len(b.v.Violations) < MaxViolations {
		b.v.Violations = append(b.v.Violations, v)
	}
}

func (b *verdict) addf(recs []history.Record, pubs []history.Publish, format string, args ...any) {
	b.add(Violation{What: fmt.Sprintf(format, args...), Records: recs, Publishes: pubs})
}

func (b *verdict) inc(stat string) { b.v.Stats[stat]++ }

func (b *verdict) set(stat string, x float64) { b.v.Stats[stat] = x }

func (b *verdict) skip(why string) Verdict {
	b.v.Skipped = why
	return b.done()
}

func (b *verdict) done() Verdict {
	b.v.OK = b.count == 0
	b.v.Stats["violations"] = float64(b.count)
	b.v.Stats["violations_dropped"] = float64(b.count - len(b.v.Violations))
	return b.v
}

// recs and pubs shorten building a Violation's data.
func recs(rs ...history.Record) []history.Record   { return rs }
func pubs(ps ...history.Publish) []history.Publish { return ps }

// part names one partition of one topic.
type part struct {
	topic string
	id    uint32
}

func (p part) String() string { return fmt.Sprintf("%s/%d", p.topic, p.id) }

func nameOf(p history.Publish) string {
	return fmt.Sprintf("publisher %d seq %d (value %q)", p.Publisher, p.Seq, p.Value)
}
