package cliente2e_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// server is a real node on a loopback port (enginetest's), whose filters
// compile once per machine.
type server struct {
	node *enginetest.Node
	dir  string
	addr string // its URL
}

func startServer(t testing.TB, dir string) *server {
	t.Helper()
	return startServerWith(t, engine.Config{Dir: dir})
}

// startServerWith starts a node with cfg, served as opts say
// (enginetest.WithAddr: on a port it had before a restart).
func startServerWith(t testing.TB, cfg engine.Config, opts ...enginetest.Option) *server {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	// No outcome may depend on how fast the machine compiles: the compile
	// bounds are an hour (they are tested in the sandbox package), and
	// compiled modules are shared through the compilation cache of the
	// sandbox's tests, so each module compiles once per machine.
	if cfg.Sandbox.CompileTimeoutMillis == 0 {
		cfg.Sandbox.CompileTimeoutMillis = 3_600_000
	}
	if cfg.Sandbox.CompileWaitMillis == 0 {
		cfg.Sandbox.CompileWaitMillis = 3_600_000
	}
	shared := filepath.Join(os.TempDir(), "rewind-wasm-test-cache", wazeroVersion(filepath.Join("..", "..", "go.mod")))
	if err := errors.Join(os.MkdirAll(shared, 0o755), os.MkdirAll(cfg.Dir, 0o755)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(shared, filepath.Join(cfg.Dir, "wasm-cache")); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	n := enginetest.StartNode(t, cfg, opts...)
	return &server{node: n, dir: cfg.Dir, addr: n.URL}
}

// stop stops the node (enginetest.Node.Stop); the test's end reports a
// close error.
func (s *server) stop() { s.node.Stop() }

func publishN(t *testing.T, c *client.Client, topic string, prefix string, n int) []client.Result {
	t.Helper()
	msgs := make([]client.Message, n)
	for i := range msgs {
		msgs[i] = client.Message{Key: []byte(fmt.Sprintf("key-%d", i%5)), Value: []byte(fmt.Sprintf("%s-%d", prefix, i)),
			IdempotencyKey: fmt.Sprintf("%s-idem-%d", prefix, i), Headers: []client.Header{{Key: "n", Value: []byte(fmt.Sprint(i))}}}
	}
	res, err := c.Publish(context.Background(), topic, msgs...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func readAll(t *testing.T, c *client.Client, topic string, opts ...client.SubscribeOption) []client.Record {
	t.Helper()
	sub, err := c.Subscribe(context.Background(), topic, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var out []client.Record
	for r, err := range sub.Records() {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func values(rs []client.Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, string(r.Value))
	}
	return out
}

// TestEveryProtocol publishes and replays over Connect, gRPC and gRPC-web.
func TestEveryProtocol(t *testing.T) {
	s := startServer(t, "")
	for _, p := range []struct {
		name string
		p    client.Protocol
	}{{"connect", client.Connect}, {"grpc", client.GRPC}, {"grpcweb", client.GRPCWeb}} {
		t.Run(p.name, func(t *testing.T) {
			c := client.New(s.addr, client.WithProtocol(p.p))
			if _, err := c.CreateTopic(context.Background(), "proto-"+p.name, client.WithPartitions(2)); err != nil {
				t.Fatal(err)
			}
			res := publishN(t, c, "proto-"+p.name, "v", 20)
			got := readAll(t, c, "proto-"+p.name, client.Until(client.End()))
			if len(got) != 20 {
				t.Fatalf("replayed %d records", len(got))
			}
			byID := map[string]client.Result{}
			for _, r := range res {
				byID[r.MessageID] = r
			}
			for _, r := range got {
				a, ok := byID[r.MessageID]
				if !ok || a.Partition != r.Partition || a.Offset != r.Offset || !a.AppendTime.Equal(r.AppendTime) {
					t.Fatalf("record %+v does not match its publish result %+v", r, a)
				}
				if r.IdempotencyKey == "" || len(r.Headers) != 1 || r.Headers[0].Key != "n" {
					t.Fatalf("record lost its producer fields: %+v", r)
				}
			}
		})
	}
}

// TestStartPositions replays from every kind of start position.
func TestStartPositions(t *testing.T) {
	s := startServer(t, "")
	c := client.New(s.addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "pos", client.WithPartitions(3)); err != nil {
		t.Fatal(err)
	}
	first := publishN(t, c, "pos", "a", 30)
	time.Sleep(2 * time.Millisecond) // distinct append times between the waves (not a wait for a condition)
	second := publishN(t, c, "pos", "b", 30)
	all := readAll(t, c, "pos", client.Until(client.End()))
	if len(all) != 60 {
		t.Fatalf("%d records", len(all))
	}
	// The exact expected sets, computed from the full replay.
	after := func(pred func(r client.Record) bool) []string {
		var out []string
		for _, r := range all {
			if pred(r) {
				out = append(out, string(r.Value))
			}
		}
		return out
	}
	t0 := second[0].AppendTime
	for _, r := range second {
		if r.AppendTime.Before(t0) {
			t0 = r.AppendTime
		}
	}
	mid := second[10]
	var midTime time.Time
	for _, r := range all {
		if r.MessageID == mid.MessageID {
			midTime = r.AppendTime
		}
	}
	cases := []struct {
		name string
		opts []client.SubscribeOption
		want []string
	}{
		{"earliest", []client.SubscribeOption{client.From(client.Earliest())}, values(all)},
		{"latest", []client.SubscribeOption{client.From(client.Latest())}, nil},
		{"offset", []client.SubscribeOption{client.From(client.Offset(5)), client.Partitions(1)},
			after(func(r client.Record) bool { return r.Partition == 1 && r.Offset >= 5 })},
		{"time", []client.SubscribeOption{client.From(client.Time(t0))},
			after(func(r client.Record) bool { return !r.AppendTime.Before(t0) })},
		{"time back", []client.SubscribeOption{client.From(client.TimeBack(time.Hour))}, values(all)},
		{"records back", []client.SubscribeOption{client.From(client.RecordsBack(2))},
			after(func(r client.Record) bool {
				n := 0
				for _, o := range all {
					if o.Partition == r.Partition && o.Offset > r.Offset {
						n++
					}
				}
				return n < 2
			})},
		{"message id", []client.SubscribeOption{client.From(client.MessageID(mid.MessageID))},
			after(func(r client.Record) bool {
				if r.Partition == mid.Partition {
					return r.Offset >= mid.Offset
				}
				return !r.AppendTime.Before(midTime)
			})},
		{"stop before offset", []client.SubscribeOption{client.From(client.Earliest()), client.Partitions(2), client.Until(client.Offset(3))},
			after(func(r client.Record) bool { return r.Partition == 2 && r.Offset < 3 })},
		{"stop before time", []client.SubscribeOption{client.Until(client.Time(t0))},
			after(func(r client.Record) bool { return r.AppendTime.Before(t0) })},
		{"stop before message id", []client.SubscribeOption{client.Until(client.MessageID(mid.MessageID))},
			after(func(r client.Record) bool {
				if r.Partition == mid.Partition {
					return r.Offset < mid.Offset
				}
				return r.AppendTime.Before(midTime)
			})},
	}
	_ = first
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := append([]client.SubscribeOption{client.Until(client.End())}, tc.opts...)
			got := values(readAll(t, c, "pos", opts...))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("replay (-want +got):\n%s", diff)
			}
		})
	}
}

func code(err error) connect.Code { return connect.CodeOf(err) }

// TestBadInputGetsTheRightCode checks the error contract of every call.
func TestBadInputGetsTheRightCode(t *testing.T) {
	s := startServer(t, "")
	c := client.New(s.addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "e", client.WithPartitions(2), client.WithMaxRecordBytes(1000)); err != nil {
		t.Fatal(err)
	}
	publishN(t, c, "e", "x", 10)
	sub := func(opts ...client.SubscribeOption) error {
		s, err := c.Subscribe(ctx, "e", append(opts, client.Until(client.End()))...)
		if err == nil {
			s.Close()
		}
		return err
	}
	_, createErr := c.CreateTopic(ctx, "e", client.WithPartitions(1))
	_, badName := c.CreateTopic(ctx, "no spaces", client.WithPartitions(1))
	_, zeroParts := c.CreateTopic(ctx, "zero", client.WithPartitions(0))
	_, tooMany := c.CreateTopic(ctx, "many", client.WithPartitions(100000))
	_, _, unknown := c.DescribeTopic(ctx, "nope")
	_, pubUnknown := c.Publish(ctx, "nope", client.Message{Value: []byte("v")})
	_, tooBig := c.Publish(ctx, "e", client.Message{Value: make([]byte, 2000)})
	p9 := uint32(9)
	_, badPart := c.Publish(ctx, "e", client.Message{Value: []byte("v"), Partition: &p9})
	_, noRecords := c.Publish(ctx, "e")
	for _, tc := range []struct {
		name string
		err  error
		want connect.Code
	}{
		{"create existing", createErr, connect.CodeAlreadyExists},
		{"bad name", badName, connect.CodeInvalidArgument},
		{"zero partitions", zeroParts, connect.CodeInvalidArgument},
		{"absurd partitions", tooMany, connect.CodeInvalidArgument},
		{"describe unknown", unknown, connect.CodeNotFound},
		{"delete unknown", c.DeleteTopic(ctx, "nope"), connect.CodeNotFound},
		{"publish unknown topic", pubUnknown, connect.CodeNotFound},
		{"record too large", tooBig, connect.CodeInvalidArgument},
		{"unknown partition", badPart, connect.CodeInvalidArgument},
		{"no records", noRecords, connect.CodeInvalidArgument},
		{"subscribe unknown topic", func() error { _, err := c.Subscribe(ctx, "nope"); return err }(), connect.CodeNotFound},
		{"garbage message id", sub(client.From(client.MessageID("garbage"))), connect.CodeInvalidArgument},
		{"garbage token", sub(client.From(client.ResumeToken("garbage"))), connect.CodeInvalidArgument},
		{"offset beyond end", sub(client.From(client.Offset(1000)), client.Partitions(0)), connect.CodeOutOfRange},
		{"unknown partition to read", sub(client.Partitions(7)), connect.CodeInvalidArgument},
		{"progress too often", sub(client.ProgressEvery(time.Microsecond)), connect.CodeInvalidArgument},
	} {
		if got := code(tc.err); got != tc.want {
			t.Errorf("%s: %v (code %v), want %v", tc.name, tc.err, got, tc.want)
		}
	}
	// OutOfRange carries the partition's range; oversized records say which.
	err := sub(client.From(client.Offset(1000)), client.Partitions(0))
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatal(err)
	}
	var found bool
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if r, ok := v.(*rewindv1.OffsetRange); ok {
				found = r.GetRequestedOffset() == 1000 && r.GetEndOffset() > 0 && r.GetEarliestTime() != nil
			}
		}
	}
	if !found {
		t.Fatalf("OutOfRange without an OffsetRange detail: %v", err)
	}
	if !errors.As(tooBig, &ce) || len(ce.Details()) == 0 {
		t.Fatalf("record too large without a detail: %v", tooBig)
	}
	// Nothing rejected was stored.
	if got := readAll(t, c, "e", client.Until(client.End())); len(got) != 10 {
		t.Fatalf("%d records stored, want the 10 valid ones", len(got))
	}
}

// TestRestartReplaysTheSameHistory closes the server and opens the same data
// directory again: the replay is identical, offsets continue, and a resume
// token from before the restart still continues exactly.
func TestRestartReplaysTheSameHistory(t *testing.T) {
	s := startServer(t, "")
	c := client.New(s.addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "r", client.WithPartitions(2)); err != nil {
		t.Fatal(err)
	}
	publishN(t, c, "r", "one", 50)
	before := readAll(t, c, "r", client.Until(client.End()))
	sub, err := c.Subscribe(ctx, "r", client.Until(client.Offset(10)))
	if err != nil {
		t.Fatal(err)
	}
	for range sub.Records() {
	}
	tok := sub.ResumeToken()
	sub.Close()
	dir := s.dir
	s.stop()

	s = startServer(t, dir)
	c = client.New(s.addr)
	after := readAll(t, c, "r", client.Until(client.End()))
	if diff := cmp.Diff(before, after); diff != "" {
		t.Fatalf("history changed across a restart (-before +after):\n%s", diff)
	}
	resumed := readAll(t, c, "r", client.From(client.ResumeToken(tok)), client.Until(client.End()))
	var want []string
	for _, r := range before {
		if r.Offset >= 10 {
			want = append(want, string(r.Value))
		}
	}
	if diff := cmp.Diff(want, values(resumed)); diff != "" {
		t.Fatalf("resume after restart (-want +got):\n%s", diff)
	}
	res := publishN(t, c, "r", "two", 4)
	_, parts, _ := c.DescribeTopic(ctx, "r")
	total := uint64(0)
	for _, p := range parts {
		total += p.EndOffset
	}
	if total != 54 {
		t.Fatalf("end offsets sum to %d after restart and 4 more, want 54", total)
	}
	for _, r := range res {
		for _, b := range before {
			if b.Partition == r.Partition && b.Offset == r.Offset {
				t.Fatalf("offset %d/%d reused", r.Partition, r.Offset)
			}
		}
	}
}

// TestLiveSubscriberSeesEveryRecordInOrder follows a topic live while
// several publishers write to it.
func TestLiveSubscriberSeesEveryRecordInOrder(t *testing.T) {
	s := startServer(t, "")
	c := client.New(s.addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "live", client.WithPartitions(4)); err != nil {
		t.Fatal(err)
	}
	sub, err := c.Subscribe(ctx, "live", client.From(client.Latest()))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	const pubs, per = 4, 500
	var wg sync.WaitGroup
	for w := range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := c.NewPublisher("live", client.WithBatchSize(50))
			for i := range per {
				if _, err := p.Publish(ctx, client.Message{Key: []byte(fmt.Sprint("w", w)), Value: []byte(fmt.Sprint(i))}); err != nil {
					t.Error(err)
				}
			}
			if err := p.Close(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	next := map[string]int{}
	offsets := map[uint32]uint64{}
	got := 0
	for got < pubs*per && sub.Next() {
		r, ok := sub.Event().(*client.Records)
		if !ok {
			continue
		}
		for _, rec := range r.Records {
			if rec.Offset != offsets[rec.Partition] {
				t.Fatalf("partition %d: offset %d after %d", rec.Partition, rec.Offset, offsets[rec.Partition])
			}
			offsets[rec.Partition]++
			k := string(rec.Key)
			if string(rec.Value) != fmt.Sprint(next[k]) {
				t.Fatalf("publisher %s: got %s, want %d (order lost)", k, rec.Value, next[k])
			}
			next[k]++
			got++
		}
	}
	if sub.Err() != nil {
		t.Fatal(sub.Err())
	}
	wg.Wait()
}

// TestSlowConsumerLosesNothing opens a live stream, publishes far more than
// the HTTP/2 flow-control windows hold while the subscriber does not read,
// then reads: every record arrives, in order. The server stops reading for
// that stream instead of buffering or dropping.
func TestSlowConsumerLosesNothing(t *testing.T) {
	s := startServer(t, "")
	// Keys make a publish retried after a slow attempt (a busy machine:
	// 1 MiB requests under the race detector) a duplicate, not a second
	// copy (CI saw one stored twice).
	c := client.New(s.addr, client.WithGeneratedIdempotencyKeys())
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "slow", client.WithPartitions(1)); err != nil {
		t.Fatal(err)
	}
	sub, err := c.Subscribe(ctx, "slow", client.From(client.Latest()))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	value := make([]byte, 1024)
	const n = 40_000 // 40 MiB: more than the 16 MiB stream window
	for i := 0; i < n; i += 1000 {
		msgs := make([]client.Message, 1000)
		for j := range msgs {
			v := append([]byte(fmt.Sprintf("%08d", i+j)), value[8:]...)
			msgs[j] = client.Message{Value: v}
		}
		if _, err := c.Publish(ctx, "slow", msgs...); err != nil {
			t.Fatal(err)
		}
	}
	next := 0
	for next < n && sub.Next() {
		r, ok := sub.Event().(*client.Records)
		if !ok {
			continue
		}
		for _, rec := range r.Records {
			if rec.Offset != uint64(next) || string(rec.Value[:8]) != fmt.Sprintf("%08d", next) {
				t.Fatalf("record at offset %d (%q), want %d", rec.Offset, rec.Value[:8], next)
			}
			next++
		}
	}
	if err := sub.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestRecordsLoopsGoOnWhereTheLastStopped: breaking out of Records in the
// middle of an event and ranging again yields the rest, each record once.
func TestRecordsLoopsGoOnWhereTheLastStopped(t *testing.T) {
	s := startServer(t, "")
	c := client.New(s.addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "loops", client.WithPartitions(1)); err != nil {
		t.Fatal(err)
	}
	publishN(t, c, "loops", "r", 100) // one batch: a few events of many records
	sub, err := c.Subscribe(ctx, "loops", client.From(client.Earliest()), client.Until(client.End()))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var got []uint64
	for len(got) < 100 {
		before := len(got)
		for r, err := range sub.Records() {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, r.Offset)
			if len(got)%7 == 0 {
				break
			}
		}
		if len(got) == before {
			t.Fatalf("the stream ended after %d records", len(got))
		}
	}
	for i, off := range got {
		if off != uint64(i) {
			t.Fatalf("record %d has offset %d", i, off)
		}
	}
}

// wazeroVersion is the wazero version go.mod requires: the shared
// compilation cache is per version, as in the sandbox's tests (wazero
// cannot tell its own version inside a test binary).
func wazeroVersion(gomod string) string {
	b, _ := os.ReadFile(gomod)
	if m := regexp.MustCompile(`github\.com/tetratelabs/wazero (v\S+)`).FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return "unknown"
}
