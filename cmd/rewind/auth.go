package main

// rewind user and rewind acl: principals, their bearer tokens and the ACL
// rules of a server started with --auth (docs/security.md).

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rewind-io/rewind/sdk/client"
)

// openAuditLog opens --audit-log for appending (mode 0600); nil without a
// path (the engine then writes audit lines to the server log).
func openAuditLog(path string, authOn bool) (io.Writer, func(), error) {
	if path == "" {
		return nil, func() {}, nil
	}
	if !authOn {
		return nil, nil, errors.New("--audit-log needs --auth")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("--audit-log: %w", err)
	}
	return f, func() { f.Close() }, nil
}

func newUser(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Create, list and revoke principals' bearer tokens (servers with --auth)",
	}
	cmd.AddCommand(newUserCreate(g), newUserList(g), newUserRevoke(g))
	return cmd
}

func newUserCreate(g *globals) *cobra.Command {
	var expires time.Duration
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Issue a bearer token for principal NAME (printed once: the server keeps only its hash)",
		Long: `Issue a bearer token for principal NAME and print it on stdout, once: the
server keeps only its hash. A principal may hold several tokens. The token
has no rights until "rewind acl grant" gives it some.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if expires < 0 {
				return fmt.Errorf("--expires %s: must be positive (0: never)", expires)
			}
			tok, u, err := g.client().CreateUser(cmd.Context(), args[0], expires)
			if err != nil {
				return err
			}
			fmt.Println(tok)
			exp := "never expires"
			if u.GetExpireTime() != nil {
				exp = "expires " + u.GetExpireTime().AsTime().UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(os.Stderr, "token %s for %s (%s); it is shown only now\n", u.GetTokenId(), u.GetPrincipal(), exp)
			return nil
		},
	}
	cmd.Flags().DurationVar(&expires, "expires", 0, "the token stops working after this long, e.g. 720h (default: never)")
	return cmd
}

func newUserList(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the tokens (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			us, err := g.client().ListUsers(cmd.Context())
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(us)
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "PRINCIPAL\tTOKEN ID\tCREATED\tEXPIRES\tSUPERUSER")
			for _, u := range us {
				exp := "never"
				if u.GetExpireTime() != nil {
					exp = u.GetExpireTime().AsTime().UTC().Format(time.RFC3339)
					if u.GetExpired() {
						exp += " (expired)"
					}
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%v\n", u.GetPrincipal(), u.GetTokenId(), u.GetCreateTime().AsTime().UTC().Format(time.RFC3339), exp, u.GetSuperuser())
			}
			return w.Flush()
		},
	}
	addFormat(cmd, &format)
	return cmd
}

func newUserRevoke(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke NAME|TOKEN-ID",
		Short: "Revoke one token, or every token of a principal; their streams end within seconds",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			us, err := g.client().RevokeUser(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			for _, u := range us {
				fmt.Printf("revoked token %s of %s\n", u.GetTokenId(), u.GetPrincipal())
			}
			return nil
		},
	}
}

func newACL(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Grant, list, revoke and check access rules (servers with --auth)",
		Long: `Access rules give principals operations on resources. A rule names a
principal ("*": every authenticated one), a resource kind with a pattern
(a literal name, or a prefix ending in "*" such as "orders.*"), and
operations; a deny rule wins over every allow rule.

  topics:  describe publish read replay create alter delete
  groups:  describe join commit reset delete
  plugins: describe upload use inline delete
  cluster: admin

read follows the live tail (and continues a stream with its signed resume
token); replay is every start in the past. See docs/security.md.`,
	}
	cmd.AddCommand(newACLGrant(g), newACLList(g), newACLRevoke(g), newACLCheck(g))
	return cmd
}

// ruleFlags are the flags that describe a rule.
type ruleFlags struct {
	topic, group, plugin string
	cluster, deny        bool
	ops                  string
}

func (f *ruleFlags) add(cmd *cobra.Command, opsRequired bool) {
	fs := cmd.Flags()
	fs.StringVar(&f.topic, "topic", "", "topics: a name or a prefix ending in * (quote it)")
	fs.StringVar(&f.group, "group", "", "subscriber groups: a name or a prefix ending in *")
	fs.StringVar(&f.plugin, "plugin", "", "plugins: a name or a prefix ending in *")
	fs.BoolVar(&f.cluster, "cluster", false, "the cluster (the admin operation)")
	fs.StringVar(&f.ops, "allow", "", "operations, comma-separated, or all")
	fs.BoolVar(&f.deny, "deny", false, "a deny rule (wins over every allow rule) for the --allow operations")
	if opsRequired {
		_ = cmd.MarkFlagRequired("allow")
	}
}

func (f *ruleFlags) rule(principal string) (*client.ACLRule, error) {
	r := &client.ACLRule{Principal: principal, Deny: f.deny}
	n := 0
	for kind, pat := range map[string]string{"topic": f.topic, "group": f.group, "plugin": f.plugin} {
		if pat != "" {
			r.Kind, r.Pattern = kind, pat
			n++
		}
	}
	if f.cluster {
		r.Kind = "cluster"
		n++
	}
	if n != 1 {
		return nil, errors.New("give exactly one of --topic, --group, --plugin and --cluster")
	}
	if f.ops == "all" {
		r.Operations = allOps[r.Kind]
	} else {
		for _, op := range strings.Split(f.ops, ",") {
			if op = strings.TrimSpace(op); op != "" {
				r.Operations = append(r.Operations, op)
			}
		}
	}
	if len(r.Operations) == 0 {
		return nil, errors.New("--allow: name at least one operation")
	}
	return r, nil
}

var allOps = map[string][]string{
	"topic":   {"describe", "publish", "read", "replay", "create", "alter", "delete"},
	"group":   {"describe", "join", "commit", "reset", "delete"},
	"plugin":  {"describe", "upload", "use", "inline", "delete"},
	"cluster": {"admin"},
}

func ruleText(r *client.ACLRule) string {
	verb := "allow"
	if r.GetDeny() {
		verb = "deny"
	}
	res := r.GetKind()
	if r.GetKind() != "cluster" {
		res += ":" + r.GetPattern()
	}
	return fmt.Sprintf("#%d %s %s %s %s", r.GetId(), verb, r.GetPrincipal(), strings.Join(r.GetOperations(), ","), res)
}

func newACLGrant(g *globals) *cobra.Command {
	var f ruleFlags
	cmd := &cobra.Command{
		Use:   "grant PRINCIPAL (--topic P|--group P|--plugin P|--cluster) --allow OPS [--deny]",
		Short: "Add an access rule",
		Example: `  rewind acl grant alice --topic orders --allow read,describe
  rewind acl grant auditor --topic 'orders.*' --allow replay,read,describe
  rewind acl grant ops --group '*' --allow reset,describe
  rewind acl grant '*' --plugin '*' --allow inline --deny`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := f.rule(args[0])
			if err != nil {
				return err
			}
			got, err := g.client().GrantACL(cmd.Context(), r)
			if err != nil {
				return err
			}
			fmt.Println(ruleText(got))
			return nil
		},
	}
	f.add(cmd, true)
	return cmd
}

func newACLList(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "list [PRINCIPAL]",
		Short: "List the rules (of PRINCIPAL and \"*\") and the superusers",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			who := ""
			if len(args) == 1 {
				who = args[0]
			}
			rules, supers, err := g.client().ListACLs(cmd.Context(), who)
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(map[string]any{"rules": rules, "superusers": supers})
			}
			for _, s := range supers {
				fmt.Printf("superuser %s\n", s)
			}
			for _, r := range rules {
				fmt.Println(ruleText(r))
			}
			return nil
		},
	}
	addFormat(cmd, &format)
	return cmd
}

func newACLRevoke(g *globals) *cobra.Command {
	var f ruleFlags
	cmd := &cobra.Command{
		Use:   "revoke ID | PRINCIPAL (--topic P|--group P|--plugin P|--cluster) --allow OPS [--deny]",
		Short: "Delete a rule by id, or take operations off the matching rules",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var id uint64
			var match *client.ACLRule
			if n, err := strconv.ParseUint(args[0], 10, 64); err == nil && f.ops == "" {
				id = n
			} else {
				r, err := f.rule(args[0])
				if err != nil {
					return err
				}
				match = r
			}
			gone, err := g.client().RevokeACL(cmd.Context(), id, match)
			if err != nil {
				return err
			}
			for _, r := range gone {
				fmt.Printf("revoked %s\n", ruleText(r))
			}
			return nil
		},
	}
	f.add(cmd, false)
	return cmd
}

func newACLCheck(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "check PRINCIPAL OP RESOURCE",
		Short:   "Explain whether PRINCIPAL may do OP on RESOURCE (topic:NAME, group:NAME, plugin:NAME or cluster)",
		Example: "  rewind acl check alice replay topic:orders",
		Args:    cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := g.client().CheckACL(cmd.Context(), args[0], args[1], args[2])
			if err != nil {
				return err
			}
			fmt.Println(res.GetExplanation())
			if !res.GetAllowed() {
				return errDenied
			}
			return nil
		},
	}
}

// errDenied makes `acl check` exit 1 on a denial, after the explanation.
var errDenied = errors.New("not allowed")

func newQuota(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "quota",
		Short: "Per-principal quotas on a server with --auth: publish and replay bytes per second, streams at once, topics and partitions created",
	}
	cmd.AddCommand(newQuotaSet(g), newQuotaList(g))
	return cmd
}

func newQuotaSet(g *globals) *cobra.Command {
	var (
		def                     bool
		publishRate, replayRate string
		streams                 uint32
		fuel                    uint64
		topics, partitions      uint32
	)
	cmd := &cobra.Command{
		Use:   "set [PRINCIPAL]",
		Short: "Set a principal's quota (or --default); all limits 0 removes it",
		Example: `  rewind quota set etl --publish-bytes-per-sec 10MB --streams 4
  rewind quota set --default --replay-bytes-per-sec 50MB --topics 20 --partitions 200`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			principal := ""
			if len(args) == 1 {
				principal = args[0]
			}
			if def == (principal != "") {
				return fmt.Errorf("name a principal, or give --default")
			}
			q := &client.Quota{Streams: streams, FilterFuelPerSec: fuel, Topics: topics, Partitions: partitions}
			var err error
			if publishRate != "" {
				if q.PublishBytesPerSec, err = parseBytes(publishRate); err != nil {
					return fmt.Errorf("--publish-bytes-per-sec: %w", err)
				}
			}
			if replayRate != "" {
				if q.ReplayBytesPerSec, err = parseBytes(replayRate); err != nil {
					return fmt.Errorf("--replay-bytes-per-sec: %w", err)
				}
			}
			return g.client().SetQuota(cmd.Context(), principal, q)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&def, "default", false, "set the default quota: every principal without its own (not superusers)")
	f.StringVar(&publishRate, "publish-bytes-per-sec", "", "record bytes published per second, e.g. 10MB (over it: ResourceExhausted with the wait); 0: no limit")
	f.StringVar(&replayRate, "replay-bytes-per-sec", "", "bytes of history replayed per second, e.g. 50MB (over it replays are paced, live reads are exempt); 0: no limit")
	f.Uint32Var(&streams, "streams", 0, "streams open at once (over it: ResourceExhausted); 0: no limit")
	f.Uint64Var(&fuel, "filter-fuel-per-sec", 0, "WebAssembly fuel the principal's filtered replays burn per second (over it they are paced); 0: no limit")
	f.Uint32Var(&topics, "topics", 0, "topics the principal created that still exist, cluster-wide (over it: ResourceExhausted, nothing created); 0: no limit")
	f.Uint32Var(&partitions, "partitions", 0, "partitions of those topics, all together (over it: ResourceExhausted, nothing created); 0: no limit")
	return cmd
}

func newQuotaList(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the quotas, and what the node charged and held back per principal",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			resp, err := g.client().ListQuotas(cmd.Context())
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(resp)
			}
			lim := func(v uint64) string {
				if v == 0 {
					return "-"
				}
				return fmt.Sprint(v)
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			row := func(name string, q *client.Quota) {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", name, lim(q.GetPublishBytesPerSec()), lim(q.GetReplayBytesPerSec()),
					lim(uint64(q.GetStreams())), lim(uint64(q.GetTopics())), lim(uint64(q.GetPartitions())))
			}
			fmt.Fprintln(w, "PRINCIPAL\tPUBLISH B/S\tREPLAY B/S\tSTREAMS\tTOPICS\tPARTITIONS")
			if d := resp.GetDefaultQuota(); d != nil {
				row("(default)", d)
			}
			for _, p := range slices.Sorted(maps.Keys(resp.GetQuotas())) {
				row(p, resp.GetQuotas()[p])
			}
			if err := w.Flush(); err != nil {
				return err
			}
			fmt.Println()
			w = tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "PRINCIPAL\tPUBLISHED B\tREPLAYED B\tOPEN STREAMS\tREFUSED\tPACED\tTOPICS\tPARTITIONS")
			for _, u := range resp.GetUsage() {
				fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%s\t%d\t%d\n", u.GetPrincipal(), u.GetPublishedBytes(), u.GetReplayedBytes(), u.GetOpenStreams(),
					u.GetRefused(), u.GetPaced().AsDuration(), u.GetTopics(), u.GetPartitions())
			}
			return w.Flush()
		},
	}
	addFormat(cmd, &format)
	return cmd
}
