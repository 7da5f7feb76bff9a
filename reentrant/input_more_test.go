package reentrant_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/reentrant"
)

// Bad input not covered by lock_test.go: each test checks what the caller gets and what is
// left in Redis (see docs/BAD_INPUT.md).

// assertKeyAbsent checks that the lock's key does not exist.
func assertKeyAbsent(t *testing.T, rdb redis.UniversalClient, l *reentrant.Lock) {
	t.Helper()
	n, err := rdb.Exists(context.Background(), l.Key()).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "the lock key %s was written", l.Key())
}

// doneContexts returns a context cancelled, one cancelled with a cause, and one past its
// deadline.
func doneContexts() map[string]context.Context {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	withCause, cancelCause := context.WithCancelCause(context.Background())
	cancelCause(errors.New("the caller gave up"))
	expired, cancelExpired := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	cancelExpired() // a no-op on a context already past its deadline: it stays DeadlineExceeded
	return map[string]context.Context{"cancelled": cancelled, "cause": withCause, "deadline": expired}
}

func TestLockRejectsANonPositiveLeaseAndLeavesTheLockFree(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	l := newLock(t, newClient(t, rdb))
	for _, d := range []time.Duration{0, -time.Second, -1} {
		held, err := l.Lock(context.Background(), aqs.WithLease(d))
		assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "Lock(WithLease(%v))", d)
		assert.Nil(t, held)
	}
	assertKeyAbsent(t, rdb, l)
}

func TestNilLockOptionIsAnInvalidArgument(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	l := newLock(t, newClient(t, rdb))
	ctx := context.Background()
	_, err := l.Lock(ctx, nil)
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "Lock(nil)")
	_, err = l.Lock(ctx, aqs.WithLease(time.Second), nil)
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "Lock(WithLease, nil)")
	_, ok, err := l.TryLock(ctx, nil)
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "TryLock(nil)")
	assert.False(t, ok)
	_, ok, err = l.TryLock(ctx, aqs.WithWait(time.Second), nil)
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "TryLock(WithWait, nil)")
	assert.False(t, ok)
	assertKeyAbsent(t, rdb, l)
}

func TestDoneContextFailsWithItsCauseAndWritesNothing(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		c := newClient(t, rdb)
		l := newLock(t, c)
		for name, ctx := range doneContexts() {
			want := context.Cause(ctx)
			held, err := l.Lock(ctx)
			assert.ErrorIs(t, err, want, "%s: Lock", name)
			assert.Nil(t, held)
			held, ok, err := l.TryLock(ctx)
			assert.ErrorIs(t, err, want, "%s: TryLock", name)
			assert.False(t, ok)
			assert.Nil(t, held)
			_, ok, err = l.TryLock(ctx, aqs.WithWait(time.Second))
			assert.ErrorIs(t, err, want, "%s: TryLock(WithWait)", name)
			assert.False(t, ok)
		}
		assertKeyAbsent(t, rdb, l)
		assert.Zero(t, hubWaiters(c), "no waiter was registered")
	})
}

func TestTokenThroughAContextThatDoesNotHoldTheLockIsNotOwner(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	c := newClient(t, rdb)
	l := newLock(t, c)
	other := newLock(t, c)
	ctx := context.Background()

	_, err := l.Token(ctx)
	assert.ErrorIs(t, err, aqs.ErrNotOwner, "a context that holds nothing")
	assertKeyAbsent(t, rdb, l)

	heldOther, err := other.Lock(ctx)
	require.NoError(t, err)
	_, err = l.Token(heldOther)
	assert.ErrorIs(t, err, aqs.ErrNotOwner, "a context that holds another lock")
	assertKeyAbsent(t, rdb, l)
	require.NoError(t, other.Unlock(heldOther))

	held, err := l.Lock(ctx)
	require.NoError(t, err)
	before, err := rdb.Get(ctx, l.Key()).Result()
	require.NoError(t, err)
	_, err = l.Token(ctx)
	assert.ErrorIs(t, err, aqs.ErrNotOwner, "another context while the lock is held")
	after, err := rdb.Get(ctx, l.Key()).Result()
	require.NoError(t, err)
	assert.Equal(t, before, after, "no token was assigned to the holder")
	require.NoError(t, l.Unlock(held))

	_, err = l.Token(held)
	assert.ErrorIs(t, err, aqs.ErrNotOwner, "a held context already released")
	assertKeyAbsent(t, rdb, l)
}

func TestInspectionAfterCloseFailsWithErrClosed(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	c, err := aqs.New(context.Background(), rdb)
	require.NoError(t, err)
	l := newLock(t, c)
	ctx := context.Background()
	held, err := l.Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, c.Close())

	_, err = l.Info(ctx)
	assert.ErrorIs(t, err, aqs.ErrClosed, "Info")
	n, err := l.HoldCount(held)
	assert.ErrorIs(t, err, aqs.ErrClosed, "HoldCount through the held context")
	assert.Zero(t, n)
	n, err = l.HoldCount(ctx)
	assert.ErrorIs(t, err, aqs.ErrClosed, "HoldCount through another context")
	assert.Zero(t, n)
	lease, err := l.RemainingLease(ctx)
	assert.ErrorIs(t, err, aqs.ErrClosed, "RemainingLease")
	assert.Zero(t, lease)

	// The hold is not deleted: it expires.
	pttl, err := rdb.PTTL(ctx, l.Key()).Result()
	require.NoError(t, err)
	assert.Greater(t, pttl, time.Duration(0))
	require.NoError(t, rdb.Del(ctx, l.Key()).Err())
}
