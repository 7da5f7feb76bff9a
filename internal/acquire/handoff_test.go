package acquire_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/excl"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// The hand-off within a Client with a streak (local.go): the reentrant lock's configuration,
// where a release may hand the lock straight to a waiter of its own Client. The tests through
// the public API are in package reentrant; these need a boarding window of their own choosing.

// A boarded waiter is sent to attempt on its own as soon as its Client learns that the hold it
// boarded on was lost (here by the hold's Unlock, which finds it forced open), not at the end
// of its window: the freed lock is not left idle for a window.
func TestBoardedWaiterAttemptsAtOnceWhenTheHoldIsLost(t *testing.T) {
	for _, streak := range []int{0, 8} {
		rdb := redistest.Single(t).Client(t)
		ctx := context.Background()
		l := newLock(t, newClient(t, rdb), redistest.Name(t), time.Minute, streak)
		admin := newLock(t, newClient(t, rdb), l.Name(), time.Minute, streak)
		held, err := lock(ctx, l)
		require.NoError(t, err)
		got := make(chan context.Context, 1)
		go func() {
			h, err := lock(ctx, l)
			assert.NoError(t, err)
			got <- h
		}()
		waitBoarded(t, l, 1)
		ok, err := admin.ForceUnlock(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.ErrorIs(t, l.Unlock(held), aqs.ErrLockLost)
		select {
		case h := <-got:
			require.NotNil(t, h)
			require.NoError(t, l.Unlock(h))
		case <-time.After(10 * time.Second):
			t.Fatalf("streak %d: the boarded waiter did not attempt when the hold was found lost", streak)
		}
		assertNoKeysLeft(t, rdb, l)
	}
}

// A boarded waiter whose context ends as the release hands it the lock gives the lock back:
// afterwards the lock is free, or held by the waiter, whose call succeeded. The cancellation
// is swept across the release's round trip.
//
// It does not always: board (acquire.go) is woken by the context, and before it takes the
// Queue's lock to alight, the release's settle hands the waiter the lock (state wGone, outcome
// oHanded told); alight then reports that it took the waiter off (drop in local.go treats wGone
// as nobody's), board returns the context's error, and the outcome is never read: the lock
// stays with a hold nobody has, for the pick's whole lease (30s). A release that joined the
// waiter instead (oJoined, wQueued) leaves its queue entry behind the same way. About one round
// in a few hundred.
func TestBoardedWaiterCancelledAsTheReleaseHandsItTheLockLeavesNothingHeld(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	ctx := context.Background()
	l := newLock(t, newClient(t, rdb), redistest.Name(t), time.Minute, 8)
	for round := range 600 {
		held, err := lock(ctx, l)
		require.NoError(t, err)
		wctx, cancel := context.WithCancel(ctx)
		got := make(chan context.Context, 1)
		go func() {
			h, err := lock(wctx, l)
			if err != nil {
				assert.ErrorIs(t, err, context.Canceled)
			}
			got <- h
		}()
		waitBoarded(t, l, 1)
		time.AfterFunc(time.Duration(round%40)*15*time.Microsecond, cancel)
		require.NoError(t, l.Unlock(held))
		if h := <-got; h != nil {
			require.NoError(t, l.Unlock(h))
		}
		// Free at once, or within far less than the 30s lease (a clean-up left to the
		// background).
		require.Eventually(t, func() bool {
			locked, err := l.IsLocked(ctx)
			return err == nil && !locked
		}, 3*time.Second, time.Millisecond, "round %d: the lock is held by a waiter that left", round)
	}
}

// slowRelease is a go-redis hook that, once armed, delays the next release script by d before
// sending it: a release round trip long enough for a waiter's window or context to end during
// it.
type slowRelease struct {
	on atomic.Bool
	d  time.Duration
}

func (h *slowRelease) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *slowRelease) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isRelease(cmd) && h.on.CompareAndSwap(true, false) {
			time.Sleep(h.d)
		}
		return next(ctx, cmd)
	}
}

func (h *slowRelease) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// pickScene holds the lock through l (reentrant configuration, boarding window board) with a
// waiter p of the same Client queued in Redis (its window ran out), the longest-waiting local
// waiter and so the next release's pick. It returns the held context and p's channel.
func pickScene(t *testing.T, rdb redis.UniversalClient, board time.Duration) (l *excl.Lock, held context.Context, p <-chan context.Context) {
	t.Helper()
	ctx := context.Background()
	l = newLock(t, newClient(t, rdb), redistest.Name(t), board, 8)
	held, err := lock(ctx, l)
	require.NoError(t, err)
	pc := make(chan context.Context, 1)
	go func() {
		h, err := lock(ctx, l)
		assert.NoError(t, err)
		pc <- h
	}()
	waitQueued(t, rdb, l, 1)
	// Queued in Redis, and known to be so locally, so that it is the pick.
	require.Eventually(t, func() bool { return l.QueuedLocally() == 1 }, 5*time.Second, time.Millisecond)
	return l, held, pc
}

// A boarded waiter whose context ends while a release that carries it is on its way returns
// by its deadline (within the engine's grace), whatever the release decides about it.
//
// It does not when that release hands the lock to its pick, another local waiter: settle
// (local.go, "case pickTaken: decide(w, outcome{}, wBoarded)") puts the waiter back among the
// boarded without telling it anything, while board (acquire.go, the "if !q.orphan(a.w)" branch
// after grace) finds it no longer carried and waits on its outcome channel with neither its
// context nor a timer: the call returns only at the pick's release, however long the pick
// holds.
func TestBoardedWaiterReturnsByItsContextWhenTheReleasePicksAnother(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	hook := &slowRelease{d: 30 * time.Millisecond}
	rdb.AddHook(hook)
	l, held, p := pickScene(t, rdb, 50*time.Millisecond)
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := lock(wctx, l)
		done <- err
	}()
	waitBoarded(t, l, 1)
	hook.on.Store(true)
	time.AfterFunc(10*time.Millisecond, cancel) // during the release's round trip
	require.NoError(t, l.Unlock(held))          // hands the lock to p; w rides
	hp := <-p
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(2 * time.Second):
		require.NoError(t, l.Unlock(hp))
		<-done
		t.Fatal("the waiter's Lock had not returned 2s after its context was cancelled, while p held")
	}
	require.NoError(t, l.Unlock(hp))
}

// The same when it is the waiter's window that ends during the release: board then waits for
// the release's outcome without its context (acquire.go, "return true, <-a.w.out, nil" when
// ended is nil), and the release, handing the lock to its pick, tells it nothing.
func TestBoardedWaiterReturnsByItsContextWhenItsWindowEndsDuringARelease(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	hook := &slowRelease{d: 40 * time.Millisecond}
	rdb.AddHook(hook)
	l, held, p := pickScene(t, rdb, 50*time.Millisecond)
	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := lock(wctx, l)
		done <- err
	}()
	waitBoarded(t, l, 1)
	time.Sleep(30 * time.Millisecond) // the window ends 50ms after boarding: during the release
	hook.on.Store(true)
	require.NoError(t, l.Unlock(held))
	hp := <-p
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(2 * time.Second):
		require.NoError(t, l.Unlock(hp))
		<-done
		t.Fatal("the waiter's Lock had not returned 2s after its context was cancelled, while p held")
	}
	require.NoError(t, l.Unlock(hp))
}

// After its streak, a release serves the queue; when the queue's head is its own pick, the
// script hands the lock to the pick after the riders joined, and replies as for a pick taken
// straight away ({2, pick}: lock_release.lua's header says the riders then did not join).
// settle takes them for boarded still, so a rider is queued in Redis and believed boarded: it
// sends no heartbeat, and when its window ends it attempts as a first attempt and is queued a
// second time. No hold id is to be queued twice.
func TestRidersOfAReleaseThatServedItsPickFromTheQueueAreQueuedOnce(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	ctx := context.Background()
	l := newLock(t, newClient(t, rdb), redistest.Name(t), 200*time.Millisecond, 8)
	held, err := lock(ctx, l)
	require.NoError(t, err)
	got := make(chan context.Context, 4)
	waiter := func() {
		go func() {
			h, err := lock(ctx, l)
			assert.NoError(t, err)
			got <- h
		}()
	}
	for range 8 { // the streak of local hand-offs
		waiter()
		waitBoarded(t, l, 1)
		require.NoError(t, l.Unlock(held))
		held = <-got
	}
	waiter() // p: its window runs out, it queues: the head, and the next pick
	waitQueued(t, rdb, l, 1)
	waiter() // w: boards, and rides
	waitBoarded(t, l, 1)
	require.NoError(t, l.Unlock(held)) // over: the queue is served, p first
	held = <-got
	time.Sleep(300 * time.Millisecond) // w's window ends
	members, err := rdb.LRange(ctx, l.Keys()[1], 0, -1).Result()
	require.NoError(t, err)
	assert.Len(t, members, 1, "w is queued twice: %q", members)
	require.NoError(t, l.Unlock(held))
	require.NoError(t, l.Unlock(<-got))
}
