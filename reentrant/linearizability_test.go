package reentrant_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/lintest"
	"github.com/redaqs/aqs/reentrant"
)

// The reentrant lock is linearizable against an exclusive reentrant lock's specification with
// local hand-offs (lintest.HandOffLockModel), TryLock with and without waits, and Lock whose
// context reaches its deadline or is cancelled by another goroutine mid-wait: a release may
// hand the lock to a waiter of its own Client, and a waiter whose wait runs out at that moment
// gives it back, so each call that waits is checked as its first attempt and its outcome
// (lintest.SplitWaits). The run leaves no key without a TTL.
func TestReentrantLockIsLinearizable(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		lintest.RunNamedLocks(t, rdb,
			func(r redis.UniversalClient) *aqs.Client { return newClient(t, r) },
			func(c *aqs.Client, name string) lintest.NamedLocker {
				if name == "" {
					return newLock(t, c)
				}
				l, err := reentrant.New(c, name)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}, lintest.HandOffLockModel)
	})
}
