// Package bank is an example of event sourcing on Rewind's event store: a
// bank account service whose only storage is each account's history of
// events.
//
// Every command runs the same loop (Bank.update):
//
//  1. Load: read the account's events by key (client.ReadKey) and fold
//     them into an Account; remember the key's version.
//  2. Decide: a pure method of Account (OpenAccount, Deposit, Withdraw)
//     or the function Transfer returns the new events, or refuses (an
//     overdraft is ErrInsufficientFunds).
//  3. Append the events only if the key is still at the version loaded
//     (client.ExpectVersion, or client.ExpectNone for a new account).
//     When another writer got there first, the append is refused with a
//     *client.ConditionError and nothing is stored: go back to 1.
//
// A transfer appends one event to each account in one atomic append, with
// an expectation per key (client.ForKey). Keys appended together must
// share a partition, so the accounts topic has one partition; a topic of
// several partitions would need both accounts pinned to one partition.
//
// This file is the domain (events, fold, decisions) and knows nothing of
// Rewind; bank.go is the load-decide-append loop.
package bank

import (
	"errors"
	"fmt"
)

// The event types: each record's Type (its rewind-type header).
const (
	Opened         = "Opened"
	Deposited      = "Deposited"
	Withdrawn      = "Withdrawn"
	TransferredOut = "TransferredOut"
	TransferredIn  = "TransferredIn"
)

// Event is one fact in an account's history. Type says which; the other
// fields are those that type uses. The record's value is the JSON of the
// fields; Type travels as the record's type.
type Event struct {
	Type   string `json:"-"`
	Owner  string `json:"owner,omitempty"`  // Opened
	Amount int64  `json:"amount,omitempty"` // in cents, > 0; all but Opened
	Peer   string `json:"peer,omitempty"`   // the other account of a transfer
}

// Errors of the decisions: a command refused, nothing appended.
var (
	ErrNoAccount         = errors.New("bank: no such account")
	ErrAlreadyOpen       = errors.New("bank: account already open")
	ErrInvalidAmount     = errors.New("bank: amount must be positive")
	ErrInsufficientFunds = errors.New("bank: insufficient funds")
	ErrSameAccount       = errors.New("bank: transfer to the same account")
)

// Account is the state an account's events fold into.
type Account struct {
	ID    string
	Open  bool
	Owner string
	// Balance in cents. Invariant: >= 0, because every decision that
	// takes money refuses an overdraft.
	Balance int64
}

// Apply folds one event into the account. Unknown types are skipped, so
// an older reader survives a newer writer's events.
func (a *Account) Apply(e Event) {
	switch e.Type {
	case Opened:
		a.Open, a.Owner = true, e.Owner
	case Deposited, TransferredIn:
		a.Balance += e.Amount
	case Withdrawn, TransferredOut:
		a.Balance -= e.Amount
	}
}

// Fold returns the account that events (oldest first) describe.
func Fold(id string, events []Event) Account {
	a := Account{ID: id}
	for _, e := range events {
		a.Apply(e)
	}
	return a
}

// OpenAccount decides to open the account for owner.
func (a Account) OpenAccount(owner string) ([]Event, error) {
	if a.Open {
		return nil, fmt.Errorf("%w: %s", ErrAlreadyOpen, a.ID)
	}
	return []Event{{Type: Opened, Owner: owner}}, nil
}

// Deposit decides a deposit of amount cents.
func (a Account) Deposit(amount int64) ([]Event, error) {
	if err := a.check(amount); err != nil {
		return nil, err
	}
	return []Event{{Type: Deposited, Amount: amount}}, nil
}

// Withdraw decides a withdrawal of amount cents, refusing an overdraft.
func (a Account) Withdraw(amount int64) ([]Event, error) {
	if err := a.check(amount); err != nil {
		return nil, err
	}
	if a.Balance < amount {
		return nil, fmt.Errorf("%w: %s holds %d cents, %d asked", ErrInsufficientFunds, a.ID, a.Balance, amount)
	}
	return []Event{{Type: Withdrawn, Amount: amount}}, nil
}

// Transfer decides a transfer of amount cents: the event for each
// account, to be appended together.
func Transfer(from, to Account, amount int64) (out, in Event, err error) {
	if from.ID == to.ID {
		return out, in, ErrSameAccount
	}
	if err := to.check(amount); err != nil {
		return out, in, err
	}
	if _, err := from.Withdraw(amount); err != nil {
		return out, in, err
	}
	return Event{Type: TransferredOut, Amount: amount, Peer: to.ID}, Event{Type: TransferredIn, Amount: amount, Peer: from.ID}, nil
}

// check refuses commands on an account not open, and amounts that are
// not positive.
func (a Account) check(amount int64) error {
	if !a.Open {
		return fmt.Errorf("%w: %s", ErrNoAccount, a.ID)
	}
	if amount <= 0 {
		return fmt.Errorf("%w: %d", ErrInvalidAmount, amount)
	}
	return nil
}
