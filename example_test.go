package aqs_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/reentrant"
)

// Connect go-redis, make one aqs.Client for the process, and take a lock. The Redis address
// comes from REDIS_URL (redis://localhost:6379/0, say). This is the README's quick start.
func Example() {
	ctx := context.Background()
	opt, err := redis.ParseURL(os.Getenv("REDIS_URL"))
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()

	// One aqs.Client per process, shared by every goroutine: it renews the leases of all the
	// locks it holds.
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

// New takes options: here a shorter watchdog timeout, so that the locks of a process that
// dies free themselves within 10s (its holds are renewed every third of it), and a prefix
// that keeps this application's keys apart from another's on the same Redis.
func ExampleNew() {
	ctx := context.Background()
	opt, err := redis.ParseURL(os.Getenv("REDIS_URL"))
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()

	client, err := aqs.New(ctx, rdb,
		aqs.WithWatchdogTimeout(10*time.Second),
		aqs.WithKeyPrefix("billing"),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	lock, err := reentrant.New(client, "invoice:42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(lock.Key())

	_, err = aqs.New(ctx, rdb, aqs.WithWatchdogTimeout(time.Millisecond))
	fmt.Println(err)
	// Output:
	// billing:{invoice:42}
	// aqs: invalid argument: watchdog timeout 1ms is below 30ms
}

// A fencing token is read from the held context, whichever primitive took it; send it with
// every write so that the resource can refuse a holder that lost the lock.
func ExampleFencingToken() {
	ctx := context.Background()
	opt, err := redis.ParseURL(os.Getenv("REDIS_URL"))
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	client, err := aqs.New(ctx, rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	lock, err := reentrant.New(client, "ledger")
	if err != nil {
		log.Fatal(err)
	}

	first, err := lock.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	t1, err := aqs.FencingToken(first)
	if err != nil {
		log.Fatal(err)
	}
	lock.Unlock(first)

	second, err := lock.Lock(ctx, aqs.WithFencingToken()) // assigned by the acquisition
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Unlock(second)
	t2, err := aqs.FencingToken(second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("later hold, greater token:", t2 > t1)

	_, err = aqs.FencingToken(ctx) // ctx holds no lock
	fmt.Println("without a hold:", errors.Is(err, aqs.ErrNotOwner))
	// Output:
	// later hold, greater token: true
	// without a hold: true
}
