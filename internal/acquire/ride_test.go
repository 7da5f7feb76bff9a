package acquire_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/scripts"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// Riders (local.go): waiters of the Client that holds the lock board, and the hold's release
// carries their joins to the queue's tail, as the fair lock does with every release. Each test
// boards its waiters on a hold with a window of a minute, so that they are certainly boarded
// when the release comes, unless the window itself is under test.

func TestRidersJoinWithTheReleaseInCallOrder(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		l := fairLock(t, newClient(t, rdb), time.Minute)
		held, err := lock(ctx, l)
		require.NoError(t, err)
		a := newAcquirer()
		open := make(chan struct{})
		names := []string{"b1", "b2", "b3", "b4"}
		a.board(t, ctx, l, names, open)
		// Nothing of the riders reached Redis: they join with the release.
		assert.Equal(t, int64(0), queued(t, rdb, l))
		require.NoError(t, l.Unlock(held))
		close(open)
		a.finish(t)
		assert.Equal(t, names, a.got())
		assertNoKeysLeft(t, rdb, l)
	})
}

// A hold with a fencing token ends by lock_release.lua's general path, which carries riders
// as the short path does. (A call that asks for its token at acquisition takes the lock by an
// attempt of its own, and so never boards: the token here is asked for once held.)
func TestRidersOfAHoldWithATokenJoinInCallOrder(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	ctx := context.Background()
	l := fairLock(t, newClient(t, rdb), time.Minute)
	held, err := lock(ctx, l)
	require.NoError(t, err)
	_, err = l.Token(held)
	require.NoError(t, err)
	a := newAcquirer()
	open := make(chan struct{})
	names := []string{"b1", "b2", "b3"}
	a.board(t, ctx, l, names, open)
	require.NoError(t, l.Unlock(held))
	close(open)
	a.finish(t)
	assert.Equal(t, names, a.got())
	assertNoKeysLeft(t, rdb, l)
}

func TestRiderJoinsBehindAnotherClientsWaiter(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		l := fairLock(t, newClient(t, rdb), time.Minute)
		other := newLock(t, newClient(t, rdb), l.Name(), time.Minute, 0)
		held, err := lock(ctx, l)
		require.NoError(t, err)
		a := newAcquirer()
		open := make(chan struct{})
		a.lock(ctx, other, "other", open) // queues in Redis on its own: its Client holds nothing
		waitQueued(t, rdb, l, 1)
		a.board(t, ctx, l, []string{"rider"}, open)
		require.NoError(t, l.Unlock(held))
		close(open)
		a.finish(t)
		assert.Equal(t, []string{"other", "rider"}, a.got())
		assertNoKeysLeft(t, rdb, l)
	})
}

// A rider whose hold is not released within the window joins the queue on its own.
func TestRiderJoinsOnItsOwnAfterTheWindow(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	ctx := context.Background()
	l := fairLock(t, newClient(t, rdb), 20*time.Millisecond)
	held, err := lock(ctx, l)
	require.NoError(t, err)
	a := newAcquirer()
	open := make(chan struct{})
	close(open)
	a.lock(ctx, l, "rider", open)
	waitQueued(t, rdb, l, 1)
	assert.Zero(t, l.Boarded())
	require.NoError(t, l.Unlock(held))
	a.finish(t)
	assert.Equal(t, []string{"rider"}, a.got())
	assertNoKeysLeft(t, rdb, l)
}

// A rider that the release joined behind another Client's waiter is granted the lock later
// by that Client's release, through its grant channel, and holds it: the hold Lock returns is
// trusted (its lease counted from no earlier than the grant could have started it), and its
// held context stays live until its Unlock.
//
// It is not: run (acquire.go) sets the rider's queuedAt from the release's outcome ("case
// boarded && o.kind == oJoined"), and then, with r.Status Queued and sentAt never set on that
// path, overwrites it with the zero time ("a.queuedAt = sentAt"). A grant through the hub or a
// heartbeat is then adopted with a.since(), the zero time, as its lease start: the hold's local
// deadline is long past, so it is not trusted until the watchdog's extension comes back, and
// the watchdog, woken by Adopt, can cancel it ("lease no longer trusted") before won sets that
// extension, while Redis holds the lock for it until the grant's lease ends. The multi-process
// tests of package reentrant fail on it under load.
func TestRiderGrantedByAnotherClientsReleaseKeepsItsHold(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	ctx := context.Background()
	c, oc := newClient(t, rdb), newClient(t, rdb)
	rt := core.RuntimeOf(c)
	for round := range 5 {
		l := newLock(t, c, fmt.Sprintf("%s-%d", redistest.Name(t), round), time.Minute, 0)
		other := newLock(t, oc, l.Name(), time.Minute, 0)
		held, err := lock(ctx, l)
		require.NoError(t, err)
		oheld := make(chan context.Context, 1)
		go func() {
			h, err := lock(ctx, other)
			assert.NoError(t, err)
			oheld <- h
		}()
		waitQueued(t, rdb, l, 1)
		rider := make(chan error, 1)
		go func() {
			h, err := lock(ctx, l)
			if err == nil {
				if !rt.Held(h, l.Key()).Hold().LeaseTrusted() {
					err = errors.New("the hold Lock returned is not trusted")
				}
				time.Sleep(10 * time.Millisecond) // the watchdog looks at the new hold
				if err == nil {
					err = context.Cause(h)
				}
				err = errors.Join(err, l.Unlock(h))
			}
			rider <- err
		}()
		waitBoarded(t, l, 1)
		require.NoError(t, l.Unlock(held)) // the rider joins behind other's waiter
		require.NoError(t, other.Unlock(<-oheld))
		require.NoError(t, <-rider, "round %d", round)
		assertNoKeysLeft(t, rdb, l)
	}
}

// A boarded waiter whose call ends (its context, or its wait bound) leaves nothing: nothing of
// it reached Redis, and the release carries only the waiters still boarded.
func TestRiderThatGivesUpLeavesNothing(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	ctx := context.Background()
	l := fairLock(t, newClient(t, rdb), time.Minute)
	held, err := lock(ctx, l)
	require.NoError(t, err)

	// Cancelled while boarded.
	cctx, cancel := context.WithCancelCause(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := lock(cctx, l)
		done <- err
	}()
	waitBoarded(t, l, 1)
	cause := errors.New("no longer wanted")
	cancel(cause)
	require.ErrorIs(t, <-done, cause)

	// A wait bound that runs out while boarded.
	_, ok, err := l.Acquire(ctx, core.LockConfig{Wait: 30 * time.Millisecond}, false)
	require.NoError(t, err)
	assert.False(t, ok)

	assert.Zero(t, l.Boarded())
	assert.Equal(t, int64(0), queued(t, rdb, l))
	require.NoError(t, l.Unlock(held))
	assertNoKeysLeft(t, rdb, l)
}

// The release of a hold that was lost (forced open by another Client) carries nobody: it
// changes nothing in Redis. Its riders attempt on their own at once, without waiting for
// their window, and each gets the lock once.
func TestRidersOfAReleaseThatCannotCarryThemAttemptAtOnce(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	ctx := context.Background()
	l := fairLock(t, newClient(t, rdb), time.Minute)
	admin := newLock(t, newClient(t, rdb), l.Name(), time.Minute, 0)
	held, err := lock(ctx, l)
	require.NoError(t, err)
	a := newAcquirer()
	open := make(chan struct{})
	close(open)
	a.board(t, ctx, l, []string{"b1", "b2"}, open)
	ok, err := admin.ForceUnlock(ctx)
	require.NoError(t, err)
	require.True(t, ok)

	start := time.Now()
	require.ErrorIs(t, l.Unlock(held), aqs.ErrLockLost)
	a.finish(t)
	assert.ElementsMatch(t, []string{"b1", "b2"}, a.got())
	assert.Less(t, time.Since(start), 30*time.Second, "the riders waited for their window")
	assertNoKeysLeft(t, rdb, l)
}

// loseReplies is a go-redis hook that, once armed, lets the next release script run and then
// reports its reply lost, as a connection that broke after the command was sent does.
type loseReplies struct{ on atomic.Bool }

var errReplyLost = errors.New("read tcp: connection reset by peer (the test's hook)")

func (h *loseReplies) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *loseReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil && isRelease(cmd) && h.on.CompareAndSwap(true, false) {
			cmd.SetErr(errReplyLost)
			return errReplyLost
		}
		return err
	}
}

func (h *loseReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func isRelease(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 2 {
		return false
	}
	switch cmd.Name() {
	case "evalsha":
		return args[1] == scripts.LockRelease.SHA()
	case "eval":
		return args[1] == scripts.LockRelease.Source()
	}
	return false
}

// A release that carried riders but whose reply was lost did what it did: here it queued them
// and handed the lock to the first. The riders, told nothing, find out by attempts of their
// own (later attempts: they keep the places the release gave them), and each gets the lock
// once, in their order, and holds it: the hold Lock returns is trusted, and its held context
// stays live until its Unlock.
//
// The first rider's is not: its attempt replies Granted, and run adopts the hold with a.since()
// (acquire.go, "case scripts.Granted"), the zero time for a waiter that never had a Queued
// reply, so the hold's local deadline is long past: it is not trusted until the watchdog's
// extension comes back, and the watchdog, woken by Adopt, could find it overdue before an
// extension set after Adopt and cancel it ("lease no longer trusted") while Redis holds the
// lock for it: the extension comes with the hold (core.Grant.ExtendTo).
func TestRidersOfAReleaseWhoseReplyWasLost(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	hook := &loseReplies{}
	rdb.AddHook(hook)
	ctx := context.Background()
	for round := range 20 {
		c := newClient(t, rdb)
		l := newLock(t, c, fmt.Sprintf("%s-%d", redistest.Name(t), round), time.Minute, 0)
		held, err := lock(ctx, l)
		require.NoError(t, err)
		var mu sync.Mutex
		var order []string
		errs := make(chan error, 2)
		for i, name := range []string{"b1", "b2"} {
			go func() {
				h, err := lock(ctx, l)
				if err == nil {
					mu.Lock()
					order = append(order, name)
					mu.Unlock()
					if !core.RuntimeOf(c).Held(h, l.Key()).Hold().LeaseTrusted() {
						err = errors.New(name + ": the hold Lock returned is not trusted")
					}
					time.Sleep(10 * time.Millisecond) // the watchdog looks at the new hold
					if err == nil {
						err = context.Cause(h)
					}
					err = errors.Join(err, l.Unlock(h))
				}
				errs <- err
			}()
			waitBoarded(t, l, i+1)
		}
		hook.on.Store(true)
		require.ErrorIs(t, l.Unlock(held), errReplyLost)
		for range 2 {
			require.NoError(t, <-errs, "round %d", round)
		}
		assert.Equal(t, []string{"b1", "b2"}, order, "round %d", round)
		assertNoKeysLeft(t, rdb, l)
	}
}
