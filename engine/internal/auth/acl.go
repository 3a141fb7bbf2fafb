// Package auth is who may do what: principals, bearer tokens stored only as
// hashes, ACL rules, and the decision function every public RPC asks before
// it has any effect.
//
// The whole authorization state (State) is a small value replicated through
// the metadata raft group: package meta applies Commands to it at apply
// time, so every member decides the same way. State is immutable once
// published: Apply works on a clone, and readers share the published
// pointer without locks.
//
// Decisions (Decide):
//
//  1. A superuser (the bootstrap principal) may do everything.
//  2. Otherwise the rules whose principal is the caller (or "*", any
//     authenticated principal), whose kind is the resource's kind, whose
//     pattern matches the resource's name and whose operations include the
//     operation are considered; a deny rule among them wins.
//  3. Otherwise an allow rule among them allows.
//  4. Otherwise the answer is deny: nothing is allowed by default.
package auth

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// ErrInvalid is returned for a rule, pattern, operation or resource that
// does not parse.
var ErrInvalid = errors.New("auth: invalid")

// Kind is the kind of a resource.
type Kind string

// The resource kinds.
const (
	Topic   Kind = "topic"
	Group   Kind = "group"
	Plugin  Kind = "plugin"
	Cluster Kind = "cluster"
)

// Op is an operation on a resource.
type Op string

// The operations. Describe applies to topics, groups and plugins; Delete to
// all three; the others to one kind each (KindOps).
const (
	Describe Op = "describe"
	Publish  Op = "publish"
	// Read: a stream that starts at the end (latest), a group member that
	// resumes from its committed offsets, or a signed resume token that
	// continues a stream where it stopped.
	Read Op = "read"
	// Replay: every other start before the end (earliest, offsets, times,
	// message IDs, -N, durations, unsigned resume tokens).
	Replay Op = "replay"
	Create Op = "create"
	Alter  Op = "alter"
	Delete Op = "delete"
	Join   Op = "join"
	Commit Op = "commit"
	Reset  Op = "reset"
	Upload Op = "upload"
	Use    Op = "use"
	// Inline: run a module sent with the request instead of uploaded.
	// Checked on the plugin resource "*" (InlineResource).
	Inline Op = "inline"
	Admin  Op = "admin"
)

// KindOps lists the operations valid on each kind of resource, in the order
// they are shown.
var KindOps = map[Kind][]Op{
	Topic:   {Describe, Publish, Read, Replay, Create, Alter, Delete},
	Group:   {Describe, Join, Commit, Reset, Delete},
	Plugin:  {Describe, Upload, Use, Inline, Delete},
	Cluster: {Admin},
}

// MaxName bounds a principal name or a pattern.
const MaxName = 256

// Resource names one thing an operation acts on.
type Resource struct {
	Kind Kind
	// Name is the topic, group or plugin name; empty for the cluster.
	Name string
}

// InlineResource is what the inline operation is checked on: inline
// modules have no name, so only a rule on the plugin pattern "*" covers
// them.
var InlineResource = Resource{Kind: Plugin, Name: "*"}

// ClusterResource is the one cluster resource.
var ClusterResource = Resource{Kind: Cluster}

// String renders r as "kind:name" ("cluster" alone).
func (r Resource) String() string {
	if r.Kind == Cluster {
		return string(Cluster)
	}
	return string(r.Kind) + ":" + r.Name
}

// ParseResource reads "topic:NAME", "group:NAME", "plugin:NAME" or
// "cluster".
func ParseResource(s string) (Resource, error) {
	if s == string(Cluster) {
		return ClusterResource, nil
	}
	k, name, ok := strings.Cut(s, ":")
	if !ok {
		return Resource{}, fmt.Errorf("%w: resource %q: want topic:NAME, group:NAME, plugin:NAME or cluster", ErrInvalid, clip(s))
	}
	kind, err := ParseKind(k)
	if err != nil {
		return Resource{}, err
	}
	if kind == Cluster || name == "" || len(name) > MaxName {
		return Resource{}, fmt.Errorf("%w: resource %q: want topic:NAME, group:NAME, plugin:NAME or cluster", ErrInvalid, clip(s))
	}
	return Resource{Kind: kind, Name: name}, nil
}

// ParseKind reads a resource kind.
func ParseKind(s string) (Kind, error) {
	switch k := Kind(s); k {
	case Topic, Group, Plugin, Cluster:
		return k, nil
	}
	return "", fmt.Errorf("%w: kind %q: want topic, group, plugin or cluster", ErrInvalid, clip(s))
}

// ParseOps reads a comma-separated list of operations valid on kind, or
// "all" for every one. The result is deduplicated, in KindOps order.
func ParseOps(kind Kind, s string) ([]Op, error) {
	valid, ok := KindOps[kind]
	if !ok {
		return nil, fmt.Errorf("%w: kind %q", ErrInvalid, clip(string(kind)))
	}
	if s == "all" {
		return slices.Clone(valid), nil
	}
	seen := map[Op]bool{}
	for _, f := range strings.Split(s, ",") {
		op := Op(strings.TrimSpace(f))
		if !slices.Contains(valid, op) {
			return nil, fmt.Errorf("%w: operation %q on a %s: want one of %s or all", ErrInvalid, clip(string(op)), kind, joinOps(valid))
		}
		seen[op] = true
	}
	var out []Op
	for _, op := range valid {
		if seen[op] {
			out = append(out, op)
		}
	}
	return out, nil
}

// ParseOp reads one operation name.
func ParseOp(s string) (Op, error) {
	for _, ops := range KindOps {
		if slices.Contains(ops, Op(s)) {
			return Op(s), nil
		}
	}
	return "", fmt.Errorf("%w: operation %q", ErrInvalid, clip(s))
}

func joinOps(ops []Op) string {
	s := make([]string, len(ops))
	for i, o := range ops {
		s[i] = string(o)
	}
	return strings.Join(s, ",")
}

// ValidatePattern checks a resource name pattern: a literal name, a prefix
// ending in "*" ("orders.*" matches every name starting with "orders."), or
// "*" alone (every name). A "*" anywhere but at the end is refused, so a
// pattern means exactly one thing.
func ValidatePattern(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%w: empty pattern", ErrInvalid)
	case len(p) > MaxName:
		return fmt.Errorf("%w: pattern longer than %d bytes", ErrInvalid, MaxName)
	case strings.Contains(p[:len(p)-1], "*"):
		return fmt.Errorf("%w: pattern %q: \"*\" may only end a pattern (a prefix)", ErrInvalid, clip(p))
	}
	for _, r := range p {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return fmt.Errorf("%w: pattern %q has a space or control character", ErrInvalid, clip(p))
		}
	}
	return nil
}

// Match reports whether the valid pattern p matches name.
func Match(p, name string) bool {
	if prefix, ok := strings.CutSuffix(p, "*"); ok {
		return strings.HasPrefix(name, prefix)
	}
	return p == name
}

// ValidatePrincipal checks a principal name: 1 to MaxName printable bytes
// with no spaces; "*" means any authenticated principal in a rule.
func ValidatePrincipal(p string) error {
	if p == "" || len(p) > MaxName {
		return fmt.Errorf("%w: principal name must be 1 to %d bytes", ErrInvalid, MaxName)
	}
	for _, r := range p {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return fmt.Errorf("%w: principal %q has a space or control character", ErrInvalid, clip(p))
		}
	}
	return nil
}

// Rule is one ACL entry.
type Rule struct {
	// ID is given at apply; rules are revoked by id.
	ID        uint64 `json:"id"`
	Principal string `json:"principal"`
	Kind      Kind   `json:"kind"`
	// Pattern is a literal name or a prefix ending in "*"; "" for the
	// cluster.
	Pattern string `json:"pattern,omitempty"`
	Ops     []Op   `json:"ops"`
	Deny    bool   `json:"deny,omitempty"`
}

// Validate checks r (its id aside).
func (r *Rule) Validate() error {
	if err := ValidatePrincipal(r.Principal); err != nil {
		return err
	}
	if _, err := ParseKind(string(r.Kind)); err != nil {
		return err
	}
	if r.Kind == Cluster {
		if r.Pattern != "" {
			return fmt.Errorf("%w: a cluster rule has no pattern", ErrInvalid)
		}
	} else if err := ValidatePattern(r.Pattern); err != nil {
		return err
	}
	if len(r.Ops) == 0 {
		return fmt.Errorf("%w: a rule needs at least one operation", ErrInvalid)
	}
	for _, op := range r.Ops {
		if !slices.Contains(KindOps[r.Kind], op) {
			return fmt.Errorf("%w: operation %q on a %s", ErrInvalid, clip(string(op)), r.Kind)
		}
	}
	return nil
}

// String renders r as the CLI shows it.
func (r *Rule) String() string {
	verb := "allow"
	if r.Deny {
		verb = "deny"
	}
	res := string(r.Kind)
	if r.Kind != Cluster {
		res += ":" + r.Pattern
	}
	return fmt.Sprintf("#%d %s %s %s %s", r.ID, verb, r.Principal, joinOps(r.Ops), res)
}

func (r *Rule) matches(principal string, op Op, res Resource) bool {
	if r.Principal != principal && r.Principal != "*" {
		return false
	}
	if r.Kind != res.Kind || !slices.Contains(r.Ops, op) {
		return false
	}
	return r.Kind == Cluster || Match(r.Pattern, res.Name)
}

// ParseRule reads a rule in the form String renders, without the id:
// "allow|deny PRINCIPAL OPS KIND[:PATTERN]". Tests and the fuzzer use it;
// the CLI builds rules from flags.
func ParseRule(s string) (Rule, error) {
	f := strings.Fields(s)
	if len(f) != 4 {
		return Rule{}, fmt.Errorf("%w: rule %q: want allow|deny PRINCIPAL OPS KIND[:PATTERN]", ErrInvalid, clip(s))
	}
	var r Rule
	switch f[0] {
	case "allow":
	case "deny":
		r.Deny = true
	default:
		return Rule{}, fmt.Errorf("%w: rule %q: want allow or deny first", ErrInvalid, clip(s))
	}
	r.Principal = f[1]
	k, pat, _ := strings.Cut(f[3], ":")
	kind, err := ParseKind(k)
	if err != nil {
		return Rule{}, err
	}
	r.Kind, r.Pattern = kind, pat
	if r.Ops, err = ParseOps(kind, f[2]); err != nil {
		return Rule{}, err
	}
	return r, r.Validate()
}

// clip bounds a client-supplied string echoed in an error.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
