package console_test

import (
	"bytes"
	"cmp"
	"connectrpc.com/connect"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
	"github.com/rewind-io/rewind/sdk/guest/build"
)

// The browser tests start `rewind serve` (internal/enginetest's binary and
// process) and drive the
// console in headless Chromium with chromedp. They need Chromium (Debian:
// apt-get install -y chromium); REWIND_NO_BROWSER=1 skips them.
//
// REWIND_CONSOLE_SCREENSHOTS=DIR writes the pages' screenshots there
// (docs/console regenerates the documentation's); otherwise they go to
// a temporary directory and are only checked to be PNG images.

// keyprefixModule builds the keyprefix example filter once.
var keyprefixModule = sync.OnceValues(func() ([]byte, error) {
	module, err := build.Go(context.Background(), filepath.Join("..", "sdk", "guest", "examples", "go", "keyprefix"))
	if err != nil {
		return nil, fmt.Errorf("build keyprefix: %w", err)
	}
	return module, nil
})

// builds returns the rewind binary and the keyprefix example filter, as a
// file of the test's.
func builds(t *testing.T) (bin, wasm string) {
	t.Helper()
	module, err := keyprefixModule()
	if err != nil {
		t.Fatal(err)
	}
	wasm = filepath.Join(t.TempDir(), "keyprefix.wasm")
	if err := os.WriteFile(wasm, module, 0o644); err != nil {
		t.Fatal(err)
	}
	return enginetest.Binary(t), wasm
}

// needChromium returns Chromium's path, skipping with REWIND_NO_BROWSER=1
// and failing when it is missing.
func needChromium(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("a real server and Chromium")
	}
	if os.Getenv("REWIND_NO_BROWSER") == "1" {
		t.Skip("REWIND_NO_BROWSER=1")
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed, and this test drives the console in it: " +
			"install it (Debian/Ubuntu: apt-get install -y chromium) or set REWIND_NO_BROWSER=1 to skip this test")
	}
	return chromium
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

// startServer starts `rewind serve` as pc says (enginetest.StartProcess)
// and waits until it answers ListTopics (with --auth: refuses it as
// unauthenticated); it returns its URL.
func startServer(t *testing.T, pc enginetest.ProcessConfig) string {
	t.Helper()
	pc.Ready = func(ctx context.Context, p *enginetest.Process) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := client.New(p.URL).ListTopics(ctx)
		if err == nil || connect.CodeOf(err) == connect.CodeUnauthenticated { // answering (with --auth)
			return nil
		}
		return err
	}
	return enginetest.StartProcess(t, pc).URL
}

// browser is a headless Chromium tab driven by chromedp; it records the
// page's uncaught exceptions and error log entries (CSP violations among
// them).
type browser struct {
	t    *testing.T
	ctx  context.Context
	shot string // where screenshots go
	log  *pageLog
}

// pageLog holds what went wrong in the page.
type pageLog struct {
	mu     sync.Mutex
	errors []string
	loads  int
}

// open loads the console afresh (a full page load, not a change of the
// fragment) on a route such as "replay" and waits until it shows.
func (b *browser) open(base, route string) {
	b.t.Helper()
	b.log.mu.Lock()
	b.log.loads++
	n := b.log.loads
	b.log.mu.Unlock()
	page, _, _ := strings.Cut(route, "?")
	b.run("open "+route, chromedp.Navigate(fmt.Sprintf("%s/console/?load=%d#/%s", base, n, route)))
	b.waitFor("the "+page+" page", fmt.Sprintf(`document.body.dataset.page === %q && document.querySelector("main h1") !== null`, page))
}

// on is the browser for the (sub)test t.
func (b *browser) on(t *testing.T) *browser {
	c := *b
	c.t = t
	return &c
}

func newBrowser(t *testing.T, ctx context.Context, chromium string) *browser {
	t.Helper()
	home := t.TempDir()
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(filepath.Join(home, "profile")),
		chromedp.Env("HOME="+home, "XDG_CONFIG_HOME="+home, "XDG_CACHE_HOME="+home),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{t: t, ctx: bctx, log: &pageLog{}}
	b.shot = os.Getenv("REWIND_CONSOLE_SCREENSHOTS")
	if b.shot == "" {
		b.shot = t.TempDir()
	} else if err := os.MkdirAll(b.shot, 0o755); err != nil {
		t.Fatal(err)
	}
	err := chromedp.Listen(bctx, func(ev any) {
		var msg string
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg = "exception: " + e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError {
				msg = "log: " + e.Entry.Text
			}
		}
		if msg != "" {
			b.log.mu.Lock()
			b.log.errors = append(b.log.errors, msg)
			b.log.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	if _, err := chromedp.Call(bctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("enable the log domain: %v", err)
	}
	if _, err := chromedp.Call(bctx, runtime.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("enable the runtime domain: %v", err)
	}
	return b
}

// run runs chromedp actions, failing the test with what (and the page's
// errors) if they fail.
func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v (page errors: %v)", what, err, b.pageErrors())
	}
}

// waitFor waits until the JavaScript expression is truthy.
func (b *browser) waitFor(what, expr string) {
	b.t.Helper()
	_, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(2*time.Minute)))
	if err != nil {
		shown, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector("main")?.innerText ?? ""`))
		b.t.Fatalf("wait for %s: %v\nthe page shows:\n%s\n(page errors: %v)", what, err, shown, b.pageErrors())
	}
}

// eval evaluates a JavaScript expression into out.
func (b *browser) eval(expr string, out any) {
	b.t.Helper()
	raw, err := chromedp.Run(b.ctx, chromedp.Evaluate[json.RawMessage](expr))
	if err == nil {
		err = json.Unmarshal(raw, out)
	}
	if err != nil {
		b.t.Fatalf("evaluate %s: %v (page errors: %v)", expr, err, b.pageErrors())
	}
}

// set sets the inputs (selector → value) as typing would: each gets its
// value and an input event.
func (b *browser) set(fields map[string]string) chromedp.Action[chromedp.Void] {
	js, err := json.Marshal(fields)
	if err != nil {
		panic(err)
	}
	expr := fmt.Sprintf(`Object.entries(%s).every(([sel, v]) => {
		const el = document.querySelector(sel);
		if (!el) return false;
		el.value = v;
		el.dispatchEvent(new Event("input", { bubbles: true }));
		return el.value === v;
	})`, js)
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		ok, err := chromedp.Evaluate[bool](expr)(ctx, t)
		if err == nil && !ok {
			err = fmt.Errorf("could not set the inputs %v", fields)
		}
		return err
	})
}

// screenshot saves the whole page as DIR/name.png and checks it is a PNG.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if len(png) < 1000 || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		b.t.Fatalf("screenshot %s: %d bytes, not a PNG image", name, len(png))
	}
	if err := os.WriteFile(filepath.Join(b.shot, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) pageErrors() []string {
	b.log.mu.Lock()
	defer b.log.mu.Unlock()
	return slices.Clone(b.log.errors)
}

// row is a record as the Replay page shows it.
type row struct {
	Partition int    `json:"partition"`
	Offset    int    `json:"offset"`
	Key       string `json:"key"`
	Value     string `json:"value"`
	Headers   string `json:"headers"`
	ID        string `json:"id"`
	Time      string `json:"time"`
}

const rowsJS = `[...document.querySelectorAll("#records .rec")].map((tr) => ({
  partition: Number(tr.dataset.partition), offset: Number(tr.dataset.offset),
  key: tr.querySelector(".key").textContent, value: tr.querySelector(".value").textContent,
  headers: tr.querySelector(".headers").textContent, id: tr.querySelector(".id").textContent,
  time: tr.querySelector(".time").textContent }))`

func sortRows(rows []row) {
	slices.SortFunc(rows, func(a, b row) int {
		if a.Partition != b.Partition {
			return a.Partition - b.Partition
		}
		return a.Offset - b.Offset
	})
}

// replay fills the Replay page's form, starts it, waits until the stream
// is done and returns the rows shown (sorted).
func (b *browser) replay(base string, fields map[string]string, more ...chromedp.Action[chromedp.Void]) []row {
	b.t.Helper()
	b.open(base, "replay")
	all := map[string]string{"#topic": "", "#from": "earliest", "#to": "end", "#partitions": "", "#plugin": "", "#config": ""}
	for k, v := range fields {
		all[k] = v
	}
	b.run("start a replay", b.set(all), chromedp.Steps(more...), chromedp.Click(chromedp.CSS("#start")))
	b.waitFor("the replay to end", `["done", "error"].includes(document.querySelector("#status").dataset.state)`)
	var state, errText string
	b.eval(`document.querySelector("#status").dataset.state`, &state)
	b.eval(`document.querySelector("#error").textContent`, &errText)
	if state != "done" {
		b.t.Fatalf("the replay ended in %q: %s", state, errText)
	}
	var rows []row
	b.eval(rowsJS, &rows)
	return rows
}

// TestConsole drives every page of the console in headless Chromium
// against a real `rewind serve`, with data made by the Go client: a replay
// from a timestamp (the exact rows), a replay through the keyprefix filter
// uploaded on the Plugins page, the bound on rows kept, the Topics and
// Cluster pages, a key's history and a tag search on the Search page, and
// a group's lag, a reset's dry run and its execution,
// after which a live member re-reads from the start. The page must throw
// nothing and violate no CSP.
func TestConsole(t *testing.T) {
	chromium := needChromium(t)
	bin, wasm := builds(t)
	ctx := testContext(t)
	base := startServer(t, enginetest.ProcessConfig{Bin: bin})
	c := client.New(base)

	// Data: 8 records in two batches over 2 partitions, a millisecond
	// apart, keys alternating between the prefixes user-1 and user-2.
	if _, err := c.CreateTopic(ctx, "orders", client.WithPartitions(2)); err != nil {
		t.Fatal(err)
	}
	type sent struct {
		key, value, pretty string
		res                client.Result
	}
	var records []sent
	var from time.Time // between the batches
	for batch := range 2 {
		var msgs []client.Message
		var pretty []string
		for i := batch * 4; i < batch*4+4; i++ {
			p := uint32(i % 2)
			msgs = append(msgs, client.Message{
				Key: fmt.Appendf(nil, "user-%d-%d", 1+i/2%2, i), Value: fmt.Appendf(nil, `{"n":%d,"items":[%d]}`, i, i),
				Headers: []client.Header{{Key: "source", Value: []byte("test")}}, Partition: &p,
			})
			pretty = append(pretty, fmt.Sprintf("{\n  \"n\": %d,\n  \"items\": [\n    %d\n  ]\n}", i, i))
		}
		res, err := c.Publish(ctx, "orders", msgs...)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			records = append(records, sent{string(msgs[i].Key), string(msgs[i].Value), pretty[i], r})
			if batch == 0 && !r.AppendTime.Before(from) {
				from = r.AppendTime.Add(time.Millisecond)
			}
		}
		for batch == 0 && !time.Now().After(from) {
			time.Sleep(time.Millisecond) // until the second batch is appended after from
		}
	}
	want := func(keep func(s sent) bool) []row {
		var rows []row
		for _, s := range records {
			if keep(s) {
				rows = append(rows, row{Partition: int(s.res.Partition), Offset: int(s.res.Offset), Key: s.key, Value: s.value,
					Headers: "source=test", ID: s.res.MessageID, Time: s.res.AppendTime.UTC().Format("2006-01-02T15:04:05.000Z")})
			}
		}
		sortRows(rows)
		return rows
	}

	browser := newBrowser(t, ctx, chromium)

	t.Run("replay from a timestamp", func(t *testing.T) {
		b := browser.on(t)
		got := b.replay(base, map[string]string{"#topic": "orders", "#from": "@" + from.UTC().Format(time.RFC3339Nano)})
		sortRows(got)
		w := want(func(s sent) bool { return !s.res.AppendTime.Before(from) })
		if len(w) == 0 || len(w) == len(records) || !slices.Equal(got, w) {
			t.Fatalf("the Replay page shows\n%+v\nwant (appended at or after %s)\n%+v", got, from.Format(time.RFC3339Nano), w)
		}
		// A click on a row shows the record, its JSON value indented.
		var first sent
		for _, s := range records {
			if s.res.Partition == uint32(w[0].Partition) && s.res.Offset == uint64(w[0].Offset) {
				first = s
			}
		}
		b.run("select a row", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#records .rec[data-partition="%d"][data-offset="%d"]`, w[0].Partition, w[0].Offset))))
		b.waitFor("the record's detail", `document.querySelector("#detail-value") !== null`)
		var detail struct{ Key, Value, Headers string }
		b.eval(`({key: document.querySelector("#detail-key").textContent, value: document.querySelector("#detail-value").textContent,
			headers: document.querySelector("#detail-headers").textContent})`, &detail)
		if detail.Key != first.key || detail.Value != first.pretty || detail.Headers != "source: test" {
			t.Errorf("the detail of %s shows key %q, headers %q, value\n%s\nwant key %q, headers %q, value\n%s", first.key, detail.Key, detail.Headers, detail.Value, first.key, "source: test", first.pretty)
		}
		b.screenshot("replay")
	})

	t.Run("upload and test a plugin", func(t *testing.T) {
		b := browser.on(t)
		b.open(base, "plugins")
		b.run("upload keyprefix", b.set(map[string]string{"#upload-name": "keyprefix", "#upload-description": "keeps keys with a prefix"}),
			chromedp.SetUploadFiles(chromedp.CSS("#upload-file"), []string{wasm}), chromedp.Click(chromedp.CSS("#upload")))
		b.waitFor("the upload", `document.querySelector("#upload-result").textContent.startsWith("Uploaded")`)
		var msg string
		b.eval(`document.querySelector("#upload-result").textContent`, &msg)
		if !strings.HasPrefix(msg, "Uploaded keyprefix@1 (sha256:") {
			t.Fatalf("the upload says %q", msg)
		}
		b.waitFor("the plugin in the list", `[...document.querySelectorAll("table.plugins td")].some((td) => td.textContent === "keyprefix")`)
		b.run("test keyprefix", b.set(map[string]string{"#test-plugin": "keyprefix", "#test-config": `{"prefix":"user-1"}`, "#test-topic": "orders", "#test-from": "earliest"}),
			chromedp.Click(chromedp.CSS("#test")))
		b.waitFor("the test's result", `document.querySelector("#test-summary") !== null || document.querySelector("#test-result .error") !== null`)
		b.eval(`document.querySelector("#test-result").textContent`, &msg)
		kept := len(want(func(s sent) bool { return strings.HasPrefix(s.key, "user-1") }))
		if !strings.Contains(msg, fmt.Sprintf("scanned %d, kept %d, emitted %d.", len(records), kept, kept)) {
			t.Fatalf("the plugin test shows %q; want %d scanned, %d kept", msg, len(records), kept)
		}
		b.screenshot("plugins")
	})

	t.Run("filtered replay", func(t *testing.T) {
		b := browser.on(t)
		got := b.replay(base, map[string]string{"#topic": "orders", "#plugin": "keyprefix", "#config": `{"prefix":"user-1"}`})
		sortRows(got)
		w := want(func(s sent) bool { return strings.HasPrefix(s.key, "user-1") })
		if len(w) == 0 || len(w) == len(records) || !slices.Equal(got, w) {
			t.Fatalf("the filtered replay shows\n%+v\nwant\n%+v", got, w)
		}
		// Copy as CLI command: the same replay for `rewind replay`.
		var cmd string
		b.run("copy as CLI command", chromedp.Click(chromedp.CSS("#copy-cli")))
		b.eval(`document.querySelector("#copied").value`, &cmd)
		wantCmd := fmt.Sprintf(`rewind replay orders --from earliest --to end --filter keyprefix --filter-config '{"prefix":"user-1"}' --server %s`, strings.TrimPrefix(base, "http://"))
		if cmd != wantCmd {
			t.Errorf("copy as CLI command gave\n%s\nwant\n%s", cmd, wantCmd)
		}
		b.screenshot("replay-filtered")
		// Copy resume token: where the stream ended; resuming there with
		// the Go client and the same filter finds nothing more.
		var token string
		b.run("copy the resume token", chromedp.Click(chromedp.CSS("#copy-token")))
		b.eval(`document.querySelector("#copied").value`, &token)
		if token == "" {
			t.Fatal("copy resume token gave nothing")
		}
		if _, err := c.Publish(ctx, "orders", client.Message{Key: []byte("user-1-late"), Value: []byte("late")}); err != nil {
			t.Fatal(err)
		}
		sub, err := c.Subscribe(ctx, "orders", client.From(client.ResumeToken(token)), client.Until(client.End()),
			client.Filter("keyprefix", []byte(`{"prefix":"user-1"}`)))
		if err != nil {
			t.Fatalf("resume from the console's token: %v", err)
		}
		var keys []string
		for r, err := range sub.Records() {
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, string(r.Key))
		}
		if !slices.Equal(keys, []string{"user-1-late"}) {
			t.Errorf("resuming from the console's token read %q, want only the record published after it", keys)
		}
	})

	t.Run("filter from a module file", func(t *testing.T) {
		b := browser.on(t)
		got := b.replay(base, map[string]string{"#topic": "orders", "#to": "@" + from.UTC().Format(time.RFC3339Nano), "#config": `{"prefix":"user-2"}`},
			chromedp.SetUploadFiles(chromedp.CSS("#filter-file"), []string{wasm}))
		sortRows(got)
		w := want(func(s sent) bool { return strings.HasPrefix(s.key, "user-2") && s.res.AppendTime.Before(from) })
		if len(w) == 0 || !slices.Equal(got, w) {
			t.Fatalf("the replay through the module file shows\n%+v\nwant\n%+v", got, w)
		}
		var cmd string
		b.run("copy as CLI command", chromedp.Click(chromedp.CSS("#copy-cli")))
		b.eval(`document.querySelector("#copied").value`, &cmd)
		if !strings.Contains(cmd, ` --filter-file keyprefix.wasm --filter-config '{"prefix":"user-2"}'`) {
			t.Errorf("copy as CLI command gave %s, want --filter-file and --filter-config", cmd)
		}
	})

	t.Run("live follow with pause", func(t *testing.T) {
		b := browser.on(t)
		b.open(base, "replay")
		b.run("follow orders live", b.set(map[string]string{"#topic": "orders", "#from": "latest", "#to": "", "#partitions": "", "#plugin": "", "#config": ""}),
			chromedp.Click(chromedp.CSS("#start")))
		b.waitFor("the stream to start", `document.querySelector("#status").dataset.state.startsWith("streaming") || document.querySelector("#status").dataset.state === "live"`)
		hasKey := func(k string) string {
			return fmt.Sprintf(`[...document.querySelectorAll("#records .key")].some((td) => td.textContent === %q)`, k)
		}
		if _, err := c.Publish(ctx, "orders", client.Message{Key: []byte("live-1"), Value: []byte("one")}); err != nil {
			t.Fatal(err)
		}
		b.waitFor("the live record", hasKey("live-1"))
		b.run("pause", chromedp.Click(chromedp.CSS("#pause")))
		var state string
		b.eval(`document.querySelector("#status").dataset.state`, &state)
		if state != "paused" {
			t.Fatalf("after Pause the status is %q", state)
		}
		if _, err := c.Publish(ctx, "orders", client.Message{Key: []byte("live-2"), Value: []byte("two")}); err != nil {
			t.Fatal(err)
		}
		b.run("resume", chromedp.Click(chromedp.CSS("#pause")))
		b.waitFor("the record published while paused", hasKey("live-2"))
		var rows []row
		b.eval(rowsJS, &rows)
		if len(rows) != 2 || rows[0].Key != "live-1" || rows[1].Key != "live-2" {
			t.Errorf("following from latest shows %+v, want live-1 then live-2", rows)
		}
		b.run("stop", chromedp.Click(chromedp.CSS("#stop")))
		b.waitFor("the stop", `document.querySelector("#status").dataset.state === "stopped"`)
	})

	t.Run("rows are bounded", func(t *testing.T) {
		b := browser.on(t)
		const n = 5000 + 120 // MAX_ROWS in src/replay.ts, and more
		if _, err := c.CreateTopic(ctx, "big", client.WithPartitions(1)); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i += 1000 {
			var msgs []client.Message
			for j := i; j < min(n, i+1000); j++ {
				msgs = append(msgs, client.Message{Value: fmt.Appendf(nil, "v%d", j)})
			}
			if _, err := c.Publish(ctx, "big", msgs...); err != nil {
				t.Fatal(err)
			}
		}
		got := b.replay(base, map[string]string{"#topic": "big"})
		var kept int
		b.eval(`Number(document.querySelector("#viewport").dataset.count)`, &kept)
		if kept != 5000 {
			t.Errorf("the page keeps %d records, want the newest 5000", kept)
		}
		// The list is virtualised: the DOM holds the rows in view (the
		// newest, as the list follows the end), not 5000.
		if len(got) == 0 || len(got) > 200 || got[len(got)-1].Offset != n-1 {
			t.Fatalf("the list renders %d rows, the last at offset %d; want a few, the last at %d", len(got), got[max(0, len(got)-1)].Offset, n-1)
		}
		b.run("scroll to the top", chromedp.Evaluate[chromedp.Void](`document.querySelector("#viewport").scrollTop = 0; undefined`))
		b.waitFor("the oldest kept row", fmt.Sprintf(`document.querySelector("#records .rec")?.dataset.offset === "%d"`, n-5000))
		var note string
		b.eval(`document.querySelector("#dropped").textContent`, &note)
		if !strings.HasPrefix(note, "120 older records were dropped") {
			t.Errorf("the note on dropped rows says %q", note)
		}
	})

	t.Run("topics", func(t *testing.T) {
		b := browser.on(t)
		if _, err := c.CreateTopic(ctx, "single", client.WithPartitions(1)); err != nil {
			t.Fatal(err)
		}
		b.open(base, "topics")
		b.waitFor("the partitions of orders", `document.querySelectorAll('section[data-topic="orders"] table.partitions tbody tr').length === 2`)
		b.waitFor("the topic single", `document.querySelector('section[data-topic="single"] p.config') !== null`)
		for topic, want := range map[string]string{"orders": "2 partitions · ", "single": "1 partition · "} {
			var config string
			b.eval(`document.querySelector('section[data-topic="`+topic+`"] p.config').textContent`, &config)
			if !strings.HasPrefix(config, want) {
				t.Errorf("topic %s's configuration reads %q, want it to start %q", topic, config, want)
			}
		}
		var cells [][]string
		b.eval(`[...document.querySelectorAll('section[data-topic="orders"] table.partitions tbody tr')].map((tr) => [...tr.children].map((td) => td.textContent))`, &cells)
		_, parts, err := c.DescribeTopic(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range parts {
			want := []string{fmt.Sprint(p.Partition), fmt.Sprint(p.LogStartOffset), fmt.Sprint(p.EndOffset), fmt.Sprint(p.EndOffset - p.LogStartOffset)}
			if !slices.Equal(cells[i][:4], want) || cells[i][7] != "1" || cells[i][8] != "1" {
				t.Errorf("partition %d shows %q; want %q first, leader and replicas 1", p.Partition, cells[i], want)
			}
		}
		b.screenshot("topics")
	})

	t.Run("search by key and by tag", func(t *testing.T) { search(t, ctx, browser.on(t), base, c) })

	t.Run("group lag and reset", func(t *testing.T) { groupReset(t, ctx, browser.on(t), base, c) })

	if errs := browser.pageErrors(); len(errs) > 0 {
		t.Errorf("the console logged errors:\n%s", strings.Join(errs, "\n"))
	}
}

// groupReset: a group committed at the end of orders, one live member and
// two new records give a lag of 2 on the Groups page; a dry run plans the
// reset to earliest without changing anything; the execution moves the
// commits, the page's lag goes back up to every record, and the member
// re-reads from offset 0.
func groupReset(t *testing.T, ctx context.Context, b *browser, base string, c *client.Client) {
	if _, err := c.ResetGroup(ctx, "billing", "orders", client.End(), nil, false, client.CreateGroup()); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	member, err := c.Subscribe(mctx, "orders", client.Group("billing"), client.ClientName("worker-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	// The member reads on; it commits nothing.
	type seen struct {
		replay bool // after a ReplayStarted
		part   uint32
		offset uint64
	}
	events := make(chan seen, 1024)
	go func() {
		replayed := false
		for member.Next() {
			switch e := member.Event().(type) {
			case *client.ReplayStarted:
				replayed = true
			case *client.Records:
				for _, r := range e.Records {
					select {
					case events <- seen{replayed, r.Partition, r.Offset}:
					case <-mctx.Done():
						return
					}
				}
			}
		}
	}()
	p0, p1 := uint32(0), uint32(1)
	if _, err := c.Publish(ctx, "orders", client.Message{Value: []byte("a"), Partition: &p0}, client.Message{Value: []byte("b"), Partition: &p1}); err != nil {
		t.Fatal(err)
	}
	_, parts, err := c.DescribeTopic(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	var total uint64
	for _, p := range parts {
		total += p.EndOffset
	}
	lagJS := `[...document.querySelectorAll("section.group-topic .lag-records")].reduce((a, s) => a + Number(s.textContent), 0)`

	b.open(base, "groups")
	b.waitFor("the group list", `[...document.querySelectorAll("table.groups a")].some((a) => a.textContent === "billing")`)
	b.run("open billing", chromedp.Click(chromedp.CSS(`table.groups a`)))
	b.waitFor("a lag of 2 records", lagJS+` === 2 && document.querySelectorAll("table.members tbody tr").length === 1`)
	b.waitFor("three samples in the lag chart (one per poll)", `Number(document.querySelector("svg.chart")?.dataset.samples) >= 3`)
	b.screenshot("groups")

	// The dry run: a plan, and nothing changed.
	b.run("plan a reset", b.set(map[string]string{"#reset-target": "earliest", "#reset-partitions": ""}), chromedp.Click(chromedp.CSS("#plan")))
	b.waitFor("the plan", `document.querySelector("#reset-result")?.dataset.executed === "false"`)
	var plan [][]string
	b.eval(`[...document.querySelectorAll("table.plan tbody tr")].map((tr) => [...tr.children].slice(0, 4).map((td) => td.textContent))`, &plan)
	var wantPlan [][]string
	for _, p := range parts {
		e := p.EndOffset - 1 // the commit: the end before the two new records
		wantPlan = append(wantPlan, []string{fmt.Sprint(p.Partition), fmt.Sprint(e), "0", fmt.Sprint(e)})
	}
	if !slices.EqualFunc(plan, wantPlan, slices.Equal) {
		t.Fatalf("the plan shows %q, want %q", plan, wantPlan)
	}
	var executeEnabled bool
	b.eval(`!document.querySelector("#execute").disabled`, &executeEnabled)
	if !executeEnabled {
		t.Fatal("Execute is not enabled after a plan")
	}
	gt, err := c.DescribeGroup(ctx, "billing")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range gt[0].Partitions {
		if p.CommittedOffset != p.EndOffset-1 {
			t.Fatalf("after the dry run partition %d is committed at %d, want %d (unchanged)", p.Partition, p.CommittedOffset, p.EndOffset-1)
		}
	}
	b.screenshot("groups-plan")

	// Execute: the commits move, the lag is every record, the member re-reads.
	b.run("execute the reset", chromedp.Click(chromedp.CSS("#execute")))
	b.waitFor("the execution", `document.querySelector("#reset-result")?.dataset.executed === "true"`)
	b.waitFor(fmt.Sprintf("a lag of %d records", total), fmt.Sprintf("%s === %d", lagJS, total))
	b.screenshot("groups-executed")
	reread := map[uint32]bool{}
	for len(reread) < 2 {
		select {
		case s := <-events:
			if s.replay && s.offset == 0 {
				reread[s.part] = true
			}
		case <-ctx.Done():
			t.Fatalf("the member did not re-read both partitions from offset 0 after the reset (did: %v)", reread)
		}
	}
}

// search: the Search page shows a key's history (versions, offsets and
// values as the Go client appended them), from a version backward, and
// the records a tag matches in every partition and in one.
func search(t *testing.T, ctx context.Context, b *browser, base string, c *client.Client) {
	if _, err := c.CreateTopic(ctx, "accounts", client.WithPartitions(2)); err != nil {
		t.Fatal(err)
	}
	type appended struct {
		key, value, typ string
		tags            []string
		res             client.Result
	}
	var all []appended
	app := func(key, value, typ string, tags []string, cond client.Condition) {
		t.Helper()
		res, err := c.Append(ctx, "accounts", []byte(key), []client.Message{{Value: []byte(value), Type: typ, Tags: tags}}, cond)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, appended{key, value, typ, tags, res[0]})
	}
	app("acc-1", `{"opened":true}`, "Opened", []string{"branch:7"}, client.ExpectNone())
	app("acc-2", `{"opened":true}`, "Opened", []string{"branch:7", "vip"}, client.ExpectNone())
	for i := range 3 {
		app("acc-1", fmt.Sprintf(`{"deposit":%d}`, i), "Deposited", nil, client.ExpectVersion(uint64(i)))
	}
	app("acc-3", `{"opened":true}`, "Opened", []string{"branch:7"}, client.ExpectNone())

	// searched fills the form, presses button and returns the rows shown.
	type found struct {
		Partition, Offset int
		Version           string
		Cells             []string
	}
	searched := func(button string, fields map[string]string, backward bool) []found {
		t.Helper()
		b.run("search", b.set(fields), chromedp.Evaluate[chromedp.Void](fmt.Sprintf(
			`document.querySelector("#search-backward").checked = %t; document.querySelector("#search-status").dataset.state = ""; undefined`, backward)),
			chromedp.Click(chromedp.CSS(button)))
		b.waitFor("the search", `["done", "error"].includes(document.querySelector("#search-status").dataset.state)`)
		var state, errText string
		b.eval(`document.querySelector("#search-status").dataset.state`, &state)
		b.eval(`document.querySelector("#search-error").textContent`, &errText)
		if state != "done" {
			t.Fatalf("the search ended in %q: %s", state, errText)
		}
		var rows []found
		b.eval(`[...document.querySelectorAll("table.search-results tbody tr")].map((tr) => ({Partition: Number(tr.dataset.partition),
			Offset: Number(tr.dataset.offset), Version: tr.dataset.version ?? "", Cells: [...tr.children].map((td) => td.textContent)}))`, &rows)
		return rows
	}
	// want is what the page shows of the records keep selects, in the
	// order of appends (or of append times, then partitions, with byTime):
	// the key's columns or the tag search's.
	want := func(byKey, byTime bool, keep func(a appended) bool) []found {
		var out []found
		sorted := slices.Clone(all)
		if byTime {
			slices.SortStableFunc(sorted, func(x, y appended) int {
				return cmp.Or(x.res.AppendTime.Compare(y.res.AppendTime), cmp.Compare(x.res.Partition, y.res.Partition))
			})
		}
		for _, a := range sorted {
			if !keep(a) {
				continue
			}
			r := a.res
			tags := strings.Join(a.tags, ", ")
			v := fmt.Sprint(r.KeyVersion)
			at := r.AppendTime.UTC().Format("2006-01-02T15:04:05.000Z")
			cells := []string{fmt.Sprint(r.Partition), fmt.Sprint(r.Offset), a.key, v, a.typ, tags, a.value, at}
			if byKey {
				cells = []string{v, fmt.Sprint(r.Partition), fmt.Sprint(r.Offset), a.typ, tags, a.value, at}
			}
			out = append(out, found{int(r.Partition), int(r.Offset), v, cells})
		}
		return out
	}
	equal := func(a, b found) bool {
		return a.Partition == b.Partition && a.Offset == b.Offset && a.Version == b.Version && slices.Equal(a.Cells, b.Cells)
	}

	b.open(base, "search")
	got := searched("#search-key-go", map[string]string{"#search-topic": "accounts", "#search-key": "acc-1", "#search-from-version": ""}, false)
	if w := want(true, false, func(a appended) bool { return a.key == "acc-1" }); len(w) != 4 || !slices.EqualFunc(got, w, equal) {
		t.Fatalf("the history of acc-1 shows\n%+v\nwant\n%+v", got, w)
	}
	var status string
	b.eval(`document.querySelector("#search-status").textContent`, &status)
	if !strings.Contains(status, "4 records") || !strings.Contains(status, "versions 0 to 3 held") {
		t.Errorf("the status of the key search says %q", status)
	}
	b.run("select version 1", chromedp.Click(chromedp.CSS(`table.search-results tr[data-version="1"]`)))
	b.waitFor("the record's detail", `document.querySelector("#search-detail-value")?.textContent === "{\n  \"deposit\": 0\n}"`)
	b.screenshot("search-key")

	got = searched("#search-key-go", map[string]string{"#search-from-version": "2"}, true)
	w := want(true, false, func(a appended) bool { return a.key == "acc-1" && a.res.KeyVersion <= 2 })
	slices.Reverse(w)
	if !slices.EqualFunc(got, w, equal) {
		t.Fatalf("acc-1 from version 2, newest first, shows\n%+v\nwant\n%+v", got, w)
	}

	// A tag, in every partition (by append time), then in one.
	b.waitFor("the partition selector", `document.querySelector("#search-partition").dataset.partitions === "2" && !document.querySelector("#search-partition").closest("label").hidden`)
	got = searched("#search-tags-go", map[string]string{"#search-types": "", "#search-tags": "branch:7", "#search-partition": ""}, false)
	w = want(false, true, func(a appended) bool { return slices.Contains(a.tags, "branch:7") })
	if len(w) != 3 || w[0].Partition == w[1].Partition && w[1].Partition == w[2].Partition {
		t.Fatalf("the records tagged branch:7 lie in one partition (%+v): the test needs them in both", w)
	}
	if !slices.EqualFunc(got, w, equal) {
		t.Fatalf("tag branch:7 in every partition shows\n%+v\nwant\n%+v", got, w)
	}
	p := all[0].res.Partition // acc-1's
	got = searched("#search-tags-go", map[string]string{"#search-types": "Opened, Deposited", "#search-tags": "", "#search-partition": fmt.Sprint(p)}, false)
	w = want(false, false, func(a appended) bool { return a.res.Partition == p })
	if !slices.EqualFunc(got, w, equal) {
		t.Fatalf("types Opened and Deposited in partition %d show\n%+v\nwant\n%+v", p, got, w)
	}
	b.screenshot("search-tags")
}

// TestConsoleCluster opens the console of one node of a three-node
// cluster: the Cluster page shows the three nodes, connected, and each
// partition's leader and replicas, with the replicas' lag where this node
// leads; the Topics page shows the replicas too.
func TestConsoleCluster(t *testing.T) {
	chromium := needChromium(t)
	bin, _ := builds(t)
	ctx := testContext(t)
	members := enginetest.PrepareProcessCluster(t, 3)
	var urls []string
	for id := 1; id <= 3; id++ {
		pc := members.Config(id)
		pc.Bin = bin
		urls = append(urls, startServer(t, pc))
	}
	base := urls[0]
	c := client.New(base + "," + urls[1] + "," + urls[2])
	if _, err := c.CreateTopic(ctx, "payments", client.WithPartitions(3), client.WithReplicationFactor(3)); err != nil {
		t.Fatal(err)
	}
	for p := range uint32(3) {
		if _, err := c.Publish(ctx, "payments", client.Message{Value: []byte("x"), Partition: &p}); err != nil {
			t.Fatal(err)
		}
	}

	b := newBrowser(t, ctx, chromium)
	b.open(base, "cluster")
	b.waitFor("three connected nodes and three led partitions", `(() => {
		const nodes = [...document.querySelectorAll("table.nodes tbody tr")].map((tr) => [...tr.children].map((td) => td.textContent));
		const parts = [...document.querySelectorAll("table.cluster-partitions tbody tr")].map((tr) => [...tr.children].map((td) => td.textContent));
		return nodes.length === 3 && nodes.filter((n) => n[3] === "yes").length === 2 &&
			parts.length === 3 && parts.every((p) => p[0] === "payments" && p[2] !== "none" && p[3].split(", ").sort().join(", ") === "1, 2, 3");
	})()`)
	// The replicas' lag: on the console of partition 0's leader.
	_, parts, err := c.DescribeTopic(ctx, "payments")
	if err != nil {
		t.Fatal(err)
	}
	leader := parts[0].Leader
	if leader < 1 || leader > 3 {
		t.Fatalf("payments/0 has leader %d", leader)
	}
	b.open(urls[leader-1], "cluster")
	b.waitFor(fmt.Sprintf("node %d's view of the replicas of payments/0", leader), `(() => {
		const p0 = [...document.querySelectorAll("table.cluster-partitions tbody tr")].map((tr) => [...tr.children].map((td) => td.textContent)).find((p) => p[1] === "0");
		return p0 !== undefined && p0[6].split(", ").map((x) => x.replace(/: \d+$/, ": N")).sort().join(", ") === "node 1: N, node 2: N, node 3: N";
	})()`)
	b.screenshot("cluster")
	b.open(base, "topics")
	b.waitFor("the replicas on the Topics page", `(() => {
		const rows = [...document.querySelectorAll('section[data-topic="payments"] table.partitions tbody tr')];
		return rows.length === 3 && rows.every((tr) => tr.children[8].textContent.split(", ").sort().join(", ") === "1, 2, 3" && tr.children[2].textContent === "1");
	})()`)
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Errorf("the console logged errors:\n%s", strings.Join(errs, "\n"))
	}
}

// TestConsoleOff: `rewind serve --console=false` serves no console, and
// the API as before; with the default, /console and / redirect to
// /console/.
func TestConsoleOff(t *testing.T) {
	if testing.Short() {
		t.Skip("a real server")
	}
	bin, _ := builds(t)
	for _, on := range []bool{true, false} {
		base := startServer(t, enginetest.ProcessConfig{Bin: bin, Args: []string{fmt.Sprintf("--console=%t", on)}})
		hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		res, err := hc.Get(base + "/console/")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		want := http.StatusOK
		if !on {
			want = http.StatusNotFound
		}
		if res.StatusCode != want {
			t.Errorf("--console=%t: GET /console/ is %s, want %d", on, res.Status, want)
		}
		if on && !strings.Contains(res.Header.Get("Content-Security-Policy"), "connect-src 'self'") {
			t.Errorf("GET /console/ has no CSP: %q", res.Header.Get("Content-Security-Policy"))
		}
		res, err = hc.Get(base + "/console")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if on && (res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != "/console/") {
			t.Errorf("GET /console is %s to %q, want a redirect to /console/", res.Status, res.Header.Get("Location"))
		}
		res, err = hc.Get(base + "/")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if on && (res.StatusCode != http.StatusFound || res.Header.Get("Location") != "/console/") {
			t.Errorf("GET / is %s to %q, want a redirect to /console/", res.Status, res.Header.Get("Location"))
		}
		if !on && res.StatusCode/100 == 3 {
			t.Errorf("--console=false: GET / redirects (%s to %q)", res.Status, res.Header.Get("Location"))
		}
		if _, err := client.New(base).ListTopics(t.Context()); err != nil {
			t.Errorf("--console=%t: the API fails: %v", on, err)
		}
	}
}

// TestConsoleWithAuth: against a server with --auth the console's calls
// are refused until a token is typed in its header; with one, the pages
// show what the token may see.
func TestConsoleWithAuth(t *testing.T) {
	chromium := needChromium(t)
	bin, _ := builds(t)
	ctx := testContext(t)
	dir := t.TempDir()
	base := startServer(t, enginetest.ProcessConfig{Bin: bin, Dir: dir, Args: []string{"--auth"}})
	tok, err := os.ReadFile(filepath.Join(dir, "bootstrap-token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))
	if _, err := client.New(base, client.WithToken(token)).CreateTopic(ctx, "secured", client.WithPartitions(1)); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, ctx, chromium)
	b.open(base, "topics")
	b.waitFor("a refusal without a token", `(document.querySelector("main .error:not([hidden])")?.textContent ?? "").toLowerCase().includes("unauthenticated")`)
	b.run("type the token", b.set(map[string]string{"#token": token}),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("token").dispatchEvent(new Event("change"))`))
	b.waitFor("the topic listed", `document.querySelector("main").innerText.includes("secured")`)
	// The browser logs the refused calls made before the token (401); any
	// other error is a failure.
	for _, e := range b.pageErrors() {
		if !strings.Contains(e, "status of 401") {
			t.Fatalf("page error: %v", e)
		}
	}
}
