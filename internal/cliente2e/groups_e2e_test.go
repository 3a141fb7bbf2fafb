package cliente2e_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/sdk/client"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// delivery is one record as a member saw it.
type delivery struct {
	member string
	part   uint32
	off    uint64
	value  string
}

// TestGroupOfThreeWhileMembersJoinAndLeave runs members over 8 partitions
// while records are published and members come and go: every record is
// delivered at least once, each member sees each partition in offset order
// for as long as it holds it (a member that gets a partition back re-reads
// from the group's commit: at-least-once), and a member started after
// everyone stopped continues from the commits without losing a record.
func TestGroupOfThreeWhileMembersJoinAndLeave(t *testing.T) {
	s := startServer(t, "")
	c := client.New(s.addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "work", client.WithPartitions(8)); err != nil {
		t.Fatal(err)
	}
	const total = 4000
	var (
		mu   sync.Mutex
		seen []delivery
	)
	runMember := func(ctx context.Context, name string, stop <-chan struct{}) error {
		sub, err := c.Subscribe(ctx, "work", client.Group("g"), client.ClientName(name), client.AutoCommit(0))
		if err != nil {
			return err
		}
		defer sub.Close()
		owned := map[uint32]bool{}
		tenure := map[uint32]int{}
		for sub.Next() {
			if a, ok := sub.Event().(*client.Assigned); ok {
				now := map[uint32]bool{}
				for _, pp := range a.Partitions {
					now[pp.Partition] = true
					if !owned[pp.Partition] {
						tenure[pp.Partition]++ // a new tenure re-reads from the group's commit
					}
				}
				owned = now
			}
			if r, ok := sub.Event().(*client.Records); ok {
				mu.Lock()
				for _, rec := range r.Records {
					seen = append(seen, delivery{fmt.Sprintf("%s#%d", name, tenure[rec.Partition]), rec.Partition, rec.Offset, string(rec.Value)})
				}
				mu.Unlock()
			}
			select {
			case <-stop:
				return nil // Close commits what was processed
			default:
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		return sub.Err()
	}
	type running struct {
		stop chan struct{}
		done chan error
	}
	start := func(name string) running {
		r := running{stop: make(chan struct{}), done: make(chan error, 1)}
		go func() { r.done <- runMember(ctx, name, r.stop) }()
		return r
	}
	members := map[string]running{"m1": start("m1"), "m2": start("m2"), "m3": start("m3")}
	p := c.NewPublisher("work", client.WithBatchSize(100))
	for i := range total {
		if _, err := p.Publish(ctx, client.Message{Value: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
		switch i {
		case 1000: // a member leaves
			close(members["m2"].stop)
			if err := <-members["m2"].done; err != nil {
				t.Fatal(err)
			}
			delete(members, "m2")
		case 2000: // a new one joins
			members["m4"] = start("m4")
		case 3000: // and another leaves
			close(members["m1"].stop)
			if err := <-members["m1"].done; err != nil {
				t.Fatal(err)
			}
			delete(members, "m1")
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Wait until everything was delivered to someone.
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		got := map[string]bool{}
		for _, d := range seen {
			got[d.value] = true
		}
		mu.Unlock()
		if len(got) == total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d records delivered", len(got), total)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition across member goroutines, bounded by the deadline
	}
	for n, r := range members {
		close(r.stop)
		// The member notices the stop at its next event: publish one.
		if _, err := c.Publish(ctx, "work", client.Message{Value: []byte("nudge-" + n)}); err != nil {
			t.Fatal(err)
		}
		if err := <-r.done; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	last := map[string]uint64{}
	for _, d := range seen {
		k := fmt.Sprintf("%s/%d", d.member, d.part)
		if prev, ok := last[k]; ok && d.off <= prev {
			t.Fatalf("member (and tenure) %s saw partition %d offset %d after %d", d.member, d.part, d.off, prev)
		}
		last[k] = d.off
	}
	// Everyone is gone; the commits say where the group is. A new member
	// reads only what was never committed: at most the nudges and records
	// delivered but not committed, never a hole.
	groups, err := c.DescribeGroup(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	for _, gp := range groups[0].Partitions {
		if !gp.Committed {
			t.Fatalf("partition %d has no commit", gp.Partition)
		}
	}
	sub, err := c.Subscribe(ctx, "work", client.Group("g"))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	// The new member's stream starts each partition exactly at the
	// committed offset: nothing between the commit and the end is lost.
	for sub.Next() {
		if a, ok := sub.Event().(*client.Assigned); ok {
			if len(a.Partitions) != 8 {
				// A member that just stopped may not have left yet on the
				// server (its stream's end travels there): wait for the
				// rebalance that gives this member everything.
				continue
			}
			for _, pp := range a.Partitions {
				if pp.NextOffset != groups[0].Partitions[pp.Partition].CommittedOffset {
					t.Fatalf("partition %d restarts at %d, committed %d", pp.Partition, pp.NextOffset, groups[0].Partitions[pp.Partition].CommittedOffset)
				}
			}
			break
		}
	}
}

// TestLiveResetReplaysFromATimestamp resets a live member's group to a time:
// its stream says replay_started per partition and re-delivers exactly the
// records appended at or after that time, without reconnecting.
func TestLiveResetReplaysFromATimestamp(t *testing.T) {
	s := startServer(t, "")
	c := client.New(s.addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "rs", client.WithPartitions(2)); err != nil {
		t.Fatal(err)
	}
	publishN(t, c, "rs", "early", 10)
	time.Sleep(2 * time.Millisecond) // a gap between the waves (not a wait for a condition)
	late := publishN(t, c, "rs", "late", 10)
	all := readAll(t, c, "rs", client.Until(client.End()))
	cut := late[0].AppendTime
	for _, r := range late {
		if r.AppendTime.Before(cut) {
			cut = r.AppendTime
		}
	}
	want := map[uint32][]string{}
	for _, r := range all {
		if !r.AppendTime.Before(cut) {
			want[r.Partition] = append(want[r.Partition], string(r.Value))
		}
	}
	sub, err := c.Subscribe(ctx, "rs", client.Group("live"), client.AutoCommit(0))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	// Read everything first.
	n := 0
	for n < len(all) && sub.Next() {
		if r, ok := sub.Event().(*client.Records); ok {
			n += len(r.Records)
		}
	}
	res, err := c.ResetGroup(ctx, "live", "rs", client.Time(cut), nil, false)
	if err != nil || !res.Executed {
		t.Fatalf("reset: %+v %v", res, err)
	}
	got := map[uint32][]string{}
	started := map[uint32]bool{}
	for len(started) < 2 || countAll(got) < countAll(want) {
		if !sub.Next() {
			t.Fatal(sub.Err())
		}
		switch e := sub.Event().(type) {
		case *client.ReplayStarted:
			if e.Epoch != res.Epoch {
				t.Fatalf("replay_started epoch %d, want %d", e.Epoch, res.Epoch)
			}
			started[e.Partition] = true
		case *client.Records:
			if !started[e.Partition] {
				t.Fatalf("records of partition %d re-delivered before replay_started", e.Partition)
			}
			for _, r := range e.Records {
				got[e.Partition] = append(got[e.Partition], string(r.Value))
			}
		}
	}
	for p := range want {
		if fmt.Sprint(got[p]) != fmt.Sprint(want[p]) {
			t.Fatalf("partition %d re-delivered %v, want %v", p, got[p], want[p])
		}
	}
	// The old generation's commits are fenced now.
	if err := c.Commit(ctx, "live", "rs", res.Generation-1, map[uint32]uint64{0: 0}); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("commit from before the reset: %v", err)
	}
}

func countAll(m map[uint32][]string) int {
	n := 0
	for _, v := range m {
		n += len(v)
	}
	return n
}

func TestDuplicatesAndConflicts(t *testing.T) {
	s := startServer(t, "")
	c := client.New(s.addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "d", client.WithPartitions(3)); err != nil {
		t.Fatal(err)
	}
	msgs := []client.Message{{Key: []byte("a"), Value: []byte("1"), IdempotencyKey: "k1"}, {Value: []byte("2"), IdempotencyKey: "k2"}}
	first, err := c.Publish(ctx, "d", msgs...)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Publish(ctx, "d", msgs...)
	if err != nil {
		t.Fatal(err)
	}
	for i := range msgs {
		if !again[i].Duplicate || again[i].MessageID != first[i].MessageID || first[i].Duplicate {
			t.Fatalf("record %d: first %+v, again %+v", i, first[i], again[i])
		}
	}
	_, err = c.Publish(ctx, "d", client.Message{Value: []byte("other"), IdempotencyKey: "k2"})
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeFailedPrecondition {
		t.Fatalf("conflict: %v", err)
	}
	var detail *rewindv1.IdempotencyConflict
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			detail, _ = v.(*rewindv1.IdempotencyConflict)
		}
	}
	if detail == nil || detail.GetMessageId() != first[1].MessageID {
		t.Fatalf("conflict detail %v, want the original's message ID %s", detail, first[1].MessageID)
	}
	_, err = c.Publish(ctx, "d", client.Message{Value: []byte("x"), IdempotencyKey: "same"}, client.Message{Value: []byte("y"), IdempotencyKey: "same"})
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("one key twice in a request: %v", err)
	}
	if got := readAll(t, c, "d", client.Until(client.End())); len(got) != 2 {
		t.Fatalf("%d records stored, want 2", len(got))
	}
	// Dedupe turned off on a topic: the same key is stored twice.
	if _, err := c.CreateTopic(ctx, "nodedupe", client.WithDedupeWindow(0)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := c.Publish(ctx, "nodedupe", msgs[0]); err != nil {
			t.Fatal(err)
		}
	}
	if got := readAll(t, c, "nodedupe", client.Until(client.End())); len(got) != 2 {
		t.Fatalf("%d records with dedupe off, want 2", len(got))
	}
}

// dropFirstResponses is a client interceptor that lets a publish reach the
// server and then reports DeadlineExceeded instead of its answer, n times:
// the ambiguous failure of a timeout after the server stored the records.
func dropFirstResponses(n int32) connect.UnaryInterceptorFunc {
	var left atomic.Int32
	left.Store(n)
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			resp, err := next(ctx, req)
			if err == nil && req.Spec().Procedure == "/rewind.v1.PublishService/Publish" && left.Add(-1) >= 0 {
				return nil, connect.NewError(connect.CodeDeadlineExceeded, errors.New("injected: response lost"))
			}
			return resp, err
		}
	}
}

// TestRetriesAfterLostResponsesDoNotDuplicate publishes through a client
// whose first responses are lost: with idempotency keys the retries store
// nothing twice; the control run without keys does store duplicates,
// which shows the test can fail.
func TestRetriesAfterLostResponsesDoNotDuplicate(t *testing.T) {
	s := startServer(t, "")
	ctx := context.Background()
	setup := client.New(s.addr)
	for _, name := range []string{"keyed", "unkeyed"} {
		if _, err := setup.CreateTopic(ctx, name, client.WithPartitions(2)); err != nil {
			t.Fatal(err)
		}
	}
	run := func(topic string, keys bool) int {
		c := client.New(s.addr, client.WithConnectOptions(connect.WithInterceptors(dropFirstResponses(3))),
			client.WithPublishRetry(5, time.Millisecond, 0))
		for i := range 10 {
			msgs := make([]client.Message, 5)
			for j := range msgs {
				msgs[j].Value = []byte(fmt.Sprint(i, "-", j))
				if keys {
					msgs[j].IdempotencyKey = fmt.Sprint("idem-", i, "-", j)
				}
			}
			if _, err := c.Publish(ctx, topic, msgs...); err != nil {
				t.Fatal(err)
			}
		}
		return len(readAll(t, setup, topic, client.Until(client.End())))
	}
	if n := run("keyed", true); n != 50 {
		t.Fatalf("with idempotency keys: %d records stored, want exactly 50", n)
	}
	if n := run("unkeyed", false); n <= 50 {
		t.Fatalf("control without keys: %d records stored; the lost responses should have caused duplicates", n)
	}
}

func TestDeduperDropsRedeliveries(t *testing.T) {
	d := client.NewDeduper(3)
	r := func(id, key string) client.Record { return client.Record{MessageID: id, IdempotencyKey: key} }
	if d.Seen(r("m1", "")) || !d.Seen(r("m1", "")) {
		t.Fatal("message ID not remembered")
	}
	if d.Seen(r("m2", "k")) || !d.Seen(r("m9", "k")) {
		t.Fatal("idempotency key not preferred over the message ID")
	}
	d.Seen(r("m3", ""))
	d.Seen(r("m4", ""))
	d.Seen(r("m5", ""))
	if d.Seen(r("m1", "")) {
		t.Fatal("the window is not bounded")
	}
}
