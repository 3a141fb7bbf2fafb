package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"

	"github.com/rewind-io/rewind/internal/memlimit"
)

// cgroupV2 is a fake cgroup v2 mount whose container is limited to
// memoryMax ("max": none), read as serve reads the real one.
func cgroupV2(t *testing.T, memoryMax string) memlimit.Limit {
	t.Helper()
	root := t.TempDir()
	for name, content := range map[string]string{"cgroup.controllers": "cpu memory\n", "memory.max": memoryMax + "\n"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lim, err := memlimit.Source{Root: root}.Read()
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// The Go memory limit and the caches nobody set follow the container;
// what the user set (flag, environment or file) stays.
func TestPlanMemory(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name        string
		memoryMax   string
		args        []string
		file        string
		userSet     bool  // GOMEMLIMIT set
		userLimit   int64 // what Go runs with
		wantGo      int64
		wantBudget  int64
		wantCaps    map[string]int64
		wantCachesF map[string]string // the flags after apply
	}{
		{
			name: "no limit: defaults", memoryMax: "max", userLimit: math.MaxInt64,
			wantCaps: map[string]int64{}, wantCachesF: map[string]string{"tail-cache-mib": "256", "store-cache-mib": "256", "tier-cache-mib": "64"},
		},
		{
			name: "1 GiB container", memoryMax: "1073741824", userLimit: math.MaxInt64,
			wantGo: 1024 * mib * 9 / 10, wantBudget: 1024 * mib,
			wantCaps:    map[string]int64{"tail-cache-mib": 128, "store-cache-mib": 128},
			wantCachesF: map[string]string{"tail-cache-mib": "128", "store-cache-mib": "128", "tier-cache-mib": "64"},
		},
		{
			name: "256 MiB container, store cache set in the file, tail cache on the command line", memoryMax: "268435456", userLimit: math.MaxInt64,
			file: "store_cache_mib = 200", args: []string{"--tail-cache-mib", "300"},
			wantGo: 256 * mib * 9 / 10, wantBudget: 256 * mib,
			wantCaps:    map[string]int64{"tier-cache-mib": 32},
			wantCachesF: map[string]string{"tail-cache-mib": "300", "store-cache-mib": "200", "tier-cache-mib": "32"},
		},
		{
			name: "the user's GOMEMLIMIT below the container's: kept, and the budget", memoryMax: "1073741824",
			userSet: true, userLimit: 512 * mib, wantBudget: 512 * mib,
			wantCaps:    map[string]int64{"tail-cache-mib": 64, "store-cache-mib": 64},
			wantCachesF: map[string]string{"tail-cache-mib": "64", "store-cache-mib": "64", "tier-cache-mib": "64"},
		},
		{
			name: "GOMEMLIMIT=off: Go's limit left alone, the container's still sizes the caches", memoryMax: "2147483648",
			userSet: true, userLimit: math.MaxInt64, wantBudget: 2048 * mib,
			wantCaps:    map[string]int64{},
			wantCachesF: map[string]string{"tail-cache-mib": "256", "store-cache-mib": "256", "tier-cache-mib": "64"},
		},
		{
			name: "a tiny container: caches at 1 MiB, never 0 (the engine's default)", memoryMax: "4194304", userLimit: math.MaxInt64,
			wantGo: 4 * mib * 9 / 10, wantBudget: 4 * mib,
			wantCaps:    map[string]int64{"tail-cache-mib": 1, "store-cache-mib": 1, "tier-cache-mib": 1},
			wantCachesF: map[string]string{"tail-cache-mib": "1", "store-cache-mib": "1", "tier-cache-mib": "1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append(args, "--config", writeConfig(t, tc.file))
			}
			cmd := serveWith(t, args...)
			if err := applyConfig(cmd, envOf(nil)); err != nil {
				t.Fatal(err)
			}
			p := planMemory(cmd.Flags(), cgroupV2(t, tc.memoryMax), tc.userSet, tc.userLimit)
			if p.goLimit != tc.wantGo || p.budget != tc.wantBudget {
				t.Errorf("go limit %d, budget %d; want %d, %d", p.goLimit, p.budget, tc.wantGo, tc.wantBudget)
			}
			if d := cmp.Diff(tc.wantCaps, p.caps); d != "" {
				t.Errorf("caps (-want +got):\n%s", d)
			}
			var log bytes.Buffer
			var set []int64
			p.apply(cmd.Flags(), hclog.New(&hclog.LoggerOptions{Output: &log}), func(n int64) int64 { set = append(set, n); return 0 })
			if want := []int64{tc.wantGo}; tc.wantGo > 0 && !slices.Equal(set, want) || tc.wantGo == 0 && set != nil {
				t.Errorf("Go memory limit set to %d, want %d (0: left alone)", set, tc.wantGo)
			}
			for name, want := range tc.wantCachesF {
				if got := cmd.Flags().Lookup(name).Value.String(); got != want {
					t.Errorf("--%s %s, want %s", name, got, want)
				}
			}
			if n := strings.Count(log.String(), "memory:"); n != 1 {
				t.Errorf("%d log lines about memory, want 1:\n%s", n, log.String())
			}
		})
	}
}
