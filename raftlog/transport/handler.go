package transport

import (
	"context"
	"fmt"
	"net/http"

	"connectrpc.com/connect"
	peerv1 "github.com/rewind-io/rewind/internal/gen/rewind/peer/v1"
	"github.com/rewind-io/rewind/internal/gen/rewind/peer/v1/peerv1connect"
	"github.com/rewind-io/rewind/raftlog"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Handler returns the path to mount RaftService on and its handler.
// Inbound streams end when the transport closes, so an HTTP server's
// Shutdown need not wait for peers that keep theirs open. The server must
// speak h2c: over HTTP/1.1 a stream still works but is not ended by Close.
func (t *Transport) Handler() (string, http.Handler) {
	path, h := peerv1connect.NewRaftServiceHandler(receiver{t}, connect.WithReadMaxBytes(MaxFrameBytes))
	return path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Closing an HTTP/2 request body wakes a read blocked on it.
		stop := context.AfterFunc(t.ctx, func() { _ = r.Body.Close() })
		defer stop()
		h.ServeHTTP(w, r)
	})
}

// receiver implements RaftService.
type receiver struct{ t *Transport }

func (rc receiver) Send(ctx context.Context, stream *connect.ClientStream[peerv1.SendRequest]) (*peerv1.SendResponse, error) {
	t := rc.t
	if t.ctx.Err() != nil {
		return nil, connect.NewError(connect.CodeUnavailable, ErrClosed)
	}
	for stream.Receive() {
		req := stream.Msg()
		var err error
		if t.cfg.Authorize != nil {
			err = t.cfg.Authorize(ctx, req.GetFrom())
		}
		var envs []raftlog.Envelope
		if err == nil {
			envs, err = t.accept(req)
		}
		if err != nil {
			t.recv.refused.Add(1)
			t.log.Warn("refused raft stream", "from", req.GetFrom(), "peer-addr", stream.Peer().Addr, "error", err)
			return nil, err
		}
		if len(envs) > 0 {
			t.recv.frames.Add(1)
			t.recv.messages.Add(uint64(len(envs)))
			t.cfg.Deliver(envs)
		}
	}
	if err := stream.Err(); err != nil {
		if t.ctx.Err() != nil {
			return nil, connect.NewError(connect.CodeUnavailable, ErrClosed)
		}
		// The sender went away or restarted; it reports that itself.
		t.log.Debug("raft stream ended", "peer-addr", stream.Peer().Addr, "error", err)
		return nil, err
	}
	return &peerv1.SendResponse{}, nil
}

// accept checks one frame and decodes its messages, all or none.
func (t *Transport) accept(req *peerv1.SendRequest) ([]raftlog.Envelope, error) {
	if req.GetClusterId() != t.cfg.ClusterID || req.GetTo() != t.cfg.NodeID {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf(
			"frame for cluster %d node %d reached cluster %d node %d: check --initial-cluster",
			req.GetClusterId(), req.GetTo(), t.cfg.ClusterID, t.cfg.NodeID))
	}
	from := req.GetFrom()
	if from == 0 || from == t.cfg.NodeID {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf(
			"frame from node %d reached node %d of cluster %d: two nodes share an id, or the sender has none",
			from, t.cfg.NodeID, t.cfg.ClusterID))
	}
	if t.cfg.Allowed != nil && !t.cfg.Allowed(from) {
		return nil, connect.NewError(connect.CodePermissionDenied, fmt.Errorf(
			"node %d is not a member of cluster %d", from, t.cfg.ClusterID))
	}
	if len(req.GetMessages()) == 0 {
		return nil, nil
	}
	envs := make([]raftlog.Envelope, 0, len(req.GetMessages()))
	for i, e := range req.GetMessages() {
		m := new(pb.Message)
		if err := proto.Unmarshal(e.GetMessage(), m); err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("message %d of group %d: %w", i, e.GetGroup(), err))
		}
		if e.GetGroup() == 0 || m.GetFrom() != from || m.GetTo() != t.cfg.NodeID {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(
				"message %d of group %d is from %d to %d in a frame from %d to %d", i, e.GetGroup(), m.GetFrom(), m.GetTo(), from, t.cfg.NodeID))
		}
		envs = append(envs, raftlog.Envelope{Group: e.GetGroup(), Msg: m})
	}
	return envs, nil
}
