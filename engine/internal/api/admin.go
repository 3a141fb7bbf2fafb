package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rewind-io/rewind/engine/internal/auth"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// The AuthService: users (bearer tokens) and ACL rules, kept in the
// metadata group. The interceptor (authz.go) has checked the cluster admin
// right before any of these run, and audits each call.

var errAuthOff = errors.New("authentication is off on this server (start it with --auth)")

func (s *Server) authOn() error {
	if s.guard == nil {
		return connect.NewError(connect.CodeFailedPrecondition, errAuthOff)
	}
	return nil
}

// authError maps the auth package's errors, then the broker's.
func (s *Server) authError(err error) error {
	switch {
	case errors.Is(err, auth.ErrNoSuchUser), errors.Is(err, auth.ErrNoSuchRule):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, auth.ErrInvalid), errors.Is(err, auth.ErrTooMany):
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	return toConnect(s.log, err)
}

// CreateUser implements rewindv1connect.AuthServiceHandler.
func (s *Server) CreateUser(ctx context.Context, req *rewindv1.CreateUserRequest) (*rewindv1.CreateUserResponse, error) {
	if err := s.authOn(); err != nil {
		return nil, err
	}
	if err := auth.ValidatePrincipal(req.GetName()); err != nil || req.GetName() == "*" {
		return nil, invalidf("user name %q: printable, no spaces, 1 to %d bytes, not \"*\"", clipName(req.GetName()), auth.MaxName)
	}
	now := s.guard.cfg.Now()
	var expires int64
	if d := req.GetExpiresIn(); d != nil {
		if err := d.CheckValid(); err != nil || d.AsDuration() <= 0 {
			return nil, invalidf("expires_in must be a positive duration")
		}
		expires = now.Add(d.AsDuration()).UnixNano()
	}
	bearer, t := auth.NewToken(req.GetName(), now.UnixNano(), expires)
	if _, err := s.b.ProposeAuth(ctx, auth.Command{CreateToken: &t}); err != nil {
		return nil, s.authError(err)
	}
	return &rewindv1.CreateUserResponse{Token: bearer, User: s.userProto(s.b.Auth(), &t)}, nil
}

// ListUsers implements rewindv1connect.AuthServiceHandler.
func (s *Server) ListUsers(ctx context.Context, _ *rewindv1.ListUsersRequest) (*rewindv1.ListUsersResponse, error) {
	if err := s.authOn(); err != nil {
		return nil, err
	}
	st := s.b.Auth()
	out := &rewindv1.ListUsersResponse{}
	for i := range st.Tokens {
		out.Users = append(out.Users, s.userProto(st, &st.Tokens[i]))
	}
	return out, nil
}

// RevokeUser implements rewindv1connect.AuthServiceHandler.
func (s *Server) RevokeUser(ctx context.Context, req *rewindv1.RevokeUserRequest) (*rewindv1.RevokeUserResponse, error) {
	if err := s.authOn(); err != nil {
		return nil, err
	}
	who := req.GetNameOrTokenId()
	if who == "" {
		return nil, invalidf("a user name or token id is required")
	}
	r := &auth.Revoke{Principal: who}
	if auth.IsTokenID(who) {
		if _, ok := s.b.Auth().TokenByID(who); ok {
			r = &auth.Revoke{TokenID: who}
		}
	}
	res, err := s.b.ProposeAuth(ctx, auth.Command{Revoke: r})
	if err != nil {
		return nil, s.authError(err)
	}
	out := &rewindv1.RevokeUserResponse{}
	st := s.b.Auth()
	for i := range res.Tokens {
		out.Revoked = append(out.Revoked, s.userProto(st, &res.Tokens[i]))
	}
	return out, nil
}

// GrantAcl implements rewindv1connect.AuthServiceHandler.
func (s *Server) GrantAcl(ctx context.Context, req *rewindv1.GrantAclRequest) (*rewindv1.GrantAclResponse, error) {
	if err := s.authOn(); err != nil {
		return nil, err
	}
	r, err := ruleOf(req.GetRule())
	if err != nil {
		return nil, err
	}
	res, err := s.b.ProposeAuth(ctx, auth.Command{Grant: &r})
	if err != nil {
		return nil, s.authError(err)
	}
	return &rewindv1.GrantAclResponse{Rule: ruleProto(&res.Rules[0])}, nil
}

// ListAcls implements rewindv1connect.AuthServiceHandler.
func (s *Server) ListAcls(ctx context.Context, req *rewindv1.ListAclsRequest) (*rewindv1.ListAclsResponse, error) {
	if err := s.authOn(); err != nil {
		return nil, err
	}
	st := s.b.Auth()
	out := &rewindv1.ListAclsResponse{Superusers: st.Superusers}
	for i := range st.Rules {
		r := &st.Rules[i]
		if p := req.GetPrincipal(); p == "" || r.Principal == p || r.Principal == "*" {
			out.Rules = append(out.Rules, ruleProto(r))
		}
	}
	return out, nil
}

// RevokeAcl implements rewindv1connect.AuthServiceHandler.
func (s *Server) RevokeAcl(ctx context.Context, req *rewindv1.RevokeAclRequest) (*rewindv1.RevokeAclResponse, error) {
	if err := s.authOn(); err != nil {
		return nil, err
	}
	rr := &auth.RevokeRule{ID: req.GetId()}
	if rr.ID == 0 {
		if req.GetMatch() == nil {
			return nil, invalidf("a rule id or a rule to match is required")
		}
		m, err := ruleOf(req.GetMatch())
		if err != nil {
			return nil, err
		}
		rr.Match = &m
	}
	res, err := s.b.ProposeAuth(ctx, auth.Command{RevokeRule: rr})
	if err != nil {
		return nil, s.authError(err)
	}
	out := &rewindv1.RevokeAclResponse{}
	for i := range res.Rules {
		out.Revoked = append(out.Revoked, ruleProto(&res.Rules[i]))
	}
	return out, nil
}

// CheckAcl implements rewindv1connect.AuthServiceHandler.
func (s *Server) CheckAcl(ctx context.Context, req *rewindv1.CheckAclRequest) (*rewindv1.CheckAclResponse, error) {
	if err := s.authOn(); err != nil {
		return nil, err
	}
	if err := auth.ValidatePrincipal(req.GetPrincipal()); err != nil {
		return nil, invalidf("%v", err)
	}
	op, err := auth.ParseOp(req.GetOperation())
	if err != nil {
		return nil, invalidf("%v", err)
	}
	res, err := auth.ParseResource(req.GetResource())
	if err != nil {
		return nil, invalidf("%v", err)
	}
	d := s.b.Auth().Decide(req.GetPrincipal(), op, res)
	out := &rewindv1.CheckAclResponse{Allowed: d.Allowed, Explanation: d.Explain()}
	if d.Rule != nil {
		out.Rule = ruleProto(d.Rule)
	}
	return out, nil
}

func ruleOf(p *rewindv1.AclRule) (auth.Rule, error) {
	if p == nil {
		return auth.Rule{}, invalidf("a rule is required")
	}
	r := auth.Rule{Principal: p.GetPrincipal(), Kind: auth.Kind(p.GetKind()), Pattern: p.GetPattern(), Deny: p.GetDeny()}
	for _, o := range p.GetOperations() {
		r.Ops = append(r.Ops, auth.Op(o))
	}
	if err := r.Validate(); err != nil {
		return auth.Rule{}, invalidf("%v", err)
	}
	return r, nil
}

func ruleProto(r *auth.Rule) *rewindv1.AclRule {
	out := &rewindv1.AclRule{Id: r.ID, Principal: r.Principal, Kind: string(r.Kind), Pattern: r.Pattern, Deny: r.Deny}
	for _, o := range r.Ops {
		out.Operations = append(out.Operations, string(o))
	}
	return out
}

func (s *Server) userProto(st *auth.State, t *auth.Token) *rewindv1.UserToken {
	out := &rewindv1.UserToken{TokenId: t.ID, Principal: t.Principal, CreateTime: timestamppb.New(time.Unix(0, t.Created))}
	if t.Expires != 0 {
		out.ExpireTime = timestamppb.New(time.Unix(0, t.Expires))
		out.Expired = s.guard != nil && t.Expired(s.guard.cfg.Now().UnixNano())
	}
	for _, su := range st.Superusers {
		out.Superuser = out.Superuser || su == t.Principal
	}
	return out
}

func clipName(s string) string {
	if len(s) > 64 {
		return fmt.Sprintf("%s...", s[:64])
	}
	return s
}

var _ rewindv1connect.AuthServiceHandler = (*Server)(nil)
