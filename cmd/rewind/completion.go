package main

// Shell completion beyond cobra's commands and flags: topic, group and
// plugin names asked of the server (briefly; any error means no
// suggestions, never a message in the middle of the user's line), and the
// fixed values of --format, --cleanup, --from and the like.

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// completionTimeout bounds one question to the server while the user
// waits at a prompt.
const completionTimeout = 2 * time.Second

type completeFunc = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective)

// serverNames completes from the names list returns, asked of the server
// within completionTimeout; an error gives no suggestions.
func serverNames(g *globals, list func(ctx context.Context, g *globals) ([]string, error)) completeFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		names, err := list(ctx, g)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, n := range names {
			if strings.HasPrefix(n, toComplete) {
				out = append(out, n)
			}
		}
		slices.Sort(out)
		return slices.Compact(out), cobra.ShellCompDirectiveNoFileComp
	}
}

func topicNames(ctx context.Context, g *globals) ([]string, error) {
	ts, err := g.client().ListTopics(ctx)
	names := make([]string, 0, len(ts))
	for _, t := range ts {
		names = append(names, t.Name)
	}
	return names, err
}

func groupNames(ctx context.Context, g *globals) ([]string, error) {
	gs, err := g.client().ListGroups(ctx)
	names := make([]string, 0, len(gs))
	for _, x := range gs {
		names = append(names, x.Group)
	}
	return names, err
}

func pluginNames(ctx context.Context, g *globals) ([]string, error) {
	ps, err := g.client().ListPlugins(ctx, "")
	names := make([]string, 0, len(ps))
	for _, p := range ps {
		names = append(names, p.Name)
	}
	return names, err
}

// firstArg applies f to the first positional argument only.
func firstArg(f completeFunc) completeFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return f(cmd, args, toComplete)
	}
}

// orFiles lets the shell complete file names too (plugin test and upload
// take a registered name or a .wasm file).
func orFiles(f completeFunc) completeFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		out, _ := f(cmd, args, toComplete)
		return out, cobra.ShellCompDirectiveDefault
	}
}

// fixed completes from a list of values with descriptions ("value\tdescription").
func fixed(values ...string) completeFunc {
	return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}

// positionValues are the keywords and shapes of a start position.
var positionValues = []string{
	"earliest\tthe first stored record",
	"latest\tonly new records",
	"-15m\tthe last 15 minutes",
	"-1h\tthe last hour",
	"-7d\tthe last 7 days",
	"-10\tthe last 10 records of each partition",
	"@\ta time: @2026-12-01T10:00:00Z or Unix milliseconds",
	"id:\ta record by message ID",
	"token:\ta resume token",
}

// registerCompletions attaches the completions to the commands of root,
// found by path, so that each command's file keeps only its behaviour.
func registerCompletions(root *cobra.Command, g *globals) {
	topics, groups, plugins := serverNames(g, topicNames), serverNames(g, groupNames), serverNames(g, pluginNames)
	args := map[string]completeFunc{
		"topic describe": firstArg(topics), "topic delete": firstArg(topics), "topic alter": firstArg(topics),
		"publish": firstArg(topics), "replay": firstArg(topics), "subscribe": firstArg(topics),
		"cluster transfer-leader": firstArg(topics),
		"group describe":          firstArg(groups), "group reset": firstArg(groups), "group delete": firstArg(groups),
		"plugin get": firstArg(plugins), "plugin delete": firstArg(plugins), "plugin list": firstArg(plugins),
		"plugin test": firstArg(orFiles(plugins)), "plugin upload": orFiles(firstArg(plugins)),
	}
	flags := map[string]map[string]completeFunc{
		"replay":      {"from": fixed(positionValues...), "to": fixed("end\tthe end as of the start", "-1h\tan hour ago", "@\ta time"), "filter": plugins, "read-from": fixed("leader", "replica")},
		"subscribe":   {"from": fixed(positionValues...), "group": groups, "read-from": fixed("leader", "replica")},
		"plugin test": {"from": fixed(positionValues...), "topic": topics},
		"group reset": {"topic": topics, "to": fixed("earliest", "latest", "-15m\t15 minutes ago", "-1h\tan hour ago", "@\ta time", "id:\ta record by message ID")},
		"publish":     {"input": fixed("text\tone value per line", "json\tone JSON object per line")},
		"plugin new":  {"lang": fixed("go", "assemblyscript")},
		"serve":       {"log-level": fixed("trace", "debug", "info", "warn", "error"), "log-format": fixed("text", "json")},
	}
	cleanup := fixed("delete\tdelete records by age, size or count", "compact\tkeep the latest record per key", "compact,delete\tboth")
	walk(root, func(c *cobra.Command) {
		path := strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), root.Name()), " ")
		if f, ok := args[path]; ok {
			c.ValidArgsFunction = f
		}
		for name, f := range flags[path] {
			if c.Flags().Lookup(name) != nil {
				_ = c.RegisterFlagCompletionFunc(name, f)
			}
		}
		if c.Flags().Lookup("cleanup") != nil {
			_ = c.RegisterFlagCompletionFunc("cleanup", cleanup)
		}
		if fl := c.Flags().Lookup("format"); fl != nil {
			values := []string{"text\ttab-separated lines", "json\tone JSON object per line"}
			if fv, ok := fl.Value.(*formatValue); ok && fv.templates {
				values = append(values, "{{.Offset}} {{.Value}}\ta Go template over each record")
			}
			_ = c.RegisterFlagCompletionFunc("format", fixed(values...))
		}
	})
}

// walk calls f on c and every command below it.
func walk(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, s := range c.Commands() {
		walk(s, f)
	}
}
