package semaphore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/semaphore"
)

// A waiter that joins a queue whose list still holds the entry of a waiter that gave up (a
// ghost: leaving removes a waiter from the deadline zset d, and from the list only when it is
// the head) makes d anew, and d must expire like the rest of the queue.
// The joins (join in _sem.lua, and the arrivals written out in sem_acquire.lua and
// lsem_acquire.lua) once set the TTLs of q and d only when their RPUSH made a new list, so
// that d, made anew behind a ghost, had none until the waiter's first heartbeat, and stayed
// for ever if the waiter died before it.
func TestAWaiterBehindAGhostLeavesNoQueueKeyWithoutTTL(t *testing.T) {
	// behindAGhost makes the ghost with try (a wait that fails), joins with wait (a wait cut
	// short by its context) and checks the queue keys of the semaphore whose keys are keys.
	behindAGhost := func(t *testing.T, rdb redis.UniversalClient, keys []string,
		try func(wait time.Duration) bool, wait func(ctx context.Context) error) {
		ctx := context.Background()
		q, d := keys[1], keys[2]
		live := func(n int64) {
			t.Helper()
			require.Eventually(t, func() bool { return rdb.ZCard(ctx, d).Val() == n }, 5*time.Second, time.Millisecond)
		}
		// W1 queues, W2 queues behind it; W2 gives up (its list entry stays, a ghost), then
		// W1 (the head, popped): the list holds the ghost alone, and d is gone.
		first := make(chan bool, 1)
		go func() { first <- try(200 * time.Millisecond) }()
		live(1)
		require.False(t, try(20*time.Millisecond))
		require.False(t, <-first)
		require.Equal(t, int64(1), rdb.LLen(ctx, q).Val(), "the ghost")
		require.Equal(t, int64(0), rdb.Exists(ctx, d).Val())

		// W3 joins behind the ghost.
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- wait(wctx) }()
		live(1)
		for _, k := range []string{q, d} {
			redistest.AssertNoKeyWithoutTTL(t, rdb, k, k)
		}
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	}
	// Heartbeats start a third of the waiter timeout after joining: long after the checks.
	timeout := semaphore.WithWaiterTimeout(30 * time.Second)
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		t.Run("counting", func(t *testing.T) {
			ctx := context.Background()
			s := newSem(t, newClient(t, rdb), 1, timeout)
			require.NoError(t, s.Acquire(ctx, 1))
			defer func() { require.NoError(t, s.Release(ctx, 1)) }()
			behindAGhost(t, rdb, s.Keys(), func(wait time.Duration) bool {
				ok, err := s.TryAcquire(ctx, 1, aqs.WithWait(wait))
				require.NoError(t, err)
				return ok
			}, func(ctx context.Context) error { return s.Acquire(ctx, 1) })
		})
		t.Run("leased", func(t *testing.T) {
			ctx := context.Background()
			s := newLeased(t, newClient(t, rdb), 1, timeout)
			p, err := s.Acquire(ctx, 1)
			require.NoError(t, err)
			defer func() { require.NoError(t, s.Release(ctx, p)) }()
			behindAGhost(t, rdb, s.Keys(), func(wait time.Duration) bool {
				_, ok, err := s.TryAcquire(ctx, 1, aqs.WithWait(wait))
				require.NoError(t, err)
				return ok
			}, func(ctx context.Context) error {
				_, err := s.Acquire(ctx, 1)
				return err
			})
		})
	})
}
