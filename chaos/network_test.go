package chaos_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"

	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// Fault 4: the network. Goroutines on three Clients contend for each primitive while
//   - the pub/sub connections are killed on the server (CLIENT KILL TYPE pubsub) every
//     killEvery, so that release messages are lost and the hub must resubscribe;
//   - the Clients reach Redis through a TCP proxy that adds latency, and cuts every connection
//     every cutEvery, so that commands and their replies are dropped in flight.
// Waiters must still make progress (every worker acquires, and the longest time without any
// acquisition stays bounded), and the witness must see no overlap. Callers may see errors
// here (a cut drops a command); they are counted and logged.
//
// go-redis retries a command whose connection broke after it was sent (Options.MaxRetries), so
// a script that ran but lost its reply may run again. Every acquisition and release
// recognises a repeated call (by a key of the call's own, the hold id, or the permit's id),
// changes nothing the second time and answers as the first run did.
//
// The counting semaphore ran without the cuts for a while: under them, one of its two permits
// stayed taken after the load in about one full run in four. The cause: a waiter's first
// attempt that queued it and ran again (its reply lost) after a release had granted it queued
// it a second time, and the next grant took permits for a call that was over. A run again now
// answers "queued" (semaphore/retry_test.go).

func TestPubSubKillsAndDroppedConnectionsKeepWaitersMoving(t *testing.T) {
	span := scale(3*time.Second, 30*time.Second)
	const (
		killEvery = 50 * time.Millisecond
		cutEvery  = 400 * time.Millisecond
		latency   = 10 * time.Millisecond
		// maxGap bounds the time without any acquisition: a lost wakeup is made up for by the
		// waiter's fallback timer (the remaining lease, at most the watchdog timeout, 1s) or a
		// heartbeat (a third of the waiter timeout); a hold orphaned by a lost reply ends with
		// its lease. The rest is room for a loaded machine: a stuck waiter would wait forever.
		maxGap = 5 * time.Second
	)
	forEachKind(t, allKinds, func(t *testing.T, kind string) {
		srv := redistest.NewServer(t)
		admin := srv.Client(t)
		px := newProxy(t, srv.Addr())
		var clients []redis.UniversalClient
		for range 3 {
			rdb := redis.NewClient(&redis.Options{Addr: px.Addr()})
			t.Cleanup(func() { rdb.Close() })
			clients = append(clients, rdb)
		}
		stop := make(chan struct{})
		var kills, cuts int
		done := make(chan struct{})
		quit := make(chan struct{}) // the test ended early
		faults := func() {
			defer close(done)
			killTick := time.NewTicker(killEvery)
			defer killTick.Stop()
			cutTick := time.NewTicker(cutEvery)
			defer cutTick.Stop()
			end := time.After(span)
			for {
				select {
				case <-quit:
					return
				case <-end:
					px.SetLatency(0)
					close(stop)
					return
				case <-killTick.C:
					n, err := admin.ClientKillByFilter(context.Background(), "TYPE", "pubsub").Result()
					if err != nil {
						t.Errorf("CLIENT KILL: %v", err)
					}
					kills += int(n)
				case <-cutTick.C:
					px.Cut()
					cuts++
					if cuts%2 == 1 {
						px.SetLatency(latency)
					} else {
						px.SetLatency(0)
					}
				}
			}
		}
		started := false
		t.Cleanup(func() { // the faults stop with the test, also when its set-up failed
			if started {
				close(quit)
				<-done
			}
		})
		res := runLoad(t, loadConfig{
			cfg:     primConfig{kind: kind, name: redistest.Name(t), waiterTimeout: loadWaiterTimeout, permits: 2},
			clients: clients, workers: 2, work: 2 * time.Millisecond, bound: 10 * time.Second,
			watchdog: time.Second, admin: admin,
			started: func() { started = true; go faults() },
		}, stop)
		<-done
		t.Logf("SUMMARY network %s: %v in %v with %d pub/sub connections killed, %d cuts of every "+
			"connection, latency %v every other %v; errors seen: %s", kind, res, span, kills, cuts, latency,
			cutEvery, errorSample(res.errs, 4))
		count(int(res.overlaps), 0, 0)
		assert.Empty(t, res.stuck, "stuck after the load")
		assert.Zero(t, res.overlaps, "overlaps")
		assert.Less(t, res.maxGap, maxGap, "longest time without an acquisition")
		for i, n := range res.perWorker {
			assert.NotZero(t, n, "worker %d never acquired", i)
		}
	})
}
