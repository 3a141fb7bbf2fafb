// Package deploytest checks that what deploy/ tells rewind to do works
// with the real binary.
package deploytest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/rewind-io/rewind/tools/release/internal/testbin"
)

// TestChartMembersFindEachOther renders the Helm chart (helm template, the
// pinned helm) and runs its StatefulSet's three members as Kubernetes
// would: each with the chart's arguments, $(NODE_ID) and $(POD_NAME) as
// the downward API sets them for pods <release>-rewind-1..3. Two things
// differ, because this machine has neither the cluster's DNS nor a pod
// network: each member listens on a loopback port of its own instead of
// 0.0.0.0:7070, and dials its peers' stable DNS names through those
// ports (serve's hidden --peer-via, the scenario runner's flag). The
// members must elect a metadata leader (every /readyz answers 200), and a
// topic created through member 1 must be listed by member 3.
func TestChartMembersFindEachOther(t *testing.T) {
	if testing.Short() {
		t.Skip("builds rewind and helm")
	}
	root := testbin.Root(t)
	tmp := t.TempDir()
	args := renderArgs(t, root)

	bin := testbin.Build(t, tmp, "1.2.3-chart")
	secret := filepath.Join(tmp, "cluster.secret")
	if err := os.WriteFile(secret, []byte("a-cluster-secret-of-the-test-0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	const members = 3
	var addrs, via []string
	for id := 1; id <= members; id++ {
		a := testbin.FreeLoopback(t)
		addrs = append(addrs, a)
		via = append(via, fmt.Sprintf("%d=%s", id, a))
	}
	var procs []*testbin.Process
	for id := 1; id <= members; id++ {
		env := map[string]string{"NODE_ID": fmt.Sprint(id), "POD_NAME": fmt.Sprintf("rewind-%d", id)}
		var a []string
		for _, arg := range args {
			for k, v := range env {
				arg = strings.ReplaceAll(arg, "$("+k+")", v)
			}
			switch {
			case strings.HasPrefix(arg, "--listen="):
				arg = "--listen=" + addrs[id-1]
			case strings.HasPrefix(arg, "--data="):
				arg = "--data=" + filepath.Join(tmp, fmt.Sprintf("data-%d", id))
			case strings.HasPrefix(arg, "--cluster-secret-file="):
				arg = "--cluster-secret-file=" + secret
			}
			a = append(a, arg)
		}
		if strings.Contains(strings.Join(a, " "), "$(") {
			t.Fatalf("member %d: arguments %q name a variable the pod does not set", id, a)
		}
		a = append(a, "--peer-via="+strings.Join(via, ","))
		procs = append(procs, testbin.Start(t, bin, a...))
	}
	for i, p := range procs {
		p.WaitReady(t, "http://"+addrs[i])
	}
	testbin.Post(t, "http://"+addrs[0]+"/rewind.v1.TopicService/CreateTopic", `{"name":"orders","config":{"partitions":3}}`)
	if body := testbin.Post(t, "http://"+addrs[2]+"/rewind.v1.TopicService/ListTopics", `{}`); !strings.Contains(body, `"orders"`) {
		t.Errorf("member 3 lists %s; want the topic member 1 created", body)
	}
	for _, p := range procs {
		p.Stop(t)
	}
}

// renderArgs is the rewind container's arguments in the chart rendered
// with its CI values for a trusted network (ci/insecure-values.yaml),
// after checking what the test relies on.
func renderArgs(t *testing.T, root string) []string {
	t.Helper()
	chart := filepath.Join(root, "deploy/helm/rewind")
	ctx, cancel := context.WithTimeout(context.Background(), 3*testbin.Hang)
	defer cancel()
	cmd := exec.CommandContext(ctx, testbin.GoCommand(), "tool", "helm", "template", "rewind", chart,
		"--namespace", "rewind", "--kube-version", "1.33.0", "-f", filepath.Join(chart, "ci/insecure-values.yaml"))
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
		if obj.Spec.Replicas != 3 || obj.Spec.Ordinals.Start != 1 || len(obj.Spec.Template.Spec.Containers) != 1 {
			t.Fatalf("StatefulSet: %d replicas from ordinal %d, %d containers; want 3 from 1, one container", obj.Spec.Replicas, obj.Spec.Ordinals.Start, len(obj.Spec.Template.Spec.Containers))
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
