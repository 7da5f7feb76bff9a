package reentrant_test

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
	"github.com/redaqs/aqs/reentrant"
)

// The examples run against the test binary's shared redis-server (started on first use,
// stopped by redistest.Main in TestMain), where an application would use its own address.

// exampleAddr returns the address of the shared redis-server. Examples get no testing.TB, so
// a failed start (redis-server missing, say) panics, which fails the example with the message.
func exampleAddr() string {
	addr, err := redistest.SingleAddr()
	if err != nil {
		panic(err)
	}
	return addr
}

// exampleRedis is the Redis client of the examples after the first.
var exampleRedis = sync.OnceValue(func() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: exampleAddr()})
})

// exampleClient returns a new aqs.Client, set up as in Example.
func exampleClient() *aqs.Client {
	client, err := aqs.New(context.Background(), exampleRedis())
	if err != nil {
		log.Fatal(err)
	}
	return client
}

// Lock returns a held context: do the work with it, and give it to Unlock.
func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: exampleAddr()})
	defer rdb.Close()

	// One aqs.Client per process: it renews the leases of every lock it holds.
	client, err := aqs.New(ctx, rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	lock, err := reentrant.New(client, "invoice:42")
	if err != nil {
		log.Fatal(err)
	}

	held, err := lock.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Unlock(held)

	// Work under the lock with held: it is cancelled, with cause aqs.ErrLockLost, if the lock
	// is lost, so the work stops before another owner can get in.
	fmt.Println("holding", lock.Name())
	// Output: holding invoice:42
}

// The owner travels in the context: a function called with the held context re-enters the
// lock instead of waiting for it, while an unrelated context is another owner.
func ExampleLock_Lock_reentry() {
	client := exampleClient()
	defer client.Close()
	lock, err := reentrant.New(client, "account:7")
	if err != nil {
		log.Fatal(err)
	}

	methodB := func(ctx context.Context) error {
		held, err := lock.Lock(ctx) // re-enters: ctx holds the lock already
		if err != nil {
			return err
		}
		defer lock.Unlock(held)
		n, err := lock.HoldCount(held)
		if err != nil {
			return err
		}
		fmt.Println("methodB: hold count", n)

		_, ok, err := lock.TryLock(context.Background()) // another owner
		if err != nil {
			return err
		}
		fmt.Println("methodB: another owner gets the lock:", ok)
		return nil
	}
	methodA := func(ctx context.Context) error {
		held, err := lock.Lock(ctx)
		if err != nil {
			return err
		}
		defer lock.Unlock(held)
		fmt.Println("methodA: locked")
		return methodB(held)
	}

	if err := methodA(context.Background()); err != nil {
		log.Fatal(err)
	}
	locked, err := lock.IsLocked(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("locked after methodA:", locked)
	// Output:
	// methodA: locked
	// methodB: hold count 2
	// methodB: another owner gets the lock: false
	// locked after methodA: false
}

// TryLock does not wait, or waits a bounded time with aqs.WithWait. Not getting the lock is a
// result, not an error.
func ExampleLock_TryLock() {
	ctx := context.Background()
	client := exampleClient()
	defer client.Close()
	lock, err := reentrant.New(client, "nightly-report")
	if err != nil {
		log.Fatal(err)
	}

	other, err := lock.Lock(ctx) // another owner holds the lock
	if err != nil {
		log.Fatal(err)
	}

	_, ok, err := lock.TryLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("one attempt:", ok)

	_, ok, err = lock.TryLock(ctx, aqs.WithWait(100*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("waiting 100ms:", ok)

	// The other owner releases after 100ms; its release wakes the waiter.
	time.AfterFunc(100*time.Millisecond, func() { lock.Unlock(other) })
	held, ok, err := lock.TryLock(ctx, aqs.WithWait(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("waiting up to 5s:", ok)
	if ok {
		lock.Unlock(held)
	}
	// Output:
	// one attempt: false
	// waiting 100ms: false
	// waiting up to 5s: true
}

// A fencing token lets a resource refuse a holder that lost the lock without noticing: a
// process paused past its lease (a long GC pause, a stalled disk) still believes it holds the
// lock when it resumes. Every new hold of a lock name has a greater token than all earlier
// ones, so a resource that remembers the highest token it accepted can refuse lower ones.
func ExampleLock_Token() {
	ctx := context.Background()
	client := exampleClient()
	defer client.Close()
	lock, err := reentrant.New(client, "report.csv")
	if err != nil {
		log.Fatal(err)
	}

	var highest int64 // the resource's memory
	write := func(token int64, data string) {
		if token < highest {
			fmt.Printf("refused %s: stale fencing token\n", data)
			return
		}
		highest = token
		fmt.Printf("wrote %s\n", data)
	}

	heldA, err := lock.Lock(ctx, aqs.WithLease(200*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	tokenA, _ := lock.Token(heldA)
	<-heldA.Done() // A pauses past its lease: its held context ends (aqs.ErrLockLost)

	heldB, err := lock.Lock(ctx) // B gets the lock, with a greater token
	if err != nil {
		log.Fatal(err)
	}
	tokenB, _ := lock.Token(heldB)
	write(tokenB, "B's rows")
	lock.Unlock(heldB)

	write(tokenA, "A's rows") // A resumes and writes as if it still held the lock
	// Output:
	// wrote B's rows
	// refused A's rows: stale fencing token
}

// With aqs.WithLease the hold expires after a fixed time instead of being renewed by the
// Client's watchdog. The held context ends just before the lease runs out, so work done with
// it stops in time.
func ExampleLock_Lock_lease() {
	ctx := context.Background()
	client := exampleClient()
	defer client.Close()
	lock, err := reentrant.New(client, "cache-rebuild")
	if err != nil {
		log.Fatal(err)
	}

	held, err := lock.Lock(ctx, aqs.WithLease(200*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}

	work := func(ctx context.Context) error {
		select {
		case <-time.After(5 * time.Second): // longer than the lease
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	if err := work(held); err != nil {
		fmt.Println("work stopped:", err)
	}

	err = lock.Unlock(held)
	fmt.Println("Unlock reports the loss:", errors.Is(err, aqs.ErrLockLost))
	// Output:
	// work stopped: aqs: lock lost
	// Unlock reports the loss: true
}
