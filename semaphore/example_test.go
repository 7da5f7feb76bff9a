package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/semaphore"
)

// A worker pool that runs at most two jobs at once, however many workers there are: each job
// runs under a leased permit. (The workers are goroutines of one process here; across
// processes, each with its own aqs.Client, it works the same, and the permits of a process
// that crashes come back when their lease ends.)
func ExampleLeased_workerPool() {
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
	pool, err := semaphore.NewLeased(client, "example-pool")
	if err != nil {
		log.Fatal(err)
	}
	// The permits are set once, by whichever process comes first; they stay until the keys are
	// deleted.
	if _, err := pool.TrySetPermits(ctx, 2); err != nil {
		log.Fatal(err)
	}
	defer rdb.Del(ctx, pool.Keys()...)

	// Six workers, one job each. The pool's limit is checked here by counting the jobs running.
	var (
		mu            sync.Mutex
		running, most int
		done          []int
		wg            sync.WaitGroup
	)
	for job := 1; job <= 6; job++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			permit, err := pool.Acquire(ctx, 1) // waits for a permit, in arrival order
			if err != nil {
				log.Fatal(err)
			}
			defer pool.Release(ctx, permit)
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()

			// The job's work, under permit.Context(): it is done should the lease be lost.
			select {
			case <-time.After(10 * time.Millisecond):
			case <-permit.Context().Done():
				log.Fatal(context.Cause(permit.Context()))
			}

			mu.Lock()
			running--
			done = append(done, job)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if most <= 2 {
		fmt.Printf("%d jobs done, never more than 2 at once\n", len(done))
	} else {
		fmt.Printf("%d jobs done, %d at once\n", len(done), most)
	}
	available, err := pool.Available(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("permits available:", available)
	// Output:
	// 6 jobs done, never more than 2 at once
	// permits available: 2
}

// A counting semaphore bounds how many calls run at once across processes, say the export
// jobs that one downstream service can take. Permits are numbers: whoever took them gives them
// back, and TryAcquire does not wait unless it is given aqs.WithWait.
func ExampleSemaphore() {
	// The example runs on the test binary's redis-server; an application uses its own address.
	addr, err := redistest.SingleAddr()
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
	exports, err := semaphore.New(client, "example-exports")
	if err != nil {
		log.Fatal(err)
	}
	// Three exports at once, set once by whichever process comes first.
	if _, err := exports.TrySetPermits(ctx, 3); err != nil {
		log.Fatal(err)
	}
	defer rdb.Del(ctx, exports.Keys()...)

	if err := exports.Acquire(ctx, 2); err != nil { // a large export takes two permits
		log.Fatal(err)
	}
	left, _ := exports.Available(ctx)
	fmt.Println("available:", left)

	ok, err := exports.TryAcquire(ctx, 2)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("a second large export now:", ok)

	// The first export ends in 50ms; the second waits for it, up to a second.
	time.AfterFunc(50*time.Millisecond, func() { exports.Release(ctx, 2) })
	ok, err = exports.TryAcquire(ctx, 2, aqs.WithWait(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after waiting:", ok)
	if err := exports.Release(ctx, 2); err != nil {
		log.Fatal(err)
	}

	_, err = exports.TryAcquire(ctx, 4) // more than the semaphore has
	fmt.Println(errors.Is(err, semaphore.ErrTooManyPermits))
	// Output:
	// available: 1
	// a second large export now: false
	// after waiting: true
	// true
}

// A limit per tenant: each tenant's semaphore is made on first use (WithSize) under a name of
// its own, and goes once it is idle for an hour (WithExpiry), so that Redis does not keep the
// semaphores of tenants long gone. Should a tenant come back after that, its semaphore is made
// again, all of its permits available.
func ExampleWithExpiry() {
	// The example runs on the test binary's redis-server; an application uses its own address.
	addr, err := redistest.SingleAddr()
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

	tenant := "tenant-42"
	limit, err := semaphore.NewLeased(client, "exports:"+tenant, semaphore.WithSize(3), semaphore.WithExpiry(time.Hour))
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Del(ctx, limit.Keys()...)
	permit, err := limit.Acquire(ctx, 1) // at most 3 exports of the tenant at once
	if err != nil {
		log.Fatal(err)
	}
	available, err := limit.Available(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("available:", available)
	ttl := rdb.TTL(ctx, limit.Key()).Val()
	fmt.Println("expires within the hour:", ttl > 0 && ttl <= time.Hour)
	if err := limit.Release(ctx, permit); err != nil {
		log.Fatal(err)
	}
	// Output:
	// available: 2
	// expires within the hour: true
}
