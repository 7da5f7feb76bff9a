package fair_test

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// Ticket sales in arrival order, with no oversell: buyers queue on one fair lock (here
// goroutines of one process; across processes it works the same), each buys under the lock
// while tickets are left, and the lock hands the counter to the buyers in the order they came.
func Example_ticketSales() {
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
	lock, err := fair.New(client, "example-tickets")
	if err != nil {
		log.Fatal(err)
	}
	stock := "example-tickets:stock"
	rdb.Set(ctx, stock, 3, 0)
	defer rdb.Del(ctx, stock)

	// The box office opens: while it is held, five buyers join the queue, in order.
	office, err := lock.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex
	var sold []string
	var wg sync.WaitGroup
	for i := 1; i <= 5; i++ {
		buyer := fmt.Sprintf("buyer %d", i)
		joined := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			close(joined)
			held, err := lock.Lock(ctx)
			if err != nil {
				log.Fatal(err)
			}
			defer lock.Unlock(held)
			left, _ := rdb.Get(held, stock).Int()
			mu.Lock()
			defer mu.Unlock()
			if left == 0 {
				sold = append(sold, buyer+": sold out")
				return
			}
			rdb.Decr(held, stock)
			sold = append(sold, buyer+": ticket")
		}()
		<-joined
		untilQueued(rdb, lock, i) // so that the example's arrival order is the order shown
	}
	lock.Unlock(office)
	wg.Wait()
	for _, s := range sold {
		fmt.Println(s)
	}
	// Output:
	// buyer 1: ticket
	// buyer 2: ticket
	// buyer 3: ticket
	// buyer 4: sold out
	// buyer 5: sold out
}

// untilQueued waits, up to five seconds, until n buyers are queued on the lock.
func untilQueued(rdb *redis.Client, lock *fair.Lock, n int) {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if rdb.ZCard(context.Background(), lock.Key()+":d").Val() >= int64(n) {
			return
		}
	}
	log.Fatalf("%d buyers never queued", n)
}

// A buyer waits under the lock until stock arrives, without polling and without missing the
// restock: Wait gives the lock up and waits on the condition in one step, and the restocker's
// Signal, made under the lock after it added stock, moves the buyer onto the lock's queue.
func ExampleCondition() {
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
	lock, err := fair.New(client, "example-inventory")
	if err != nil {
		log.Fatal(err)
	}
	restocked, err := lock.NewCondition("restocked")
	if err != nil {
		log.Fatal(err)
	}
	stock := "example-inventory:stock"
	rdb.Set(ctx, stock, 0, 0)
	defer rdb.Del(ctx, stock)

	bought := make(chan error, 1)
	go func() {
		held, err := lock.Lock(ctx)
		if err != nil {
			bought <- err
			return
		}
		for rdb.Get(held, stock).Val() == "0" {
			if held, err = restocked.Wait(held); err != nil { // the lock is given up meanwhile
				bought <- err
				return
			}
		}
		rdb.Decr(held, stock)
		bought <- lock.Unlock(held)
	}()

	// The restocker: once the buyer waits, add stock under the lock and signal.
	for rdb.ZCard(ctx, restocked.Keys()[1]).Val() == 0 {
		time.Sleep(time.Millisecond) // only to make the example's order certain
	}
	held, err := lock.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	rdb.Incr(held, stock)
	if _, err := restocked.Signal(held); err != nil {
		log.Fatal(err)
	}
	if err := lock.Unlock(held); err != nil {
		log.Fatal(err)
	}
	if err := <-bought; err != nil {
		log.Fatal(err)
	}
	fmt.Println("stock left:", rdb.Get(ctx, stock).Val())
	// Output: stock left: 0
}
