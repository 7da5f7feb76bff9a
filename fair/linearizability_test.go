package fair_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/lintest"
)

// The fair lock is linearizable against its specification with the queue and the hand-off
// (lintest.FairLockModel): TryLock with and without waits, Lock whose context reaches its
// deadline or is cancelled by another goroutine mid-wait, re-entry, Unlock, and Unlock of
// released holds. Each call that waits is checked as its first attempt and its outcome
// (lintest.SplitWaits), so that a waiter whose wait ran out may have been handed the lock and
// passed it on as it left. The default leases are renewed by the watchdog: expiry is out of
// play, and so are dropped waiters (the waiter timeout, 5s, is beyond the run).
// The run leaves no key without a TTL.
func TestFairLockIsLinearizable(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		lintest.RunNamedLocks(t, rdb,
			func(r redis.UniversalClient) *aqs.Client { return newClient(t, r) },
			func(c *aqs.Client, name string) lintest.NamedLocker {
				if name == "" {
					return newLock(t, c)
				}
				l, err := fair.New(c, name)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}, lintest.FairLockModel)
	})
}
