//go:build unix

package main

// End-to-end tests of `rewind plugin` and filtered replays, with the real
// binary, a real server, and modules built from source: a user scaffolds a
// project in each language, builds it, tries it on a topic, uploads it,
// replays through it, and sees a failing module stop a replay with the
// offset and a resume command.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/guest/build"
)

// parseFiltered parses `replay --format json` output of a filtered
// replay, whose offsets are not dense.
func parseFiltered(t *testing.T, out string) []record {
	t.Helper()
	var recs []record
	for _, line := range splitLines(t, out) {
		var r record
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.Key == nil || r.Value == nil {
			t.Fatalf("replay line %q: %v", line, err)
		}
		r.line = line
		recs = append(recs, r)
	}
	return recs
}

// hasKeyPrefix is the keyprefix filter, in Go.
func hasKeyPrefix(p string) func(record) bool {
	return func(r record) bool { return strings.HasPrefix(*r.Key, p) }
}

// testReport is `plugin test --format json`.
type testReport struct {
	Module                          string
	Scanned, Kept, Dropped, Emitted uint64
	Results                         []struct {
		Partition uint32
		Offset    uint64
		Result    string
		Input     record
		Outputs   []record
	}
	Failure *struct {
		Kind, Module, Reason string
		Partition            uint32
		Offset               uint64
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestPluginCLI(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), enginetest.FreeAddr(t))
	work := t.TempDir()

	// 60 records over 3 partitions, keys user-0 .. user-11.
	srv.ok(t, nil, "topic", "create", "orders", "--partitions", "3")
	var in bytes.Buffer
	for i := range 60 {
		fmt.Fprintf(&in, `{"key":"user-%d","value":"{\"n\":%d}"}`+"\n", i%12, i)
	}
	srv.ok(t, in.Bytes(), "publish", "orders", "--input", "json")
	all := parseReplay(t, srv.ok(t, nil, "replay", "orders", "--from", "earliest", "--format", "json"))
	if len(all) != 60 {
		t.Fatalf("replayed %d records, want 60", len(all))
	}
	const config = `{"prefix":"user-1"}`
	wantKept := subset(all, hasKeyPrefix("user-1")) // user-1, user-10, user-11
	if count(wantKept) != 15 {
		t.Fatalf("%d records with the prefix, want 15", count(wantKept))
	}
	// replayFiltered replays orders with the extra flags and checks that
	// exactly the records with the prefix come back, in order.
	replayFiltered := func(t *testing.T, flags ...string) {
		t.Helper()
		args := append([]string{"replay", "orders", "--from", "earliest", "--format", "json"}, flags...)
		got := byPartition(parseFiltered(t, srv.ok(t, nil, args...)))
		if d := cmp.Diff(wantKept, got); d != "" {
			t.Errorf("replay %s (-want +got):\n%s", strings.Join(flags, " "), d)
		}
	}

	var goModule []byte // the Go project's module, as built
	var goSHA string
	if !t.Run("go project", func(t *testing.T) {
		dir := filepath.Join(work, "kp")
		out := srv.ok(t, nil, "plugin", "new", "kp", "--lang", "go", "--dir", dir)
		if !strings.Contains(out, "created kp") || !strings.Contains(out, "go test") {
			t.Errorf("plugin new printed %q", out)
		}
		srv.fails(t, "not empty", "plugin", "new", "kp", "--dir", dir)
		srv.fails(t, "bad project name", "plugin", "new", "Bad.Name", "--dir", filepath.Join(work, "bad"))
		srv.fails(t, "--lang", "plugin", "new", "x", "--lang", "rust", "--dir", filepath.Join(work, "x"))

		// The project tests natively, offline.
		test := exec.Command("go", "test", "-count=1", "./...")
		test.Dir, test.Env = dir, cliEnv("GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
		if b, err := test.CombinedOutput(); err != nil {
			t.Fatalf("go test in the scaffold: %v\n%s", err, b)
		}

		out = srv.ok(t, nil, "plugin", "build", dir)
		file := filepath.Join(dir, "kp.wasm")
		var err error
		if goModule, err = os.ReadFile(file); err != nil {
			t.Fatal(err)
		}
		goSHA = sha256Hex(goModule)
		if want := fmt.Sprintf("built %s: %d bytes, sha256:%s\n", file, len(goModule), goSHA); out != want {
			t.Errorf("plugin build printed %q, want %q", out, want)
		}

		out = srv.ok(t, nil, "plugin", "upload", "kp", file, "--description", "key prefix")
		if want := fmt.Sprintf("uploaded kp@1 sha256:%s (%d bytes)\n", goSHA, len(goModule)); out != want {
			t.Errorf("plugin upload printed %q, want %q", out, want)
		}
		if out := srv.ok(t, nil, "plugin", "upload", "kp", file); !strings.HasPrefix(out, "kp@1 sha256:"+goSHA+" unchanged") {
			t.Errorf("second upload printed %q, want kp@1 ... unchanged", out)
		}

		lines := splitLines(t, srv.ok(t, nil, "plugin", "list"))
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME") || !regexp.MustCompile(`^kp +1 +sha256:`+goSHA+` +\d+ +\S+ +compiled +key prefix$`).MatchString(lines[1]) {
			t.Errorf("plugin list:\n%s", strings.Join(lines, "\n"))
		}
		var listed []map[string]any
		if err := json.Unmarshal([]byte(srv.ok(t, nil, "plugin", "list", "kp", "--format", "json")), &listed); err != nil {
			t.Fatal(err)
		}
		if len(listed) != 1 || listed[0]["ref"] != "kp@1" || listed[0]["module"] != "sha256:"+goSHA || listed[0]["compile_state"] != "compiled" {
			t.Errorf("plugin list kp --format json: %v", listed)
		}

		for _, ref := range []string{"kp", "kp@1", "sha256:" + goSHA} {
			replayFiltered(t, "--filter", ref, "--filter-config", config)
		}

		saved := filepath.Join(work, "saved.wasm")
		if out := srv.ok(t, nil, "plugin", "get", "kp", "-o", saved); !strings.HasPrefix(out, "kp@1 sha256:"+goSHA+"\n") {
			t.Errorf("plugin get printed %q", out)
		}
		if b, err := os.ReadFile(saved); err != nil || !bytes.Equal(b, goModule) {
			t.Errorf("plugin get -o wrote %d bytes (%v), not the uploaded module", len(b), err)
		}
	}) {
		return // the rest uses the project's module
	}

	t.Run("plugin test --records", func(t *testing.T) {
		in := `{"key":"user-1a","value":"v1","offset":7}` + "\n" + `{"key":"other","value":"v2"}` + "\n\n" + `{"key":"user-12","value":"v3","headers":{"h":"x"}}` + "\n"
		lines := splitLines(t, srv.ok(t, []byte(in), "plugin", "test", "kp", "--records", "-", "--config", config))
		want := []string{"0\t7\tkept\tuser-1a\tv1", "0\t1\tdropped\tother\tv2", "0\t2\tkept\tuser-12\tv3",
			"scanned 3, kept 2, dropped 1, emitted 2; module sha256:" + goSHA}
		if d := cmp.Diff(want, lines); d != "" {
			t.Errorf("plugin test --records (-want +got):\n%s", d)
		}
		srv.fails(t, "one of them", "plugin", "test", "kp", "--records", "-", "--topic", "orders")
		srv.fails(t, "no records", "plugin", "test", "kp", "--records", "/dev/stdin")
	})

	t.Run("plugin test", func(t *testing.T) {
		// By reference, in JSON: one result per record, in partition order.
		var rep testReport
		out := srv.ok(t, nil, "plugin", "test", "kp", "--topic", "orders", "--from", "earliest", "--limit", "1000", "--config", config, "--format", "json")
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if rep.Module != "sha256:"+goSHA || rep.Scanned != 60 || rep.Kept != 15 || rep.Dropped != 45 || rep.Emitted != 15 || len(rep.Results) != 60 || rep.Failure != nil {
			t.Fatalf("plugin test report: module %s, scanned %d, kept %d, dropped %d, emitted %d, %d results, failure %+v",
				rep.Module, rep.Scanned, rep.Kept, rep.Dropped, rep.Emitted, len(rep.Results), rep.Failure)
		}
		for _, r := range rep.Results {
			want := "dropped"
			if strings.HasPrefix(*r.Input.Key, "user-1") {
				want = "kept"
			}
			if r.Result != want || (want == "kept") != (len(r.Outputs) == 1) {
				t.Errorf("p%d@%d key %s: %s with %d outputs, want %s", r.Partition, r.Offset, *r.Input.Key, r.Result, len(r.Outputs), want)
			}
		}

		// A file, in text, from an offset of one partition.
		file := filepath.Join(work, "kp", "kp.wasm")
		lines := splitLines(t, srv.ok(t, nil, "plugin", "test", file, "--topic", "orders", "--from", "2", "--partition", "1", "--config", config))
		var p1 []record
		for _, r := range all {
			if r.Partition == 1 && r.Offset >= 2 {
				p1 = append(p1, r)
			}
		}
		if len(lines) != len(p1)+1 {
			t.Fatalf("plugin test printed %d lines for %d records:\n%s", len(lines), len(p1), strings.Join(lines, "\n"))
		}
		kept := 0
		for i, r := range p1 {
			verdict := "dropped"
			if hasKeyPrefix("user-1")(r) {
				verdict = "kept"
				kept++
			}
			if want := fmt.Sprintf("1\t%d\t%s\t%s\t%s", r.Offset, verdict, *r.Key, *r.Value); lines[i] != want {
				t.Errorf("line %d: %q, want %q", i, lines[i], want)
			}
		}
		if want := fmt.Sprintf("scanned %d, kept %d, dropped %d, emitted %d; module sha256:%s", len(p1), kept, len(p1)-kept, kept, goSHA); lines[len(p1)] != want {
			t.Errorf("totals %q, want %q", lines[len(p1)], want)
		}
		srv.fails(t, "no such file", "plugin", "test", filepath.Join(work, "missing.wasm"), "--topic", "orders")
	})

	t.Run("filter file", func(t *testing.T) {
		wasm, err := build.Go(context.Background(), "../../sdk/guest/examples/go/keyprefix")
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(work, "keyprefix.wasm")
		if err := os.WriteFile(file, wasm, 0o644); err != nil {
			t.Fatal(err)
		}
		replayFiltered(t, "--filter-file", file, "--filter-config", config)
		// A transform: every value has the field, so every record is
		// replaced.
		redact, err := build.Go(context.Background(), "../../sdk/guest/examples/go/redact")
		if err != nil {
			t.Fatal(err)
		}
		redactFile := filepath.Join(work, "redact.wasm")
		if err := os.WriteFile(redactFile, redact, 0o644); err != nil {
			t.Fatal(err)
		}
		lines := splitLines(t, srv.ok(t, nil, "plugin", "test", redactFile, "--topic", "orders", "--partition", "0", "--limit", "2", "--config", `{"field":"n","with":"x"}`))
		var p0 []record
		for _, r := range all {
			if r.Partition == 0 && len(p0) < 2 {
				p0 = append(p0, r)
			}
		}
		want := []string{
			fmt.Sprintf("0\t%d\treplaced\t%s\t%s", p0[0].Offset, *p0[0].Key, *p0[0].Value),
			fmt.Sprintf("\t\t->\t%s\t{\"n\":\"x\"}", *p0[0].Key),
			fmt.Sprintf("0\t%d\treplaced\t%s\t%s", p0[1].Offset, *p0[1].Key, *p0[1].Value),
			fmt.Sprintf("\t\t->\t%s\t{\"n\":\"x\"}", *p0[1].Key),
			"scanned 2, kept 2, dropped 0, emitted 2; module sha256:" + sha256Hex(redact),
		}
		if d := cmp.Diff(want, lines); d != "" {
			t.Errorf("plugin test of a transform (-want +got):\n%s", d)
		}

		srv.fails(t, "none of the others can be", "replay", "orders", "--from", "earliest", "--filter", "kp", "--filter-file", file)
		srv.fails(t, "--filter-config needs --filter", "replay", "orders", "--from", "earliest", "--filter-config", config)
	})

	t.Run("errors", func(t *testing.T) {
		garbage := filepath.Join(work, "garbage.wasm")
		if err := os.WriteFile(garbage, []byte("not a module"), 0o644); err != nil {
			t.Fatal(err)
		}
		srv.fails(t, "invalid_argument", "plugin", "upload", "junk", garbage)
		if out := srv.ok(t, nil, "plugin", "list", "junk", "--format", "json"); strings.TrimSpace(out) != "[]" {
			t.Errorf("a refused upload was stored: %s", out)
		}
		// A config the module refuses fails the replay at rewind_init,
		// with the module's own reason and a hint to fix the config (not
		// to resume with the same one).
		r := srv.cli(t, nil, "replay", "orders", "--from", "earliest", "--filter", "kp", "--filter-config", `{"prefix":1}`)
		if r.code != 1 || !regexp.MustCompile(`(?m)^rewind: invalid_argument: filter sha256:`+goSHA+` refused its config: .*rewind_init returned 1: .*kp: "prefix" must be a JSON string\n`+
			`fix --filter-config and run again \(--from token:\S+ continues where this replay stopped\)\n\z`).MatchString(r.stderr) {
			t.Errorf("replay with a refused config: exit code %d, stderr %q; want the module's reason and a hint to fix the config", r.code, r.stderr)
		}

		if out := srv.ok(t, nil, "plugin", "delete", "kp@1"); out != "deleted kp@1 sha256:"+goSHA+"\n" {
			t.Errorf("plugin delete printed %q", out)
		}
		srv.fails(t, "not_found", "replay", "orders", "--from", "earliest", "--filter", "kp@1")
		srv.fails(t, "not_found", "plugin", "delete", "kp")
	})

	t.Run("failing module", func(t *testing.T) {
		// plugin build on the SDK's npm project, which holds the hostile
		// modules: build.AssemblyScript(dir, "loop").
		loop := filepath.Join(work, "loop.wasm")
		srv.fails(t, "choose one with --name", "plugin", "build", "../../sdk/guest/assemblyscript", "-o", loop)
		srv.ok(t, nil, "plugin", "build", "../../sdk/guest/assemblyscript", "--name", "loop", "-o", loop)
		r := srv.cli(t, nil, "replay", "orders", "--from", "earliest", "--filter-file", loop)
		m := regexp.MustCompile(`(?m)^rewind: resource_exhausted: filter sha256:[0-9a-f]{64} failed \(fuel\) on partition (\d) at offset (\d+): .*\n` +
			`resume with: rewind replay orders --from token:(\S+) --filter-file \S+loop.wasm\n\z`).FindStringSubmatch(r.stderr)
		if r.code != 1 || m == nil {
			t.Fatalf("replay with an endless loop: exit code %d, stderr %q; want 1, the failure and a resume command", r.code, r.stderr)
		}
		if m[2] != "0" {
			t.Errorf("failed at offset %s, want 0 (the first batch)", m[2])
		}
		// The token continues with a working filter: every partition from
		// where the failed replay left it.
		delivered := parseFiltered(t, r.stdout)
		rest := parseFiltered(t, srv.ok(t, nil, "replay", "orders", "--from", "token:"+m[3], "--format", "json", "--filter-file", filepath.Join(work, "keyprefix.wasm"), "--filter-config", `{"prefix":""}`))
		if d := cmp.Diff(byPartition(all), byPartition(append(delivered, rest...))); d != "" {
			t.Errorf("delivered before the failure and after resuming (-want +got):\n%s", d)
		}

		r = srv.cli(t, nil, "plugin", "test", loop, "--topic", "orders")
		if r.code != 1 || !strings.Contains(r.stderr, "failed (fuel) on partition") || !strings.Contains(r.stdout, "scanned 0") {
			t.Errorf("plugin test of an endless loop: exit code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}

		// A module only its compile refuses (it lacks the ABI's exports):
		// the upload is stored, compiles in the background, and upload
		// waits for it and says why it failed; get shows it too.
		wrong := filepath.Join(work, "wrongabi.wasm")
		srv.ok(t, nil, "plugin", "build", "../../sdk/guest/assemblyscript", "--name", "wrongabi", "-o", wrong)
		r = srv.cli(t, nil, "plugin", "upload", "wrong", wrong)
		if r.code != 1 || !regexp.MustCompile(`(?m)^rewind: wrong@1 sha256:[0-9a-f]{64} is registered but does not compile: .*rewind_abi_v1.*\n\(delete it with: rewind plugin delete wrong@1\)\n\z`).MatchString(r.stderr) {
			t.Errorf("upload of a module that does not compile: exit code %d, stderr %q", r.code, r.stderr)
		}
		if out := srv.ok(t, nil, "plugin", "get", "wrong"); !strings.Contains(out, "compile: failed\ncompile error: ") || !strings.Contains(out, "rewind_abi_v1") {
			t.Errorf("plugin get of a module that does not compile:\n%s", out)
		}
		srv.fails(t, "rewind_abi_v1", "replay", "orders", "--from", "earliest", "--filter", "wrong")
		srv.ok(t, nil, "plugin", "delete", "wrong")
	})

	t.Run("assemblyscript project", func(t *testing.T) {
		dir := filepath.Join(work, "askp")
		srv.ok(t, nil, "plugin", "new", "askp", "--lang", "assemblyscript", "--dir", dir)
		out := srv.ok(t, nil, "plugin", "build", dir) // npm ci, then npm run build
		file := filepath.Join(dir, "askp.wasm")
		wasm, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("built %s: %d bytes, sha256:%s\n", file, len(wasm), sha256Hex(wasm)); out != want {
			t.Errorf("plugin build printed %q, want %q", out, want)
		}
		// The project's own test runs the module under node.
		test := exec.Command("npm", "test")
		test.Dir = dir
		if b, err := test.CombinedOutput(); err != nil {
			t.Fatalf("npm test in the scaffold: %v\n%s", err, b)
		}
		srv.ok(t, nil, "plugin", "upload", "askp", file)
		replayFiltered(t, "--filter", "askp", "--filter-config", config)
	})
}

// TestServeFilterFlags checks that serve's filter limits reach the sandbox:
// with one unit of fuel per call every filtered replay runs out, and a
// negative limit is refused at startup.
func TestServeFilterFlags(t *testing.T) {
	srv := startServer(t, t.TempDir(), enginetest.FreeAddr(t), "--filter-fuel", "1", "--filter-memory-mib", "32")
	srv.ok(t, nil, "topic", "create", "f", "--partitions", "1")
	srv.ok(t, nil, "publish", "f", "v", "--key", "k")
	wasm, err := build.AssemblyScript("../../sdk/guest/assemblyscript", "keyprefix")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "kp.wasm")
	if err := os.WriteFile(file, wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	r := srv.cli(t, nil, "replay", "f", "--from", "earliest", "--filter-file", file, "--filter-config", `{"prefix":""}`)
	if r.code != 1 || !strings.Contains(r.stderr, "resource_exhausted") || !strings.Contains(r.stderr, "fuel") {
		t.Fatalf("replay with 1 fuel per call: exit %d, stderr %q; want resource_exhausted and fuel", r.code, r.stderr)
	}

	bad := runCLI(t, nil, nil, "serve", "--listen", enginetest.FreeAddr(t), "--data", t.TempDir(), "--filter-fuel", "-5")
	if bad.code != 1 || !strings.Contains(bad.stderr, "FuelPerCall must not be negative") {
		t.Fatalf("serve --filter-fuel -5: exit %d, stderr %q", bad.code, bad.stderr)
	}
}
