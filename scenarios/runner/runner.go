// Package runner runs a scenario: it starts real `rewind serve` processes
// on loopback (a faultnet proxy on every peer link), drives the workload
// with the Go client (sequential publishers with unique idempotency keys,
// live followers, replays from random positions, subscriber groups with
// churn and resets, bank writers' conditional appends), applies the fault schedule, then heals everything,
// waits until every replica caught up and reads each one back. What it
// saw is a history.History for the checkers (scenarios/check) and the report
// (scenarios/report).
package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rewind-io/rewind/scenarios/history"
	"github.com/rewind-io/rewind/scenarios/spec"
	"github.com/rewind-io/rewind/sdk/client"
)

// Options are a run's settings.
type Options struct {
	// Binary is the rewind binary to run (`rewind serve`).
	Binary string
	// Dir holds the nodes' data directories and logs; what it held
	// before is removed.
	Dir string
	// Seed decides the workload's and the faults' random choices.
	Seed int64
	// Duration overrides the scenario's (0: the scenario's, or its short
	// one with Short).
	Duration time.Duration
	Short    bool
	// Nodes overrides the scenario's node count (0: the scenario's).
	Nodes int
	// Log receives progress lines (nil: none).
	Log io.Writer
	// Failpoints are set on every node from its start ("name=value;name"),
	// in a binary built with -tags failpoints: the injected bugs that
	// prove the checkers catch what they should.
	Failpoints string
	// SkipBounds leaves the scenario's liveness bounds unchecked: they
	// depend on the machine's speed (the test suite, on a busy machine,
	// checks safety only).
	SkipBounds bool
	// Client is what the workload's publishers publish through: "" (one
	// attempt per call, the publisher retrying), or ClientGo, ClientTS or
	// ClientCLI with their own defaults, each given every member.
	Client string
	// TSClient is the directory of the TypeScript client (sdk/ts, built)
	// for ClientTS.
	TSClient string
	// ConvergeWithin is how long the replicas may take to agree once the
	// faults healed (0: a minute). A run with a broken build may never
	// converge: the mutation tests shorten the wait.
	ConvergeWithin time.Duration
}

// Run runs scenario s and returns its history. An error means the run
// itself could not be carried out (the binary would not start, the
// cluster never formed); what the checkers judge is in the history.
func Run(ctx context.Context, s *spec.Scenario, o Options) (*history.History, error) {
	if err := checkClient(o); err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, "%s  %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
		}
	}
	n := s.Nodes
	if o.Nodes > 0 {
		n = o.Nodes
	}
	dur := s.Duration
	if o.Short {
		dur = s.Short
	}
	if o.Duration > 0 {
		dur = o.Duration
	}
	// Dir is the runner's own: a previous run's nodes would belong to
	// another cluster.
	if err := os.RemoveAll(o.Dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	var fps []string
	if s.PowerLoss {
		fps = append(fps, "power-loss")
	}
	if o.Failpoints != "" {
		fps = append(fps, o.Failpoints)
	}
	var env []string
	if len(fps) > 0 {
		env = append(env, "REWIND_FAILPOINTS="+strings.Join(fps, ";"))
	}
	logf("starting %d node(s) of %s", n, o.Binary)
	c, err := startCluster(ctx, o.Binary, o.Dir, n, env, logf)
	if err != nil {
		return nil, err
	}
	defer c.close()
	h := &history.History{Scenario: s.Name, Seed: o.Seed, Bounds: history.Bounds(s.Bounds), Client: o.Client}
	if o.SkipBounds {
		h.Bounds = history.Bounds{}
	}
	for _, nd := range c.members() {
		h.Nodes = append(h.Nodes, nd.id)
	}
	rec := &recorder{h: h}

	cl := client.New(c.addrs())
	for _, t := range s.Topics {
		if err := createTopic(ctx, cl, t); err != nil {
			return nil, fmt.Errorf("create topic %s: %w", t.Name, err)
		}
		h.Topics = append(h.Topics, history.Topic{Name: t.Name, Partitions: t.Partitions})
	}
	topic := s.Topics[0]
	if err := waitLeaders(ctx, c, topic.Name, topic.Partitions, time.Minute); err != nil {
		return nil, err
	}
	if s.Workload.Bombs {
		if err := setupBombs(ctx, cl, o.Dir); err != nil {
			return nil, err
		}
	}
	filtered := s.Workload.Filter
	switch filtered {
	case "key-prefix":
		if err := setupKeyPrefix(ctx, cl, o.Dir); err != nil {
			return nil, err
		}
		h.Topics[0].Filters = map[string]func(history.Record) bool{}
		for i := range s.Workload.Publishers {
			name, _, keep := keyPrefixFilter(fmt.Sprintf("pub-%d", i))
			h.Topics[0].Filters[name] = keep
		}
	case "tag-transform":
		if err := setupTagTransform(ctx, cl, o.Dir); err != nil {
			return nil, err
		}
		h.Topics[0].Transforms = map[string]func(history.Record) (history.Record, bool){}
		for i := range s.Workload.Publishers {
			name, _, tf := tagTransform(fmt.Sprintf("pub-%d", i))
			h.Topics[0].Transforms[name] = tf
		}
	}

	// The workload and the faults, for dur.
	h.Start = time.Now()
	logf("workload for %s (seed %d)", dur, o.Seed)
	wctx, stopWork := context.WithTimeout(ctx, dur)
	defer stopWork()
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x5eed))
	var work sync.WaitGroup
	spawn := func(f func()) { work.Add(1); go func() { defer work.Done(); f() }() }
	senders := make([]sender, s.Workload.Publishers)
	for i := range senders {
		pc, err := newSender(o.Client, c.addrs(), o)
		if err != nil {
			return nil, fmt.Errorf("publisher %d: %w", i, err)
		}
		defer pc.close() // after the workload: work.Wait below
		senders[i] = pc
	}
	for i, pc := range senders {
		spawn(func() {
			publisher(wctx, pc, callTimeout(o.Client), rec, topic.Name, topic.Partitions, i, s.Workload.Rate, s.Workload.ValueBytes, 15*time.Second)
		})
	}
	for i := range s.Workload.Replays {
		r := rand.New(rand.NewPCG(rng.Uint64(), uint64(i)))
		spawn(func() {
			replayer(wctx, client.New(c.addrs()), rec, topic.Name, topic.Partitions, fmt.Sprintf("replay-%d", i), r, filtered, s.Workload.Publishers)
		})
	}
	if s.Workload.Bombs {
		r := rand.New(rand.NewPCG(rng.Uint64(), 4))
		spawn(func() { bomber(wctx, client.New(c.addrs()), rec, topic.Name, topic.Partitions, r) })
	}
	if s.Workload.Gauntlet {
		r := rand.New(rand.NewPCG(rng.Uint64(), 3))
		spawn(func() { gauntlet(wctx, c, rec, r) })
	}
	if b := s.Workload.Bank; b != nil {
		bank(wctx, c.addrs(), rec, topic.Name, *b, rand.New(rand.NewPCG(rng.Uint64(), 5)), spawn)
	}
	for _, g := range s.Workload.Groups {
		r := rand.New(rand.NewPCG(rng.Uint64(), 1))
		spawn(func() { runGroup(wctx, client.New(c.addrs()), rec, g, topic.Name, int(topic.Partitions), r) })
	}
	// Followers and the leader watch run past the workload, until every
	// replica caught up.
	fctx, stopFollow := context.WithCancel(ctx)
	defer stopFollow()
	var follow sync.WaitGroup
	if s.Workload.Followers {
		for p := range topic.Partitions {
			follow.Add(1)
			go func() {
				defer follow.Done()
				follower(fctx, client.New(c.addrs()), rec, topic.Name, p, fmt.Sprintf("follow-p%d", p), 7*time.Second)
			}()
		}
	}
	follow.Add(1)
	go func() { defer follow.Done(); watchLeaders(fctx, c, rec, topic.Name) }()
	fl := &faulter{c: c, rec: rec, topic: topic.Name, logf: logf, rng: rand.New(rand.NewPCG(rng.Uint64(), 2))}
	for _, f := range s.Faults {
		spawn(func() { fl.schedule(wctx, f) })
	}
	<-wctx.Done()
	h.WorkloadEnd = time.Now()
	work.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	// Heal, converge, read every replica back.
	logf("workload over: healing")
	c.healAll()
	for _, nd := range c.members() {
		nd.mu.Lock()
		running := nd.running
		nd.mu.Unlock()
		if !running || c.exited(nd.id) {
			if err := fl.revive(ctx, nd.id); err != nil {
				return nil, fmt.Errorf("bring node %d back after the run: %w", nd.id, err)
			}
		}
	}
	within := o.ConvergeWithin
	if within <= 0 {
		within = time.Minute
	}
	ends, hosts, convergeErr := converge(ctx, c, topic.Name, topic.Partitions, within)
	if convergeErr != nil {
		// A broken guarantee can leave replicas that never agree: read
		// them anyway, for the log checker to show how they differ.
		logf("%v", convergeErr)
		fl.errs = append(fl.errs, convergeErr)
		for p := range topic.Partitions {
			if len(hosts[p]) == 0 {
				for _, nd := range c.members() {
					hosts[p] = append(hosts[p], nd.id)
				}
			}
		}
	}
	if s.Workload.Followers {
		waitFollowers(rec, ends, 10*time.Second)
	}
	stopFollow()
	follow.Wait()
	h.End = time.Now()
	if b := s.Workload.Bank; b != nil {
		logf("reading every account's history")
		h.Keys = readKeys(ctx, cl, topic.Name, *b, time.Minute)
	}
	// The replicas are read from the stopped nodes' data directories, not
	// through Subscribe: a bug of the read path must not pass for lost
	// data (the reads and follows checkers judge that path).
	logf("stopping the nodes, reading every replica from its data directory")
	if err := stopForReading(ctx, c, s.PowerLoss); err != nil {
		// A node that had to be killed still has a readable store (a
		// read-only open replays its log): read it, and fail the run.
		logf("%v", err)
		fl.errs = append(fl.errs, err)
	}
	for _, id := range sortedHosts(hosts) {
		rs, err := readReplicas(c.node(id), topic.Name, hosts)
		if err != nil {
			return nil, err
		}
		h.Replicas = append(h.Replicas, rs...)
	}
	return h, errors.Join(fl.errs...)
}

// createTopic creates t, retrying while the cluster elects its first
// leaders.
func createTopic(ctx context.Context, c *client.Client, t spec.Topic) error {
	opts := []client.TopicOption{client.WithPartitions(t.Partitions), client.WithReplicationFactor(t.Replication)}
	if t.RetentionRecords > 0 {
		opts = append(opts, client.WithRetention(0, 0, t.RetentionRecords))
	}
	deadline := time.Now().Add(time.Minute)
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.CreateTopic(cctx, t.Name, opts...)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond) // the cluster elects its leaders
	}
}
