package rwlock_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/internal/scripts"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// go-redis re-sends a command whose reply a broken connection lost (MaxRetries), so an
// attempt that took the write side may run again: it must find the lock its own (Granted),
// not wait a lease for itself nor take it anew. With a token, the same token: the run again
// leaves the value, and so the token the first run assigned, as it was.
func TestAWriteAttemptRunTwiceFindsTheLockItsOwn(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	l := newLock(t, newClient(t, rdb))
	ctx := context.Background()
	run := func(args ...any) scripts.Attempt {
		t.Helper()
		v, err := scripts.RWWriteAcquire.Run(ctx, rdb, l.Keys(), args...).Result()
		require.NoError(t, err)
		a, err := scripts.DecodeAttempt(v)
		require.NoError(t, err)
		return a
	}
	for i, token := range []string{"0", "1"} {
		hold := "0f8a9c1e-2b3d-4e5f-8a6b-7c8d9e0f1a2b:" + string(rune('1'+i))
		// hold, lease, waiter timeout, join, token, publish command, first attempt
		args := []any{hold, 60000, 5000, "1", token, "PUBLISH", "1"}
		first := run(args...)
		require.Equal(t, scripts.Acquired, first.Status, "the first run takes the free lock")
		assert.Equal(t, token == "1", first.Token > 0, "a token only when asked (token %s)", token)
		value, err := rdb.Get(ctx, l.Key()).Result()
		require.NoError(t, err)

		again := run(args...)
		assert.Equal(t, scripts.Granted, again.Status, "the run again finds the lock its own (token %s)", token)
		v, err := rdb.Get(ctx, l.Key()).Result()
		require.NoError(t, err)
		assert.Equal(t, value, v, "the run again changed nothing (token %s)", token)
		if token == "1" {
			tok, err := scripts.LockToken.Run(ctx, rdb, []string{l.Key()}, hold).Int64()
			require.NoError(t, err)
			assert.Equal(t, first.Token, tok, "the holder's token is the first run's")
		}
		assert.Zero(t, waiters(t, l), "neither run queued the hold")
		require.NoError(t, rdb.Del(ctx, l.Keys()...).Err())
	}
}
