package broker

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/echo"
	"github.com/rewind-io/rewind/engine/internal/groups"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/record"
)

// PublishRecord is one record to publish.
type PublishRecord struct {
	record.Record
	// Partition is used when HasPartition is set; otherwise the key (or
	// idempotency key) hash or the keyless runs' spreader decides.
	Partition    uint32
	HasPartition bool
}

// PublishResult says where a record landed.
type PublishResult struct {
	Partition  uint32
	Offset     uint64
	AppendTime int64
	// Duplicate: the record was stored before (same idempotency key within
	// the topic's dedupe window); Partition, Offset and AppendTime are the
	// original's (the partition may differ from the one the record was
	// routed to: idempotency keys are topic-wide).
	Duplicate bool
	// KeyVersion is the record's key version (its position in its key's
	// history) when HasKeyVersion (the record has a key).
	KeyVersion    uint64
	HasKeyVersion bool
	// Err is set, in a partial publish (PublishPartial) only, when the
	// record's partition failed: the record is not acknowledged and
	// Partition is where it was routed. errors.Is(Err, ErrNotStored)
	// tells that it was certainly not stored.
	Err error
}

// ConflictError says which record of a publish reuses an idempotency key
// for different contents, and where the original is: idempotency keys are
// topic-wide, so Partition may be another than the record's.
type ConflictError struct {
	Index     int
	Key       string
	TopicID   uint64
	Partition uint32
	Offset    uint64
	// OffsetUnknown: the key is bound to Partition, but neither this node's
	// replica nor that partition's leader has the original (it is not
	// stored yet: a retry of it would store it there), or the leader could
	// not be asked in time.
	OffsetUnknown bool
}

func (e *ConflictError) Error() string {
	if e.OffsetUnknown {
		return fmt.Sprintf("record %d reuses idempotency key %s of a different record, bound to partition %d, within the dedupe window", e.Index, echo.Quote(e.Key), e.Partition)
	}
	return fmt.Sprintf("record %d reuses idempotency key %s of a different record (partition %d, offset %d) within the dedupe window", e.Index, echo.Quote(e.Key), e.Partition, e.Offset)
}

// Is makes a ConflictError a partition.ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == partition.ErrConflict }

// RecordTooLargeError says which record of a publish exceeds the topic's
// limit. Size counts what the publisher chose: key, value, idempotency key
// and headers (record.Record.PayloadSize), not the framing.
type RecordTooLargeError struct {
	Index int
	Size  int
	Max   uint32
}

func (e *RecordTooLargeError) Error() string {
	return fmt.Sprintf("record %d is %d bytes (key, value, headers and idempotency key), over the topic's limit of %d bytes", e.Index, e.Size, e.Max)
}

// Is makes a RecordTooLargeError an ErrInvalid.
func (e *RecordTooLargeError) Is(target error) bool { return target == ErrInvalid }

// stickyBytes is how much a run of consecutive records without key,
// idempotency key or partition puts in one partition before the next run
// begins (the record that reaches it ends its run): a request's records
// stay together in as few partitions (appends, raft entries, forwards to
// leaders) as possible, while a large request of small records still
// spreads (runs of 1,024 records kept 100 KB requests in one partition).
// This is Kafka's sticky partitioner with its 16 KiB batch.size. Per-record
// round-robin made a request of 100 records touch every partition and wait
// for the slowest.
const stickyBytes = 16 << 10

// spreader chooses the partition of each run of keyless records: the one
// that has been given the fewest keyless bytes so far by this node, ties
// going to the next partition after the last one chosen (so equal runs
// take turns). Safe for concurrent use.
//
// Why least-given and not the next partition in turn? Because turns count
// runs, and runs differ in size: a request's last run is usually short,
// and the CLI's requests follow a pattern (one line, then the lines that
// arrived meanwhile), so the big and the small runs fell on the same
// partitions every time. 9 piped lines over 3 partitions gave 1, 8 and 0;
// 300,000 lines over 4 gave 41k, 109k, 41k, 109k. Counting bytes, the
// partitions given the most and the fewest never differ by more than one
// run (at most stickyBytes plus a record), whatever the pattern of the
// requests. Kafka's uniform sticky partitioner switches partition after
// batch.size bytes across requests instead, which leaves a small volume
// (4,000 one-line publishes are 6 runs of 16 KiB) on few partitions.
type spreader struct {
	mu struct {
		sync.Mutex
		// given counts the keyless bytes placed in each partition. Only
		// differences matter: Invariant: max(given)-min(given) <=
		// stickyBytes + the largest record placed.
		given []uint64
		// next is where the search for the least-given partition starts.
		next int
	}
}

// newSpreader returns a spreader for n partitions.
func newSpreader(n uint32) *spreader {
	s := &spreader{}
	s.mu.given = make([]uint64, n)
	return s
}

// place returns a partition for each run, given the runs' sizes in bytes,
// in order.
func (s *spreader) place(runs []uint64) []uint32 {
	out := make([]uint32, len(runs))
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.mu.given)
	for r, size := range runs {
		best := s.mu.next % n
		for k := 1; k < n; k++ {
			if p := (s.mu.next + k) % n; s.mu.given[p] < s.mu.given[best] {
				best = p
			}
		}
		s.mu.given[best] += size
		s.mu.next = best + 1
		out[r] = uint32(best)
	}
	return out
}

// grown returns a spreader for n partitions (more than s has) that gives
// the new partitions their share from now on: they start level with the
// least-given old one, rather than at zero, which would send them every
// run until they caught up with the bytes the old ones took before.
func (s *spreader) grown(n uint32) *spreader {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := newSpreader(n)
	copy(g.mu.given, s.mu.given)
	low := slices.Min(s.mu.given)
	for p := len(s.mu.given); p < int(n); p++ {
		g.mu.given[p] = low
	}
	g.mu.next = s.mu.next
	return g
}

// PartitionForKey is the partition a key maps to: FNV-1a (32-bit) of the key
// modulo the partition count.
func PartitionForKey(key []byte, partitions uint32) uint32 {
	h := fnv.New32a()
	h.Write(key)
	return h.Sum32() % partitions
}

// Publish validates every record, then appends them: records bound for the
// same partition land contiguously in request order. It returns once all
// are durable, with the topic's id and one result per record in request
// order. Validation failures store nothing.
func (b *Broker) Publish(ctx context.Context, topic string, recs []PublishRecord) (topicID uint64, _ []PublishResult, err error) {
	return b.publish(ctx, topic, recs, false, nil)
}

// PublishIf is Publish for a conditional append: the records must all go
// to one partition, which stores them all or none, only if conds hold when
// it applies them (a *ConditionError otherwise). Key conditions name keys
// of that partition.
func (b *Broker) PublishIf(ctx context.Context, topic string, recs []PublishRecord, conds *partition.Conditions) (topicID uint64, _ []PublishResult, err error) {
	return b.publish(ctx, topic, recs, false, conds)
}

// ConditionError is a conditional append refused in Partition.
type ConditionError struct {
	Partition uint32
	*partition.ConditionError
}

// Unwrap returns the partition's refusal.
func (e *ConditionError) Unwrap() error { return e.ConditionError }

// PublishPartial is Publish where the partitions of the request succeed
// or fail apart: the records of a partition that failed (its leader is
// unreachable or low on disk, ...) get PublishResult.Err, and the others
// are acknowledged as usual. It fails as a whole when the request is
// refused before anything is appended (validation), on an idempotency
// conflict, or when every partition failed. One partition stuck until
// the deadline no longer costs the acknowledgements of the others.
func (b *Broker) PublishPartial(ctx context.Context, topic string, recs []PublishRecord) (topicID uint64, _ []PublishResult, err error) {
	return b.publish(ctx, topic, recs, true, nil)
}

func (b *Broker) publish(ctx context.Context, topic string, recs []PublishRecord, partial bool, conds *partition.Conditions) (topicID uint64, _ []PublishResult, err error) {
	// Checking and routing the records is live work, which catch-up
	// reads give way to (package sched); waiting for them to be stored is
	// not.
	live := b.sched.Live()
	defer live()
	lt, err := b.anyTopic(topic)
	if err != nil {
		return 0, nil, err
	}
	if len(recs) == 0 || len(recs) > MaxRecordsPerPublish {
		return 0, nil, fmt.Errorf("%w: %d records: publish 1 to %d per request", ErrInvalid, len(recs), MaxRecordsPerPublish)
	}
	n := lt.meta.Partitions
	dest := make([]uint32, len(recs))
	var seenKeys map[string]int
	// Keyless records are placed in runs of stickyBytes (spreader): first
	// each one's run (in dest), then, once the runs have their
	// partitions, the partition.
	var runs []uint64
	acc := 0
	for i := range recs {
		if r := &recs[i]; !r.HasPartition && len(r.Key) == 0 && len(r.IdempotencyKey) == 0 {
			if acc == 0 {
				runs = append(runs, 0)
			}
			dest[i] = uint32(len(runs) - 1)
			size := r.EncodedSize()
			runs[len(runs)-1] += uint64(size)
			if acc += size; acc >= stickyBytes {
				acc = 0
			}
		}
	}
	var runParts []uint32
	if len(runs) > 0 {
		runParts = lt.spread.place(runs)
	}
	for i := range recs {
		r := &recs[i]
		if size := r.PayloadSize(); size > int(lt.meta.MaxRecordBytes) {
			return 0, nil, &RecordTooLargeError{Index: i, Size: size, Max: lt.meta.MaxRecordBytes}
		}
		if len(r.Headers) > MaxHeaders {
			return 0, nil, fmt.Errorf("%w: record %d has %d headers (at most %d)", ErrInvalid, i, len(r.Headers), MaxHeaders)
		}
		if len(r.IdempotencyKey) > MaxIdempotencyKey {
			return 0, nil, fmt.Errorf("%w: record %d: idempotency key of %d bytes (at most %d)", ErrInvalid, i, len(r.IdempotencyKey), MaxIdempotencyKey)
		}
		if !utf8.Valid(r.IdempotencyKey) {
			return 0, nil, fmt.Errorf("%w: record %d: idempotency key is not UTF-8", ErrInvalid, i)
		}
		if len(r.IdempotencyKey) > 0 {
			if seenKeys == nil {
				seenKeys = make(map[string]int)
			}
			if j, ok := seenKeys[string(r.IdempotencyKey)]; ok {
				return 0, nil, fmt.Errorf("%w: records %d and %d have the same idempotency key %s", ErrInvalid, j, i, echo.QuoteBytes(r.IdempotencyKey))
			}
			seenKeys[string(r.IdempotencyKey)] = i
		}
		switch {
		case r.HasPartition:
			if r.Partition >= n {
				if err := b.growing(lt, r.Partition); err != nil {
					return 0, nil, err
				}
				return 0, nil, fmt.Errorf("%w: record %d: partition %d does not exist (topic %q has %d)", ErrInvalid, i, r.Partition, topic, n)
			}
			dest[i] = r.Partition
		case len(r.Key) > 0:
			dest[i] = PartitionForKey(r.Key, n)
		case len(r.IdempotencyKey) > 0:
			// A keyless record goes to its idempotency key's home
			// partition, which needs no binding (idempotency.go).
			dest[i] = PartitionForKey(r.IdempotencyKey, n)
		default:
			dest[i] = runParts[dest[i]]
		}
	}
	if !conds.Empty() {
		if !lt.meta.KeyIndex {
			return 0, nil, fmt.Errorf("topic %q: %w", topic, partition.ErrNoKeyIndex)
		}
		if err := checkColocated(recs, dest, conds, n); err != nil {
			return 0, nil, err
		}
	}
	ctx, cancel := b.publishContext(ctx)
	defer cancel()
	live()
	if seenKeys != nil && lt.meta.DedupeWindowNanos > 0 && !forwarded(ctx) {
		if err := b.bindKeys(ctx, lt, recs, dest); err != nil {
			return 0, nil, err
		}
	}
	// Gather each partition's records, keeping their request indexes.
	counts := make([]int, n)
	for _, p := range dest {
		counts[p]++
	}
	byPart := make([][]record.Record, n)
	idx := make([][]int, n)
	for p, c := range counts {
		if c > 0 {
			byPart[p] = make([]record.Record, 0, c)
			idx[p] = make([]int, 0, c)
		}
	}
	for i := range recs {
		p := dest[i]
		byPart[p] = append(byPart[p], recs[i].Record)
		idx[p] = append(idx[p], i)
	}
	out := make([]PublishResult, len(recs))
	type done struct {
		p   int
		a   *partition.Append
		res []PublishResult
		err error
	}
	var parts []int
	for p := range byPart {
		if len(byPart[p]) > 0 {
			parts = append(parts, p)
		}
	}
	results := make([]done, len(parts))
	publish := func(k int) {
		p := parts[k]
		a, res, err := b.publishPartition(ctx, lt, uint32(p), byPart[p], conds)
		results[k] = done{p: p, a: a, res: res, err: err}
	}
	if len(parts) == 1 {
		publish(0)
	} else {
		// Partitions are independent (their leaders may be on different
		// nodes): publish to all at once.
		var wg sync.WaitGroup
		for k := range parts {
			wg.Add(1)
			go func() { defer wg.Done(); publish(k) }()
		}
		wg.Wait()
	}
	var elsewhere []moved
	var failed error
	for _, d := range results {
		ms, err := b.partitionOutcome(lt, uint32(d.p), idx[d.p], d.a, d.res, d.err, out)
		var conflict *ConflictError
		if err != nil && (!partial || errors.As(err, &conflict)) {
			return 0, nil, err
		}
		if err != nil {
			failed = err
			for _, i := range idx[d.p] {
				out[i] = PublishResult{Partition: uint32(d.p), Err: err}
			}
			continue
		}
		elsewhere = append(elsewhere, ms...)
	}
	if failed != nil && len(elsewhere) == 0 && !slices.ContainsFunc(out, func(r PublishResult) bool { return r.Err == nil }) {
		return 0, nil, failed // nothing acknowledged: fail as a whole
	}
	if len(elsewhere) > 0 {
		if err := b.moveElsewhere(ctx, lt, recs, elsewhere, out); err != nil {
			return 0, nil, err
		}
	}
	return lt.meta.ID, out, nil
}

// partitionOutcome turns one partition's append (a, local) or forwarded
// results (res) into results in out, at the request indexes idx; it returns
// the records to move elsewhere, or the publish's error.
func (b *Broker) partitionOutcome(lt *liveTopic, p uint32, idx []int, a *partition.Append, res []PublishResult, err error, out []PublishResult) ([]moved, error) {
	if err != nil {
		var cond *ConditionError
		if errors.As(err, &cond) {
			return nil, cond
		}
		var pcond *partition.ConditionError
		if errors.As(err, &pcond) {
			return nil, &ConditionError{Partition: p, ConditionError: pcond}
		}
		var ce *partition.ConflictError
		if errors.As(err, &ce) {
			c := &ConflictError{Index: idx[ce.Index], Key: ce.Key, TopicID: lt.meta.ID, Partition: ce.Partition, Offset: ce.Offset}
			if !ce.Stored {
				c.Offset, c.OffsetUnknown = b.storedOffset(context.Background(), lt, ce.Partition, []byte(ce.Key))
			}
			return nil, c
		}
		var fce *ConflictError
		if errors.As(err, &fce) {
			// From the leader this was forwarded to: its index is
			// within the forwarded records.
			c := *fce
			c.Index, c.TopicID = idx[min(c.Index, len(idx)-1)], lt.meta.ID
			return nil, &c
		}
		return nil, b.publishError(lt.meta.Name, err)
	}
	if a != nil {
		var recs, bytes uint64
		a.Each(func(i int, s partition.Stored) {
			out[idx[i]] = PublishResult{Partition: p, Offset: s.Offset, AppendTime: s.AppendTime, Duplicate: s.Duplicate,
				KeyVersion: s.Version, HasKeyVersion: s.HasVersion}
			if !s.Duplicate {
				recs, bytes = recs+1, bytes+uint64(a.Records[i].PayloadSize())
			}
		})
		lt.counters.published.Records.Add(recs)
		lt.counters.published.Bytes.Add(bytes)
		var ms []moved
		for _, m := range a.Elsewhere {
			if m.Partition >= lt.meta.Partitions || m.Partition == p {
				return nil, fmt.Errorf("%w: partition %d: idempotency key %q bound to partition %d", partition.ErrCorrupt, p, a.Records[m.Index].IdempotencyKey, m.Partition)
			}
			ms = append(ms, moved{index: idx[m.Index], partition: m.Partition})
		}
		return ms, nil
	}
	for i, r := range res {
		if i < len(idx) {
			out[idx[i]] = r
		}
	}
	return nil, nil
}

// records returns the records of recs.
func records(recs []PublishRecord) []record.Record {
	out := make([]record.Record, len(recs))
	for i := range recs {
		out[i] = recs[i].Record
	}
	return out
}

func (b *Broker) publishError(topic string, err error) error {
	return fmt.Errorf("publish to %q: %w", topic, UnavailableUnlessTyped(err))
}

// Typed are the errors that answer a request in themselves: retrying it
// elsewhere or later cannot change them (a deleted topic, an invalid
// request, a busy or full partition, a stale plan, a fenced or unknown
// generation), or its outcome is known to be unknown. The paths that give
// up on a request (publishes, group commits and plans) leave them, and
// *cursor.OutOfRangeError, as they are; every other error they mark
// ErrUnavailable (UnavailableUnlessTyped), which tells the router to hint
// a leader and clients that a retry may succeed.
//
// Which Connect code each error gets is the edge's business, in one table
// (api's codes); this list says only which errors are final. Each must
// have a code of its own there, and marking an error Unavailable must not
// change its code: api's TestCodesAgreeWithBrokerTyped checks both.
var Typed = []error{
	ErrTopicDeleted, partition.ErrBusy, partition.ErrDiskFull, partition.ErrStalePlan, partition.ErrOutcomeUnknown, partition.ErrFenced, partition.ErrCondition, partition.ErrNoKeyIndex,
	groups.ErrUnknownGeneration, groups.ErrHasMembers, groups.ErrNoGroup, cursor.ErrInvalid, ErrInvalid,
}

// IsTyped reports whether err is one of Typed, or a
// *cursor.OutOfRangeError.
func IsTyped(err error) bool {
	var oor *cursor.OutOfRangeError
	if errors.As(err, &oor) {
		return true
	}
	for _, e := range Typed {
		if errorsIs(err, e) {
			return true
		}
	}
	return false
}

// UnavailableUnlessTyped leaves errors that are final (IsTyped) alone and
// marks the rest retryable (ErrUnavailable).
func UnavailableUnlessTyped(err error) error {
	if err == nil || IsTyped(err) {
		return err
	}
	return unavailable(err)
}

// checkColocated refuses a conditional append that spans partitions: its
// records must all go to one partition, and the keys its conditions name
// must map there too (unless the records name their partition).
func checkColocated(recs []PublishRecord, dest []uint32, conds *partition.Conditions, n uint32) error {
	for i := range dest {
		if dest[i] != dest[0] {
			return fmt.Errorf("%w: a conditional append is atomic within one partition, but records 0 and %d go to partitions %d and %d: give the records one partition key, name one partition, or use a single-partition topic",
				ErrInvalid, i, dest[0], dest[i])
		}
	}
	explicit := slices.ContainsFunc(recs, func(r PublishRecord) bool { return r.HasPartition })
	for _, kc := range conds.Keys {
		if len(kc.Key) == 0 {
			return fmt.Errorf("%w: an expectation names an empty key", ErrInvalid)
		}
		if p := PartitionForKey(kc.Key, n); !explicit && p != dest[0] {
			return fmt.Errorf("%w: the expectation on key %s is checked in partition %d, the key's, but the records go to partition %d: co-locate them (one partition key or a single-partition topic)",
				ErrInvalid, echo.QuoteBytes(kc.Key), p, dest[0])
		}
	}
	for _, tc := range conds.Tags {
		if len(tc.Query) == 0 {
			return fmt.Errorf("%w: a condition has an empty query", ErrInvalid)
		}
	}
	return nil
}
