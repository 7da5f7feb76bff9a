package fair_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/lintest"
)

// The fair lock, with TryLock without wait, is linearizable against the reentrant lock's
// specification: nobody queues, so first-come first-served adds nothing the history can see.
//
// Without waits only: with WithWait the history is not linearizable against this
// holder-and-count specification. A waiter whose wait runs out can be handed the lock by an
// Unlock and give it back as it leaves, so its TryLock returns false while, between that
// Unlock's return and the give-back, TryLocks without wait of others fail on a lock that no
// acknowledged holder has. A specification of the fair lock with its queue and hand-off would be
// needed for that part.
func TestFairLockIsLinearizable(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		names := make([]string, lintest.Locks)
		locks := make([][]lintest.Locker, lintest.Clients) // [client][key]
		for ci := range lintest.Clients {
			c := newClient(t, lintest.OwnRedis(t, rdb))
			for k := range lintest.Locks {
				if ci == 0 {
					names[k] = newLock(t, c).Name()
				}
				l, err := fair.New(c, names[k])
				if err != nil {
					t.Fatal(err)
				}
				locks[ci] = append(locks[ci], l)
			}
		}

		history := lintest.RunLocks(t, locks, false)
		if t.Failed() {
			return
		}
		lintest.LogLockOutcomes(t, history)
		lintest.Check(t, lintest.LockModel, history)
	})
}
