package engine_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/go-hclog"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/internal/enginetest"
	peerv1 "github.com/rewind-io/rewind/internal/gen/rewind/peer/v1"
	"github.com/rewind-io/rewind/internal/gen/rewind/peer/v1/peerv1connect"
	"github.com/rewind-io/rewind/internal/peerauth"
	"github.com/rewind-io/rewind/internal/testcerts"
	"github.com/rewind-io/rewind/sdk/client"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/gen/rewind/v1/rewindv1connect"
)

var testSecret = []byte("test cluster secret, 32 bytes ok")

// secured is a 3-node cluster with transport security on, and what an
// attacker or a member needs to talk to it.
type secured struct {
	urls    []string
	addrs   []string
	cluster uint64
	ca      *testcerts.CA
	// certs are the members' certificates by node id - 1.
	certs []*testcerts.Leaf
	tls   bool
}

// startSecured starts 3 members with a cluster secret and, with peerTLS,
// TLS on the port and peer mutual TLS (each member's certificate: SANs
// node-<id> and 127.0.0.1, serving clients and peers alike).
func startSecured(t *testing.T, peerTLS bool) *secured {
	t.Helper()
	dir := t.TempDir()
	s := &secured{ca: testcerts.NewCA(t, "cluster CA"), tls: peerTLS}
	caFile := s.ca.Write(t, dir, "ca")
	for id := 1; id <= 3; id++ {
		s.certs = append(s.certs, s.ca.Issue(t, fmt.Sprintf("n%d", id), fmt.Sprintf("node-%d", id), "127.0.0.1"))
	}
	urls := enginetest.StartCluster(t, 3, func(id uint64, c *engine.Config) {
		c.Security.ClusterSecret = testSecret
		s.cluster = c.Cluster.ID
		if peerTLS {
			f := s.certs[id-1].Write(t, dir, fmt.Sprintf("n%d", id))
			c.Security.TLSCertFile, c.Security.TLSKeyFile = f.Cert, f.Key
			c.Security.PeerTLSCertFile, c.Security.PeerTLSKeyFile, c.Security.PeerTLSCAFile = f.Cert, f.Key, caFile
		}
	}).URLs()
	s.urls = urls
	for _, u := range urls {
		s.addrs = append(s.addrs, u[strings.Index(u, "://")+3:])
	}
	return s
}

// client is a client of the cluster (TLS trusting its CA when on).
func (s *secured) client(nodes ...int) *client.Client {
	var us []string
	for _, n := range nodes {
		us = append(us, s.urls[n-1])
	}
	if !s.tls {
		return client.New(strings.Join(us, ","))
	}
	return client.New(strings.Join(us, ","), client.WithTLS(&tls.Config{RootCAs: s.ca.Pool()}))
}

// peerHTTP is an HTTP/2 client that reaches member to: without TLS (h2c),
// or with TLS as a client (serverName "") or as a member (serverName
// node-<id>) presenting cert (nil: none).
func (s *secured) peerHTTP(serverName string, cert *testcerts.Leaf, t *testing.T) *http.Client {
	p := new(http.Protocols)
	if !s.tls {
		p.SetUnencryptedHTTP2(true)
		return &http.Client{Transport: &http.Transport{Protocols: p}}
	}
	p.SetHTTP2(true)
	cfg := &tls.Config{RootCAs: s.ca.Pool(), ServerName: serverName}
	if cert != nil {
		pair := cert.TLS(t)
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	}
	return &http.Client{Transport: &http.Transport{Protocols: p, TLSClientConfig: cfg, ForceAttemptHTTP2: true}}
}

func (s *secured) base(node int) string { return s.urls[node-1] }

// authenticator signs a request from member from to member to.
func authenticator(secret []byte, cluster, from, to uint64) string {
	return peerauth.Sign(secret, cluster, from, to, time.Now()).String()
}

// sendRaft opens a raft stream to node 1 with hc and header (the peer
// authenticator, or ""), and sends one frame claiming to come from
// "from", carrying a heartbeat of group at term. It returns the stream's
// outcome.
func sendRaft(ctx context.Context, hc *http.Client, base string, cluster, from uint64, header string, group, term uint64) error {
	rc := peerv1connect.NewRaftServiceClient(hc, base)
	if header != "" {
		var ci connect.CallInfo
		ctx, ci = connect.NewClientContext(ctx)
		ci.RequestHeader().Set(peerauth.Header, header)
	}
	cs, err := rc.Send(ctx)
	if err != nil {
		return err
	}
	m := &pb.Message{Type: pb.MsgHeartbeat.Enum(), From: proto.Uint64(from), To: proto.Uint64(1), Term: proto.Uint64(term)}
	b, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	if err := cs.Send(&peerv1.SendRequest{ClusterId: cluster, From: from, To: 1,
		Messages: []*peerv1.RaftEnvelope{{Group: group, Message: b}}}); err != nil {
		_, cerr := cs.CloseAndReceive()
		if cerr != nil {
			return cerr
		}
		return err
	}
	_, err = cs.CloseAndReceive()
	return err
}

// settle creates topic t (one partition on every member), publishes one
// record through each member and returns the partition's raft group.
func (s *secured) settle(t *testing.T) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.client(1, 2, 3)
	for {
		_, err := c.CreateTopic(ctx, "t", client.WithPartitions(1), client.WithReplicationFactor(3))
		if err == nil || connect.CodeOf(err) == connect.CodeAlreadyExists {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create topic: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for n := 1; n <= 3; n++ {
		for {
			_, err := s.client(n).Publish(ctx, "t", client.Message{Value: []byte(fmt.Sprintf("via %d", n))})
			if err == nil {
				break
			}
			// A member learns of the topic when it applies the metadata
			// entry, a moment after the create returns.
			if connect.CodeOf(err) != connect.CodeNotFound || ctx.Err() != nil {
				t.Fatalf("publish through node %d: %v", n, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	st := s.status(t, 1)
	for _, p := range st.GetPartitions() {
		if p.GetTopic() == "t" {
			return p.GetGroup()
		}
	}
	t.Fatal("node 1 does not know topic t")
	return 0
}

func (s *secured) status(t *testing.T, node int) *rewindv1.GetClusterStatusResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := s.client(node).ClusterStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// term is node 1's raft term of group.
func (s *secured) term(t *testing.T, group uint64) uint64 {
	t.Helper()
	for _, p := range s.status(t, 1).GetPartitions() {
		if p.GetGroup() == group {
			return p.GetTerm()
		}
	}
	t.Fatalf("node 1 has no group %d", group)
	return 0
}

// replayAll reads topic t from the earliest record to the end on node.
func (s *secured) replayAll(t *testing.T, node int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := s.client(node).Subscribe(ctx, "t", client.From(client.Earliest()), client.Until(client.End()))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var got []string
	for sub.Next() {
		if r, ok := sub.Event().(*client.Records); ok {
			for _, rec := range r.Records {
				got = append(got, string(rec.Value))
			}
		}
	}
	if err := sub.Err(); err != nil {
		t.Fatalf("replay on node %d: %v", node, err)
	}
	return got
}

func TestPeerMutualTLSCluster(t *testing.T) {
	s := startSecured(t, true)
	testSecuredCluster(t, s)
}

func TestClusterSecretWithoutTLS(t *testing.T) {
	s := startSecured(t, false)
	testSecuredCluster(t, s)
}

// testSecuredCluster: the cluster forms and replicates (every member
// forwards a publish, every member replays all of it, through its peers
// when it does not lead); then every way in for a process that is not a
// member, or a member speaking as another, is refused before anything is
// stepped or stored: node 1's term stays below the injected one, its
// members and records unchanged. Last, a member's genuine frame with the
// same message is stepped, which proves the refusals were the checks'.
func testSecuredCluster(t *testing.T, s *secured) {
	group := s.settle(t)
	for n := 1; n <= 3; n++ {
		if got := s.replayAll(t, n); len(got) != 3 {
			t.Fatalf("node %d replays %q, want the 3 records", n, got)
		}
	}
	before := s.term(t, group)
	inject := before + 1000
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	member := func(id uint64) string { return fmt.Sprintf("node-%d", id) }
	asClient := s.peerHTTP("", nil, t)
	as2 := s.peerHTTP(member(1), s.certs[1], t)
	wrongSecret := []byte("not the cluster secret, 32 bytes")
	other := testcerts.NewCA(t, "other CA").Issue(t, "n2", "node-2", "127.0.0.1")

	type attack struct {
		name string
		run  func() error
		want connect.Code
	}
	attacks := []attack{
		{"raft frame without credentials", func() error {
			return sendRaft(ctx, asClient, s.base(1), s.cluster, 2, "", group, inject)
		}, connect.CodeUnauthenticated},
		{"raft frame with the wrong cluster secret", func() error {
			return sendRaft(ctx, asClient, s.base(1), s.cluster, 2, authenticator(wrongSecret, s.cluster, 2, 1), group, inject)
		}, connect.CodeUnauthenticated},
		{"raft frame with an authenticator for another node", func() error {
			return sendRaft(ctx, asClient, s.base(1), s.cluster, 2, authenticator(testSecret, s.cluster, 2, 3), group, inject)
		}, connect.CodeUnauthenticated},
		{"peer read without credentials", func() error {
			pc := peerv1connect.NewPartitionServiceClient(asClient, s.base(1))
			_, err := pc.Fetch(ctx, &peerv1.FetchRequest{Partition: &peerv1.PartitionRef{ClusterId: s.cluster, TopicId: 1}, MaxBytes: 1 << 20})
			return err
		}, connect.CodeUnauthenticated},
		{"publish marked as forwarded, without credentials", func() error {
			pc := rewindv1connect.NewPublishServiceClient(asClient, s.base(1))
			ctx, ci := connect.NewClientContext(ctx)
			ci.RequestHeader().Set("Rewind-Forwarded-By", "2")
			_, err := pc.Publish(ctx, &rewindv1.PublishRequest{Topic: "t", Records: []*rewindv1.PublishRecord{{Value: []byte("forged")}}})
			return err
		}, connect.CodePermissionDenied}, // the public port never takes a hop header
		{"publish on the member path, without credentials", func() error {
			pc := rewindv1connect.NewPublishServiceClient(asClient, s.base(1)+"/rewind.member")
			ctx, ci := connect.NewClientContext(ctx)
			ci.RequestHeader().Set("Rewind-Forwarded-By", "2")
			_, err := pc.Publish(ctx, &rewindv1.PublishRequest{Topic: "t", Records: []*rewindv1.PublishRecord{{Value: []byte("forged")}}})
			return err
		}, connect.CodeUnauthenticated},
		{"join without credentials", func() error {
			cc := rewindv1connect.NewClusterServiceClient(asClient, s.base(1))
			_, err := cc.AddNode(ctx, &rewindv1.AddNodeRequest{Node: 9, Address: "127.0.0.1:1"})
			return err
		}, connect.CodeUnauthenticated},
	}
	if s.tls {
		attacks = append(attacks,
			attack{"node 2's certificate sending as node 3", func() error {
				return sendRaft(ctx, as2, s.base(1), s.cluster, 3, authenticator(testSecret, s.cluster, 3, 1), group, inject)
			}, connect.CodeUnauthenticated}, // the authenticator is node 3's, the certificate node 2's
			attack{"node 2's certificate and authenticator sending frames as node 3", func() error {
				return sendRaft(ctx, as2, s.base(1), s.cluster, 3, authenticator(testSecret, s.cluster, 2, 1), group, inject)
			}, connect.CodePermissionDenied},
			attack{"node 2's certificate marking a publish as node 3's", func() error {
				pc := rewindv1connect.NewPublishServiceClient(as2, s.base(1))
				ctx, ci := connect.NewClientContext(ctx)
				ci.RequestHeader().Set("Rewind-Relayed-By", "3")
				ci.RequestHeader().Set(peerauth.Header, authenticator(testSecret, s.cluster, 2, 1))
				_, err := pc.Publish(ctx, &rewindv1.PublishRequest{Topic: "t", Records: []*rewindv1.PublishRecord{{Value: []byte("forged")}}})
				return err
			}, connect.CodePermissionDenied},
			attack{"the right secret over a client connection (no member certificate)", func() error {
				return sendRaft(ctx, asClient, s.base(1), s.cluster, 2, authenticator(testSecret, s.cluster, 2, 1), group, inject)
			}, connect.CodeUnauthenticated},
		)
	}
	for _, a := range attacks {
		err := a.run()
		if connect.CodeOf(err) != a.want {
			t.Errorf("%s: %v, want %s", a.name, err, a.want)
		}
	}
	if s.tls {
		// Handshakes that fail: a member dial without a certificate, and
		// with a certificate of another CA naming node 2. The frame never
		// travels; with TLS 1.3 the server checks the certificate after the
		// client's handshake ends, so the client's call may fail as a
		// broken connection, and a read shows the server's alert.
		for name, c := range map[string]struct {
			cert *testcerts.Leaf
			want string
		}{
			"no certificate":           {nil, "certificate required"},
			"another CA's certificate": {other, "unknown certificate authority"},
		} {
			hc := s.peerHTTP(member(1), c.cert, t)
			if err := sendRaft(ctx, hc, s.base(1), s.cluster, 2, authenticator(testSecret, s.cluster, 2, 1), group, inject); err == nil {
				t.Errorf("member dial with %s: the frame was accepted", name)
			}
			cfg := hc.Transport.(*http.Transport).TLSClientConfig.Clone()
			cfg.NextProtos = []string{"h2"}
			conn, err := tls.Dial("tcp", s.addrs[0], cfg)
			if err == nil {
				_, err = conn.Read(make([]byte, 1))
				conn.Close()
			}
			if err == nil || !strings.Contains(err.Error(), "remote error: tls: "+c.want) {
				t.Errorf("member dial with %s: %v, want the TLS alert %q", name, err, c.want)
			}
		}
	}
	// Nothing took effect.
	if got := s.term(t, group); got >= inject {
		t.Fatalf("node 1's term of group %d is %d: an injected message was stepped", group, got)
	}
	if n := len(s.status(t, 1).GetNodes()); n != 3 {
		t.Fatalf("node 1 has %d members after the attacks, want 3", n)
	}
	if got := s.replayAll(t, 1); len(got) != 3 {
		t.Fatalf("node 1 replays %q after the attacks, want the 3 records", got)
	}
	// Control: node 2's own credentials get the same message stepped.
	hc := asClient
	if s.tls {
		hc = as2
	}
	if err := sendRaft(ctx, hc, s.base(1), s.cluster, 2, authenticator(testSecret, s.cluster, 2, 1), group, inject); err != nil {
		t.Fatalf("node 2's genuine frame: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.term(t, group) < inject {
		if time.Now().After(deadline) {
			t.Fatal("node 2's genuine frame was not stepped: the refusals above prove nothing")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestJoinASecuredCluster: a node with the cluster secret (and, with TLS,
// a certificate from the cluster CA) joins; one with the wrong secret is
// refused at once with Unauthenticated.
func TestJoinASecuredCluster(t *testing.T) {
	for _, peerTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", peerTLS), func(t *testing.T) {
			s := startSecured(t, peerTLS)
			s.settle(t)
			dir := t.TempDir()
			var joinWith func(id uint64, secret []byte, ca *testcerts.CA) error
			join := func(id uint64, secret []byte) error { return joinWith(id, secret, s.ca) }
			joinWith = func(id uint64, secret []byte, ca *testcerts.CA) error {
				ln := enginetest.Listen(t)
				cfg := engine.Config{
					Dir: filepath.Join(dir, fmt.Sprint(id)), NodeID: id, Logger: hclog.NewNullLogger(),
					Join:     engine.JoinConfig{Through: []string{s.addrs[0]}, Advertise: ln.Addr().String()},
					Security: engine.SecurityConfig{ClusterSecret: secret}, Cluster: engine.ClusterConfig{TickInterval: 20 * time.Millisecond},
					Storage: engine.StorageConfig{StoreCacheBytes: 8 << 20, TailCacheBytes: 8 << 20},
				}
				if peerTLS {
					f := ca.Issue(t, fmt.Sprintf("n%d", id), fmt.Sprintf("node-%d", id), "127.0.0.1").Write(t, dir, fmt.Sprintf("n%d", id))
					cfg.Security.TLSCertFile, cfg.Security.TLSKeyFile = f.Cert, f.Key
					cfg.Security.PeerTLSCertFile, cfg.Security.PeerTLSKeyFile, cfg.Security.PeerTLSCAFile = f.Cert, f.Key, s.ca.Write(t, dir, "ca")
				}
				_, err := enginetest.TryStartNode(t, cfg, enginetest.WithListener(ln))
				return err
			}
			start := time.Now()
			err := join(5, []byte("not the cluster secret, 32 bytes"))
			if connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Fatalf("join with the wrong secret: %v, want Unauthenticated", err)
			}
			t.Logf("refused after %s: %v", time.Since(start).Round(time.Millisecond), err)
			if peerTLS {
				// The right secret, but a certificate of another CA: the
				// handshake fails, and the node stops at once.
				err := joinWith(6, testSecret, testcerts.NewCA(t, "another CA"))
				if err == nil || !strings.Contains(err.Error(), "tls") {
					t.Fatalf("join with another CA's certificate: %v, want a TLS refusal", err)
				}
				t.Logf("another CA: %v", err)
			}
			if err := join(4, testSecret); err != nil {
				t.Fatalf("join with the secret: %v", err)
			}
			if n := len(s.status(t, 1).GetNodes()); n != 4 {
				t.Fatalf("%d members after the join, want 4", n)
			}
		})
	}
}
