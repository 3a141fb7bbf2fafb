package spec

import (
	"strings"
	"testing"
)

// TestBank: the lost-update workload's block, its defaults and its
// limits.
func TestBank(t *testing.T) {
	s, err := Parse("b.hcl", []byte("scenario \"b\" {\n  workload {\n    bank {\n      accounts = 5\n      writers = 3\n    }\n  }\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if b := s.Workload.Bank; b == nil || b.Accounts != 5 || b.Writers != 3 {
		t.Errorf("bank %+v", b)
	}
	s, err = Parse("b.hcl", []byte("scenario \"b\" {\n  workload {\n    bank {}\n  }\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if b := s.Workload.Bank; b == nil || b.Accounts != 20 || b.Writers != 8 {
		t.Errorf("default bank %+v", b)
	}
	if s, err := Parse("b.hcl", []byte(`scenario "b" {}`)); err != nil || s.Workload.Bank != nil {
		t.Errorf("a scenario without a bank: %+v, %v", s.Workload.Bank, err)
	}
	_, err = Parse("bad.hcl", []byte("scenario \"b\" {\n  workload {\n    bank {\n      accounts = 1001\n      writers = -1\n    }\n  }\n}\n"))
	for _, w := range []string{"bad.hcl:3:5:", "1001 accounts", "-1 writers per account"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v lacks %q", err, w)
		}
	}
}
