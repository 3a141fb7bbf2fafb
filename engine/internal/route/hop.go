package route

import "context"

// Hop is how a request reached this node.
type Hop int

const (
	// FromClient: a client sent it here.
	FromClient Hop = iota
	// Forwarded: another member forwarded it to this node as the
	// partition's leader: it is served here or refused, never sent on.
	Forwarded
	// Relayed: another member that cannot reach the partition's leader
	// sent it here: it is served here, forwarded once, or refused at once.
	Relayed
)

type hopKey struct{}

// WithHop marks ctx with how its request reached this node. Only the
// member path marks a request (api/member.go decides where hop headers
// are believed); a forwarded or relayed request's idempotency keys were
// bound by the node that took it from the client.
func WithHop(ctx context.Context, h Hop) context.Context {
	return context.WithValue(ctx, hopKey{}, h)
}

// HopOf returns ctx's hop (FromClient when unmarked).
func HopOf(ctx context.Context) Hop { h, _ := ctx.Value(hopKey{}).(Hop); return h }
