package fair

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/redistest"
	"github.com/redaqs/aqs/internal/scripts"
)

// Riding along (ride.go), driven through Lock and Unlock, with the riding state in view.

func rideTopologies(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient)) {
	t.Run("single", func(t *testing.T) { f(t, redistest.Single(t).Client(t)) })
	t.Run("cluster", func(t *testing.T) { f(t, redistest.Cluster(t).Client(t)) })
}

func rideClient(t *testing.T, rdb redis.UniversalClient) *aqs.Client {
	t.Helper()
	c, err := aqs.New(context.Background(), rdb)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// rideLock returns a fair lock of the test's name whose riders wait up to window.
func rideLock(t *testing.T, c *aqs.Client, window time.Duration) *Lock {
	t.Helper()
	l, err := New(c, redistest.Name(t))
	require.NoError(t, err)
	l.rideWindow = window
	return l
}

func (l *Lock) ridersWaiting() int {
	l.rides.mu.Lock()
	defer l.rides.mu.Unlock()
	return len(l.rides.riders)
}

// queuedInRedis is how many waiters the lock's deadline zset holds.
func queuedInRedis(t *testing.T, rdb redis.UniversalClient, l *Lock) int64 {
	t.Helper()
	n, err := rdb.ZCard(context.Background(), l.Key()+":d").Result()
	require.NoError(t, err)
	return n
}

// acquirer runs Lock in a goroutine and records, in order, the names that got the lock; each
// holds until its release channel is closed.
type acquirer struct {
	mu    sync.Mutex
	order []string
	errs  chan error
	wg    sync.WaitGroup
}

func newAcquirer() *acquirer { return &acquirer{errs: make(chan error, 16)} }

func (a *acquirer) lock(ctx context.Context, l *Lock, name string, release <-chan struct{}) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		held, err := l.Lock(ctx)
		if err != nil {
			a.errs <- err
			return
		}
		a.mu.Lock()
		a.order = append(a.order, name)
		a.mu.Unlock()
		<-release
		a.errs <- l.Unlock(held)
	}()
}

// board starts the named goroutines' Locks one after the other, each once the one before it
// boarded as a rider of l's hold.
func (a *acquirer) board(t *testing.T, ctx context.Context, l *Lock, names []string, release <-chan struct{}) {
	t.Helper()
	for i, name := range names {
		a.lock(ctx, l, name, release)
		require.Eventually(t, func() bool { return l.ridersWaiting() == i+1 }, 5*time.Second, time.Millisecond)
	}
}

// finish waits for every Lock started and requires that none failed.
func (a *acquirer) finish(t *testing.T) {
	t.Helper()
	a.wg.Wait()
	close(a.errs)
	for err := range a.errs {
		require.NoError(t, err)
	}
}

// assertNoKeysLeft asserts that the lock left none of its keys behind.
func assertNoKeysLeft(t *testing.T, rdb redis.UniversalClient, l *Lock) {
	t.Helper()
	n, err := rdb.Exists(context.Background(), l.Key(), l.Key()+":q", l.Key()+":d").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "keys left behind")
}

func (a *acquirer) got() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.order...)
}

func TestRidersJoinWithTheReleaseInCallOrder(t *testing.T) {
	rideTopologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		l := rideLock(t, rideClient(t, rdb), time.Minute)
		held, err := l.Lock(ctx)
		require.NoError(t, err)
		a := newAcquirer()
		open := make(chan struct{})
		names := []string{"b1", "b2", "b3", "b4"}
		a.board(t, ctx, l, names, open)
		// Nothing of the riders reached Redis: they join with the release.
		assert.Equal(t, int64(0), queuedInRedis(t, rdb, l))
		require.NoError(t, l.Unlock(held))
		close(open)
		a.finish(t)
		assert.Equal(t, names, a.got())
		assertNoKeysLeft(t, rdb, l)
	})
}

func TestRiderBehindAnotherClientsWaiter(t *testing.T) {
	rideTopologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		l := rideLock(t, rideClient(t, rdb), time.Minute)
		other, err := New(rideClient(t, rdb), l.Name())
		require.NoError(t, err)
		held, err := l.Lock(ctx)
		require.NoError(t, err)
		a := newAcquirer()
		open := make(chan struct{})
		a.lock(ctx, other, "other", open) // queues in Redis on its own: its Client holds nothing
		require.Eventually(t, func() bool { return queuedInRedis(t, rdb, l) == 1 }, 5*time.Second, time.Millisecond)
		a.lock(ctx, l, "rider", open)
		require.Eventually(t, func() bool { return l.ridersWaiting() == 1 }, 5*time.Second, time.Millisecond)
		require.NoError(t, l.Unlock(held))
		close(open)
		a.finish(t)
		assert.Equal(t, []string{"other", "rider"}, a.got())
	})
}

func TestRiderJoinsOnItsOwnAfterTheWindow(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	ctx := context.Background()
	l := rideLock(t, rideClient(t, rdb), 20*time.Millisecond)
	held, err := l.Lock(ctx)
	require.NoError(t, err)
	a := newAcquirer()
	open := make(chan struct{})
	close(open)
	a.lock(ctx, l, "rider", open)
	// The hold lasts: the rider gives up waiting for its release and queues itself.
	require.Eventually(t, func() bool { return queuedInRedis(t, rdb, l) == 1 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, 0, l.ridersWaiting())
	require.NoError(t, l.Unlock(held))
	a.finish(t)
	assert.Equal(t, []string{"rider"}, a.got())
}

func TestRiderThatGivesUpLeavesNothing(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	ctx := context.Background()
	l := rideLock(t, rideClient(t, rdb), time.Minute)
	held, err := l.Lock(ctx)
	require.NoError(t, err)

	// Cancelled while waiting to ride.
	cctx, cancel := context.WithCancelCause(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := l.Lock(cctx)
		done <- err
	}()
	require.Eventually(t, func() bool { return l.ridersWaiting() == 1 }, 5*time.Second, time.Millisecond)
	cause := errors.New("no longer wanted")
	cancel(cause)
	require.ErrorIs(t, <-done, cause)

	// A wait bound that runs out while waiting to ride.
	_, ok, err := l.TryLock(ctx, aqs.WithWait(30*time.Millisecond))
	require.NoError(t, err)
	assert.False(t, ok)

	assert.Equal(t, 0, l.ridersWaiting())
	assert.Equal(t, int64(0), queuedInRedis(t, rdb, l))
	require.NoError(t, l.Unlock(held))
	assertNoKeysLeft(t, rdb, l)
}

// A release that cannot carry riders (the hold has a fencing token: the script's general path)
// dismisses them; they join on their own at once, and get the lock in their order.
func TestRidersOfAReleaseThatCannotCarryThem(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	ctx := context.Background()
	l := rideLock(t, rideClient(t, rdb), time.Minute)
	held, err := l.Lock(ctx, aqs.WithFencingToken())
	require.NoError(t, err)
	a := newAcquirer()
	open := make(chan struct{})
	close(open)
	a.lock(ctx, l, "b1", open)
	require.Eventually(t, func() bool { return l.ridersWaiting() == 1 }, 5*time.Second, time.Millisecond)
	start := time.Now()
	require.NoError(t, l.Unlock(held))
	a.finish(t)
	assert.Equal(t, []string{"b1"}, a.got())
	assert.Less(t, time.Since(start), 10*time.Second, "the rider waited for its window instead")
}

// A release that carried riders but whose reply was lost runs again (go-redis sends a command
// again when its connection broke after it was sent): the second run finds the lock handed
// on and changes nothing, and the riders, told nothing, find out by attempts of their own that
// they are queued, or, here, that the lost first run handed the lock to one of them.
func TestRidersOfAReleaseWhoseReplyWasLost(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	ctx := context.Background()
	l := rideLock(t, rideClient(t, rdb), time.Minute)
	held, err := l.Lock(ctx)
	require.NoError(t, err)
	a := newAcquirer()
	open := make(chan struct{})
	close(open)
	a.board(t, ctx, l, []string{"b1", "b2"}, open)
	l.rides.mu.Lock()
	members := []any{l.rides.riders[0].member, l.rides.riders[1].member}
	l.rides.mu.Unlock()

	// The first run, whose reply is lost.
	hold := l.x.RT.Held(held, l.Key()).Hold().ID
	args := append([]any{hold, "1", l.x.RT.PublishCommand(), l.waiterTimeout.Milliseconds()}, members...)
	r, err := scripts.FairRelease.Run(ctx, rdb, l.Keys(), args...).Slice()
	require.NoError(t, err)
	require.Len(t, r, 2)

	// The run the caller sees.
	require.ErrorIs(t, l.Unlock(held), aqs.ErrNotOwner)
	a.finish(t)
	assert.Equal(t, []string{"b1", "b2"}, a.got())
	assertNoKeysLeft(t, rdb, l)
}
