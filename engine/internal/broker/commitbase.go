package broker

import (
	"fmt"
	"slices"
)

// CommitBase is what a commit to one partition is checked against before
// it is proposed (package api: a commit must not let its caller read
// history it has no right to).
type CommitBase struct {
	// Committed reports whether the group has a committed offset in the
	// partition; Offset is that offset.
	Committed bool
	Offset    uint64
	// End is the partition's end (its next offset) on this node's
	// replica: at most the leader's.
	End uint64
}

// CommitBase returns group's committed offset in partition p of topic and
// the partition's end, as this node's replica has them. The node serving
// a commit coordinates the group and hosts every partition of the topic
// (Commit refuses otherwise), so its replica is the one the commit is
// checked against: on another node CommitBase returns the
// *NotCoordinatorError Commit would. A partition that does not exist is
// ErrInvalid.
func (b *Broker) CommitBase(group, topic string, p uint32) (CommitBase, error) {
	if err := b.coordinates(); err != nil {
		return CommitBase{}, err
	}
	lt, err := b.topic(topic)
	if err != nil {
		return CommitBase{}, err
	}
	if int(p) >= len(lt.parts) {
		return CommitBase{}, fmt.Errorf("%w: partition %d does not exist (topic %q has %d)", ErrInvalid, p, topic, len(lt.parts))
	}
	part := lt.parts[p]
	st, ok, err := part.GroupState(group)
	if err != nil {
		return CommitBase{}, err
	}
	// The end is read after the row: it only grows, so a first commit is
	// never compared with an end older than the row it saw.
	cb := CommitBase{End: part.Bounds().Next}
	if ok && st.Committed {
		cb.Committed, cb.Offset = true, st.Offset
	}
	return cb, nil
}

// PluginNames returns the names (sorted, each once) of every registered
// plugin version whose module has the digest sha256 (lowercase hex), or
// with sha256 empty every registered name.
func (b *Broker) PluginNames(sha256 string) []string {
	var out []string
	for _, p := range b.meta.Plugins().List("") {
		if (sha256 == "" || p.SHA256 == sha256) && !slices.Contains(out, p.Name) {
			out = append(out, p.Name)
		}
	}
	return out // List is sorted by name
}
