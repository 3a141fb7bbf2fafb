package groups

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rewind-io/rewind/engine/internal/cursor"
)

// TestHold: a held name refuses joins, a name with members refuses holds,
// and leaves, deletes and CloseAll free the name again; holds nest.
func TestHold(t *testing.T) {
	h := &harness{t: t}
	h.clock.Store(baseTime)
	h.open(2, time.Second)
	defer h.close()
	c, ctx := h.c, context.Background()
	spec := JoinSpec{Start: cursor.Start{Kind: cursor.Earliest}}

	kafka := func(topic string) []MemberInfo {
		return []MemberInfo{{ID: "k1", ClientName: "kafka:x", Partitions: []uint32{0, 1}}}
	}
	rel1, err := c.Hold("g", "Kafka", kafka)
	if err != nil {
		t.Fatal(err)
	}
	if li, err := c.Live("g", h.topic); err != nil || len(li.Members) != 1 || li.Members[0].ID != "k1" {
		t.Fatalf("Live of a held group: %+v, %v; want the holder's member", li, err)
	}
	rel2, err := c.Hold("g", "Kafka", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Join(ctx, "g", h.topic, spec); !errors.Is(err, ErrHeld) || !errors.Is(err, ErrHasMembers) {
		t.Fatalf("join of a held name: %v, want ErrHeld", err)
	}
	rel1()
	rel1() // a second call does nothing
	if _, err := c.Join(ctx, "g", h.topic, spec); !errors.Is(err, ErrHeld) {
		t.Fatalf("join while one hold remains: %v, want ErrHeld", err)
	}
	rel2()
	if li, err := c.Live("g", h.topic); err != nil || len(li.Members) != 0 {
		t.Fatalf("Live once released: %+v, %v; want no members", li, err)
	}
	m, err := c.Join(ctx, "g", h.topic, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Hold("g", "Kafka", nil); !errors.Is(err, ErrHeld) {
		t.Fatalf("hold of a name with members: %v, want ErrHeld", err)
	}
	if rel, err := c.Hold("other", "Kafka", nil); err != nil {
		t.Fatalf("hold of another name: %v", err)
	} else {
		rel()
	}
	c.Leave(m)
	rel, err := c.Hold("g", "Kafka", nil)
	if err != nil {
		t.Fatalf("hold after the member left: %v", err)
	}
	rel()

	// Members removed by Delete and CloseAll no longer count.
	if _, err := c.Join(ctx, "g", h.topic, spec); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete("g", true); err != nil {
		t.Fatal(err)
	}
	if rel, err = c.Hold("g", "Kafka", nil); err != nil {
		t.Fatalf("hold after a forced delete: %v", err)
	}
	rel()
	m, err = c.Join(ctx, "g", h.topic, spec)
	if err != nil {
		t.Fatal(err)
	}
	c.CloseAll(errors.New("stepping down"))
	c.Leave(m) // its stream ends after CloseAll: nothing to uncount
	if rel, err = c.Hold("g", "Kafka", nil); err != nil {
		t.Fatalf("hold after CloseAll: %v", err)
	}
	rel()
}
