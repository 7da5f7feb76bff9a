package reentrant_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/reentrant"
)

// eventually waits, bounded, for cond.
func eventually(t *testing.T, within time.Duration, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, within, 5*time.Millisecond, msg)
}

func TestLockReentersThroughHeldContextAndKeepsToken(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := newLock(t, newClient(t, rdb))
		held, err := l.Lock(context.Background())
		require.NoError(t, err)
		tok, err := l.Token(held)
		require.NoError(t, err)
		inner, err := l.Lock(held)
		require.NoError(t, err)
		tok2, _ := aqs.FencingToken(inner)
		assert.Equal(t, tok, tok2, "re-entry keeps the token")
		n, err := l.HoldCount(inner)
		require.NoError(t, err)
		assert.Equal(t, 2, n)

		require.NoError(t, l.Unlock(inner))
		assert.ErrorIs(t, context.Cause(inner), aqs.ErrReleased)
		assert.NoError(t, held.Err(), "the outer hold is untouched by the inner release")
		locked, err := l.IsLocked(held)
		require.NoError(t, err)
		assert.True(t, locked)

		require.NoError(t, l.Unlock(held))
		locked, err = l.IsLocked(context.Background())
		require.NoError(t, err)
		assert.False(t, locked)
	})
}

func TestUnrelatedContextsAreDifferentHolders(t *testing.T) {
	l := newLock(t, newClient(t, redistest.Single(t).Client(t)))
	held, err := l.Lock(context.Background())
	require.NoError(t, err)
	_, ok, err := l.TryLock(context.Background())
	require.NoError(t, err)
	assert.False(t, ok, "a context without the owner must not re-enter")
	n, err := l.HoldCount(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 0, n)
	require.NoError(t, l.Unlock(held))
}

func TestReentryThroughTheHeldContextOfANestedLock(t *testing.T) {
	c := newClient(t, redistest.Single(t).Client(t))
	a, b := newLock(t, c), newLock(t, c)
	ha, err := a.Lock(context.Background())
	require.NoError(t, err)
	hb, err := b.Lock(ha)
	require.NoError(t, err)
	// methodA -> methodB -> methodA: re-entry through the chain.
	ha2, err := a.Lock(hb)
	require.NoError(t, err)
	n, err := a.HoldCount(ha2)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	require.NoError(t, a.Unlock(ha2))
	require.NoError(t, b.Unlock(hb))
	require.NoError(t, a.Unlock(ha))
}

func TestTryLockWithoutWaitReportsNotAcquired(t *testing.T) {
	l := newLock(t, newClient(t, redistest.Single(t).Client(t)))
	held, err := l.Lock(context.Background())
	require.NoError(t, err)
	got, ok, err := l.TryLock(context.Background())
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Nil(t, got)
	require.NoError(t, l.Unlock(held))
	got, ok, err = l.TryLock(context.Background())
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, l.Unlock(got))
}

func TestTryLockWaitBoundEndsWithoutResidue(t *testing.T) {
	c := newClient(t, redistest.Single(t).Client(t), aqs.WithWatchdogTimeout(3*time.Second))
	l := newLock(t, c)
	held, err := l.Lock(context.Background())
	require.NoError(t, err)
	start := time.Now()
	_, ok, err := l.TryLock(context.Background(), aqs.WithWait(150*time.Millisecond))
	require.NoError(t, err)
	assert.False(t, ok)
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)

	// A waiter within its bound gets the lock when it is released.
	got := make(chan bool, 1)
	go func() {
		h, ok, err := l.TryLock(context.Background(), aqs.WithWait(5*time.Second))
		if err == nil && ok {
			_ = l.Unlock(h)
		}
		got <- ok
	}()
	waitForWaiters(t, c, 1)
	require.NoError(t, l.Unlock(held))
	assert.True(t, <-got)
}

// waitForWaiters waits until the Client's hub has n channels subscribed (a waiter is parked).
func waitForWaiters(t *testing.T, c *aqs.Client, n int) {
	t.Helper()
	eventually(t, 5*time.Second, func() bool { return hubWaiters(c) >= n }, "waiter never subscribed")
}

func TestCancelWhileWaitingLeavesNothingBehind(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	c := newClient(t, rdb)
	l := newLock(t, c)
	held, err := l.Lock(context.Background())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := l.Lock(ctx)
		errc <- err
	}()
	waitForWaiters(t, c, 1)
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	info, err := l.Info(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, info.HoldCount, "the waiter changed nothing")
	require.NoError(t, l.Unlock(held))
	locked, err := l.IsLocked(context.Background())
	require.NoError(t, err)
	assert.False(t, locked)
}

func TestLockWonAtCancellationIsReleasedAgain(t *testing.T) {
	l := newLock(t, newClient(t, redistest.Single(t).Client(t)))
	// A context that is done by the time the attempt returns: the lock goes back.
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := &cancelOnValue{Context: ctx, cancel: cancel}
	_, err := l.Lock(cancelled)
	require.ErrorIs(t, err, context.Canceled)
	locked, err := l.IsLocked(context.Background())
	require.NoError(t, err)
	assert.False(t, locked, "a lock won in the instant of cancellation must be released")
}

// cancelOnValue cancels itself the first time the lock reads a value from it after the
// attempt, i.e. while the acquisition is being recorded.
type cancelOnValue struct {
	context.Context
	cancel context.CancelFunc
	calls  atomic.Int32
}

func (c *cancelOnValue) Value(key any) any {
	// Held reads a value before the attempt; Adopt reads one after it.
	if c.calls.Add(1) == 2 {
		c.cancel()
	}
	return c.Context.Value(key)
}

func TestUnlockMisuseReturnsNotOwnerAndChangesNothing(t *testing.T) {
	l := newLock(t, newClient(t, redistest.Single(t).Client(t)))
	ctx := context.Background()

	err := l.Unlock(ctx)
	assert.ErrorIs(t, err, aqs.ErrNotOwner, "unlock of a lock not held")

	held, err := l.Lock(ctx)
	require.NoError(t, err)
	assert.ErrorIs(t, l.Unlock(ctx), aqs.ErrNotOwner, "unlock by a non-owner")
	info, err := l.Info(ctx)
	require.NoError(t, err)
	assert.True(t, info.Locked)
	assert.Equal(t, 1, info.HoldCount)

	require.NoError(t, l.Unlock(held))
	assert.ErrorIs(t, l.Unlock(held), aqs.ErrNotOwner, "one unlock too many")
}

func TestBadArgumentsAreRejected(t *testing.T) {
	c := newClient(t, redistest.Single(t).Client(t))
	_, err := reentrant.New(c, "")
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	_, err = reentrant.New(nil, "x")
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)

	l := newLock(t, c)
	ctx := context.Background()
	for _, opt := range []aqs.TryLockOption{aqs.WithLease(0), aqs.WithLease(-time.Second), aqs.WithWait(0), aqs.WithWait(-1),
		aqs.LeaseOption{}, aqs.WaitOption{}} {
		_, _, err := l.TryLock(ctx, opt)
		assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "%#v", opt)
	}
	locked, err := l.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked)

	_, err = aqs.New(ctx, nil)
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	_, err = aqs.New(ctx, redistest.Single(t).Client(t), aqs.WithKeyPrefix("a{b"))
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	_, err = aqs.New(ctx, redistest.Single(t).Client(t), aqs.WithWatchdogTimeout(time.Millisecond))
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	_, err = aqs.New(ctx, redistest.Single(t).Client(t), aqs.WithLogger(nil))
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
}

func TestKeyOfAnotherTypeIsATypedErrorAndNotOverwritten(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	l := newLock(t, newClient(t, rdb))
	ctx := context.Background()
	require.NoError(t, rdb.Set(ctx, l.Key(), "precious", 0).Err())
	_, err := l.Lock(ctx)
	var wt *aqs.WrongTypeError
	require.ErrorAs(t, err, &wt)
	assert.Equal(t, l.Key(), wt.Key)
	assert.ErrorIs(t, err, aqs.ErrWrongType)
	_, _, err = l.TryLock(ctx)
	assert.ErrorIs(t, err, aqs.ErrWrongType)
	_, err = l.IsLocked(ctx)
	assert.ErrorIs(t, err, aqs.ErrWrongType)
	_, err = l.ForceUnlock(ctx)
	assert.ErrorIs(t, err, aqs.ErrWrongType)
	v, err := rdb.Get(ctx, l.Key()).Result()
	require.NoError(t, err)
	assert.Equal(t, "precious", v)
	ttl, err := rdb.PTTL(ctx, l.Key()).Result()
	require.NoError(t, err)
	assert.Equal(t, time.Duration(-1), ttl, "no expiry was set on the foreign key")
	require.NoError(t, rdb.Del(ctx, l.Key()).Err())
}

func TestCallsAfterCloseFailWithErrClosed(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	c, err := aqs.New(context.Background(), rdb)
	require.NoError(t, err)
	l := newLock(t, c)
	held, err := l.Lock(context.Background())
	require.NoError(t, err)
	require.NoError(t, c.Close())
	assert.ErrorIs(t, context.Cause(held), aqs.ErrLockLost)
	assert.ErrorIs(t, context.Cause(held), aqs.ErrClosed)
	_, err = l.Lock(context.Background())
	assert.ErrorIs(t, err, aqs.ErrClosed)
	_, _, err = l.TryLock(context.Background())
	assert.ErrorIs(t, err, aqs.ErrClosed)
	assert.ErrorIs(t, l.Unlock(held), aqs.ErrClosed)
	_, err = l.IsLocked(context.Background())
	assert.ErrorIs(t, err, aqs.ErrClosed)
	_, err = l.ForceUnlock(context.Background())
	assert.ErrorIs(t, err, aqs.ErrClosed)
	// Close does not delete held locks: they expire.
	pttl, err := rdb.PTTL(context.Background(), l.Key()).Result()
	require.NoError(t, err)
	assert.Greater(t, pttl, time.Duration(0))
	require.NoError(t, c.Close(), "Close is idempotent")
	require.NoError(t, rdb.Del(context.Background(), l.Key()).Err())
}

func TestCloseWakesWaitersWithErrClosed(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	owner := newClient(t, rdb)
	lo := newLock(t, owner)
	held, err := lo.Lock(context.Background())
	require.NoError(t, err)
	c, err := aqs.New(context.Background(), rdb)
	require.NoError(t, err)
	l, err := reentrant.New(c, lo.Name())
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { _, err := l.Lock(context.Background()); errc <- err }()
	waitForWaiters(t, c, 1)
	require.NoError(t, c.Close())
	assert.ErrorIs(t, <-errc, aqs.ErrClosed)
	require.NoError(t, lo.Unlock(held))
}

func TestRedisUnreachableFailsByTheDeadline(t *testing.T) {
	srv := redistest.NewServer(t)
	rdb := srv.Client(t)
	before := runtime.NumGoroutine()
	c, err := aqs.New(context.Background(), rdb)
	require.NoError(t, err)
	defer func() {
		require.NoError(t, c.Close())
		eventually(t, 5*time.Second, func() bool { return runtime.NumGoroutine() <= before },
			"goroutines left behind after Close")
	}()
	l := newLock(t, c)
	require.NoError(t, srv.Kill())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err = l.Lock(ctx)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 2500*time.Millisecond)
	_, _, err = l.TryLock(ctx)
	require.Error(t, err)
	_, err = aqs.New(ctx, rdb)
	require.Error(t, err, "New loads the scripts, so it reports an unreachable server")
}

func TestFixedLeaseExpiresAndCancelsHeldContext(t *testing.T) {
	l := newLock(t, newClient(t, redistest.Single(t).Client(t)))
	held, err := l.Lock(context.Background(), aqs.WithLease(200*time.Millisecond))
	require.NoError(t, err)
	lease, err := l.RemainingLease(context.Background())
	require.NoError(t, err)
	assert.Greater(t, lease, time.Duration(0))
	assert.LessOrEqual(t, lease, 200*time.Millisecond)
	select {
	case <-held.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("held context outlived its fixed lease")
	}
	assert.ErrorIs(t, context.Cause(held), aqs.ErrLockLost)
	eventually(t, 2*time.Second, func() bool {
		locked, err := l.IsLocked(context.Background())
		return err == nil && !locked
	}, "fixed lease did not expire")
	err = l.Unlock(held)
	assert.ErrorIs(t, err, aqs.ErrNotOwner)
	assert.ErrorIs(t, err, aqs.ErrLockLost)
}

func TestWatchdogKeepsTheLockBeyondItsTimeout(t *testing.T) {
	l := newLock(t, newClient(t, redistest.Single(t).Client(t), aqs.WithWatchdogTimeout(150*time.Millisecond)))
	held, err := l.Lock(context.Background())
	require.NoError(t, err)
	deadline := time.Now().Add(600 * time.Millisecond)
	for time.Now().Before(deadline) {
		locked, err := l.IsLocked(context.Background())
		require.NoError(t, err)
		require.True(t, locked, "watchdog let the lock expire")
		require.NoError(t, held.Err())
		time.Sleep(20 * time.Millisecond) // sampling the state, not waiting for it
	}
	require.NoError(t, l.Unlock(held))
}

func TestDeletedKeyCancelsHeldContextWithinOneRenewal(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		const timeout = 300 * time.Millisecond
		l := newLock(t, newClient(t, rdb, aqs.WithWatchdogTimeout(timeout)))
		held, err := l.Lock(context.Background())
		require.NoError(t, err)
		require.NoError(t, rdb.Del(context.Background(), l.Key()).Err())
		deleted := time.Now()
		select {
		case <-held.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("held context not cancelled after its key was deleted")
		}
		assert.ErrorIs(t, context.Cause(held), aqs.ErrLockLost)
		// One renewal period is timeout/3; allow for scheduling on a loaded machine.
		assert.Less(t, time.Since(deleted), timeout/3+200*time.Millisecond)
	})
}

func TestForceUnlockWakesWaiterAndLosesTheHolder(t *testing.T) {
	c := newClient(t, redistest.Single(t).Client(t), aqs.WithWatchdogTimeout(300*time.Millisecond))
	l := newLock(t, c)
	held, err := l.Lock(context.Background())
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		h, err := l.Lock(context.Background())
		if err == nil {
			err = l.Unlock(h)
		}
		got <- err
	}()
	waitForWaiters(t, c, 1)
	ok, err := l.ForceUnlock(context.Background())
	require.NoError(t, err)
	assert.True(t, ok)
	require.NoError(t, <-got)
	<-held.Done()
	assert.ErrorIs(t, context.Cause(held), aqs.ErrLockLost)
	ok, err = l.ForceUnlock(context.Background())
	require.NoError(t, err)
	assert.False(t, ok)
}

func TestFencingTokensIncreaseAcrossReleaseAndExpiry(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := newLock(t, newClient(t, rdb))
		ctx := context.Background()
		var last int64
		next := func(h context.Context) {
			t.Helper()
			tok, err := aqs.FencingToken(h)
			require.NoError(t, err)
			require.Greater(t, tok, last)
			last = tok
		}
		for i := 0; i < 5; i++ {
			h, err := l.Lock(ctx)
			require.NoError(t, err)
			next(h)
			require.NoError(t, l.Unlock(h))
		}
		// The key expires and is created again: still increasing.
		h, err := l.Lock(ctx, aqs.WithLease(50*time.Millisecond))
		require.NoError(t, err)
		next(h)
		<-h.Done()
		require.NoError(t, rdb.Del(ctx, l.Key()).Err()) // gone, whatever the lease's timing
		h, err = l.Lock(ctx)
		require.NoError(t, err)
		next(h)
		require.NoError(t, l.Unlock(h))
	})
}

func TestManyGoroutinesNeverOverlap(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		c := newClient(t, rdb)
		l := newLock(t, c)
		inside := l.Key() + ":inside" // same slot: counted in Redis by the holders
		const workers, rounds = 8, 25
		var wg sync.WaitGroup
		var overlaps, done atomic.Int64
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < rounds; i++ {
					held, err := l.Lock(context.Background())
					if !assert.NoError(t, err) {
						return
					}
					if n, _ := rdb.Incr(held, inside).Result(); n != 1 {
						overlaps.Add(1)
					}
					rdb.Decr(held, inside)
					done.Add(1)
					assert.NoError(t, l.Unlock(held))
				}
			}()
		}
		wg.Wait()
		assert.Zero(t, overlaps.Load())
		assert.EqualValues(t, workers*rounds, done.Load())
		rdb.Del(context.Background(), inside)
	})
}

func TestErrorsAreDistinct(t *testing.T) {
	for _, e := range []error{aqs.ErrClosed, aqs.ErrLockLost, aqs.ErrNotOwner, aqs.ErrInvalidArgument, aqs.ErrWrongType, aqs.ErrReleased} {
		for _, f := range []error{aqs.ErrClosed, aqs.ErrLockLost, aqs.ErrNotOwner, aqs.ErrInvalidArgument, aqs.ErrWrongType, aqs.ErrReleased} {
			assert.Equal(t, e == f, errors.Is(e, f))
		}
	}
}

func TestFencingTokenIsAssignedOnceAndKeptForTheHold(t *testing.T) {
	l := newLock(t, newClient(t, redistest.Single(t).Client(t)))
	ctx := context.Background()
	_, err := aqs.FencingToken(ctx)
	assert.ErrorIs(t, err, aqs.ErrNotOwner, "no lock, no token")

	held, err := l.Lock(ctx)
	require.NoError(t, err)
	info, err := l.Info(ctx)
	require.NoError(t, err)
	assert.Zero(t, info.Token, "no token until one is asked for")
	tok, err := aqs.FencingToken(held)
	require.NoError(t, err)
	info, err = l.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, tok, info.Token, "the token is recorded with the hold")
	again, err := l.Token(held)
	require.NoError(t, err)
	assert.Equal(t, tok, again)
	require.NoError(t, l.Unlock(held))

	eager, err := l.Lock(ctx, aqs.WithFencingToken())
	require.NoError(t, err)
	info, err = l.Info(ctx)
	require.NoError(t, err)
	assert.Greater(t, info.Token, tok, "WithFencingToken assigns a greater token at acquisition")
	got, err := aqs.FencingToken(eager)
	require.NoError(t, err)
	assert.Equal(t, info.Token, got)
	require.NoError(t, l.Unlock(eager))
}

func TestNoTokenForAHoldLostBeforeAskingForIt(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	l := newLock(t, newClient(t, rdb))
	held, err := l.Lock(context.Background())
	require.NoError(t, err)
	require.NoError(t, rdb.Del(context.Background(), l.Key()).Err())
	other, err := l.Lock(context.Background())
	require.NoError(t, err)
	_, err = aqs.FencingToken(held)
	assert.ErrorIs(t, err, aqs.ErrLockLost, "a stale holder gets no token")
	_, err = aqs.FencingToken(other)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(other))
}

func TestNewHoldersWaitEvenWithAContextThatHoldsAnotherLock(t *testing.T) {
	c := newClient(t, redistest.Single(t).Client(t))
	a, b := newLock(t, c), newLock(t, c)
	ha, err := a.Lock(context.Background())
	require.NoError(t, err)
	hb, err := b.Lock(ha)
	require.NoError(t, err)
	// Another goroutine handed ha (not hb) is a new holder of b: it must not get in.
	_, ok, err := b.TryLock(ha)
	require.NoError(t, err)
	assert.False(t, ok)
	require.NoError(t, b.Unlock(hb))
	require.NoError(t, a.Unlock(ha))
}

func TestFailingRenewalsCancelHeldContextBeforeTheLeaseEnds(t *testing.T) {
	srv := redistest.NewServer(t)
	opts := srv.Options()
	opts.MaxRetries = -1
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	const timeout = 300 * time.Millisecond
	l := newLock(t, newClient(t, rdb, aqs.WithWatchdogTimeout(timeout)))
	acquired := time.Now()
	held, err := l.Lock(context.Background())
	require.NoError(t, err)
	require.NoError(t, srv.Kill()) // renewals fail from now on; the lease is not extended
	select {
	case <-held.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("held context outlived a lease that could not be renewed")
	}
	assert.ErrorIs(t, context.Cause(held), aqs.ErrLockLost)
	// The local deadline is the acquisition's send time plus the lease, minus a margin: the
	// holder stops before Redis could have let anyone else in.
	assert.Less(t, time.Since(acquired), timeout+200*time.Millisecond, "slack for a loaded machine")
}
