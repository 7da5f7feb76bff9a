package chaos_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/redistest"
	"github.com/redaqs/aqs/reentrant"
)

// Replies lost on the way back. go-redis runs a command again when its connection broke after
// the command was sent (Options.MaxRetries), so a script or SET that ran, but whose reply was
// lost, runs twice. The proxy drops exactly one reply.

// A Lock whose first attempt (SET NX) ran but lost its reply finds, on the retry, the key held
// by its own hold id: the lock is its own, at once, with a lease counted from the first
// attempt (it was lost on the spot, and its Unlock failed with ErrLockLost, before the fix in
// reentrant/lock.go).
func TestLockWhoseFirstAttemptLostItsReplyHoldsTheLock(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Single(t)
	px := newProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr()})
	defer rdb.Close()
	c, err := aqs.New(ctx, rdb, aqs.WithWatchdogTimeout(3*time.Second))
	require.NoError(t, err)
	defer c.Close()
	l, err := reentrant.New(c, redistest.Name(t))
	require.NoError(t, err)
	defer srv.Client(t).Del(ctx, l.Key())
	px.DropNextReply()
	start := time.Now()
	held, err := l.Lock(ctx)
	took := time.Since(start)
	require.NoError(t, err)
	assert.Less(t, took, time.Second, "Lock waited for its own orphaned attempt")
	require.NoError(t, held.Err(), "the hold is trusted")
	require.NoError(t, l.Unlock(held))
	n, _ := srv.Client(t).Exists(ctx, l.Key()).Result()
	assert.Zero(t, n, "the lock is free after the one Unlock")
}
