//go:build unix

package report

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBrowser opens report.html in a real browser (headless Chromium) and
// checks the DOM it built: the verdict, the timeline with its fault shades
// and leader lanes, a hostile scenario name left as text, and not one
// message on the browser's console — the page loads nothing and runs
// nothing, and its Content-Security-Policy would report it if it tried
// (the control case proves the console shows such a report).
//
// Chromium must be installed (Debian: apt-get install -y chromium); set
// REWIND_NO_BROWSER=1 to skip this test where it cannot be.
func TestBrowser(t *testing.T) {
	if os.Getenv("REWIND_NO_BROWSER") == "1" {
		t.Skip("REWIND_NO_BROWSER=1")
	}
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed, and this test opens report.html in it: " +
			"install it (Debian/Ubuntu: apt-get install -y chromium) or set REWIND_NO_BROWSER=1 to skip this test")
	}

	t.Run("report", func(t *testing.T) {
		dir := t.TempDir()
		if err := Write(dir, synthetic()); err != nil {
			t.Fatal(err)
		}
		dom, console := openInBrowser(t, bin, filepath.Join(dir, "report.html"))
		if !regexp.MustCompile(`<div id="verdict" class="verdict fail">FAIL</div>`).MatchString(dom) {
			t.Errorf("the browser's DOM lacks the FAIL verdict:\n%s", head(dom))
		}
		for what, want := range map[string]int{
			`<svg xmlns="http://www.w3.org/2000/svg" class="timeline"`: 1,
			`<rect class="fault"`:    2,
			`<g class="lane">`:       4,
			`<tr class="checker `:    5,
			`<path class="p99" d="M`: 1,
		} {
			if n := strings.Count(dom, what); n != want {
				t.Errorf("the browser's DOM has %d of %s, want %d", n, what, want)
			}
		}
		if console != "" {
			t.Errorf("the browser's console is not empty:\n%s", console)
		}
	})

	t.Run("hostile", func(t *testing.T) {
		r := synthetic()
		r.History.Scenario = hostile
		r.Verdicts[0].Violations[0].What = hostile
		dir := t.TempDir()
		if err := Write(dir, r); err != nil {
			t.Fatal(err)
		}
		dom, console := openInBrowser(t, bin, filepath.Join(dir, "report.html"))
		if strings.Contains(dom, "<script") || strings.Contains(dom, "<img") {
			t.Errorf("a user's text became an element in the browser's DOM:\n%s", head(dom))
		}
		if !strings.Contains(dom, `<h1 id="scenario">&lt;script&gt;alert("x")&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;&amp;amp;'"</h1>`) {
			t.Errorf("the scenario name is not shown as text:\n%s", head(dom))
		}
		if console != "" {
			t.Errorf("the browser's console is not empty:\n%s", console)
		}
	})

	t.Run("control", func(t *testing.T) {
		// A page that tries to load an image: the console must say so,
		// or an empty console above proves nothing.
		var b bytes.Buffer
		if err := HTML(&b, synthetic()); err != nil {
			t.Fatal(err)
		}
		page := strings.Replace(b.String(), "</main>", `<img src="http://192.0.2.1/x.png"/></main>`, 1)
		file := filepath.Join(t.TempDir(), "report.html")
		if err := os.WriteFile(file, []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
		_, console := openInBrowser(t, bin, file)
		if !strings.Contains(console, "Content Security Policy") {
			t.Errorf("the console does not report the blocked image:\n%s", console)
		}
	})
}

// openInBrowser loads file in headless Chromium and returns the DOM it
// built and the console messages it logged.
func openInBrowser(t *testing.T, bin, file string) (dom, console string) {
	t.Helper()
	ctx := t.Context()
	if d, ok := t.Deadline(); ok { // stop before go test's own timeout
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-time.Until(d)/10))
		defer cancel()
	}
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, bin,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--no-default-browser-check", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--disable-extensions",
		"--user-data-dir="+filepath.Join(home, "profile"),
		"--enable-logging=stderr", "--v=0",
		"--dump-dom", "file://"+file)
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "XDG_CACHE_HOME="+home)
	// Chromium starts helpers; stop them all if the test runs out of time.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	// Only the page's console messages: Chromium also logs its own
	// complaints (no D-Bus in a container, and so on).
	var msgs []string
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, ":CONSOLE") {
			msgs = append(msgs, line)
		}
	}
	return stdout.String(), strings.Join(msgs, "\n")
}

func head(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "…"
	}
	return s
}
