package kafka

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/groups"
	"github.com/rewind-io/rewind/engine/internal/partition"
)

// Bounds of a member's session timeout (Kafka's group.min.session.timeout.ms
// is 6 s; Rewind allows shorter sessions for tests and small deployments).
const (
	minSessionTimeout = time.Second
	maxSessionTimeout = 30 * time.Minute
)

// consumerProtocol is the only protocol type served: the consumer's
// client-side assignment, whose metadata names the subscribed topics.
const consumerProtocol = "consumer"

// Group states, as DescribeGroups and ListGroups name them.
type groupState int8

const (
	stateEmpty groupState = iota
	statePreparing
	stateCompleting
	stateStable
)

func (st groupState) String() string {
	switch st {
	case statePreparing:
		return "PreparingRebalance"
	case stateCompleting:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	}
	return "Empty"
}

// coordinator runs the classic Kafka consumer groups of one listener. The
// group protocol (members, generations, joins and syncs, sessions) lives
// here, in memory; committed offsets are Rewind group commits, so a Kafka
// group is a Rewind group: `rewind group describe` shows it, and the
// partitions' fences order the commits of both. One mutex guards every
// group; nothing under it blocks on the network.
type coordinator struct {
	s  *Server
	mu sync.Mutex
	// Under mu.
	groups map[string]*kgroup
}

// kgroup is one Kafka consumer group.
type kgroup struct {
	name       string
	state      groupState
	generation int32
	protocol   string // chosen at the last completed join
	leader     string
	members    []*kmember           // in join order
	pending    map[string]time.Time // member ids handed out with MEMBER_ID_REQUIRED (KIP-394), until when
	rebalance  *time.Timer          // ends PreparingRebalance for members that do not rejoin
	release    func()               // the hold on the Rewind group name, while the group has members
	// base is the Rewind generation of the group on each subscribed topic
	// when the group last became Stable: commits carry it, and a Rewind
	// generation above it means a reset (rewind group reset) ran since.
	base map[string]uint64
}

// kmember is one member of a kgroup.
type kmember struct {
	id, clientID, host string
	joined             time.Time
	protocols          []kmsg.JoinGroupRequestProtocol
	session, rebalance time.Duration
	join               chan *kmsg.JoinGroupResponse // non-nil while a JoinGroup waits
	sync               chan *kmsg.SyncGroupResponse // non-nil while a SyncGroup waits
	assignment         []byte
	beat               uint64 // bumped at each heartbeat; a session timer of an older beat is stale
}

func newCoordinator(s *Server) *coordinator {
	return &coordinator{s: s, groups: map[string]*kgroup{}}
}

// memberAt finds member id of g (nil: no group) at generation gen, or
// answers UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION. With c.mu held.
func memberAt(g *kgroup, id string, gen int32) (*kmember, int16) {
	var m *kmember
	if g != nil {
		m = g.member(id)
	}
	switch {
	case m == nil:
		return nil, kerr.UnknownMemberID.Code
	case gen != g.generation:
		return nil, kerr.IllegalGeneration.Code
	}
	return m, 0
}

func (g *kgroup) member(id string) *kmember {
	for _, m := range g.members {
		if m.id == id {
			return m
		}
	}
	return nil
}

// memberID is a new member id: the client id and random hex, as Kafka's.
func memberID(clientID string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	if clientID == "" {
		clientID = "member"
	}
	return clientID + "-" + hex.EncodeToString(b[:])
}

// groupNameCode is INVALID_GROUP_ID for a name Rewind cannot store.
func groupNameCode(name string) int16 {
	if broker.ValidateGroupName(name) != nil {
		return kerr.InvalidGroupID.Code
	}
	return 0
}

// close forgets every group and releases their holds on Rewind group
// names (the listener is closing; waiting joins and syncs end with the
// server's context).
func (c *coordinator) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range c.groups {
		for _, m := range g.members {
			m.beat++ // stale session timers do nothing
		}
		if g.rebalance != nil {
			g.rebalance.Stop()
		}
		g.members, g.state = nil, stateEmpty
		if g.release != nil {
			g.release()
			g.release = nil
		}
	}
	c.groups = map[string]*kgroup{}
}

// outside lists the Kafka members of group name reading topic, with the
// partitions of their latest assignment, for Rewind's DescribeGroup and
// ListGroups (broker.HoldGroup).
func (c *coordinator) outside(name string) groups.Outside {
	return func(topic string) []groups.MemberInfo {
		c.mu.Lock()
		defer c.mu.Unlock()
		g := c.groups[name]
		if g == nil {
			return nil
		}
		var out []groups.MemberInfo
		for _, m := range g.members {
			var md kmsg.ConsumerMemberMetadata
			subscribed := md.ReadFrom(metadataOf(m, g.protocol)) == nil && slices.Contains(md.Topics, topic)
			var parts []uint32
			var a kmsg.ConsumerMemberAssignment
			if g.state == stateStable && a.ReadFrom(m.assignment) == nil {
				for _, t := range a.Topics {
					if t.Topic == topic {
						for _, p := range t.Partitions {
							parts = append(parts, uint32(p))
						}
					}
				}
			}
			if subscribed || len(parts) > 0 {
				slices.Sort(parts)
				out = append(out, groups.MemberInfo{ID: m.id, ClientName: "kafka:" + m.clientID, JoinTime: m.joined.UnixNano(), Partitions: parts})
			}
		}
		return out
	}
}

// findCoordinator names this node for every group: the node serving the
// listener coordinates (alone, or as the metadata leader of a cluster;
// elsewhere the group calls answer NOT_COORDINATOR).
func (s *Server) findCoordinator(req *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	resp := kmsg.NewPtrFindCoordinatorResponse()
	answer := func(key string) (code int16, msg *string) {
		switch req.CoordinatorType {
		case 0:
		case 1:
			m := "transactions are not served by Rewind"
			return kerr.CoordinatorNotAvailable.Code, &m
		default:
			m := fmt.Sprintf("coordinator type %d is not served (only groups, type 0)", req.CoordinatorType)
			return kerr.InvalidRequest.Code, &m
		}
		if code := groupNameCode(key); code != 0 {
			m := broker.ValidateGroupName(key).Error()
			return code, &m
		}
		return 0, nil
	}
	if req.Version < 4 {
		resp.ErrorCode, resp.ErrorMessage = answer(req.CoordinatorKey)
		if resp.ErrorCode == 0 {
			resp.NodeID, resp.Host, resp.Port = s.node, s.host, s.port
		} else {
			resp.NodeID = -1
		}
		return resp
	}
	for _, key := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.ErrorCode, c.ErrorMessage = answer(key)
		if c.ErrorCode == 0 {
			c.NodeID, c.Host, c.Port = s.node, s.host, s.port
		} else {
			c.NodeID = -1
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp
}

// holdCode maps a refused hold (or another coordinator error) to Kafka.
func (c *coordinator) holdCode(name string, err error) int16 {
	switch {
	case errors.Is(err, groups.ErrHasMembers):
		c.s.log.Info("Kafka join refused: the group has Rewind subscribers", "group", name, "error", err)
		return kerr.InconsistentGroupProtocol.Code
	case errors.As(err, new(*broker.NotCoordinatorError)):
		return kerr.NotCoordinator.Code
	case errors.Is(err, broker.ErrUnavailable), errors.Is(err, broker.ErrNotReady), errors.Is(err, broker.ErrClosed):
		return kerr.CoordinatorNotAvailable.Code
	}
	return codeOf(err)
}

// joinGroup adds or refreshes a member and waits for the join to complete
// (every known member rejoined, or the rebalance timeout passed).
func (c *coordinator) joinGroup(ctx context.Context, host, clientID string, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Generation = -1
	resp.MemberID = req.MemberID
	fail := func(code int16) *kmsg.JoinGroupResponse {
		resp.ErrorCode = code
		return resp
	}
	if code := groupNameCode(req.Group); code != 0 {
		return fail(code)
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	if session < minSessionTimeout || session > maxSessionTimeout {
		return fail(kerr.InvalidSessionTimeout.Code)
	}
	rebalance := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 || rebalance <= 0 {
		rebalance = session
	}
	if req.ProtocolType != consumerProtocol || len(req.Protocols) == 0 {
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	c.mu.Lock()
	g := c.groups[req.Group]
	if g == nil {
		g = &kgroup{name: req.Group, pending: map[string]time.Time{}}
		c.groups[req.Group] = g
	}
	now := time.Now()
	for id, until := range g.pending {
		if now.After(until) {
			delete(g.pending, id)
		}
	}
	m := g.member(req.MemberID)
	switch {
	case req.MemberID == "":
		id := memberID(clientID)
		if req.Version >= 4 { // KIP-394: the client rejoins with this id
			g.pending[id] = now.Add(session)
			time.AfterFunc(session, func() { // forget it if it never comes back
				c.mu.Lock()
				defer c.mu.Unlock()
				if _, ok := g.pending[id]; ok {
					delete(g.pending, id)
					c.forgetIfIdle(g)
				}
			})
			c.forgetIfIdle(g)
			c.mu.Unlock()
			resp.MemberID = id
			return fail(kerr.MemberIDRequired.Code)
		}
		m = &kmember{id: id, joined: now}
	case m == nil:
		if _, ok := g.pending[req.MemberID]; !ok {
			c.forgetIfIdle(g)
			c.mu.Unlock()
			return fail(kerr.UnknownMemberID.Code)
		}
		m = &kmember{id: req.MemberID, joined: now}
	}
	if !c.supportsLocked(g, m, req.Protocols) {
		c.forgetIfIdle(g)
		c.mu.Unlock()
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	if !slices.Contains(g.members, m) {
		if len(g.members) == 0 {
			release, err := c.s.b.HoldGroup(g.name, "Kafka consumer group", c.outside(g.name))
			if err != nil {
				c.forgetIfIdle(g)
				c.mu.Unlock()
				return fail(c.holdCode(g.name, err))
			}
			g.release = release
		}
		delete(g.pending, m.id)
		g.members = append(g.members, m)
	}
	// A request's byte fields alias the connection's frame buffer, which
	// the next request overwrites: keep copies.
	protocols := make([]kmsg.JoinGroupRequestProtocol, len(req.Protocols))
	for i, p := range req.Protocols {
		protocols[i] = kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)}
	}
	m.host, m.clientID, m.protocols = host, clientID, protocols
	m.session, m.rebalance = session, rebalance
	if m.join != nil { // a duplicate join: the older one is superseded
		m.join <- c.joinError(g, m, kerr.RebalanceInProgress.Code)
	}
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	m.join = ch
	m.beat++ // no session expiry while the join waits
	if g.state != statePreparing {
		c.prepareLocked(g)
	}
	c.maybeCompleteLocked(g)
	c.mu.Unlock()
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
}

// supportsLocked reports whether a member joining with protocols can be in
// g: one of them must be supported by every other member (chooseProtocol
// relies on it).
func (c *coordinator) supportsLocked(g *kgroup, m *kmember, protocols []kmsg.JoinGroupRequestProtocol) bool {
	for _, p := range protocols {
		all := true
		for _, o := range g.members {
			if o != m && !slices.ContainsFunc(o.protocols, func(q kmsg.JoinGroupRequestProtocol) bool { return q.Name == p.Name }) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func (c *coordinator) joinError(g *kgroup, m *kmember, code int16) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.ErrorCode, r.Generation, r.MemberID = code, -1, m.id
	return r
}

// forgetIfIdle drops a group with no members and no pending member ids
// from memory (its commits stay in Rewind).
func (c *coordinator) forgetIfIdle(g *kgroup) {
	if c.groups[g.name] == g && len(g.members) == 0 && len(g.pending) == 0 && g.state == stateEmpty {
		delete(c.groups, g.name)
	}
}

// prepareLocked starts a rebalance: members waiting for their assignment
// are told to rejoin, and members that do not rejoin within the longest
// rebalance timeout are removed.
func (c *coordinator) prepareLocked(g *kgroup) {
	for _, m := range g.members {
		if m.sync != nil {
			r := kmsg.NewPtrSyncGroupResponse()
			r.ErrorCode = kerr.RebalanceInProgress.Code
			m.sync <- r
			m.sync = nil
		}
	}
	g.state = statePreparing
	var wait time.Duration
	for _, m := range g.members {
		wait = max(wait, m.rebalance)
	}
	if g.rebalance != nil {
		g.rebalance.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(wait, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if g.rebalance != t || g.state != statePreparing {
			return
		}
		for _, m := range slices.Clone(g.members) {
			if m.join == nil {
				c.removeLocked(g, m)
			}
		}
		c.maybeCompleteLocked(g)
	})
	g.rebalance = t
}

// maybeCompleteLocked completes a rebalance whose members have all
// rejoined: a new generation, a protocol, a leader, and every waiting
// JoinGroup answered.
func (c *coordinator) maybeCompleteLocked(g *kgroup) {
	if g.state != statePreparing {
		return
	}
	for _, m := range g.members {
		if m.join == nil {
			return
		}
	}
	if g.rebalance != nil {
		g.rebalance.Stop()
		g.rebalance = nil
	}
	g.generation++
	if len(g.members) == 0 {
		c.emptyLocked(g)
		return
	}
	g.protocol = chooseProtocol(g.members)
	if g.member(g.leader) == nil {
		g.leader = g.members[0].id
	}
	g.state = stateCompleting
	for _, m := range g.members {
		r := kmsg.NewPtrJoinGroupResponse()
		r.Generation, r.LeaderID, r.MemberID = g.generation, g.leader, m.id
		pt, p := consumerProtocol, g.protocol
		r.ProtocolType, r.Protocol = &pt, &p
		if m.id == g.leader {
			for _, o := range g.members {
				rm := kmsg.NewJoinGroupResponseMember()
				rm.MemberID, rm.ProtocolMetadata = o.id, metadataOf(o, g.protocol)
				r.Members = append(r.Members, rm)
			}
		}
		m.join <- r
		m.join = nil
		c.armLocked(g, m)
	}
}

// emptyLocked makes g Empty: no members, and the Rewind name released.
func (c *coordinator) emptyLocked(g *kgroup) {
	g.state, g.leader, g.protocol = stateEmpty, "", ""
	g.base = nil
	if g.release != nil {
		g.release()
		g.release = nil
	}
	c.forgetIfIdle(g)
}

// chooseProtocol picks the protocol every member supports that most
// members prefer (each votes for its first supported choice), ties going
// to the first member's order, as Kafka does.
func chooseProtocol(members []*kmember) string {
	var candidates []string
	for _, p := range members[0].protocols {
		all := true
		for _, m := range members[1:] {
			if !slices.ContainsFunc(m.protocols, func(q kmsg.JoinGroupRequestProtocol) bool { return q.Name == p.Name }) {
				all = false
				break
			}
		}
		if all && !slices.Contains(candidates, p.Name) {
			candidates = append(candidates, p.Name)
		}
	}
	if len(candidates) == 0 { // supportsLocked prevents it; never panic
		return members[0].protocols[0].Name
	}
	votes := map[string]int{}
	for _, m := range members {
		for _, p := range m.protocols {
			if slices.Contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := candidates[0]
	for _, name := range candidates {
		if votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

func metadataOf(m *kmember, protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// armLocked (re)starts m's session: without a heartbeat, sync, join or
// commit within its session timeout it is removed and the group
// rebalances.
func (c *coordinator) armLocked(g *kgroup, m *kmember) {
	m.beat++
	beat := m.beat
	time.AfterFunc(m.session, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if m.beat != beat || m.join != nil || !slices.Contains(g.members, m) {
			return
		}
		c.s.log.Info("Kafka group member's session expired", "group", g.name, "member", m.id)
		c.removeLocked(g, m)
	})
}

// removeLocked removes m from g (it left, or its session expired) and
// rebalances the others.
func (c *coordinator) removeLocked(g *kgroup, m *kmember) {
	i := slices.Index(g.members, m)
	if i < 0 {
		return
	}
	g.members = slices.Delete(g.members, i, i+1)
	m.beat++
	if m.join != nil {
		m.join <- c.joinError(g, m, kerr.UnknownMemberID.Code)
		m.join = nil
	}
	if m.sync != nil {
		r := kmsg.NewPtrSyncGroupResponse()
		r.ErrorCode = kerr.UnknownMemberID.Code
		m.sync <- r
		m.sync = nil
	}
	switch {
	case len(g.members) == 0 && g.state != statePreparing:
		g.generation++
		c.emptyLocked(g)
	case g.state == statePreparing:
		c.maybeCompleteLocked(g)
	default:
		c.prepareLocked(g)
	}
}

// syncGroup takes the leader's assignment and hands every member its part.
func (c *coordinator) syncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := kmsg.NewPtrSyncGroupResponse()
	fail := func(code int16) *kmsg.SyncGroupResponse {
		resp.ErrorCode = code
		return resp
	}
	if code := groupNameCode(req.Group); code != 0 {
		return fail(code)
	}
	c.mu.Lock()
	g := c.groups[req.Group]
	m, code := memberAt(g, req.MemberID, req.Generation)
	switch {
	case code != 0:
		c.mu.Unlock()
		return fail(code)
	case req.ProtocolType != nil && *req.ProtocolType != consumerProtocol,
		req.Protocol != nil && *req.Protocol != g.protocol:
		c.mu.Unlock()
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	c.armLocked(g, m)
	pt, p := consumerProtocol, g.protocol
	resp.ProtocolType, resp.Protocol = &pt, &p
	switch g.state {
	case statePreparing:
		c.mu.Unlock()
		return fail(kerr.RebalanceInProgress.Code)
	case stateStable:
		resp.MemberAssignment = m.assignment
		c.mu.Unlock()
		return resp
	}
	// CompletingRebalance.
	if m.id != g.leader {
		ch := make(chan *kmsg.SyncGroupResponse, 1)
		if m.sync != nil { // a duplicate sync: the older one is superseded
			r := kmsg.NewPtrSyncGroupResponse()
			r.ErrorCode = kerr.RebalanceInProgress.Code
			m.sync <- r
		}
		m.sync = ch
		c.mu.Unlock()
		select {
		case r := <-ch:
			return r
		case <-ctx.Done():
			return fail(kerr.CoordinatorNotAvailable.Code)
		}
	}
	for _, o := range g.members {
		o.assignment = nil
	}
	for _, a := range req.GroupAssignment {
		if o := g.member(a.MemberID); o != nil {
			o.assignment = bytes.Clone(a.MemberAssignment) // the request aliases the frame buffer
		}
	}
	for _, o := range g.members {
		if len(o.assignment) == 0 {
			// A member given nothing gets an empty consumer assignment
			// rather than no bytes, which some clients cannot decode.
			o.assignment = (&kmsg.ConsumerMemberAssignment{}).AppendTo(nil)
		}
	}
	g.state = stateStable
	g.base = c.generationsLocked(g)
	for _, o := range g.members {
		if o.sync != nil {
			r := kmsg.NewPtrSyncGroupResponse()
			r.ProtocolType, r.Protocol = &pt, &p
			r.MemberAssignment = o.assignment
			o.sync <- r
			o.sync = nil
		}
	}
	resp.MemberAssignment = m.assignment
	c.mu.Unlock()
	return resp
}

// topicsLocked is every topic g's members subscribe to (from their consumer
// protocol metadata).
func topicsLocked(g *kgroup) []string {
	var out []string
	for _, m := range g.members {
		var md kmsg.ConsumerMemberMetadata
		if md.ReadFrom(metadataOf(m, g.protocol)) != nil {
			continue
		}
		for _, t := range md.Topics {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	slices.Sort(out)
	return out
}

// generations is the Rewind generation of group name on every topic of
// topics that exists.
func (c *coordinator) generations(name string, topics []string) map[string]uint64 {
	out := map[string]uint64{}
	for _, t := range topics {
		if gen, err := c.s.b.GroupGeneration(name, t); err == nil {
			out[t] = gen
		}
	}
	return out
}

func (c *coordinator) generationsLocked(g *kgroup) map[string]uint64 {
	return c.generations(g.name, topicsLocked(g))
}

// moved reports whether a Rewind reset (or a delete, or anything else
// moving the Rewind generation: Kafka commits do not) ran on one of
// topics since base was taken.
func (c *coordinator) moved(name string, topics []string, base map[string]uint64) bool {
	for t, gen := range c.generations(name, topics) {
		if b, ok := base[t]; ok && gen != b {
			return true
		}
	}
	return false
}

func (c *coordinator) resetSinceLocked(g *kgroup) bool {
	return c.moved(g.name, topicsLocked(g), g.base)
}

// rejoinAfterResetLocked makes every member re-read its committed offsets
// after a reset: with an eager protocol a rebalance does (each member
// gives up all its partitions and fetches their offsets again when it gets
// them back); a cooperative member keeps its positions across a rebalance,
// so the members are removed instead and rejoin as new ones.
func (c *coordinator) rejoinAfterResetLocked(g *kgroup) {
	c.s.log.Info("Kafka group reset through Rewind: its members rejoin", "group", g.name)
	if g.protocol == "cooperative-sticky" {
		for _, m := range slices.Clone(g.members) {
			c.removeLocked(g, m)
		}
		return
	}
	c.prepareLocked(g)
}

// heartbeat keeps a member's session and tells it when to rejoin.
func (c *coordinator) heartbeat(req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := kmsg.NewPtrHeartbeatResponse()
	if code := groupNameCode(req.Group); code != 0 {
		resp.ErrorCode = code
		return resp
	}
	c.mu.Lock()
	g := c.groups[req.Group]
	m, code := memberAt(g, req.MemberID, req.Generation)
	if code != 0 {
		resp.ErrorCode = code
		c.mu.Unlock()
		return resp
	}
	c.armLocked(g, m)
	if g.state == statePreparing {
		resp.ErrorCode = kerr.RebalanceInProgress.Code
	}
	if g.state != stateStable {
		c.mu.Unlock()
		return resp
	}
	// Ask Rewind for the group's generations without the mutex: a reset
	// of the group holds its Rewind state across raft commands.
	topics, base, gen := topicsLocked(g), maps.Clone(g.base), g.generation
	c.mu.Unlock()
	if !c.moved(g.name, topics, base) {
		return resp
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups[g.name] == g && g.generation == gen && g.state == stateStable {
		c.rejoinAfterResetLocked(g)
	}
	if g.member(m.id) == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
	} else if g.state == statePreparing {
		resp.ErrorCode = kerr.RebalanceInProgress.Code
	}
	return resp
}

// leaveGroup removes members (v3+: several, by id).
func (c *coordinator) leaveGroup(req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := kmsg.NewPtrLeaveGroupResponse()
	if code := groupNameCode(req.Group); code != 0 {
		resp.ErrorCode = code
		return resp
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[req.Group]
	leave := func(id string) int16 {
		if g != nil {
			if _, ok := g.pending[id]; ok { // left before its second join
				delete(g.pending, id)
				c.forgetIfIdle(g)
				return 0
			}
		}
		if g == nil || g.member(id) == nil {
			return kerr.UnknownMemberID.Code
		}
		c.removeLocked(g, g.member(id))
		return 0
	}
	if req.Version < 3 {
		resp.ErrorCode = leave(req.MemberID)
		return resp
	}
	for _, rm := range req.Members {
		m := kmsg.NewLeaveGroupResponseMember()
		m.MemberID, m.InstanceID = rm.MemberID, rm.InstanceID
		if rm.InstanceID != nil && rm.MemberID == "" {
			m.ErrorCode = kerr.UnknownMemberID.Code // static membership is not served
		} else {
			m.ErrorCode = leave(rm.MemberID)
		}
		resp.Members = append(resp.Members, m)
	}
	return resp
}

// commitCheck is what OffsetCommit needs of the group protocol: the Rewind
// generation to commit each topic at, or a Kafka error for every
// partition. A commit with generation −1 (an admin tool, a consumer
// without a group protocol) is accepted while the group has no Kafka
// members (a hold then reserves the name for the commit's duration); a
// commit of a generation into a group without members is
// ILLEGAL_GENERATION, as in kfake.
func (c *coordinator) commitCheck(req *kmsg.OffsetCommitRequest) (base map[string]uint64, release func(), code int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[req.Group]
	if g == nil || len(g.members) == 0 {
		if req.Generation >= 0 { // no generation is current
			return nil, nil, kerr.IllegalGeneration.Code
		}
		rel, err := c.s.b.HoldGroup(req.Group, "Kafka", nil)
		if err != nil {
			if errors.Is(err, groups.ErrHasMembers) {
				c.s.log.Info("Kafka commit refused: the group has Rewind subscribers", "group", req.Group)
				return nil, nil, kerr.UnknownMemberID.Code
			}
			return nil, nil, c.holdCode(req.Group, err)
		}
		return nil, rel, 0
	}
	m, code := memberAt(g, req.MemberID, req.Generation)
	switch {
	case code != 0:
		return nil, nil, code
	case g.state == stateCompleting:
		return nil, nil, kerr.RebalanceInProgress.Code
	}
	c.armLocked(g, m)
	// A topic outside the members' subscriptions (or created since the
	// sync) gets its base at its first commit, so that a later reset is
	// still seen.
	for _, t := range req.Topics {
		if _, ok := g.base[t.Topic]; ok {
			continue
		}
		if gen, err := c.s.b.GroupGeneration(g.name, t.Topic); err == nil {
			if g.base == nil {
				g.base = map[string]uint64{}
			}
			g.base[t.Topic] = gen
		}
	}
	return maps.Clone(g.base), func() {}, 0
}

// fenced notes that a Kafka commit was refused for its Rewind generation
// (fenced by a newer one, or one the group no longer knows): a reset or a
// delete ran, and the members must rejoin.
func (c *coordinator) fenced(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.groups[name]; g != nil && g.state == stateStable && c.resetSinceLocked(g) {
		c.rejoinAfterResetLocked(g)
	}
}

// offsetCommit stores offsets as Rewind group commits.
func (c *coordinator) offsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := kmsg.NewPtrOffsetCommitResponse()
	codes := make([][]int16, len(req.Topics))
	all := func(code int16) {
		for i, t := range req.Topics {
			codes[i] = make([]int16, len(t.Partitions))
			for j := range codes[i] {
				codes[i][j] = code
			}
		}
	}
	code := groupNameCode(req.Group)
	var base map[string]uint64
	release := func() {}
	if code == 0 {
		base, release, code = c.commitCheck(req)
	}
	all(code)
	if code == 0 {
		defer release()
		var wg sync.WaitGroup
		var fenced sync.Once
		for i, t := range req.Topics {
			gen, ok := base[t.Topic]
			if !ok {
				g, err := c.s.b.GroupGeneration(req.Group, t.Topic)
				if err != nil {
					for j := range codes[i] {
						codes[i][j] = c.commitCode(err)
					}
					continue
				}
				gen = g
			}
			offsets := map[uint32]uint64{}
			for j, p := range t.Partitions {
				if p.Offset < 0 || p.Partition < 0 {
					codes[i][j] = kerr.OffsetOutOfRange.Code
					continue
				}
				offsets[uint32(p.Partition)] = uint64(p.Offset)
			}
			if len(offsets) == 0 {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				commit := func(offsets map[uint32]uint64) int16 {
					err := c.s.b.Commit(ctx, req.Group, t.Topic, gen, offsets)
					var fe *partition.FencedError
					if errors.As(err, &fe) || errors.Is(err, groups.ErrUnknownGeneration) {
						fenced.Do(func() { c.fenced(req.Group) })
					}
					return c.commitCode(err)
				}
				// The topic's partitions in one commit (Rewind runs them
				// in parallel); on an error, one at a time, to give each
				// its own code (a commit sets offsets: repeating one is
				// harmless).
				if commit(offsets) == 0 {
					return
				}
				for j, p := range t.Partitions {
					if off, ok := offsets[uint32(p.Partition)]; ok {
						codes[i][j] = commit(map[uint32]uint64{uint32(p.Partition): off})
					}
				}
			}()
		}
		wg.Wait()
	}
	for i, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for j, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codes[i][j]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// commitCode maps a Rewind commit's error: a fenced or unknown generation
// is ILLEGAL_GENERATION (a reset or a newer rebalance got there first).
func (c *coordinator) commitCode(err error) int16 {
	var fe *partition.FencedError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &fe), errors.Is(err, groups.ErrUnknownGeneration):
		return kerr.IllegalGeneration.Code
	case errors.Is(err, cursor.ErrInvalid): // a partition the topic lacks
		return kerr.UnknownTopicOrPartition.Code
	case errors.As(err, new(*broker.NotCoordinatorError)): // another node coordinates groups
		return kerr.NotCoordinator.Code
	}
	return codeOf(err)
}

// offsetFetch answers a group's committed offsets from Rewind's rows:
// requested partitions without a commit are −1.
func (c *coordinator) offsetFetch(req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := kmsg.NewPtrOffsetFetchResponse()
	if req.Version < 8 {
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = req.Group
		for _, t := range req.Topics {
			gt := kmsg.NewOffsetFetchRequestGroupTopic()
			gt.Topic, gt.Partitions = t.Topic, t.Partitions
			g.Topics = append(g.Topics, gt)
		}
		if req.Topics == nil {
			g.Topics = nil
		}
		rg := c.fetchGroup(g)
		resp.ErrorCode = rg.ErrorCode
		for _, t := range rg.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	for _, g := range req.Groups {
		resp.Groups = append(resp.Groups, c.fetchGroup(g))
	}
	return resp
}

func (c *coordinator) fetchGroup(g kmsg.OffsetFetchRequestGroup) kmsg.OffsetFetchResponseGroup {
	out := kmsg.NewOffsetFetchResponseGroup()
	out.Group = g.Group
	if code := groupNameCode(g.Group); code != 0 {
		out.ErrorCode = code
		return out
	}
	committed := map[string]map[int32]int64{}
	var order []string
	infos, err := c.s.b.DescribeGroup(g.Group)
	switch {
	case errors.Is(err, broker.ErrNoGroup):
	case err != nil:
		out.ErrorCode = c.commitCode(err)
		return out
	}
	for _, ti := range infos {
		offs := map[int32]int64{}
		for _, p := range ti.Partitions {
			if p.HasCommits {
				offs[int32(p.Partition)] = int64(p.State.Offset)
			}
		}
		if len(offs) > 0 {
			committed[ti.Topic] = offs
			order = append(order, ti.Topic)
		}
	}
	empty := ""
	part := func(p int32, off int64) kmsg.OffsetFetchResponseGroupTopicPartition {
		rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, off, -1, &empty
		return rp
	}
	if g.Topics == nil { // every topic with commits
		for _, t := range order {
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic = t
			ps := make([]int32, 0, len(committed[t]))
			for p := range committed[t] {
				ps = append(ps, p)
			}
			slices.Sort(ps)
			for _, p := range ps {
				rt.Partitions = append(rt.Partitions, part(p, committed[t][p]))
			}
			out.Topics = append(out.Topics, rt)
		}
		return out
	}
	for _, t := range g.Topics {
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			off, ok := committed[t.Topic][p]
			if !ok {
				off = -1
			}
			rt.Partitions = append(rt.Partitions, part(p, off))
		}
		out.Topics = append(out.Topics, rt)
	}
	return out
}

// listGroups lists the Kafka groups with members and every Rewind group
// (with commits or subscribers), once per name.
func (c *coordinator) listGroups(req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := kmsg.NewPtrListGroupsResponse()
	type row struct{ protocolType, state string }
	rows := map[string]row{}
	kafka := map[string]bool{}
	c.mu.Lock()
	for name, g := range c.groups {
		if len(g.members) > 0 {
			rows[name], kafka[name] = row{consumerProtocol, g.state.String()}, true
		}
	}
	c.mu.Unlock()
	summaries, err := c.s.b.ListGroups()
	if err != nil {
		resp.ErrorCode = c.commitCode(err)
		return resp
	}
	for _, s := range summaries { // one per group and topic
		if kafka[s.Group] {
			continue
		}
		r := row{"", stateEmpty.String()}
		if s.Members > 0 {
			r = row{"rewind", stateStable.String()}
		}
		if prev, ok := rows[s.Group]; !ok || prev.state == stateEmpty.String() {
			rows[s.Group] = r
		}
	}
	names := make([]string, 0, len(rows))
	for n := range rows {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		r := rows[n]
		if len(req.StatesFilter) > 0 && !slices.ContainsFunc(req.StatesFilter, func(s string) bool { return s == r.state }) {
			continue
		}
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState = n, r.protocolType, r.state
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}

// describeGroups describes Kafka groups with their members' metadata and
// assignments; a Rewind group with subscribers is Stable with protocol
// type "rewind" and its members (no metadata); a group with only commits
// is Empty; an unknown one is Dead, as in Kafka.
func (c *coordinator) describeGroups(req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := kmsg.NewPtrDescribeGroupsResponse()
	for _, name := range req.Groups {
		d := kmsg.NewDescribeGroupsResponseGroup()
		d.Group = name
		d.AuthorizedOperations = -2147483648
		if code := groupNameCode(name); code != 0 {
			d.ErrorCode = code
			resp.Groups = append(resp.Groups, d)
			continue
		}
		c.mu.Lock()
		g := c.groups[name]
		if g != nil && len(g.members) > 0 {
			d.State, d.ProtocolType = g.state.String(), consumerProtocol
			stable := g.state == stateStable // the protocol and assignments are settled
			if stable {
				d.Protocol = g.protocol
			}
			for _, m := range g.members {
				dm := kmsg.NewDescribeGroupsResponseGroupMember()
				dm.MemberID, dm.ClientID, dm.ClientHost = m.id, m.clientID, m.host
				if stable {
					dm.ProtocolMetadata, dm.MemberAssignment = metadataOf(m, g.protocol), m.assignment
				}
				d.Members = append(d.Members, dm)
			}
			c.mu.Unlock()
			resp.Groups = append(resp.Groups, d)
			continue
		}
		c.mu.Unlock()
		infos, err := c.s.b.DescribeGroup(name)
		switch {
		case errors.Is(err, broker.ErrNoGroup):
			d.State = "Dead"
		case err != nil:
			d.ErrorCode = c.commitCode(err)
		default:
			d.State = stateEmpty.String()
			for _, ti := range infos {
				for _, m := range ti.Live.Members {
					d.State, d.ProtocolType = stateStable.String(), "rewind"
					dm := kmsg.NewDescribeGroupsResponseGroupMember()
					dm.MemberID, dm.ClientID = m.ID, m.ClientName
					d.Members = append(d.Members, dm)
				}
			}
		}
		resp.Groups = append(resp.Groups, d)
	}
	return resp
}

// deleteGroups deletes groups without members: their Rewind commits go.
func (c *coordinator) deleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := kmsg.NewPtrDeleteGroupsResponse()
	for _, name := range req.Groups {
		d := kmsg.NewDeleteGroupsResponseGroup()
		d.Group = name
		if d.ErrorCode = groupNameCode(name); d.ErrorCode != 0 {
			resp.Groups = append(resp.Groups, d)
			continue
		}
		c.mu.Lock()
		g := c.groups[name]
		busy := g != nil && len(g.members) > 0
		c.mu.Unlock()
		if busy {
			d.ErrorCode = kerr.NonEmptyGroup.Code
			resp.Groups = append(resp.Groups, d)
			continue
		}
		err := c.s.b.DeleteGroup(ctx, name, false)
		switch {
		case err == nil:
		case errors.Is(err, groups.ErrHasMembers):
			d.ErrorCode = kerr.NonEmptyGroup.Code
		case errors.Is(err, broker.ErrNoGroup):
			d.ErrorCode = kerr.GroupIDNotFound.Code
		default:
			d.ErrorCode = c.commitCode(err)
		}
		resp.Groups = append(resp.Groups, d)
	}
	return resp
}
