package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/rewind-io/rewind/engine/internal/auth"
	"github.com/rewind-io/rewind/engine/internal/cursor"
	"github.com/rewind-io/rewind/engine/internal/echo"
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
	// shown, when set, is the resource a denial names instead of res: a
	// plugin named by its digest is checked on every name carrying that
	// digest, and the denial names the digest the caller gave, never a
	// name it may not know.
	shown auth.Resource
}

// named is the resource a denial of n names.
func (n need) named() auth.Resource {
	if n.shown != (auth.Resource{}) {
		return n.shown
	}
	return n.res
}

func topicRes(name string) auth.Resource  { return auth.Resource{Kind: auth.Topic, Name: name} }
func groupRes(name string) auth.Resource  { return auth.Resource{Kind: auth.Group, Name: name} }
func pluginRes(name string) auth.Resource { return auth.Resource{Kind: auth.Plugin, Name: name} }

var adminNeed = []need{{op: auth.Admin, res: auth.ClusterResource}}

// env is what a needs function may consult besides the request.
type env struct {
	// st is the state the call is checked against (the resume token key).
	st *auth.State
	// principal is the caller.
	principal string
	// allCommitted reports whether group has a committed offset in every
	// partition of topic.
	allCommitted func(group, topic string) bool
	// pluginNames returns the name of every registered plugin version
	// whose module has the digest sha (lowercase hex); sha empty: every
	// registered name.
	pluginNames func(sha string) []string
	// now is the server's clock.
	now time.Time
}

// needs maps each procedure to the rights its request needs.
var needs = map[string]func(e env, msg any) []need{
	rewindv1connect.TopicServiceCreateTopicProcedure: func(_ env, m any) []need {
		return []need{{op: auth.Create, res: topicRes(m.(*rewindv1.CreateTopicRequest).GetName())}}
	},
	rewindv1connect.TopicServiceListTopicsProcedure: none,
	rewindv1connect.TopicServiceDescribeTopicProcedure: func(_ env, m any) []need {
		return []need{{op: auth.Describe, res: topicRes(m.(*rewindv1.DescribeTopicRequest).GetName())}}
	},
	rewindv1connect.TopicServiceAlterTopicProcedure: func(_ env, m any) []need {
		return []need{{op: auth.Alter, res: topicRes(m.(*rewindv1.AlterTopicRequest).GetName())}}
	},
	rewindv1connect.TopicServiceDeleteTopicProcedure: func(_ env, m any) []need {
		return []need{{op: auth.Delete, res: topicRes(m.(*rewindv1.DeleteTopicRequest).GetName())}}
	},
	rewindv1connect.PublishServicePublishProcedure: func(_ env, m any) []need {
		return []need{{op: auth.Publish, res: topicRes(m.(*rewindv1.PublishRequest).GetTopic())}}
	},
	rewindv1connect.SubscribeServiceSubscribeProcedure: subscribeNeeds,
	rewindv1connect.EventStoreServiceReadProcedure: func(_ env, m any) []need {
		return []need{{op: auth.Replay, res: topicRes(m.(*rewindv1.ReadRequest).GetTopic())}}
	},
	rewindv1connect.GroupServiceCommitProcedure: func(_ env, m any) []need {
		r := m.(*rewindv1.CommitRequest)
		return []need{{op: auth.Commit, res: groupRes(r.GetGroup())}, {op: auth.Read, res: topicRes(r.GetTopic())}}
	},
	rewindv1connect.GroupServiceListGroupsProcedure: none,
	rewindv1connect.GroupServiceDescribeGroupProcedure: func(_ env, m any) []need {
		return []need{{op: auth.Describe, res: groupRes(m.(*rewindv1.DescribeGroupRequest).GetGroup())}}
	},
	rewindv1connect.GroupServiceDeleteGroupProcedure: func(_ env, m any) []need {
		return []need{{op: auth.Delete, res: groupRes(m.(*rewindv1.DeleteGroupRequest).GetGroup())}}
	},
	rewindv1connect.GroupServiceResetGroupProcedure: func(_ env, m any) []need {
		return []need{{op: auth.Reset, res: groupRes(m.(*rewindv1.ResetGroupRequest).GetGroup())}}
	},
	rewindv1connect.PluginServiceUploadPluginProcedure: func(_ env, m any) []need {
		return []need{{op: auth.Upload, res: pluginRes(m.(*rewindv1.UploadPluginRequest).GetName())}}
	},
	rewindv1connect.PluginServiceListPluginsProcedure: none,
	rewindv1connect.PluginServiceGetPluginProcedure: func(e env, m any) []need {
		return pluginNeeds(e, auth.Describe, m.(*rewindv1.GetPluginRequest).GetPlugin())
	},
	rewindv1connect.PluginServiceDeletePluginProcedure: func(e env, m any) []need {
		return pluginNeeds(e, auth.Delete, m.(*rewindv1.DeletePluginRequest).GetPlugin())
	},
	rewindv1connect.PluginServiceTestPluginProcedure: func(e env, m any) []need {
		r := m.(*rewindv1.TestPluginRequest)
		out := filterNeeds(e, r.GetFilter())
		if t := r.GetTopic(); t != nil {
			out = append(out, need{op: auth.Replay, res: topicRes(t.GetTopic())})
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
	out := []need{{op: op, res: topicRes(r.GetTopic())}}
	if r.GetGroup() != "" {
		out = append(out, need{op: auth.Join, res: groupRes(r.GetGroup())})
	}
	return append(out, filterNeeds(e, r.GetFilter())...)
}

func filterNeeds(e env, f *rewindv1.ReplayFilter) []need {
	switch v := f.GetModule().(type) {
	case *rewindv1.ReplayFilter_Plugin:
		return pluginNeeds(e, auth.Use, v.Plugin)
	case *rewindv1.ReplayFilter_Inline:
		return []need{{op: auth.Inline, res: auth.InlineResource}}
	}
	return nil
}

// pluginNeeds is op on the plugins a reference names: "name" and
// "name@3" name one; a digest ("sha256:HEX", or the digest part of
// "name@sha256:HEX") names every plugin whose module has that digest, so
// the right is needed on each of them (a deny on any one wins). A digest
// no plugin has needs the right on every plugin: on the pattern "*" and on
// each registered name (a deny on any one wins), so a caller without it
// cannot tell an unknown digest from a forbidden one. A denial names the
// digest as given.
func pluginNeeds(e env, op auth.Op, ref string) []need {
	var out []need
	hexsum, byDigest := strings.CutPrefix(ref, "sha256:")
	if !byDigest {
		name, rest, _ := strings.Cut(ref, "@")
		out = append(out, need{op: op, res: pluginRes(name)})
		hexsum, byDigest = strings.CutPrefix(rest, "sha256:")
	}
	if !byDigest {
		return out
	}
	shown := pluginRes("sha256:" + hexsum)
	names := e.pluginNames(strings.ToLower(hexsum))
	if len(names) == 0 {
		names = append(e.pluginNames(""), "*")
	}
	for _, n := range names {
		out = append(out, need{op: op, res: pluginRes(n), shown: shown})
	}
	return out
}

// errRevoked ends a stream whose token was revoked or expired
// (Unauthenticated); errRightsRevoked one whose rights were taken away
// (PermissionDenied).
var (
	errRevoked       = errors.New("auth: the stream's token was revoked or expired")
	errRightsRevoked = errors.New("auth: the stream's rights were revoked")
)

// interceptor checks every call; see needs.
type interceptor struct {
	g *guard
	// pluginNames: env.pluginNames.
	pluginNames func(sha string) []string
}

func (i interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		proc := req.Spec().Procedure
		ctx, ns, err := i.g.check(ctx, proc, req.Any(), i.pluginNames)
		if err != nil {
			return nil, err
		}
		resp, err := next(ctx, req)
		i.g.auditAdmin(ctx, proc, ns, err)
		if r, ok := req.Any().(*rewindv1.CommitRequest); ok {
			i.g.auditCommit(ctx, r, err)
		}
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
			_, _, err := i.g.check(ctx, conn.Spec().Procedure, nil, nil)
			return err
		}
		ctx = auth.WithIdentity(ctx, callerOf(ctx).id)
		sc := &checkedConn{StreamingHandlerConn: conn, g: i.g, pluginNames: i.pluginNames, ctx: ctx}
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
	g           *guard
	pluginNames func(sha string) []string
	ctx         context.Context
	cancel      context.CancelCauseFunc
	received    bool
	done        chan struct{}
	stopped     chan struct{}
}

func (c *checkedConn) Receive(msg any) error {
	if err := c.StreamingHandlerConn.Receive(msg); err != nil {
		return err
	}
	if c.received {
		return nil
	}
	c.received = true
	ctx, ns, err := c.g.check(c.ctx, c.Spec().Procedure, msg, c.pluginNames)
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
// pluginNames is env.pluginNames.
func (g *guard) check(ctx context.Context, proc string, msg any, pluginNames func(sha string) []string) (context.Context, []need, error) {
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
	ns := needsOf(env{st: st, principal: c.id.Principal, allCommitted: g.allCommitted, pluginNames: pluginNames, now: g.cfg.Now()}, msg)
	for _, n := range ns {
		d := st.Decide(c.id.Principal, n.op, n.res)
		if !d.Allowed {
			g.cfg.Audit.Log(auth.Event{Principal: c.id.Principal, Operation: string(n.op), Resource: n.res.String(), Outcome: "denied", RequestID: c.requestID, Procedure: proc, Detail: d.Explain()})
			return ctx, nil, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("permission denied: %s on %s", n.op, n.named()))
		}
	}
	return auth.WithIdentity(ctx, c.id), ns, nil
}

// managing lists the operations whose calls are audited whatever their
// outcome: they change what exists or who may do what (publishes and
// reads are audited only when refused; commits by auditCommit).
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

// checkCommit refuses a commit that would let its caller read history it
// has no right to (docs/security.md, "Every way to move a cursor
// backwards"), before it is proposed:
//
//  1. a commit below the group's committed offset in a partition moves the
//     group back, as a reset does: it needs reset on the group;
//  2. a first commit (the group has no commit in the partition) below the
//     partition's end starts the group in the partition's history, as a
//     start in the past does: it needs replay on the topic, or reset on the
//     group. A member's stream records its start at the end of a partition
//     without a commit (Subscribe), so a read-only member's own commits are
//     never first commits.
//
// Both are checked against the coordinator's replica (this node: commits
// are served where the group is coordinated), whose end is at most the
// leader's. Moving forward, and a first commit at or past the end, need
// only commit (and read, checked by the interceptor).
func (s *Server) checkCommit(ctx context.Context, req *rewindv1.CommitRequest) error {
	if s.guard == nil {
		return nil
	}
	group, topic := groupRes(req.GetGroup()), topicRes(req.GetTopic())
	if s.may(ctx, auth.Reset, group) {
		return nil
	}
	replay := s.may(ctx, auth.Replay, topic)
	for _, o := range req.GetOffsets() {
		p, off := o.GetPartition(), o.GetOffset()
		base, err := s.b.CommitBase(req.GetGroup(), req.GetTopic(), p)
		if err != nil {
			return toConnect(s.log, err)
		}
		var why, lacks string
		audited := need{op: auth.Reset, res: group}
		switch {
		case base.Committed && off < base.Offset:
			lacks, why = fmt.Sprintf("%s on %s", auth.Reset, group), fmt.Sprintf("the commit moves partition %d back from offset %d to %d", p, base.Offset, off)
		case !base.Committed && off < base.End && !replay:
			audited = need{op: auth.Replay, res: topic}
			lacks = fmt.Sprintf("%s on %s or %s on %s", auth.Replay, topic, auth.Reset, group)
			why = fmt.Sprintf("the group's first commit in partition %d, offset %d, is below its end %d: it would start the group in the history", p, off, base.End)
		default:
			continue
		}
		if c := callerOf(ctx); c != nil && c.id != nil {
			s.guard.cfg.Audit.Log(auth.Event{Principal: c.id.Principal, Operation: string(audited.op), Resource: audited.res.String(), Outcome: "denied",
				RequestID: c.requestID, Procedure: rewindv1connect.GroupServiceCommitProcedure, Detail: why})
		}
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("permission denied: %s (%s)", lacks, why))
	}
	return nil
}

// memberStart is where a group member starts the partitions its group
// has no commit in. A caller that may not replay the topic was admitted
// with read either because its start is at the end (latest, or a time not
// yet past) or because its group had a commit in every partition, so that
// its start applied to none (subscribeNeeds). In the second case a
// partition may still have no commit when the member gets it (the group
// was deleted meanwhile, or the topic grew): such a member starts it at
// the end, not at its start in the history.
func (s *Server) memberStart(ctx context.Context, topic string, start cursor.Start) cursor.Start {
	if s.guard == nil || s.may(ctx, auth.Replay, topicRes(topic)) {
		return start
	}
	switch start.Kind {
	case cursor.Latest, cursor.FromToken: // a member with a token is refused
		return start
	case cursor.AtTime:
		if start.Time >= s.guard.cfg.Now().UnixNano() {
			return start
		}
	}
	return cursor.Start{Kind: cursor.Latest, Clamp: start.Clamp}
}

// auditCommit logs a commit that passed the authorization checks, with
// its outcome: one line per call naming the group, the topic, the
// generation and each partition's new offset.
func (g *guard) auditCommit(ctx context.Context, r *rewindv1.CommitRequest, err error) {
	c := callerOf(ctx)
	if c == nil || c.id == nil {
		return
	}
	offs := slices.Clone(r.GetOffsets())
	slices.SortFunc(offs, func(a, b *rewindv1.PartitionOffset) int { return cmp.Compare(a.GetPartition(), b.GetPartition()) })
	var b strings.Builder
	fmt.Fprintf(&b, "topic %s generation %d offsets", echo.Quote(r.GetTopic()), r.GetGeneration())
	for _, o := range offs {
		fmt.Fprintf(&b, " %d=%d", o.GetPartition(), o.GetOffset())
	}
	e := auth.Event{Principal: c.id.Principal, Operation: "Commit", Resource: groupRes(r.GetGroup()).String(), Outcome: "ok",
		RequestID: c.requestID, Procedure: rewindv1connect.GroupServiceCommitProcedure, Detail: b.String()}
	if err != nil {
		e.Outcome = "error"
		e.Detail = connect.CodeOf(err).String() + ": " + e.Detail
	}
	g.cfg.Audit.Log(e)
}
