package api

import (
	"context"
	"fmt"
	"net/http"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	"github.com/rewind-io/rewind/engine/internal/broker"
)

// Health has two questions, answered apart so that an orchestrator can act
// on each:
//
//   - live (GET /livez): the process runs and answers HTTP. Always 200; a
//     node that cannot answer is restarted by the probe timing out.
//   - ready (GET /readyz, and gRPC health for "" and every service): the
//     node can serve. 503 / NOT_SERVING once its store failed (a WAL write
//     or fsync failed: disk full, gone, read-only), and while it shuts
//     down. A node whose store failed also exits (engine.Node.Failed), so
//     it is never left half alive; the probes tell load balancers the
//     moment it happens.
//
// A disk below --min-free-disk is not "not ready": reads go on, and the
// node's partitions hand their leadership to other replicas (broker).

// healthChecker answers gRPC health checks from the broker's readiness.
type healthChecker struct {
	b        *broker.Broker
	services map[string]bool
}

// Check implements grpchealth.Checker.
func (h *healthChecker) Check(_ context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	if req.Service != "" && !h.services[req.Service] {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("unknown service %s", req.Service))
	}
	if h.b.Ready() != nil {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}

// Watch implements grpchealth.Watcher: the status only ever changes from
// SERVING to NOT_SERVING, when the store fails or the node drains.
func (h *healthChecker) Watch(ctx context.Context, req *grpchealth.CheckRequest, onChange func()) (func(), error) {
	if _, err := h.Check(ctx, req); err != nil {
		return nil, err
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-h.b.Failed():
		case <-h.b.Draining():
		case <-stop:
			return
		}
		onChange()
	}()
	return func() { close(stop); <-done }, nil
}

func livez(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := s.b.Ready(); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, err)
		return
	}
	fmt.Fprintln(w, "ok")
}
