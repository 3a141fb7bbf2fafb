// Package deploytest checks that what deploy/ tells rewind to do works
// with the real binary.
package deploytest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rewind-io/rewind/tools/release/internal/testbin"
)

// TestChartMembersFindEachOther renders the Helm chart (helm template, the
// pinned helm) and runs its StatefulSet's three members as Kubernetes
// would: each with the chart's arguments, $(NODE_ID) and $(POD_NAME) as
// the downward API sets them for pods <release>-rewind-1..3, the mounted
// files (cluster secret, certificates) made by the test. Two things
// differ, because this machine has neither the cluster's DNS nor a pod
// network: each member listens on a loopback port of its own instead of
// 0.0.0.0:7070, and dials its peers' stable DNS names through those ports
// (serve's hidden --peer-via, the scenario runner's flag). The members
// must elect a metadata leader (every /readyz answers 200), and a topic
// created through member 1 must be listed by member 3. It runs the chart
// with each of its CI values: plaintext (insecure) and TLS with --auth.
func TestChartMembersFindEachOther(t *testing.T) {
	if testing.Short() {
		t.Skip("builds rewind and helm")
	}
	root := testbin.Root(t)
	bin := testbin.Build(t, t.TempDir(), "1.2.3-chart")
	for _, values := range []string{"insecure-values.yaml", "tls-values.yaml"} {
		t.Run(values, func(t *testing.T) { runMembers(t, root, bin, values) })
	}
}

func runMembers(t *testing.T, root, bin, values string) {
	const members = 3
	tmp := t.TempDir()
	args := renderArgs(t, root, values, members)
	secret := filepath.Join(tmp, "cluster.secret")
	if err := os.WriteFile(secret, []byte("a-cluster-secret-of-the-test-0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	var addrs, via []string
	for id := 1; id <= members; id++ {
		a := testbin.FreeLoopback(t)
		addrs = append(addrs, a)
		via = append(via, fmt.Sprintf("%d=%s", id, a))
	}
	scheme, client := "http", (*http.Client)(nil)
	if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--tls-cert=") }) {
		scheme, client = "https", writeCerts(t, filepath.Join(tmp, "tls"), members)
	}
	var procs []*testbin.Process
	var dataDirs []string
	for id := 1; id <= members; id++ {
		env := map[string]string{"NODE_ID": fmt.Sprint(id), "POD_NAME": fmt.Sprintf("rewind-%d", id)}
		data := filepath.Join(tmp, fmt.Sprintf("data-%d", id))
		dataDirs = append(dataDirs, data)
		var a []string
		for _, arg := range args {
			for k, v := range env {
				arg = strings.ReplaceAll(arg, "$("+k+")", v)
			}
			switch {
			case strings.HasPrefix(arg, "--listen="):
				arg = "--listen=" + addrs[id-1]
			case strings.HasPrefix(arg, "--data="):
				arg = "--data=" + data
			case strings.HasPrefix(arg, "--cluster-secret-file="):
				arg = "--cluster-secret-file=" + secret
			}
			// The Secret's mount point becomes the test's directory.
			arg = strings.ReplaceAll(arg, "/etc/rewind/tls/", filepath.Join(tmp, "tls")+"/")
			a = append(a, arg)
		}
		if strings.Contains(strings.Join(a, " "), "$(") {
			t.Fatalf("member %d: arguments %q name a variable the pod does not set", id, a)
		}
		a = append(a, "--peer-via="+strings.Join(via, ","))
		procs = append(procs, testbin.Start(t, bin, a...))
	}
	for i, p := range procs {
		p.WaitReady(t, client, scheme+"://"+addrs[i])
	}
	token := ""
	if slices.Contains(args, "--auth") {
		token = bootstrapToken(t, dataDirs)
	}
	testbin.Post(t, client, token, scheme+"://"+addrs[0]+"/rewind.v1.TopicService/CreateTopic", `{"name":"orders","config":{"partitions":3}}`)
	if body := testbin.Post(t, client, token, scheme+"://"+addrs[2]+"/rewind.v1.TopicService/ListTopics", `{}`); !strings.Contains(body, `"orders"`) {
		t.Errorf("member 3 lists %s; want the topic member 1 created", body)
	}
	for _, p := range procs {
		p.Stop(t)
	}
}

// bootstrapToken is the superuser token a member of a cluster with --auth
// wrote at its first start (DATA/bootstrap-token), waiting for it.
func bootstrapToken(t *testing.T, dataDirs []string) string {
	t.Helper()
	deadline := time.Now().Add(testbin.Hang)
	for {
		for _, d := range dataDirs {
			if b, err := os.ReadFile(filepath.Join(d, "bootstrap-token")); err == nil && len(bytes.TrimSpace(b)) > 0 {
				return string(bytes.TrimSpace(b))
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no member wrote a bootstrap-token within %s", testbin.Hang)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// writeCerts writes what values.yaml says tls.secretName holds: ca.crt
// and node-N.crt, node-N.key for each member, each with the SANs node-N,
// its pod's DNS name and 127.0.0.1 (where the test reaches it); it
// returns a client that trusts the CA.
func writeCerts(t *testing.T, dir string, members int) *http.Client {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rewind test cluster CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	writePEM(t, filepath.Join(dir, "ca.crt"), "CERTIFICATE", caDER)
	for id := 1; id <= members; id++ {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(int64(id + 1)), Subject: pkix.Name{CommonName: fmt.Sprintf("node-%d", id)},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			DNSNames:    []string{fmt.Sprintf("node-%d", id), fmt.Sprintf("rewind-%d.rewind-headless.rewind.svc.cluster.local", id), "rewind.rewind.svc"},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		writePEM(t, filepath.Join(dir, fmt.Sprintf("node-%d.crt", id)), "CERTIFICATE", der)
		writePEM(t, filepath.Join(dir, fmt.Sprintf("node-%d.key", id)), "PRIVATE KEY", keyDER)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

func writePEM(t *testing.T, file, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// renderArgs is the rewind container's arguments in the chart rendered
// with its CI values file values and replicas members, after checking
// what the test relies on.
func renderArgs(t *testing.T, root, values string, replicas int) []string {
	t.Helper()
	chart := filepath.Join(root, "deploy/helm/rewind")
	ctx, cancel := context.WithTimeout(context.Background(), 3*testbin.Hang)
	defer cancel()
	cmd := exec.CommandContext(ctx, testbin.GoCommand(), "tool", "helm", "template", "rewind", chart,
		"--namespace", "rewind", "--kube-version", "1.33.0", "-f", filepath.Join(chart, "ci", values), "--set", fmt.Sprintf("replicas=%d", replicas))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, stderr.String())
	}
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var obj struct {
			Kind string
			Spec struct {
				Replicas int
				Ordinals struct{ Start int }
				Template struct {
					Spec struct {
						Containers []struct {
							Name string
							Args []string
							Env  []struct {
								Name      string
								ValueFrom struct {
									FieldRef struct {
										FieldPath string `yaml:"fieldPath"`
									} `yaml:"fieldRef"`
								} `yaml:"valueFrom"`
							}
						}
					}
				}
			}
		}
		if err := dec.Decode(&obj); err != nil {
			t.Fatalf("no StatefulSet in the chart: %v", err)
		}
		if obj.Kind != "StatefulSet" {
			continue
		}
		if obj.Spec.Replicas != replicas || obj.Spec.Ordinals.Start != 1 || len(obj.Spec.Template.Spec.Containers) != 1 {
			t.Fatalf("StatefulSet: %d replicas from ordinal %d, %d containers; want %d from 1, one container", obj.Spec.Replicas, obj.Spec.Ordinals.Start, len(obj.Spec.Template.Spec.Containers), replicas)
		}
		c := obj.Spec.Template.Spec.Containers[0]
		fields := map[string]string{}
		for _, e := range c.Env {
			fields[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
		if fields["NODE_ID"] != "metadata.labels['apps.kubernetes.io/pod-index']" || fields["POD_NAME"] != "metadata.name" {
			t.Fatalf("env %v; want NODE_ID from the pod-index label and POD_NAME from the pod's name", fields)
		}
		if !slices.Contains(c.Args, "--initial-cluster=1=rewind-1.rewind-headless.rewind.svc.cluster.local:7070,2=rewind-2.rewind-headless.rewind.svc.cluster.local:7070,3=rewind-3.rewind-headless.rewind.svc.cluster.local:7070") {
			t.Fatalf("args %q; want the three pods' names under the headless service as --initial-cluster", c.Args)
		}
		return c.Args
	}
}
