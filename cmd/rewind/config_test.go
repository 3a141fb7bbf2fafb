package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// serveWith returns rewind serve (under the real root, whose global
// flags it shadows) with args parsed, as cobra leaves it before PreRunE.
func serveWith(t *testing.T, args ...string) *cobra.Command {
	t.Helper()
	cmd, _, err := newRoot().Find([]string{"serve"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return cmd
}

// writeConfig writes an HCL file into a temporary directory.
func writeConfig(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rewind.hcl")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func envOf(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

// TestConfigPrecedence sets the same setting at several levels and checks
// which wins: flags over the environment over the file over the default.
func TestConfigPrecedence(t *testing.T) {
	for _, tc := range []struct {
		name string
		flag string // the flag read back
		file string // the file's content; "" no file
		env  map[string]string
		args []string
		want string
	}{
		{name: "default", flag: "tail-cache-mib", want: "256"},
		{name: "file over default", flag: "tail-cache-mib", file: "tail_cache_mib = 100", want: "100"},
		{name: "env over file", flag: "tail-cache-mib", file: "tail_cache_mib = 100", env: map[string]string{"REWIND_TAIL_CACHE_MIB": "200"}, want: "200"},
		{name: "flag over env over file", flag: "tail-cache-mib", file: "tail_cache_mib = 100", env: map[string]string{"REWIND_TAIL_CACHE_MIB": "200"}, args: []string{"--tail-cache-mib", "300"}, want: "300"},
		{name: "flag over file", flag: "tail-cache-mib", file: "tail_cache_mib = 100", args: []string{"--tail-cache-mib=300"}, want: "300"},
		{name: "flag over env", flag: "listen", env: map[string]string{"REWIND_LISTEN": "127.0.0.1:2"}, args: []string{"--listen", "127.0.0.1:3"}, want: "127.0.0.1:3"},
		{name: "an empty variable is unset", flag: "tail-cache-mib", file: "tail_cache_mib = 100", env: map[string]string{"REWIND_TAIL_CACHE_MIB": ""}, want: "100"},
		{name: "bool: env false over file true", flag: "follower-reads", file: "follower_reads = true", env: map[string]string{"REWIND_FOLLOWER_READS": "false"}, want: "false"},
		{name: "bool: file", flag: "console", file: "console = false", want: "false"},
		{name: "duration: file", flag: "raft-tick", file: `raft_tick = "250ms"`, want: "250ms"},
		{name: "float: file", flag: "replay-share", file: "replay_share = 0.25", want: "0.25"},
		{name: "list: file", flag: "initial-cluster", file: `initial_cluster = ["1=127.0.0.1:7071", "2=127.0.0.1:7072"]`, want: "1=127.0.0.1:7071,2=127.0.0.1:7072"},
		{name: "list: also as one string", flag: "join", file: `join = "127.0.0.1:1,127.0.0.1:2"`, want: "127.0.0.1:1,127.0.0.1:2"},
		{name: "list: env over file", flag: "allowed-hosts", file: `allowed_hosts = ["a.example"]`, env: map[string]string{"REWIND_ALLOWED_HOSTS": "b.example,c.example"}, want: "b.example,c.example"},
		{name: "data from env", flag: "data", env: map[string]string{"REWIND_DATA": "/var/lib/rewind"}, want: "/var/lib/rewind"},
		// REWIND_TLS_CERT is the client's certificate (docs/security.md):
		// the server's pair reads REWIND_SERVE_TLS_*.
		{name: "client's REWIND_TLS_CERT is not the server's", flag: "tls-cert", env: map[string]string{"REWIND_TLS_CERT": "alice.crt"}, want: ""},
		{name: "REWIND_SERVE_TLS_CERT", flag: "tls-cert", env: map[string]string{"REWIND_TLS_CERT": "alice.crt", "REWIND_SERVE_TLS_CERT": "node.crt"}, want: "node.crt"},
		{name: "file tls_cert", flag: "tls-cert", file: `tls_cert = "node.crt"`, env: map[string]string{"REWIND_TLS_CERT": "alice.crt"}, want: "node.crt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append([]string{"--config", writeConfig(t, tc.file)}, args...)
			}
			cmd := serveWith(t, args...)
			if err := applyConfig(cmd, envOf(tc.env)); err != nil {
				t.Fatal(err)
			}
			f := cmd.Flags().Lookup(tc.flag)
			if got := f.Value.String(); got != tc.want {
				t.Errorf("--%s = %q, want %q", tc.flag, got, tc.want)
			}
			// Set anywhere is set by the user (the memory plan leaves it).
			if tc.want != f.DefValue && !f.Changed || tc.name == "default" && f.Changed {
				t.Errorf("--%s: Changed %v", tc.flag, f.Changed)
			}
		})
	}
}

// The file is found through --config, else REWIND_CONFIG; the flag wins.
func TestConfigFileFromEnvironment(t *testing.T) {
	byEnv, byFlag := writeConfig(t, "node_id = 7"), writeConfig(t, "node_id = 8")
	for _, tc := range []struct {
		args []string
		want string
	}{{nil, "7"}, {[]string{"--config", byFlag}, "8"}} {
		cmd := serveWith(t, tc.args...)
		if err := applyConfig(cmd, envOf(map[string]string{"REWIND_CONFIG": byEnv})); err != nil {
			t.Fatal(err)
		}
		if got := cmd.Flags().Lookup("node-id").Value.String(); got != tc.want {
			t.Errorf("%q: --node-id %s, want %s", tc.args, got, tc.want)
		}
	}
}

// A flag added to serve later (as the metrics flags were, in a file of
// their own) is an attribute and a variable with no change here. The
// names are ones serve will never have.
func TestConfigCoversFlagsAddedLater(t *testing.T) {
	cmd := serveWith(t)
	var addr string
	var on bool
	cmd.Flags().StringVar(&addr, "later-listen", "", "")
	cmd.Flags().BoolVar(&on, "later-switch", false, "")
	cmd.Flags().StringSlice("later-list", nil, "")
	if err := cmd.ParseFlags([]string{"--config", writeConfig(t, "later_switch = true\nlater_list = [\"a\", \"b,c\"]\n")}); err != nil {
		t.Fatal(err)
	}
	if err := applyConfig(cmd, envOf(map[string]string{"REWIND_LATER_LISTEN": "127.0.0.1:9090"})); err != nil {
		t.Fatal(err)
	}
	list, _ := cmd.Flags().GetStringSlice("later-list")
	if addr != "127.0.0.1:9090" || !on || len(list) != 2 || list[1] != "b,c" {
		t.Errorf("later-listen %q, later-switch %v, later-list %q", addr, on, list)
	}
}

// An unknown attribute is an error naming it and its file:line, and
// nothing of the file is applied.
func TestConfigUnknownAttribute(t *testing.T) {
	p := writeConfig(t, "listen = \"127.0.0.1:1\"\n\ntail_cach_mib = 1\nstore-cache-mib = 2\nserver = \"x\"\nconfig = \"other.hcl\"\n")
	cmd := serveWith(t, "--config", p)
	err := applyConfig(cmd, envOf(nil))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		p + `:3: unknown attribute "tail_cach_mib"`,
		p + `:4: unknown attribute "store-cache-mib": write it store_cache_mib`,
		p + `:5: unknown attribute "server"`, // a client flag is none of serve's
		p + `:6: "config" is no setting of the file`,
		"4 problems",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\nlacks %q", err, want)
		}
	}
	if l := cmd.Flags().Lookup("listen"); l.Changed || l.Value.String() != "127.0.0.1:7070" {
		t.Errorf("a refused file set --listen %s", l.Value)
	}
}

// A value of the wrong type is an error naming the attribute, its
// file:line and the type wanted.
func TestConfigWrongType(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{`tail_cache_mib = "512"`, `:1: tail_cache_mib: want a number`},
		{`tail_cache_mib = 1.5`, `:1: tail_cache_mib: want a whole number, got 1.5`},
		{`tail_cache_mib = 1e19`, `:1: tail_cache_mib = "10000000000000000000": strconv.ParseInt: parsing "10000000000000000000": value out of range`},
		{`tail_cache_mib = 1e30`, `:1: tail_cache_mib: 1e+30 is out of range`},
		{`tail_cache_mib = 1e999999999`, `:1: tail_cache_mib: want a whole number, got +Inf`},
		{`node_id = -1`, `:1: node_id = "-1": strconv.ParseUint`},
		{`follower_reads = "yes"`, `:1: follower_reads: want a bool such as true, got a string`},
		{`raft_tick = 5`, `:1: raft_tick: want a string such as "5s", got a number`},
		{`raft_tick = "soon"`, `:1: raft_tick = "soon": time: invalid duration`},
		{`listen = ["127.0.0.1:1"]`, `:1: listen: want a string such as "text", got a list`},
		{`initial_cluster = ["1=127.0.0.1:1", 2]`, `:1: initial_cluster: element 1: want a string`},
		{`listen = null`, `:1: listen: null is no value`},
		{`listen = { a = 1 }`, `:1: listen: want a string such as "text", got an object`},
		{`listen = var.addr`, `Variables not allowed`},
		{"block {\n}", `Blocks are not allowed here`},
		{`listen = "a"` + "\n" + `listen = "b"`, `Attribute redefined`},
	} {
		p := writeConfig(t, tc.file)
		err := applyConfig(serveWith(t, "--config", p), envOf(nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %v, want one naming %s and %q", tc.file, err, p, tc.want)
		}
	}
}

// A bad environment value is an error naming the variable.
func TestConfigBadEnvValue(t *testing.T) {
	for _, tc := range []struct{ env, value, want string }{
		{"REWIND_TAIL_CACHE_MIB", "lots", `environment variable REWIND_TAIL_CACHE_MIB="lots" (--tail-cache-mib): strconv.ParseInt`},
		{"REWIND_FOLLOWER_READS", "maybe", `environment variable REWIND_FOLLOWER_READS="maybe" (--follower-reads)`},
		{"REWIND_RAFT_TICK", "5", `environment variable REWIND_RAFT_TICK="5" (--raft-tick): time: missing unit`},
		{"REWIND_CONFIG", "/nonexistent/rewind.hcl", `--config: open /nonexistent/rewind.hcl`},
	} {
		err := applyConfig(serveWith(t), envOf(map[string]string{tc.env: tc.value}))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%s: error %v, want %q", tc.env, tc.value, err, tc.want)
		}
	}
}

// The real command refuses a bad file before it runs: nothing listens,
// nothing is created.
func TestServeRefusesABadConfigFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := writeConfig(t, "data = \""+dir+"\"\nelection_ticks = \"ten\"\n")
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"serve", "--config", p})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), p+":2: election_ticks: want a number") {
		t.Errorf("serve --config: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a refused serve created its data directory (%v)", err)
	}
}

// serve --help lists serve's flags, not the client commands' global
// ones, and serve refuses those.
func TestServeHelpListsOnlyServeFlags(t *testing.T) {
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"serve", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	help := out.String()
	for _, want := range []string{"--listen", "--config", "--tail-cache-mib", "--tls-cert string", "serve TLS only", "REWIND_<FLAG>"} {
		if !strings.Contains(help, want) {
			t.Errorf("serve --help lacks %q", want)
		}
	}
	for _, not := range []string{"--server", "--token ", "--tls-ca", "Global Flags"} {
		if strings.Contains(help, not) {
			t.Errorf("serve --help shows %q:\n%s", not, help)
		}
	}
	for _, flag := range []string{"--server", "--tls-ca", "--token"} {
		root := newRoot()
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs([]string{"serve", flag, "x", "--data", filepath.Join(t.TempDir(), "d")})
		if err := root.Execute(); err == nil || !strings.Contains(err.Error(), flag+": a flag of the client commands") {
			t.Errorf("serve %s x: %v", flag, err)
		}
	}
}

// The example file of docs/operations.md ("Configuration") is valid.
func TestOperationsConfigExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, example, ok := strings.Cut(string(doc), "```hcl\n#")
	example, _, ok2 := strings.Cut(example, "```")
	if !ok || !ok2 {
		t.Fatal("docs/operations.md has no ```hcl block")
	}
	cmd := serveWith(t, "--config", writeConfig(t, "#"+example))
	if err := applyConfig(cmd, envOf(nil)); err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{"initial-cluster": "1=10.0.0.1:7070,2=10.0.0.2:7070,3=10.0.0.3:7070", "follower-reads": "true", "tail-cache-mib": "512"} {
		if got := cmd.Flags().Lookup(flag).Value.String(); got != want {
			t.Errorf("--%s %q, want %q", flag, got, want)
		}
	}
}

// FuzzConfigFile: whatever a configuration file holds, applying it gives
// an error or settings, never a panic or a hang.
func FuzzConfigFile(f *testing.F) {
	for _, seed := range []string{
		"listen = \"127.0.0.1:1\"\ntail_cache_mib = 5\n",
		"initial_cluster = [\"1=a:1\", 2]\nfollower_reads = true\n",
		"raft_tick = \"5s\"\nreplay_share = 0.5\n",
		"tail_cache_mib = 1/0\n",
		"node_id = 1e400\n",
		"block { x = 1 }\n",
		"allow_origin = [for o in [\"a\", \"b\"] : o]\n",
	} {
		f.Add(seed)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, content string) {
		p := filepath.Join(dir, "fuzz.hcl")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_ = applyConfig(serveWith(t, "--config", p), envOf(nil))
	})
}

// A hidden flag (for tests: --peer-via) is set on the command line only:
// the file refuses it as unknown, and its variable is not read.
func TestConfigLeavesHiddenFlagsOut(t *testing.T) {
	cmd := serveWith(t, "--config", writeConfig(t, "peer_via = \"1=127.0.0.1:1\"\n"))
	if err := applyConfig(cmd, envOf(nil)); err == nil || !strings.Contains(err.Error(), "peer_via") {
		t.Errorf("peer_via in the file: %v, want an error naming it", err)
	}
	cmd = serveWith(t)
	if err := applyConfig(cmd, envOf(map[string]string{"REWIND_PEER_VIA": "1=127.0.0.1:1"})); err != nil {
		t.Fatal(err)
	}
	if got := cmd.Flags().Lookup("peer-via").Value.String(); got != "" {
		t.Errorf("REWIND_PEER_VIA set --peer-via to %q", got)
	}
}
