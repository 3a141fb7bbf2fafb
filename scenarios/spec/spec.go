// Package spec reads scenario files: HCL documents that say a scenario's
// topology, topics, workload, fault schedule and liveness bounds (see
// docs/scenarios.md for the format). Every mistake in a file is reported
// with its line and column.
package spec

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"
)

// Scenario is one scenario, validated, with its durations parsed.
type Scenario struct {
	Name        string
	Description string
	Nodes       int
	Duration    time.Duration
	// Short is the duration with --short (at most Duration).
	Short    time.Duration
	Topics   []Topic
	Workload Workload
	Faults   []Fault
	Bounds   Bounds
	// Failpoints: the scenario needs a binary built with -tags failpoints.
	Failpoints bool
	// PowerLoss: the nodes run with the power-loss failpoint on, so that
	// its kills drop unsynced writes.
	PowerLoss bool
}

// Topic is a topic the scenario creates.
type Topic struct {
	Name              string
	Partitions        uint32
	Replication       uint32
	RetentionRecords  uint64 // 0: the default (no record limit)
	DedupeWindowHours int    // 0: the default
}

// Workload is what the scenario's clients do meanwhile.
type Workload struct {
	// Publishers send one record at a time each (a sequential publisher),
	// with a unique idempotency key; Rate is each one's records per
	// second (0: as fast as acknowledgements come).
	Publishers int
	Rate       float64
	// ValueBytes pads every record's value to this size (0: the value is
	// only its name, about 10 bytes).
	ValueBytes int
	// Followers: one live follower per partition of the first topic.
	Followers bool
	// Replays loop, each from a random position to a random stop.
	Replays int
	// Filter is an example module (by name) a third of the replays run:
	// "key-prefix", the filter `rewind plugin new` writes, or
	// "tag-transform", a transform made from it (it keeps the same records
	// and appends "+rewound" to their values); built from source (it
	// needs the Go toolchain).
	Filter string
	Groups []Group
	// Gauntlet sends malformed requests to every RPC of random nodes.
	Gauntlet bool
	// Bombs replays through filters that never finish (an endless loop,
	// unbounded memory, unbounded recursion), built from source.
	Bombs bool
	// Bank, when set, runs the lost-update workload on the first topic:
	// concurrent writers per account that load, decide and append with
	// the version they loaded (nil: none).
	Bank *Bank
}

// Bank is the lost-update workload: Accounts keys, each written by
// Writers concurrent writers that load the account's history, decide an
// entry (open, deposit, or a withdrawal the balance allows) and append it
// expecting the version they loaded; refused, they load and decide again.
type Bank struct {
	Accounts int // 1 to 1000
	Writers  int // per account, 1 to 64
}

// Group is a subscriber group of the scenario.
type Group struct {
	Name    string
	Members int
	// Churn: every Churn a member leaves, crashes (its stream cut
	// without a goodbye) or joins (0: none).
	Churn time.Duration
	// ResetEvery: the group is reset to a random earlier position this
	// often (0: never).
	ResetEvery time.Duration
	// Slow: each member takes this long over every batch it is handed
	// (a slow consumer; 0: none).
	Slow time.Duration
}

// Actions a fault may take.
var Actions = []string{"kill", "power-loss", "pause", "restart", "rolling-restart", "cut", "one-way", "isolate", "split", "bridge", "delay", "bandwidth", "replace", "failpoint", "replay-storm"}

// Fault is one entry of the fault schedule.
type Fault struct {
	Name   string
	Action string
	// Target says which nodes: "leader" (of partition 0 of the first
	// topic), "leader:P", "followers" (every member but that leader),
	// "followers:P", "node:N", "random", "minority", "all".
	Target string
	Start  time.Duration // from the start of the workload
	Hold   time.Duration // how long it lasts before it is healed
	Every  time.Duration // repeat this often (0: once)
	// Failpoint and Value are the failpoint to set on the targets (action
	// "failpoint"), cleared when the fault heals.
	Failpoint string
	Value     string
}

// Bounds are the liveness bounds the checkers enforce (0: not checked).
type Bounds struct {
	FailoverWithin   time.Duration
	RecoverWithin    time.Duration
	PublishP99During time.Duration
	PublishP99After  time.Duration
	PublishP99Ratio  float64
}

// file is the HCL shape of a scenario file.
type file struct {
	Scenario *scenarioBlock `hcl:"scenario,block"`
}

type scenarioBlock struct {
	Name        string         `hcl:"name,label"`
	Description string         `hcl:"description,optional"`
	Nodes       int            `hcl:"nodes,optional"`
	Duration    hcl.Expression `hcl:"duration,optional"`
	Short       hcl.Expression `hcl:"short,optional"`
	Topics      []topicBlock   `hcl:"topic,block"`
	Workload    *workloadBlock `hcl:"workload,block"`
	Faults      []faultBlock   `hcl:"fault,block"`
	Bounds      *boundsBlock   `hcl:"bounds,block"`
	DefRange    hcl.Range      `hcl:",def_range"`
}

type topicBlock struct {
	Name             string    `hcl:"name,label"`
	Partitions       int       `hcl:"partitions,optional"`
	Replication      int       `hcl:"replication,optional"`
	RetentionRecords int       `hcl:"retention_records,optional"`
	DedupeHours      int       `hcl:"dedupe_window_hours,optional"`
	DefRange         hcl.Range `hcl:",def_range"`
}

type workloadBlock struct {
	Publishers int          `hcl:"publishers,optional"`
	Rate       float64      `hcl:"rate,optional"`
	ValueBytes int          `hcl:"value_bytes,optional"`
	Followers  bool         `hcl:"followers,optional"`
	Replays    int          `hcl:"replays,optional"`
	Filter     string       `hcl:"filter,optional"`
	Gauntlet   bool         `hcl:"gauntlet,optional"`
	Bombs      bool         `hcl:"filter_bombs,optional"`
	Groups     []groupBlock `hcl:"group,block"`
	Bank       *bankBlock   `hcl:"bank,block"`
	DefRange   hcl.Range    `hcl:",def_range"`
}

type bankBlock struct {
	Accounts int       `hcl:"accounts,optional"`
	Writers  int       `hcl:"writers,optional"`
	DefRange hcl.Range `hcl:",def_range"`
}

type groupBlock struct {
	Name       string         `hcl:"name,label"`
	Members    int            `hcl:"members,optional"`
	Churn      hcl.Expression `hcl:"churn,optional"`
	ResetEvery hcl.Expression `hcl:"reset_every,optional"`
	Slow       hcl.Expression `hcl:"slow,optional"`
	DefRange   hcl.Range      `hcl:",def_range"`
}

type faultBlock struct {
	Name      string         `hcl:"name,label"`
	Action    hcl.Expression `hcl:"action"`
	Target    hcl.Expression `hcl:"target,optional"`
	Start     hcl.Expression `hcl:"start,optional"`
	Hold      hcl.Expression `hcl:"hold,optional"`
	Every     hcl.Expression `hcl:"every,optional"`
	Failpoint string         `hcl:"failpoint,optional"`
	Value     string         `hcl:"value,optional"`
	DefRange  hcl.Range      `hcl:",def_range"`
}

type boundsBlock struct {
	FailoverWithin   hcl.Expression `hcl:"failover_within,optional"`
	RecoverWithin    hcl.Expression `hcl:"recover_within,optional"`
	PublishP99During hcl.Expression `hcl:"publish_p99_during,optional"`
	PublishP99After  hcl.Expression `hcl:"publish_p99_after,optional"`
	PublishP99Ratio  float64        `hcl:"publish_p99_ratio,optional"`
	DefRange         hcl.Range      `hcl:",def_range"`
}

// Error is a scenario file's mistakes, each with its place.
type Error struct {
	Diags hcl.Diagnostics
}

func (e *Error) Error() string {
	var b strings.Builder
	for i, d := range e.Diags {
		if i > 0 {
			b.WriteString("\n")
		}
		if d.Subject != nil {
			fmt.Fprintf(&b, "%s:%d:%d: ", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column)
		}
		b.WriteString(d.Summary)
		if d.Detail != "" {
			b.WriteString(": " + d.Detail)
		}
	}
	return b.String()
}

// Parse reads a scenario file named filename (for messages) from src.
func Parse(filename string, src []byte) (*Scenario, error) {
	p := hclparse.NewParser()
	f, diags := p.ParseHCL(src, filename)
	if diags.HasErrors() {
		return nil, &Error{Diags: diags}
	}
	var raw file
	if diags := gohcl.DecodeBody(f.Body, nil, &raw); diags.HasErrors() {
		return nil, &Error{Diags: diags}
	}
	if raw.Scenario == nil {
		return nil, &Error{Diags: hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "no scenario block",
			Detail: `a scenario file holds one block: scenario "NAME" { ... }`, Subject: f.Body.MissingItemRange().Ptr()}}}
	}
	v := &validator{}
	s := v.scenario(raw.Scenario)
	if v.diags.HasErrors() {
		return nil, &Error{Diags: v.diags}
	}
	return s, nil
}

// validator collects every mistake, not only the first.
type validator struct {
	diags hcl.Diagnostics
}

func (v *validator) errorf(r hcl.Range, summary, format string, args ...any) {
	v.diags = append(v.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(format, args...), Subject: r.Ptr()})
}

// str evaluates an optional string attribute ("" when absent).
func (v *validator) str(e hcl.Expression, name string) string {
	if e == nil {
		return ""
	}
	val, diags := e.Value(nil)
	if diags.HasErrors() {
		v.diags = append(v.diags, diags...)
		return ""
	}
	if val.IsNull() {
		return ""
	}
	if val.Type() != cty.String {
		v.errorf(e.Range(), "invalid "+name, "want a string, got %s", val.Type().FriendlyName())
		return ""
	}
	return val.AsString()
}

// duration evaluates an optional duration attribute ("1m30s", "500ms").
func (v *validator) duration(e hcl.Expression, name string, def time.Duration) time.Duration {
	s := v.str(e, name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		v.errorf(e.Range(), "invalid "+name, "%q is not a duration like \"500ms\", \"10s\" or \"2m\"", s)
		return def
	}
	return d
}

func (v *validator) scenario(b *scenarioBlock) *Scenario {
	s := &Scenario{Name: b.Name, Description: b.Description, Nodes: b.Nodes}
	if !validName(b.Name) {
		v.errorf(b.DefRange, "invalid scenario name", "%q: use lowercase letters, digits and '-'", b.Name)
	}
	if s.Nodes == 0 {
		s.Nodes = 3
	}
	if s.Nodes < 1 || s.Nodes > 9 {
		v.errorf(b.DefRange, "invalid nodes", "%d nodes: use 1 to 9", b.Nodes)
	}
	s.Duration = v.duration(b.Duration, "duration", 30*time.Second)
	s.Short = v.duration(b.Short, "short", min(s.Duration, 15*time.Second))
	if s.Duration < time.Second {
		v.errorf(b.DefRange, "invalid duration", "%s: at least 1s", s.Duration)
	}
	s.Short = min(s.Short, s.Duration)
	seen := map[string]bool{}
	for _, t := range b.Topics {
		tp := Topic{Name: t.Name, Partitions: uint32(t.Partitions), Replication: uint32(t.Replication),
			RetentionRecords: uint64(max(0, t.RetentionRecords)), DedupeWindowHours: t.DedupeHours}
		if tp.Partitions == 0 {
			tp.Partitions = 3
		}
		if tp.Replication == 0 {
			tp.Replication = uint32(min(3, s.Nodes))
		}
		switch {
		case seen[t.Name]:
			v.errorf(t.DefRange, "duplicate topic", "topic %q is declared twice", t.Name)
		case t.Partitions < 0 || t.Partitions > 64:
			v.errorf(t.DefRange, "invalid partitions", "%d partitions: use 1 to 64", t.Partitions)
		case t.Replication < 0 || int(tp.Replication) > s.Nodes:
			v.errorf(t.DefRange, "invalid replication", "replication %d with %d nodes", t.Replication, s.Nodes)
		case t.RetentionRecords < 0:
			v.errorf(t.DefRange, "invalid retention_records", "%d: must not be negative", t.RetentionRecords)
		}
		seen[t.Name] = true
		s.Topics = append(s.Topics, tp)
	}
	if len(s.Topics) == 0 {
		s.Topics = []Topic{{Name: "chaos", Partitions: 3, Replication: uint32(min(3, s.Nodes))}}
	}
	s.Workload = v.workload(b.Workload)
	for _, f := range b.Faults {
		s.Faults = append(s.Faults, v.fault(f, s))
		switch s.Faults[len(s.Faults)-1].Action {
		case "failpoint":
			s.Failpoints = true
		case "power-loss":
			s.Failpoints, s.PowerLoss = true, true
		}
	}
	if b.Bounds != nil {
		s.Bounds = Bounds{
			FailoverWithin:   v.duration(b.Bounds.FailoverWithin, "failover_within", 0),
			RecoverWithin:    v.duration(b.Bounds.RecoverWithin, "recover_within", 0),
			PublishP99During: v.duration(b.Bounds.PublishP99During, "publish_p99_during", 0),
			PublishP99After:  v.duration(b.Bounds.PublishP99After, "publish_p99_after", 0),
			PublishP99Ratio:  b.Bounds.PublishP99Ratio,
		}
		if r := b.Bounds.PublishP99Ratio; r != 0 && r < 1 {
			v.errorf(b.Bounds.DefRange, "invalid publish_p99_ratio", "%g: a ratio of at least 1", r)
		}
	}
	return s
}

func (v *validator) workload(b *workloadBlock) Workload {
	if b == nil {
		return Workload{Publishers: 3, Followers: true, Replays: 1}
	}
	w := Workload{Publishers: b.Publishers, Rate: b.Rate, ValueBytes: b.ValueBytes, Followers: b.Followers, Replays: b.Replays, Filter: b.Filter, Gauntlet: b.Gauntlet, Bombs: b.Bombs}
	if w.Publishers < 0 || w.Publishers > 64 {
		v.errorf(b.DefRange, "invalid publishers", "%d publishers: use 0 to 64", b.Publishers)
	}
	if w.ValueBytes < 0 || w.ValueBytes > 1<<20 {
		v.errorf(b.DefRange, "invalid value_bytes", "%d: use 0 to 1048576", b.ValueBytes)
	}
	if w.Rate < 0 {
		v.errorf(b.DefRange, "invalid rate", "%g records/s: must not be negative", b.Rate)
	}
	if w.Replays < 0 || w.Replays > 64 {
		v.errorf(b.DefRange, "invalid replays", "%d replays: use 0 to 64", b.Replays)
	}
	if w.Filter != "" && !slices.Contains(Filters, w.Filter) {
		v.errorf(b.DefRange, "unknown filter", "%q: the example filters are %s", w.Filter, strings.Join(Filters, ", "))
	}
	for _, g := range b.Groups {
		gr := Group{Name: g.Name, Members: g.Members,
			Churn: v.duration(g.Churn, "churn", 0), ResetEvery: v.duration(g.ResetEvery, "reset_every", 0), Slow: v.duration(g.Slow, "slow", 0)}
		if gr.Members == 0 {
			gr.Members = 2
		}
		if gr.Members < 1 || gr.Members > 16 {
			v.errorf(g.DefRange, "invalid members", "%d members: use 1 to 16", g.Members)
		}
		w.Groups = append(w.Groups, gr)
	}
	if bb := b.Bank; bb != nil {
		w.Bank = &Bank{Accounts: cmp.Or(bb.Accounts, 20), Writers: cmp.Or(bb.Writers, 8)}
		if w.Bank.Accounts < 1 || w.Bank.Accounts > 1000 {
			v.errorf(bb.DefRange, "invalid accounts", "%d accounts: use 1 to 1000", bb.Accounts)
		}
		if w.Bank.Writers < 1 || w.Bank.Writers > 64 {
			v.errorf(bb.DefRange, "invalid writers", "%d writers per account: use 1 to 64", bb.Writers)
		}
	}
	return w
}

// Filters are the example filters a workload may name.
var Filters = []string{"key-prefix", "tag-transform"}

func (v *validator) fault(b faultBlock, s *Scenario) Fault {
	f := Fault{Name: b.Name, Action: v.str(b.Action, "action"), Target: v.str(b.Target, "target"),
		Start: v.duration(b.Start, "start", 0), Hold: v.duration(b.Hold, "hold", 0), Every: v.duration(b.Every, "every", 0),
		Failpoint: b.Failpoint, Value: b.Value}
	if !slices.Contains(Actions, f.Action) {
		r := b.DefRange
		if b.Action != nil {
			r = b.Action.Range()
		}
		v.errorf(r, "unknown action", "%q: use one of %s", f.Action, strings.Join(Actions, ", "))
	}
	if f.Target == "" {
		f.Target = map[string]string{"split": "minority", "rolling-restart": "all", "bridge": "leader"}[f.Action]
		if f.Target == "" {
			f.Target = "leader"
		}
	}
	if err := checkTarget(f.Target, s.Nodes, s.Topics[0].Partitions); err != nil {
		r := b.DefRange
		if b.Target != nil {
			r = b.Target.Range()
		}
		v.errorf(r, "invalid target", "%v", err)
	}
	if f.Every != 0 && f.Every <= f.Hold {
		v.errorf(b.DefRange, "invalid every", "every %s must be longer than hold %s", f.Every, f.Hold)
	}
	switch f.Action {
	case "delay":
		if _, _, err := ParseDelay(f.Value); err != nil {
			v.errorf(b.DefRange, "invalid value", "%v", err)
		}
	case "bandwidth":
		if _, err := ParseRate(f.Value); err != nil {
			v.errorf(b.DefRange, "invalid value", "%v", err)
		}
	case "replay-storm":
		if n, err := ParseStorm(f.Value); err != nil || n < 1 || n > 64 {
			v.errorf(b.DefRange, "invalid value", "replay-storm %q: the number of concurrent replays, 1 to 64", f.Value)
		}
	}
	if f.Action == "failpoint" && f.Failpoint == "" {
		v.errorf(b.DefRange, "missing failpoint", "a failpoint fault names its failpoint (failpoint = \"fsync-eio\")")
	}
	if f.Action != "failpoint" && f.Failpoint != "" {
		v.errorf(b.DefRange, "unexpected failpoint", "only action \"failpoint\" sets a failpoint")
	}
	return f
}

// checkTarget checks a fault's target against the topology.
func checkTarget(t string, nodes int, partitions uint32) error {
	kind, arg, _ := strings.Cut(t, ":")
	switch kind {
	case "leader", "followers":
		if arg == "" {
			return nil
		}
		var p uint32
		if _, err := fmt.Sscanf(arg, "%d", &p); err != nil || p >= partitions {
			return fmt.Errorf("%q: %s:P names a partition of the first topic (0 to %d)", t, kind, partitions-1)
		}
	case "node":
		var n int
		if _, err := fmt.Sscanf(arg, "%d", &n); err != nil || n < 1 || n > nodes {
			return fmt.Errorf("%q: node:N names a node, 1 to %d", t, nodes)
		}
	case "random", "minority", "all":
		if arg != "" {
			return fmt.Errorf("%q: %s takes no argument", t, kind)
		}
	default:
		return fmt.Errorf("%q: use leader, leader:P, followers, followers:P, node:N, random, minority or all", t)
	}
	return nil
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// ParseDelay reads a delay fault's value: "100ms" or "100ms~50ms" (a delay
// and a jitter: each chunk is held the delay plus a random part of the
// jitter).
func ParseDelay(s string) (delay, jitter time.Duration, err error) {
	d, j, hasJitter := strings.Cut(s, "~")
	if delay, err = time.ParseDuration(d); err != nil || delay < 0 {
		return 0, 0, fmt.Errorf("delay %q: want a duration like \"100ms\" or \"100ms~50ms\" (with jitter)", s)
	}
	if hasJitter {
		if jitter, err = time.ParseDuration(j); err != nil || jitter < 0 {
			return 0, 0, fmt.Errorf("delay %q: the jitter after ~ is not a duration", s)
		}
	}
	return delay, jitter, nil
}

// ParseRate reads a bandwidth fault's value: bytes per second, as
// "262144", "256KiB" or "1MiB".
func ParseRate(s string) (int64, error) {
	num, mult := s, int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	var n int64
	if _, err := fmt.Sscanf(num, "%d", &n); err != nil || n <= 0 || fmt.Sprint(n) != num {
		return 0, fmt.Errorf("bandwidth %q: want bytes per second, like \"262144\", \"256KiB\" or \"1MiB\"", s)
	}
	return n * mult, nil
}

// ParseStorm reads a replay-storm fault's value: how many replays loop
// at once ("" is 8).
func ParseStorm(s string) (int, error) {
	if s == "" {
		return 8, nil
	}
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil || fmt.Sprint(n) != s {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	return n, nil
}
