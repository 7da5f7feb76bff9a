package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// The Condition of the fair lock under the network faults: producers and consumers of a stock
// on two Clients that reach Redis through the proxy, while the pub/sub connections are killed
// on the server every 50ms (grant messages are lost) and the proxy cuts every connection every
// 300ms, with 10ms of latency every other period (commands and replies are lost in flight, and
// with them heartbeats and the watchdog's renewals).
//
// Each producer adds items one at a time: lock, push an item, Signal, unlock. Each consumer
// loops: lock, wait on the condition while the stock is empty and items are still to come,
// take one, unlock; the consumer that takes the last item signals all, so that the others see
// that nothing more comes and finish. The stock is a Redis list written through a Client of
// its own, straight to Redis, with the held context, so that the faults act on the lock and
// the condition only, and a hold that is lost writes nothing.
//
// The first Client's go-redis client sends a command again after a cut (its default retries);
// the second's does not. A call that fails (a cut) is made again, as a caller would, and counted: Lock; Wait (whose
// failure leaves the lock not held: the consumer locks again); Signal, until it is known to
// have reached Redis, since a lost Signal could leave a consumer waiting with an item in the
// stock. A Signal whose reply was lost and that is sent again may move a second waiter, and a
// waiter whose heartbeats were lost beyond its waiter timeout wakes without a Signal: both
// wake-ups are spurious, which the consumers' loop on their predicate absorbs.
//
// Every item must be taken exactly once, every consumer must finish within a bound, and no
// two goroutines may be inside the lock at once (an in-process witness).
func TestConditionProducersAndConsumersThroughCutsAndPubSubKills(t *testing.T) {
	items := scale(120, 1200) // about 3s, 30s: a producer makes one every pace
	const (
		producers     = 2 // one per Client
		consumers     = 4 // two per Client
		killEvery     = 50 * time.Millisecond
		cutEvery      = 300 * time.Millisecond
		latency       = 10 * time.Millisecond
		waiterTimeout = 300 * time.Millisecond
		pace          = 50 * time.Millisecond // between a producer's items: the consumers wait, the faults act
		// bound covers the run: a consumer that a lost signal left waiting would wait forever.
		bound = 60 * time.Second
	)
	ctx := context.Background()
	srv := redistest.NewServer(t)
	admin := srv.Client(t)
	px := newProxy(t, srv.Addr())
	name := redistest.Name(t)
	type side struct {
		l *fair.Lock
		c *fair.Condition
	}
	var sides []side
	for i := range 2 {
		// The second Client's go-redis client makes no retries: a cut fails its calls, and the
		// callers' own calls again (and a Wait's outcome unknown) are in play.
		rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), MaxRetries: []int{0, -1}[i]})
		t.Cleanup(func() { rdb.Close() })
		c, err := aqs.New(ctx, rdb, aqs.WithWatchdogTimeout(time.Second))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		l, err := fair.New(c, name, fair.WithWaiterTimeout(waiterTimeout))
		require.NoError(t, err)
		cond, err := l.NewCondition("not empty")
		require.NoError(t, err)
		sides = append(sides, side{l, cond})
	}
	stock := sides[0].l.Key() + ":stock"
	t.Cleanup(func() { admin.Del(context.Background(), stock) })

	stop, done := make(chan struct{}), make(chan struct{})
	var kills, cuts int
	go func() {
		defer close(done)
		killTick, cutTick := time.NewTicker(killEvery), time.NewTicker(cutEvery)
		defer killTick.Stop()
		defer cutTick.Stop()
		for {
			select {
			case <-stop:
				px.SetLatency(0)
				return
			case <-killTick.C:
				n, err := admin.ClientKillByFilter(ctx, "TYPE", "pubsub").Result()
				if err != nil {
					t.Errorf("CLIENT KILL: %v", err)
				}
				kills += int(n)
			case <-cutTick.C:
				px.Cut()
				cuts++
				// Latency every other period, so that cuts find commands in flight.
				px.SetLatency(time.Duration(cuts%2) * latency)
			}
		}
	}()
	stopped := false
	stopFaults := func() {
		if !stopped {
			stopped = true
			close(stop)
			<-done
		}
	}
	t.Cleanup(stopFaults)

	runCtx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var (
		mu       sync.Mutex
		errs     []string
		taken    = map[string]int{}
		inside   atomic.Int32
		overlaps atomic.Int32
		waits    atomic.Int64 // Waits that returned
		produced atomic.Int64
	)
	failed := func(what string, err error) {
		mu.Lock()
		errs = append(errs, what+": "+err.Error())
		mu.Unlock()
	}
	// lock takes the lock, calling Lock again after a failure, until the run's bound.
	lock := func(l *fair.Lock) (context.Context, error) {
		for {
			held, err := l.Lock(runCtx)
			if err == nil || runCtx.Err() != nil {
				return held, err
			}
			failed("Lock", err)
		}
	}
	// enter and leave are the witness: nobody else may be inside.
	enter := func() {
		if inside.Add(1) != 1 {
			overlaps.Add(1)
		}
	}
	leave := func() { inside.Add(-1) }
	unlock := func(l *fair.Lock, held context.Context) {
		leave()
		if err := l.Unlock(held); err != nil {
			failed("Unlock", err) // the hold ends with its lease
		}
	}
	// signal signals until the call is known to have reached Redis.
	signal := func(c *fair.Condition, all bool) error {
		for {
			var err error
			if all {
				_, err = c.SignalAll(runCtx)
			} else {
				_, err = c.Signal(runCtx)
			}
			if err == nil || runCtx.Err() != nil {
				return err
			}
			failed("Signal", err)
		}
	}

	var wg sync.WaitGroup
	finished := make(chan int, consumers)
	for p := range producers {
		s := sides[p%2]
		wg.Go(func() {
			for i := p; i < items; i += producers {
				time.Sleep(pace) // the producer's pace, not a wait for a condition
				held, err := lock(s.l)
				if err != nil {
					t.Errorf("producer %d: %v", p, err)
					return
				}
				enter()
				item := fmt.Sprint(i)
				if err := admin.RPush(held, stock, item).Err(); err != nil {
					// The hold was lost (its context ended): the item is not in; again.
					failed("RPUSH", err)
					unlock(s.l, held)
					i -= producers
					continue
				}
				produced.Add(1)
				if err := signal(s.c, false); err != nil {
					t.Errorf("producer %d: %v", p, err)
				}
				unlock(s.l, held)
			}
		})
	}
	for k := range consumers {
		s := sides[k%2]
		wg.Go(func() {
			for {
				held, err := lock(s.l)
				if err != nil {
					t.Errorf("consumer %d: %v", k, err)
					return
				}
				enter()
				n, more, err := consumeOne(admin, stock, held, &mu, taken, items)
				for err == nil && n == 0 && more {
					leave()
					held, err = s.c.Wait(held)
					if err != nil {
						failed("Wait", err)
						break
					}
					waits.Add(1)
					enter()
					n, more, err = consumeOne(admin, stock, held, &mu, taken, items)
				}
				switch {
				case err != nil && held == nil: // Wait failed: not held
					continue
				case err != nil:
					failed("consume", err)
				case !more:
					// The last item was taken: wake the others to see it.
					if err := signal(s.c, true); err != nil {
						t.Errorf("consumer %d: %v", k, err)
					}
					unlock(s.l, held)
					finished <- k
					return
				}
				unlock(s.l, held)
			}
		})
	}
	wg.Wait()
	stopFaults()
	close(finished)
	var done4 []int
	for k := range finished {
		done4 = append(done4, k)
	}
	assert.Len(t, done4, consumers, "every consumer finished")
	assert.Zero(t, overlaps.Load(), "goroutines inside the lock at once")
	for i := range items {
		assert.Equal(t, 1, taken[fmt.Sprint(i)], "item %d taken", i)
	}
	left, err := admin.LLen(ctx, stock).Result()
	require.NoError(t, err)
	assert.Zero(t, left, "items left in the stock")
	count(int(overlaps.Load()), 0, 0)
	t.Logf("SUMMARY condition producers and consumers through cuts and pub/sub kills: %d items from %d "+
		"producers taken once each by %d consumers on 2 Clients, all finished; %d Waits returned; overlaps %d; "+
		"%d pub/sub connections killed, %d cuts, latency %v every other %v; failed calls made again: %d (%s)", produced.Load(), producers,
		consumers, waits.Load(), overlaps.Load(), kills, cuts, latency, cutEvery, len(errs), errorSample(errs, 4))
}

// consumeOne takes an item off the stock with the hold of held and records it in taken
// (guarded by mu), and returns how many it took (0 or 1) and whether more items are to come:
// fewer than items were taken.
func consumeOne(admin *redis.Client, stock string, held context.Context, mu *sync.Mutex, taken map[string]int, items int) (int, bool, error) {
	item, err := admin.LPop(held, stock).Result()
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, n := range taken {
		total += n
	}
	if errors.Is(err, redis.Nil) {
		return 0, total < items, nil
	}
	if err != nil {
		return 0, total < items, err
	}
	taken[item]++
	return 1, total+1 < items, nil
}
