package chaos_test

import (
	"context"
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

// Lost replies of the Condition's scripts (see lostreply_test.go for the proxy's part).

// condWaiters returns how many live waiters the condition has.
func condWaiters(t *testing.T, rdb redis.UniversalClient, c *fair.Condition) int64 {
	t.Helper()
	n, err := rdb.ZCard(context.Background(), c.Keys()[1]).Result()
	require.NoError(t, err)
	return n
}

// condWait takes l and waits on c in a goroutine, once the condition has want-1 waiters, and
// returns where the Wait's result goes.
func condWait(t *testing.T, rdb redis.UniversalClient, l *fair.Lock, c *fair.Condition, want int64) chan error {
	t.Helper()
	held, err := l.Lock(context.Background())
	require.NoError(t, err)
	out := make(chan error, 1)
	go func() {
		h, err := c.Wait(held)
		if err == nil {
			err = l.Unlock(h)
		}
		out <- err
	}()
	require.Eventually(t, func() bool { return condWaiters(t, rdb, c) == want }, 10*time.Second, time.Millisecond)
	return out
}

// A Wait whose release-and-wait script ran but lost its reply: the release is sent again (it is
// never sent again by go-redis), finds the hold gone by its own first run, and the waiter then
// finds itself on the condition: it waits there once, not twice, and a Signal gives it the
// lock back.
func TestConditionWaitWhoseReplyIsLostWaitsOnce(t *testing.T) {
	ctx := context.Background()
	srv, px, c := behindAProxy(t, &redis.Options{})
	rdb := srv.Client(t)
	name := redistest.Name(t)
	l, err := fair.New(c, name)
	require.NoError(t, err)
	cond, err := l.NewCondition("c")
	require.NoError(t, err)
	defer rdb.Del(ctx, l.Key())

	px.DropReplyTo(scripts.CondWait.SHA())
	out := condWait(t, rdb, l, cond, 1)
	// The script's effect is seen in Redis before the proxy has dropped its reply.
	require.Eventually(t, func() bool { return px.Dropped() == 1 }, 10*time.Second, time.Millisecond,
		"the wait's reply was dropped")
	n, err := rdb.LLen(ctx, cond.Keys()[0]).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "one entry on the condition")

	other, err := aqs.New(ctx, rdb)
	require.NoError(t, err)
	defer other.Close()
	sig, err := fair.New(other, name)
	require.NoError(t, err)
	sc, err := sig.NewCondition("c")
	require.NoError(t, err)
	ok, err := sc.Signal(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	select {
	case err := <-out:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the signalled waiter did not return")
	}
	locked, err := l.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked)
	t.Logf("SUMMARY condition lost replies: a Wait's release-and-wait lost its reply; it waited once and a Signal woke it")
}

// A Signal whose script ran but lost its reply takes effect all the same: with go-redis's
// retries the script runs again and moves the next waiter too (an extra wake-up, which the
// waiters' loop on their predicate absorbs, never a lost one); without them the Signal fails,
// and the waiter it moved is on the lock's queue regardless.
func TestConditionSignalWhoseReplyIsLostIsNotLost(t *testing.T) {
	for _, retries := range []int{0, -1} {
		label := map[int]string{0: "go-redis retries", -1: "no retries"}[retries]
		t.Run(label, func(t *testing.T) {
			ctx := context.Background()
			srv, px, c := behindAProxy(t, &redis.Options{MaxRetries: retries})
			rdb := srv.Client(t)
			direct, err := aqs.New(ctx, rdb)
			require.NoError(t, err)
			defer direct.Close()
			name := redistest.Name(t)
			l, err := fair.New(direct, name)
			require.NoError(t, err)
			cond, err := l.NewCondition("c")
			require.NoError(t, err)
			defer rdb.Del(ctx, l.Key())
			var outs []chan error
			for i := range 3 {
				outs = append(outs, condWait(t, rdb, l, cond, int64(i+1)))
			}
			sig, err := fair.New(c, name)
			require.NoError(t, err)
			sc, err := sig.NewCondition("c")
			require.NoError(t, err)

			px.DropReplyTo(scripts.CondSignal.SHA())
			ok, err := sc.Signal(ctx)
			require.Equal(t, 1, px.Dropped(), "the signal's reply was dropped")
			left := condWaiters(t, rdb, cond)
			if retries == 0 {
				require.NoError(t, err)
				assert.True(t, ok)
				assert.EqualValues(t, 1, left, "the first run and go-redis's second moved one waiter each")
			} else {
				require.Error(t, err, "the reply was lost, and nothing sent it again")
				assert.EqualValues(t, 2, left, "the lost Signal moved a waiter")
			}
			for range left {
				ok, err := cond.Signal(ctx)
				require.NoError(t, err)
				require.True(t, ok)
			}
			for i, out := range outs {
				select {
				case err := <-out:
					require.NoError(t, err, "waiter %d", i)
				case <-time.After(10 * time.Second):
					t.Fatalf("waiter %d did not return", i)
				}
			}
			t.Logf("SUMMARY condition lost replies (%s): a Signal lost its reply; %d of 3 waiters moved by it", label, 3-left)
		})
	}
}
