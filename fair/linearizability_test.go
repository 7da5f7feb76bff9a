package fair_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/lintest"
	"github.com/redaqs/aqs/internal/redistest"
)

// The fair lock is linearizable against its specification with the queue and the hand-off
// (lintest.FairLockModel): TryLock with and without waits, re-entry, Unlock, and Unlock of
// released holds. Each TryLock with a wait is checked as its first attempt and its outcome
// (lintest.SplitWaits), so that a waiter whose wait ran out may have been handed the lock and
// passed it on as it left. The default leases are renewed by the watchdog: expiry is out of
// play, and so are dropped waiters (the waiter timeout, 5s, is beyond the run).
// The run leaves no key without a TTL.
func TestFairLockIsLinearizable(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		first := make([]*fair.Lock, lintest.Locks)
		locks := make([][]lintest.Locker, lintest.Clients) // [client][key]
		for ci := range lintest.Clients {
			c := newClient(t, lintest.OwnRedis(t, rdb))
			for k := range lintest.Locks {
				if ci == 0 {
					first[k] = newLock(t, c)
				}
				l, err := fair.New(c, first[k].Name())
				if err != nil {
					t.Fatal(err)
				}
				locks[ci] = append(locks[ci], l)
			}
		}

		history := lintest.RunLocks(t, locks, true)
		if t.Failed() {
			return
		}
		lintest.LogLockOutcomes(t, history)
		lintest.Check(t, lintest.FairLockModel, lintest.SplitWaits(history))
		for _, l := range first {
			redistest.AssertNoKeyWithoutTTL(t, rdb, l.Name(), l.Key())
		}
	})
}
