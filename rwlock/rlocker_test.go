package rwlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
)

// RLocker is the read side: its holds overlap, keep the write side out until the last
// Unlock, take a lease, and refuse a fencing token before sending anything. Through a
// SyncLocker, each Unlock releases one of them.
func TestRLockerIsTheReadSide(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		l := newLock(t, newClient(t, rdb))
		r := l.RLocker()

		_, err := r.Lock(ctx, aqs.WithFencingToken())
		require.ErrorIs(t, err, aqs.ErrInvalidArgument)
		locked, err := l.IsLocked(ctx)
		require.NoError(t, err)
		require.False(t, locked, "a refused option sends nothing")

		s := aqs.NewSyncLocker(ctx, r)
		s.Lock()
		s.Lock() // a second read hold, through the same SyncLocker: no wait
		leased, err := r.Lock(ctx, aqs.WithLease(time.Minute))
		require.NoError(t, err)
		_, ok, err := l.TryLock(ctx)
		require.NoError(t, err)
		require.False(t, ok, "the write side while reads are held")

		require.NoError(t, r.Unlock(leased))
		s.Unlock()
		_, ok, err = l.TryLock(ctx)
		require.NoError(t, err)
		require.False(t, ok, "the write side while one read is held")
		s.Unlock()
		assert.Nil(t, s.Held())

		w, ok, err := l.TryLock(ctx)
		require.NoError(t, err)
		require.True(t, ok, "the write side once every read is released")
		require.NoError(t, l.Unlock(w))
	})
}
