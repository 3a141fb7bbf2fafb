package bank_test

import (
	"context"
	"errors"
	"flag"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/rewind-io/rewind/engine"
	"github.com/rewind-io/rewind/examples/bank"
	"github.com/rewind-io/rewind/internal/enginetest"
	"github.com/rewind-io/rewind/sdk/client"
)

var seedFlag = flag.Uint64("seed", 0, "the seed of TestConcurrentWriters' operations (0: from the clock)")

// TestConcurrentWriters: 8 writers run 25 random deposits, withdrawals
// and transfers each on 3 accounts of a real node. However the appends
// interleave, no update is lost and no balance ever goes negative: each
// account's history replays to exactly the operations that were accepted,
// and every prefix of it has a balance >= 0.
func TestConcurrentWriters(t *testing.T) {
	const writers, opsEach = 8, 25
	accounts := []string{"a", "b", "c"}
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed %d)", seed, seed)

	n := enginetest.StartNode(t, engine.Config{Dir: t.TempDir()})
	c := client.New(n.URL)
	b := bank.New(c, "accounts")
	ctx := context.Background()
	if err := b.CreateTopic(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range accounts {
		if err := b.Open(ctx, id, "owner of "+id); err != nil {
			t.Fatal(err)
		}
	}

	// What the accepted operations add up to, per account, and how many
	// events each account gained.
	var mu sync.Mutex
	balance := map[string]int64{}
	events := map[string]int{}
	refused := 0
	var wg sync.WaitGroup
	for w := range writers {
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		wg.Go(func() {
			for range opsEach {
				i := rng.IntN(len(accounts))
				from, to := accounts[i], accounts[(i+1+rng.IntN(len(accounts)-1))%len(accounts)]
				amount := 1 + rng.Int64N(50)
				var err error
				var change map[string]int64
				switch rng.IntN(3) {
				case 0:
					change = map[string]int64{from: amount}
					err = b.Deposit(ctx, from, amount)
				case 1:
					change = map[string]int64{from: -amount}
					err = b.Withdraw(ctx, from, amount)
				default:
					change = map[string]int64{from: -amount, to: amount}
					err = b.Transfer(ctx, from, to, amount)
				}
				mu.Lock()
				switch {
				case err == nil:
					for id, d := range change {
						balance[id] += d
						events[id]++
					}
				case errors.Is(err, bank.ErrInsufficientFunds):
					refused++
				default:
					t.Error(err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("%d operations refused for lack of funds, %d appends retried after a conflict", refused, b.Conflicts())

	for _, id := range accounts {
		r, err := c.ReadKey(ctx, "accounts", []byte(id))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(r.Records), 1+events[id]; got != want {
			t.Errorf("account %s holds %d events, want 1 (opened) + %d accepted", id, got, events[id])
		}
		a := bank.Account{ID: id}
		for _, rec := range r.Records {
			e, err := bank.Decode(rec)
			if err != nil {
				t.Fatal(err)
			}
			a.Apply(e)
			if a.Balance < 0 {
				t.Errorf("account %s is overdrawn at version %d: %d", id, rec.KeyVersion, a.Balance)
			}
		}
		if a.Balance != balance[id] {
			t.Errorf("account %s: balance %d, but the accepted operations add up to %d", id, a.Balance, balance[id])
		}
	}
}
