package fair_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// Bad input not covered by lock_test.go: each test checks what the caller gets and what is
// left in Redis (see docs/BAD_INPUT.md).

// fairKeys returns the lock key, the queue list and the deadlines zset.
func fairKeys(l *fair.Lock) []string { return []string{l.Key(), l.Key() + ":q", l.Key() + ":d"} }

// assertNoFairKey checks that none of the lock's keys exists.
func assertNoFairKey(t *testing.T, rdb redis.UniversalClient, l *fair.Lock) {
	t.Helper()
	for _, k := range fairKeys(l) {
		n, err := rdb.Exists(context.Background(), k).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "key %s was written", k)
	}
}

// assertForeignString checks that key still holds value, with no expiry set.
func assertForeignString(t *testing.T, rdb redis.UniversalClient, key, value string) {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Result()
	require.NoError(t, err, "key %s", key)
	assert.Equal(t, value, v, "key %s", key)
	pttl, err := rdb.PTTL(context.Background(), key).Result()
	require.NoError(t, err)
	assert.Equal(t, time.Duration(-1), pttl, "no expiry was set on %s", key)
}

func TestFairZeroOptionIsAnInvalidArgument(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	c := newClient(t, rdb)
	name := redistest.Name(t)
	l, err := fair.New(c, name, fair.Option{})
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "New(Option{})")
	assert.Nil(t, l)
	l, err = fair.New(c, name, fair.WithWaiterTimeout(time.Second), fair.Option{})
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "New(WithWaiterTimeout, Option{})")
	assert.Nil(t, l)
}

func TestFairBadLockOptionsAreInvalidAndWriteNothing(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	l := newLock(t, newClient(t, rdb))
	ctx := context.Background()
	for name, opts := range map[string][]aqs.TryLockOption{
		"WithLease(-1s)":       {aqs.WithLease(-time.Second)},
		"WithWait(0)":          {aqs.WithWait(0)},
		"WithWait(-1s)":        {aqs.WithWait(-time.Second)},
		"nil":                  {nil},
		"WithWait(1s), nil":    {aqs.WithWait(time.Second), nil},
		"WithLease(1s), nil":   {aqs.WithLease(time.Second), nil},
		"WithWait(1s), Lease0": {aqs.WithWait(time.Second), aqs.WithLease(0)},
	} {
		held, ok, err := l.TryLock(ctx, opts...)
		assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "TryLock(%s)", name)
		assert.False(t, ok)
		assert.Nil(t, held)
	}
	for name, opts := range map[string][]aqs.LockOption{
		"WithLease(0)":       {aqs.WithLease(0)},
		"WithLease(-1s)":     {aqs.WithLease(-time.Second)},
		"nil":                {nil},
		"WithLease(1s), nil": {aqs.WithLease(time.Second), nil},
	} {
		held, err := l.Lock(ctx, opts...)
		assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "Lock(%s)", name)
		assert.Nil(t, held)
	}
	assertNoFairKey(t, rdb, l)
}

func TestFairUnlockThroughAContextThatNeverHeldIsNotOwner(t *testing.T) {
	// A single node only: starting the shared cluster before lock_test.go's tests run makes
	// the timing-sensitive TestGivingUpLeavesNoResidue fail more often.
	rdb := redistest.Single(t).Client(t)
	l := newLock(t, newClient(t, rdb))
	ctx := context.Background()
	assert.ErrorIs(t, l.Unlock(ctx), aqs.ErrNotOwner, "on a free lock")
	assertNoFairKey(t, rdb, l)

	held, err := l.Lock(ctx)
	require.NoError(t, err)
	before, err := l.Info(ctx)
	require.NoError(t, err)
	assert.ErrorIs(t, l.Unlock(ctx), aqs.ErrNotOwner, "while another context holds it")
	assert.NoError(t, held.Err(), "the holder's context is untouched")
	after, err := l.Info(ctx)
	require.NoError(t, err)
	assert.True(t, after.Locked)
	assert.Equal(t, before.Holder, after.Holder, "the holder keeps the lock")
	assert.Equal(t, 1, after.HoldCount)
	require.NoError(t, l.Unlock(held))
	assertNoFairKey(t, rdb, l)
}

func TestFairCallsAfterCloseFailWithErrClosed(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	c, err := aqs.New(context.Background(), rdb)
	require.NoError(t, err)
	l := newLock(t, c)
	ctx := context.Background()
	held, err := l.Lock(ctx)
	require.NoError(t, err)
	value, err := rdb.Get(ctx, l.Key()).Result()
	require.NoError(t, err)
	require.NoError(t, c.Close())

	assert.ErrorIs(t, context.Cause(held), aqs.ErrLockLost)
	assert.ErrorIs(t, context.Cause(held), aqs.ErrClosed)
	_, err = l.Lock(ctx)
	assert.ErrorIs(t, err, aqs.ErrClosed, "Lock")
	_, _, err = l.TryLock(ctx)
	assert.ErrorIs(t, err, aqs.ErrClosed, "TryLock")
	_, _, err = l.TryLock(ctx, aqs.WithWait(time.Second))
	assert.ErrorIs(t, err, aqs.ErrClosed, "TryLock(WithWait)")
	assert.ErrorIs(t, l.Unlock(held), aqs.ErrClosed, "Unlock")
	_, err = l.Info(ctx)
	assert.ErrorIs(t, err, aqs.ErrClosed, "Info")
	_, err = l.IsLocked(ctx)
	assert.ErrorIs(t, err, aqs.ErrClosed, "IsLocked")
	_, err = l.HoldCount(held)
	assert.ErrorIs(t, err, aqs.ErrClosed, "HoldCount")
	_, err = l.RemainingLease(ctx)
	assert.ErrorIs(t, err, aqs.ErrClosed, "RemainingLease")
	_, err = l.ForceUnlock(ctx)
	assert.ErrorIs(t, err, aqs.ErrClosed, "ForceUnlock")

	// The hold is neither deleted nor changed: it expires.
	v, err := rdb.Get(ctx, l.Key()).Result()
	require.NoError(t, err)
	assert.Equal(t, value, v)
	pttl, err := rdb.PTTL(ctx, l.Key()).Result()
	require.NoError(t, err)
	assert.Greater(t, pttl, time.Duration(0))
	require.NoError(t, c.Close(), "Close is idempotent")
	require.NoError(t, rdb.Del(ctx, l.Key()).Err())
}

func TestFairCloseWakesAQueuedWaiterWithErrClosedAndTakesItOutOfTheQueue(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	owner := newLock(t, newClient(t, rdb))
	ctx := context.Background()
	held, err := owner.Lock(ctx)
	require.NoError(t, err)
	c, err := aqs.New(ctx, rdb)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	l, err := fair.New(c, owner.Name())
	require.NoError(t, err)

	errc := make(chan error, 1)
	go func() { _, err := l.Lock(ctx); errc <- err }()
	waitQueued(t, rdb, l, 1)
	require.NoError(t, c.Close())
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, aqs.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake the queued waiter")
	}
	assert.Zero(t, queued(t, rdb, l), "the waiter left the queue")

	info, err := owner.Info(ctx)
	require.NoError(t, err)
	assert.True(t, info.Locked, "the other Client's hold is untouched")
	assert.NoError(t, held.Err())
	require.NoError(t, owner.Unlock(held))
	locked, err := owner.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked, "nobody is left to hand the lock to")
}

func TestFairDoneContextFailsWithItsCauseAndWritesNothing(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	l := newLock(t, newClient(t, rdb))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	withCause, cancelCause := context.WithCancelCause(context.Background())
	cancelCause(errors.New("the caller gave up"))
	expired, cancelExpired := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	cancelExpired() // a no-op on a context already past its deadline
	for name, ctx := range map[string]context.Context{"cancelled": cancelled, "cause": withCause, "deadline": expired} {
		want := context.Cause(ctx)
		_, err := l.Lock(ctx)
		assert.ErrorIs(t, err, want, "%s: Lock", name)
		_, ok, err := l.TryLock(ctx)
		assert.ErrorIs(t, err, want, "%s: TryLock", name)
		assert.False(t, ok)
		_, ok, err = l.TryLock(ctx, aqs.WithWait(time.Second))
		assert.ErrorIs(t, err, want, "%s: TryLock(WithWait)", name)
		assert.False(t, ok)
	}
	assertNoFairKey(t, rdb, l)
}

func TestFairCompanionKeysOfAnotherTypeAreRejected(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	c := newClient(t, rdb)
	ctx := context.Background()

	// The deadlines zset holds a string: a caller that must queue gets ErrWrongType.
	t.Run("deadlines key", func(t *testing.T) {
		l := newLock(t, c)
		held, err := l.Lock(ctx)
		require.NoError(t, err)
		value, err := rdb.Get(ctx, l.Key()).Result()
		require.NoError(t, err)
		d := l.Key() + ":d"
		require.NoError(t, rdb.Set(ctx, d, "precious", 0).Err())
		t.Cleanup(func() { rdb.Del(context.Background(), d) })

		_, ok, err := l.TryLock(ctx, aqs.WithWait(time.Second))
		assert.ErrorIs(t, err, aqs.ErrWrongType, "TryLock(WithWait)")
		assert.False(t, ok)
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err = l.Lock(lctx)
		assert.ErrorIs(t, err, aqs.ErrWrongType, "Lock")

		assertForeignString(t, rdb, d, "precious")
		n, err := rdb.Exists(ctx, l.Key()+":q").Result()
		require.NoError(t, err)
		assert.Zero(t, n, "no queue entry")
		v, err := rdb.Get(ctx, l.Key()).Result()
		require.NoError(t, err)
		assert.Equal(t, value, v, "the holder's value is unchanged")
		require.NoError(t, l.Unlock(held))
	})

	// The queue list holds a string: Lock behind a holder gets ErrWrongType. (The attempt
	// adds the waiter's deadline before it fails on the list; the undo in the background
	// removes it.)
	t.Run("queue key, Lock behind a holder", func(t *testing.T) {
		l := newLock(t, c)
		held, err := l.Lock(ctx)
		require.NoError(t, err)
		q := l.Key() + ":q"
		require.NoError(t, rdb.Set(ctx, q, "precious", 0).Err())
		t.Cleanup(func() { rdb.Del(context.Background(), q) })

		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err = l.Lock(lctx)
		assert.ErrorIs(t, err, aqs.ErrWrongType, "Lock")
		assertForeignString(t, rdb, q, "precious")
		require.Eventually(t, func() bool {
			n, err := rdb.Exists(ctx, l.Key()+":d").Result()
			return err == nil && n == 0
		}, 5*time.Second, 2*time.Millisecond, "the failed waiter's deadline is removed")
		require.NoError(t, l.Unlock(held))
	})

	// The lock key holds a string: Info and ForceUnlock get ErrWrongType.
	t.Run("lock key, Info and ForceUnlock", func(t *testing.T) {
		l := newLock(t, c)
		require.NoError(t, rdb.Set(ctx, l.Key(), "precious", 0).Err())
		t.Cleanup(func() { rdb.Del(context.Background(), l.Key()) })
		_, err := l.Info(ctx)
		assert.ErrorIs(t, err, aqs.ErrWrongType, "Info")
		_, err = l.IsLocked(ctx)
		assert.ErrorIs(t, err, aqs.ErrWrongType, "IsLocked")
		ok, err := l.ForceUnlock(ctx)
		assert.ErrorIs(t, err, aqs.ErrWrongType, "ForceUnlock")
		assert.False(t, ok)
		assertForeignString(t, rdb, l.Key(), "precious")
	})
}
