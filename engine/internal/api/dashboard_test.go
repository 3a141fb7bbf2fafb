package api

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.yaml.in/yaml/v3"
)

// families are the names of every family a node's /metrics can expose,
// read from the collectors' descriptions: those that appear only with
// --tier or --auth, or once something happened, too. (engine's
// TestMetricsOfARealNode checks the dashboard against a real scrape; this
// covers the families that scrape cannot show.)
func families(t *testing.T) map[string]bool {
	t.Helper()
	ch := make(chan *prometheus.Desc, 1024)
	cs := []prometheus.Collector{&collector{}, edgeCollector{}, collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
	cs = append(cs, newRPCMetrics().collectors()...)
	for _, c := range cs {
		c.Describe(ch)
	}
	close(ch)
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	out := map[string]bool{}
	for d := range ch {
		if m := fq.FindStringSubmatch(d.String()); m != nil {
			out[m[1]] = true
		}
	}
	if !out["rewind_ready"] || !out["rewind_rpc_errors_total"] || !out["go_goroutines"] {
		t.Fatalf("the descriptions lack families every node has: %d names", len(out))
	}
	return out
}

// queried are the metric names a PromQL expression queries, each as its
// family's name (a histogram's _bucket, _sum and _count series are its
// family's).
func queried(fams map[string]bool, expr string) []string {
	var out []string
	for _, n := range regexp.MustCompile(`\b(?:rewind|go|process)_[a-z0-9_]+\b`).FindAllString(expr, -1) {
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(n, s); ok && !fams[n] && fams[b] {
				n = b
			}
		}
		out = append(out, n)
	}
	return out
}

// TestDashboardMetricsAreDescribed: every metric docs/grafana-dashboard.json
// queries is a family a node exposes; every panel is scoped by the
// $instance variable, and every topic-labelled series by $topic; the
// tier, quota and RPC panels exist.
func TestDashboardMetricsAreDescribed(t *testing.T) {
	fams := families(t)
	raw, err := os.ReadFile("../../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Templating struct {
			List []struct{ Name, Type string } `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	var vars []string
	for _, v := range dash.Templating.List {
		vars = append(vars, v.Name)
	}
	for _, want := range []string{"datasource", "instance", "topic"} {
		if !slices.Contains(vars, want) {
			t.Errorf("the dashboard has no $%s variable (has %v)", want, vars)
		}
	}
	topicLabelled := regexp.MustCompile(`^rewind_(published_(records|bytes)_total|delivered_(records|bytes)_total|group_lag_(records|seconds)|partition_.*)$`)
	seen := map[string]bool{}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, name := range queried(fams, tg.Expr) {
				seen[name] = true
				if !fams[name] {
					t.Errorf("panel %q queries %s, which no node exposes", p.Title, name)
				}
				sel := regexp.MustCompile(`\b`+name+`(_bucket|_sum|_count)?\{([^}]*)\}`).FindAllStringSubmatch(tg.Expr, -1)
				if len(sel) == 0 {
					t.Errorf("panel %q: %s has no selector: not scoped by $instance", p.Title, name)
				}
				for _, m := range sel {
					if !strings.Contains(m[2], `instance=~"$instance"`) {
						t.Errorf("panel %q: %s{%s} is not scoped by $instance", p.Title, name, m[2])
					}
					if topicLabelled.MatchString(name) && !strings.Contains(m[2], `topic=~"$topic"`) {
						t.Errorf("panel %q: %s{%s} is not scoped by $topic", p.Title, name, m[2])
					}
				}
			}
		}
	}
	for _, want := range []string{"rewind_partition_tiered_bytes", "rewind_partition_tier_upload_lag_seconds", "rewind_tier_cache_hits_total",
		"rewind_quota_refused_total", "rewind_quota_topics_limit", "rewind_rpc_duration_seconds", "rewind_rpc_errors_total"} {
		if !seen[want] {
			t.Errorf("the dashboard has no panel on %s", want)
		}
	}
}

// TestAlertRules reads docs/prometheus-alerts.yml: every rule is an alert
// with an expression over families a node exposes, a "for" that parses, a
// severity label of critical, warning or info, and summary and
// description annotations. With promtool on PATH it also runs `promtool
// check rules`, Prometheus' own check of the file.
func TestAlertRules(t *testing.T) {
	fams := families(t)
	const file = "../../../docs/prometheus-alerts.yml"
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Record      string            `yaml:"record"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true) // a misspelt key is an error, as it is to Prometheus
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if len(rules.Groups) == 0 {
		t.Fatal("no rule groups")
	}
	names := map[string]bool{}
	forms := regexp.MustCompile(`^[0-9]+[smhdwy]$`)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			switch {
			case r.Alert == "" || r.Record != "":
				t.Errorf("group %s: a rule that is not an alert: %+v", g.Name, r)
				continue
			case names[r.Alert]:
				t.Errorf("alert %s appears twice", r.Alert)
			}
			names[r.Alert] = true
			if !strings.HasPrefix(r.Alert, "Rewind") {
				t.Errorf("alert %s: name does not start with Rewind", r.Alert)
			}
			if r.For != "" && !forms.MatchString(r.For) {
				t.Errorf("alert %s: for %q", r.Alert, r.For)
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
				t.Errorf("alert %s: severity %q, want critical, warning or info", r.Alert, s)
			}
			for _, a := range []string{"summary", "description"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("alert %s has no %s annotation", r.Alert, a)
				}
			}
			qs := queried(fams, r.Expr)
			if len(qs) == 0 {
				t.Errorf("alert %s queries no Rewind metric: %s", r.Alert, r.Expr)
			}
			for _, n := range qs {
				if !fams[n] {
					t.Errorf("alert %s queries %s, which no node exposes", r.Alert, n)
				}
			}
		}
	}
	for _, want := range []string{"RewindNotReady", "RewindDiskFull", "RewindGroupLagging", "RewindRPCErrors", "RewindTierUploadLagging"} {
		if !names[want] {
			t.Errorf("no alert %s", want)
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool is not installed: the rules were not checked by Prometheus itself")
		return
	}
	if out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
}
