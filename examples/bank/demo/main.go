// Command demo runs the bank example against a Rewind server: it opens
// two accounts, moves money between them, shows an overdraft refused and
// ten concurrent deposits that all count, and prints an account's
// history.
//
//	go run ./cmd/rewind serve                      # in one terminal
//	go run ./examples/bank/demo -addr http://127.0.0.1:7070
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"strconv"
	"sync"
	"time"

	"github.com/rewind-io/rewind/examples/bank"
	"github.com/rewind-io/rewind/sdk/client"
)

func main() {
	addr := flag.String("addr", "http://127.0.0.1:7070", "the server's address")
	topic := flag.String("topic", "bank-accounts", "the accounts topic (created with one partition if missing)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, client.New(*addr), *topic); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, c *client.Client, topic string) error {
	b := bank.New(c, topic)
	if err := b.CreateTopic(ctx); err != nil {
		return err
	}
	// Fresh account ids on each run, so the demo can run again on the same
	// topic.
	run := strconv.FormatInt(time.Now().Unix(), 36)
	alice, bob := "alice-"+run, "bob-"+run

	step := func(what string, err error) {
		if err != nil {
			fmt.Printf("%-36s refused: %v\n", what, err)
			return
		}
		fmt.Printf("%-36s ok\n", what)
	}
	step("open "+alice, b.Open(ctx, alice, "Alice"))
	step("open "+bob, b.Open(ctx, bob, "Bob"))
	step("open "+alice+" again", b.Open(ctx, alice, "Mallory"))
	step("deposit 100.00 to alice", b.Deposit(ctx, alice, 100_00))
	step("withdraw 30.00 from alice", b.Withdraw(ctx, alice, 30_00))
	step("withdraw 5.00 from bob", b.Withdraw(ctx, bob, 5_00))
	step("transfer 50.00 from alice to bob", b.Transfer(ctx, alice, bob, 50_00))
	step("transfer 50.00 from alice to bob", b.Transfer(ctx, alice, bob, 50_00))

	// Ten writers deposit 1.00 each into bob at once: they load the same
	// version, one append wins each round, the others are refused and
	// retry on what they reload. No deposit is lost.
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if err := b.Deposit(ctx, bob, 1_00); err != nil {
				fmt.Println("deposit:", err)
			}
		})
	}
	wg.Wait()
	fmt.Printf("10 concurrent deposits of 1.00 to bob: %d conflicts retried\n", b.Conflicts())

	for _, id := range []string{alice, bob} {
		a, err := b.Account(ctx, id)
		if err != nil {
			return err
		}
		fmt.Printf("%s (%s): %s\n", id, a.Owner, money(a.Balance))
	}

	// The history is the account: every event, with its key version.
	r, err := c.ReadKey(ctx, topic, []byte(alice))
	if err != nil {
		return err
	}
	fmt.Println("history of", alice+":")
	for _, rec := range r.Records {
		e, err := bank.Decode(rec)
		if err != nil {
			return err
		}
		switch e.Type {
		case bank.Opened:
			fmt.Printf("  v%d %-14s by %s\n", rec.KeyVersion, e.Type, e.Owner)
		default:
			fmt.Printf("  v%d %-14s %8s %s\n", rec.KeyVersion, e.Type, money(e.Amount), e.Peer)
		}
	}
	return nil
}

func money(cents int64) string { return fmt.Sprintf("%d.%02d", cents/100, cents%100) }
