package report

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rewind-io/rewind/scenarios/history"
)

// FuzzReport builds a history from arbitrary bytes — times before the
// start, centuries apart or missing, negative latencies, terms going
// back, NaN figures, strings that are not UTF-8 — and checks that the
// report never panics, report.json decodes, and report.html stays
// well-formed.
func FuzzReport(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"))
	f.Add(bytes.Repeat([]byte{0xff}, 64))
	f.Add([]byte("<script>&\x00\xfe\xff leader kill 1234567890abcdefghijklmnopqrstuvwxyz"))
	f.Add(binary.BigEndian.AppendUint64(bytes.Repeat([]byte{0x80}, 40), math.MaxUint64))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := fuzzReport(data)
		var js, page bytes.Buffer
		if err := JSON(&js, r); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadJSON(&js); err != nil {
			t.Fatal(err)
		}
		if err := HTML(&page, r); err != nil {
			t.Fatal(err)
		}
		doc := parse(t, page.Bytes())
		if n := len(doc.all(hasClass("rect", "fault"))); n != len(r.History.Faults) {
			t.Errorf("%d fault rects for %d faults", n, len(r.History.Faults))
		}
	})
}

// fuzzReport reads a report out of data, a few bytes per choice; when
// data runs out every choice is zero.
func fuzzReport(data []byte) *Report {
	next := func() uint64 {
		var b [8]byte
		n := copy(b[:], data)
		data = data[n:]
		return binary.LittleEndian.Uint64(b[:])
	}
	small := func() int { return int(next() % 8) }
	when := func() time.Time {
		switch v := next(); v % 5 {
		case 0:
			return time.Time{}
		case 1:
			return time.Unix(0, int64(v)) // anywhere in 1678..2262
		default:
			return t0.Add(time.Duration(int64(v)>>20) % (2 * time.Hour))
		}
	}
	str := func() string {
		n := min(small()*3, len(data))
		s := string(data[:n])
		data = data[n:]
		return s
	}
	h := &history.History{Scenario: str(), Seed: int64(next()), Start: when(), End: when()}
	for range small() {
		h.Nodes = append(h.Nodes, next()%5)
	}
	for range small() {
		h.Topics = append(h.Topics, history.Topic{Name: str(), Partitions: uint32(next() % 4)})
	}
	for range small() * 8 {
		h.Publishes = append(h.Publishes, history.Publish{Start: when(), End: when(), Outcome: []history.Outcome{history.Acked, history.Failed, history.Unknown, "odd"}[next()%4], Err: str()})
	}
	for range small() * 4 {
		h.Leaders = append(h.Leaders, history.LeaderObs{At: when(), Node: next() % 5, Topic: str(), Partition: uint32(next() % 3), Term: next() % 4, Leader: next() % 5})
	}
	for range small() {
		h.Faults = append(h.Faults, history.Fault{Name: str(), Kind: str(), Targets: []uint64{next()}, Start: when(), End: when()})
	}
	r := &Report{History: h, Passed: next()%2 == 0, Command: str(), Summary: Summary{}}
	figures := []float64{0, 1, -1, math.NaN(), math.Inf(1), math.Inf(-1), 1e300, 0.5}
	for range small() {
		r.Summary[str()+[]string{"", "_s", "_ms"}[next()%3]] = figures[next()%8]
	}
	for range small() {
		v := Verdict{Checker: str(), Description: str(), OK: next()%2 == 0, Stats: map[string]float64{str(): figures[next()%8]}}
		if next()%3 == 0 {
			v.Skipped = str()
		}
		for range small() {
			v.Violations = append(v.Violations, Violation{What: str(),
				Records:   []history.Record{{Key: str(), Value: strings.Repeat(str(), small()*50), AppendTime: when()}},
				Publishes: []history.Publish{{Start: when(), End: when(), Value: str()}}})
		}
		r.Verdicts = append(r.Verdicts, v)
	}
	return r
}
