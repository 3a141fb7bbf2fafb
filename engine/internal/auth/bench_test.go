package auth

import (
	"fmt"
	"testing"
)

// BenchmarkCheck is the per-call work of an authenticated call: check the
// bearer token, then decide one right, among 100 rules of 10 principals.
func BenchmarkCheck(b *testing.B) {
	s, _ := initState(b)
	var bearer string
	for i := range 10 {
		bt, tok := NewToken(fmt.Sprintf("p%d", i), 1, 0)
		s, _, _ = s.Apply(Command{CreateToken: &tok})
		if i == 9 {
			bearer = bt
		}
		for j := range 10 {
			r := Rule{Principal: fmt.Sprintf("p%d", i), Kind: Topic, Pattern: fmt.Sprintf("t%d.*", j), Ops: []Op{Read, Replay}}
			s, _, _ = s.Apply(Command{Grant: &r})
		}
	}
	res := Resource{Kind: Topic, Name: "t9.orders"}
	b.ReportAllocs()
	for b.Loop() {
		t, err := s.Authenticate(bearer, 2)
		if err != nil || !s.Allowed(t.Principal, Replay, res) {
			b.Fatal("refused")
		}
	}
}

// BenchmarkSignResume is the per-event work of a stream with auth on.
func BenchmarkSignResume(b *testing.B) {
	key := NewResumeKey()
	tok := "AQEEAAABAAIAAwA" // a 4-partition token's size
	b.ReportAllocs()
	for b.Loop() {
		_ = SignResume(key, "reader", tok)
	}
}
