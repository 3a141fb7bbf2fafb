package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/rewind-io/rewind/sdk/client"
)

// rawMember is one consumer group member speaking the group protocol with
// raw kmsg requests through its own franz-go client (its own connection,
// so a JoinGroup waiting for a rebalance blocks no one else). Requests
// reach the group's coordinator through FindCoordinator, as a group
// consumer's do.
type rawMember struct {
	t     *testing.T
	c     *kgo.Client
	group string
	id    string
	gen   int32
}

func (n *kafkaNode) member(t *testing.T, group string) *rawMember {
	return &rawMember{t: t, c: n.client(t, kgo.ClientID("raw")), group: group}
}

func (m *rawMember) request(req kmsg.Request) kmsg.Response {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := m.c.Request(ctx, req)
	if err != nil {
		m.t.Errorf("%s: %v", kmsg.NameForKey(req.Key()), err)
		return nil
	}
	return resp
}

// joinOnce sends one JoinGroup with the member's id and protocols
// (comma-separated, preferred first) and returns the answer; the caller
// decides what its error code means.
func (m *rawMember) joinOnce(protocol string, rebalance time.Duration, topics ...string) *kmsg.JoinGroupResponse {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.ProtocolType = m.group, m.id, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 30_000, int32(rebalance/time.Millisecond)
	meta := kmsg.ConsumerMemberMetadata{Topics: topics}
	for _, name := range strings.Split(protocol, ",") { // in order of preference
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = name, meta.AppendTo(nil)
		req.Protocols = append(req.Protocols, p)
	}
	r, _ := m.request(req).(*kmsg.JoinGroupResponse)
	if r == nil {
		return &kmsg.JoinGroupResponse{ErrorCode: -1}
	}
	return r
}

// join joins with KIP-394's round trip: the first JoinGroup is answered
// MEMBER_ID_REQUIRED with an id, the second (with it) joins.
func (m *rawMember) join(protocol string, rebalance time.Duration, topics ...string) *kmsg.JoinGroupResponse {
	m.t.Helper()
	r := m.joinOnce(protocol, rebalance, topics...)
	if m.id == "" {
		if r.ErrorCode != kerr.MemberIDRequired.Code || r.MemberID == "" {
			m.t.Errorf("first JoinGroup: error %d, member id %q; want MEMBER_ID_REQUIRED with an id", r.ErrorCode, r.MemberID)
			return r
		}
		m.id = r.MemberID
		r = m.joinOnce(protocol, rebalance, topics...)
	}
	if r.ErrorCode == 0 {
		m.gen = r.Generation
	}
	return r
}

func (m *rawMember) sync(assign map[string][]byte) *kmsg.SyncGroupResponse {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 3
	req.Group, req.MemberID, req.Generation = m.group, m.id, m.gen
	for id, a := range assign {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = id, a
		req.GroupAssignment = append(req.GroupAssignment, ga)
	}
	r, _ := m.request(req).(*kmsg.SyncGroupResponse)
	if r == nil {
		return &kmsg.SyncGroupResponse{ErrorCode: -1}
	}
	return r
}

func (m *rawMember) heartbeat(gen int32) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 3
	req.Group, req.MemberID, req.Generation = m.group, m.id, gen
	r, _ := m.request(req).(*kmsg.HeartbeatResponse)
	if r == nil {
		return -1
	}
	return r.ErrorCode
}

func (m *rawMember) commit(gen int32, topic string, part int32, off int64) int16 {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 7
	req.Group, req.MemberID, req.Generation = m.group, m.id, gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = part, off
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	r, _ := m.request(req).(*kmsg.OffsetCommitResponse)
	if r == nil || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		m.t.Errorf("OffsetCommit: answer %+v", r)
		return -1
	}
	return r.Topics[0].Partitions[0].ErrorCode
}

func (m *rawMember) fetchOffset(topic string, part int32) int64 {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 5
	req.Group = m.group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{part}
	req.Topics = append(req.Topics, rt)
	r, _ := m.request(req).(*kmsg.OffsetFetchResponse)
	if r == nil || r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		m.t.Errorf("OffsetFetch: answer %+v", r)
		return -2
	}
	return r.Topics[0].Partitions[0].Offset
}

func (m *rawMember) leave() int16 {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group, req.MemberID = m.group, m.id // v0–v2; franz-go sends the highest version served
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = m.id
	req.Members = append(req.Members, lm) // v3+
	r, _ := m.request(req).(*kmsg.LeaveGroupResponse)
	if r == nil {
		return -1
	}
	if r.ErrorCode == 0 && r.Version >= 3 {
		return r.Members[0].ErrorCode
	}
	return r.ErrorCode
}

// eventually polls cond until it holds, failing the test after a generous
// deadline (the machine may be slow; nothing here measures speed).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func code(c int16) string {
	if err := kerr.ErrorForCode(c); err != nil {
		return err.Error()
	}
	return "no error"
}

// TestGroupProtocol walks the classic group protocol with raw requests:
// FindCoordinator names this node; JoinGroup's KIP-394 round trip; the
// leader gets every member's metadata and the followers none; SyncGroup
// hands out the leader's assignment; a second member's join makes the
// first one's heartbeat answer REBALANCE_IN_PROGRESS; commits of an old
// generation, an unknown member or during the sync are refused; a member
// that does not rejoin within the rebalance timeout is removed.
func TestGroupProtocol(t *testing.T) {
	n := startKafkaNode(t, engineKafka())
	admin := n.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, admin, "gp", 2)
	produceTo(t, admin, "gp", 2, 10) // a commit past a partition's end is refused

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKey = 3, "g1"
	fr, err := fc.RequestWith(context.Background(), admin)
	if err != nil || fr.ErrorCode != 0 || fmt.Sprintf("%s:%d", fr.Host, fr.Port) != n.Kafka {
		t.Fatalf("FindCoordinator v3: %+v, %v; want %s", fr, err, n.Kafka)
	}
	fc.Version, fc.CoordinatorKeys = 4, []string{"g1", "bad name!"}
	fr, err = fc.RequestWith(context.Background(), admin)
	byKey := map[string]kmsg.FindCoordinatorResponseCoordinator{}
	if fr != nil {
		for _, c := range fr.Coordinators {
			byKey[c.Key] = c
		}
	}
	if err != nil || len(byKey) != 2 || byKey["g1"].ErrorCode != 0 || byKey["g1"].Port == 0 || byKey["bad name!"].ErrorCode != kerr.InvalidGroupID.Code {
		t.Fatalf("FindCoordinator v4: %+v, %v; want g1 served and an INVALID_GROUP_ID", fr, err)
	}
	fc.CoordinatorKeys, fc.CoordinatorType = []string{"tx"}, 1
	fr, err = fc.RequestWith(context.Background(), admin)
	if err != nil || fr.Coordinators[0].ErrorCode == 0 {
		t.Fatalf("FindCoordinator of a transaction coordinator: %+v, %v; want an error", fr, err)
	}

	a := n.member(t, "g1")
	ja := a.join("range", 3*time.Second, "gp")
	if ja.ErrorCode != 0 || ja.Generation != 1 || ja.LeaderID != a.id || len(ja.Members) != 1 || ja.Protocol == nil || *ja.Protocol != "range" {
		t.Fatalf("first member's join: %s, %+v", code(ja.ErrorCode), ja)
	}
	if s := a.sync(map[string][]byte{a.id: []byte("all of it")}); s.ErrorCode != 0 || string(s.MemberAssignment) != "all of it" {
		t.Fatalf("leader's sync: %s, %q", code(s.ErrorCode), s.MemberAssignment)
	}
	if c := a.heartbeat(1); c != 0 {
		t.Fatalf("heartbeat: %s", code(c))
	}
	if c := a.commit(1, "gp", 0, 3); c != 0 {
		t.Fatalf("commit: %s", code(c))
	}
	if off := a.fetchOffset("gp", 0); off != 3 {
		t.Fatalf("committed offset %d, want 3", off)
	}
	if off := a.fetchOffset("gp", 1); off != -1 {
		t.Fatalf("offset of a partition without commits: %d, want -1", off)
	}

	// A second member: its join waits until the first one rejoins, which
	// its heartbeat tells it to do.
	b := n.member(t, "g1")
	var wg sync.WaitGroup
	var jb *kmsg.JoinGroupResponse
	wg.Add(1)
	go func() { defer wg.Done(); jb = b.join("range", 3*time.Second, "gp") }()
	eventually(t, "REBALANCE_IN_PROGRESS on the first member's heartbeat", func() bool {
		return a.heartbeat(1) == kerr.RebalanceInProgress.Code
	})
	if c := a.commit(5, "gp", 0, 4); c != kerr.IllegalGeneration.Code {
		t.Fatalf("commit of a generation never issued: %s, want ILLEGAL_GENERATION", code(c))
	}
	ja = a.join("range", 3*time.Second, "gp")
	wg.Wait()
	if ja.ErrorCode != 0 || jb.ErrorCode != 0 || ja.Generation != 2 || jb.Generation != 2 {
		t.Fatalf("rejoin: %s gen %d, %s gen %d; want generation 2", code(ja.ErrorCode), ja.Generation, code(jb.ErrorCode), jb.Generation)
	}
	if ja.LeaderID != a.id || jb.LeaderID != a.id || len(ja.Members) != 2 || len(jb.Members) != 0 {
		t.Fatalf("leader %q/%q (want %q), %d and %d members listed (want 2 to the leader, 0 to the follower)", ja.LeaderID, jb.LeaderID, a.id, len(ja.Members), len(jb.Members))
	}
	for _, jm := range ja.Members {
		var md kmsg.ConsumerMemberMetadata
		if err := md.ReadFrom(jm.ProtocolMetadata); err != nil || !slices.Equal(md.Topics, []string{"gp"}) {
			t.Fatalf("member %s's metadata as the leader got it: %v, %v; want topics [gp]", jm.MemberID, md.Topics, err)
		}
	}
	if c := a.commit(2, "gp", 0, 4); c != kerr.RebalanceInProgress.Code {
		t.Fatalf("commit before the sync: %s, want REBALANCE_IN_PROGRESS", code(c))
	}
	var sb *kmsg.SyncGroupResponse
	wg.Add(1)
	go func() { defer wg.Done(); sb = b.sync(nil) }() // waits for the leader's
	sa := a.sync(map[string][]byte{a.id: []byte("p0"), b.id: []byte("p1")})
	wg.Wait()
	if sa.ErrorCode != 0 || sb.ErrorCode != 0 || string(sa.MemberAssignment) != "p0" || string(sb.MemberAssignment) != "p1" {
		t.Fatalf("syncs: %s %q, %s %q", code(sa.ErrorCode), sa.MemberAssignment, code(sb.ErrorCode), sb.MemberAssignment)
	}
	if c := a.commit(1, "gp", 0, 4); c != kerr.IllegalGeneration.Code {
		t.Fatalf("commit of the previous generation: %s, want ILLEGAL_GENERATION", code(c))
	}
	if c := a.heartbeat(1); c != kerr.IllegalGeneration.Code {
		t.Fatalf("heartbeat of the previous generation: %s, want ILLEGAL_GENERATION", code(c))
	}
	stranger := &rawMember{t: t, c: a.c, group: "g1", id: "nobody"}
	if c := stranger.commit(2, "gp", 0, 4); c != kerr.UnknownMemberID.Code {
		t.Fatalf("commit of an unknown member: %s, want UNKNOWN_MEMBER_ID", code(c))
	}
	if c := stranger.commit(-1, "gp", 0, 4); c != kerr.UnknownMemberID.Code {
		t.Fatalf("admin commit into a group with members: %s, want UNKNOWN_MEMBER_ID", code(c))
	}
	if c := b.commit(2, "gp", 1, 7); c != 0 {
		t.Fatalf("commit: %s", code(c))
	}
	if c := b.commit(2, "gp", 1, 1_000_000); c != kerr.OffsetOutOfRange.Code {
		t.Fatalf("commit past the end: %s, want OFFSET_OUT_OF_RANGE", code(c))
	}

	// b leaves; a does not rejoin and is removed after its rebalance
	// timeout: the group is Empty, its commits stay.
	if c := b.leave(); c != 0 {
		t.Fatalf("leave: %s", code(c))
	}
	if c := a.heartbeat(2); c != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat after a leave: %s, want REBALANCE_IN_PROGRESS", code(c))
	}
	adm := kadm.NewClient(admin)
	eventually(t, "the group to empty", func() bool {
		dg, err := adm.DescribeGroups(context.Background(), "g1")
		return err == nil && dg["g1"].State == "Empty"
	})
	if c := a.heartbeat(2); c != kerr.UnknownMemberID.Code {
		t.Fatalf("heartbeat of a removed member: %s, want UNKNOWN_MEMBER_ID", code(c))
	}
	if off := a.fetchOffset("gp", 1); off != 7 {
		t.Fatalf("committed offset %d, want 7", off)
	}
	if c := a.commit(2, "gp", 0, 0); c != kerr.IllegalGeneration.Code {
		t.Fatalf("commit of a generation into a group without members: %s, want ILLEGAL_GENERATION", code(c))
	}
	// With no members, an admin commit (generation −1) is accepted.
	if c := stranger.commit(-1, "gp", 0, 0); c != 0 {
		t.Fatalf("admin commit into an empty group: %s", code(c))
	}
	if off := a.fetchOffset("gp", 0); off != 0 {
		t.Fatalf("committed offset %d, want 0", off)
	}
}

// produceTo writes n records to each of parts partitions of topic.
func produceTo(t *testing.T, c *kgo.Client, topic string, parts int32, n int) {
	t.Helper()
	var recs []*kgo.Record
	for p := range parts {
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "p%d-%d", p, i)})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// consumed is what a group consumer polled, by partition.
type consumed struct {
	mu   sync.Mutex
	offs map[int32][]int64
}

func (c *consumed) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, o := range c.offs {
		n += len(o)
	}
	return n
}

// pollInto polls cl until ctx ends, recording every record.
func pollInto(ctx context.Context, cl *kgo.Client, into *consumed) {
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		into.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) { into.offs[r.Partition] = append(into.offs[r.Partition], r.Offset) })
		into.mu.Unlock()
	}
}

// TestFranzGoGroupConsumer runs franz-go's group consumer (cooperative
// sticky, its default): one member reads every partition and commits; a
// second member joins, the partitions split two and two, and new records
// go to their owners only, from the commits; after both close, a new
// member resumes from the commits. kadm lists, describes and fetches the
// group's offsets, and Rewind's own DescribeGroup shows the commits.
func TestFranzGoGroupConsumer(t *testing.T) {
	n := startKafkaNode(t, engineKafka())
	prod := n.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, prod, "kg", 4)
	produceTo(t, prod, "kg", 4, 25)
	adm := kadm.NewClient(n.client(t))
	ctx := context.Background()

	opts := []kgo.Opt{kgo.ConsumerGroup("kgrp"), kgo.ConsumeTopics("kg"), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond)}
	a := n.client(t, append(opts, kgo.ClientID("member-a"))...)
	gotA := &consumed{offs: map[int32][]int64{}}
	actx, stopA := context.WithCancel(ctx)
	doneA := make(chan struct{})
	go func() { defer close(doneA); pollInto(actx, a, gotA) }()
	eventually(t, "member a to read the 100 records", func() bool { return gotA.total() >= 100 })
	if got := gotA.total(); got != 100 || len(gotA.offs) != 4 {
		t.Fatalf("member a read %d records of %d partitions, want 100 of 4", got, len(gotA.offs))
	}
	if err := a.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}

	b := n.client(t, append(opts, kgo.ClientID("member-b"))...)
	gotB := &consumed{offs: map[int32][]int64{}}
	bctx, stopB := context.WithCancel(ctx)
	doneB := make(chan struct{})
	go func() { defer close(doneB); pollInto(bctx, b, gotB) }()
	var split map[string][]int32
	eventually(t, "the partitions to split between the two members", func() bool {
		dg, err := adm.DescribeGroups(ctx, "kgrp")
		if err != nil || dg["kgrp"].State != "Stable" || len(dg["kgrp"].Members) != 2 {
			return false
		}
		split = map[string][]int32{}
		for _, m := range dg["kgrp"].Members {
			ca, ok := m.Assigned.AsConsumer()
			if !ok {
				return false
			}
			for _, tp := range ca.Topics {
				split[m.ClientID] = append(split[m.ClientID], tp.Partitions...)
			}
		}
		return len(split["member-a"]) == 2 && len(split["member-b"]) == 2
	})
	// Rewind's DescribeGroup lists the Kafka members with their partitions.
	desc, err := client.New(n.URL).DescribeGroup(ctx, "kgrp")
	if err != nil || len(desc) != 1 || len(desc[0].Members) != 2 {
		t.Fatalf("Rewind DescribeGroup during the split: %+v, %v; want the two Kafka members", desc, err)
	}
	for _, m := range desc[0].Members {
		id := strings.TrimPrefix(m.ClientName, "kafka:")
		if len(m.Partitions) != 2 || !slices.Equal(m.Partitions, sortedU32(split[id])) {
			t.Fatalf("Rewind DescribeGroup member %s: partitions %v, want %v", m.ClientName, m.Partitions, split[id])
		}
	}
	for _, p := range desc[0].Partitions {
		if p.MemberID == "" {
			t.Fatalf("Rewind DescribeGroup partition %d has no member", p.Partition)
		}
	}
	if g := gotB.total(); g != 0 {
		t.Fatalf("member b read %d records before new ones were produced, want 0 (it starts from a's commits)", g)
	}
	produceTo(t, prod, "kg", 4, 10)
	eventually(t, "the 40 new records", func() bool { return gotA.total()+gotB.total() >= 140 })
	gotB.mu.Lock()
	for p, offs := range gotB.offs {
		if !slices.Contains(split["member-b"], p) || len(offs) != 10 || offs[0] != 25 {
			t.Fatalf("member b read partition %d offsets %v; want 25.. of its own partitions %v", p, offs, split["member-b"])
		}
	}
	gotB.mu.Unlock()
	gotA.mu.Lock()
	for _, p := range split["member-a"] {
		if offs := gotA.offs[p]; len(offs) != 35 || offs[25] != 25 {
			t.Fatalf("member a read partition %d offsets %v; want 0..34", p, offs)
		}
	}
	gotA.mu.Unlock()
	for _, c := range []*kgo.Client{a, b} {
		if err := c.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// kadm and Rewind's own view of the group.
	lg, err := adm.ListGroups(ctx)
	if err != nil || lg["kgrp"].ProtocolType != "consumer" || lg["kgrp"].State != "Stable" {
		t.Fatalf("ListGroups: %+v, %v", lg, err)
	}
	fo, err := adm.FetchOffsets(ctx, "kgrp")
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(4) {
		if o, ok := fo.Lookup("kg", p); !ok || o.At != 35 || o.Err != nil {
			t.Fatalf("FetchOffsets partition %d: %+v, want 35", p, o)
		}
	}
	native := client.New(n.URL)
	desc, err = native.DescribeGroup(ctx, "kgrp")
	if err != nil || len(desc) != 1 || len(desc[0].Partitions) != 4 {
		t.Fatalf("Rewind DescribeGroup: %+v, %v", desc, err)
	}
	for _, p := range desc[0].Partitions {
		if !p.Committed || p.CommittedOffset != 35 || p.Lag != 0 {
			t.Fatalf("Rewind DescribeGroup partition %d: %+v, want committed 35, no lag", p.Partition, p)
		}
	}

	// Both leave; a new member resumes from the commits.
	stopA()
	stopB()
	<-doneA
	<-doneB
	a.Close()
	b.Close()
	eventually(t, "the group to empty", func() bool {
		dg, err := adm.DescribeGroups(ctx, "kgrp")
		return err == nil && dg["kgrp"].State == "Empty"
	})
	produceTo(t, prod, "kg", 4, 2)
	desc, err = native.DescribeGroup(ctx, "kgrp")
	if err != nil || desc[0].Partitions[0].Lag != 2 {
		t.Fatalf("Rewind DescribeGroup after more records: %+v, %v; want lag 2", desc, err)
	}
	c := n.client(t, append(opts, kgo.ClientID("member-c"))...)
	gotC := &consumed{offs: map[int32][]int64{}}
	cctx, stopC := context.WithCancel(ctx)
	doneC := make(chan struct{})
	go func() { defer close(doneC); pollInto(cctx, c, gotC) }()
	eventually(t, "the restarted member to read the 8 new records", func() bool { return gotC.total() >= 8 })
	stopC()
	<-doneC
	for p, offs := range gotC.offs {
		if len(offs) != 2 || offs[0] != 35 {
			t.Fatalf("restarted member read partition %d offsets %v, want 35 and 36", p, offs)
		}
	}

	// DeleteGroups: refused while it has members, then deletes.
	dr, err := adm.DeleteGroups(ctx, "kgrp")
	if err != nil || !errors.Is(dr["kgrp"].Err, kerr.NonEmptyGroup) {
		t.Fatalf("DeleteGroups of a group with members: %+v, %v; want NON_EMPTY_GROUP", dr, err)
	}
	c.Close()
	eventually(t, "the group to be deleted", func() bool {
		dr, err := adm.DeleteGroups(ctx, "kgrp")
		return err == nil && dr["kgrp"].Err == nil
	})
	if _, err := native.DescribeGroup(ctx, "kgrp"); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("Rewind DescribeGroup of the deleted group: %v, want NotFound", err)
	}
}

// TestGroupSharedWithRewindSubscribers: a group name is used by Kafka
// members or by Rewind subscribers, not both at once. A Kafka join of a
// group with Rewind subscribers is refused with INCONSISTENT_GROUP_PROTOCOL,
// and a Rewind subscriber of a group with Kafka members with
// FailedPrecondition. Once one kind leaves, the other may use the name.
func TestGroupSharedWithRewindSubscribers(t *testing.T) {
	n := startKafkaNode(t, engineKafka())
	admin := n.client(t)
	createTopic(t, admin, "mix", 1)
	native := client.New(n.URL)
	ctx := context.Background()

	sctx, cancel := context.WithCancel(ctx)
	sub, err := native.Subscribe(sctx, "mix", client.Group("shared"))
	if err != nil {
		t.Fatal(err)
	}
	if !sub.Next() {
		t.Fatalf("Rewind subscriber: %v", sub.Err())
	}
	k := n.member(t, "shared")
	if r := k.join("range", 3*time.Second, "mix"); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("Kafka join of a group with Rewind subscribers: %s, want INCONSISTENT_GROUP_PROTOCOL", code(r.ErrorCode))
	}
	sub.Close()
	cancel()
	eventually(t, "the Kafka member to join once the subscriber left", func() bool {
		return k.join("range", 3*time.Second, "mix").ErrorCode == 0
	})
	sub, err = native.Subscribe(ctx, "mix", client.Group("shared"))
	if err == nil {
		for sub.Next() {
		}
		err = sub.Err()
		sub.Close()
	}
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("Rewind subscriber of a group with Kafka members: %v, want FailedPrecondition", err)
	}
}

// TestResetKafkaGroup: `rewind group reset` (ResetGroup) on a Kafka group
// moves its commits; a commit from before the reset is refused
// (ILLEGAL_GENERATION), the members' next heartbeat says
// REBALANCE_IN_PROGRESS, and after they rejoin OffsetFetch gives the new
// offsets. Then franz-go's consumer (an eager balancer) is reset to an
// earlier time and reads the records again from there.
func TestResetKafkaGroup(t *testing.T) {
	n := startKafkaNode(t, engineKafka())
	prod := n.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, prod, "rs", 1)
	// Offsets 0 to 4, then 5 to 9 a millisecond later at least, so that
	// a reset to the time of offset 5 lands on it.
	produceTo(t, prod, "rs", 1, 5)
	first := time.Now().UnixMilli()
	for time.Now().UnixMilli() <= first {
		time.Sleep(time.Millisecond)
	}
	produceTo(t, prod, "rs", 1, 5)
	native := client.New(n.URL)
	ctx := context.Background()

	m := n.member(t, "rg")
	if r := m.join("range", 5*time.Second, "rs"); r.ErrorCode != 0 {
		t.Fatalf("join: %s", code(r.ErrorCode))
	}
	if s := m.sync(map[string][]byte{m.id: nil}); s.ErrorCode != 0 {
		t.Fatalf("sync: %s", code(s.ErrorCode))
	} else if err := new(kmsg.ConsumerMemberAssignment).ReadFrom(s.MemberAssignment); err != nil {
		t.Fatalf("an empty assignment does not decode: %v (%x)", err, s.MemberAssignment)
	}
	if c := m.commit(m.gen, "rs", 0, 8); c != 0 {
		t.Fatalf("commit: %s", code(c))
	}
	if _, err := native.ResetGroup(ctx, "rg", "rs", client.Offset(2), nil, false); err != nil {
		t.Fatal(err)
	}
	if c := m.commit(m.gen, "rs", 0, 9); c != kerr.IllegalGeneration.Code {
		t.Fatalf("commit after the reset: %s, want ILLEGAL_GENERATION", code(c))
	}
	if c := m.heartbeat(m.gen); c != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat after the reset: %s, want REBALANCE_IN_PROGRESS", code(c))
	}
	if r := m.join("range", 5*time.Second, "rs"); r.ErrorCode != 0 {
		t.Fatalf("rejoin: %s", code(r.ErrorCode))
	}
	if s := m.sync(map[string][]byte{m.id: nil}); s.ErrorCode != 0 {
		t.Fatalf("sync: %s", code(s.ErrorCode))
	}
	if off := m.fetchOffset("rs", 0); off != 2 {
		t.Fatalf("offset after the reset: %d, want 2", off)
	}
	if c := m.commit(m.gen, "rs", 0, 3); c != 0 {
		t.Fatalf("commit in the new generation: %s", code(c))
	}
	if c := m.leave(); c != 0 {
		t.Fatalf("leave: %s", code(c))
	}

	// franz-go, eager: reads to the end, commits, is reset to the time of
	// a record, and reads again from it.
	kc := n.client(t, kgo.ConsumerGroup("rg"), kgo.ConsumeTopics("rs"), kgo.DisableAutoCommit(),
		kgo.Balancers(kgo.RangeBalancer()), kgo.FetchMaxWait(200*time.Millisecond), kgo.HeartbeatInterval(200*time.Millisecond))
	var atFive time.Time
	got := &consumed{offs: map[int32][]int64{}}
	kctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for kctx.Err() == nil {
			fs := kc.PollFetches(kctx)
			got.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				got.offs[0] = append(got.offs[0], r.Offset)
				if r.Offset == 5 && atFive.IsZero() {
					atFive = r.Timestamp
				}
			})
			got.mu.Unlock()
			if err := kc.CommitUncommittedOffsets(kctx); err != nil && kctx.Err() == nil {
				t.Logf("commit: %v", err)
			}
		}
	}()
	eventually(t, "franz-go to read offsets 3 to 9", func() bool { return got.total() >= 7 })
	got.mu.Lock()
	if got.offs[0][0] != 3 {
		t.Fatalf("franz-go started at %d, want the committed 3", got.offs[0][0])
	}
	ts := atFive
	got.mu.Unlock()
	eventually(t, "franz-go's commit of 10", func() bool {
		d, err := native.DescribeGroup(ctx, "rg")
		return err == nil && d[0].Partitions[0].CommittedOffset == 10
	})
	if _, err := native.ResetGroup(ctx, "rg", "rs", client.Time(ts), nil, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "franz-go to read again from offset 5", func() bool {
		got.mu.Lock()
		defer got.mu.Unlock()
		offs := got.offs[0]
		return len(offs) >= 12 && offs[7] == 5 && offs[11] == 9
	})
	stop()
	<-done
	kc.Close()

	// franz-go's default, cooperative-sticky: members keep their positions
	// across a rebalance, so a reset removes them; they rejoin and read
	// again from the new offset.
	cc := n.client(t, kgo.ConsumerGroup("rg"), kgo.ConsumeTopics("rs"), kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.HeartbeatInterval(200*time.Millisecond))
	got = &consumed{offs: map[int32][]int64{}}
	cctx, stopC := context.WithCancel(ctx)
	doneC := make(chan struct{})
	go func() {
		defer close(doneC)
		for cctx.Err() == nil {
			fs := cc.PollFetches(cctx)
			got.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) { got.offs[0] = append(got.offs[0], r.Offset) })
			got.mu.Unlock()
		}
	}()
	produceTo(t, prod, "rs", 1, 1)
	eventually(t, "the cooperative member to read offset 10", func() bool { return got.total() >= 1 })
	if _, err := native.ResetGroup(ctx, "rg", "rs", client.Offset(8), nil, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cooperative member to read again from offset 8", func() bool {
		got.mu.Lock()
		defer got.mu.Unlock()
		offs := got.offs[0]
		return len(offs) >= 4 && offs[1] == 8 && offs[3] == 10
	})
	stopC()
	<-doneC
}

// TestKcatGroup runs `kcat -G` (librdkafka's balanced consumer, eager
// range/roundrobin assignment, JoinGroup v5 and OffsetCommit at
// librdkafka's versions): it reads a topic from the start to the end,
// commits as it closes, and a second run reads only what was produced
// since, from the group's commits, which Rewind's DescribeGroup shows.
func TestKcatGroup(t *testing.T) {
	n := startKafkaNode(t, engineKafka())
	prod := n.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, prod, "kcg", 2)
	produceTo(t, prod, "kcg", 2, 5)
	args := []string{"-b", n.Kafka, "-G", "kcgroup", "kcg", "-e", "-q", "-f", "%p %o\n",
		"-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000"}
	first := kcat(t, "", args...)
	slices.Sort(first)
	want := []string{"0 0", "0 1", "0 2", "0 3", "0 4", "1 0", "1 1", "1 2", "1 3", "1 4"}
	if !slices.Equal(first, want) {
		t.Fatalf("kcat -G read %v, want %v", first, want)
	}
	native := client.New(n.URL)
	ctx := context.Background()
	eventually(t, "kcat's commits", func() bool {
		d, err := native.DescribeGroup(ctx, "kcgroup")
		return err == nil && d[0].Partitions[0].CommittedOffset == 5 && d[0].Partitions[1].CommittedOffset == 5
	})
	produceTo(t, prod, "kcg", 2, 2)
	second := kcat(t, "", args...)
	slices.Sort(second)
	if want := []string{"0 5", "0 6", "1 5", "1 6"}; !slices.Equal(second, want) {
		t.Fatalf("second kcat -G read %v, want %v (from the commits)", second, want)
	}
}

// TestGroupRefusals: joins the listener refuses, each with Kafka's code,
// and the choice of a protocol every member supports.
func TestGroupRefusals(t *testing.T) {
	n := startKafkaNode(t, engineKafka())
	m := n.member(t, "refusals")
	join := func(mutate func(*kmsg.JoinGroupRequest)) int16 {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.ProtocolType, req.SessionTimeoutMillis = "refusals", "consumer", 10_000
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name = "range"
		req.Protocols = append(req.Protocols, p)
		mutate(req)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		resp, err := m.c.Request(ctx, req)
		var ke *kerr.Error
		switch {
		case errors.As(err, &ke): // franz-go's FindCoordinator got it first
			return ke.Code
		case err != nil:
			t.Fatal(err)
		}
		return resp.(*kmsg.JoinGroupResponse).ErrorCode
	}
	for _, tc := range []struct {
		name   string
		mutate func(*kmsg.JoinGroupRequest)
		want   *kerr.Error
	}{
		{"protocol type connect", func(r *kmsg.JoinGroupRequest) { r.ProtocolType = "connect" }, kerr.InconsistentGroupProtocol},
		{"no protocols", func(r *kmsg.JoinGroupRequest) { r.Protocols = nil }, kerr.InconsistentGroupProtocol},
		{"session timeout too short", func(r *kmsg.JoinGroupRequest) { r.SessionTimeoutMillis = 10 }, kerr.InvalidSessionTimeout},
		{"session timeout too long", func(r *kmsg.JoinGroupRequest) { r.SessionTimeoutMillis = 1 << 30 }, kerr.InvalidSessionTimeout},
		{"bad group name", func(r *kmsg.JoinGroupRequest) { r.Group = "no spaces allowed" }, kerr.InvalidGroupID},
		{"unknown member id", func(r *kmsg.JoinGroupRequest) { r.MemberID = "never-issued" }, kerr.UnknownMemberID},
	} {
		if c := join(tc.mutate); c != tc.want.Code {
			t.Errorf("%s: %s, want %s", tc.name, code(c), tc.want.Message)
		}
	}

	// a supports x and y, b y and z: c, with x and z, shares a protocol
	// with each but none with both, and is refused; a and b settle on y.
	a, b, c := n.member(t, "proto"), n.member(t, "proto"), n.member(t, "proto")
	if r := a.join("x,y", 10*time.Second); r.ErrorCode != 0 || *r.Protocol != "x" {
		t.Fatalf("a's join: %s, %+v", code(r.ErrorCode), r)
	}
	var wg sync.WaitGroup
	var jb *kmsg.JoinGroupResponse
	wg.Add(1)
	go func() { defer wg.Done(); jb = b.join("y,z", 10*time.Second) }()
	eventually(t, "a rebalance", func() bool { return a.heartbeat(1) == kerr.RebalanceInProgress.Code })
	if r := c.join("x,z", 10*time.Second); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("c's join: %s, want INCONSISTENT_GROUP_PROTOCOL", code(r.ErrorCode))
	}
	ja := a.join("x,y", 10*time.Second)
	wg.Wait()
	if ja.ErrorCode != 0 || jb.ErrorCode != 0 || *ja.Protocol != "y" || *jb.Protocol != "y" {
		t.Fatalf("rejoin: %s %+v, %s %+v; want protocol y", code(ja.ErrorCode), ja, code(jb.ErrorCode), jb)
	}
}

// rawGroupCall sends req at its version on c and decodes the answer.
func rawGroupCall(t *testing.T, c *rawConn, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(c.roundTrip(frameRequest(req), req.IsFlexible())); err != nil {
		t.Fatalf("%s v%d: the response does not decode: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

// TestGroupAPIsAtEveryVersion sends every group API at every version it is
// served at on one raw connection: requests without a group name are
// refused with INVALID_GROUP_ID (or answered empty) without closing the
// connection, and a member joins (with KIP-394's round trip from v4 on),
// syncs, heartbeats and leaves at each JoinGroup version.
func TestGroupAPIsAtEveryVersion(t *testing.T) {
	n := startKafkaNode(t, engineKafka())
	c := dialRaw(t, n.Kafka)
	for _, key := range []kmsg.Key{kmsg.FindCoordinator, kmsg.JoinGroup, kmsg.SyncGroup, kmsg.Heartbeat, kmsg.LeaveGroup,
		kmsg.OffsetCommit, kmsg.OffsetFetch, kmsg.ListGroups, kmsg.DescribeGroups, kmsg.DeleteGroups} {
		minV, maxV := servedRange(t, c, key)
		for v := minV; v <= maxV; v++ {
			req := kmsg.RequestForKey(key.Int16())
			req.SetVersion(v)
			resp := rawGroupCall(t, c, req)
			var got int16
			switch r := resp.(type) {
			case *kmsg.FindCoordinatorResponse:
				got = r.ErrorCode // v4+: no keys, no coordinators
			case *kmsg.JoinGroupResponse:
				got = r.ErrorCode
			case *kmsg.SyncGroupResponse:
				got = r.ErrorCode
			case *kmsg.HeartbeatResponse:
				got = r.ErrorCode
			case *kmsg.LeaveGroupResponse:
				got = r.ErrorCode
			case *kmsg.OffsetFetchResponse:
				got = r.ErrorCode
			}
			want := kerr.InvalidGroupID.Code
			switch {
			case key == kmsg.FindCoordinator && v >= 4, key == kmsg.OffsetCommit, key == kmsg.ListGroups,
				key == kmsg.DescribeGroups, key == kmsg.DeleteGroups, key == kmsg.OffsetFetch && (v < 2 || v >= 8):
				want = 0
			}
			if got != want {
				t.Errorf("%s v%d without a group: %s, want %s", kmsg.NameForKey(key.Int16()), v, code(got), code(want))
			}
		}
	}

	for v := int16(0); v <= 9; v++ {
		group := fmt.Sprintf("v%d", v)
		join := kmsg.NewPtrJoinGroupRequest()
		join.SetVersion(v)
		join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = group, "consumer", 10_000, 10_000
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", (&kmsg.ConsumerMemberMetadata{Topics: []string{"t"}}).AppendTo(nil)
		join.Protocols = append(join.Protocols, p)
		jr := rawGroupCall(t, c, join).(*kmsg.JoinGroupResponse)
		if v >= 4 {
			if jr.ErrorCode != kerr.MemberIDRequired.Code {
				t.Fatalf("JoinGroup v%d without a member id: %s, want MEMBER_ID_REQUIRED", v, code(jr.ErrorCode))
			}
			join.MemberID = jr.MemberID
			jr = rawGroupCall(t, c, join).(*kmsg.JoinGroupResponse)
		}
		if jr.ErrorCode != 0 || jr.Generation != 1 || jr.MemberID == "" || jr.LeaderID != jr.MemberID || len(jr.Members) != 1 {
			t.Fatalf("JoinGroup v%d: %s, %+v", v, code(jr.ErrorCode), jr)
		}
		sync := kmsg.NewPtrSyncGroupRequest()
		sync.SetVersion(min(v, 5))
		sync.Group, sync.MemberID, sync.Generation = group, jr.MemberID, 1
		if sr := rawGroupCall(t, c, sync).(*kmsg.SyncGroupResponse); sr.ErrorCode != 0 {
			t.Fatalf("SyncGroup v%d: %s", sync.Version, code(sr.ErrorCode))
		}
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.SetVersion(min(v, 4))
		hb.Group, hb.MemberID, hb.Generation = group, jr.MemberID, 1
		if hr := rawGroupCall(t, c, hb).(*kmsg.HeartbeatResponse); hr.ErrorCode != 0 {
			t.Fatalf("Heartbeat v%d: %s", hb.Version, code(hr.ErrorCode))
		}
		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.SetVersion(min(v, 5))
		leave.Group, leave.MemberID = group, jr.MemberID
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = jr.MemberID
		leave.Members = append(leave.Members, lm)
		lr := rawGroupCall(t, c, leave).(*kmsg.LeaveGroupResponse)
		if lr.ErrorCode != 0 || (leave.Version >= 3 && (len(lr.Members) != 1 || lr.Members[0].ErrorCode != 0)) {
			t.Fatalf("LeaveGroup v%d: %+v", leave.Version, lr)
		}
	}
}

// servedRange is the versions of key the listener advertises.
func servedRange(t *testing.T, c *rawConn, key kmsg.Key) (int16, int16) {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	resp := rawGroupCall(t, c, req).(*kmsg.ApiVersionsResponse)
	for _, k := range resp.ApiKeys {
		if k.ApiKey == key.Int16() {
			return k.MinVersion, k.MaxVersion
		}
	}
	t.Fatalf("%s is not advertised", kmsg.NameForKey(key.Int16()))
	return 0, 0
}

func sortedU32(ps []int32) []uint32 {
	out := make([]uint32, len(ps))
	for i, p := range ps {
		out[i] = uint32(p)
	}
	slices.Sort(out)
	return out
}
