package check

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rewind-io/rewind/scenarios/history"
)

// RaftSafety judges the leaders the nodes reported: at most one leader
// per raft group and term (Leader 0, "none known", is ignored). Stats:
// observations, groups (raft groups seen), terms (distinct group and term
// pairs).
func RaftSafety(h *history.History) Verdict {
	b := newVerdict("raft", "at most one leader per raft group and term")
	if len(h.Leaders) == 0 {
		return b.skip("no leader observations recorded")
	}
	type term struct {
		part
		term uint64
	}
	said := map[term]map[uint64][]history.LeaderObs{} // leader → the observations naming it
	var order []term
	groups := map[part]bool{}
	for _, o := range h.Leaders {
		if o.Leader == 0 {
			continue
		}
		b.inc("observations")
		t := term{part{o.Topic, o.Partition}, o.Term}
		groups[t.part] = true
		if said[t] == nil {
			said[t] = map[uint64][]history.LeaderObs{}
			order = append(order, t)
		}
		said[t][o.Leader] = append(said[t][o.Leader], o)
	}
	for _, t := range order {
		if len(said[t]) < 2 {
			continue
		}
		leaders := make([]uint64, 0, len(said[t]))
		for l := range said[t] {
			leaders = append(leaders, l)
		}
		slices.Sort(leaders)
		var who []string
		for _, l := range leaders {
			who = append(who, fmt.Sprintf("node %d (said by %s)", l, reporters(said[t][l])))
		}
		b.addf(nil, nil, "raft group %s had %d leaders in term %d: %s", raftGroup(t.part), len(leaders), t.term, strings.Join(who, ", "))
	}
	b.set("groups", float64(len(groups)))
	b.set("terms", float64(len(order)))
	return b.done()
}

func raftGroup(p part) string {
	if p.topic == "" {
		return "metadata"
	}
	return p.String()
}

// reporters lists the nodes that made observations, each once.
func reporters(obs []history.LeaderObs) string {
	var nodes []uint64
	for _, o := range obs {
		if !slices.Contains(nodes, o.Node) {
			nodes = append(nodes, o.Node)
		}
	}
	slices.Sort(nodes)
	s := make([]string, len(nodes))
	for i, n := range nodes {
		s[i] = fmt.Sprint(n)
	}
	return "node " + strings.Join(s, ", ")
}
