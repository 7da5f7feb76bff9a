// Package condtest is the behaviour suite of a lock's conditions, run by the tests of every
// package whose lock has them (fair, reentrant, rwlock's write side), against real Redis.
package condtest

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
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// Lock is the exclusive side of a lock, as the suite uses it.
type Lock interface {
	Lock(ctx context.Context, opts ...aqs.LockOption) (context.Context, error)
	Unlock(held context.Context) error
	IsLocked(ctx context.Context) (bool, error)
	Name() string
}

// Cond is a condition of a Lock.
type Cond interface {
	Wait(held context.Context) (context.Context, error)
	Signal(ctx context.Context) (bool, error)
	SignalAll(ctx context.Context) (int, error)
	Keys() []string
}

// Kind makes a package's locks and conditions for the suite.
type Kind struct {
	// New returns the lock of the given name through c.
	New func(c *aqs.Client, name string) (Lock, error)
	// Cond returns l's condition of the given name.
	Cond func(l Lock, name string) (Cond, error)
	// Deadlines returns the key of l's queue deadlines (its live waiters).
	Deadlines func(l Lock) string
}

// Run runs the suite.
func Run(t *testing.T, k Kind) {
	t.Run("WaitGivesTheLockUpUntilSignalled", func(t *testing.T) { topologies(t, k, waitGivesTheLockUp) })
	t.Run("SignalsInWaitOrder", func(t *testing.T) { signalsInWaitOrder(t, k, redistest.Single(t).Client(t)) })
	t.Run("LosesNoSignal", func(t *testing.T) { topologies(t, k, losesNoSignal) })
	t.Run("WaitEndsWithItsContext", func(t *testing.T) { topologies(t, k, waitEndsWithItsContext) })
}

func topologies(t *testing.T, k Kind, f func(t *testing.T, k Kind, rdb redis.UniversalClient)) {
	t.Run("single", func(t *testing.T) { f(t, k, redistest.Single(t).Client(t)) })
	t.Run("cluster", func(t *testing.T) { f(t, k, redistest.Cluster(t).Client(t)) })
}

// Client returns an aqs Client on rdb, closed at the end of the test.
func Client(t testing.TB, rdb redis.UniversalClient) *aqs.Client {
	t.Helper()
	c, err := aqs.New(context.Background(), rdb)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Locks returns n locks of one new name, each through a Client of its own, and the condition
// "c" of each.
func Locks(t testing.TB, k Kind, rdb redis.UniversalClient, n int) ([]Lock, []Cond) {
	t.Helper()
	name := redistest.Name(t)
	var ls []Lock
	var cs []Cond
	for range n {
		l, err := k.New(Client(t, rdb), name)
		require.NoError(t, err)
		c, err := k.Cond(l, "c")
		require.NoError(t, err)
		ls, cs = append(ls, l), append(cs, c)
	}
	return ls, cs
}

// Waiting waits until n waiters wait on the condition c.
func Waiting(t testing.TB, rdb redis.UniversalClient, c Cond, n int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		got, err := rdb.ZCard(context.Background(), c.Keys()[1]).Result()
		return err == nil && got == n
	}, 10*time.Second, time.Millisecond, "waiters on the condition")
}

// Result is what a Wait returned.
type Result struct {
	Held context.Context
	Err  error
}

// StartWait takes l and waits on c in a goroutine; it returns the held context given up.
func StartWait(t testing.TB, ctx context.Context, l Lock, c Cond) (old context.Context, out chan Result) {
	t.Helper()
	held, err := l.Lock(ctx)
	require.NoError(t, err)
	out = make(chan Result, 1)
	go func() {
		h, err := c.Wait(held)
		out <- Result{h, err}
	}()
	return held, out
}

// Free checks that the lock is free and nobody waits, on the lock or the condition.
func Free(t testing.TB, k Kind, rdb redis.UniversalClient, l Lock, c Cond) {
	t.Helper()
	ctx := context.Background()
	locked, err := l.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked)
	for _, key := range []string{k.Deadlines(l), c.Keys()[1]} {
		n, err := rdb.ZCard(ctx, key).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "live waiters in %s", key)
	}
}

// Wait gives the lock up and waits; a Signal gives it back, as a new hold.
func waitGivesTheLockUp(t *testing.T, k Kind, rdb redis.UniversalClient) {
	ctx := context.Background()
	ls, cs := Locks(t, k, rdb, 1)
	l, c := ls[0], cs[0]
	old, out := StartWait(t, ctx, l, c)
	Waiting(t, rdb, c, 1)
	<-old.Done()
	assert.ErrorIs(t, context.Cause(old), aqs.ErrReleased)
	locked, err := l.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked, "the lock while its holder waits on the condition")

	other, err := l.Lock(ctx)
	require.NoError(t, err)
	ok, err := c.Signal(ctx) // signalled under the lock: it queues behind this holder
	require.NoError(t, err)
	require.True(t, ok)
	select {
	case r := <-out:
		t.Fatalf("Wait returned (%v) while the lock was held by another", r.Err)
	default:
	}
	require.NoError(t, l.Unlock(other))
	r := <-out
	require.NoError(t, r.Err)
	require.NoError(t, r.Held.Err())
	require.NoError(t, l.Unlock(r.Held))

	ok, err = c.Signal(ctx)
	require.NoError(t, err)
	assert.False(t, ok, "a Signal with nobody waiting")
	Free(t, k, rdb, l, c)
}

// Waiters on two Clients are signalled in the order they began to wait, by Signal and by
// SignalAll, and take the lock in that order.
func signalsInWaitOrder(t *testing.T, k Kind, rdb redis.UniversalClient) {
	ctx := context.Background()
	ls, cs := Locks(t, k, rdb, 2)
	for _, all := range []bool{false, true} {
		var outs []chan Result
		var holders []Lock
		for i := range 4 {
			_, out := StartWait(t, ctx, ls[i%2], cs[i%2])
			Waiting(t, rdb, cs[0], int64(i+1))
			outs, holders = append(outs, out), append(holders, ls[i%2])
		}
		// The signaller holds the lock, so that every waiter queues before any takes it.
		held, err := ls[0].Lock(ctx)
		require.NoError(t, err)
		if all {
			n, err := cs[0].SignalAll(ctx)
			require.NoError(t, err)
			require.Equal(t, 4, n)
		} else {
			for range 4 {
				ok, err := cs[1].Signal(ctx)
				require.NoError(t, err)
				require.True(t, ok)
			}
		}
		require.NoError(t, ls[0].Unlock(held))
		for i, out := range outs {
			r := <-out // the lock passes in order: each returns only after the one before unlocks
			require.NoError(t, r.Err, "waiter %d", i)
			for j := i + 1; j < len(outs); j++ {
				select {
				case r := <-outs[j]:
					t.Fatalf("waiter %d returned (%v) while waiter %d held the lock", j, r.Err, i)
				default:
				}
			}
			require.NoError(t, holders[i].Unlock(r.Held))
		}
		Free(t, k, rdb, ls[0], cs[0])
	}
}

// No Signal is lost: consumers on two Clients wait for stock under the lock, a producer adds
// one item at a time and signals; every item is taken once and every consumer finishes.
func losesNoSignal(t *testing.T, k Kind, rdb redis.UniversalClient) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ls, cs := Locks(t, k, rdb, 2)
	const consumers, each = 4, 15
	var stock, taken atomic.Int64 // guarded by the lock; atomics for the race detector
	var wg sync.WaitGroup
	for i := range consumers {
		l, c := ls[i%2], cs[i%2]
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
	for range consumers * each {
		held, err := ls[0].Lock(ctx)
		require.NoError(t, err)
		stock.Add(1)
		_, err = cs[0].Signal(ctx)
		require.NoError(t, err)
		require.NoError(t, ls[0].Unlock(held))
	}
	wg.Wait()
	assert.Equal(t, int64(consumers*each), taken.Load())
	assert.Zero(t, stock.Load())
	Free(t, k, rdb, ls[0], cs[0])
}

// A Wait whose context ends leaves nothing: not on the condition, not on the lock's queue, the
// lock free; a Wait without a hold fails and changes nothing.
func waitEndsWithItsContext(t *testing.T, k Kind, rdb redis.UniversalClient) {
	ls, cs := Locks(t, k, rdb, 1)
	l, c := ls[0], cs[0]
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	held, err := l.Lock(ctx)
	require.NoError(t, err)
	began := time.Now()
	_, err = c.Wait(held)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(began), 2*time.Second)
	Free(t, k, rdb, l, c)

	_, err = c.Wait(context.Background())
	require.ErrorIs(t, err, aqs.ErrNotOwner)
	_, err = c.Wait(held)
	require.ErrorIs(t, err, aqs.ErrNotOwner, "a hold given up already")
	_, err = k.Cond(l, "")
	require.ErrorIs(t, err, aqs.ErrInvalidArgument)
}
