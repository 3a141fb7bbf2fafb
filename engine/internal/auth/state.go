package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rewind-io/rewind/engine/internal/quota"
)

var (
	// ErrUnauthenticated is returned for a token that is missing, garbage,
	// unknown (revoked) or expired. The message never says which, so a
	// caller learns nothing about other principals' tokens.
	ErrUnauthenticated = errors.New("auth: invalid or expired token")
	// ErrNotInitialized is returned before the bootstrap command applied.
	ErrNotInitialized = errors.New("auth: not initialized yet")
	// ErrNoSuchUser is the result of revoking a name or token id that has
	// no token.
	ErrNoSuchUser = errors.New("auth: no such user or token")
	// ErrNoSuchRule is the result of revoking a rule that does not exist.
	ErrNoSuchRule = errors.New("auth: no such rule")
	// ErrTooMany is returned when the state would exceed MaxTokens or
	// MaxRules.
	ErrTooMany = errors.New("auth: too many tokens or rules")
)

// Bounds on the replicated state: it is one value rewritten at each change.
const (
	MaxTokens = 10000
	MaxRules  = 10000
)

// TokenPrefix starts every bearer token: "rwd_<id>_<secret>", the id 12
// hex digits, the secret 32 random bytes in base64url.
const TokenPrefix = "rwd_"

const idLen = 12

// Token is a stored bearer token: only the SHA-256 of its secret is kept.
type Token struct {
	ID        string `json:"id"`
	Principal string `json:"principal"`
	// Hash is the SHA-256 of the secret part.
	Hash    []byte `json:"hash"`
	Created int64  `json:"created_ns"`
	// Expires is when the token stops working (Unix ns); 0: never.
	Expires int64 `json:"expires_ns,omitempty"`
}

// Expired reports whether t is expired at now (Unix ns).
func (t *Token) Expired(now int64) bool { return t.Expires != 0 && now >= t.Expires }

// NewToken makes a token for principal: the bearer string, shown once, and
// what is stored of it.
func NewToken(principal string, created, expires int64) (bearer string, t Token) {
	var id [idLen / 2]byte
	var secret [32]byte
	_, _ = rand.Read(id[:])
	_, _ = rand.Read(secret[:])
	s := base64.RawURLEncoding.EncodeToString(secret[:])
	sum := sha256.Sum256([]byte(s))
	t = Token{ID: hex.EncodeToString(id[:]), Principal: principal, Hash: sum[:], Created: created, Expires: expires}
	return TokenPrefix + t.ID + "_" + s, t
}

// ParseBearer splits a bearer token into its id and secret.
func ParseBearer(s string) (id, secret string, err error) {
	rest, ok := strings.CutPrefix(s, TokenPrefix)
	if !ok || len(rest) < idLen+2 || rest[idLen] != '_' || len(rest) > 200 {
		return "", "", ErrUnauthenticated
	}
	id, secret = rest[:idLen], rest[idLen+1:]
	if _, err := hex.DecodeString(id); err != nil || strings.ToLower(id) != id {
		return "", "", ErrUnauthenticated
	}
	return id, secret, nil
}

// IsTokenID reports whether s has the shape of a token id (so `user revoke`
// can tell an id from a name).
func IsTokenID(s string) bool {
	_, err := hex.DecodeString(s)
	return len(s) == idLen && err == nil && strings.ToLower(s) == s
}

// State is the replicated authorization state. A published State is never
// modified: Apply returns a new one.
type State struct {
	// Superusers may do everything; the bootstrap principal is one.
	Superusers []string `json:"superusers,omitempty"`
	// Tokens, ordered by id.
	Tokens []Token `json:"tokens,omitempty"`
	// Rules, ordered by id.
	Rules      []Rule `json:"rules,omitempty"`
	NextRuleID uint64 `json:"next_rule_id,omitempty"`
	// ResumeKey signs resume tokens (HMAC-SHA256); set once by Init.
	ResumeKey []byte `json:"resume_key,omitempty"`
	// Revision counts applied changes.
	Revision uint64 `json:"revision,omitempty"`
	// Quotas are the principals' own quotas; DefaultQuota applies to every
	// other principal that is no superuser (package quota).
	Quotas       map[string]quota.Limits `json:"quotas,omitempty"`
	DefaultQuota quota.Limits            `json:"default_quota,omitzero"`

	byID map[string]int
}

// Load decodes a stored state; empty data is the empty state.
func Load(data []byte) (*State, error) {
	s := &State{}
	if len(data) > 0 {
		if err := json.Unmarshal(data, s); err != nil {
			return nil, fmt.Errorf("auth: state: %w", err)
		}
	}
	s.index()
	return s, nil
}

// Marshal encodes s for the store.
func (s *State) Marshal() ([]byte, error) { return json.Marshal(s) }

func (s *State) index() {
	s.byID = make(map[string]int, len(s.Tokens))
	for i, t := range s.Tokens {
		s.byID[t.ID] = i
	}
}

// Initialized reports whether the bootstrap command applied.
func (s *State) Initialized() bool { return len(s.ResumeKey) > 0 }

// TokenByID returns the token with id.
func (s *State) TokenByID(id string) (*Token, bool) {
	i, ok := s.byID[id]
	if !ok {
		return nil, false
	}
	return &s.Tokens[i], true
}

// Authenticate checks a bearer token at now (Unix ns) and returns the
// token. Every failure is ErrUnauthenticated.
func (s *State) Authenticate(bearer string, now int64) (*Token, error) {
	id, secret, err := ParseBearer(bearer)
	if err != nil {
		return nil, err
	}
	t, ok := s.TokenByID(id)
	if !ok {
		return nil, ErrUnauthenticated
	}
	sum := sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(sum[:], t.Hash) != 1 || t.Expired(now) {
		return nil, ErrUnauthenticated
	}
	return t, nil
}

// Decision is the answer to one question.
type Decision struct {
	Allowed bool
	// Superuser: allowed because the principal is a superuser.
	Superuser bool
	// Rule is the rule that decided (nil: superuser, or no rule matched).
	Rule *Rule
}

// Explain says why, for `acl check` and the audit log (never for the
// denied caller: it would describe the rules).
func (d Decision) Explain() string {
	switch {
	case d.Superuser:
		return "allowed: superuser"
	case d.Rule != nil && d.Allowed:
		return "allowed by rule " + d.Rule.String()
	case d.Rule != nil:
		return "denied by rule " + d.Rule.String()
	}
	return "denied: no rule allows it"
}

// Decide answers whether principal may do op on res.
func (s *State) Decide(principal string, op Op, res Resource) Decision {
	if slices.Contains(s.Superusers, principal) {
		return Decision{Allowed: true, Superuser: true}
	}
	var allow *Rule
	for i := range s.Rules {
		r := &s.Rules[i]
		if !r.matches(principal, op, res) {
			continue
		}
		if r.Deny {
			return Decision{Rule: r}
		}
		if allow == nil {
			allow = r
		}
	}
	if allow != nil {
		return Decision{Allowed: true, Rule: allow}
	}
	return Decision{}
}

// Allowed is Decide(...).Allowed.
func (s *State) Allowed(principal string, op Op, res Resource) bool {
	return s.Decide(principal, op, res).Allowed
}

// Command is one change to the state, carried in a metadata raft entry.
// Exactly one field is set.
type Command struct {
	Init        *Init       `json:"init,omitempty"`
	CreateToken *Token      `json:"create_token,omitempty"`
	Revoke      *Revoke     `json:"revoke,omitempty"`
	Grant       *Rule       `json:"grant,omitempty"`
	RevokeRule  *RevokeRule `json:"revoke_rule,omitempty"`
	SetQuota    *SetQuota   `json:"set_quota,omitempty"`
}

// SetQuota sets a principal's quotas, or (Default) the default ones; zero
// limits remove them.
type SetQuota struct {
	Principal string       `json:"principal,omitempty"`
	Default   bool         `json:"default,omitempty"`
	Limits    quota.Limits `json:"limits"`
}

// Init bootstraps the state: the first superuser, its token and the resume
// token key. Applied once; later ones change nothing (Result.Unchanged), so
// every member may propose it at first start and only one wins.
type Init struct {
	Superuser string `json:"superuser"`
	Token     Token  `json:"token"`
	ResumeKey []byte `json:"resume_key"`
}

// Revoke deletes one token (TokenID) or every token of a principal.
type Revoke struct {
	Principal string `json:"principal,omitempty"`
	TokenID   string `json:"token_id,omitempty"`
}

// RevokeRule deletes the rule with ID, or (ID 0) takes Match's operations
// off every rule with Match's principal, kind, pattern and verb, deleting
// the rules left with none.
type RevokeRule struct {
	ID    uint64 `json:"id,omitempty"`
	Match *Rule  `json:"match,omitempty"`
}

// Result is what an applied command did.
type Result struct {
	// Unchanged: an Init after the first.
	Unchanged bool
	// Tokens created or revoked (hashes included; never shown).
	Tokens []Token
	// Rules granted, changed or deleted (as they were before).
	Rules []Rule
}

// Apply returns the state after c. s is not modified. An error leaves the
// state as it was.
func (s *State) Apply(c Command) (*State, Result, error) {
	n := s.clone()
	var res Result
	var err error
	switch {
	case c.Init != nil:
		if s.Initialized() {
			return s, Result{Unchanged: true}, nil
		}
		if len(c.Init.ResumeKey) < 16 {
			return s, res, fmt.Errorf("%w: resume key too short", ErrInvalid)
		}
		if err = ValidatePrincipal(c.Init.Superuser); err != nil {
			return s, res, err
		}
		n.Superusers = append(n.Superusers, c.Init.Superuser)
		n.ResumeKey = slices.Clone(c.Init.ResumeKey)
		n.Tokens = append(n.Tokens, c.Init.Token)
		res.Tokens = []Token{c.Init.Token}
	case c.CreateToken != nil:
		err = n.applyCreateToken(*c.CreateToken)
		res.Tokens = []Token{*c.CreateToken}
	case c.Revoke != nil:
		res.Tokens, err = n.applyRevoke(*c.Revoke)
	case c.Grant != nil:
		var r Rule
		r, err = n.applyGrant(*c.Grant)
		res.Rules = []Rule{r}
	case c.RevokeRule != nil:
		res.Rules, err = n.applyRevokeRule(*c.RevokeRule)
	case c.SetQuota != nil:
		err = n.applySetQuota(*c.SetQuota)
	default:
		return s, res, fmt.Errorf("%w: empty command", ErrInvalid)
	}
	if err != nil {
		return s, Result{}, err
	}
	n.Revision++
	slices.SortFunc(n.Tokens, func(a, b Token) int { return strings.Compare(a.ID, b.ID) })
	n.index()
	return n, res, nil
}

func (s *State) clone() *State {
	n := *s
	n.Quotas = maps.Clone(s.Quotas)
	n.Superusers = slices.Clone(s.Superusers)
	n.Tokens = slices.Clone(s.Tokens)
	n.Rules = slices.Clone(s.Rules)
	n.byID = nil
	return &n
}

func (s *State) applySetQuota(q SetQuota) error {
	if q.Default {
		if q.Principal != "" {
			return fmt.Errorf("%w: a quota is a principal's or the default, not both", ErrInvalid)
		}
		s.DefaultQuota = q.Limits
		return nil
	}
	if err := ValidatePrincipal(q.Principal); err != nil || q.Principal == "*" {
		return fmt.Errorf("%w: quota principal %q", ErrInvalid, q.Principal)
	}
	if q.Limits.IsZero() {
		delete(s.Quotas, q.Principal)
		return nil
	}
	if s.Quotas == nil {
		s.Quotas = map[string]quota.Limits{}
	}
	if _, ok := s.Quotas[q.Principal]; !ok && len(s.Quotas) >= MaxTokens {
		return fmt.Errorf("%w: %d quotas", ErrTooMany, len(s.Quotas))
	}
	s.Quotas[q.Principal] = q.Limits
	return nil
}

// QuotaFor returns principal's quotas: its own, else the default unless it
// is a superuser.
func (s *State) QuotaFor(principal string) quota.Limits {
	if l, ok := s.Quotas[principal]; ok {
		return l
	}
	if slices.Contains(s.Superusers, principal) {
		return quota.Limits{}
	}
	return s.DefaultQuota
}

func (s *State) applyCreateToken(t Token) error {
	if !s.Initialized() {
		return ErrNotInitialized
	}
	if err := ValidatePrincipal(t.Principal); err != nil {
		return err
	}
	if t.Principal == "*" {
		return fmt.Errorf("%w: \"*\" means any principal in a rule; it cannot hold a token", ErrInvalid)
	}
	if !IsTokenID(t.ID) || len(t.Hash) != sha256.Size {
		return fmt.Errorf("%w: malformed token record", ErrInvalid)
	}
	// (Not s.byID: Apply runs on a clone, whose index is rebuilt after.)
	if slices.ContainsFunc(s.Tokens, func(o Token) bool { return o.ID == t.ID }) {
		return fmt.Errorf("%w: token id %s in use", ErrInvalid, t.ID)
	}
	if len(s.Tokens) >= MaxTokens {
		return fmt.Errorf("%w: %d tokens", ErrTooMany, len(s.Tokens))
	}
	s.Tokens = append(s.Tokens, t)
	return nil
}

func (s *State) applyRevoke(r Revoke) ([]Token, error) {
	var gone []Token
	s.Tokens = slices.DeleteFunc(s.Tokens, func(t Token) bool {
		hit := (r.TokenID != "" && t.ID == r.TokenID) || (r.Principal != "" && t.Principal == r.Principal)
		if hit {
			gone = append(gone, t)
		}
		return hit
	})
	if len(gone) == 0 {
		return nil, ErrNoSuchUser
	}
	return gone, nil
}

func (s *State) applyGrant(r Rule) (Rule, error) {
	if err := r.Validate(); err != nil {
		return Rule{}, err
	}
	if len(s.Rules) >= MaxRules {
		return Rule{}, fmt.Errorf("%w: %d rules", ErrTooMany, len(s.Rules))
	}
	s.NextRuleID++
	r.ID = s.NextRuleID
	// Deduplicated, in KindOps order.
	var ops []Op
	for _, op := range KindOps[r.Kind] {
		if slices.Contains(r.Ops, op) {
			ops = append(ops, op)
		}
	}
	r.Ops = ops
	s.Rules = append(s.Rules, r)
	return r, nil
}

func (s *State) applyRevokeRule(rr RevokeRule) ([]Rule, error) {
	var touched []Rule
	if rr.ID != 0 {
		s.Rules = slices.DeleteFunc(s.Rules, func(r Rule) bool {
			if r.ID == rr.ID {
				touched = append(touched, r)
				return true
			}
			return false
		})
	} else if m := rr.Match; m != nil {
		for i := range s.Rules {
			r := &s.Rules[i]
			if r.Principal != m.Principal || r.Kind != m.Kind || r.Pattern != m.Pattern || r.Deny != m.Deny {
				continue
			}
			left := slices.DeleteFunc(slices.Clone(r.Ops), func(op Op) bool { return slices.Contains(m.Ops, op) })
			if len(left) == len(r.Ops) {
				continue
			}
			touched = append(touched, *r)
			r.Ops = left
		}
		s.Rules = slices.DeleteFunc(s.Rules, func(r Rule) bool { return len(r.Ops) == 0 })
	}
	if len(touched) == 0 {
		return nil, ErrNoSuchRule
	}
	return touched, nil
}

// NewResumeKey returns a fresh key for Init.
func NewResumeKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}
