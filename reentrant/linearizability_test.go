package reentrant_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/internal/lintest"
	"github.com/redaqs/aqs/internal/redistest"
	"github.com/redaqs/aqs/reentrant"
)

// The reentrant lock is linearizable against an exclusive reentrant lock's specification with
// local hand-offs (lintest.HandOffLockModel), TryLock with and without waits: a release may
// hand the lock to a waiter of its own Client, and a waiter whose wait runs out at that moment
// gives it back, so each TryLock with a wait is checked as its first attempt and its outcome
// (lintest.SplitWaits). The run leaves no key without a TTL.
func TestReentrantLockIsLinearizable(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		first := make([]*reentrant.Lock, lintest.Locks)
		locks := make([][]lintest.Locker, lintest.Clients) // [client][key]
		for ci := range lintest.Clients {
			c := newClient(t, lintest.OwnRedis(t, rdb))
			for k := range lintest.Locks {
				if ci == 0 {
					first[k] = newLock(t, c)
				}
				l, err := reentrant.New(c, first[k].Name())
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
		lintest.Check(t, lintest.HandOffLockModel, lintest.SplitWaits(history))
		for _, l := range first {
			redistest.AssertNoKeyWithoutTTL(t, rdb, l.Name(), l.Key())
		}
	})
}
