package raftlog

import (
	"slices"
	"sync/atomic"

	"go.etcd.io/raft/v3"
)

// The failure detector: how a node stops waiting out the election timeout
// for a leader that died or froze.
//
// With CheckQuorum and PreVote a follower refuses to vote while it has
// heard from its leader within the election timeout (10–20 ticks), so when
// a leader dies the group stays leaderless that long. The detector watches
// peers, not groups: every message received from a node counts as a sign
// of life, and a leader sends each follower a heartbeat per group every
// HeartbeatTicks, so a working node that leads a group here is heard from
// every tick, at no cost beyond that traffic. When a node that leads
// groups here has been silent for FailureDetectTicks ticks of this host's
// own clock, every local follower whose leader it is forgets it
// (RawNode.ForgetLeader, which exists for exactly this: a leaderless
// follower grants pre-votes at once), and each campaigns after a stagger
// by its rank among the group's other voters (1 tick for the lowest id,
// 3 for the next, …), so the survivors do not split the vote and the
// first has its partner's forget behind it.
//
// Safety is raft's: a quorum must still agree (a follower that still hears
// the leader refuses the pre-vote), and nothing in Rewind relies on a
// leader lease (no ReadOnlyLeaseBased; reads serve applied entries and
// never assume this node still leads), so electing a new leader while the
// old one is merely paused is safe: when it resumes it meets a higher
// term, steps down, and its unacknowledged entries are replaced.
//
// False suspicions cost availability, never safety, and are counted
// (DetectorStats). Silence is measured in this host's own ticks, and a
// message is stamped with the tick at which the loop steps it: a stalled
// loop (a paused process, a long fsync, a starved CPU) does not tick, and
// Go's ticker drops the ticks it missed, so a stall of the detecting node
// never looks like a silent peer. A suspicion fires at most once per peer
// per window.

// DetectorStats counts what the failure detector did since the host opened.
type DetectorStats struct {
	// Suspicions counts the times a peer leading groups here was silent
	// for the detection window and its followers here forgot it.
	Suspicions uint64
	// Withdrawn counts suspicions the peer disproved by being heard from
	// again within an election timeout of them: a slow node, not a dead
	// one. Each may have cost an election that was not needed.
	Withdrawn uint64
	// Campaigns counts the elections started by the detector.
	Campaigns uint64
}

type detectorCounters struct {
	suspicions, withdrawn, campaigns atomic.Uint64
}

// DetectorStats reports what the failure detector did. Safe for concurrent
// use.
func (h *Host) DetectorStats() DetectorStats {
	return DetectorStats{
		Suspicions: h.det.suspicions.Load(),
		Withdrawn:  h.det.withdrawn.Load(),
		Campaigns:  h.det.campaigns.Load(),
	}
}

// detector is the loop-owned state of the failure detector.
type detector struct {
	// ticks counts the host's ticks; heard is the tick at which a
	// message from each peer was last stepped, suspected the tick at
	// which each peer currently suspected was suspected.
	ticks     uint64
	heard     map[uint64]uint64
	suspected map[uint64]uint64
	// acted holds the suspected peers whose suspicion made a follower
	// here forget them.
	acted map[uint64]bool
	// campaigns lists groups with a campaign scheduled (group.campaignAt).
	campaigns []uint64
	// lastFrom is the sender whose message was stepped last, so a frame
	// of many messages from one peer costs one map write.
	lastFrom uint64
	// due is set by a tick and cleared when the detector has run after
	// the inbox was stepped.
	due bool
}

// hear records a message from node.
func (h *Host) hear(node uint64) {
	d := &h.detect
	if node == d.lastFrom || node == 0 {
		return
	}
	d.lastFrom = node
	d.heard[node] = d.ticks
	if at, ok := d.suspected[node]; ok {
		acted := d.acted[node]
		delete(d.suspected, node)
		delete(d.acted, node)
		if acted && d.ticks-at < uint64(h.cfg.ElectionTicks) {
			h.det.withdrawn.Add(1)
			h.log.Info("suspected peer heard from again", "peer", node, "after-ticks", d.ticks-at)
		}
	}
}

// detectTick advances the detector's clock; the check runs once the
// messages already received are stepped (detectRun).
func (h *Host) detectTick() {
	h.detect.ticks++
	h.detect.lastFrom = 0
	h.detect.due = true
}

// detectRun suspects the peers silent for the window and runs the
// campaigns that are due. Called on the loop after stepping the inbox.
func (h *Host) detectRun() {
	d := &h.detect
	if !d.due || h.cfg.FailureDetectTicks < 0 {
		return
	}
	d.due = false
	window := uint64(h.cfg.FailureDetectTicks)
	var silent []uint64
	for node, at := range d.heard {
		if d.ticks-at < window {
			continue
		}
		if s, ok := d.suspected[node]; ok && d.ticks-s < window {
			continue // at most once per window
		}
		silent = append(silent, node)
	}
	if len(silent) > 0 {
		slices.Sort(silent)
		for _, node := range silent {
			h.suspect(node)
		}
	}
	if len(d.campaigns) > 0 {
		h.runCampaigns()
	}
}

// suspect makes every local follower of a group led by node forget it and
// schedules its campaign.
func (h *Host) suspect(node uint64) {
	d := &h.detect
	d.suspected[node] = d.ticks
	forgot := 0
	for _, id := range h.order {
		g := h.groups[id]
		if g.stopped || g.campaignAt != 0 {
			continue
		}
		bs := g.rn.BasicStatus()
		if bs.RaftState != raft.StateFollower || bs.Lead != node {
			continue
		}
		// The other voters, by id; this node's rank among them sets its
		// stagger. A learner (not a voter) cannot campaign.
		voters := g.st.conf.GetVoters()
		rank, ok := 0, false
		for _, v := range voters {
			if v == h.cfg.NodeID {
				ok = true
			} else if v != node && v < h.cfg.NodeID {
				rank++
			}
		}
		if !ok || len(g.st.conf.GetVotersOutgoing()) > 0 {
			continue // not a voter, or a joint configuration: leave it to raft
		}
		h.guard(g, func() error { return g.rn.ForgetLeader() })
		if g.stopped {
			continue
		}
		g.campaignAt = d.ticks + 1 + 2*uint64(rank)
		d.campaigns = append(d.campaigns, id)
		forgot++
	}
	if forgot == 0 {
		// Nothing here follows it (it leads nothing here, or its
		// followers forgot it already): forget the peer until it is
		// heard from again, so a node that is gone for good costs one
		// look, not one per window.
		delete(d.heard, node)
		delete(d.suspected, node)
		delete(d.acted, node)
		return
	}
	d.acted[node] = true
	h.det.suspicions.Add(1)
	h.log.Info("peer silent: its followers here forget it", "peer", node,
		"silent-ticks", d.ticks-d.heard[node], "groups", forgot)
}

// runCampaigns starts the scheduled campaigns that are due, for groups
// still without a leader.
func (h *Host) runCampaigns() {
	d := &h.detect
	keep := d.campaigns[:0]
	for _, id := range d.campaigns {
		g, ok := h.groups[id]
		if !ok || g.stopped {
			continue
		}
		if d.ticks < g.campaignAt {
			keep = append(keep, id)
			continue
		}
		g.campaignAt = 0
		bs := g.rn.BasicStatus()
		if bs.Lead != 0 || bs.RaftState == raft.StateLeader {
			continue // a leader is known: someone else won, or it was back
		}
		h.det.campaigns.Add(1)
		h.guard(g, func() error { return g.rn.Campaign() })
	}
	clear(d.campaigns[len(keep):])
	d.campaigns = keep
}
