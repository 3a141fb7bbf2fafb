package client

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// Which node a client sends a call to.
//
// A client uses one node at a time: the first given to New until a call
// to it fails in a way that says the node, not the request, is the
// problem — it could not be reached, it did not answer within an attempt's
// deadline (paused, cut off), or it answered Unavailable (draining,
// broken). Then the node is penalised: skipped for the penalty (default
// 5 s) by every call that picks a node, and the next node in order that is
// not penalised is used. When all are, the one whose penalty ends first is
// used, so a client always has a node to try. A node that names a
// partition's leader (a leader hint) sends the client there instead, with
// no penalty; the leader's address comes from the cluster's member list
// and joins the client's nodes.

// DefaultNodePenalty is how long a node that failed is skipped unless
// WithNodePenalty says otherwise.
const DefaultNodePenalty = 5 * time.Second

// WithNodePenalty sets how long a node that could not be reached, did not
// answer within an attempt's deadline or answered Unavailable is skipped
// when the client picks a node for a call (default DefaultNodePenalty).
// The client stays on the node it moved to; the penalty only keeps it from
// moving back too soon.
func WithNodePenalty(d time.Duration) Option { return func(o *options) { o.penalty = max(d, 0) } }

// nodes is the nodes a client knows and which it uses. Safe for
// concurrent use.
type nodes struct {
	now     func() time.Time
	penalty time.Duration
	mu      struct {
		sync.Mutex
		// addrs are normalised base URLs: those given to New, in order,
		// then leaders hints named. Invariant: 0 <= cur < len(addrs).
		addrs []string
		cur   int
		// until holds the penalised nodes and when each penalty ends.
		until map[string]time.Time
	}
}

func newNodes(addrs []string, penalty time.Duration, now func() time.Time, penalised map[string]time.Time, scheme string) *nodes {
	n := &nodes{now: now, penalty: penalty}
	n.mu.addrs = addrs
	n.mu.until = map[string]time.Time{}
	t := now()
	for a, end := range penalised {
		if t.Before(end) {
			n.mu.until[normalize(a, scheme)] = end
		}
	}
	return n
}

// use returns the node for the next call: the one in use unless it is
// penalised, else the next one that is not, else the one whose penalty
// ends first.
func (n *nodes) use() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.now()
	best, bestEnd := -1, time.Time{}
	for k := range n.mu.addrs {
		i := (n.mu.cur + k) % len(n.mu.addrs)
		end, ok := n.mu.until[n.mu.addrs[i]]
		if !ok || !now.Before(end) {
			delete(n.mu.until, n.mu.addrs[i])
			best = i
			break
		}
		if best < 0 || end.Before(bestEnd) {
			best, bestEnd = i, end
		}
	}
	n.mu.cur = best
	return n.mu.addrs[best]
}

// useUntried is use, but prefers a node not in tried (the nodes that
// already refused the call being retried) when one is not penalised:
// after a refusal without a hint, going back to a node that refused
// before mostly meets the same refusal (two members cut from each other,
// each hinting the other).
func (n *nodes) useUntried(tried map[string]bool) string {
	n.mu.Lock()
	now := n.now()
	for k := range n.mu.addrs {
		i := (n.mu.cur + k) % len(n.mu.addrs)
		a := n.mu.addrs[i]
		if end, ok := n.mu.until[a]; tried[a] || (ok && now.Before(end)) {
			continue
		}
		n.mu.cur = i
		n.mu.Unlock()
		return a
	}
	n.mu.Unlock()
	return n.use()
}

// other returns a node to hedge a call to addr with: the first after it
// in order that is not penalised, else the other one whose penalty ends
// first, or "" when the client knows no other node. A penalty is a hint:
// when the node asked is silent, a node that failed a few seconds ago
// (refused a call while the cluster started, or during an election) is a
// better bet than waiting out the attempt, and one that is still down
// fails the hedge at once, which leaves the call to the first attempt.
func (n *nodes) other(addr string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.now()
	start := max(0, slices.Index(n.mu.addrs, addr))
	best, bestEnd := "", time.Time{}
	for k := 1; k < len(n.mu.addrs); k++ {
		a := n.mu.addrs[(start+k)%len(n.mu.addrs)]
		if a == addr {
			continue
		}
		end, ok := n.mu.until[a]
		if !ok || !now.Before(end) {
			return a
		}
		if best == "" || end.Before(bestEnd) {
			best, bestEnd = a, end
		}
	}
	return best
}

// penalties returns a copy of the penalised nodes and when each penalty
// ends.
func (n *nodes) penalties() map[string]time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.now()
	out := make(map[string]time.Time, len(n.mu.until))
	for a, end := range n.mu.until {
		if now.Before(end) {
			out[a] = end
		}
	}
	return out
}

// WithPenalties starts the client with nodes penalised until the times
// given, by address (as given to New): what Penalties returned in an
// earlier process, so that a command-line tool run again does not wait out
// a node the last run found silent. Penalties already over are ignored.
func WithPenalties(until map[string]time.Time) Option {
	return func(o *options) { o.penalties = until }
}

// Penalties returns the nodes the client skips now (they could not be
// reached, did not answer in time, or answered Unavailable), by base URL,
// and when each penalty ends; see WithPenalties.
func (c *Client) Penalties() map[string]time.Time { return c.nodes.penalties() }

// fail penalises addr; if it is the node in use, the next call picks
// another.
func (n *nodes) fail(addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.until[addr] = n.now().Add(n.penalty)
	if n.mu.addrs[n.mu.cur] == addr {
		n.mu.cur = (n.mu.cur + 1) % len(n.mu.addrs)
	}
}

// penalised reports whether addr is penalised now.
func (n *nodes) penalised(addr string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	end, ok := n.mu.until[addr]
	return ok && n.now().Before(end)
}

// prefer makes addr, a leader some node named, the node in use (adding
// it to the known nodes) and lifts its penalty.
func (n *nodes) prefer(addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.mu.until, addr)
	for i, a := range n.mu.addrs {
		if a == addr {
			n.mu.cur = i
			return
		}
	}
	n.mu.addrs = append(n.mu.addrs, addr)
	n.mu.cur = len(n.mu.addrs) - 1
}

func (n *nodes) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.mu.addrs)
}

// pick returns the client of the node the next call goes to.
func (c *Client) pick() *Client { return c.at(c.nodes.use()) }

// at returns the client of the node at addr (a normalised base URL).
func (c *Client) at(addr string) *Client {
	if addr == c.addr {
		return c
	}
	return c.peer(addr)
}

// errNoAnswer marks an attempt or a stream that got no answer from its
// node within the bound the client sets (not the caller's deadline).
var errNoAnswer = errors.New("no answer from the node")

// badNode reports whether err, from a call to a node, says the node (not
// the request) is the problem, so the call may go to another node: it
// could not be reached or broke the connection, gave no answer in time
// (errNoAnswer), or answered Unavailable.
func badNode(err error) bool {
	return err != nil && (unreachable(err) || errors.Is(err, errNoAnswer) || connect.CodeOf(err) == connect.CodeUnavailable)
}

// leaderHint returns the node a refusal names as the partition's leader
// (0: none), and where clients reach it when the refusal says
// (Rewind-Leader-Address; "" otherwise).
func leaderHint(err error) (id uint64, addr string) {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return 0, ""
	}
	id, _ = strconv.ParseUint(ce.Meta().Get("Rewind-Leader"), 10, 64)
	return id, ce.Meta().Get("Rewind-Leader-Address")
}

// moveOn handles a call to from that failed with err (badNode): it follows
// the leader hint err carries, if the hint or the member list of from
// names the leader's address (a hint naming from itself, or a node
// penalised now, keeps the client on from, unpenalised), else penalises
// from.
func (c *Client) moveOn(ctx context.Context, from *Client, err error) {
	if id, addr := leaderHint(err); id != 0 {
		if addr != "" {
			addr = c.learnMember(from, id, addr)
		} else {
			addr = c.memberAddr(ctx, from, id)
		}
		if addr == from.addr {
			// The node asked leads now (it was elected while it
			// forwarded): resend there, without a penalty.
			return
		}
		if addr != "" && c.nodes.penalised(addr) {
			// This client could not reach the node named, or heard
			// nothing from it, within its penalty: most likely dead or
			// paused, named by a member whose raft has not noticed yet.
			// The call stays on a node that answers, which forwards it to
			// the next leader once it is elected.
			return
		}
		if addr != "" {
			c.nodes.prefer(addr)
			return
		}
	}
	c.nodes.fail(from.addr)
}

// learnMember records that cluster member id is reached at addr (as a
// member reports it: host:port, in the scheme of from) and returns its
// base URL.
func (c *Client) learnMember(from *Client, id uint64, addr string) string {
	addr = from.sibling(addr)
	c.members.Lock()
	defer c.members.Unlock()
	if c.members.m == nil {
		c.members.m = map[uint64]string{}
	}
	c.members.m[id] = addr
	return addr
}

// sibling returns the base URL of another node, named as members name
// each other (host:port), in c's scheme.
func (c *Client) sibling(addr string) string {
	if !strings.Contains(addr, "://") {
		scheme, _, _ := strings.Cut(c.addr, "://")
		addr = scheme + "://" + addr
	}
	return normalize(addr, "http://")
}

// memberAddr returns the base URL of cluster member id, asking from for
// the member list when id is not known yet ("" if from does not know it).
func (c *Client) memberAddr(ctx context.Context, from *Client, id uint64) string {
	c.members.Lock()
	addr, ok := c.members.m[id]
	c.members.Unlock()
	if ok {
		return addr
	}
	// Bounded like an attempt: the node just answered, so it is up.
	bound := c.retry.attemptTime
	if bound <= 0 {
		bound = DefaultAttemptTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	st, err := from.cluster.GetClusterStatus(ctx, &rewindv1.GetClusterStatusRequest{})
	if err != nil {
		return ""
	}
	found := ""
	for _, n := range st.GetNodes() {
		if a := n.GetAddress(); a != "" {
			if a = c.learnMember(from, n.GetId(), a); n.GetId() == id {
				found = a
			}
		}
	}
	return found
}
