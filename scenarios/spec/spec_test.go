package spec

import (
	"strings"
	"testing"
	"time"
)

const good = `
scenario "leader-kill-loop" {
  description = "kill the leader again and again"
  nodes    = 3
  duration = "40s"
  short    = "20s"

  topic "orders" {
    partitions  = 3
    replication = 3
  }

  workload {
    publishers = 2
    rate       = 50
    followers  = true
    replays    = 1
    group "billing" {
      members = 2
      churn   = "5s"
    }
  }

  fault "kill" {
    action = "kill"
    target = "leader"
    start  = "5s"
    hold   = "2s"
    every  = "10s"
  }

  fault "cut-followers" {
    action = "cut"
    target = "followers:2"
    start  = "1s"
  }

  bounds {
    failover_within = "3s"
    recover_within  = "5s"
  }
}
`

func TestParseAScenario(t *testing.T) {
	s, err := Parse("k.hcl", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "leader-kill-loop" || s.Nodes != 3 || s.Duration != 40*time.Second || s.Short != 20*time.Second {
		t.Errorf("scenario %+v", s)
	}
	if len(s.Topics) != 1 || s.Topics[0].Partitions != 3 || s.Topics[0].Replication != 3 {
		t.Errorf("topics %+v", s.Topics)
	}
	w := s.Workload
	if w.Publishers != 2 || w.Rate != 50 || !w.Followers || w.Replays != 1 || len(w.Groups) != 1 || w.Groups[0].Churn != 5*time.Second {
		t.Errorf("workload %+v", w)
	}
	f := s.Faults[0]
	if f.Action != "kill" || f.Target != "leader" || f.Start != 5*time.Second || f.Hold != 2*time.Second || f.Every != 10*time.Second {
		t.Errorf("fault %+v", f)
	}
	if f := s.Faults[1]; f.Target != "followers:2" {
		t.Errorf("fault %+v", f)
	}
	if s.Bounds.FailoverWithin != 3*time.Second || s.Bounds.RecoverWithin != 5*time.Second || s.Failpoints {
		t.Errorf("bounds %+v, failpoints %v", s.Bounds, s.Failpoints)
	}
}

// TestMistakesNameTheirLineAndColumn: each mistake is reported with the
// place it is at, all of them at once.
func TestMistakesNameTheirLineAndColumn(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string // substrings, each "file:line:col: ..." or a message
	}{
		{"syntax", "scenario \"x\" {\n  nodes = \n}\n", []string{"bad.hcl:2:"}},
		{"no block", "# nothing\n", []string{"no scenario block"}},
		{"unknown attribute", "scenario \"x\" {\n  nodez = 3\n}\n", []string{"bad.hcl:2:3:", "nodez"}},
		{"bad duration", "scenario \"x\" {\n  duration = \"ten seconds\"\n}\n", []string{"bad.hcl:2:14:", "invalid duration", "ten seconds"}},
		{"bad action and target", "scenario \"x\" {\n  fault \"f\" {\n    action = \"explode\"\n    target = \"node:7\"\n  }\n}\n",
			[]string{"bad.hcl:3:14:", "unknown action", "bad.hcl:4:14:", "node:7"}},
		{"followers of a missing partition", "scenario \"x\" {\n  fault \"f\" {\n    action = \"cut\"\n    target = \"followers:3\"\n  }\n}\n",
			[]string{"bad.hcl:4:14:", "followers:P names a partition of the first topic (0 to 2)"}},
		{"bad failover bound", "scenario \"x\" {\n  bounds {\n    failover_within = \"soon\"\n  }\n}\n", []string{"bad.hcl:3:23:", "soon"}},
		{"every not above hold", "scenario \"x\" {\n  fault \"f\" {\n    action = \"pause\"\n    hold = \"5s\"\n    every = \"5s\"\n  }\n}\n",
			[]string{"bad.hcl:2:3:", "every 5s must be longer than hold 5s"}},
		{"too much replication", "scenario \"x\" {\n  nodes = 1\n  topic \"t\" {\n    replication = 3\n  }\n}\n", []string{"bad.hcl:3:3:", "replication 3 with 1 nodes"}},
		{"wrong type", "scenario \"x\" {\n  nodes = \"three\"\n}\n", []string{"bad.hcl:2:"}},
		{"bad name", "scenario \"Has Spaces\" {\n}\n", []string{"bad.hcl:1:1:", "invalid scenario name"}},
		{"failpoint without a name", "scenario \"x\" {\n  fault \"f\" {\n    action = \"failpoint\"\n  }\n}\n", []string{"missing failpoint"}},
		{"unknown filter", "scenario \"x\" {\n  workload {\n    filter = \"odd\"\n  }\n}\n", []string{"bad.hcl:2:3:", "unknown filter"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.hcl", []byte(tc.src))
			if err == nil {
				t.Fatal("parsed")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestDefaults: a minimal scenario gets a topic and a workload.
func TestDefaults(t *testing.T) {
	s, err := Parse("m.hcl", []byte(`scenario "m" {}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Nodes != 3 || len(s.Topics) != 1 || s.Workload.Publishers == 0 || s.Duration != 30*time.Second || s.Short != 15*time.Second {
		t.Errorf("defaults: %+v", s)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte(`scenario "m" { fault "f" { action = "cut" target = "leader:9" } }`))
	f.Fuzz(func(t *testing.T, src []byte) {
		s, err := Parse("f.hcl", src)
		if err == nil && (s.Nodes < 1 || len(s.Topics) == 0 || s.Short > s.Duration) {
			t.Fatalf("accepted an invalid scenario: %+v", s)
		}
	})
}

func TestNetworkFaultValues(t *testing.T) {
	for _, tc := range []struct {
		in            string
		delay, jitter time.Duration
		ok            bool
	}{{"100ms", 100 * time.Millisecond, 0, true}, {"100ms~50ms", 100 * time.Millisecond, 50 * time.Millisecond, true},
		{"fast", 0, 0, false}, {"100ms~", 0, 0, false}, {"-1s", 0, 0, false}} {
		d, j, err := ParseDelay(tc.in)
		if (err == nil) != tc.ok || d != tc.delay || j != tc.jitter {
			t.Errorf("ParseDelay(%q) = %s, %s, %v", tc.in, d, j, err)
		}
	}
	for _, tc := range []struct {
		in   string
		want int64
	}{{"262144", 262144}, {"256KiB", 256 << 10}, {"1MiB", 1 << 20}, {"0", 0}, {"1.5MiB", 0}, {"fast", 0}, {"-5", 0}} {
		if got, err := ParseRate(tc.in); got != tc.want || (err == nil) != (tc.want > 0) {
			t.Errorf("ParseRate(%q) = %d, %v", tc.in, got, err)
		}
	}
	if _, err := Parse("n.hcl", []byte("scenario \"x\" {\n  fault \"f\" {\n    action = \"delay\"\n    value = \"soon\"\n  }\n}\n")); err == nil || !strings.Contains(err.Error(), "n.hcl:2:3") {
		t.Errorf("a bad delay: %v", err)
	}
}
