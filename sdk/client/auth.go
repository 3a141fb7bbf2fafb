package client

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
)

// WithToken authenticates every call with a bearer token (a server started
// with --auth; `rewind user create` issues them). The token goes in the
// Authorization header only; use TLS (an https:// address) wherever the
// network is not trusted, or anyone on the path can read it.
func WithToken(token string) Option {
	return WithConnectOptions(connect.WithInterceptors(tokenInterceptor{"Bearer " + token}))
}

type tokenInterceptor struct{ header string }

func (t tokenInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", t.header)
		return next(ctx, req)
	}
}

func (t tokenInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", t.header)
		return conn
	}
}

func (t tokenInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// User describes a stored token (never its secret).
type User = rewindv1.UserToken

// ACLRule is one ACL entry.
type ACLRule = rewindv1.AclRule

// ACLCheck explains one decision.
type ACLCheck = rewindv1.CheckAclResponse

// CreateUser issues a bearer token for the principal name, valid for
// expiresIn (0: until revoked). The token is returned once; the server
// keeps only its hash. Needs the cluster admin right.
func (c *Client) CreateUser(ctx context.Context, name string, expiresIn time.Duration) (token string, u *User, err error) {
	req := &rewindv1.CreateUserRequest{Name: name}
	if expiresIn > 0 {
		req.ExpiresIn = durationpb.New(expiresIn)
	}
	resp, err := c.auth.CreateUser(ctx, req)
	if err != nil {
		return "", nil, err
	}
	return resp.GetToken(), resp.GetUser(), nil
}

// ListUsers lists the tokens.
func (c *Client) ListUsers(ctx context.Context) ([]*User, error) {
	resp, err := unary(ctx, c, c.repeatable(0), func(ctx context.Context, cl *Client) (*rewindv1.ListUsersResponse, error) {
		return cl.auth.ListUsers(ctx, &rewindv1.ListUsersRequest{})
	})
	return resp.GetUsers(), err
}

// RevokeUser deletes a token (by id) or every token of a principal, and
// returns what it deleted. Streams opened with them end within seconds.
func (c *Client) RevokeUser(ctx context.Context, nameOrTokenID string) ([]*User, error) {
	resp, err := c.auth.RevokeUser(ctx, &rewindv1.RevokeUserRequest{NameOrTokenId: nameOrTokenID})
	return resp.GetRevoked(), err
}

// GrantACL adds a rule and returns it with its id.
func (c *Client) GrantACL(ctx context.Context, r *ACLRule) (*ACLRule, error) {
	resp, err := c.auth.GrantAcl(ctx, &rewindv1.GrantAclRequest{Rule: r})
	return resp.GetRule(), err
}

// ListACLs lists the rules (of principal and "*", if principal is set) and
// the superusers.
func (c *Client) ListACLs(ctx context.Context, principal string) (rules []*ACLRule, superusers []string, err error) {
	resp, err := unary(ctx, c, c.repeatable(0), func(ctx context.Context, cl *Client) (*rewindv1.ListAclsResponse, error) {
		return cl.auth.ListAcls(ctx, &rewindv1.ListAclsRequest{Principal: principal})
	})
	return resp.GetRules(), resp.GetSuperusers(), err
}

// RevokeACL deletes the rule with id, or (id 0) takes match's operations
// off the rules with its principal, kind, pattern and verb. It returns the
// rules as they were.
func (c *Client) RevokeACL(ctx context.Context, id uint64, match *ACLRule) ([]*ACLRule, error) {
	resp, err := c.auth.RevokeAcl(ctx, &rewindv1.RevokeAclRequest{Id: id, Match: match})
	return resp.GetRevoked(), err
}

// CheckACL explains whether principal may do op on resource ("topic:NAME",
// "group:NAME", "plugin:NAME" or "cluster").
func (c *Client) CheckACL(ctx context.Context, principal, op, resource string) (*ACLCheck, error) {
	return c.auth.CheckAcl(ctx, &rewindv1.CheckAclRequest{Principal: principal, Operation: op, Resource: resource})
}

// Quota is a principal's quota (zero fields: no limit): publish bytes per
// second, replay bytes per second (paced), streams at once, filter fuel per
// second (paced), and the topics the principal created that still exist
// and their partitions (a CreateTopic over them fails with
// ResourceExhausted and creates nothing).
type Quota = rewindv1.Quota

// SetQuota sets principal's quota, or (principal "") the default quota of
// every principal without its own; an all-zero quota removes it.
func (c *Client) SetQuota(ctx context.Context, principal string, q *Quota) error {
	_, err := c.auth.SetQuota(ctx, &rewindv1.SetQuotaRequest{Principal: principal, DefaultQuota: principal == "", Quota: q})
	return err
}

// ListQuotas returns the quotas set, and what the node that answered
// charged per principal.
func (c *Client) ListQuotas(ctx context.Context) (*rewindv1.ListQuotasResponse, error) {
	return unary(ctx, c, c.repeatable(0), func(ctx context.Context, cl *Client) (*rewindv1.ListQuotasResponse, error) {
		return cl.auth.ListQuotas(ctx, &rewindv1.ListQuotasRequest{})
	})
}
