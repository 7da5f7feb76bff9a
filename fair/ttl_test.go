package fair_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// A waiter that joins a queue whose list still holds the entry of a waiter that gave up (a
// ghost: giving up removes the entry from the deadline zset d only) makes d anew, and d must
// expire like the rest.
// fair_acquire.lua once set the TTLs of q and d only when its RPUSH made a new list, so that
// d, made anew behind a ghost, had none until the waiter's first heartbeat, and stayed for
// ever if the waiter died before it.
func TestAWaiterBehindAGhostLeavesNoKeyWithoutTTL(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c := newClient(t, rdb)
		// Heartbeats start a third of the timeout after joining: long after the check.
		l := newLock(t, c, fair.WithWaiterTimeout(30*time.Second))
		held, err := l.Lock(ctx)
		require.NoError(t, err)
		defer func() { require.NoError(t, l.Unlock(held)) }()

		// A waiter gives up behind the holder: its list entry stays, a ghost, and d is gone.
		_, ok, err := l.TryLock(ctx, aqs.WithWait(20*time.Millisecond))
		require.NoError(t, err)
		require.False(t, ok)
		require.Equal(t, int64(1), rdb.LLen(ctx, l.Key()+":q").Val(), "the ghost")
		require.Equal(t, int64(0), queued(t, rdb, l))

		// Another waiter joins behind the ghost.
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := l.Lock(wctx)
			done <- err
		}()
		waitQueued(t, rdb, l, 1)
		redistest.AssertNoKeyWithoutTTL(t, rdb, l.Name(), l.Key())
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	})
}
