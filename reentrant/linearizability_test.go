package reentrant_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/reentrant"
	"github.com/redaqs/aqs/internal/lintest"
)

// The reentrant lock is linearizable against an exclusive reentrant lock's specification
// (lintest.LockModel), TryLock with and without waits.
func TestReentrantLockIsLinearizable(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		names := make([]string, lintest.Locks)
		locks := make([][]lintest.Locker, lintest.Clients) // [client][key]
		for ci := range lintest.Clients {
			c := newClient(t, lintest.OwnRedis(t, rdb))
			for k := range lintest.Locks {
				if ci == 0 {
					names[k] = newLock(t, c).Name()
				}
				l, err := reentrant.New(c, names[k])
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
		lintest.Check(t, lintest.LockModel, history)
	})
}
