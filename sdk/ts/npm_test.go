// Package ts_test runs the TypeScript client's tests from go test: its
// own suite (npm test: unit tests, the staleness check of the generated
// code, and end-to-end tests against real servers), and a browser test
// that loads a bundled page in headless Chromium, which replays a topic
// from another origin over Connect and gRPC-web.
//
// Both install the package's dependencies themselves (npm ci, when
// node_modules does not match package-lock.json). They need node and npm:
// without them they skip, except in CI (CI set), where they fail. The
// browser test needs Chromium (Debian: apt-get install -y chromium); set
// REWIND_NO_BROWSER=1 to skip it where it cannot be installed.
package ts_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	npmlock "github.com/rewind-io/rewind/internal/npm"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
	"github.com/rewind-io/rewind/sdk/guest/build"
)

// needNode skips the test when node or npm is missing, unless in CI.
func needNode(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed, and CI runs the TypeScript client's tests: %v", tool, err)
			}
			t.Skipf("%s is not installed: %v", tool, err)
		}
	}
}

var (
	installOnce sync.Once
	installErr  error
)

// install runs npm ci in this directory when node_modules does not hold
// exactly what package-lock.json names.
func install(t *testing.T) {
	t.Helper()
	needNode(t)
	installOnce.Do(func() {
		fresh, err := npmlock.Fresh(".")
		if err != nil {
			installErr = err
			return
		}
		if !fresh {
			installErr = npm(context.Background(), nil, "ci", "--no-audit", "--no-fund")
		}
	})
	if installErr != nil {
		t.Fatal(installErr)
	}
}

// npm runs an npm command here; the error carries its output.
func npm(ctx context.Context, env []string, args ...string) error {
	_, err := npmOutput(ctx, env, args...)
	return err
}

// npmOutput runs an npm command here and returns its output.
func npmOutput(ctx context.Context, env []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "npm", args...)
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false", "npm_config_fund=false", "npm_config_audit=false")
	cmd.Env = append(cmd.Env, env...)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("npm %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return out, nil
}

// testContext is the test's context, ending a tenth of the remaining time
// before go test's own timeout so that failures are reported.
func testContext(t *testing.T) context.Context {
	ctx := t.Context()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-time.Until(d)/10))
		t.Cleanup(cancel)
	}
	return ctx
}

// TestNPM runs the package's own suite, npm test: the type check, the
// position grammar, the staleness check of src/gen, and the end-to-end
// tests, which start real servers (this binary) and replay through the
// keyprefix example filter (built here from source).
func TestNPM(t *testing.T) {
	if testing.Short() {
		t.Skip("npm ci, and real servers")
	}
	install(t)
	ctx := testContext(t)
	module, err := build.Go(ctx, filepath.Join("..", "guest", "examples", "go", "keyprefix"))
	if err != nil {
		t.Fatal(err)
	}
	wasm := filepath.Join(t.TempDir(), "keyprefix.wasm")
	if err := os.WriteFile(wasm, module, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := npmOutput(ctx, []string{"REWIND_BIN=" + enginetest.Binary(t), "REWIND_KEYPREFIX_WASM=" + wasm}, "test")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "# tests") || strings.HasPrefix(line, "# pass") || strings.HasPrefix(line, "# fail") {
			t.Log(line) // node:test's summary
		}
	}
}

// TestBrowser loads a page bundled with esbuild (browser/page.ts) in
// headless Chromium, served from an origin that `rewind serve
// --allow-origin` allows, and checks the rows it shows after replaying a
// topic over Connect and over gRPC-web: every record, in offset order
// within each partition. The control: the same page from an origin the
// server does not allow shows nothing and reports an error (the browser's
// CORS check is real).
func TestBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("npm ci, a real server and Chromium")
	}
	if os.Getenv("REWIND_NO_BROWSER") == "1" {
		t.Skip("REWIND_NO_BROWSER=1")
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed, and this test opens a page in it: " +
			"install it (Debian/Ubuntu: apt-get install -y chromium) or set REWIND_NO_BROWSER=1 to skip this test")
	}
	install(t)
	ctx := testContext(t)

	// The page, bundled.
	site := filepath.Join(t.TempDir(), "site")
	if err := os.MkdirAll(site, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := npm(ctx, nil, "exec", "--no", "--", "esbuild", "browser/page.ts", "--bundle", "--format=esm",
		"--outfile="+filepath.Join(site, "page.js")); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(filepath.Join("browser", "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(site, "index.html"), html, 0o644); err != nil {
		t.Fatal(err)
	}

	// Two origins serve it: one the server allows, one it does not.
	results := make(chan pageResult, 4)
	allowed, denied := serveSite(t, site, results), serveSite(t, site, results)

	srv := enginetest.StartProcess(t, enginetest.ProcessConfig{Args: []string{"--allow-origin", allowed}, Ready: listsTopics}).URL
	c := client.New(srv)
	if _, err := c.CreateTopic(ctx, "web", client.WithPartitions(2)); err != nil {
		t.Fatal(err)
	}
	var msgs []client.Message
	for i := range 6 {
		p := uint32(i % 2)
		msgs = append(msgs, client.Message{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, `{"n":%d}`, i), Partition: &p})
	}
	res, err := c.Publish(ctx, "web", msgs...)
	if err != nil {
		t.Fatal(err)
	}
	var want []pageRow
	for i, r := range res {
		want = append(want, pageRow{Partition: int(r.Partition), Offset: int(r.Offset), Text: fmt.Sprintf(`k%d={"n":%d}`, i, i)})
	}
	sortRows(want)

	for _, protocol := range []string{"connect", "grpc-web"} {
		t.Run(protocol, func(t *testing.T) {
			got := openPage(t, ctx, chromium, allowed, srv, protocol, "earliest", results)
			if got.Error != "" || got.Status != "done" {
				t.Fatalf("the page failed: status %q, error %q", got.Status, got.Error)
			}
			for p := range 2 { // in offset order within each partition
				var offs []int
				for _, r := range got.Rows {
					if r.Partition == p {
						offs = append(offs, r.Offset)
					}
				}
				if !slices.IsSorted(offs) {
					t.Errorf("partition %d's rows are not in offset order: %v", p, offs)
				}
			}
			sortRows(got.Rows)
			if !slices.Equal(got.Rows, want) {
				t.Errorf("the page shows\n%v\nwant\n%v", got.Rows, want)
			}
		})
	}
	t.Run("from a time", func(t *testing.T) {
		from := res[3].AppendTime
		got := openPage(t, ctx, chromium, allowed, srv, "connect", "@"+from.UTC().Format(time.RFC3339Nano), results)
		if got.Error != "" || got.Status != "done" {
			t.Fatalf("the page failed: status %q, error %q", got.Status, got.Error)
		}
		var want []pageRow
		for i, r := range res {
			if !r.AppendTime.Before(from) {
				want = append(want, pageRow{Partition: int(r.Partition), Offset: int(r.Offset), Text: fmt.Sprintf(`k%d={"n":%d}`, i, i)})
			}
		}
		sortRows(want)
		sortRows(got.Rows)
		if !slices.Equal(got.Rows, want) {
			t.Errorf("the page shows\n%v\nwant (appended at or after %s)\n%v", got.Rows, from.Format(time.RFC3339Nano), want)
		}
	})
	t.Run("origin not allowed", func(t *testing.T) {
		got := openPage(t, ctx, chromium, denied, srv, "connect", "earliest", results)
		if got.Error == "" || len(got.Rows) != 0 {
			t.Errorf("a page from an origin the server does not allow showed %d rows (error %q); want none and an error", len(got.Rows), got.Error)
		}
		t.Logf("the page's error: %s", got.Error)
	})
}

type pageRow struct {
	Partition int    `json:"partition"`
	Offset    int    `json:"offset"`
	Text      string `json:"text"`
}

type pageResult struct {
	Protocol string    `json:"protocol"`
	Status   string    `json:"status"`
	Error    string    `json:"error"`
	Rows     []pageRow `json:"rows"`
}

func sortRows(rows []pageRow) {
	slices.SortFunc(rows, func(a, b pageRow) int {
		if a.Partition != b.Partition {
			return a.Partition - b.Partition
		}
		return a.Offset - b.Offset
	})
}

// serveSite serves dir on a new loopback port and returns its origin;
// what pages post to /result goes to results.
func serveSite(t *testing.T, dir string, results chan<- pageResult) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /", http.FileServer(http.Dir(dir)))
	mux.HandleFunc("POST /result", func(w http.ResponseWriter, r *http.Request) {
		var res pageResult
		if err := json.NewDecoder(r.Body).Decode(&res); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case results <- res:
		default:
		}
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return "http://" + ln.Addr().String()
}

// listsTopics is ready once the node answers ListTopics.
func listsTopics(ctx context.Context, p *enginetest.Process) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := client.New(p.URL).ListTopics(ctx)
	return err
}

// openPage opens the page of origin in headless Chromium, replaying topic
// "web" of server over protocol from a position, and returns what the page
// posted.
func openPage(t *testing.T, ctx context.Context, chromium, origin, server, protocol, from string, results <-chan pageResult) pageResult {
	t.Helper()
	home := t.TempDir()
	q := url.Values{"server": {server}, "topic": {"web"}, "protocol": {protocol}, "from": {from}}
	page := origin + "/index.html?" + q.Encode()
	cmd := exec.Command(chromium,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--no-default-browser-check", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--disable-extensions",
		"--user-data-dir="+filepath.Join(home, "profile"),
		"--remote-debugging-port=0", // stay open until killed
		page)
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "XDG_CACHE_HOME="+home)
	// Chromium starts helpers: stop them all.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}()
	select {
	case res := <-results:
		if res.Protocol != protocol {
			t.Fatalf("a result for %s, want %s", res.Protocol, protocol)
		}
		return res
	case <-exited:
		t.Fatalf("chromium exited before the page reported:\n%s", stderr.String())
	case <-ctx.Done():
		t.Fatalf("the page did not report before the test's deadline:\n%s", stderr.String())
	}
	return pageResult{}
}
