package cliente2e_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
)

// TestEventStoreLoadDecideAppend: the event-sourcing loop against a real
// node: load an account by key, append with the version loaded, and a
// stale writer is refused with the expected and actual versions; reads
// start at a version, take the last N, go backward; a retry of an
// accepted append is answered with its results.
func TestEventStoreLoadDecideAppend(t *testing.T) {
	s := startServer(t, "")
	c := client.New(s.addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "accounts", client.WithPartitions(4)); err != nil {
		t.Fatal(err)
	}
	acc := []byte("account-1")
	res, err := c.Append(ctx, "accounts", acc, []client.Message{{Value: []byte("opened")}}, client.ExpectNone())
	if err != nil || !res[0].HasKeyVersion || res[0].KeyVersion != 0 {
		t.Fatalf("open: %+v %v", res, err)
	}
	for i := range 5 {
		loaded, err := c.ReadKey(ctx, "accounts", acc)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(loaded.Records); got != i+1 || loaded.Head != uint64(i) {
			t.Fatalf("load %d: %d records, head %d", i, got, loaded.Head)
		}
		if _, err := c.Append(ctx, "accounts", acc, []client.Message{{Value: []byte(fmt.Sprint("deposit ", i))}}, loaded.Expect()); err != nil {
			t.Fatal(err)
		}
	}
	// A writer that loaded version 2 is refused.
	_, err = c.Append(ctx, "accounts", acc, []client.Message{{Value: []byte("stale")}}, client.ExpectVersion(2))
	var ce *client.ConditionError
	if !errors.As(err, &ce) || connect.CodeOf(err) != connect.CodeFailedPrecondition || !ce.HasActual || ce.Actual != 5 || ce.ExpectedVersion != 2 {
		t.Fatalf("stale append: %v (%+v)", err, ce)
	}
	// Other keys of the topic do not show in a key read.
	if _, err := c.Publish(ctx, "accounts", client.Message{Key: []byte("account-2"), Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	r, err := c.ReadKey(ctx, "accounts", acc, client.FromVersion(4))
	if err != nil || len(r.Records) != 2 || r.Records[0].KeyVersion != 4 || r.Records[1].KeyVersion != 5 {
		t.Fatalf("from version 4: %+v %v", r, err)
	}
	// A time: the first record of the key appended at or after it.
	all, err := c.ReadKey(ctx, "accounts", acc)
	if err != nil {
		t.Fatal(err)
	}
	at := all.Records[3].AppendTime
	r, err = c.ReadKey(ctx, "accounts", acc, client.FromTime(at))
	if err != nil || len(r.Records) == 0 || r.Records[0].AppendTime.Before(at) || r.Records[0].KeyVersion > 3 {
		t.Fatalf("from the time of version 3: %+v %v", r, err)
	}
	r, err = c.ReadKey(ctx, "accounts", acc, client.LastN(1), client.Backward())
	if err != nil || len(r.Records) != 1 || string(r.Records[0].Value) != "deposit 4" {
		t.Fatalf("last 1: %+v %v", r, err)
	}
	r, err = c.ReadKey(ctx, "accounts", acc, client.Backward(), client.Limit(3))
	if err != nil || len(r.Records) != 3 || r.Records[0].KeyVersion != 5 || r.Records[2].KeyVersion != 3 || !r.More {
		t.Fatalf("backward 3: %+v %v", r, err)
	}
	// A retry of an accepted append (same idempotency key) is answered
	// with the original, not refused.
	m := client.Message{Value: []byte("withdraw"), IdempotencyKey: "w-1"}
	first, err := c.Append(ctx, "accounts", acc, []client.Message{m}, client.ExpectVersion(5))
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Append(ctx, "accounts", acc, []client.Message{m}, client.ExpectVersion(5))
	if err != nil || !again[0].Duplicate || again[0].Offset != first[0].Offset || again[0].KeyVersion != 6 {
		t.Fatalf("retry: %+v %v (first %+v)", again, err, first)
	}
	// Keys in different partitions cannot be appended atomically.
	_, err = c.Append(ctx, "accounts", acc, []client.Message{{Value: []byte("a")}, {Key: []byte("account-2"), Value: []byte("b")}})
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("cross-partition append: %v", err)
	}
	// Delivered records carry their key versions.
	sub, err := c.Subscribe(ctx, "accounts", client.From(client.Earliest()), client.Until(client.End()))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	seen := 0
	for rec, err := range sub.Records() {
		if err != nil {
			t.Fatal(err)
		}
		if string(rec.Key) == string(acc) {
			if !rec.HasKeyVersion || rec.KeyVersion != uint64(seen) {
				t.Fatalf("record %d of the account has version %d (%v)", seen, rec.KeyVersion, rec.HasKeyVersion)
			}
			seen++
		}
	}
	if seen != 7 {
		t.Fatalf("the subscription saw %d records of the account", seen)
	}
}

// TestEventStoreNoDoubleBooking: the dynamic consistency boundary loop:
// 8 writers race to book the last seat of a course; each reads by tag and
// appends only if nothing with the tag came after its read. Exactly one
// wins.
func TestEventStoreNoDoubleBooking(t *testing.T) {
	s := startServer(t, "")
	c := client.New(s.addr)
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "courses", client.WithPartitions(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, "courses", client.Message{Value: []byte("c42 created"), Type: "CourseCreated", Tags: []string{"course:42"}}); err != nil {
		t.Fatal(err)
	}
	q := client.Query{{Types: []string{"SeatBooked"}, Tags: []string{"course:42"}}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won, refused := 0, 0
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			read, err := c.Query(ctx, "courses", q)
			if err != nil {
				t.Error(err)
				return
			}
			if len(read.Records) > 0 {
				mu.Lock()
				refused++
				mu.Unlock()
				return // already booked
			}
			pos := read.Position
			_, err = c.Append(ctx, "courses", []byte(fmt.Sprint("student-", w)), []client.Message{{Value: []byte("booked"), Type: "SeatBooked", Tags: []string{"course:42", fmt.Sprint("student:", w)}}},
				client.FailIfMatched(q, &pos))
			mu.Lock()
			defer mu.Unlock()
			var ce *client.ConditionError
			switch {
			case err == nil:
				won++
			case errors.As(err, &ce) && ce.Matched:
				refused++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if won != 1 || refused != 7 {
		t.Fatalf("%d bookings won, %d refused: want exactly one", won, refused)
	}
	read, err := c.Query(ctx, "courses", q)
	if err != nil || len(read.Records) != 1 {
		t.Fatalf("bookings stored: %+v %v", read, err)
	}
}

// TestEventStoreThroughAFollower: in a cluster, a conditional append and a
// key read sent to a node that does not lead the partition are forwarded
// to the leader, and a refusal keeps its details on the way back.
func TestEventStoreThroughAFollower(t *testing.T) {
	cl := enginetest.StartCluster(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var clients []*client.Client
	for _, u := range cl.URLs() {
		c := client.New(u)
		clients = append(clients, c)
	}
	if _, err := clients[0].CreateTopic(ctx, "orders", client.WithPartitions(1), client.WithReplicationFactor(3)); err != nil {
		t.Fatal(err)
	}
	key := []byte("order-9")
	// Every node appends in turn with the version the previous one left:
	// at least two of them are not the leader.
	for i, c := range clients {
		cond := client.ExpectVersion(uint64(i - 1))
		if i == 0 {
			cond = client.ExpectNone()
		}
		res, err := c.Append(ctx, "orders", key, []client.Message{{Value: []byte(fmt.Sprint("step ", i))}}, cond)
		if err != nil || res[0].KeyVersion != uint64(i) {
			t.Fatalf("node %d: %+v %v", i+1, res, err)
		}
		r, err := c.ReadKey(ctx, "orders", key)
		if err != nil || r.Head != uint64(i) || len(r.Records) != i+1 {
			t.Fatalf("node %d read: %+v %v", i+1, r, err)
		}
	}
	for i, c := range clients {
		_, err := c.Append(ctx, "orders", key, []client.Message{{Value: []byte("stale")}}, client.ExpectVersion(0))
		var ce *client.ConditionError
		if !errors.As(err, &ce) || ce.Actual != 2 || string(ce.Key) != string(key) {
			t.Fatalf("node %d, stale append: %v", i+1, err)
		}
	}
}

// TestTopicWithoutAKeyIndex: a topic created without the indexes says so,
// stores keyed records without versions, and refuses what needs the
// index with FailedPrecondition; a default topic keeps the index.
func TestTopicWithoutAKeyIndex(t *testing.T) {
	s := startServer(t, "")
	c := client.New(s.addr)
	ctx := context.Background()
	plain, err := c.CreateTopic(ctx, "fast", client.WithPartitions(2), client.WithKeyIndex(false))
	if err != nil || plain.KeyIndex {
		t.Fatalf("create without the index: %+v %v", plain, err)
	}
	if def, err := c.CreateTopic(ctx, "default"); err != nil || !def.KeyIndex {
		t.Fatalf("a default topic: %+v %v", def, err)
	}
	res, err := c.Publish(ctx, "fast", client.Message{Key: []byte("k"), Value: []byte("v")})
	if err != nil || res[0].HasKeyVersion {
		t.Fatalf("keyed publish: %+v %v", res, err)
	}
	if _, err := c.Append(ctx, "fast", []byte("k"), []client.Message{{Value: []byte("w")}}, client.ExpectVersion(0)); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("conditional append: %v", err)
	}
	if _, err := c.ReadKey(ctx, "fast", []byte("k")); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("key read: %v", err)
	}
	// A key subscription still works: it filters the partition.
	sub, err := c.Subscribe(ctx, "fast", client.Key([]byte("k")), client.From(client.Earliest()), client.Until(client.End()))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	n := 0
	for rec, err := range sub.Records() {
		if err != nil {
			t.Fatal(err)
		}
		if string(rec.Key) != "k" || rec.HasKeyVersion {
			t.Fatalf("key subscription delivered %+v", rec)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("key subscription delivered %d records", n)
	}
}
