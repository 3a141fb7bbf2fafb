package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/httpedge"
)

// edgeFlags are `rewind serve`'s limits on slow, idle and foreign clients
// and on failed authentications (docs/operations.md, "Slow and idle
// clients"; docs/security.md, "DNS rebinding").
type edgeFlags struct {
	allowedHosts               string
	readHeader, idle, bodyRead time.Duration
	bodyBytes                  string
	maxConns, maxConnsPerIP    int
	failRate                   float64
	failBurst                  int
	failAudit                  time.Duration
}

func (e *edgeFlags) register(f *pflag.FlagSet) {
	f.StringVar(&e.allowedHosts, "allowed-hosts", "", "host names clients may call this node by, besides IP literals, localhost, the hosts of --listen and --advertise and the members' (comma-separated; *.example.com for a domain's names; * turns the Host check off); other Host headers are refused (DNS rebinding protection)")
	f.DurationVar(&e.readHeader, "read-header-timeout", engine.DefaultReadHeaderTimeout, "time a client may take to send a request's headers")
	f.DurationVar(&e.idle, "idle-timeout", engine.DefaultIdleTimeout, "close a keep-alive connection idle this long (HTTP/2: without a stream); negative: never")
	f.DurationVar(&e.bodyRead, "body-read-timeout", engine.DefaultBodyReadTimeout, "time a client may take to send a request's body after its headers (streams are not cut: the raft stream is exempt, a Subscribe's request ends before it streams); negative: no limit")
	f.StringVar(&e.bodyBytes, "max-body-bytes-in-flight", "256MiB", "request body bytes the node holds while they arrive, all requests together; past it requests fail with ResourceExhausted; 0: no limit")
	f.IntVar(&e.maxConns, "max-connections", 0, "connections open at once; more are closed as they are accepted (default 4096, or half the open-file limit if less; negative: no cap)")
	f.IntVar(&e.maxConnsPerIP, "max-connections-per-ip", 0, "connections open at once from one IPv4 address or IPv6 /64 (default a quarter of --max-connections; negative: no cap)")
	f.Float64Var(&e.failRate, "auth-failure-rate", 5, "with --auth: failed authentications a second one source (IP, IPv6 /64; not loopback) may sustain before its calls are refused unchecked (ResourceExhausted, Retry-After); negative: no limit")
	f.IntVar(&e.failBurst, "auth-failure-burst", 20, "with --auth: failed authentications one source may have at once")
	f.DurationVar(&e.failAudit, "auth-failure-audit-interval", 10*time.Second, "with --auth: at most one audit line per source and interval for failed authentications, counting those left out")
}

// http returns the HTTP server's limits for a node listening on listen,
// advertised as advertise, with these members and join addresses: their
// hosts are names clients may use.
func (e *edgeFlags) http(listen, advertise string, members []string) (engine.HTTPConfig, error) {
	bodyBytes, err := parseBytes(e.bodyBytes)
	if err != nil {
		return engine.HTTPConfig{}, fmt.Errorf("--max-body-bytes-in-flight: %w", err)
	}
	inFlight := int64(bodyBytes)
	if inFlight == 0 {
		inFlight = -1 // the flag's 0 is "no limit", the engine's is "default"
	}
	if e.readHeader <= 0 {
		return engine.HTTPConfig{}, fmt.Errorf("--read-header-timeout %v: must be positive", e.readHeader)
	}
	hosts := []string{httpedge.HostOf(listen)}
	if advertise != "" {
		hosts = append(hosts, httpedge.HostOf(advertise))
	}
	for _, m := range members {
		hosts = append(hosts, httpedge.HostOf(m))
	}
	for _, h := range strings.Split(e.allowedHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	return engine.HTTPConfig{
		ReadHeaderTimeout: e.readHeader, IdleTimeout: e.idle, BodyReadTimeout: e.bodyRead,
		MaxBodyBytesInFlight: inFlight, MaxConns: e.maxConns, MaxConnsPerSource: e.maxConnsPerIP,
		AllowedHosts: hosts,
	}, nil
}

// authFailures returns the limits on failed authentications.
func (e *edgeFlags) authFailures() (engine.AuthFailureConfig, error) {
	if e.failBurst < 1 {
		return engine.AuthFailureConfig{}, fmt.Errorf("--auth-failure-burst %d: must be at least 1", e.failBurst)
	}
	if e.failRate == 0 {
		return engine.AuthFailureConfig{}, fmt.Errorf("--auth-failure-rate 0: must be above 0 (or negative: no limit)")
	}
	if e.failAudit <= 0 {
		return engine.AuthFailureConfig{}, fmt.Errorf("--auth-failure-audit-interval %v: must be positive", e.failAudit)
	}
	return engine.AuthFailureConfig{Rate: e.failRate, Burst: e.failBurst, AuditInterval: e.failAudit}, nil
}
