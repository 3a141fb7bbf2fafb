//go:build unix

package main

// The README is a quick start: its commands must work as written. These
// tests read the README's ```sh blocks and run the tour's rewind commands
// with the built binary against a real server, and check that the time
// examples of the README and of `replay --help` name the times they claim
// (a millisecond example once sat a year away from its ISO twin).

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
)

// readmeBlocks returns the commands of the README's ```sh blocks, block by
// block, with continuation lines (ending in \) joined.
func readmeBlocks(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks [][]string
	var cur []string
	in, cont := false, ""
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case !in && strings.TrimSpace(l) == "```sh":
			in, cur = true, nil
		case in && strings.TrimSpace(l) == "```":
			in = false
			blocks = append(blocks, cur)
		case in:
			if s, ok := strings.CutSuffix(strings.TrimRight(l, " "), `\`); ok {
				cont += s + " "
				continue
			}
			cur = append(cur, cont+l)
			cont = ""
		}
	}
	return blocks
}

// readmeSkip says why a README line is not run by TestReadmeCommands, or ""
// to run it.
func readmeSkip(line string) string {
	cmd := strings.TrimSpace(line)
	switch {
	case !strings.HasPrefix(cmd, "rewind ") && !strings.Contains(cmd, "| rewind "):
		return "not a rewind command"
	case strings.Contains(cmd, "--server"):
		return "a cluster on fixed ports (TestCluster* cover clusters)"
	case strings.HasPrefix(cmd, "rewind serve"):
		return "the test runs the server"
	case strings.HasPrefix(cmd, "rewind bench"):
		return "a measurement (minutes)"
	case strings.HasPrefix(cmd, "rewind scenario run"):
		return "a chaos run of its own nodes (TestScenarioSmoke covers scenarios)"
	case strings.HasPrefix(cmd, "rewind plugin") || strings.Contains(cmd, "--filter"):
		return "builds a module with the Go toolchain (TestPluginCLI covers plugins)"
	case strings.Contains(cmd, "--follow"):
		return "waits for new records by design"
	case strings.HasPrefix(cmd, "rewind user ") || strings.HasPrefix(cmd, "rewind acl "):
		return "needs a server with --auth (TestCLIAuth covers users and ACLs)"
	}
	return ""
}

// TestReadmeCommands runs the tour's rewind commands as a user pastes
// them: through bash, with the binary on PATH and REWIND_SERVER pointing
// at a real server, one block at a time. Each must exit 0, and a "#
// partition=..." line after a command must be the first line it printed
// (the message ID a later line replays from). A subscribe
// runs in the background for the rest of its block, as the README's second
// terminal.
func TestReadmeCommands(t *testing.T) {
	t.Parallel()
	// With a tier, as the README's tiered storage lines ask for.
	srv := startServer(t, t.TempDir(), enginetest.FreeAddr(t), "--tier", "file://"+t.TempDir())
	work := t.TempDir()
	env := cliEnv("PATH="+filepath.Dir(enginetest.Binary(t))+":"+os.Getenv("PATH"), "REWIND_SERVER="+srv.url)
	sh := func(ctx context.Context, line string) *exec.Cmd {
		c := exec.CommandContext(ctx, "bash", "-c", "set -o pipefail; "+line)
		c.Dir, c.Env = work, env
		return c
	}
	ran := map[string]bool{}
	var last []byte // the output of the command before
	for _, block := range readmeBlocks(t) {
		var bg []func()
		for _, line := range block {
			// "# partition=..." after a publish is what it printed.
			if want, ok := strings.CutPrefix(line, "# partition="); ok {
				if got, _, _ := strings.Cut(string(last), "\n"); got != "partition="+want {
					t.Errorf("README says the command before printed %q; it printed %q", strings.TrimPrefix(line, "# "), got)
				}
				ran[line] = true
				continue
			}
			last = nil
			if why := readmeSkip(line); why != "" {
				if strings.TrimSpace(line) != "" {
					t.Logf("skipped (%s): %s", why, line)
				}
				continue
			}
			if strings.HasPrefix(strings.TrimSpace(line), "rewind subscribe") {
				bg = append(bg, startBackground(t, sh(context.Background(), line), line))
				ran[line] = true
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout) // a hang guard, not a speed limit
			out, err := sh(ctx, line).CombinedOutput()
			cancel()
			if err != nil {
				t.Errorf("README command failed: %s\n%v\n%s", line, err, out)
				continue
			}
			ran[line] = true
			last = out
		}
		for _, stop := range bg {
			stop()
		}
	}
	// The tour's essentials did run (a README edit must not silently
	// turn this test into a no-op).
	for _, want := range []string{"rewind version", "rewind topic create orders", "@1796119200000", "id:", "# partition=", "rewind subscribe", "--execute", "rewind topic alter", "--from-line"} {
		found := false
		for l := range ran {
			found = found || strings.Contains(l, want)
		}
		if !found {
			t.Errorf("no README command containing %q ran", want)
		}
	}
}

// startBackground starts a long-running README command (a subscriber) and
// returns once it has printed its first record, so the commands after it
// see its group; stop interrupts it (SIGINT to its process group, as
// Ctrl-C does) and waits for it.
func startBackground(t *testing.T, c *exec.Cmd, line string) (stop func()) {
	t.Helper()
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-c.Process.Pid, syscall.SIGKILL) })
	first := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		first <- sc.Scan()
		for sc.Scan() {
		}
	}()
	select {
	case ok := <-first:
		if !ok {
			t.Fatalf("README command printed nothing: %s", line)
		}
	case <-time.After(cmdTimeout): // a hang guard, not a speed limit
		t.Fatalf("README command printed nothing within %s: %s", cmdTimeout, line)
	}
	return func() {
		syscall.Kill(-c.Process.Pid, syscall.SIGINT)
		c.Wait()
	}
}

// TestDocsTimeExamplesAgree checks each "the same, in Unix milliseconds"
// example of the README and of `rewind replay --help` against the ISO time
// on the line before it.
func TestDocsTimeExamplesAgree(t *testing.T) {
	t.Parallel()
	help := runCLI(t, nil, nil, "replay", "--help")
	if help.code != 0 {
		t.Fatalf("replay --help: exit %d: %s", help.code, help.stderr)
	}
	var readme []string
	for _, b := range readmeBlocks(t) {
		readme = append(readme, b...)
	}
	iso := regexp.MustCompile(`@(\d{4}-\d\d-\d\dT[0-9:.]+Z)`)
	ms := regexp.MustCompile(`@(\d{10,})`)
	for name, lines := range map[string][]string{"README.md": readme, "replay --help": strings.Split(help.stdout, "\n")} {
		pairs := 0
		for i, l := range lines {
			m := ms.FindStringSubmatch(l)
			if m == nil || i == 0 || !strings.Contains(l, "the same") {
				continue
			}
			d := iso.FindStringSubmatch(lines[i-1])
			if d == nil {
				t.Errorf("%s: %q says \"the same\" but the line before has no @time: %q", name, l, lines[i-1])
				continue
			}
			a, err1 := client.ParsePosition("@" + d[1])
			b, err2 := client.ParsePosition("@" + m[1])
			if err1 != nil || err2 != nil || a.String() != b.String() {
				t.Errorf("%s: @%s is %v, but @%s (\"the same\") is %v (%v %v)", name, d[1], a, m[1], b, err1, err2)
			}
			pairs++
		}
		if pairs == 0 {
			t.Errorf("%s: found no millisecond example to check", name)
		}
	}
}
