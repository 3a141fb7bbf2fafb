// Package history is what a scenario run observed: every operation the
// workload attempted and how it ended, what each replica finally holds,
// what readers, followers and group members saw, the faults injected and
// the leaders reported over time. The runner (scenarios/runner) records it;
// the checkers (scenarios/check) judge it; the report (scenarios/report) shows
// it. It holds data only: no package here talks to a server.
package history

import "time"

// History is one scenario run.
type History struct {
	Scenario string
	Seed     int64
	// Client is what the publishers published through: "" (one attempt
	// per call, the publisher retrying), "go", "ts" or "cli"
	// (runner.Options.Client).
	Client string `json:",omitempty"`
	Start  time.Time
	End    time.Time
	// WorkloadEnd is when the workload stopped (publishers, readers and
	// groups), before the faults were healed and the replicas read back.
	// Zero: unknown.
	WorkloadEnd time.Time `json:",omitzero"`
	Nodes       []uint64
	Topics      []Topic

	Publishes []Publish
	// Replicas is what each node's replica of each partition holds at the
	// end of the run, read after the faults healed and every replica
	// caught up.
	Replicas []Replica
	Reads    []Read
	Follows  []Follow
	Groups   []GroupEvent
	Leaders  []LeaderObs
	Faults   []Fault
	// Probes are the malformed requests of the gauntlet workload, each
	// with the answer it got.
	Probes []Probe
	// Bounds are the scenario's liveness bounds, checked against the
	// publishes around each fault.
	Bounds Bounds
	// Keys are the histories of the keys the workload appended to with
	// conditions (Publish.Cond), each read from the event store once the
	// faults healed and the replicas caught up.
	Keys []KeyRead `json:",omitempty"`
}

// Topic is a topic the workload used.
type Topic struct {
	Name       string
	Partitions uint32
	// Filters maps a filter's name (as Read.Filter) to its predicate on
	// a record, the Go equivalent of the WebAssembly module: the filter
	// checker compares a filtered replay with it. Not serialised.
	Filters map[string]func(Record) bool `json:"-"`
	// Transforms maps a transform's name (as Read.Filter) to what the
	// module does to a record: the record it delivers instead, and whether
	// it delivers one at all. Not serialised.
	Transforms map[string]func(Record) (Record, bool) `json:"-"`
}

// Outcome is how a publish attempt ended for the client.
type Outcome string

const (
	// Acked: the server acknowledged it with a partition and an offset.
	Acked Outcome = "acked"
	// Failed: the server said nothing was stored (Rewind-Not-Stored, an
	// InvalidArgument, a dial that never connected).
	Failed Outcome = "failed"
	// Unknown: the attempt ended without an answer (a timeout, a broken
	// connection, Unavailable with an unknown outcome): the record may or
	// may not be stored.
	Unknown Outcome = "unknown"
)

// Publish is one record a publisher sent, with all its attempts folded
// into one outcome (the client retries with the same idempotency key).
type Publish struct {
	Publisher int    // which publisher (a sequential one: one record at a time)
	Seq       int    // the publisher's sequence number, from 0
	Topic     string // topic name
	Key       string // the record key (a publisher uses one key, so one partition)
	IdemKey   string // unique idempotency key
	Value     string // unique value (names the publisher and sequence number)
	Start     time.Time
	End       time.Time
	Outcome   Outcome
	// Partition and Offset are set when Acked.
	Partition uint32
	Offset    uint64
	MessageID string
	Duplicate bool   // the server reported it as a duplicate of an earlier attempt
	Err       string // the last error, when not Acked
	// Attempts is how many times it was sent (the same request each
	// time); Failed means every attempt was refused with nothing stored.
	Attempts int
	// Failures are the first failed attempts' errors (at most 8), each
	// after the time since Start: why a publish waited.
	Failures []string `json:",omitempty"`
	// Cond is set on a conditional append (the bank workload): what it
	// expected of its key's history and what the server answered. Nil: a
	// plain publish.
	Cond *Condition `json:",omitempty"`
}

// Condition is a conditional append's expectation of its key (Publish.Key)
// and what came back. A refusal (Conflict) is a Failed publish: a refused
// append stores nothing, and a retry of an attempt that was stored is
// answered with the original, never refused.
type Condition struct {
	// None: the key had no record when the writer loaded it (a new
	// account); otherwise Version is the last version the writer loaded,
	// and the record must become Version+1.
	None    bool `json:",omitempty"`
	Version uint64
	// KeyVersion is the version an Acked append was given.
	KeyVersion uint64 `json:",omitempty"`
	// Conflict: refused because the key's history had moved; Actual is
	// the key's last version the refusal named (HasActual false: it
	// named none, the key had no record).
	Conflict  bool   `json:",omitempty"`
	Actual    uint64 `json:",omitempty"`
	HasActual bool   `json:",omitempty"`
}

// KeyRead is one key's whole history as the event store returned it
// (EventStoreService.Read of the key from version 0, served by its
// partition's leader).
type KeyRead struct {
	Topic     string
	Key       string
	Partition uint32
	// Records are in version order, each with its KeyVersion.
	Records []Record
	// Head is the key's last version as the read reported it (HasHead
	// false: the key has no record).
	Head    uint64
	HasHead bool
	// Err: the read never succeeded (Records is then empty).
	Err string `json:",omitempty"`
}

// Record is a stored record as read back.
type Record struct {
	Partition  uint32
	Offset     uint64
	Key        string
	Value      string
	IdemKey    string
	AppendTime time.Time
	// KeyVersion is the record's position in its key's history (0, 1,
	// 2, ...), as the node that served it assigned it; 0 for a record
	// without a key.
	KeyVersion uint64 `json:",omitempty"`
}

// Replica is one node's copy of one partition at the end of the run.
type Replica struct {
	Node      uint64
	Topic     string
	Partition uint32
	// Start is the first offset still held (retention may have removed
	// earlier ones); End is one past the last.
	Start, End uint64
	Records    []Record
	// Digest is the node's own checksum of the records, when it reports
	// one (empty: not reported).
	Digest string
}

// PositionKind is how a replay's start or stop was given.
type PositionKind string

const (
	AtOffset    PositionKind = "offset"
	AtTime      PositionKind = "time"
	AtMessageID PositionKind = "id"
	LastN       PositionKind = "last"     // the last N records of the partition
	Earliest    PositionKind = "earliest" // from the first record held
	None        PositionKind = ""         // no stop: to the end at the time of the read
)

// Position is a replay's start or stop as requested.
type Position struct {
	Kind   PositionKind
	Offset uint64    // AtOffset, AtMessageID (its offset)
	Time   time.Time // AtTime
	N      uint64    // LastN
	ID     string    // AtMessageID
}

// Read is one bounded replay of one partition: what was asked and what
// came back, in order.
type Read struct {
	Reader    string
	Topic     string
	Partition uint32
	From      Position
	To        Position // Kind None: to the end as of when the read began
	// EndAtStart is the partition's end offset when the read began (the
	// read sees at least everything acknowledged before it).
	EndAtStart uint64
	Filter     string // a name in Topic.Filters; empty: unfiltered
	Records    []Record
	Err        string // the read failed (its records are what came before)
	Start, End time.Time
}

// Follow is a live follower of one partition across its reconnects: every
// record it was handed, in order.
type Follow struct {
	Follower   string
	Topic      string
	Partition  uint32
	From       uint64 // first offset asked
	Records    []Record
	Reconnects int
	Err        string
}

// GroupEventKind is what happened to a group member.
type GroupEventKind string

const (
	Joined        GroupEventKind = "joined"
	Assigned      GroupEventKind = "assigned" // Partition assigned at Generation, starting at Offset
	Delivered     GroupEventKind = "delivered"
	Committed     GroupEventKind = "committed"      // the server accepted a commit of Offset (the next to read)
	CommitRefused GroupEventKind = "commit-refused" // the server refused it (fenced)
	// Revoked: Partition was taken from the member by the assignment of
	// Generation (its fence is raised to it before the member hears of
	// it: a later commit from an older generation must be refused).
	Revoked GroupEventKind = "revoked"
	Left    GroupEventKind = "left"
	Crashed GroupEventKind = "crashed"
	Reset   GroupEventKind = "reset" // the group's Partition was reset to Offset (Member empty)
	// ResetUnknown: a reset of the group's Partition was asked for and
	// its outcome is unknown (the request failed or timed out; Member
	// empty, Sent and At set). A Seeked at a generation no Reset names is
	// taken for its outcome.
	ResetUnknown GroupEventKind = "reset-unknown"
	// Seeked: a reset moved the member's Partition, at Generation, to
	// Offset: the member reads on from there (the client's ReplayStarted).
	Seeked GroupEventKind = "seeked"
)

// GroupEvent is one event of a subscriber group's member, in the order
// the member saw them.
type GroupEvent struct {
	Group  string
	Member string
	Kind   GroupEventKind
	// Generation: Assigned, Committed, CommitRefused: the generation of
	// the assignment; Delivered: the generation of the assignment the
	// member was reading under; Reset: the generation the reset created
	// (0: unknown, then the group checker orders a reset by At).
	Generation uint64
	Topic      string
	Partition  uint32
	Offset     uint64 // Delivered: the record's offset; Committed, Reset, Assigned, Seeked: the next offset to read
	At         time.Time
	// Sent is when a Committed or CommitRefused commit was sent (At is
	// when its answer came back). The group checker orders commits by it:
	// a commit sent after another member was assigned the partition at a
	// newer generation must have been refused, whereas one sent before
	// may legitimately be accepted and answered late. Zero: unknown, At
	// is used (a late answer can then look like a fenced commit). For a
	// Reset or ResetUnknown, when the reset was asked for: its effect
	// lies between Sent and At.
	Sent time.Time `json:",omitzero"`
}

// LeaderObs is one node's view of a raft group's leader at a moment.
type LeaderObs struct {
	At        time.Time
	Node      uint64 // who said so
	Topic     string // empty for the metadata group
	Partition uint32
	Term      uint64
	Leader    uint64 // 0: none known
}

// Fault is one fault the runner injected, from its start to its end
// (healed).
type Fault struct {
	Name    string
	Kind    string   // kill, pause, restart, cut, isolate, split, bridge, ...
	Targets []uint64 // nodes
	Start   time.Time
	End     time.Time
}

// Bounds are a scenario's liveness bounds (zero: not checked).
type Bounds struct {
	// FailoverWithin: during each fault, no partition of the first topic
	// goes longer than this without an acknowledged publish, from the
	// fault's start until the first acknowledgement on the partition after
	// the fault ended (what a publisher of that partition waits: the
	// failover time when the fault took its leader).
	FailoverWithin time.Duration
	// RecoverWithin: after each fault ends, some publish is acknowledged
	// within this long.
	RecoverWithin time.Duration
	// PublishP99During / After: the p99 latency of acknowledged publishes
	// sent during each fault / in the window of the same length after it.
	PublishP99During time.Duration
	PublishP99After  time.Duration
	// PublishP99Ratio: the p99 of the publishes sent during each fault is
	// at most this many times the p99 of those sent before the first
	// fault (the quiet start of the run): how much a fault, a replay storm
	// say, may slow live publishing down. 0: not checked.
	PublishP99Ratio float64
}

// Probe is one malformed request sent to a node and the answer it got.
type Probe struct {
	Node  uint64
	RPC   string // "rewind.v1.PublishService/Publish"
	Input string // what was wrong with it, in a few words
	// Code is the answer: "ok", a Connect code ("invalid_argument"), or
	// "transport: ..." when no answer came (the node is down: a crash
	// if no fault stopped it).
	Code string
	At   time.Time
	// MustFail: the request cannot succeed (a replay through a filter
	// that never returns, say): "ok" is a violation too.
	MustFail bool `json:",omitempty"`
}
