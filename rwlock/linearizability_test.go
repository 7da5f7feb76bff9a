package rwlock_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/lintest"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/rwlock"
)

// The read-write lock is linearizable against its specification (lintest.RWModel: readers or
// one writer, and one queue of readers and writers served in order by every release; in the
// fair mode no new reader while anyone waits): TryRLock and TryLock with and without waits,
// RLock and Lock whose context reaches its deadline or is cancelled by another goroutine
// mid-wait (a call that waits is its join and its end), re-entry, downgrades, unlocks, and
// unlocks of released holds, on locks in the fair mode and one in the non-fair mode. The default leases are
// renewed by the watchdog, and the waiter timeout is beyond the waits: expiry is out of play.
// The run leaves no key without a TTL.
func TestRWLockIsLinearizable(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		first := make([]*rwlock.Lock, lintest.Locks)
		nonFair := make([]bool, lintest.Locks)
		nonFair[lintest.Locks-1] = true
		locks := make([][]lintest.RWLocker, lintest.Clients) // [client][key]
		var clients []*aqs.Client
		for ci := range lintest.Clients {
			c := newClient(t, lintest.OwnRedis(t, rdb))
			clients = append(clients, c)
			for k := range lintest.Locks {
				var opts []rwlock.Option
				if nonFair[k] {
					opts = append(opts, rwlock.WithNonFair())
				}
				if ci == 0 {
					first[k] = newLock(t, c, opts...)
				}
				l, err := rwlock.New(c, first[k].Name(), opts...)
				if err != nil {
					t.Fatal(err)
				}
				locks[ci] = append(locks[ci], l)
			}
		}

		history := lintest.RunRW(t, clients, locks, nonFair)
		if t.Failed() {
			return
		}
		lintest.LogRWOutcomes(t, history)
		lintest.Check(t, lintest.RWModel, history)
		for _, l := range first {
			redistest.AssertNoKeyWithoutTTL(t, rdb, l.Name(), l.Key())
		}
	})
}
