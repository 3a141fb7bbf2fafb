package ts_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/scenarios/check"
	"github.com/rewind-io/rewind/scenarios/history"
)

// TestScenarioThroughTheTSClient runs a chaos scenario whose publishers
// are this client in Node (`rewind scenario run --client ts`): the package
// built (npm run build), a node process per publisher given every member,
// a leader paused twice. The run must pass every safety checker with
// acknowledged publishes, and say which client published.
func TestScenarioThroughTheTSClient(t *testing.T) {
	if testing.Short() {
		t.Skip("npm ci, and a cluster of real servers")
	}
	install(t)
	ctx := testContext(t)
	if err := npm(ctx, nil, "run", "--silent", "build"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	runCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(runCtx, enginetest.Binary(t), "scenario", "run", "pause-leader", "--duration", "10s", "--seed", "1",
		"--skip-bounds", "--client", "ts", "--ts-client", ".", "--report", dir)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scenario run: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "history.json"))
	if err != nil {
		t.Fatal(err)
	}
	var h history.History
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	for _, v := range check.All(&h) {
		if !v.OK {
			t.Errorf("%s: %+v", v.Checker, v.Violations)
		}
	}
	if st := check.Summary(&h); h.Client != "ts" || st.Acked == 0 || len(h.Faults) == 0 {
		t.Errorf("client %q, %d acked, %d faults; want ts, some, some", h.Client, st.Acked, len(h.Faults))
	}
	if !strings.Contains(string(out), "publishing through ts") {
		t.Errorf("the run does not say it published through ts:\n%s", out)
	}
}
