package rwlock_test

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
	"github.com/redaqs/aqs/rwlock"
)

// Bad input not covered by lock_test.go: each test checks what the caller gets and what is
// left in Redis (see docs/BAD_INPUT.md).

// assertNoRWKey checks that none of the lock's keys exists.
func assertNoRWKey(t *testing.T, rdb redis.UniversalClient, l *rwlock.Lock) {
	t.Helper()
	for _, k := range l.Keys() {
		n, err := rdb.Exists(context.Background(), k).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "key %s was written", k)
	}
}

// readers returns the members of the lock's readers zset.
func readers(t *testing.T, rdb redis.UniversalClient, l *rwlock.Lock) []string {
	t.Helper()
	m, err := rdb.ZRange(context.Background(), l.Key()+":r", 0, -1).Result()
	require.NoError(t, err)
	return m
}

// waiters returns the number of live waiters in the lock's queue: the members of its
// deadlines zset whose liveness deadline has not passed (what Info reports as Waiters).
func waiters(t *testing.T, l *rwlock.Lock) int {
	t.Helper()
	in, err := l.Info(context.Background())
	require.NoError(t, err)
	return in.Waiters
}

// keyExists reports whether key exists.
func keyExists(t *testing.T, rdb redis.UniversalClient, key string) bool {
	t.Helper()
	n, err := rdb.Exists(context.Background(), key).Result()
	require.NoError(t, err)
	return n == 1
}

// assertStringUnchanged checks that key still holds value, with no expiry set.
func assertStringUnchanged(t *testing.T, rdb redis.UniversalClient, key, value string) {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Result()
	require.NoError(t, err, "key %s", key)
	assert.Equal(t, value, v, "key %s", key)
	pttl, err := rdb.PTTL(context.Background(), key).Result()
	require.NoError(t, err)
	assert.Equal(t, time.Duration(-1), pttl, "no expiry was set on %s", key)
}

func TestNewRejectsANilClientAndWaiterTimeoutsBelow30ms(t *testing.T) {
	c := newClient(t, redistest.Single(t).Client(t))
	l, err := rwlock.New(nil, "x")
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "nil client")
	assert.Nil(t, l)
	for _, d := range []time.Duration{0, -time.Second, 30*time.Millisecond - 1} {
		l, err = rwlock.New(c, "x", rwlock.WithWaiterTimeout(d))
		assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "WithWaiterTimeout(%v)", d)
		assert.Nil(t, l)
		l, err = rwlock.New(c, "x", rwlock.WithWriterTimeout(d)) // the deprecated alias
		assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "WithWriterTimeout(%v)", d)
		assert.Nil(t, l)
	}
	l, err = rwlock.New(c, "x", rwlock.WithWaiterTimeout(30*time.Millisecond))
	assert.NoError(t, err, "30ms is the least waiter timeout")
	assert.NotNil(t, l)
}

func TestTryLockAndTryRLockRejectBadLockOptionsAndWriteNothing(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	l := newLock(t, newClient(t, rdb))
	ctx := context.Background()
	for name, opts := range map[string][]aqs.TryOption{
		"WithLease(0)":      {aqs.WithLease(0)},
		"WithLease(-1s)":    {aqs.WithLease(-time.Second)},
		"WithWait(0)":       {aqs.WithWait(0)},
		"WithWait(-1s)":     {aqs.WithWait(-time.Second)},
		"nil":               {nil},
		"WithWait(1s), nil": {aqs.WithWait(time.Second), nil},
	} {
		held, ok, err := l.TryLock(ctx, asTryLockOptions(opts)...)
		assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "TryLock(%s)", name)
		assert.False(t, ok)
		assert.Nil(t, held)
		held, ok, err = l.TryRLock(ctx, opts...)
		assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "TryRLock(%s)", name)
		assert.False(t, ok)
		assert.Nil(t, held)
	}
	_, err := l.Lock(ctx, nil)
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "Lock(nil)")
	assertNoRWKey(t, rdb, l)
}

// asTryLockOptions returns the same options (leases and waits, which both sides take) as the
// write side's TryLock takes them; a nil option stays nil.
func asTryLockOptions(opts []aqs.TryOption) []aqs.TryLockOption {
	w := make([]aqs.TryLockOption, len(opts))
	for i, o := range opts {
		w[i], _ = o.(aqs.TryLockOption)
	}
	return w
}

func TestFencingTokenOfAReadHoldIsAnInvalidArgument(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	l := newLock(t, newClient(t, rdb))
	ctx := context.Background()
	r, err := l.RLock(ctx)
	require.NoError(t, err)
	tok, err := aqs.FencingToken(r)
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	assert.Zero(t, tok)
	assert.NoError(t, r.Err(), "the read hold is not ended by the refusal")
	assert.False(t, keyExists(t, rdb, l.Key()), "no write key, and so no token, was written")
	assert.Len(t, readers(t, rdb, l), 1)
	require.NoError(t, l.RUnlock(r), "the read hold releases normally")
	assertNoRWKey(t, rdb, l)
}

func TestRWCallsAfterCloseFailWithErrClosed(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	c, err := aqs.New(context.Background(), rdb)
	require.NoError(t, err)
	l := newLock(t, c)
	ctx := context.Background()
	w, err := l.Lock(ctx)
	require.NoError(t, err)
	r, err := l.RLock(w) // a downgrade: the write hold takes the read side too
	require.NoError(t, err)
	value, err := rdb.Get(ctx, l.Key()).Result()
	require.NoError(t, err)
	require.NoError(t, c.Close())

	for name, held := range map[string]context.Context{"write": w, "read": r} {
		assert.ErrorIs(t, context.Cause(held), aqs.ErrLockLost, "%s hold", name)
		assert.ErrorIs(t, context.Cause(held), aqs.ErrClosed, "%s hold", name)
	}
	_, err = l.Lock(ctx)
	assert.ErrorIs(t, err, aqs.ErrClosed, "Lock")
	_, _, err = l.TryLock(ctx)
	assert.ErrorIs(t, err, aqs.ErrClosed, "TryLock")
	_, _, err = l.TryLock(ctx, aqs.WithWait(time.Second))
	assert.ErrorIs(t, err, aqs.ErrClosed, "TryLock(WithWait)")
	_, err = l.RLock(ctx)
	assert.ErrorIs(t, err, aqs.ErrClosed, "RLock")
	_, _, err = l.TryRLock(ctx)
	assert.ErrorIs(t, err, aqs.ErrClosed, "TryRLock")
	_, _, err = l.TryRLock(ctx, aqs.WithWait(time.Second))
	assert.ErrorIs(t, err, aqs.ErrClosed, "TryRLock(WithWait)")
	assert.ErrorIs(t, l.RUnlock(r), aqs.ErrClosed, "RUnlock")
	assert.ErrorIs(t, l.Unlock(w), aqs.ErrClosed, "Unlock")
	_, err = l.Info(ctx)
	assert.ErrorIs(t, err, aqs.ErrClosed, "Info")
	_, err = l.IsLocked(ctx)
	assert.ErrorIs(t, err, aqs.ErrClosed, "IsLocked")
	_, err = l.ForceUnlock(ctx)
	assert.ErrorIs(t, err, aqs.ErrClosed, "ForceUnlock")

	// Neither hold is deleted: they expire.
	v, err := rdb.Get(ctx, l.Key()).Result()
	require.NoError(t, err)
	assert.Equal(t, value, v)
	pttl, err := rdb.PTTL(ctx, l.Key()).Result()
	require.NoError(t, err)
	assert.Greater(t, pttl, time.Duration(0))
	assert.Len(t, readers(t, rdb, l), 1)
	require.NoError(t, rdb.Del(ctx, l.Keys()...).Err())
}

func TestRWCloseWakesWaitingReadersAndWritersWithErrClosed(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	owner := newLock(t, newClient(t, rdb))
	ctx := context.Background()
	held, err := owner.Lock(ctx)
	require.NoError(t, err)
	before, err := owner.Info(ctx)
	require.NoError(t, err)

	c, err := aqs.New(ctx, rdb)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	l, err := rwlock.New(c, owner.Name())
	require.NoError(t, err)
	writer := make(chan error, 1)
	go func() { _, err := l.Lock(ctx); writer <- err }()
	require.Eventually(t, func() bool { return waiters(t, owner) == 1 },
		5*time.Second, 2*time.Millisecond, "the writer is queued")
	reader := make(chan error, 1)
	go func() { _, err := l.RLock(ctx); reader <- err }()
	require.Eventually(t, func() bool { return waiters(t, owner) == 2 },
		5*time.Second, 2*time.Millisecond, "the reader is queued behind the writer")

	require.NoError(t, c.Close())
	for name, errc := range map[string]chan error{"writer": writer, "reader": reader} {
		select {
		case err := <-errc:
			assert.ErrorIs(t, err, aqs.ErrClosed, name)
		case <-time.After(5 * time.Second):
			t.Fatalf("Close did not wake the waiting %s", name)
		}
	}
	n, err := rdb.ZCard(ctx, l.Key()+":d").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "the waiters left the queue: no deadline is left")
	after, err := owner.Info(ctx)
	require.NoError(t, err)
	assert.Zero(t, after.Waiters)
	assert.Zero(t, after.Readers)
	assert.Equal(t, before.Writer, after.Writer, "the other Client's write hold is untouched")
	assert.NoError(t, held.Err())
	require.NoError(t, owner.Unlock(held))
	locked, err := owner.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked)
}

func TestCancelWhileAReaderWaitsReturnsCanceledAndLeavesTheWriterAlone(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := newLock(t, newClient(t, rdb))
		ctx := context.Background()
		w, err := l.Lock(ctx)
		require.NoError(t, err)
		before, err := l.Info(ctx)
		require.NoError(t, err)

		// A plain cancel: a cause given to it is not always what RLock returns (it returns a
		// bare context.Canceled when the cancellation comes while it subscribes).
		rctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() { _, err := l.RLock(rctx); errc <- err }()
		require.Eventually(t, func() bool { return waiters(t, l) == 1 },
			5*time.Second, 2*time.Millisecond, "the reader is queued")
		cancel()
		select {
		case err := <-errc:
			assert.ErrorIs(t, err, context.Canceled)
		case <-time.After(5 * time.Second):
			t.Fatal("RLock did not return after its context was cancelled")
		}
		assert.Empty(t, readers(t, rdb, l), "no read hold was taken")
		assert.Zero(t, waiters(t, l), "the reader left the queue")
		after, err := l.Info(ctx)
		require.NoError(t, err)
		assert.Equal(t, before.Writer, after.Writer, "the writer keeps the lock")
		assert.Equal(t, 1, after.WriteCount)
		assert.NoError(t, w.Err())
		require.NoError(t, l.Unlock(w))
		locked, err := l.IsLocked(ctx)
		require.NoError(t, err)
		assert.False(t, locked)
	})
}

func TestRWDoneContextFailsWithItsCauseAndWritesNothing(t *testing.T) {
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
		_, _, err = l.TryLock(ctx)
		assert.ErrorIs(t, err, want, "%s: TryLock", name)
		_, _, err = l.TryLock(ctx, aqs.WithWait(time.Second))
		assert.ErrorIs(t, err, want, "%s: TryLock(WithWait)", name)
		_, err = l.RLock(ctx)
		assert.ErrorIs(t, err, want, "%s: RLock", name)
		_, _, err = l.TryRLock(ctx)
		assert.ErrorIs(t, err, want, "%s: TryRLock", name)
		_, _, err = l.TryRLock(ctx, aqs.WithWait(time.Second))
		assert.ErrorIs(t, err, want, "%s: TryRLock(WithWait)", name)
	}
	assertNoRWKey(t, rdb, l)
}

func TestUnlockingAReadHoldLostInRedisIsNotOwnerAndLockLost(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := newLock(t, newClient(t, rdb))
		ctx := context.Background()
		r, err := l.RLock(ctx)
		require.NoError(t, err)
		ids := readers(t, rdb, l)
		require.Len(t, ids, 1)
		require.NoError(t, rdb.ZRem(ctx, l.Key()+":r", ids[0]).Err()) // lost behind its back

		err = l.RUnlock(r)
		assert.ErrorIs(t, err, aqs.ErrNotOwner)
		assert.ErrorIs(t, err, aqs.ErrLockLost)
		assert.Error(t, r.Err(), "the held context has ended")
		assertNoRWKey(t, rdb, l)
	})
}

func TestReenteringALostReadHoldFailsWithLockLost(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	l := newLock(t, newClient(t, rdb))
	ctx := context.Background()
	r, err := l.RLock(ctx)
	require.NoError(t, err)
	ids := readers(t, rdb, l)
	require.Len(t, ids, 1)
	require.NoError(t, rdb.ZRem(ctx, l.Key()+":r", ids[0]).Err()) // lost behind its back

	inner, err := l.RLock(r)
	assert.ErrorIs(t, err, aqs.ErrLockLost, "RLock through the lost hold")
	assert.Nil(t, inner)
	assert.ErrorIs(t, context.Cause(r), aqs.ErrLockLost, "the held context ends with the loss")
	_, ok, err := l.TryRLock(r)
	assert.ErrorIs(t, err, aqs.ErrLockLost, "TryRLock through the lost hold")
	assert.False(t, ok)
	assertNoRWKey(t, rdb, l) // no re-entry count was recorded
	err = l.RUnlock(r)
	assert.ErrorIs(t, err, aqs.ErrNotOwner)
	assert.ErrorIs(t, err, aqs.ErrLockLost)
}

func TestRWCompanionKeysOfAnotherTypeAreRejected(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	c := newClient(t, rdb)
	ctx := context.Background()

	// The re-entry counts hold a string: re-entering a read hold gets ErrWrongType.
	t.Run("re-entry counts key", func(t *testing.T) {
		l := newLock(t, c)
		rn := l.Key() + ":rn"
		require.NoError(t, rdb.Set(ctx, rn, "precious", 0).Err())
		t.Cleanup(func() { rdb.Del(context.Background(), rn) })
		r, err := l.RLock(ctx)
		require.NoError(t, err)
		_, err = l.RLock(r)
		assert.ErrorIs(t, err, aqs.ErrWrongType, "RLock re-entry")
		_, _, err = l.TryRLock(r)
		assert.ErrorIs(t, err, aqs.ErrWrongType, "TryRLock re-entry")
		assertStringUnchanged(t, rdb, rn, "precious")
		assert.NoError(t, r.Err(), "the read hold is kept")
		require.NoError(t, l.RUnlock(r), "the read hold releases normally")
		assertStringUnchanged(t, rdb, rn, "precious")
		_, _, err = l.TryLock(ctx)
		assert.ErrorIs(t, err, aqs.ErrWrongType, "TryLock once the readers left")
		assert.False(t, keyExists(t, rdb, l.Key()), "no write hold was taken")
		_, err = l.ForceUnlock(ctx)
		assert.ErrorIs(t, err, aqs.ErrWrongType, "ForceUnlock")
		assertStringUnchanged(t, rdb, rn, "precious")
	})

	// The queue's deadlines hold a string: every call that would queue gets ErrWrongType, and
	// Info too; nothing is queued and no write hold is taken. (The waiting writers' zset and the
	// readers-waiting flag this subtest used to spoil are gone: writers and readers wait in one
	// queue, whose deadlines are the key every join writes.)
	t.Run("queue deadlines key", func(t *testing.T) {
		l := newLock(t, c)
		d := l.Key() + ":d"
		require.NoError(t, rdb.Set(ctx, d, "precious", 0).Err())
		t.Cleanup(func() { rdb.Del(context.Background(), d) })
		_, _, err := l.TryLock(ctx)
		assert.ErrorIs(t, err, aqs.ErrWrongType, "TryLock on a free lock")
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err = l.Lock(lctx)
		assert.ErrorIs(t, err, aqs.ErrWrongType, "Lock on a free lock")
		_, err = l.Info(ctx)
		assert.ErrorIs(t, err, aqs.ErrWrongType, "Info")
		assert.False(t, keyExists(t, rdb, l.Key()), "no write hold was taken")

		r, err := l.RLock(ctx) // a reader on a free lock takes it without looking at the queue
		require.NoError(t, err)
		_, err = l.Lock(lctx)
		assert.ErrorIs(t, err, aqs.ErrWrongType, "Lock behind a reader")
		_, _, err = l.TryLock(ctx, aqs.WithWait(time.Second))
		assert.ErrorIs(t, err, aqs.ErrWrongType, "TryLock(WithWait) behind a reader")
		assert.False(t, keyExists(t, rdb, l.Key()), "no write hold was taken")
		assert.False(t, keyExists(t, rdb, l.Key()+":q"), "nobody was queued")
		require.NoError(t, l.RUnlock(r))
		assertStringUnchanged(t, rdb, d, "precious")
	})

	// The write key or the readers key holds a value of another type: ForceUnlock gets
	// ErrWrongType.
	t.Run("ForceUnlock", func(t *testing.T) {
		l := newLock(t, c)
		require.NoError(t, rdb.Set(ctx, l.Key(), "precious", 0).Err())
		t.Cleanup(func() { rdb.Del(context.Background(), l.Key()) })
		ok, err := l.ForceUnlock(ctx)
		assert.ErrorIs(t, err, aqs.ErrWrongType, "write key")
		assert.False(t, ok)
		assertStringUnchanged(t, rdb, l.Key(), "precious")
		require.NoError(t, rdb.Del(ctx, l.Key()).Err())

		r := l.Key() + ":r"
		require.NoError(t, rdb.Set(ctx, r, "precious", 0).Err())
		t.Cleanup(func() { rdb.Del(context.Background(), r) })
		ok, err = l.ForceUnlock(ctx)
		assert.ErrorIs(t, err, aqs.ErrWrongType, "readers key")
		assert.False(t, ok)
		assertStringUnchanged(t, rdb, r, "precious")
	})
}
