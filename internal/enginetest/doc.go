// Package enginetest is the one harness that starts Rewind nodes for
// tests: in this process or as `rewind serve` processes, alone or as a
// cluster. Every test that needs a node gets it here; a test that needs
// something the harness cannot do grows the harness with an option, not
// a copy of it beside the test (nats-server's tests hold 69 "start a
// server" helpers; this package exists so ours hold one).
//
// # What it offers
//
//   - StartNode: an engine.Node served in this process on a loopback
//     port by engine.Node.Serve, the production serve path (TLS when the
//     configuration asks, then the URL is https://). Config in; URL,
//     node and Stop out; the test's end stops it. TryStartNode returns
//     engine.Open's error instead of failing, for a start that must be
//     refused.
//   - StartCluster: n members in this process on ports reserved before
//     any opens, a mutate hook per member (security, faulty FS or
//     dialer, limits), Stop and Restart of one member on the same port
//     with the same data. PrepareCluster then Start brings members up
//     one by one.
//   - ServeHandler: a fake node, any handler served with the HTTP server
//     Rewind serves with (engine.HTTPConfig.Server).
//   - Binary: the rewind command built once per source tree and shared
//     by every test binary running at once, of any package (a build
//     cache under os.TempDir, a lock file, build then rename).
//   - StartProcess: `rewind serve` as a child process on a free port,
//     waited for until its /livez names it (internal/identity), then for
//     the test's own idea of ready. PrepareProcessCluster gives the
//     members of a process cluster their addresses, directories and
//     --initial-cluster.
//   - FreeAddr and Listen: loopback ports; Node.BootstrapToken (the
//     superuser token of a node with auth on); Buffer (an audit log or
//     log output the test reads while the node writes).
//
// Options (WithListener, WithAddr, WithHTTP, WithHandler,
// WithServingAfterFailure, WithServeConfig) change how a node or handler
// is served; the
// engine.Config says what the node is.
//
// # Using it
//
//  1. Build the configuration the test is about; leave Dir and Logger
//     zero unless they matter (a temporary directory, no log).
//  2. Start: n := enginetest.StartNode(t, cfg), then client.New(n.URL).
//     For a cluster, c := enginetest.StartCluster(t, 3, mutate) and
//     c.URLs(); a member is c.Node(id).
//  3. Wait for what the test needs (a topic's leaders, the auth
//     bootstrap) with the test's own polling: the harness returns once
//     the port serves, not once the node has elected anything.
//  4. Stop early only when stopping is the test's subject (c.Stop(id),
//     c.Restart(id), n.Stop()); the test's end stops everything, members
//     without reporting their close errors (faults are what cluster
//     tests make), a lone node reporting them.
//  5. Process tests: bin := enginetest.Binary(t) (or with tags), then
//     enginetest.StartProcess(t, enginetest.ProcessConfig{Bin: bin,
//     Args: ...}); Stop checks the graceful shutdown (SIGTERM, exit 0),
//     Kill is a crash.
//
// The engine package's internal tests (package engine) cannot import
// this package (it imports the engine); its external tests
// (engine_test) do. The scenario runner starts its own processes: the
// runner is the product's process manager, and its tests test it; they
// take only the binary from here.
package enginetest
