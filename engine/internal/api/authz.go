package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine/internal/auth"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

// Authorization: every public procedure has an entry in needs, the rights
// it must hold given its request, checked by the interceptor before the
// handler runs, so a denied call has no effect. A procedure without an
// entry is refused (fail closed), and a test enumerates the services'
// descriptors so a new RPC cannot ship without one. The listing RPCs need
// only authentication and return what the caller may describe (s.may).

// need is one right a call needs.
type need struct {
	op  auth.Op
	res auth.Resource
}

func topicRes(name string) auth.Resource  { return auth.Resource{Kind: auth.Topic, Name: name} }
func groupRes(name string) auth.Resource  { return auth.Resource{Kind: auth.Group, Name: name} }
func pluginRes(name string) auth.Resource { return auth.Resource{Kind: auth.Plugin, Name: name} }

var adminNeed = []need{{auth.Admin, auth.ClusterResource}}

// env is what a needs function may consult besides the request.
type env struct {
	// st is the state the call is checked against (the resume token key).
	st *auth.State
	// principal is the caller.
	principal string
	// allCommitted reports whether group has a committed offset in every
	// partition of topic.
	allCommitted func(group, topic string) bool
	// now is the server's clock.
	now time.Time
}

// needs maps each procedure to the rights its request needs.
var needs = map[string]func(e env, msg any) []need{
	rewindv1connect.TopicServiceCreateTopicProcedure: func(_ env, m any) []need {
		return []need{{auth.Create, topicRes(m.(*rewindv1.CreateTopicRequest).GetName())}}
	},
	rewindv1connect.TopicServiceListTopicsProcedure: none,
	rewindv1connect.TopicServiceDescribeTopicProcedure: func(_ env, m any) []need {
		return []need{{auth.Describe, topicRes(m.(*rewindv1.DescribeTopicRequest).GetName())}}
	},
	rewindv1connect.TopicServiceAlterTopicProcedure: func(_ env, m any) []need {
		return []need{{auth.Alter, topicRes(m.(*rewindv1.AlterTopicRequest).GetName())}}
	},
	rewindv1connect.TopicServiceDeleteTopicProcedure: func(_ env, m any) []need {
		return []need{{auth.Delete, topicRes(m.(*rewindv1.DeleteTopicRequest).GetName())}}
	},
	rewindv1connect.PublishServicePublishProcedure: func(_ env, m any) []need {
		return []need{{auth.Publish, topicRes(m.(*rewindv1.PublishRequest).GetTopic())}}
	},
	rewindv1connect.SubscribeServiceSubscribeProcedure: subscribeNeeds,
	rewindv1connect.GroupServiceCommitProcedure: func(_ env, m any) []need {
		r := m.(*rewindv1.CommitRequest)
		return []need{{auth.Commit, groupRes(r.GetGroup())}, {auth.Read, topicRes(r.GetTopic())}}
	},
	rewindv1connect.GroupServiceListGroupsProcedure: none,
	rewindv1connect.GroupServiceDescribeGroupProcedure: func(_ env, m any) []need {
		return []need{{auth.Describe, groupRes(m.(*rewindv1.DescribeGroupRequest).GetGroup())}}
	},
	rewindv1connect.GroupServiceDeleteGroupProcedure: func(_ env, m any) []need {
		return []need{{auth.Delete, groupRes(m.(*rewindv1.DeleteGroupRequest).GetGroup())}}
	},
	rewindv1connect.GroupServiceResetGroupProcedure: func(_ env, m any) []need {
		return []need{{auth.Reset, groupRes(m.(*rewindv1.ResetGroupRequest).GetGroup())}}
	},
	rewindv1connect.PluginServiceUploadPluginProcedure: func(_ env, m any) []need {
		return []need{{auth.Upload, pluginRes(m.(*rewindv1.UploadPluginRequest).GetName())}}
	},
	rewindv1connect.PluginServiceListPluginsProcedure: none,
	rewindv1connect.PluginServiceGetPluginProcedure: func(_ env, m any) []need {
		return []need{{auth.Describe, pluginRes(pluginName(m.(*rewindv1.GetPluginRequest).GetPlugin()))}}
	},
	rewindv1connect.PluginServiceDeletePluginProcedure: func(_ env, m any) []need {
		return []need{{auth.Delete, pluginRes(pluginName(m.(*rewindv1.DeletePluginRequest).GetPlugin()))}}
	},
	rewindv1connect.PluginServiceTestPluginProcedure: func(_ env, m any) []need {
		r := m.(*rewindv1.TestPluginRequest)
		out := filterNeeds(r.GetFilter())
		if t := r.GetTopic(); t != nil {
			out = append(out, need{auth.Replay, topicRes(t.GetTopic())})
		}
		return out
	},
	rewindv1connect.ClusterServiceGetClusterStatusProcedure: none,
	rewindv1connect.ClusterServiceTransferLeaderProcedure:   admin,
	rewindv1connect.ClusterServiceAddNodeProcedure:          admin,
	rewindv1connect.ClusterServiceRemoveNodeProcedure:       admin,
	rewindv1connect.ClusterServiceRebalanceProcedure:        admin,
	rewindv1connect.AuthServiceCreateUserProcedure:          admin,
	rewindv1connect.AuthServiceListUsersProcedure:           admin,
	rewindv1connect.AuthServiceRevokeUserProcedure:          admin,
	rewindv1connect.AuthServiceGrantAclProcedure:            admin,
	rewindv1connect.AuthServiceListAclsProcedure:            admin,
	rewindv1connect.AuthServiceRevokeAclProcedure:           admin,
	rewindv1connect.AuthServiceCheckAclProcedure:            admin,
	rewindv1connect.AuthServiceSetQuotaProcedure:            admin,
	rewindv1connect.AuthServiceListQuotasProcedure:          admin,
}

func none(env, any) []need  { return nil }
func admin(env, any) []need { return adminNeed }

// subscribeNeeds: read for a start at the end (latest, or a time not yet
// past) or a signed resume token (continuing a stream), replay for every
// other start; join on the group;
// use (or inline) on the filter's module. A group member's start applies
// only to the partitions without a committed offset: when every partition
// has one, the member resumes from the commits and needs read whatever its
// start; otherwise its start is held to the rule above.
func subscribeNeeds(e env, m any) []need {
	r := m.(*rewindv1.SubscribeRequest)
	op := auth.Replay
	switch p := r.GetStart().GetPosition().(type) {
	case *rewindv1.StartPosition_Latest:
		op = auth.Read
	case *rewindv1.StartPosition_Time:
		// A start at a time not yet past is a start at the end, or later.
		if p.Time.CheckValid() == nil && !p.Time.AsTime().Before(e.now) {
			op = auth.Read
		}
	case *rewindv1.StartPosition_ResumeToken:
		if _, signed := auth.VerifyResume(e.st.ResumeKey, e.principal, p.ResumeToken); signed {
			op = auth.Read
		}
	}
	if op == auth.Replay && r.GetGroup() != "" && e.allCommitted(r.GetGroup(), r.GetTopic()) {
		op = auth.Read
	}
	out := []need{{op, topicRes(r.GetTopic())}}
	if r.GetGroup() != "" {
		out = append(out, need{auth.Join, groupRes(r.GetGroup())})
	}
	return append(out, filterNeeds(r.GetFilter())...)
}

func filterNeeds(f *rewindv1.ReplayFilter) []need {
	switch v := f.GetModule().(type) {
	case *rewindv1.ReplayFilter_Plugin:
		return []need{{auth.Use, pluginRes(pluginName(v.Plugin))}}
	case *rewindv1.ReplayFilter_Inline:
		return []need{{auth.Inline, auth.InlineResource}}
	}
	return nil
}

// pluginName is the name part of a plugin reference ("name", "name@3",
// "name@sha256:...").
func pluginName(ref string) string {
	name, _, _ := strings.Cut(ref, "@")
	return name
}

// errRevoked ends a stream whose token was revoked or expired
// (Unauthenticated); errRightsRevoked one whose rights were taken away
// (PermissionDenied).
var (
	errRevoked       = errors.New("auth: the stream's token was revoked or expired")
	errRightsRevoked = errors.New("auth: the stream's rights were revoked")
)

// interceptor checks every call; see needs.
type interceptor struct{ g *guard }

func (i interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		proc := req.Spec().Procedure
		ctx, ns, err := i.g.check(ctx, proc, req.Any())
		if err != nil {
			return nil, err
		}
		resp, err := next(ctx, req)
		i.g.auditAdmin(ctx, proc, ns, err)
		return resp, err
	}
}

func (i interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if c := callerOf(ctx); c == nil || c.err != nil {
			// Refuse before reading the request.
			_, _, err := i.g.check(ctx, conn.Spec().Procedure, nil)
			return err
		}
		ctx = auth.WithIdentity(ctx, callerOf(ctx).id)
		sc := &checkedConn{StreamingHandlerConn: conn, g: i.g, ctx: ctx}
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		sc.cancel = cancel
		err := next(ctx, sc)
		if sc.done != nil {
			close(sc.done)
			<-sc.stopped
		}
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, errRevoked):
			return connect.NewError(connect.CodeUnauthenticated, errRevoked)
		case errors.Is(cause, errRightsRevoked):
			return connect.NewError(connect.CodePermissionDenied, errRightsRevoked)
		}
		return err
	}
}

// checkedConn checks a streaming call's request as it is received, then
// watches its token and rights until the stream ends.
type checkedConn struct {
	connect.StreamingHandlerConn
	g        *guard
	ctx      context.Context
	cancel   context.CancelCauseFunc
	received bool
	done     chan struct{}
	stopped  chan struct{}
}

func (c *checkedConn) Receive(msg any) error {
	if err := c.StreamingHandlerConn.Receive(msg); err != nil {
		return err
	}
	if c.received {
		return nil
	}
	c.received = true
	ctx, ns, err := c.g.check(c.ctx, c.Spec().Procedure, msg)
	if err != nil {
		return err
	}
	id, _ := auth.FromContext(ctx)
	c.done, c.stopped = make(chan struct{}), make(chan struct{})
	go c.g.watch(id, ns, c.cancel, c.done, c.stopped)
	return nil
}

// watch ends a stream once its token is gone or expired (errRevoked), or
// one of its rights is no longer allowed (errRightsRevoked).
func (g *guard) watch(id *auth.Identity, ns []need, cancel context.CancelCauseFunc, done <-chan struct{}, stopped chan<- struct{}) {
	defer close(stopped)
	t := time.NewTicker(g.cfg.RecheckInterval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		st := g.state()
		if id.TokenID != "" {
			tok, ok := st.TokenByID(id.TokenID)
			if !ok || tok.Expired(g.cfg.Now().UnixNano()) {
				cancel(errRevoked)
				return
			}
		}
		for _, n := range ns {
			if !st.Allowed(id.Principal, n.op, n.res) {
				cancel(errRightsRevoked)
				return
			}
		}
	}
}

// check authenticates and authorizes one call (msg nil: authentication
// only). It returns ctx with the caller's identity and the rights checked.
func (g *guard) check(ctx context.Context, proc string, msg any) (context.Context, []need, error) {
	c := callerOf(ctx)
	if c == nil {
		c = &caller{err: connect.NewError(connect.CodeUnauthenticated, errNoCredentials)}
	}
	if c.err != nil {
		g.cfg.Audit.Log(auth.Event{Operation: proc, Outcome: "unauthenticated", RequestID: c.requestID, Procedure: proc, Detail: c.err.Error()})
		return ctx, nil, c.err
	}
	if msg == nil {
		return ctx, nil, nil
	}
	needsOf, ok := needs[proc]
	if !ok {
		g.cfg.Audit.Log(auth.Event{Principal: c.id.Principal, Operation: proc, Outcome: "denied", RequestID: c.requestID, Procedure: proc, Detail: "no authorization rule for the procedure"})
		return ctx, nil, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("auth: %s has no authorization rule", proc))
	}
	st := g.state()
	ns := needsOf(env{st: st, principal: c.id.Principal, allCommitted: g.allCommitted, now: g.cfg.Now()}, msg)
	for _, n := range ns {
		d := st.Decide(c.id.Principal, n.op, n.res)
		if !d.Allowed {
			g.cfg.Audit.Log(auth.Event{Principal: c.id.Principal, Operation: string(n.op), Resource: n.res.String(), Outcome: "denied", RequestID: c.requestID, Procedure: proc, Detail: d.Explain()})
			return ctx, nil, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("permission denied: %s on %s", n.op, n.res))
		}
	}
	return auth.WithIdentity(ctx, c.id), ns, nil
}

// managing lists the operations whose calls are audited whatever their
// outcome: they change what exists or who may do what (publishes, reads
// and commits are audited only when refused).
var managing = map[auth.Op]bool{auth.Admin: true, auth.Create: true, auth.Alter: true, auth.Delete: true, auth.Reset: true, auth.Upload: true}

// auditAdmin logs an allowed call of a managing operation with its
// outcome.
func (g *guard) auditAdmin(ctx context.Context, proc string, ns []need, err error) {
	i := slices.IndexFunc(ns, func(n need) bool { return managing[n.op] })
	if i < 0 {
		return
	}
	c := callerOf(ctx)
	e := auth.Event{Principal: c.id.Principal, Operation: proc[strings.LastIndexByte(proc, '/')+1:], Resource: ns[i].res.String(), Outcome: "ok", RequestID: c.requestID, Procedure: proc}
	if err != nil {
		e.Outcome, e.Detail = "error", connect.CodeOf(err).String()
	}
	g.cfg.Audit.Log(e)
}

// may reports whether the caller of ctx may do op on res; always true with
// auth off. The listing RPCs filter with it.
func (s *Server) may(ctx context.Context, op auth.Op, res auth.Resource) bool {
	if s.guard == nil {
		return true
	}
	id, ok := auth.FromContext(ctx)
	return ok && s.guard.state().Allowed(id.Principal, op, res)
}

// checkRewind refuses a commit that moves a group back without the reset
// right: a member with join, commit and read could otherwise commit offset
// 0 and rejoin to replay the history. Moving forward (or committing where
// nothing was committed) needs only commit.
func (s *Server) checkRewind(ctx context.Context, req *rewindv1.CommitRequest) error {
	if s.guard == nil || s.may(ctx, auth.Reset, groupRes(req.GetGroup())) {
		return nil
	}
	for _, o := range req.GetOffsets() {
		cur, ok, err := s.b.CommittedOffset(req.GetGroup(), req.GetTopic(), o.GetPartition())
		if err != nil || !ok || o.GetOffset() >= cur {
			continue // errors: the commit itself reports them
		}
		res := groupRes(req.GetGroup())
		if c := callerOf(ctx); c != nil && c.id != nil {
			s.guard.cfg.Audit.Log(auth.Event{Principal: c.id.Principal, Operation: string(auth.Reset), Resource: res.String(), Outcome: "denied",
				RequestID: c.requestID, Procedure: rewindv1connect.GroupServiceCommitProcedure, Detail: fmt.Sprintf("commit of partition %d moves back from %d to %d", o.GetPartition(), cur, o.GetOffset())})
		}
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("permission denied: %s on %s (the commit moves partition %d back from offset %d to %d)", auth.Reset, res, o.GetPartition(), cur, o.GetOffset()))
	}
	return nil
}
