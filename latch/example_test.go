package latch_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/latch"
)

// A coordinator waits for three workers to be ready. (The workers are goroutines of one
// process here; across processes, each with its own aqs.Client, it works the same: one
// message wakes the waiters of every Client.)
func Example_coordinator() {
	// The example runs on the test binary's redis-server; an application uses its own address.
	addr, err := redistest.SingleAddr()
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	client, err := aqs.New(ctx, rdb) // one aqs.Client per process
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ready, err := latch.New(client, "example-workers-ready")
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Del(ctx, ready.Keys()...)

	// The coordinator sets the count before any worker can count down.
	if _, err := ready.TrySetCount(ctx, 3); err != nil {
		log.Fatal(err)
	}
	for w := 1; w <= 3; w++ {
		go func() {
			// The worker's preparation, then:
			if err := ready.CountDown(ctx); err != nil {
				log.Fatal(err)
			}
		}()
	}

	// A worker that dies before its CountDown never counts down: bound the wait.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := ready.Await(wctx); err != nil {
		log.Fatal(err)
	}
	n, err := ready.Count(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("every worker is ready; count:", n)
	// Output: every worker is ready; count: 0
}
