package cursor_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"

	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/msgid"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/record"
	"github.com/rewind-io/rewind/engine/internal/resume"
	"github.com/rewind-io/rewind/engine/internal/store"
	"github.com/rewind-io/rewind/raftlog"
)

// The scripts under testdata/ drive real partitions: a Pebble store on an
// in-memory filesystem, a raft host running one single-voter group per
// partition, and partition state machines whose clock the script sets.
//
// Commands:
//
//	topic partitions=N [cache=BYTES]
//	    A fresh store, host and topic (id 7) of N partitions on raft groups
//	    2..N+1 (a broker keeps group 1 for its metadata), sharing one tail
//	    cache of BYTES (default 1 MiB; 0 caches nothing).
//	append p=P n=K at=T
//	    Sets the clock to T and appends K records to partition P in one
//	    Append (one batch); waits until durable. Record i's value is
//	    "p<P>-<offset>". Prints the offsets [first, end) and the append time.
//	bounds
//	    Prints every partition's visible state.
//	clock t=T
//	    Sets the clock (append times, time watermarks) without appending.
//	resolve [partitions=A,B] start=KIND [stop=KIND] [now=T] [deliver] [save=NAME]
//	    cursor.Resolve over the partitions selected (default: all) with now
//	    (default: the clock). Prints one line per cursor, or the error. With
//	    deliver it then plays the cursors over the partitions the way a
//	    stream does (Admit, Advance, Finish up to the visible end, then the
//	    time watermark) and prints the offsets delivered. With save the
//	    cursors are kept under NAME for later deliver commands.
//	    Start kinds: earliest, latest, offset:N, time:T, id:P/OFF[@TOPIC],
//	    back:N, ago:NANOS, token:P=N,P=N[@TOPIC].
//	    Stop kinds: follow (default), offset:N, time:T, id:P/OFF[@TOPIC], end.
//	deliver name=NAME
//	    Plays saved cursors further (after more appends or a clock change)
//	    and prints what they deliver now and their state.
//	read p=P from=N [count=K]
//	    One Reader: reads the batch containing N, then the K-1 batches after
//	    it (sequential reads), printing each batch and whether the cache
//	    served it.
//	cache
//	    Prints the tail cache's size and the batches it holds.
//	drop-cache
//	    Forgets every cached batch, so reads go to Pebble.
//	restart
//	    Closes the host and the store and opens them again over the same
//	    filesystem with an empty cache (the clock is kept).

const topicID = 7

func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &harness{t: t}
		defer h.close()
		datadriven.RunTest(t, path, h.cmd)
	})
}

type harness struct {
	t          testing.TB
	fs         vfs.FS
	db         *pebble.DB
	host       *raftlog.Host
	cache      *partition.Cache
	cacheBytes int64
	parts      []*partition.Partition
	clock      atomic.Int64
	saved      map[string][]cursor.Cursor
}

func (h *harness) open(n int) {
	t := h.t
	t.Helper()
	db, err := store.Open(store.Config{Dir: "/data", FS: h.fs, CacheBytes: 1 << 20, MemTableBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	host, err := raftlog.Open(raftlog.Config{NodeID: 1, DB: db, TickInterval: 10 * time.Millisecond})
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	host.Start()
	h.db, h.host = db, host
	h.cache = partition.NewCache(h.cacheBytes)
	h.parts = nil
	for i := range n {
		g := uint64(2 + i)
		p, err := partition.Open(partition.Config{
			Group: g, TopicID: topicID, Index: uint32(i), DB: db, Host: host, Cache: h.cache,
			Now: h.clock.Load,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := host.AddGroup(raftlog.GroupConfig{ID: g, Voters: []uint64{1}, SM: p}); err != nil {
			t.Fatal(err)
		}
		h.parts = append(h.parts, p)
	}
}

func (h *harness) close() {
	if h.host == nil {
		return
	}
	if err := h.host.Close(); err != nil {
		h.t.Errorf("host close: %v", err)
	}
	if err := h.db.Close(); err != nil {
		h.t.Errorf("store close: %v", err)
	}
	h.host, h.db, h.parts = nil, nil, nil
}

func (h *harness) logs() []cursor.Log {
	logs := make([]cursor.Log, len(h.parts))
	for i, p := range h.parts {
		logs[i] = p
	}
	return logs
}

func (h *harness) cmd(t *testing.T, d *datadriven.TestData) string {
	h.t = t
	if d.Cmd != "topic" && h.host == nil {
		d.Fatalf(t, "no topic yet")
	}
	switch d.Cmd {
	case "topic":
		h.close()
		var n int
		d.ScanArgs(t, "partitions", &n)
		h.cacheBytes = 1 << 20
		d.MaybeScanArgs(t, "cache", &h.cacheBytes)
		h.fs = vfs.NewMem()
		h.clock.Store(0)
		h.saved = nil
		h.open(n)
		return ""
	case "append":
		return h.append(t, d)
	case "bounds":
		var sb strings.Builder
		for _, p := range h.parts {
			b := p.Bounds()
			if b.Empty() {
				fmt.Fprintf(&sb, "p%d: empty [%d, %d)\n", p.Index(), b.LogStart, b.Next)
				continue
			}
			fmt.Fprintf(&sb, "p%d: [%d, %d) first-time=%d last-time=%d\n", p.Index(), b.LogStart, b.Next, b.FirstTime, b.LastTime)
		}
		return sb.String()
	case "clock":
		var now int64
		d.ScanArgs(t, "t", &now)
		h.clock.Store(now)
		return ""
	case "resolve":
		return h.resolve(t, d)
	case "deliver":
		var name string
		d.ScanArgs(t, "name", &name)
		cs, ok := h.saved[name]
		if !ok {
			d.Fatalf(t, "no cursors saved as %q", name)
		}
		var sb strings.Builder
		for i := range cs {
			sb.WriteString(h.deliver(t, &cs[i]))
		}
		return sb.String()
	case "read":
		return h.read(t, d)
	case "cache":
		var sb strings.Builder
		fmt.Fprintf(&sb, "%d bytes\n", h.cache.Bytes())
		for _, p := range h.parts {
			var batches []string
			for off := p.Bounds().LogStart; off < p.Bounds().Next; {
				b := h.cache.Get(p.Group(), off)
				if b == nil {
					off++
					continue
				}
				batches = append(batches, fmt.Sprintf("[%d, %d)", b.Base, b.End()))
				off = b.End()
			}
			if len(batches) == 0 {
				batches = append(batches, "nothing")
			}
			fmt.Fprintf(&sb, "p%d: %s\n", p.Index(), strings.Join(batches, " "))
		}
		return sb.String()
	case "drop-cache":
		for _, p := range h.parts {
			h.cache.Drop(p.Group())
		}
		return fmt.Sprintf("cache holds %d bytes\n", h.cache.Bytes())
	case "restart":
		n := len(h.parts)
		h.close()
		h.open(n)
		return ""
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
		return ""
	}
}

func (h *harness) part(t *testing.T, d *datadriven.TestData) *partition.Partition {
	var p int
	d.ScanArgs(t, "p", &p)
	if p < 0 || p >= len(h.parts) {
		d.Fatalf(t, "no partition %d", p)
	}
	return h.parts[p]
}

func (h *harness) append(t *testing.T, d *datadriven.TestData) string {
	p := h.part(t, d)
	var n int
	var at int64
	d.ScanArgs(t, "n", &n)
	d.ScanArgs(t, "at", &at)
	s, err := h.appendAt(int(p.Index()), n, at)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	return fmt.Sprintf("p%d: offsets [%d, %d) append-time=%d\n", p.Index(), s.Base, s.Base+uint64(s.Count), s.AppendTime)
}

// appendAt sets the clock to at and appends n records to partition p in one
// batch, waiting until it is durable.
func (h *harness) appendAt(p, n int, at int64) (partition.Segment, error) {
	h.clock.Store(at)
	part := h.parts[p]
	// The harness is the only writer, so the offsets to come are known.
	next := part.Bounds().Next
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i].Value = fmt.Appendf(nil, "p%d-%d", p, next+uint64(i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := part.Append(ctx, recs)
	if err != nil {
		return partition.Segment{}, fmt.Errorf("append to p%d: %w", p, err)
	}
	if len(a.Segments) != 1 {
		return partition.Segment{}, fmt.Errorf("append landed in %d batches, want 1: %+v", len(a.Segments), a.Segments)
	}
	if s := a.Segments[0]; s.Base != next {
		return partition.Segment{}, fmt.Errorf("append landed at %d, want %d", s.Base, next)
	}
	return a.Segments[0], nil
}

func (h *harness) resolve(t *testing.T, d *datadriven.TestData) string {
	var selected []uint32
	if arg, ok := d.Arg("partitions"); ok {
		for _, v := range strings.Split(arg.SingleVal(t), ",") {
			selected = append(selected, uint32(parseUint(t, d, v)))
		}
	} else {
		for i := range h.parts {
			selected = append(selected, uint32(i))
		}
	}
	var startArg, stopArg string
	d.ScanArgs(t, "start", &startArg)
	d.MaybeScanArgs(t, "stop", &stopArg)
	now := h.clock.Load()
	d.MaybeScanArgs(t, "now", &now)
	start := parseStart(t, d, startArg)
	stop := parseStop(t, d, stopArg)

	cs, err := cursor.Resolve(topicID, h.logs(), selected, start, stop, now)
	if err != nil {
		return formatErr(err)
	}
	var sb strings.Builder
	for _, c := range cs {
		sb.WriteString(formatCursor(c))
	}
	if d.HasArg("deliver") {
		for i := range cs {
			sb.WriteString(h.deliver(t, &cs[i]))
		}
	}
	var name string
	if d.MaybeScanArgs(t, "save", &name) {
		if h.saved == nil {
			h.saved = make(map[string][]cursor.Cursor)
		}
		h.saved[name] = cs
	}
	return sb.String()
}

func formatErr(err error) string {
	var oor *cursor.OutOfRangeError
	switch {
	case errors.As(err, &oor):
		return fmt.Sprintf("out of range: partition=%d requested=%d log-start=%d end=%d earliest-time=%d\n",
			oor.Partition, oor.Requested, oor.LogStart, oor.End, oor.EarliestTime)
	case errors.Is(err, cursor.ErrInvalid):
		return fmt.Sprintf("invalid: %v\n", err)
	default:
		return fmt.Sprintf("error: %v\n", err)
	}
}

func formatCursor(c cursor.Cursor) string {
	mintime := "-"
	if c.MinTime != math.MinInt64 {
		mintime = strconv.FormatInt(c.MinTime, 10)
	}
	var stops []string
	if c.StopOffset != cursor.NoOffset {
		stops = append(stops, fmt.Sprintf("offset:%d", c.StopOffset))
	}
	if c.StopTime != cursor.NoTime {
		stops = append(stops, fmt.Sprintf("time:%d", c.StopTime))
	}
	stop := "-"
	if len(stops) > 0 {
		stop = strings.Join(stops, ",")
	}
	s := fmt.Sprintf("p%d: next=%d mintime=%s stop=%s done=%t", c.Partition, c.Next, mintime, stop, c.Done)
	if c.CaughtUp {
		s += " caught-up"
	}
	return s + "\n"
}

// deliver plays c over its partition as a stream would (see
// stream.readEvent and stream.run): every record from c.Next to the visible
// end goes through Admit, then the cursor advances or finishes; at the end
// an offset stop or a passed time watermark finishes it.
func (h *harness) deliver(t *testing.T, c *cursor.Cursor) string {
	p := h.parts[c.Partition]
	r := p.NewReader()
	defer r.Close()
	wasDone := c.Done
	var delivered []string
	end := p.Bounds().Next
	var rec record.Record
read:
	for !c.Done && c.Next < end {
		b, _, err := r.Read(c.Next)
		if err != nil {
			t.Fatalf("read p%d at %d: %v", c.Partition, c.Next, err)
		}
		for it := b.Records.Iter(); it.Next(&rec); {
			off := b.Base + uint64(rec.OffsetDelta)
			deliver, stop := c.Admit(off, b.AppendTime)
			if stop {
				c.Finish(off)
				break read
			}
			if deliver {
				delivered = append(delivered, strconv.FormatUint(off, 10))
				if want := fmt.Sprintf("p%d-%d", c.Partition, off); string(rec.Value) != want {
					t.Fatalf("record at p%d offset %d holds %q, want %q", c.Partition, off, rec.Value, want)
				}
			}
			c.Advance(off)
		}
	}
	reason := ""
	switch {
	case wasDone:
		reason = "already done"
	case c.Done:
		reason = "stopped in the log"
	case c.Next >= c.StopOffset:
		c.Finish(c.StopOffset)
		reason = "reached its stop offset"
	case c.StopTime != cursor.NoTime && p.TimeWatermark() >= c.StopTime:
		c.Finish(c.Next)
		reason = "time watermark passed its stop time"
	default:
		reason = "waiting at the end"
	}
	list := "none"
	if len(delivered) > 0 {
		list = strings.Join(delivered, " ")
	}
	return fmt.Sprintf("p%d delivers: %s; next=%d done=%t (%s)\n", c.Partition, list, c.Next, c.Done, reason)
}

func (h *harness) read(t *testing.T, d *datadriven.TestData) string {
	p := h.part(t, d)
	var from uint64
	d.ScanArgs(t, "from", &from)
	count := 1
	d.MaybeScanArgs(t, "count", &count)
	r := p.NewReader()
	defer r.Close()
	var sb strings.Builder
	for range count {
		b, fromCache, err := r.Read(from)
		if err != nil {
			fmt.Fprintf(&sb, "read %d: error: %v\n", from, err)
			break
		}
		src := "pebble"
		if fromCache {
			src = "cache"
		}
		var vals []string
		var rec record.Record
		it := b.Records.Iter()
		for it.Next(&rec) {
			vals = append(vals, fmt.Sprintf("%d:%s", b.Base+uint64(rec.OffsetDelta), rec.Value))
		}
		if err := it.Err(); err != nil {
			vals = append(vals, "error: "+err.Error())
		}
		fmt.Fprintf(&sb, "read %d: batch [%d, %d) span=%d append-time=%d from=%s records=%s\n",
			from, b.Base, b.End(), b.Span, b.AppendTime, src, strings.Join(vals, " "))
		from = b.End()
	}
	return sb.String()
}

func parseUint(t *testing.T, d *datadriven.TestData, s string) uint64 {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		d.Fatalf(t, "%q: %v", s, err)
	}
	return v
}

func parseInt(t *testing.T, d *datadriven.TestData, s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		d.Fatalf(t, "%q: %v", s, err)
	}
	return v
}

// parseTopic splits an optional "@TOPIC" suffix off s.
func parseTopic(t *testing.T, d *datadriven.TestData, s string) (string, uint64) {
	if body, topic, ok := strings.Cut(s, "@"); ok {
		return body, parseUint(t, d, topic)
	}
	return s, topicID
}

// parseID parses P/OFFSET[@TOPIC].
func parseID(t *testing.T, d *datadriven.TestData, s string) msgid.ID {
	s, topic := parseTopic(t, d, s)
	p, off, ok := strings.Cut(s, "/")
	if !ok {
		d.Fatalf(t, "message ID %q: want P/OFFSET", s)
	}
	return msgid.ID{TopicID: topic, Partition: uint32(parseUint(t, d, p)), Offset: parseUint(t, d, off)}
}

func parseStart(t *testing.T, d *datadriven.TestData, s string) cursor.Start {
	kind, val, _ := strings.Cut(s, ":")
	switch kind {
	case "earliest":
		return cursor.Start{Kind: cursor.Earliest}
	case "latest":
		return cursor.Start{Kind: cursor.Latest}
	case "offset":
		return cursor.Start{Kind: cursor.AtOffset, Offset: parseUint(t, d, val)}
	case "time":
		return cursor.Start{Kind: cursor.AtTime, Time: parseInt(t, d, val)}
	case "id":
		return cursor.Start{Kind: cursor.AtMessageID, ID: parseID(t, d, val)}
	case "back":
		return cursor.Start{Kind: cursor.RecordsBack, N: parseUint(t, d, val)}
	case "ago":
		return cursor.Start{Kind: cursor.TimeBack, Back: time.Duration(parseInt(t, d, val))}
	case "token":
		val, topic := parseTopic(t, d, val)
		tok := resume.Token{TopicID: topic}
		if val != "" {
			for _, pos := range strings.Split(val, ",") {
				p, next, ok := strings.Cut(pos, "=")
				if !ok {
					d.Fatalf(t, "token position %q: want P=N", pos)
				}
				tok.Positions = append(tok.Positions, resume.Position{Partition: uint32(parseUint(t, d, p)), Next: parseUint(t, d, next)})
			}
		}
		return cursor.Start{Kind: cursor.FromToken, Token: tok}
	default:
		d.Fatalf(t, "unknown start %q", s)
		return cursor.Start{}
	}
}

func parseStop(t *testing.T, d *datadriven.TestData, s string) cursor.Stop {
	kind, val, _ := strings.Cut(s, ":")
	switch kind {
	case "", "follow":
		return cursor.Stop{Kind: cursor.Follow}
	case "offset":
		return cursor.Stop{Kind: cursor.BeforeOffset, Offset: parseUint(t, d, val)}
	case "time":
		return cursor.Stop{Kind: cursor.BeforeTime, Time: parseInt(t, d, val)}
	case "id":
		return cursor.Stop{Kind: cursor.BeforeMessageID, ID: parseID(t, d, val)}
	case "end":
		return cursor.Stop{Kind: cursor.AtEnd}
	default:
		d.Fatalf(t, "unknown stop %q", s)
		return cursor.Stop{}
	}
}

// fresh returns a cursor with no start constraint and no stop, as Resolve
// initializes them.
func fresh(next uint64) cursor.Cursor {
	return cursor.Cursor{Next: next, MinTime: math.MinInt64, StopOffset: cursor.NoOffset, StopTime: cursor.NoTime}
}

func TestAdmit(t *testing.T) {
	type verdict struct{ Deliver, Stop bool }
	withMin := fresh(5)
	withMin.MinTime = 100
	stopOff := fresh(5)
	stopOff.StopOffset = 8
	stopTime := fresh(5)
	stopTime.StopTime = 200
	both := fresh(5)
	both.MinTime, both.StopOffset, both.StopTime = 100, 8, 200
	for _, tc := range []struct {
		name   string
		c      cursor.Cursor
		offset uint64
		time   int64
		want   verdict
	}{
		{"before next is skipped (already delivered)", fresh(5), 4, 0, verdict{false, false}},
		{"next is delivered", fresh(5), 5, 0, verdict{true, false}},
		{"after next is delivered", fresh(5), 9, 0, verdict{true, false}},
		{"older than min time is skipped", withMin, 5, 99, verdict{false, false}},
		{"at min time is delivered (inclusive)", withMin, 5, 100, verdict{true, false}},
		{"offset just before the stop is delivered", stopOff, 7, 0, verdict{true, false}},
		{"offset at the stop stops (exclusive)", stopOff, 8, 0, verdict{false, true}},
		{"offset past the stop stops", stopOff, 9, 0, verdict{false, true}},
		{"time just before the stop is delivered", stopTime, 5, 199, verdict{true, false}},
		{"time at the stop stops (exclusive)", stopTime, 5, 200, verdict{false, true}},
		{"time past the stop stops", stopTime, 5, 201, verdict{false, true}},
		{"a stop wins over being already delivered", stopOff, 8, 0, verdict{false, true}},
		{"a stop wins over min time", both, 8, 50, verdict{false, true}},
		{"a time stop wins over min time", both, 6, 250, verdict{false, true}},
		{"inside every bound", both, 6, 150, verdict{true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			before := c
			var got verdict
			got.Deliver, got.Stop = c.Admit(tc.offset, tc.time)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Admit(%d, %d) (-want +got):\n%s", tc.offset, tc.time, diff)
			}
			if diff := cmp.Diff(before, c); diff != "" {
				t.Errorf("Admit changed the cursor (-before +after):\n%s", diff)
			}
		})
	}
}

func TestAdvance(t *testing.T) {
	c := fresh(5)
	c.Advance(5)
	if c.Next != 6 {
		t.Fatalf("Advance(5) from 5: next=%d, want 6", c.Next)
	}
	c.Advance(9) // a gap in offsets (a batch span with holes)
	if c.Next != 10 {
		t.Fatalf("Advance(9) from 6: next=%d, want 10", c.Next)
	}
	c.Advance(3) // a record before next (re-read of a batch) never moves back
	if c.Next != 10 {
		t.Fatalf("Advance(3) from 10: next=%d, want 10", c.Next)
	}
	if c.Done {
		t.Fatal("Advance marked the cursor done")
	}
}

func TestFinish(t *testing.T) {
	c := fresh(5)
	c.Finish(8)
	if !c.Done || c.Next != 8 {
		t.Fatalf("Finish(8) from 5: next=%d done=%t, want 8 true", c.Next, c.Done)
	}
	c = fresh(5)
	c.Finish(3)
	if !c.Done || c.Next != 5 {
		t.Fatalf("Finish(3) from 5: next=%d done=%t, want 5 true (never backwards)", c.Next, c.Done)
	}
}

func newHarness(t *testing.T, partitions int) *harness {
	h := &harness{t: t, fs: vfs.NewMem(), cacheBytes: 1 << 20}
	h.open(partitions)
	t.Cleanup(h.close)
	return h
}

func (h *harness) mustAppend(p, n int, at int64) partition.Segment {
	h.t.Helper()
	s, err := h.appendAt(p, n, at)
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

// tile resolves consecutive ranges [earliest, cuts[0]), [cuts[0], cuts[1]),
// ..., [cuts[n-1], end) over every partition, plays each over the
// partitions as a stream would, and reports every record not delivered
// exactly once, and every range whose start record it did not deliver.
func (h *harness) tile(cuts []msgid.ID) []string {
	t := h.t
	t.Helper()
	all := make([]uint32, len(h.parts))
	for i := range all {
		all[i] = uint32(i)
	}
	type rec struct {
		p   uint32
		off uint64
	}
	seen := make(map[rec][]int) // the ranges that delivered it
	var problems []string
	start := cursor.Start{Kind: cursor.Earliest}
	var rec0 record.Record
	for i := 0; i <= len(cuts); i++ {
		stop := cursor.Stop{Kind: cursor.AtEnd}
		if i < len(cuts) {
			stop = cursor.Stop{Kind: cursor.BeforeMessageID, ID: cuts[i]}
		}
		cs, err := cursor.Resolve(topicID, h.logs(), all, start, stop, h.clock.Load())
		if err != nil {
			t.Fatalf("range %d: %v", i, err)
		}
		for _, c := range cs {
			p := h.parts[c.Partition]
			r := p.NewReader()
			end := p.Bounds().Next
		read:
			for !c.Done && c.Next < end {
				b, _, err := r.Read(c.Next)
				if err != nil {
					t.Fatal(err)
				}
				for it := b.Records.Iter(); it.Next(&rec0); {
					off := b.Base + uint64(rec0.OffsetDelta)
					deliver, stop := c.Admit(off, b.AppendTime)
					if stop {
						c.Finish(off)
						break read
					}
					if deliver {
						seen[rec{c.Partition, off}] = append(seen[rec{c.Partition, off}], i)
					}
					c.Advance(off)
				}
			}
			r.Close()
		}
		if i > 0 {
			if id := cuts[i-1]; !slices.Contains(seen[rec{id.Partition, id.Offset}], i) {
				problems = append(problems, fmt.Sprintf("range %d does not deliver its start p%d/%d", i, id.Partition, id.Offset))
			}
		}
		if i < len(cuts) {
			start = cursor.Start{Kind: cursor.AtMessageID, ID: cuts[i]}
		}
	}
	for _, p := range h.parts {
		for off := uint64(0); off < p.Bounds().Next; off++ {
			if rs := seen[rec{uint32(p.Index()), off}]; len(rs) != 1 {
				problems = append(problems, fmt.Sprintf("p%d/%d delivered by ranges %v, want exactly one", p.Index(), off, rs))
			}
		}
	}
	return problems
}

// TestHalfOpenRangesTile checks the property the package promises: a stop
// position is not delivered and is exactly the next range's start, so
// consecutive ranges given by message IDs (which also cut every other
// partition by time) deliver every record exactly once.
func TestHalfOpenRangesTile(t *testing.T) {
	h := newHarness(t, 3)
	// Interleaved times, times shared across partitions, a clock that goes
	// back (partition 1's last batch is stamped 40, not 35).
	h.mustAppend(0, 3, 10)
	h.mustAppend(1, 2, 10)
	h.mustAppend(2, 1, 20)
	h.mustAppend(0, 2, 20)
	h.mustAppend(1, 4, 30)
	h.mustAppend(2, 3, 30)
	h.mustAppend(0, 1, 40)
	h.mustAppend(1, 1, 40)
	h.mustAppend(1, 2, 35)
	h.mustAppend(2, 2, 50)
	// Cut points in different partitions, in strictly increasing time order,
	// some in the middle of a batch.
	cuts := []msgid.ID{
		{TopicID: topicID, Partition: 1, Offset: 1}, // time 10
		{TopicID: topicID, Partition: 0, Offset: 3}, // time 20
		{TopicID: topicID, Partition: 2, Offset: 2}, // time 30
		{TopicID: topicID, Partition: 1, Offset: 7}, // time 40 (its clock said 35)
	}
	for _, p := range h.tile(cuts) {
		t.Error(p)
	}
}

// TestHalfOpenRangesTileOnTimeTies is the same property when two
// consecutive cuts, in different partitions, share an append time. A
// message ID is a point in the order (append time, partition, offset), so
// cuts taken in that order tile even on ties (this failed before the
// tie-break: a record was delivered twice and a range missed its start).
func TestHalfOpenRangesTileOnTimeTies(t *testing.T) {
	h := newHarness(t, 2)
	h.mustAppend(0, 3, 100) // p0 [0, 3) @100
	h.mustAppend(1, 2, 150) // p1 [0, 2) @150
	h.mustAppend(0, 2, 200) // p0 [3, 5) @200
	h.mustAppend(1, 2, 200) // p1 [2, 4) @200
	cuts := []msgid.ID{
		{TopicID: topicID, Partition: 0, Offset: 3}, // (200, p0, 3)
		{TopicID: topicID, Partition: 1, Offset: 3}, // (200, p1, 3), after p1/2 (also 200)
	}
	for _, p := range h.tile(cuts) {
		t.Error(p)
	}
}

// TestAppendTimeBefore1970 checks the documented rule (a batch's time is
// max(the clock at proposal, the previous batch's time)) for the first
// batches of a partition when the clock reads before 1970, which the time
// index supports (keys sorts negative times first). It fails: an empty
// partition behaves as if a previous batch was stamped 0.
func TestAppendTimeBefore1970(t *testing.T) {
	h := newHarness(t, 1)
	for _, tc := range []struct{ clock, want int64 }{{-200, -200}, {-300, -200}, {-100, -100}, {50, 50}} {
		if s := h.mustAppend(0, 1, tc.clock); s.AppendTime != tc.want {
			t.Errorf("append with the clock at %d: append time %d, want %d", tc.clock, s.AppendTime, tc.want)
		}
	}
}

// TestResolveLogStartAboveZero covers what live partitions cannot show yet:
// no retention moves their log start above 0. A fake Log with a log start
// of 10 checks the bounds on that side.
func TestResolveLogStartAboveZero(t *testing.T) {
	l := fakeLog{index: 0, st: partition.State{LogStart: 10, Next: 20, FirstTime: 500, LastTime: 900}}
	topic := []cursor.Log{l}
	for _, tc := range []struct {
		name  string
		start cursor.Start
		want  string
	}{
		{"earliest is the log start", cursor.Start{Kind: cursor.Earliest}, "p0: next=10 mintime=- stop=- done=false\n"},
		{"the log start is a valid offset", cursor.Start{Kind: cursor.AtOffset, Offset: 10}, "p0: next=10 mintime=- stop=- done=false\n"},
		{"below the log start is out of range", cursor.Start{Kind: cursor.AtOffset, Offset: 9},
			"out of range: partition=0 requested=9 log-start=10 end=20 earliest-time=500\n"},
		{"records back stop at the log start", cursor.Start{Kind: cursor.RecordsBack, N: 15}, "p0: next=10 mintime=- stop=- done=false\n"},
		{"records back within the log", cursor.Start{Kind: cursor.RecordsBack, N: 4}, "p0: next=16 mintime=- stop=- done=false\n"},
		{"a time before the first record is the log start", cursor.Start{Kind: cursor.AtTime, Time: 100}, "p0: next=10 mintime=100 stop=- done=false\n"},
		{"a message ID below the log start is out of range", cursor.Start{Kind: cursor.AtMessageID, ID: msgid.ID{TopicID: topicID, Offset: 3}},
			"out of range: partition=0 requested=3 log-start=10 end=20 earliest-time=500\n"},
		{"a token below the log start is out of range",
			cursor.Start{Kind: cursor.FromToken, Token: resume.Token{TopicID: topicID, Positions: []resume.Position{{Partition: 0, Next: 9}}}},
			"out of range: partition=0 requested=9 log-start=10 end=20 earliest-time=500\n"},
		{"an unknown start kind is invalid", cursor.Start{Kind: cursor.StartKind(99)}, "invalid: cursor: invalid position: start kind 99\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			cs, err := cursor.Resolve(topicID, topic, []uint32{0}, tc.start, cursor.Stop{}, 0)
			if err != nil {
				got = formatErr(err)
			} else {
				for _, c := range cs {
					got += formatCursor(c)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	_, err := cursor.Resolve(topicID, topic, []uint32{0}, cursor.Start{}, cursor.Stop{Kind: cursor.StopKind(99)}, 0)
	if !errors.Is(err, cursor.ErrInvalid) {
		t.Errorf("unknown stop kind: %v, want ErrInvalid", err)
	}
}

// fakeLog is a Log with fixed bounds. It answers time seeks up to its first
// record's time (the log start) and nothing else: only what the test above
// needs.
type fakeLog struct {
	index uint32
	st    partition.State
}

func (l fakeLog) Index() uint32           { return l.index }
func (l fakeLog) Bounds() partition.State { return l.st }
func (l fakeLog) SeekTime(t int64) (uint64, error) {
	if t <= l.st.FirstTime {
		return l.st.LogStart, nil
	}
	return 0, errors.New("fakeLog: SeekTime past the first record is not faked")
}
func (l fakeLog) TimeOf(offset uint64) (int64, error) {
	return 0, errors.New("fakeLog: TimeOf is not faked")
}

// growingLog is a log that a publisher appends one record to between any
// two looks at its bounds.
type growingLog struct {
	fakeLog
	next *uint64
}

func (l growingLog) Bounds() partition.State {
	st := l.st
	st.Next = *l.next
	*l.next++
	return st
}

// TestResolveReadsEachPartitionsBoundsOnce: "the last 5 records, to the
// end" is exactly 5 records even when a publish lands while the stream is
// resolved. The start and the stop used to read the end separately, so a
// record appended between them made the range one longer.
func TestResolveReadsEachPartitionsBoundsOnce(t *testing.T) {
	next := uint64(20)
	l := growingLog{fakeLog: fakeLog{st: partition.State{LogStart: 0, FirstTime: 500, LastTime: 900}}, next: &next}
	for _, tc := range []struct {
		start cursor.Start
		want  uint64 // records in the range
	}{
		{cursor.Start{Kind: cursor.RecordsBack, N: 5}, 5},
		{cursor.Start{Kind: cursor.Latest}, 0},
		{cursor.Start{Kind: cursor.Earliest}, 20},
	} {
		next = 20
		cs, err := cursor.Resolve(topicID, []cursor.Log{l}, []uint32{0}, tc.start, cursor.Stop{Kind: cursor.AtEnd}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := cs[0].StopOffset - cs[0].Next; got != tc.want {
			t.Errorf("start %+v to the end: [%d, %d) holds %d records, want %d", tc.start, cs[0].Next, cs[0].StopOffset, got, tc.want)
		}
	}
}
