// Command rewind is the Rewind broker and its command-line client.
//
//	rewind serve                      run a node (embedded defaults)
//	rewind topic create|list|describe|delete
//	rewind publish TOPIC [VALUE]
//	rewind replay TOPIC --from POS [--to POS] [--filter REF]
//	rewind subscribe TOPIC --group G  consume as a group member
//	rewind group list|describe|reset|delete
//	rewind plugin new|build|test|upload|list|get|delete
//	                                  WebAssembly filters and transforms
//	rewind demo                       see it work in one command
//	rewind bench publish|replay|ttfm  measure
//	rewind version [--short]          this build's semantic version (version.go)
//
// This package turns flags into configuration and calls; the logic lives in
// engine (the server), sdk/client (the client) and sdk/guest (filter
// modules: their SDKs, builders and project scaffolds).
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/rewind-io/rewind/internal/tlsconf"
	"github.com/rewind-io/rewind/sdk/client"
)

// defaultServer is where clients connect unless --server or REWIND_SERVER
// say otherwise.
const defaultServer = "http://127.0.0.1:7070"

type globals struct {
	server string
	// tlsCA, tlsCert and tlsKey configure TLS to the server (--tls-ca,
	// --tls-cert, --tls-key); tls is what loadTLS made of them (nil: none).
	tlsCA, tlsCert, tlsKey string
	tls                    *tls.Config
	// token is the bearer token of a server with --auth.
	token string
	// nodes carries node penalties across runs (nodememory.go).
	nodes nodeMemory
	// fastPath sends unary calls over the fast path (--fast-path).
	fastPath bool
}

func (g *globals) client() *client.Client { return g.clientAt(g.server) }

// clientAt returns a client of the server(s) at addr with the global
// connection flags and credentials.
func (g *globals) clientAt(addr string) *client.Client {
	mem := g.nodes.options(addr)
	c := client.New(addr, append(g.clientOptions(), mem...)...)
	if mem != nil {
		g.nodes.keep(c)
	}
	return c
}

// clientOptions are the client options the global flags select: TLS when
// any of --tls-ca, --tls-cert, --tls-key is given (addresses without a
// scheme then mean https://; an https:// --server alone uses the system's
// CAs).
func (g *globals) clientOptions() []client.Option {
	opts := []client.Option{client.WithFastPath(g.fastPath)}
	if tok := g.bearer(); tok != "" {
		opts = append(opts, client.WithToken(tok))
	}
	switch {
	case g.tls != nil:
		opts = append(opts, client.WithTLS(g.tls))
	case g.tlsCA != "" || g.tlsCert != "" || g.tlsKey != "":
		// Not loaded by loadTLS (shell completion runs no hooks): calls
		// fail with the file's error.
		opts = append(opts, client.WithTLSFiles(g.tlsCA, g.tlsCert, g.tlsKey))
	}
	return opts
}

// loadTLS reads the TLS files of the global flags, so a missing or bad
// file is reported before any call is tried.
// bearer is the token to send: --token, else REWIND_TOKEN. It is read
// here rather than made the flag's default, which help and usage print.
func (g *globals) bearer() string {
	if g.token != "" {
		return g.token
	}
	return os.Getenv("REWIND_TOKEN")
}

func (g *globals) loadTLS(cmd *cobra.Command, _ []string) error {
	if cmd.Name() == "serve" || (g.tlsCA == "" && g.tlsCert == "" && g.tlsKey == "") {
		return nil // serve's --tls-cert and --tls-key are its own
	}
	cfg, err := tlsconf.ClientFiles{CA: g.tlsCA, Cert: g.tlsCert, Key: g.tlsKey}.Client()
	if err != nil {
		return fmt.Errorf("--tls-ca, --tls-cert, --tls-key: %w", err)
	}
	g.tls = cfg
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	root, g := newRootAndGlobals()
	err := root.ExecuteContext(ctx)
	stop()
	g.nodes.save()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rewind:", describe(err))
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root, _ := newRootAndGlobals()
	return root
}

// newRootAndGlobals is newRoot and the global flags' values.
func newRootAndGlobals() (*cobra.Command, *globals) {
	g := &globals{}
	root := &cobra.Command{
		Use:               "rewind",
		Short:             "Rewind: a replay-first event log",
		Long:              "Rewind is a publish/subscribe log whose first-class feature is replay: read any topic from an offset, a timestamp or a message ID, in order within each partition.",
		SilenceUsage:      true,
		SilenceErrors:     true,
		PersistentPreRunE: g.loadTLS,
	}
	server := os.Getenv("REWIND_SERVER")
	if server == "" {
		server = defaultServer
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.server, "server", server, "server address (env REWIND_SERVER)")
	// serve's own --tls-cert and --tls-key (the server's pair) shadow these.
	pf.StringVar(&g.tlsCA, "tls-ca", os.Getenv("REWIND_TLS_CA"), "CA certificate (PEM) to verify the server with; implies https (env REWIND_TLS_CA)")
	pf.StringVar(&g.tlsCert, "tls-cert", os.Getenv("REWIND_TLS_CERT"), "client certificate (PEM) for a server that requires one; implies https (env REWIND_TLS_CERT)")
	pf.StringVar(&g.tlsKey, "tls-key", os.Getenv("REWIND_TLS_KEY"), "private key of --tls-cert (PEM) (env REWIND_TLS_KEY)")
	// A secret is never a flag's default: help and usage print defaults.
	pf.StringVar(&g.token, "token", "", "bearer token for a server with --auth (default: env REWIND_TOKEN)")
	pf.BoolVar(&g.fastPath, "fast-path", true, "send unary calls as frames on one HTTP/1.1 stream per node when the node offers it; false: HTTP/2 (docs/architecture.md, \"The fast path\")")
	root.AddCommand(newUser(g), newACL(g), newQuota(g), newServe(), newTopic(g), newPublish(g), newReplay(g), newSubscribe(g), newGroup(g), newPlugin(g), newCluster(g), newDemo(), newBench(g), newScenario(), newVersion())
	root.Version = versionLine()
	root.SetVersionTemplate("{{.Version}}\n")
	root.InitDefaultCompletionCmd()
	enableTemplates(root, "replay", "subscribe")
	registerCompletions(root, g)
	usageOnArgErrors(root)
	requireKnownSubcommands(root)
	return root, g
}

// describe renders an error for a human, as errText, with a hint when the
// server could not be reached.
func describe(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "GOAWAY") && strings.Contains(msg, "PROTOCOL_ERROR"):
		// A TLS port's answer to plaintext HTTP/2 (tlsconf.NewListener).
		return errText(err) + " (the server speaks TLS: use an https:// --server, or --tls-ca)"
	case strings.Contains(msg, "remote error: tls: "):
		return errText(err) + " (the server refused this client's certificate: if it requires client certificates, give --tls-cert and --tls-key with one its CA signed)"
	case strings.Contains(msg, "https://") && (strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection reset")):
		// A TLS server that requires client certificates
		// (--tls-client-ca) ends the handshake with an alert, which may
		// reach the client as a broken connection.
		return errText(err) + " (the server closed the TLS connection: if it requires client certificates, give --tls-cert and --tls-key with one its CA signed)"
	case strings.Contains(msg, "could not be established"):
		return errText(err) + " (is `rewind serve` running at this address? If it requires client certificates, give --tls-cert and --tls-key with one its CA signed)"
	case connect.CodeOf(err) == connect.CodeUnavailable:
		return errText(err) + " (is `rewind serve` running at this address?)"
	case connect.CodeOf(err) == connect.CodeUnauthenticated:
		return errText(err) + " (the server has --auth: pass --token or set REWIND_TOKEN)"
	}
	return errText(err)
}

// errText is an error's text: a Connect error's code and message once.
func errText(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return fmt.Sprintf("%s: %s", ce.Code(), ce.Message())
	}
	return err.Error()
}

// usageOnArgErrors appends the usage to the error of a command given the
// wrong number of arguments (`rewind publish` alone), where an error of
// one line would leave the user guessing what is missing.
func usageOnArgErrors(root *cobra.Command) {
	walk(root, func(c *cobra.Command) {
		if c.Args == nil || !c.Runnable() || c.HasSubCommands() {
			return
		}
		check := c.Args
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return fmt.Errorf("%w\n\n%s", err, strings.TrimRight(cmd.UsageString(), "\n"))
			}
			return nil
		}
	})
}
