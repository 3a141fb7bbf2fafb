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
//
// This package turns flags into configuration and calls; the logic lives in
// engine (the server), sdk/client (the client) and sdk/guest (filter
// modules: their SDKs, builders and project scaffolds).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/rewind-io/rewind/sdk/client"
)

// defaultServer is where clients connect unless --server or REWIND_SERVER
// say otherwise.
const defaultServer = "http://127.0.0.1:7070"

type globals struct {
	server string
}

func (g *globals) client() *client.Client { return client.New(g.server) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRoot().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rewind:", describe(err))
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "rewind",
		Short:         "Rewind: a replay-first event log",
		Long:          "Rewind is a publish/subscribe log whose first-class feature is replay: read any topic from an offset, a timestamp or a message ID, in order within each partition.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	server := os.Getenv("REWIND_SERVER")
	if server == "" {
		server = defaultServer
	}
	root.PersistentFlags().StringVar(&g.server, "server", server, "server address (env REWIND_SERVER)")
	root.AddCommand(newServe(), newTopic(g), newPublish(g), newReplay(g), newSubscribe(g), newGroup(g), newPlugin(g), newCluster(g), newDemo(), newBench(g))
	return root
}

// describe renders an error for a human: Connect errors by code and
// message, without the Go wrapping.
func describe(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		if ce.Code() == connect.CodeUnavailable {
			return fmt.Sprintf("%s: %s (is `rewind serve` running at this address?)", ce.Code(), ce.Message())
		}
		return fmt.Sprintf("%s: %s", ce.Code(), ce.Message())
	}
	return err.Error()
}
