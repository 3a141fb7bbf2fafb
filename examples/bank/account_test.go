package bank

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDecisions: the domain without a server: what each command decides
// on a folded account, and what it refuses.
func TestDecisions(t *testing.T) {
	a := Fold("a", []Event{{Type: Opened, Owner: "Ann"}, {Type: Deposited, Amount: 100}, {Type: Withdrawn, Amount: 30}, {Type: TransferredIn, Amount: 5, Peer: "b"}})
	if diff := cmp.Diff(Account{ID: "a", Open: true, Owner: "Ann", Balance: 75}, a); diff != "" {
		t.Fatalf("fold (-want +got):\n%s", diff)
	}
	b := Fold("b", []Event{{Type: Opened, Owner: "Bo"}, {Type: "FutureEvent"}})
	closed := Fold("c", nil)

	for _, tc := range []struct {
		name string
		got  func() ([]Event, error)
		want []Event
		err  error
	}{
		{"open new", func() ([]Event, error) { return closed.OpenAccount("Cy") }, []Event{{Type: Opened, Owner: "Cy"}}, nil},
		{"open twice", func() ([]Event, error) { return a.OpenAccount("Eve") }, nil, ErrAlreadyOpen},
		{"deposit", func() ([]Event, error) { return a.Deposit(10) }, []Event{{Type: Deposited, Amount: 10}}, nil},
		{"deposit to no account", func() ([]Event, error) { return closed.Deposit(10) }, nil, ErrNoAccount},
		{"deposit nothing", func() ([]Event, error) { return a.Deposit(0) }, nil, ErrInvalidAmount},
		{"withdraw all", func() ([]Event, error) { return a.Withdraw(75) }, []Event{{Type: Withdrawn, Amount: 75}}, nil},
		{"overdraft", func() ([]Event, error) { return a.Withdraw(76) }, nil, ErrInsufficientFunds},
		{"withdraw negative", func() ([]Event, error) { return a.Withdraw(-5) }, nil, ErrInvalidAmount},
		{"transfer", func() ([]Event, error) { out, in, err := Transfer(a, b, 75); return []Event{out, in}, err },
			[]Event{{Type: TransferredOut, Amount: 75, Peer: "b"}, {Type: TransferredIn, Amount: 75, Peer: "a"}}, nil},
		{"transfer overdraft", func() ([]Event, error) { _, _, err := Transfer(b, a, 1); return nil, err }, nil, ErrInsufficientFunds},
		{"transfer to no account", func() ([]Event, error) { _, _, err := Transfer(a, closed, 1); return nil, err }, nil, ErrNoAccount},
		{"transfer to itself", func() ([]Event, error) { _, _, err := Transfer(a, a, 1); return nil, err }, nil, ErrSameAccount},
	} {
		got, err := tc.got()
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.err)
			continue
		}
		if err == nil {
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.name, diff)
			}
		}
	}
}
