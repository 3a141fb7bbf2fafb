package runner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/scenarios/history"
	"github.com/rewind-io/rewind/scenarios/spec"
	"github.com/rewind-io/rewind/sdk/client"
)

// member is one subscriber-group member: it reads, records what it was
// handed and commits after every batch, until its context ends (a crash:
// no goodbye) or leave is closed (it closes its stream and leaves).
func member(ctx context.Context, c *client.Client, rec *recorder, group, topic, name string, slow time.Duration, leave <-chan struct{}) {
	ev := func(kind history.GroupEventKind, gen uint64, p uint32, off uint64) {
		rec.group(history.GroupEvent{Group: group, Member: name, Kind: kind, Generation: gen, Topic: topic, Partition: p, Offset: off, At: time.Now()})
	}
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-leave:
			cancel()
		case <-mctx.Done():
		}
	}()
	sub, err := c.Subscribe(mctx, topic, client.Group(group), client.ClientName(name), client.ReconnectWithin(time.Minute))
	if err != nil {
		return
	}
	ev(history.Joined, 0, 0, 0)
	left := false
	defer func() {
		if left {
			_ = sub.Close()
			ev(history.Left, sub.Generation(), 0, 0)
		} else {
			ev(history.Crashed, sub.Generation(), 0, 0)
		}
	}()
	// committed is what this member last committed, by partition, and
	// at which generation.
	type commit struct{ gen, next uint64 }
	committed := map[uint32]commit{}
	for sub.Next() {
		switch e := sub.Event().(type) {
		case *client.Assigned:
			for _, p := range e.Partitions {
				ev(history.Assigned, e.Generation, p.Partition, p.NextOffset)
			}
			// A deliberate stale commit: a partition this member lost,
			// at the generation it had it under, must be refused (a
			// fenced commit; an injected bug that accepts it is caught
			// by the groups checker).
			for _, p := range e.Revoked {
				ev(history.Revoked, e.Generation, p, 0)
				if last, ok := committed[p]; ok && last.gen < e.Generation {
					sent := time.Now()
					cctx, ccancel := context.WithTimeout(context.WithoutCancel(mctx), 3*time.Second)
					err := c.Commit(cctx, group, topic, last.gen, map[uint32]uint64{p: last.next})
					ccancel()
					kind, known := commitKind(err)
					if !known {
						continue
					}
					rec.group(history.GroupEvent{Group: group, Member: name, Kind: kind, Generation: last.gen, Topic: topic, Partition: p, Offset: last.next, At: time.Now(), Sent: sent})
				}
				delete(committed, p)
			}
		case *client.ReplayStarted:
			ev(history.Seeked, e.Generation, e.Partition, e.FromOffset)
		case *client.Records:
			if len(e.Records) == 0 {
				continue
			}
			gen := sub.Generation()
			for _, r := range e.Records {
				ev(history.Delivered, gen, r.Partition, r.Offset)
			}
			if slow > 0 {
				select { // a slow consumer at work
				case <-mctx.Done():
				case <-time.After(slow):
				}
			}
			next := e.Records[len(e.Records)-1].Offset + 1
			sent := time.Now()
			cctx, ccancel := context.WithTimeout(context.WithoutCancel(mctx), 3*time.Second)
			err := sub.Commit(cctx, map[uint32]uint64{e.Partition: next})
			ccancel()
			kind, known := commitKind(err)
			if !known {
				continue
			}
			rec.group(history.GroupEvent{Group: group, Member: name, Kind: kind, Generation: gen, Topic: topic, Partition: e.Partition, Offset: next, At: time.Now(), Sent: sent})
			if kind == history.Committed {
				committed[e.Partition] = commit{gen: gen, next: next}
			}
		}
	}
	select {
	case <-leave:
		left = true
	default:
	}
}

// runGroup runs a group's members, with churn and resets, until ctx ends.
func runGroup(ctx context.Context, c *client.Client, rec *recorder, g spec.Group, topic string, partitions int, rng *rand.Rand) {
	type live struct {
		name   string
		cancel context.CancelFunc
		leave  chan struct{}
	}
	var wg sync.WaitGroup
	var members []live
	n := 0
	join := func() {
		n++
		m := live{name: fmt.Sprintf("%s-m%d", g.Name, n), leave: make(chan struct{})}
		mctx, cancel := context.WithCancel(ctx)
		m.cancel = cancel
		members = append(members, m)
		wg.Add(1)
		go func() { defer wg.Done(); member(mctx, c, rec, g.Name, topic, m.name, g.Slow, m.leave) }()
	}
	for range g.Members {
		join()
	}
	var churn, reset <-chan time.Time
	if g.Churn > 0 {
		t := time.NewTicker(g.Churn)
		defer t.Stop()
		churn = t.C
	}
	if g.ResetEvery > 0 {
		t := time.NewTicker(g.ResetEvery)
		defer t.Stop()
		reset = t.C
	}
	for {
		select {
		case <-ctx.Done():
			for _, m := range members {
				close(m.leave)
			}
			wg.Wait()
			return
		case <-churn:
			switch k := rng.IntN(3); {
			case k == 0 || len(members) <= 1:
				join()
			default:
				i := rng.IntN(len(members))
				m := members[i]
				members = append(members[:i], members[i+1:]...)
				if k == 1 {
					close(m.leave) // a clean leave
				} else {
					m.cancel() // a crash: the stream ends without a goodbye
				}
			}
		case <-reset:
			resetGroup(ctx, c, rec, g.Name, topic, partitions, rng)
		}
	}
}

// resetGroup moves the group back by a random number of records on every
// partition, live, and records where each partition now starts; when the
// reset failed, that its outcome is unknown on every partition (a reset
// that fails midway has reset some of them).
func resetGroup(ctx context.Context, c *client.Client, rec *recorder, group, topic string, partitions int, rng *rand.Rand) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	back := int64(rng.IntN(50) + 1)
	sent := time.Now()
	res, err := c.ResetGroup(rctx, group, topic, client.Shift(-back), nil, false)
	at := time.Now()
	switch {
	case err != nil:
		for p := range partitions {
			rec.group(history.GroupEvent{Group: group, Kind: history.ResetUnknown, Topic: topic, Partition: uint32(p), At: at, Sent: sent})
		}
	case res.Executed:
		for _, r := range res.Rows {
			rec.group(history.GroupEvent{Group: group, Kind: history.Reset, Generation: res.Generation, Topic: topic, Partition: r.Partition, Offset: r.New, At: at, Sent: sent})
		}
	}
}

// commitKind is the event a commit's answer makes: Committed, or
// CommitRefused when it was fenced (FailedPrecondition); known is false
// when its outcome is unknown (no event then).
func commitKind(err error) (kind history.GroupEventKind, known bool) {
	switch {
	case err == nil:
		return history.Committed, true
	case connect.CodeOf(err) == connect.CodeFailedPrecondition:
		return history.CommitRefused, true
	}
	return "", false
}
