package history

import (
	"fmt"
	"strconv"
	"strings"
)

// The bank workload (the lost-update scenario) keeps one account per key:
// its history is a list of entries, each a record appended with the
// condition that the account is still at the version its writer loaded.
// An entry's value is "OP AMOUNT ID": the operation, a positive amount and
// the append's idempotency key (which makes every value unique, as the Log
// checker requires). BankValue writes it, ParseBankValue reads it: the
// runner and the checker share the one definition.

// BankOp is an operation on an account.
type BankOp string

const (
	// Open is an account's first entry, with its opening deposit; no
	// other entry may be one.
	Open BankOp = "open"
	// Deposit adds the amount.
	Deposit BankOp = "deposit"
	// Withdraw takes the amount away; the business rule allows it only
	// when the balance stays at or above 0.
	Withdraw BankOp = "withdraw"
)

// BankValue is the value of an entry.
func BankValue(op BankOp, amount int64, id string) string {
	return fmt.Sprintf("%s %d %s", op, amount, id)
}

// ParseBankValue reads an entry's value; ok is false when v is not one.
func ParseBankValue(v string) (op BankOp, amount int64, ok bool) {
	f := strings.Fields(v)
	if len(f) != 3 {
		return "", 0, false
	}
	op = BankOp(f[0])
	if op != Open && op != Deposit && op != Withdraw {
		return "", 0, false
	}
	amount, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || amount <= 0 {
		return "", 0, false
	}
	return op, amount, true
}
