package broker

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/rewind-io/rewind/engine/internal/echo"
	"github.com/rewind-io/rewind/engine/internal/meta"
	"github.com/rewind-io/rewind/engine/internal/partition"
	"github.com/rewind-io/rewind/engine/internal/quota"
)

var topicName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// ValidateTopicName reports why name cannot be a topic name, or nil.
func ValidateTopicName(name string) error {
	if !topicName.MatchString(name) || name == "." || name == ".." {
		return fmt.Errorf("%w: topic name %s: use 1 to %d characters of a-z, A-Z, 0-9, '.', '_' and '-' (not \".\" or \"..\")",
			ErrInvalid, echo.Quote(name), MaxTopicName)
	}
	return nil
}

// TopicSpec is what CreateTopic takes.
type TopicSpec struct {
	Name              string
	Partitions        uint32
	ReplicationFactor uint32 // 0: default (Config.Cluster.DefaultReplicationFactor, capped at the members)
	MaxRecordBytes    uint32 // 0: DefaultMaxRecordBytes
	Retention         meta.Retention
	// DedupeWindow is how long idempotency keys are remembered; 0 turns
	// deduplication off, a negative value selects DefaultDedupeWindow.
	DedupeWindow time.Duration
	// NoKeyIndex creates the topic without the key and tag indexes (no key
	// versions, no conditional appends or key reads; keyed publishes about
	// twice as fast). Default: with them.
	NoKeyIndex bool
	// Creator is the principal creating the topic ("": authentication is
	// off). The topic counts against its topic and partition quotas; a
	// creation over them fails with a *quota.Exceeded.
	Creator string
}

// DefaultDedupeWindow is the dedupe window of a topic created without one.
const DefaultDedupeWindow = 24 * time.Hour

// TopicInfo describes a topic.
type TopicInfo = meta.Topic

// PartitionInfo is one partition's state.
type PartitionInfo struct {
	Partition uint32
	State     partition.State
	Leader    uint64
	// LocalStart is the first offset on this node's disk; Tiered the
	// partition's tiered segments (State.LogStart <= LocalStart).
	LocalStart uint64
	Tiered     []partition.TierSegment
}

// CreateTopic creates a topic and returns once its partitions accept
// publishes.
func (b *Broker) CreateTopic(ctx context.Context, s TopicSpec) (*TopicInfo, error) {
	var errs []error
	if err := ValidateTopicName(s.Name); err != nil {
		errs = append(errs, err)
	} else if strings.HasPrefix(s.Name, "-") {
		// It would read as a flag on every command line that names it.
		// Only new topics are held to this: one created before the rule
		// can still be described, altered and deleted.
		errs = append(errs, fmt.Errorf("%w: topic name %s: must not start with '-'", ErrInvalid, echo.Quote(s.Name)))
	}
	if s.Partitions == 0 || s.Partitions > MaxPartitions {
		errs = append(errs, fmt.Errorf("%w: %d partitions: use 1 to %d", ErrInvalid, s.Partitions, MaxPartitions))
	}
	if err := b.waitMembers(ctx); err != nil {
		return nil, err
	}
	members := max(len(b.meta.Nodes()), 1)
	if int(s.ReplicationFactor) > members {
		errs = append(errs, fmt.Errorf("%w: replication factor %d: the cluster has %d node(s)", ErrInvalid, s.ReplicationFactor, members))
	}
	if s.MaxRecordBytes == 0 {
		s.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if s.MaxRecordBytes > MaxMaxRecordBytes {
		errs = append(errs, fmt.Errorf("%w: max record size %d bytes: at most %d", ErrInvalid, s.MaxRecordBytes, MaxMaxRecordBytes))
	}
	if s.DedupeWindow < 0 {
		s.DedupeWindow = DefaultDedupeWindow
	}
	s.Retention = withDefaults(s.Retention)
	if err := validateRetention(s.Retention); err != nil {
		errs = append(errs, err)
	}
	if err := b.checkTiering(s.Retention); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if s.Creator != "" {
		// A first look at the durable catalog refuses a principal already
		// over its quota without a metadata entry (that log is never
		// truncated). The apply checks again, and decides (meta/quota.go).
		if err := quota.CheckTopics(s.Creator, b.Auth().QuotaFor(s.Creator), b.TopicsOwned()[s.Creator], s.Partitions); err != nil {
			return nil, err
		}
	}
	t, err := b.meta.Create(ctx, meta.Spec{
		Name: s.Name, Partitions: s.Partitions, ReplicationFactor: s.ReplicationFactor,
		MaxRecordBytes: s.MaxRecordBytes, Retention: s.Retention, CreateTime: b.Now(),
		DedupeWindowNanos: int64(s.DedupeWindow), Creator: s.Creator, KeyIndex: !s.NoKeyIndex,
	})
	if errors.Is(err, meta.ErrTopicExists) {
		return nil, fmt.Errorf("%w: %q", ErrTopicExists, s.Name)
	}
	if errors.Is(err, meta.ErrNotEnoughNodes) {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if errors.Is(err, quota.ErrExceeded) {
		return nil, err // the creator's topic or partition quota; nothing created
	}
	if err != nil {
		return nil, unavailable(err)
	}
	if err := b.startTopic(t); err != nil {
		return nil, err
	}
	return t, nil
}

// DeleteTopic deletes a topic and all its records: each member deletes its
// replicas at once; the topic's objects in tiered storage go later, once
// an hour old, when the metadata leader's housekeeping finds objects of a
// topic the catalog no longer holds (CollectTierGarbage).
func (b *Broker) DeleteTopic(ctx context.Context, name string) error {
	if err := ValidateTopicName(name); err != nil {
		return err
	}
	t, err := b.meta.Delete(ctx, name)
	if errors.Is(err, meta.ErrNoTopic) {
		return fmt.Errorf("%w: %s", ErrNoTopic, echo.Quote(name))
	}
	if err != nil {
		return unavailable(err)
	}
	return b.removeTopic(t)
}

// ListTopics returns every topic, ordered by name.
func (b *Broker) ListTopics() []*TopicInfo { return b.meta.Topics() }

// TopicsOwned returns what each principal created that still exists: its
// topics and their partitions (the durable catalog, the same on every
// member once applied there).
func (b *Broker) TopicsOwned() map[string]quota.Owned { return b.meta.Owned() }

// DescribeTopic returns a topic and the state of its partitions.
func (b *Broker) DescribeTopic(name string) (*TopicInfo, []PartitionInfo, error) {
	lt, err := b.topic(name)
	if err != nil {
		return nil, nil, err
	}
	out := make([]PartitionInfo, len(lt.parts))
	for i, p := range lt.parts {
		out[i] = PartitionInfo{Partition: uint32(i), State: p.Bounds(), Leader: p.Leader(), LocalStart: p.LocalStart(), Tiered: p.Tiered()}
	}
	t := lt.meta
	if cur, ok := b.meta.Topic(name); ok && cur.ID == t.ID {
		t = cur // the catalog has the latest retention policy
	}
	return t, out, nil
}

// unavailable marks infrastructure failures (a stopped group, a wait that
// timed out) as retryable, keeping the cause.
func unavailable(err error) error {
	if errors.Is(err, meta.ErrNotProposed) && !errors.Is(err, ErrNotStored) {
		// A metadata command raft refused: safe to send again, which a
		// client may do even for a call it makes only once (Rewind-Not-Stored).
		return notStored(err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// publishContext bounds a publish without a deadline.
func (b *Broker) publishContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, b.cfg.PublishTimeout)
}
