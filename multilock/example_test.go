package multilock_test

import (
	"context"
	"fmt"
	"log"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/multilock"
)

// Transfers between accounts, each under the lock of both accounts at once: concurrent
// transfers in both directions never deadlock, and no money is created or lost. The account
// names share a hash tag, so that on Redis Cluster they live in one slot.
func Example_transfers() {
	addr, err := redistest.SingleAddr() // an application would use its own Redis address
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	client, err := aqs.New(ctx, rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	balance := func(account string) string { return "example-bank:balance:" + account }
	for _, a := range []string{"alice", "bob", "carol"} {
		rdb.Set(ctx, balance(a), 100, 0)
		defer rdb.Del(ctx, balance(a))
	}
	transfer := func(from, to string, amount int64) error {
		lock, err := multilock.New(client, []string{"{bank}:" + from, "{bank}:" + to})
		if err != nil {
			return err
		}
		held, err := lock.Lock(ctx)
		if err != nil {
			return err
		}
		defer lock.Unlock(held)
		if n, err := rdb.Get(held, balance(from)).Int64(); err != nil || n < amount {
			return err // not enough money: nothing moves
		}
		_, err = rdb.TxPipelined(held, func(p redis.Pipeliner) error {
			p.DecrBy(held, balance(from), amount)
			p.IncrBy(held, balance(to), amount)
			return nil
		})
		return err
	}

	var wg sync.WaitGroup
	for i := range 30 {
		pair := [][2]string{{"alice", "bob"}, {"bob", "alice"}, {"bob", "carol"}, {"carol", "alice"}}[i%4]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := transfer(pair[0], pair[1], 7); err != nil {
				log.Fatal(err)
			}
		}()
	}
	wg.Wait()
	var total int64
	for _, a := range []string{"alice", "bob", "carol"} {
		n, _ := rdb.Get(ctx, balance(a)).Int64()
		total += n
	}
	fmt.Println("money in the bank:", total)
	// Output: money in the bank: 300
}
