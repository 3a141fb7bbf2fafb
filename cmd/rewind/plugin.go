package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/rewind-io/rewind/sdk/client"
	rewindv1 "github.com/rewind-io/rewind/sdk/gen/rewind/v1"
	"github.com/rewind-io/rewind/sdk/guest/build"
	"github.com/rewind-io/rewind/sdk/guest/scaffold"
)

func newPlugin(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugin",
		Short: "Write, build, test and register WebAssembly filters and transforms",
		Long: `A plugin is a WebAssembly module that a replay runs beside each partition
reader to drop records (a filter) or rewrite them (a transform). Start one
with plugin new, build it with plugin build, try it on a topic with plugin
test, register it with plugin upload, and replay with
rewind replay TOPIC --filter NAME. docs/plugins.md is the tutorial.

A registered module is referred to as NAME (its newest version), NAME@VERSION
or sha256:HEX.`,
	}
	cmd.AddCommand(newPluginNew(), newPluginBuild(), newPluginTest(g), newPluginUpload(g),
		newPluginList(g), newPluginGet(g), newPluginDelete(g))
	return cmd
}

func newPluginNew() *cobra.Command {
	var lang, dir string
	cmd := &cobra.Command{
		Use:   "new NAME [--lang go|assemblyscript] [--dir DIR]",
		Short: "Start a filter project: a key-prefix filter with a JSON config and a test",
		Long: `Write a project that builds a filter module named NAME into DIR (default
./NAME), which must not exist or be empty: a filter that keeps the records
whose key starts with the config's "prefix", a test, and a copy of the
guest SDK, so that it builds without fetching Rewind from anywhere.

NAME is lowercase letters, digits, '-' and '_', starting with a letter (and,
for Go, not a standard library path such as errors).
Go projects need Go; AssemblyScript projects need node and npm (npm ci
fetches the compiler once).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			l := scaffold.Lang(lang)
			if l != scaffold.Go && l != scaffold.AssemblyScript {
				return fmt.Errorf("--lang %q: go or assemblyscript", lang)
			}
			if dir == "" {
				dir = name
			}
			paths, err := scaffold.Write(dir, name, l)
			if err != nil {
				return err
			}
			fmt.Printf("created %s (%s) in %s\n", name, plural(len(paths), "file"), dir)
			fmt.Println("next:")
			cd := "cd " + shellQuote(dir) + " && "
			if l == scaffold.Go {
				fmt.Printf("  %sgo test && rewind plugin build\n", cd)
			} else {
				fmt.Printf("  %snpm ci && npm test && rewind plugin build\n", cd)
			}
			fmt.Printf("  rewind plugin test %s.wasm --topic TOPIC --config '{\"prefix\":\"user-1\"}'\n", name)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&lang, "lang", "go", "language: go or assemblyscript")
	f.StringVar(&dir, "dir", "", "directory to create (default ./NAME)")
	return cmd
}

func newPluginBuild() *cobra.Command {
	var out, name, format string
	cmd := &cobra.Command{
		Use:   "build [DIR] [-o FILE]",
		Short: "Build the module of a Go or AssemblyScript project",
		Long: `Build the project in DIR (default .) into a WebAssembly module, and print its
size and sha256 (the module's identity on the server).

A directory with a go.mod is a Go main package, built with GOOS=wasip1
GOARCH=wasm -buildmode=c-shared. A directory with a package.json is an npm
project: npm ci when node_modules does not match package-lock.json, then
npm run build, which must write build/NAME.wasm; NAME is --name, or the
package name without its scope. The module is written to FILE (default
DIR/NAME.wasm, NAME being the Go module's last path element or the
package name).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			wasm, modName, err := buildProject(cmd, dir, name)
			if err != nil {
				return err
			}
			if out == "" {
				out = filepath.Join(dir, modName+".wasm")
			}
			if err := os.WriteFile(out, wasm, 0o644); err != nil {
				return err
			}
			sum := moduleID(wasm)
			if format == "json" {
				return printJSON(map[string]any{"file": out, "size": len(wasm), "module": sum})
			}
			fmt.Printf("built %s: %s, %s\n", out, plural(len(wasm), "byte"), sum)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "module file to write (default DIR/NAME.wasm)")
	f.StringVar(&name, "name", "", "module name: npm projects take build/NAME.wasm; FILE defaults to DIR/NAME.wasm (default: the Go module's or npm package's name)")
	addFormat(cmd, &format)
	return cmd
}

// buildProject builds the Go or npm project in dir and returns the module
// and its name.
func buildProject(cmd *cobra.Command, dir, name string) ([]byte, string, error) {
	if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
		if name == "" {
			name = goModuleName(b, dir)
		}
		wasm, err := build.Go(cmd.Context(), dir)
		return wasm, name, err
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, "", err
	}
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("%s is not a project: no go.mod or package.json (start one with rewind plugin new)", dir)
	} else if err != nil {
		return nil, "", err
	}
	chosen := name != ""
	if !chosen {
		var pkg struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(b, &pkg); err != nil {
			return nil, "", fmt.Errorf("%s: %w", filepath.Join(dir, "package.json"), err)
		}
		name = path.Base(pkg.Name) // "@scope/name" builds name
		if pkg.Name == "" {
			name = dirBase(dir)
		}
	}
	wasm, err := build.AssemblyScript(dir, name)
	if err != nil && !chosen {
		err = suggestModules(err, dir)
	}
	return wasm, name, err
}

// suggestModules adds to the error of a build that did not write
// build/NAME.wasm the modules it did write, if any.
func suggestModules(err error, dir string) error {
	built, _ := filepath.Glob(filepath.Join(dir, "build", "*.wasm"))
	if len(built) == 0 {
		return err
	}
	names := make([]string, len(built))
	for i, b := range built {
		names[i] = strings.TrimSuffix(filepath.Base(b), ".wasm")
	}
	if len(names) > 8 {
		names = append(names[:8], "...")
	}
	return fmt.Errorf("%w\nthe project built %s: choose one with --name", err, strings.Join(names, ", "))
}

// goModuleName is the last element of the module path in go.mod, or the
// directory's name.
func goModuleName(gomod []byte, dir string) string {
	for line := range strings.Lines(string(gomod)) {
		if mod, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			if p := strings.Trim(strings.TrimSpace(mod), `"`); p != "" {
				return path.Base(p)
			}
		}
	}
	return dirBase(dir)
}

func dirBase(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return filepath.Base(dir)
	}
	return filepath.Base(abs)
}

// moduleID is a module's identity as the server names it.
func moduleID(wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// readModuleArg tells a module file from a plugin reference: an argument
// ending in .wasm is a file (and must exist); anything else is NAME,
// NAME@VERSION or sha256:HEX.
func readModuleArg(arg string) (module []byte, ref string, err error) {
	if !strings.HasSuffix(arg, ".wasm") {
		return nil, arg, nil
	}
	b, err := os.ReadFile(arg)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("%s: no such file (a registered plugin is NAME, NAME@VERSION or sha256:HEX)", arg)
	}
	return b, "", err
}

func newPluginTest(g *globals) *cobra.Command {
	var (
		topic, from, config, format, records string
		limit                                uint32
		parts                                partitionsFlag
	)
	cmd := &cobra.Command{
		Use:   "test NAME|FILE (--topic T [--from POS] [--limit N] [--partition P]... | --records FILE) [--config JSON]",
		Short: "Run a module over records of a topic, or sample records, and show what it keeps, drops and replaces",
		Long: `Run a module over up to --limit records of a topic (default 100, at most
10000, partition by partition) read from --from (default earliest; see
rewind replay --help for POS), and print for each record whether the module
kept it, dropped it or replaced it (with the replacements), then the totals.
Nothing is delivered to anyone and nothing is stored.

Instead of --topic, --records FILE (- for standard input) gives sample
records, one JSON object per line with the fields of rewind publish --input
json ("key", "value", "headers") and an optional "offset" (default: the
line's index from 0).

FILE, a path ending in .wasm, is sent with the request; otherwise the
argument is a registered plugin: NAME, NAME@VERSION or sha256:HEX. If the
module fails, the failure (kind, partition, offset, reason) is printed and
the command exits with status 1.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			module, ref, err := readModuleArg(args[0])
			if err != nil {
				return err
			}
			start, err := client.ParsePosition(from)
			if err != nil {
				return fmt.Errorf("--from: %w", err)
			}
			if (topic == "") == (records == "") {
				return errors.New("give --topic or --records (one of them)")
			}
			src := client.TestSource{Topic: topic, From: &start, Limit: limit, Partitions: parts}
			if records != "" {
				if src.Records, err = readTestRecords(cmd, records); err != nil {
					return err
				}
				src.Topic, src.From = "", nil
			}
			var cfg []byte
			if config != "" {
				cfg = []byte(config)
			}
			rep, err := g.client().TestPlugin(cmd.Context(), ref, module, cfg, src)
			if err != nil {
				return err
			}
			if format == "json" {
				if err := printTestJSON(rep); err != nil {
					return err
				}
			} else if err := printTestText(rep); err != nil {
				return err
			}
			if f := rep.Failure; f != nil {
				return fmt.Errorf("the module failed (%s) on partition %d at offset %d: %s", failureKind(f), f.GetPartition(), f.GetOffset(), f.GetReason())
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&topic, "topic", "", "topic to read")
	f.StringVar(&records, "records", "", "sample records instead of a topic: a file of JSON lines, or - for stdin")
	f.StringVar(&from, "from", "earliest", "start position")
	f.Uint32Var(&limit, "limit", 0, "records to read in all (default 100, at most 10000)")
	f.StringVar(&config, "config", "", "the module's config (JSON, as the module expects)")
	f.Var(&parts, "partition", "partition to read (repeatable; default all)")
	addFormat(cmd, &format)
	return cmd
}

// verdict is what a module did with one input: kept (delivered
// unchanged), dropped, or replaced (by a transform, with one output or
// several), as the server reports the action the module wrote.
func verdict(r client.TestResult) string {
	switch {
	case len(r.Outputs) == 0:
		return "dropped"
	case len(r.Outputs) == 1 && !slices.Contains(r.Replaced, true):
		return "kept"
	}
	return "replaced"
}

func failureKind(f *rewindv1.FilterError) string {
	return strings.ToLower(strings.TrimPrefix(f.GetFailure().String(), "FILTER_FAILURE_"))
}

// printTestText prints one line per input (partition, offset, verdict,
// key, value, as replay prints them), one indented "->" line per
// replacement, and the totals.
func printTestText(rep *client.TestReport) error {
	w := newRecordWriter(os.Stdout, "text")
	line := func(cols ...string) { fmt.Fprintln(w.w, strings.Join(cols, "\t")) }
	keyText := func(k []byte) string {
		if len(k) == 0 {
			return "-"
		}
		return printable(k)
	}
	for _, r := range rep.Results {
		v := verdict(r)
		line(fmt.Sprint(r.Input.Partition), fmt.Sprint(r.Input.Offset), v, keyText(r.Input.Key), printable(r.Input.Value))
		if v == "replaced" {
			for _, o := range r.Outputs {
				line("", "", "->", keyText(o.Key), printable(o.Value))
			}
		}
	}
	fmt.Fprintf(w.w, "scanned %d, kept %d, dropped %d, emitted %d; module %s\n",
		rep.Scanned, rep.Kept, rep.Scanned-min(rep.Kept, rep.Scanned), rep.Emitted, rep.Module)
	return w.flush()
}

// recordJSON is r in the shape replay --format json prints.
func recordJSON(r *client.Record) (json.RawMessage, error) {
	var b bytes.Buffer
	w := newRecordWriter(&b, "json")
	if err := w.write(r); err != nil {
		return nil, err
	}
	if err := w.flush(); err != nil {
		return nil, err
	}
	return bytes.TrimSpace(b.Bytes()), nil
}

func printTestJSON(rep *client.TestReport) error {
	type result struct {
		Partition uint32            `json:"partition"`
		Offset    uint64            `json:"offset"`
		Result    string            `json:"result"`
		Input     json.RawMessage   `json:"input"`
		Outputs   []json.RawMessage `json:"outputs"`
	}
	out := map[string]any{
		"module": rep.Module, "scanned": rep.Scanned, "kept": rep.Kept,
		"dropped": rep.Scanned - min(rep.Kept, rep.Scanned), "emitted": rep.Emitted,
	}
	results := []result{}
	for i := range rep.Results {
		r := &rep.Results[i]
		in, err := recordJSON(&r.Input)
		if err != nil {
			return err
		}
		res := result{Partition: r.Input.Partition, Offset: r.Input.Offset, Result: verdict(*r), Input: in, Outputs: []json.RawMessage{}}
		for j := range r.Outputs {
			o, err := recordJSON(&r.Outputs[j])
			if err != nil {
				return err
			}
			res.Outputs = append(res.Outputs, o)
		}
		results = append(results, res)
	}
	out["results"] = results
	if f := rep.Failure; f != nil {
		out["failure"] = failureJSON(f)
	}
	return printJSON(out)
}

func failureJSON(f *rewindv1.FilterError) map[string]any {
	return map[string]any{
		"kind": failureKind(f), "module": f.GetModule(), "partition": f.GetPartition(), "offset": f.GetOffset(),
		"reason": f.GetReason(), "resume_token": f.GetResumeToken(),
	}
}

func newPluginUpload(g *globals) *cobra.Command {
	var description, format string
	var noWait bool
	cmd := &cobra.Command{
		Use:   "upload NAME FILE [--description D] [--no-wait]",
		Short: "Register a module as the next version of NAME",
		Long: `Check FILE on the server (it must parse, keep within the server's limits
and import only what filters may) and register it as the next version of
NAME. The server then compiles it in the background, which checks that it
speaks ABI v1 and instantiates; upload waits for that and says on stderr
how it goes, unless --no-wait (then see plugin get). A module that does not
compile stays registered, marked failed: upload exits 1 saying why, and
replays that name it fail. Uploading the bytes NAME's newest version
already has adds nothing and says "unchanged". NAME is letters, digits,
'.', '_' and '-'.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			wasm, err := os.ReadFile(args[1])
			if err != nil {
				return err
			}
			c := g.client()
			p, unchanged, err := c.UploadPlugin(cmd.Context(), args[0], wasm, description)
			if err != nil {
				return err
			}
			if !noWait {
				if p, err = waitCompiled(cmd.Context(), c, p); err != nil {
					return err
				}
				if p.CompileState == "failed" {
					return fmt.Errorf("%s %s is registered but does not compile: %s\n(delete it with: rewind plugin delete %s)",
						p.Ref(), p.Module, p.CompileError, p.Ref())
				}
			}
			if format == "json" {
				m := pluginJSON(p)
				m["unchanged"] = unchanged
				return printJSON(m)
			}
			if unchanged {
				fmt.Printf("%s %s unchanged: the newest version of %s already has these bytes\n", p.Ref(), p.Module, p.Name)
				return nil
			}
			fmt.Printf("uploaded %s %s (%s)\n", p.Ref(), p.Module, plural(p.Size, "byte"))
			return nil
		},
	}
	cmd.Flags().StringVar(&description, "description", "", "what the module does")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "do not wait for the server to compile the module")
	addFormat(cmd, &format)
	return cmd
}

// compilePoll is how often waitCompiled asks how a compile goes.
const compilePoll = 200 * time.Millisecond

// waitCompiled waits while the server compiles p, saying so on stderr,
// and returns p as it ends (compiled, failed, or not compiled on the node
// that answered).
func waitCompiled(ctx context.Context, c *client.Client, p client.Plugin) (client.Plugin, error) {
	if p.CompileState != "compiling" {
		return p, nil
	}
	start := time.Now()
	fmt.Fprintf(os.Stderr, "compiling %s on the server...\n", p.Ref())
	t := time.NewTicker(compilePoll)
	defer t.Stop()
	for p.CompileState == "compiling" {
		select {
		case <-ctx.Done():
			return p, fmt.Errorf("stopped waiting for the compile (the upload is stored; see rewind plugin get %s): %w", p.Ref(), ctx.Err())
		case <-t.C:
		}
		var err error
		if p, _, err = c.GetPlugin(ctx, p.Ref(), false); err != nil {
			return p, err
		}
	}
	fmt.Fprintf(os.Stderr, "%s %s after %.1fs\n", p.Ref(), p.CompileState, time.Since(start).Seconds())
	return p, nil
}

func newPluginList(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "list [NAME]",
		Short: "List registered modules, every version (of NAME)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			ps, err := g.client().ListPlugins(cmd.Context(), name)
			if err != nil {
				return err
			}
			if format == "json" {
				out := make([]any, len(ps))
				for i, p := range ps {
					out[i] = pluginJSON(p)
				}
				return printJSON(out)
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tVERSION\tMODULE\tSIZE\tUPLOADED\tSTATE\tDESCRIPTION")
			for _, p := range ps {
				fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%s\t%s\t%s\n", p.Name, p.Version, p.Module, p.Size,
					p.UploadTime.UTC().Format(time.RFC3339), compileState(p), printable([]byte(p.Description)))
			}
			return w.Flush()
		},
	}
	addFormat(cmd, &format)
	return cmd
}

func newPluginGet(g *globals) *cobra.Command {
	var out, format string
	cmd := &cobra.Command{
		Use:   "get REF [-o FILE]",
		Short: "Describe a registered module (NAME, NAME@VERSION or sha256:HEX); -o saves its bytes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			p, wasm, err := g.client().GetPlugin(cmd.Context(), args[0], out != "")
			if err != nil {
				return err
			}
			if out != "" {
				if err := os.WriteFile(out, wasm, 0o644); err != nil {
					return err
				}
			}
			if format == "json" {
				m := pluginJSON(p)
				if out != "" {
					m["file"] = out
				}
				return printJSON(m)
			}
			fmt.Printf("%s %s\n", p.Ref(), p.Module)
			fmt.Printf("size %d bytes, uploaded %s, buffers: input %d, output %d bytes\n",
				p.Size, p.UploadTime.UTC().Format(time.RFC3339Nano), p.InputBufferBytes, p.OutputBufferBytes)
			fmt.Printf("imports: %s\n", strings.Join(p.Imports, ", "))
			fmt.Printf("compile: %s\n", compileState(p))
			if p.CompileError != "" {
				fmt.Printf("compile error: %s\n", printable([]byte(p.CompileError)))
			}
			if p.Description != "" {
				fmt.Printf("description: %s\n", printable([]byte(p.Description)))
			}
			if out != "" {
				fmt.Printf("wrote %s (%s)\n", out, plural(len(wasm), "byte"))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the module's bytes to FILE")
	addFormat(cmd, &format)
	return cmd
}

func newPluginDelete(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "delete NAME|NAME@VERSION",
		Short: "Delete one version of a module, or every version of NAME",
		Long: `Delete NAME@VERSION, or every version of NAME. Replays already running
with the module keep it; new replays that name it fail with NotFound.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			ps, err := g.client().DeletePlugin(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if format == "json" {
				out := make([]any, len(ps))
				for i, p := range ps {
					out[i] = pluginJSON(p)
				}
				return printJSON(map[string]any{"deleted": out})
			}
			for _, p := range ps {
				fmt.Printf("deleted %s %s\n", p.Ref(), p.Module)
			}
			return nil
		},
	}
	addFormat(cmd, &format)
	return cmd
}

// filterFlags are replay's filter flags.
type filterFlags struct {
	ref, file, config string
	contains          string
}

func (f *filterFlags) add(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.ref, "filter", "", "run a registered filter or transform: NAME, NAME@VERSION or sha256:HEX")
	fs.StringVar(&f.file, "filter-file", "", "run the module in this .wasm file (sent with the request)")
	fs.StringVar(&f.config, "filter-config", "", "the module's config (JSON, as the module expects)")
	cmd.MarkFlagsMutuallyExclusive("filter", "filter-file")
	fs.StringVar(&f.contains, "contains", "", "only the records whose key, value or a header contains this text (exact, case-sensitive; tested by the server before any filter)")
}

// options returns the subscribe options of the flags: none without a
// filter or --contains.
func (f *filterFlags) options() ([]client.SubscribeOption, error) {
	var opts []client.SubscribeOption
	if f.contains != "" {
		opts = append(opts, client.Contains([]byte(f.contains)))
	}
	fopt, err := f.filterOption()
	if fopt != nil {
		opts = append(opts, fopt)
	}
	return opts, err
}

// filterOption returns the filter's subscribe option, nil without one.
func (f *filterFlags) filterOption() (client.SubscribeOption, error) {
	var config []byte
	if f.config != "" {
		config = []byte(f.config)
	}
	switch {
	case f.ref != "":
		return client.Filter(f.ref, config), nil
	case f.file != "":
		wasm, err := os.ReadFile(f.file)
		if err != nil {
			return nil, fmt.Errorf("--filter-file: %w", err)
		}
		return client.InlineFilter(wasm, config), nil
	case f.config != "":
		return nil, fmt.Errorf("--filter-config needs --filter or --filter-file")
	}
	return nil, nil
}

// resumeCommand is the replay command that continues from token with
// the same stop, filter and --contains.
func (f *filterFlags) resumeCommand(topic, token, to string, follow bool) string {
	a := []string{"rewind", "replay", shellQuote(topic), "--from", "token:" + token}
	if to != "" {
		a = append(a, "--to", shellQuote(to))
	}
	if follow {
		a = append(a, "--follow")
	}
	if f.ref != "" {
		a = append(a, "--filter", shellQuote(f.ref))
	}
	if f.file != "" {
		a = append(a, "--filter-file", shellQuote(f.file))
	}
	if f.config != "" {
		a = append(a, "--filter-config", shellQuote(f.config))
	}
	if f.contains != "" {
		a = append(a, "--contains", shellQuote(f.contains))
	}
	return strings.Join(a, " ")
}

// filterFailedError is the end of a replay whose filter failed: where,
// why, and how to continue. It renders the Connect code itself, and does
// not unwrap, so that it is printed as a whole.
type filterFailedError struct {
	err    error
	fe     *rewindv1.FilterError
	resume string
}

func (e *filterFailedError) Error() string {
	fe := e.fe
	if fe.GetFailure() == rewindv1.FilterFailure_FILTER_FAILURE_CONFIG {
		// Resuming with the same config fails the same way: say to fix it.
		return fmt.Sprintf("%s: filter %s refused its config: %s\nfix --filter-config and run again (--from token:%s continues where this replay stopped)",
			connect.CodeOf(e.err), fe.GetModule(), fe.GetReason(), fe.GetResumeToken())
	}
	return fmt.Sprintf("%s: filter %s failed (%s) on partition %d at offset %d: %s\nresume with: %s",
		connect.CodeOf(e.err), fe.GetModule(), failureKind(fe), fe.GetPartition(), fe.GetOffset(), fe.GetReason(), e.resume)
}

// filterFailed turns err into a *filterFailedError when it carries a
// FilterError with a resume token, and returns it unchanged otherwise.
func filterFailed(err error, resume func(token string) string) error {
	fe := client.FilterFailureOf(err)
	if fe == nil || fe.GetResumeToken() == "" {
		return err
	}
	return &filterFailedError{err: err, fe: fe, resume: resume(fe.GetResumeToken())}
}

// compileState is p's compile state for a table: one word.
func compileState(p client.Plugin) string {
	switch p.CompileState {
	case "":
		return "unknown"
	case "not compiled":
		return "not-compiled"
	}
	return p.CompileState
}

func pluginJSON(p client.Plugin) map[string]any {
	imports := p.Imports
	if imports == nil {
		imports = []string{}
	}
	return map[string]any{
		"name": p.Name, "version": p.Version, "ref": p.Ref(), "module": p.Module, "size": p.Size,
		"upload_time": p.UploadTime.UTC().Format(time.RFC3339Nano), "description": p.Description,
		"imports": imports, "input_buffer_bytes": p.InputBufferBytes, "output_buffer_bytes": p.OutputBufferBytes,
		"compile_state": compileState(p), "compile_error": p.CompileError,
	}
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	safe := s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r))
	}) < 0
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// testRecord is one line of plugin test --records.
type testRecord struct {
	Key     *string           `json:"key"`
	Value   string            `json:"value"`
	Headers map[string]string `json:"headers"`
	Offset  *uint64           `json:"offset"`
}

// readTestRecords reads the sample records of plugin test --records.
func readTestRecords(cmd *cobra.Command, path string) ([]client.Record, error) {
	var r io.Reader = cmd.InOrStdin()
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	var out []client.Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var in testRecord
		if err := json.Unmarshal(sc.Bytes(), &in); err != nil {
			return nil, fmt.Errorf("--records line %d: %w", line, err)
		}
		rec := client.Record{Offset: uint64(len(out)), Value: []byte(in.Value)}
		if in.Offset != nil {
			rec.Offset = *in.Offset
		}
		if in.Key != nil {
			rec.Key = []byte(*in.Key)
		}
		for _, k := range slices.Sorted(maps.Keys(in.Headers)) {
			rec.Headers = append(rec.Headers, client.Header{Key: k, Value: []byte(in.Headers[k])})
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--records: %w", err)
	}
	if len(out) == 0 {
		return nil, errors.New("--records: no records")
	}
	return out, nil
}
