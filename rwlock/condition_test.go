package rwlock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/redistest"
	"github.com/redaqs/aqs/rwlock"
)

// newCond returns the condition "c" of l.
func newCond(t testing.TB, l *rwlock.Lock) *rwlock.Condition {
	t.Helper()
	c, err := l.NewCondition("c")
	require.NoError(t, err)
	return c
}

// condWaiting waits until n waiters wait on the condition c.
func condWaiting(t *testing.T, rdb redis.UniversalClient, c *rwlock.Condition, n int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		got, err := rdb.ZCard(context.Background(), c.Keys()[1]).Result()
		return err == nil && got == n
	}, 10*time.Second, time.Millisecond, "waiters on the condition")
}

// waitResult is what a Wait returned.
type waitResult struct {
	held context.Context
	err  error
}

// startWait takes l through its own Client and waits on its condition in a goroutine.
func startWait(t *testing.T, ctx context.Context, l *rwlock.Lock, c *rwlock.Condition) (old context.Context, out chan waitResult) {
	t.Helper()
	held, err := l.Lock(ctx)
	require.NoError(t, err)
	out = make(chan waitResult, 1)
	go func() {
		h, err := c.Wait(held)
		out <- waitResult{h, err}
	}()
	return held, out
}

// Wait gives the lock up and waits; a Signal gives it back, as a new hold.
func TestConditionWaitGivesTheLockUpUntilSignalled(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		l := newLock(t, newClient(t, rdb))
		c := newCond(t, l)
		old, out := startWait(t, ctx, l, c)
		condWaiting(t, rdb, c, 1)
		<-old.Done()
		assert.ErrorIs(t, context.Cause(old), aqs.ErrReleased)
		locked, err := l.IsLocked(ctx)
		require.NoError(t, err)
		assert.False(t, locked, "the lock while its holder waits on the condition")

		// Another holder comes and goes; the waiter stays.
		other, err := l.Lock(ctx)
		require.NoError(t, err)
		ok, err := c.Signal(ctx) // signalled under the lock: it queues behind this holder
		require.NoError(t, err)
		require.True(t, ok)
		select {
		case r := <-out:
			t.Fatalf("Wait returned (%v) while the lock was held by another", r.err)
		default:
		}
		require.NoError(t, l.Unlock(other))
		r := <-out
		require.NoError(t, r.err)
		require.NoError(t, r.held.Err())
		require.NoError(t, l.Unlock(r.held))

		ok, err = c.Signal(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "a Signal with nobody waiting")
		assertCondFree(t, rdb, l, c)
	})
}

// assertCondFree checks that the lock is free and nobody waits, on the lock or the condition.
func assertCondFree(t *testing.T, rdb redis.UniversalClient, l *rwlock.Lock, c *rwlock.Condition) {
	t.Helper()
	ctx := context.Background()
	locked, err := l.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked)
	for _, k := range []string{l.Keys()[4], c.Keys()[1]} {
		n, err := rdb.ZCard(ctx, k).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "live waiters in %s", k)
	}
}

// Waiters on two Clients are signalled in the order they began to wait, by Signal and by
// SignalAll, and take the lock in that order.
func TestConditionSignalsInWaitOrder(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	ctx := context.Background()
	a := newLock(t, newClient(t, rdb))
	b, err := rwlock.New(newClient(t, rdb), a.Name())
	require.NoError(t, err)
	ca, cb := newCond(t, a), newCond(t, b)
	for _, all := range []bool{false, true} {
		var outs []chan waitResult
		var locks []*rwlock.Lock
		for i := range 4 {
			l, c := a, ca
			if i%2 == 1 {
				l, c = b, cb
			}
			_, out := startWait(t, ctx, l, c)
			condWaiting(t, rdb, ca, int64(i+1))
			outs, locks = append(outs, out), append(locks, l)
		}
		// The signaller holds the lock, so that every waiter queues before any takes it.
		held, err := a.Lock(ctx)
		require.NoError(t, err)
		if all {
			n, err := ca.SignalAll(ctx)
			require.NoError(t, err)
			require.Equal(t, 4, n)
		} else {
			for range 4 {
				ok, err := cb.Signal(ctx)
				require.NoError(t, err)
				require.True(t, ok)
			}
		}
		require.NoError(t, a.Unlock(held))
		for i, out := range outs {
			r := <-out // the lock passes in order: each returns only after the one before unlocks
			require.NoError(t, r.err, "waiter %d", i)
			for j := i + 1; j < len(outs); j++ {
				select {
				case r := <-outs[j]:
					t.Fatalf("waiter %d returned (%v) while waiter %d held the lock", j, r.err, i)
				default:
				}
			}
			require.NoError(t, locks[i].Unlock(r.held))
		}
		assertCondFree(t, rdb, a, ca)
	}
}

// No Signal is lost: consumers on two Clients wait for stock under the lock, a producer adds
// one item at a time and signals; every item is taken once and every consumer finishes.
func TestConditionLosesNoSignal(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		a := newLock(t, newClient(t, rdb))
		b, err := rwlock.New(newClient(t, rdb), a.Name())
		require.NoError(t, err)
		const consumers, each = 4, 15
		var stock, taken atomic.Int64 // guarded by the lock; atomics for the race detector
		var wg sync.WaitGroup
		for i := range consumers {
			l := a
			if i%2 == 1 {
				l = b
			}
			c := newCond(t, l)
			wg.Go(func() {
				for range each {
					held, err := l.Lock(ctx)
					if !assert.NoError(t, err) {
						return
					}
					for stock.Load() == 0 {
						if held, err = c.Wait(held); !assert.NoError(t, err) {
							return
						}
					}
					stock.Add(-1)
					taken.Add(1)
					assert.NoError(t, l.Unlock(held))
				}
			})
		}
		c := newCond(t, a)
		for range consumers * each {
			held, err := a.Lock(ctx)
			require.NoError(t, err)
			stock.Add(1)
			_, err = c.Signal(ctx)
			require.NoError(t, err)
			require.NoError(t, a.Unlock(held))
		}
		wg.Wait()
		assert.Equal(t, int64(consumers*each), taken.Load())
		assert.Zero(t, stock.Load())
		assertCondFree(t, rdb, a, c)
	})
}

// A Wait whose context ends leaves nothing: not on the condition, not on the lock's queue, the
// lock free; a Wait without a hold fails and changes nothing.
func TestConditionWaitEndsWithItsContext(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := newLock(t, newClient(t, rdb))
		c := newCond(t, l)
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		defer cancel()
		held, err := l.Lock(ctx)
		require.NoError(t, err)
		began := time.Now()
		_, err = c.Wait(held)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, time.Since(began), 2*time.Second)
		assertCondFree(t, rdb, l, c)

		_, err = c.Wait(context.Background())
		require.ErrorIs(t, err, aqs.ErrNotOwner)
		_, err = c.Wait(held)
		require.ErrorIs(t, err, aqs.ErrNotOwner, "a hold given up already")
		_, err = l.NewCondition("")
		require.ErrorIs(t, err, aqs.ErrInvalidArgument)
	})
}

// A signalled writer queues behind the readers queued before the Signal, and readers queued
// after it wait for it.
func TestConditionSignalledWriterQueuesBehindReaders(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	ctx := context.Background()
	l := newLock(t, newClient(t, rdb))
	c := newCond(t, l)
	_, out := startWait(t, ctx, l, c)
	condWaiting(t, rdb, c, 1)
	w, err := l.Lock(ctx) // another writer holds
	require.NoError(t, err)
	reader := make(chan context.Context, 1)
	go func() {
		h, err := l.RLock(ctx)
		assert.NoError(t, err)
		reader <- h
	}()
	require.Eventually(t, func() bool { return rdb.ZCard(ctx, l.Keys()[4]).Val() == 1 }, 10*time.Second, time.Millisecond)
	ok, err := c.Signal(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, l.Unlock(w))
	r := <-reader // the reader queued first: it reads first
	select {
	case got := <-out:
		t.Fatalf("the signalled writer returned (%v) while a reader queued before it holds", got.err)
	default:
	}
	require.NoError(t, l.RUnlock(r))
	got := <-out
	require.NoError(t, got.err)
	require.NoError(t, l.Unlock(got.held))
	assertCondFree(t, rdb, l, c)
}
