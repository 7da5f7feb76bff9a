package semaphore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/semaphore"
)

func TestCountingBasics(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		s := newSem(t, newClient(t, rdb), 3)
		ok, err := s.TrySetPermits(ctx, 5)
		require.NoError(t, err)
		require.False(t, ok, "set twice")
		require.NoError(t, s.Acquire(ctx, 2))
		n, err := s.Available(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		ok, err = s.TryAcquire(ctx, 2)
		require.NoError(t, err)
		require.False(t, ok)
		require.ErrorIs(t, s.Acquire(ctx, 4), semaphore.ErrTooManyPermits)
		require.NoError(t, s.Release(ctx, 2))
		require.ErrorIs(t, s.Release(ctx, 1), semaphore.ErrOverRelease)
		n, err = s.Drain(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, n)
		require.NoError(t, s.Release(ctx, 3))
	})
}

func TestCountingWaiterIsServedInOrder(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		s := newSem(t, newClient(t, rdb), 4)
		other, err := semaphore.New(newClient(t, rdb), s.Name())
		require.NoError(t, err)
		require.NoError(t, s.Acquire(ctx, 4))
		big := make(chan error, 1)
		go func() { big <- other.Acquire(ctx, 3) }()
		waitQueued(t, rdb, s.Keys()[1], 1)
		small := make(chan error, 1)
		go func() { small <- s.Acquire(ctx, 1) }()
		waitQueued(t, rdb, s.Keys()[1], 2)
		require.NoError(t, s.Release(ctx, 2)) // 2 available: the head needs 3, the small waits
		select {
		case err := <-small:
			t.Fatalf("the small request passed the large one: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		require.NoError(t, s.Release(ctx, 1))
		require.NoError(t, <-big)
		require.NoError(t, s.Release(ctx, 1))
		require.NoError(t, <-small)
		n, err := s.Available(ctx)
		require.NoError(t, err)
		require.Equal(t, 0, n)
	})
}

func TestLeasedBasics(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		s := newLeased(t, newClient(t, rdb), 3)
		p, err := s.Acquire(ctx, 2)
		require.NoError(t, err)
		n, err := s.Available(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		q, err := s.Acquire(ctx, 1, aqs.WithLease(100*time.Millisecond))
		require.NoError(t, err)
		start := time.Now()
		r, err := s.Acquire(ctx, 1) // served when q's lease ends
		require.NoError(t, err)
		require.Less(t, time.Since(start), time.Second)
		<-q.Context().Done()
		require.ErrorIs(t, context.Cause(q.Context()), aqs.ErrLockLost)
		require.ErrorIs(t, s.Release(ctx, q), semaphore.ErrPermitExpired)
		require.NoError(t, s.ReleasePart(ctx, p, 1))
		require.Equal(t, 1, p.Permits())
		require.ErrorIs(t, s.ReleasePart(ctx, p, 2), semaphore.ErrOverRelease)
		require.NoError(t, s.Release(ctx, p))
		require.ErrorIs(t, s.Release(ctx, p), aqs.ErrNotOwner)
		require.NoError(t, s.Release(ctx, r))
		n, err = s.Available(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, n)
	})
}

// waitQueued waits until the queue list at key holds n entries.
func waitQueued(t *testing.T, rdb redis.UniversalClient, key string, n int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		l, err := rdb.LLen(context.Background(), key).Result()
		return err == nil && l == n
	}, 5*time.Second, time.Millisecond)
}
