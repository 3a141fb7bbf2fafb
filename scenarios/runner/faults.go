package runner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rewind-io/rewind/scenarios/faultnet"
	"github.com/rewind-io/rewind/scenarios/history"
	"github.com/rewind-io/rewind/scenarios/spec"
	"github.com/rewind-io/rewind/sdk/client"
)

// faulter applies a scenario's fault schedule to the cluster.
type faulter struct {
	c     *cluster
	rec   *recorder
	topic string
	logf  func(string, ...any)

	mu  sync.Mutex // one fault changes the cluster at a time
	rng *rand.Rand
	// down counts, per node, the faults holding it down (killed or
	// paused), so overlapping faults heal in the right order.
	errs []error
}

// schedule runs every occurrence of f until ctx ends (the workload's
// duration); an occurrence under way is healed at once then.
func (fl *faulter) schedule(ctx context.Context, f spec.Fault) {
	start := time.Now()
	for k := 0; ; k++ {
		at := start.Add(f.Start + time.Duration(k)*f.Every)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(at)):
		}
		fl.occur(ctx, f)
		if f.Every == 0 {
			return
		}
	}
}

// occur injects f once, holds it, and heals it.
func (fl *faulter) occur(ctx context.Context, f spec.Fault) {
	fl.mu.Lock()
	targets, err := fl.targets(ctx, f)
	if err != nil {
		fl.mu.Unlock()
		fl.logf("fault %s: %v", f.Name, err)
		return
	}
	rec := history.Fault{Name: f.Name, Kind: f.Action, Targets: targets, Start: time.Now()}
	heal, err := fl.inject(ctx, f, targets)
	fl.mu.Unlock()
	if err != nil {
		fl.fail(fmt.Errorf("fault %s (%s on %v): %w", f.Name, f.Action, targets, err))
		if heal == nil {
			return
		}
	}
	fl.logf("fault %s: %s %v", f.Name, f.Action, targets)
	if f.Hold > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(f.Hold):
		}
	}
	if heal != nil {
		fl.mu.Lock()
		if err := heal(context.WithoutCancel(ctx)); err != nil {
			fl.fail(fmt.Errorf("heal %s: %w", f.Name, err))
		}
		fl.mu.Unlock()
	}
	rec.End = time.Now()
	fl.rec.fault(rec)
}

func (fl *faulter) fail(err error) {
	fl.logf("%v", err)
	fl.errs = append(fl.errs, err)
}

// targets resolves a fault's target to nodes, now.
func (fl *faulter) targets(ctx context.Context, f spec.Fault) ([]uint64, error) {
	var all []uint64
	for _, nd := range fl.c.members() {
		all = append(all, nd.id)
	}
	n := len(all)
	kind, arg, _ := strings.Cut(f.Target, ":")
	switch kind {
	case "node":
		var id uint64
		fmt.Sscanf(arg, "%d", &id)
		if !slices.Contains(all, id) {
			return nil, fmt.Errorf("node %d is no member now: skipped", id)
		}
		return []uint64{id}, nil
	case "all":
		return all, nil
	case "random":
		return []uint64{all[fl.rng.IntN(n)]}, nil
	case "minority":
		k := max(1, (n-1)/2)
		fl.rng.Shuffle(n, func(i, j int) { all[i], all[j] = all[j], all[i] })
		out := slices.Clone(all[:k])
		slices.Sort(out)
		return out, nil
	}
	var p uint32
	if arg != "" {
		fmt.Sscanf(arg, "%d", &p)
	}
	l := fl.leaderOf(ctx, p)
	if l == 0 {
		return nil, fmt.Errorf("no leader of partition %d known: skipped", p)
	}
	if kind == "followers" {
		return fl.others([]uint64{l}), nil
	}
	return []uint64{l}, nil
}

// leaderOf asks the nodes that are up who leads partition p of the topic
// (the view with the highest term).
func (fl *faulter) leaderOf(ctx context.Context, p uint32) uint64 {
	var best, term uint64
	for _, nd := range fl.c.members() {
		if !fl.c.up(nd.id) {
			continue
		}
		st, err := fl.c.statusOf(ctx, nd)
		if err != nil {
			continue
		}
		for _, ps := range partitionsOf(st, fl.topic) {
			if ps.GetPartition() == p && ps.GetLeader() != 0 && ps.GetTerm() >= term {
				best, term = ps.GetLeader(), ps.GetTerm()
			}
		}
	}
	return best
}

// others are the nodes not in set.
func (fl *faulter) others(set []uint64) []uint64 {
	var out []uint64
	for _, nd := range fl.c.members() {
		if !slices.Contains(set, nd.id) {
			out = append(out, nd.id)
		}
	}
	return out
}

// cutBetween cuts (or heals) every link between a and b.
func (fl *faulter) cutBetween(a, b []uint64, cut bool) {
	for _, x := range a {
		for _, y := range b {
			fl.c.cut(x, y, cut)
		}
	}
}

// inject applies f to targets and returns what heals it.
func (fl *faulter) inject(ctx context.Context, f spec.Fault, targets []uint64) (func(context.Context) error, error) {
	c := fl.c
	switch f.Action {
	case "kill", "power-loss":
		// With power-loss the nodes run with the power-loss failpoint
		// (writes held in memory until synced), so kill -9 drops what a
		// power cut would.
		for _, t := range targets {
			if err := c.kill(t); err != nil {
				return nil, err
			}
		}
		return func(ctx context.Context) error {
			for _, t := range targets {
				if err := c.start(ctx, t); err != nil {
					return err
				}
			}
			return nil
		}, nil
	case "pause":
		for _, t := range targets {
			if err := c.signal(t, syscall.SIGSTOP); err != nil {
				return nil, err
			}
		}
		return func(context.Context) error {
			for _, t := range targets {
				if err := c.signal(t, syscall.SIGCONT); err != nil {
					return err
				}
			}
			return nil
		}, nil
	case "restart":
		for _, t := range targets {
			if err := c.stop(t, 20*time.Second); err != nil {
				return nil, err
			}
			if err := c.start(ctx, t); err != nil {
				return nil, err
			}
		}
		return nil, nil
	case "rolling-restart":
		for _, t := range targets {
			if err := c.stop(t, 20*time.Second); err != nil {
				return nil, err
			}
			if err := c.start(ctx, t); err != nil {
				return nil, err
			}
			time.Sleep(f.Hold) // let it catch up before the next one
		}
		return nil, nil
	case "cut":
		// The targets lose their link to one other node each.
		var pairs [][2]uint64
		for _, t := range targets {
			o := fl.others([]uint64{t})
			if len(o) == 0 {
				continue
			}
			pairs = append(pairs, [2]uint64{t, o[fl.rng.IntN(len(o))]})
		}
		for _, p := range pairs {
			c.cut(p[0], p[1], true)
		}
		return func(context.Context) error {
			for _, p := range pairs {
				c.cut(p[0], p[1], false)
			}
			return nil
		}, nil
	case "one-way":
		// What each target sends to one other member is lost; what it
		// receives from it passes.
		type link struct{ from, to uint64 }
		var ls []link
		for _, t := range targets {
			if o := fl.others([]uint64{t}); len(o) > 0 {
				ls = append(ls, link{t, o[fl.rng.IntN(len(o))]})
			}
		}
		set := func(cut bool) {
			for _, l := range ls {
				if p := c.proxy(l.from, l.to); p != nil {
					p.SetCutDirection(faultnet.Forward, cut) // on the target's own connections
				}
				if p := c.proxy(l.to, l.from); p != nil {
					p.SetCutDirection(faultnet.Back, cut) // the answers on the other's connections
				}
			}
		}
		set(true)
		return func(context.Context) error { set(false); return nil }, nil
	case "delay", "bandwidth":
		// Every link of the targets, both ways, is slowed.
		delay, jitter, _ := spec.ParseDelay(f.Value)
		rate, _ := spec.ParseRate(f.Value)
		set := func(on bool) {
			for _, t := range targets {
				for _, o := range fl.others([]uint64{t}) {
					for _, p := range []*faultnet.Proxy{c.proxy(t, o), c.proxy(o, t)} {
						switch {
						case p == nil:
						case f.Action == "delay" && on:
							p.SetDelay(delay, jitter)
						case f.Action == "delay":
							p.SetDelay(0, 0)
						case on:
							p.SetRate(rate)
						default:
							p.SetRate(0)
						}
					}
				}
			}
		}
		set(true)
		return func(context.Context) error { set(false); return nil }, nil
	case "isolate", "split":
		rest := fl.others(targets)
		fl.cutBetween(targets, rest, true)
		return func(context.Context) error { fl.cutBetween(targets, rest, false); return nil }, nil
	case "bridge":
		// Two sides that cannot reach each other, and one node that
		// reaches both: the targets and half the rest on one side.
		rest := fl.others(targets)
		if len(rest) < 2 {
			return nil, fmt.Errorf("a bridge needs at least 3 nodes")
		}
		fl.rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
		bridge := rest[0]
		side := append(slices.Clone(targets), rest[1:1+(len(rest)-1)/2]...)
		other := fl.others(append(slices.Clone(side), bridge))
		fl.cutBetween(side, other, true)
		return func(context.Context) error { fl.cutBetween(side, other, false); return nil }, nil
	case "replace":
		// A new member joins, the target's replicas move to it, the
		// target is removed and stopped: a machine replaced, as an
		// operator would do it (grow, then shrink).
		for _, t := range targets {
			if err := fl.replace(ctx, t); err != nil {
				return nil, err
			}
		}
		return nil, nil
	case "replay-storm":
		// Full replays of the topic loop at once (through every member,
		// the client's choice); their records are not recorded.
		n, _ := spec.ParseStorm(f.Value)
		sctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() { defer wg.Done(); storm(sctx, client.New(c.addrs()), fl.topic) }()
		}
		return func(context.Context) error { stop(); wg.Wait(); return nil }, nil
	case "failpoint":
		for _, t := range targets {
			if err := c.failpoint(ctx, t, f.Failpoint, f.Value, true); err != nil {
				return nil, err
			}
			if f.Failpoint == "bitflip" {
				n := c.node(t)
				n.mu.Lock()
				n.corrupt = true
				n.mu.Unlock()
			}
		}
		return func(ctx context.Context) error {
			for _, t := range targets {
				if c.exited(t) {
					if err := fl.revive(ctx, t); err != nil {
						return err
					}
					if f.Failpoint == "enospc" {
						// A full disk must not stop a node (docs/operations.md, "Disk full").
						return fmt.Errorf("node %d exited while its disk was full", t)
					}
					continue
				}
				if !c.up(t) {
					continue
				}
				if err := c.failpoint(ctx, t, f.Failpoint, "", false); err != nil {
					return err
				}
			}
			return nil
		}, nil
	}
	return nil, fmt.Errorf("unknown action %q", f.Action)
}

// replace adds a new member, moves node t's replicas to it and removes t
// (stopped if it still runs).
func (fl *faulter) replace(ctx context.Context, t uint64) error {
	c := fl.c
	id, err := c.add()
	if err != nil {
		return err
	}
	if err := c.start(ctx, id); err != nil {
		return err
	}
	fl.rec.node(id)
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	_, _, err = client.New(c.addrs()).RemoveNode(rctx, t)
	cancel()
	if err != nil {
		return fmt.Errorf("remove node %d: %w", t, err)
	}
	if err := c.stop(t, 20*time.Second); err != nil {
		return err
	}
	c.remove(t)
	return nil
}

// revive brings back member t, which a fault stopped: started again, or,
// when its store was corrupted (a corrupt table stays corrupt, and a
// wiped node cannot rejoin under its old id), replaced by a new member.
func (fl *faulter) revive(ctx context.Context, t uint64) error {
	n := fl.c.node(t)
	n.mu.Lock()
	corrupt := n.corrupt
	n.mu.Unlock()
	if corrupt {
		fl.logf("node %d's store is corrupt: replacing it", t)
		return fl.replace(ctx, t)
	}
	return fl.c.start(ctx, t)
}

// storm replays the whole of topic, from the first record to the end, over
// and over, until ctx ends, dropping what it reads.
func storm(ctx context.Context, c *client.Client, topic string) {
	for ctx.Err() == nil {
		sub, err := c.Subscribe(ctx, topic, client.From(client.Earliest()), client.Until(client.End()))
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond): // the cluster may be electing
			}
			continue
		}
		for _, err := range sub.Records() {
			if err != nil {
				break
			}
		}
		sub.Close()
	}
}
