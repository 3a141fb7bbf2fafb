package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	"github.com/rewind-io/rewind/engine/internal/broker"
	"github.com/rewind-io/rewind/internal/identity"
)

// Health has three questions, answered apart so that an orchestrator can
// act on each:
//
//   - healthy (GET /healthz) and live (GET /livez): the process runs and
//     its HTTP server answers. Always 200 with "ok"; a node that cannot
//     answer is restarted by the probe timing out. /healthz is the name
//     load balancers and most tools ask for; /livez the Kubernetes one.
//   - ready (GET /readyz, and gRPC health for "" and every service): the
//     node can serve (broker.Ready): its store is recovered and has not
//     failed, it is not draining, and the metadata group has a known
//     leader. 503 / NOT_SERVING otherwise, the body saying why. A node
//     whose store failed also exits (engine.Node.Failed), so it is never
//     left half alive; the probes tell load balancers the moment it
//     happens.
//
// Every probe answer names who answered: the headers Rewind-Node-Id (the
// node's id, decimal) and Rewind-Cluster-Id (its cluster's id, 16 hex
// digits; internal/identity), whatever the status. A load balancer's
// probe log then says which node it reached, and the scenario runner
// tells its own node from another process that took the node's port. A
// node running alone is node 1 (unless --node-id says otherwise) of
// cluster 0000000000000000. The probes stay open (no authentication): the
// ids are no secret, every member's peers know them.
//
// A disk below --min-free-disk is not "not ready": reads go on, and the
// node's partitions hand their leadership to other replicas (broker).

// watchPoll is how often a gRPC health watch re-checks readiness for the
// changes no channel announces (the metadata group gaining or losing its
// leader); failures and draining are announced at once.
const watchPoll = 500 * time.Millisecond

// healthChecker answers gRPC health checks from the broker's readiness.
type healthChecker struct {
	b        *broker.Broker
	services map[string]bool
}

// statusServiceUnknown is the gRPC health protocol's SERVICE_UNKNOWN,
// which a Watch of an unknown service streams (grpchealth has no name for
// it).
const statusServiceUnknown grpchealth.Status = 3

// Check implements grpchealth.Checker: an unknown service is NotFound for
// Check, and SERVICE_UNKNOWN on a Watch's stream, as the gRPC health
// protocol says (a watcher waits for the service to appear; a check does
// not).
func (h *healthChecker) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	if req.Service != "" && !h.services[req.Service] {
		if ci, ok := connect.CallInfoForHandlerContext(ctx); ok && strings.HasSuffix(ci.Spec().Procedure, "/Watch") {
			return &grpchealth.CheckResponse{Status: statusServiceUnknown}, nil
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("unknown service %s", req.Service))
	}
	if h.b.Ready() != nil {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}

// Watch implements grpchealth.Watcher: the status is re-checked when the
// store fails or the node drains (at once; it never serves again after
// either) and every watchPoll (the metadata leader may come and go);
// grpchealth sends only changes.
func (h *healthChecker) Watch(ctx context.Context, req *grpchealth.CheckRequest, onChange func()) (func(), error) {
	if _, err := h.Check(ctx, req); err != nil {
		return nil, err
	}
	if req.Service != "" && !h.services[req.Service] {
		// SERVICE_UNKNOWN for good: the services are fixed at start.
		return func() {}, nil
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(watchPoll)
		defer t.Stop()
		for {
			select {
			case <-h.b.Failed():
			case <-h.b.Draining():
			case <-t.C:
				onChange()
				continue
			case <-stop:
				return
			}
			onChange()
			return
		}
	}()
	return func() { close(stop); <-done }, nil
}

// livez answers /livez and /healthz.
func (s *Server) livez(w http.ResponseWriter, _ *http.Request) {
	s.probeHeaders(w)
	fmt.Fprintln(w, "ok")
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	s.probeHeaders(w)
	if err := s.b.Ready(); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, err)
		return
	}
	fmt.Fprintln(w, "ok")
}

// probeHeaders sets a probe answer's content type and the headers naming
// the node.
func (s *Server) probeHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	identity.SetHeaders(w.Header(), s.b.NodeID(), s.b.ClusterID())
}
