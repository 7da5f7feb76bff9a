package latch_test

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
	"github.com/redaqs/aqs/internal/scripts"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/latch"
)

// awaitAsync runs l.Await(ctx) on a goroutine and returns the channel of its outcome.
func awaitAsync(ctx context.Context, l *latch.Latch) <-chan error {
	out := make(chan error, 1)
	go func() { out <- l.Await(ctx) }()
	return out
}

// returned waits, at most within, for an Await's outcome.
func returned(t *testing.T, out <-chan error, within time.Duration) error {
	t.Helper()
	select {
	case err := <-out:
		return err
	case <-time.After(within):
		t.Fatalf("Await did not return within %v", within)
		return nil
	}
}

// stillWaiting checks that an Await has not returned.
func stillWaiting(t *testing.T, out <-chan error) {
	t.Helper()
	select {
	case err := <-out:
		t.Fatalf("Await returned (%v) while the count is above 0", err)
	default:
	}
}

func TestAwaitReturnsOnlyOnceTheCountReachesZero(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c := newClient(t, rdb)
		l := setLatch(t, c, 3)
		out := awaitAsync(ctx, l)
		waitWaiters(t, c, 1)
		for want := 2; want >= 1; want-- {
			require.NoError(t, l.CountDown(ctx))
			n, err := l.Count(ctx)
			require.NoError(t, err)
			require.Equal(t, want, n)
			ok, err := l.TryAwait(ctx)
			require.NoError(t, err)
			require.False(t, ok, "TryAwait at count %d", want)
			stillWaiting(t, out)
		}
		require.NoError(t, l.CountDown(ctx))
		require.NoError(t, returned(t, out, 5*time.Second))
		assert.Zero(t, hubWaiters(c), "the waiter left the hub")

		// At 0 the count stays 0: an Await returns at once, a CountDown changes nothing.
		require.NoError(t, l.Await(ctx))
		require.NoError(t, l.CountDown(ctx))
		n, err := l.Count(ctx)
		require.NoError(t, err)
		assert.Zero(t, n)
		ok, err := l.TryAwait(ctx)
		require.NoError(t, err)
		assert.True(t, ok)
		redistest.AssertNoKeyWithoutTTL(t, rdb, l.Name(), l.Key())
	})
}

// The waiters of two Clients are woken by the one message the last CountDown publishes. Their
// heartbeats are a minute apart, so a waiter that returns within seconds was woken by it.
func TestOneCountDownWakesEveryWaiterOfEveryClient(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		const perClient = 5
		ctx := context.Background()
		c1, c2 := newClient(t, rdb), newClient(t, rdb)
		slow := latch.WithWaiterTimeout(time.Minute)
		l1 := setLatch(t, c1, 1, slow)
		l2 := sameLatch(t, c2, l1, slow)

		// A subscriber of the test's own counts the messages on the latch's channel.
		channel := l1.Key() + ":c"
		var sub *redis.PubSub
		if cc, ok := rdb.(*redis.ClusterClient); ok {
			sub = cc.SSubscribe(ctx, channel)
		} else {
			sub = rdb.Subscribe(ctx, channel)
		}
		defer sub.Close()
		_, err := sub.Receive(ctx) // the subscription's confirmation
		require.NoError(t, err)

		var outs []<-chan error
		for i := 0; i < perClient; i++ {
			outs = append(outs, awaitAsync(ctx, l1), awaitAsync(ctx, l2))
		}
		waitWaiters(t, c1, perClient)
		waitWaiters(t, c2, perClient)
		began := time.Now()
		require.NoError(t, l1.CountDown(ctx))
		for _, out := range outs {
			require.NoError(t, returned(t, out, 5*time.Second))
		}
		t.Logf("%d waiters of 2 Clients returned %v after the CountDown", len(outs), time.Since(began))
		assert.Zero(t, hubWaiters(c1))
		assert.Zero(t, hubWaiters(c2))

		// One message, "*"; the CountDowns at 0 publish nothing more.
		require.NoError(t, l2.CountDown(ctx))
		msg, err := sub.ReceiveTimeout(ctx, 5*time.Second)
		require.NoError(t, err)
		m, ok := msg.(*redis.Message)
		require.True(t, ok, "got %T", msg)
		assert.Equal(t, "*", m.Payload)
		_, err = sub.ReceiveTimeout(ctx, 200*time.Millisecond)
		assert.Error(t, err, "a second message on the latch's channel")
	})
}

func TestALatchNotSetFailsWithErrNotSetAndWritesNothing(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c := newClient(t, rdb)
		l := newLatch(t, c)
		began := time.Now()
		err := l.Await(ctx)
		assert.ErrorIs(t, err, latch.ErrNotSet)
		assert.Contains(t, err.Error(), l.Name())
		t.Logf("Await on a latch never set failed in %v", time.Since(began))
		_, err = l.TryAwait(ctx)
		assert.ErrorIs(t, err, latch.ErrNotSet)
		_, err = l.TryAwait(ctx, aqs.WithWait(time.Second))
		assert.ErrorIs(t, err, latch.ErrNotSet)
		assert.ErrorIs(t, l.CountDown(ctx), latch.ErrNotSet)
		n, err := l.Count(ctx)
		require.NoError(t, err)
		assert.Zero(t, n)
		assert.Zero(t, rdb.Exists(ctx, l.Key()).Val(), "the count key was written")
		assert.Zero(t, hubWaiters(c))
	})
}

func TestAwaitReturnsByItsDeadlineAndLeavesNothingBehind(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		const deadline = 200 * time.Millisecond
		c := newClient(t, rdb)
		l := setLatch(t, c, 1)
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		began := time.Now()
		err := l.Await(ctx)
		took := time.Since(began)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.GreaterOrEqual(t, took, deadline)
		assert.Less(t, took, deadline+250*time.Millisecond, "Await returned late")
		assert.Zero(t, hubWaiters(c), "a hub waiter stayed")
		n, err := l.Count(context.Background())
		require.NoError(t, err)
		assert.Equal(t, 1, n, "the count changed")

		// Cancelled with a cause while it waits: the cause.
		cause := errors.New("coordinator gave up")
		cctx, ccancel := context.WithCancelCause(context.Background())
		out := awaitAsync(cctx, l)
		waitWaiters(t, c, 1)
		ccancel(cause)
		assert.ErrorIs(t, returned(t, out, time.Second), cause)
		assert.Zero(t, hubWaiters(c))

		// A context done already: its cause, at once.
		assert.ErrorIs(t, l.Await(cctx), cause)

		// The latch still works for the others.
		out = awaitAsync(context.Background(), l)
		waitWaiters(t, c, 1)
		require.NoError(t, l.CountDown(context.Background()))
		require.NoError(t, returned(t, out, 5*time.Second))
	})
}

func TestTryAwaitWaitsAtMostItsBound(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, redistest.Single(t).Client(t))
	l := setLatch(t, c, 1)
	ok, err := l.TryAwait(ctx)
	require.NoError(t, err)
	assert.False(t, ok)
	const bound = 150 * time.Millisecond
	began := time.Now()
	ok, err = l.TryAwait(ctx, aqs.WithWait(bound))
	took := time.Since(began)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.GreaterOrEqual(t, took, bound)
	assert.Less(t, took, bound+250*time.Millisecond)
	assert.Zero(t, hubWaiters(c))

	// A bounded wait that the CountDown ends.
	out := make(chan bool, 1)
	go func() {
		ok, err := l.TryAwait(ctx, aqs.WithWait(time.Minute))
		assert.NoError(t, err)
		out <- ok
	}()
	waitWaiters(t, c, 1)
	require.NoError(t, l.CountDown(ctx))
	select {
	case ok := <-out:
		assert.True(t, ok)
	case <-time.After(5 * time.Second):
		t.Fatal("TryAwait did not return after the CountDown")
	}
	_, err = l.TryAwait(ctx, aqs.WithWait(0))
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
}

func TestTrySetCountOnlySetsALatchNotSetOrAtZero(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c := newClient(t, rdb)
		l := setLatch(t, c, 2)
		count := func() int {
			n, err := l.Count(ctx)
			require.NoError(t, err)
			return n
		}
		ok, err := l.TrySetCount(ctx, 5)
		require.NoError(t, err)
		assert.False(t, ok, "set while counting at 2")
		require.NoError(t, l.CountDown(ctx))
		ok, err = l.TrySetCount(ctx, 5)
		require.NoError(t, err)
		assert.False(t, ok, "set while counting at 1")
		assert.Equal(t, 1, count())
		require.NoError(t, l.CountDown(ctx))
		ok, err = l.TrySetCount(ctx, 3)
		require.NoError(t, err)
		assert.True(t, ok, "set at 0")
		assert.Equal(t, 3, count())
		ok2, err := l.TryAwait(ctx)
		require.NoError(t, err)
		assert.False(t, ok2, "the latch started over")
	})
}

func TestInvalidArgumentsAreRejected(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, redistest.Single(t).Client(t))
	l := newLatch(t, c)
	for _, n := range []int{0, -1} {
		ok, err := l.TrySetCount(ctx, n)
		assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "count %d", n)
		assert.False(t, ok)
	}
	_, err := latch.New(nil, "x")
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "nil client")
	_, err = latch.New(c, "")
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "empty name")
	_, err = latch.New(c, "x", latch.WithExpiry(999*time.Millisecond))
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "expiry below 1s")
	_, err = latch.New(c, "x", latch.WithWaiterTimeout(29*time.Millisecond))
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "waiter timeout below 30ms")
	_, err = latch.New(c, "x", latch.Option{})
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "zero option")
	assert.Zero(t, redistest.Single(t).Client(t).Exists(ctx, l.Key()).Val())
}

func TestAKeyOfAnotherTypeIsWrongTypeAndUnchanged(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c := newClient(t, rdb)
		l := newLatch(t, c)
		for _, put := range []func() error{
			func() error { return rdb.HSet(ctx, l.Key(), "f", "1").Err() },
			func() error { return rdb.Set(ctx, l.Key(), "not a count", 0).Err() },
		} {
			require.NoError(t, put())
			require.NoError(t, rdb.Expire(ctx, l.Key(), time.Minute).Err())
			dump := rdb.Dump(ctx, l.Key()).Val()
			_, err := l.TrySetCount(ctx, 1)
			assert.ErrorIs(t, err, aqs.ErrWrongType, "TrySetCount")
			assert.ErrorIs(t, l.CountDown(ctx), aqs.ErrWrongType, "CountDown")
			_, err = l.Count(ctx)
			assert.ErrorIs(t, err, aqs.ErrWrongType, "Count")
			assert.ErrorIs(t, l.Await(ctx), aqs.ErrWrongType, "Await")
			_, err = l.TryAwait(ctx)
			assert.ErrorIs(t, err, aqs.ErrWrongType, "TryAwait")
			assert.Equal(t, dump, rdb.Dump(ctx, l.Key()).Val(), "the key changed")
			assert.Zero(t, hubWaiters(c))
			require.NoError(t, rdb.Del(ctx, l.Key()).Err())
		}
	})
}

// The count is set to 0 behind the latch's back, as a CountDown whose message never reached
// the waiter's Client, once the waiter waits: after its attempt following the subscription,
// it looks again a third of its waiter timeout later ("look"); after that look, only its
// heartbeats, three per timeout, look at the count ("heartbeat": no attempt follows), and the
// count's expiry is a minute away.
func TestAWaiterWhoseWakeMessageIsLostStillReturns(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after int64 // attempts made before the count is set to 0
		end   int64 // attempts made in all: the look is one, a heartbeat is not
	}{{"look", 2, 3}, {"heartbeat", 3, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
				ctx := context.Background()
				var wrdb redis.UniversalClient // the waiter's own go-redis client, with the hook
				if cc, ok := rdb.(*redis.ClusterClient); ok {
					wrdb = redis.NewClusterClient(cc.Options())
				} else {
					wrdb = redis.NewClient(rdb.(*redis.Client).Options())
				}
				t.Cleanup(func() { _ = wrdb.Close() })
				attempts := &attemptCounter{}
				wrdb.AddHook(attempts)
				c := newClient(t, wrdb)
				l := setLatch(t, c, 1, latch.WithWaiterTimeout(300*time.Millisecond))
				out := awaitAsync(ctx, l)
				// A fresh Client's first waiter attempts, subscribes, attempts again, and once
				// more a third of its waiter timeout later, when its heartbeats start.
				require.Eventually(t, func() bool { return attempts.n.Load() >= tc.after }, 10*time.Second,
					time.Millisecond)
				stillWaiting(t, out)
				require.NoError(t, rdb.SetArgs(ctx, l.Key(), "0", redis.SetArgs{KeepTTL: true}).Err())
				began := time.Now()
				require.NoError(t, returned(t, out, 3*time.Second))
				t.Logf("the waiter found the count 0 without a message after %v", time.Since(began))
				assert.Equal(t, tc.end, attempts.n.Load(), "attempts in all")
			})
		})
	}
}

// A latch that expires while a waiter waits: the waiter looks again when the count's time to
// live runs out (its heartbeats are a minute apart), and gets ErrNotSet.
func TestAWaiterWhoseLatchExpiresGetsErrNotSet(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c := newClient(t, rdb)
		l := setLatch(t, c, 1, latch.WithExpiry(time.Second), latch.WithWaiterTimeout(time.Minute))
		began := time.Now()
		err := l.Await(ctx)
		took := time.Since(began)
		assert.ErrorIs(t, err, latch.ErrNotSet)
		assert.Less(t, took, 3*time.Second)
		t.Logf("ErrNotSet after %v (expiry 1s)", took)
		assert.Zero(t, hubWaiters(c))
	})
}

// A latch deleted while a waiter waits (its expiry an hour away): the heartbeat finds the count
// gone, and the waiter gets ErrNotSet.
func TestAWaiterWhoseLatchIsDeletedGetsErrNotSet(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Single(t).Client(t)
	c := newClient(t, rdb)
	l := setLatch(t, c, 1, latch.WithExpiry(time.Hour), latch.WithWaiterTimeout(300*time.Millisecond))
	out := awaitAsync(ctx, l)
	waitWaiters(t, c, 1)
	require.NoError(t, rdb.Del(ctx, l.Key()).Err())
	assert.ErrorIs(t, returned(t, out, 3*time.Second), latch.ErrNotSet)
}

func TestCountDownRefreshesTheExpiryUntilZero(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Single(t).Client(t)
	c := newClient(t, rdb)
	l := setLatch(t, c, 2, latch.WithExpiry(time.Minute))
	assert.InDelta(t, time.Minute, rdb.PTTL(ctx, l.Key()).Val(), float64(5*time.Second), "TTL after TrySetCount")
	require.NoError(t, rdb.PExpire(ctx, l.Key(), 10*time.Second).Err())
	require.NoError(t, l.CountDown(ctx))
	assert.InDelta(t, time.Minute, rdb.PTTL(ctx, l.Key()).Val(), float64(5*time.Second), "TTL after a CountDown")
	require.NoError(t, rdb.PExpire(ctx, l.Key(), 10*time.Second).Err())
	require.NoError(t, l.CountDown(ctx))
	assert.InDelta(t, time.Minute, rdb.PTTL(ctx, l.Key()).Val(), float64(5*time.Second), "TTL of the 0")
	require.NoError(t, rdb.PExpire(ctx, l.Key(), 10*time.Second).Err())
	require.NoError(t, l.CountDown(ctx))
	assert.LessOrEqual(t, rdb.PTTL(ctx, l.Key()).Val(), 10*time.Second, "a CountDown at 0 changed the TTL")
}

// go-redis sends a command again when a broken connection lost its reply: the same CountDown
// (and TrySetCount) run twice counts (sets) once, and answers as its first run did.
func TestACallRunTwiceCountsOnce(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Single(t).Client(t)
	c := newClient(t, rdb)
	l := newLatch(t, c)
	once := l.Key() + ":x:" + redistest.Name(t)
	for i := 0; i < 2; i++ {
		v, err := scripts.LatchSet.Run(ctx, rdb, []string{l.Key(), once + "s"}, 3, 60000).Result()
		require.NoError(t, err)
		assert.Equal(t, []any{int64(1)}, v, "TrySetCount run %d", i+1)
	}
	for i := 0; i < 2; i++ {
		v, err := scripts.LatchCountDown.Run(ctx, rdb, []string{l.Key(), once + "c"}, 60000, "PUBLISH",
			l.Key()+":c").Result()
		require.NoError(t, err)
		assert.Equal(t, []any{int64(2)}, v, "CountDown run %d", i+1)
	}
	n, err := l.Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	redistest.AssertNoKeyWithoutTTL(t, rdb, l.Name(), l.Key())
}

func TestCallsAfterCloseFailWithErrClosed(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, redistest.Single(t).Client(t))
	l := setLatch(t, c, 1)
	require.NoError(t, c.Close())
	_, err := l.TrySetCount(ctx, 1)
	assert.ErrorIs(t, err, aqs.ErrClosed)
	assert.ErrorIs(t, l.CountDown(ctx), aqs.ErrClosed)
	_, err = l.Count(ctx)
	assert.ErrorIs(t, err, aqs.ErrClosed)
	assert.ErrorIs(t, l.Await(ctx), aqs.ErrClosed)
	_, err = l.TryAwait(ctx)
	assert.ErrorIs(t, err, aqs.ErrClosed)
}

// Waiters of one Client that come and go while others count down: every Await returns nil
// once the count is 0, none before.
func TestManyWaitersAndCountersAcrossClients(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		const counters, waiters = 8, 12
		ctx := context.Background()
		cs := []*aqs.Client{newClient(t, rdb), newClient(t, rdb), newClient(t, rdb)}
		l := setLatch(t, cs[0], counters)
		var wg sync.WaitGroup
		errs := make(chan error, waiters)
		for i := 0; i < waiters; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				x := sameLatch(t, cs[i%len(cs)], l)
				if err := x.Await(ctx); err != nil {
					errs <- err
					return
				}
				// Await returned: the count must be 0 now (it never goes up again here).
				if n, err := x.Count(ctx); err != nil || n != 0 {
					errs <- errors.Join(err, errors.New("Await returned above 0"))
				}
			}()
		}
		for i := 0; i < counters; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := sameLatch(t, cs[i%len(cs)], l).CountDown(ctx); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		n, err := l.Count(ctx)
		require.NoError(t, err)
		assert.Zero(t, n)
	})
}
