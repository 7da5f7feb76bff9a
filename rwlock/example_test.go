package rwlock_test

import (
	"context"
	"fmt"
	"log"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/rwlock"
)

// A shared configuration, read by many and updated by one: readers read the whole
// configuration under the read side, all at once, and the writer changes it under the write
// side, field by field, so that no reader ever sees half an update. (The readers are
// goroutines of one process here; across processes, each with its own aqs.Client, it works the
// same.)
func Example_sharedConfiguration() {
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
	lock, err := rwlock.New(client, "example-config")
	if err != nil {
		log.Fatal(err)
	}
	config := "example-config:settings"
	defer rdb.Del(ctx, config)

	// Version v of the configuration has timeout v×100ms and v+2 retries; a reader that finds
	// fields of two versions has read half an update.
	update := func(ctx context.Context, v int) {
		rdb.HSet(ctx, config, "version", v)
		time.Sleep(time.Millisecond) // the fields are written one by one
		rdb.HSet(ctx, config, "timeout", (time.Duration(v) * 100 * time.Millisecond).String())
		rdb.HSet(ctx, config, "retries", v+2)
	}
	consistent := func(c map[string]string) bool {
		v, _ := strconv.Atoi(c["version"])
		return c["timeout"] == (time.Duration(v)*100*time.Millisecond).String() &&
			c["retries"] == strconv.Itoa(v+2)
	}
	update(ctx, 1)

	// While a reader holds, more readers get in, and a writer does not.
	r, err := lock.RLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	r2, ok, _ := lock.TryRLock(ctx)
	fmt.Println("a second reader gets in:", ok)
	lock.RUnlock(r2)
	_, ok, _ = lock.TryLock(ctx)
	fmt.Println("a writer gets in:", ok)
	lock.RUnlock(r)

	// Eight readers read the configuration ten times each while the writer updates it to
	// versions 2 to 6.
	var wg sync.WaitGroup
	var mu sync.Mutex
	reads, torn := 0, 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				held, err := lock.RLock(ctx)
				if err != nil {
					log.Fatal(err)
				}
				c, err := rdb.HGetAll(held, config).Result() // read with the held context
				lock.RUnlock(held)
				if err != nil {
					log.Fatal(err)
				}
				mu.Lock()
				reads++
				if !consistent(c) {
					torn++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for v := 2; v <= 6; v++ {
			held, err := lock.Lock(ctx)
			if err != nil {
				log.Fatal(err)
			}
			update(held, v)
			lock.Unlock(held)
		}
	}()
	wg.Wait()
	fmt.Printf("%d reads, %d of them torn\n", reads, torn)

	c, err := rdb.HGetAll(ctx, config).Result()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("version %s: timeout %s, %s retries\n", c["version"], c["timeout"], c["retries"])
	// Output:
	// a second reader gets in: true
	// a writer gets in: false
	// 80 reads, 0 of them torn
	// version 6: timeout 600ms, 8 retries
}
