package fair_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/scripts"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

func TestGrantsFollowJoinOrder(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		// Waiters in two Clients, joining in an order the test controls.
		c1, c2 := newClient(t, rdb), newClient(t, rdb)
		l1 := newLock(t, c1)
		l2, err := fair.New(c2, l1.Name())
		require.NoError(t, err)
		held, err := l1.Lock(context.Background())
		require.NoError(t, err)

		const n = 8
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			l := l1
			if i%2 == 1 {
				l = l2
			}
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				h, err := l.Lock(context.Background())
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				assert.NoError(t, l.Unlock(h))
			}(i)
			waitQueued(t, rdb, l1, int64(i+1))
		}
		require.NoError(t, l1.Unlock(held))
		wg.Wait()
		want := make([]int, n)
		for i := range want {
			want[i] = i
		}
		assert.Equal(t, want, order, "acquisitions in join order")
		assert.Zero(t, queued(t, rdb, l1))
		locked, err := l1.IsLocked(context.Background())
		require.NoError(t, err)
		assert.False(t, locked)
	})
}

func TestNewcomerNeverPassesALiveWaiter(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	c := newClient(t, rdb)
	l := newLock(t, c)
	held, err := l.Lock(context.Background())
	require.NoError(t, err)
	got := make(chan context.Context, 1)
	go func() {
		h, err := l.Lock(context.Background())
		assert.NoError(t, err)
		got <- h
	}()
	waitQueued(t, rdb, l, 1)
	require.NoError(t, l.Unlock(held))
	// The release handed the lock to the waiter: a newcomer, even in the same process, fails.
	_, ok, err := l.TryLock(context.Background())
	require.NoError(t, err)
	assert.False(t, ok, "a newcomer passed the queued waiter")
	h := <-got
	require.NoError(t, l.Unlock(h))
	_, ok, err = l.TryLock(context.Background())
	require.NoError(t, err)
	assert.True(t, ok, "free and nobody waiting")
}

func TestGivingUpLeavesNoResidue(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	c := newClient(t, rdb)
	l := newLock(t, c)
	held, err := l.Lock(context.Background())
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := l.Lock(ctx); errc <- err }()
	waitQueued(t, rdb, l, 1)
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	assert.Zero(t, queued(t, rdb, l), "the cancelled waiter left the queue")

	_, ok, err := l.TryLock(context.Background(), aqs.WithWait(100*time.Millisecond))
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Zero(t, queued(t, rdb, l), "the wait bound took the waiter out of the queue")

	require.NoError(t, l.Unlock(held))
	locked, err := l.IsLocked(context.Background())
	require.NoError(t, err)
	assert.False(t, locked, "nobody is left to hand the lock to")
}

func TestLockGrantedAtTheMomentOfGivingUpPassesOn(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	c := newClient(t, rdb)
	l := newLock(t, c)
	ctx := context.Background()
	held, err := l.Lock(ctx)
	require.NoError(t, err)
	// Two waiters; the first gives up exactly when the lock is handed to it: simulate by
	// releasing while its context is already cancelled but before it noticed.
	first, cancelFirst := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { _, err := l.Lock(first); errc <- err }()
	waitQueued(t, rdb, l, 1)
	second := make(chan context.Context, 1)
	go func() {
		h, err := l.Lock(ctx)
		assert.NoError(t, err)
		second <- h
	}()
	waitQueued(t, rdb, l, 2)
	cancelFirst()
	require.NoError(t, l.Unlock(held))
	require.ErrorIs(t, <-errc, context.Canceled)
	select {
	case h := <-second:
		require.NoError(t, l.Unlock(h))
	case <-time.After(5 * time.Second):
		t.Fatal("the lock did not pass on to the second waiter")
	}
}

func TestDeadWaiterIsSkipped(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	c := newClient(t, rdb)
	l := newLock(t, c, fair.WithWaiterTimeout(200*time.Millisecond))
	ctx := context.Background()
	held, err := l.Lock(ctx)
	require.NoError(t, err)
	// A waiter whose process died: its entry is in the queue, and no heartbeat refreshes it.
	dead := "00000000-0000-0000-0000-000000000000:1 30000"
	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	require.NoError(t, rdb.RPush(ctx, l.Key()+":q", dead).Err())
	require.NoError(t, rdb.ZAdd(ctx, l.Key()+":d", redis.Z{Score: float64(now.UnixMilli() + 200), Member: dead}).Err())
	got := make(chan context.Context, 1)
	go func() {
		h, err := l.Lock(ctx)
		assert.NoError(t, err)
		got <- h
	}()
	waitQueued(t, rdb, l, 2)
	// Past the dead waiter's deadline (and the live waiter's own first one: only its
	// heartbeats keep it queued), a release skips the dead one and hands the lock on.
	require.Eventually(t, func() bool {
		n, _ := rdb.Time(ctx).Result()
		return n.UnixMilli() > now.UnixMilli()+200
	}, 2*time.Second, 5*time.Millisecond)
	require.NoError(t, l.Unlock(held))
	select {
	case h := <-got:
		require.NoError(t, l.Unlock(h))
	case <-time.After(5 * time.Second):
		t.Fatal("the live waiter did not get the lock")
	}
	assert.Zero(t, queued(t, rdb, l))
}

func TestHolderCrashHandsToHeadWithinRemainingLease(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	c := newClient(t, rdb)
	l := newLock(t, c)
	ctx := context.Background()
	// The holder "crashes": its key keeps a 300ms lease and nobody releases it.
	require.NoError(t, rdb.Set(ctx, l.Key(), "00000000-0000-0000-0000-000000000000:9", 300*time.Millisecond).Err())
	start := time.Now()
	h, err := l.Lock(ctx)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 2*time.Second, "the head waited far beyond the remaining lease")
	require.NoError(t, l.Unlock(h))
}

func TestFairLockReentersAndCountsDown(t *testing.T) {
	l := newLock(t, newClient(t, redistest.Single(t).Client(t)))
	ctx := context.Background()
	held, err := l.Lock(ctx)
	require.NoError(t, err)
	inner, err := l.Lock(held)
	require.NoError(t, err)
	n, err := l.HoldCount(inner)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	t1, err := l.Token(held)
	require.NoError(t, err)
	t2, err := l.Token(inner)
	require.NoError(t, err)
	assert.Equal(t, t1, t2)
	require.NoError(t, l.Unlock(inner))
	require.NoError(t, l.Unlock(held))
	assert.ErrorIs(t, l.Unlock(held), aqs.ErrNotOwner)
}

func TestFairBadInput(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	c := newClient(t, rdb)
	_, err := fair.New(c, "")
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	_, err = fair.New(nil, "x")
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	for _, d := range []time.Duration{0, -time.Second, time.Millisecond} {
		_, err = fair.New(c, "x", fair.WithWaiterTimeout(d))
		assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "waiter timeout %v", d)
	}
	l := newLock(t, c)
	_, _, err = l.TryLock(context.Background(), aqs.WithLease(0))
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)

	// Keys of another type: the lock key, and the queue keys.
	ctx := context.Background()
	require.NoError(t, rdb.Set(ctx, l.Key(), "precious", 0).Err())
	_, _, err = l.TryLock(ctx)
	assert.ErrorIs(t, err, aqs.ErrWrongType)
	ctx2, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = l.Lock(ctx2)
	assert.ErrorIs(t, err, aqs.ErrWrongType)
	v, _ := rdb.Get(ctx, l.Key()).Result()
	assert.Equal(t, "precious", v)
	require.NoError(t, rdb.Del(ctx, l.Key()).Err())

	require.NoError(t, rdb.Set(ctx, l.Key()+":q", "precious", 0).Err())
	_, _, err = l.TryLock(ctx)
	assert.ErrorIs(t, err, aqs.ErrWrongType)
	v, _ = rdb.Get(ctx, l.Key()+":q").Result()
	assert.Equal(t, "precious", v)
	require.NoError(t, rdb.Del(ctx, l.Key()+":q").Err())
}

func TestManyGoroutinesFairAndExclusive(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		c := newClient(t, rdb)
		l := newLock(t, c)
		inside := l.Key() + ":inside"
		const workers, rounds = 8, 15
		counts := make([]int, workers)
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; i < rounds; i++ {
					h, err := l.Lock(context.Background())
					if !assert.NoError(t, err) {
						return
					}
					n, _ := rdb.Incr(h, inside).Result()
					assert.Equal(t, int64(1), n, "overlap")
					rdb.Decr(h, inside)
					counts[w]++
					assert.NoError(t, l.Unlock(h))
				}
			}(w)
		}
		wg.Wait()
		for w, n := range counts {
			assert.Equal(t, rounds, n, fmt.Sprint("worker ", w))
		}
		rdb.Del(context.Background(), inside)
	})
}

func TestGrantLostWithThePubSubConnectionStillReachesTheWaiter(t *testing.T) {
	srv := redistest.NewServer(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	holder := newLock(t, newClient(t, rdb))
	held, err := holder.Lock(ctx)
	require.NoError(t, err)
	waiterClient := newClient(t, srv.Client(t))
	l, err := fair.New(waiterClient, holder.Name(), fair.WithWaiterTimeout(300*time.Millisecond))
	require.NoError(t, err)
	got := make(chan context.Context, 1)
	go func() {
		h, err := l.Lock(ctx)
		assert.NoError(t, err)
		got <- h
	}()
	waitQueued(t, rdb, holder, 1)
	// Cut every subscriber's connection, then release at once: the grant may be published
	// while the waiter's Client is reconnecting. A heartbeat (or the re-check after the
	// reconnect) finds the lock handed over.
	require.NoError(t, rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err())
	require.NoError(t, holder.Unlock(held))
	select {
	case h := <-got:
		tok, err := l.Token(h)
		require.NoError(t, err)
		assert.Positive(t, tok)
		require.NoError(t, l.Unlock(h))
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter never learned of its grant")
	}
}

func TestLocalHandOffWhoseReplyIsLostStillReachesTheWaiter(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	ctx := context.Background()
	c := newClient(t, rdb)
	l, err := fair.New(c, redistest.Name(t), fair.WithWaiterTimeout(300*time.Millisecond))
	require.NoError(t, err)
	held, err := l.Lock(ctx)
	require.NoError(t, err)
	got := make(chan context.Context, 1)
	go func() {
		h, err := l.Lock(ctx)
		assert.NoError(t, err)
		got <- h
	}()
	waitQueued(t, rdb, l, 1)
	// Release as Unlock would, but drop the reply: the waiter is of the releaser's own Client,
	// so nothing was published and only that reply would have told it.
	info, err := l.Info(ctx)
	require.NoError(t, err)
	v, err := scripts.LockRelease.Run(ctx, rdb, l.Keys(), info.Holder, "1", "PUBLISH", 300, "", "0").Result()
	require.NoError(t, err)
	r, err := scripts.DecodeRelease(v)
	require.NoError(t, err)
	require.Equal(t, scripts.HandedLocal, r.Kind, "a hand-off within one Client is reported with the waiter's hold id, got %v", v)
	granted := r.Hold
	select {
	case h := <-got:
		info, err := l.Info(ctx)
		require.NoError(t, err)
		assert.Equal(t, granted, info.Holder)
		require.NoError(t, l.Unlock(h))
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter never learned of its grant")
	}
	assert.ErrorIs(t, l.Unlock(held), aqs.ErrLockLost)
}

// A waiter's liveness may outlast the lock key as others left it: the key must then live on
// until that waiter could have taken over, or a newcomer's plain SET NX would pass it. The
// newcomer here joins behind a holder whose key was last sized for a waiter with a shorter
// timeout (the arrival path of a contended lock, in fair_acquire.lua).
func TestJoinKeepsTheLockKeyAliveAsLongAsTheWaiter(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	c := newClient(t, rdb)
	l := newLock(t, c)
	short, err := fair.New(c, l.Name(), fair.WithWaiterTimeout(time.Second))
	require.NoError(t, err)
	long, err := fair.New(c, l.Name(), fair.WithWaiterTimeout(30*time.Second))
	require.NoError(t, err)
	held, err := l.Lock(context.Background(), aqs.WithLease(time.Minute))
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i, w := range []*fair.Lock{short, long} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := w.Lock(ctx)
			assert.ErrorIs(t, err, context.Canceled)
		}()
		waitQueued(t, rdb, l, int64(i+1))
	}
	lease, err := l.RemainingLease(context.Background())
	require.NoError(t, err)
	pttl, err := rdb.PTTL(context.Background(), l.Key()).Result()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, pttl, lease+30*time.Second,
		"the key lives at least the waiter timeout of the last joiner beyond the lease")

	cancel()
	wg.Wait()
	require.NoError(t, l.Unlock(held))
}
