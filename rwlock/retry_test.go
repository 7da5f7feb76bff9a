package rwlock_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/internal/redistest"
	"github.com/redaqs/aqs/internal/scripts"
)

// go-redis re-sends a command whose reply a broken connection lost (MaxRetries), so an
// attempt that took the write side may run again: it must find the lock its own, not wait a
// lease for itself. With a token, the same token.
func TestAWriteAttemptRunTwiceFindsTheLockItsOwn(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	l := newLock(t, newClient(t, rdb))
	ctx := context.Background()
	keys := l.Keys()[:4]
	for i, token := range []string{"0", "1"} {
		hold := "0f8a9c1e-2b3d-4e5f-8a6b-7c8d9e0f1a2b:" + string(rune('1'+i))
		args := []any{hold, 60000, 5000, "1", token}
		first, err := scripts.RWWriteAcquire.Run(ctx, rdb, keys, args...).Int64()
		require.NoError(t, err)
		require.GreaterOrEqual(t, first, int64(1), "the first run takes the free lock")
		again, err := scripts.RWWriteAcquire.Run(ctx, rdb, keys, args...).Int64()
		require.NoError(t, err)
		assert.Equal(t, first, again, "the run again finds the lock its own (token %s)", token)
		require.NoError(t, rdb.Del(ctx, l.Key()).Err())
	}
}
