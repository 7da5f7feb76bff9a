package failovertest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/reentrant"
	"github.com/redaqs/aqs/rwlock"
	"github.com/redaqs/aqs/semaphore"
)

// snapshot is the keys of a primitive as DUMP saw them, to be put back as a failover would:
// the promoted replica serves the state of a moment before.
type snapshot map[string]struct {
	dump string
	pttl time.Duration // 0: no TTL
}

func takeSnapshot(t *testing.T, rdb redis.UniversalClient, keys []string) snapshot {
	t.Helper()
	ctx := context.Background()
	s := snapshot{}
	for _, k := range keys {
		d, err := rdb.Dump(ctx, k).Result()
		if err == redis.Nil {
			continue
		}
		require.NoError(t, err)
		ttl, err := rdb.PTTL(ctx, k).Result()
		require.NoError(t, err)
		s[k] = struct {
			dump string
			pttl time.Duration
		}{d, max(ttl, 0)}
	}
	return s
}

// restore puts the keys back as they were, the ones that did not exist deleted.
func (s snapshot) restore(t *testing.T, rdb redis.UniversalClient, keys []string) {
	t.Helper()
	ctx := context.Background()
	for _, k := range keys {
		if v, ok := s[k]; ok {
			require.NoError(t, rdb.RestoreReplace(ctx, k, v.pttl, v.dump).Err())
		} else {
			require.NoError(t, rdb.Del(ctx, k).Err())
		}
	}
}

// ghostPrimitive is one primitive under the ghost test: holder takes it (and returns its
// release), waiter waits for it.
type ghostPrimitive struct {
	name   string
	keys   []string
	holder func(ctx context.Context) (release func() error, err error)
	waiter func(ctx context.Context) (release func() error, err error)
}

// A failover can bring back the queue entry of a call that ended (see internal/core/orphan.go):
// here the queue is put back as it was while the waiter's first call waited, after that call
// gave up. When the holder releases, the lock (the permits) is handed to that entry; its
// Client, which no longer uses the hold id, gives it back at once, and the same Client's next
// call, queued behind it, has it within moments: not at the entry's liveness deadline, a
// 30s waiter timeout later.
func TestAGrantToAHoldItsClientNoLongerUsesIsGivenBack(t *testing.T) {
	t.Parallel()
	t.Run("message", func(t *testing.T) { ghosts(t, false) })
	t.Run("message lost", func(t *testing.T) { ghosts(t, true) })
}

func ghosts(t *testing.T, lose bool) {
	const waiterTimeout = 30 * time.Second
	rdb := redistest.NewServer(t).Client(t) // its pub/sub clients are killed
	hc, wc := newClient(t, rdb), newClient(t, rdb)
	for _, p := range []func(t *testing.T) ghostPrimitive{
		func(t *testing.T) ghostPrimitive {
			name := redistest.Name(t)
			hl, err := reentrant.New(hc, name)
			require.NoError(t, err)
			wl, err := reentrant.New(wc, name, reentrant.WithWaiterTimeout(waiterTimeout))
			require.NoError(t, err)
			return ghostPrimitive{"reentrant", hl.Keys(), lockOf(hl.Lock, hl.Unlock), lockOf(wl.Lock, wl.Unlock)}
		},
		func(t *testing.T) ghostPrimitive {
			name := redistest.Name(t)
			hl, err := fair.New(hc, name)
			require.NoError(t, err)
			wl, err := fair.New(wc, name, fair.WithWaiterTimeout(waiterTimeout))
			require.NoError(t, err)
			return ghostPrimitive{"fair", hl.Keys(), lockOf(hl.Lock, hl.Unlock), lockOf(wl.Lock, wl.Unlock)}
		},
		func(t *testing.T) ghostPrimitive {
			name := redistest.Name(t)
			hl, err := rwlock.New(hc, name)
			require.NoError(t, err)
			wl, err := rwlock.New(wc, name, rwlock.WithWaiterTimeout(waiterTimeout))
			require.NoError(t, err)
			// Writers: readers behind a read grant would be granted with it.
			return ghostPrimitive{"rwlock", hl.Keys(), func(ctx context.Context) (func() error, error) {
				held, err := hl.RLock(ctx)
				return func() error { return hl.RUnlock(held) }, err
			}, lockOf(wl.Lock, wl.Unlock)}
		},
		func(t *testing.T) ghostPrimitive {
			name := redistest.Name(t)
			hs, err := semaphore.New(hc, name)
			require.NoError(t, err)
			_, err = hs.TrySetPermits(context.Background(), 1)
			require.NoError(t, err)
			ws, err := semaphore.New(wc, name, semaphore.WithWaiterTimeout(waiterTimeout))
			require.NoError(t, err)
			take := func(s *semaphore.Semaphore) func(ctx context.Context) (func() error, error) {
				return func(ctx context.Context) (func() error, error) {
					err := s.Acquire(ctx, 1)
					return func() error { return s.Release(context.Background(), 1) }, err
				}
			}
			return ghostPrimitive{"counting", hs.Keys(), take(hs), take(ws)}
		},
		func(t *testing.T) ghostPrimitive {
			name := redistest.Name(t)
			hs, err := semaphore.NewLeased(hc, name)
			require.NoError(t, err)
			_, err = hs.TrySetPermits(context.Background(), 1)
			require.NoError(t, err)
			ws, err := semaphore.NewLeased(wc, name, semaphore.WithWaiterTimeout(waiterTimeout))
			require.NoError(t, err)
			take := func(s *semaphore.Leased) func(ctx context.Context) (func() error, error) {
				return func(ctx context.Context) (func() error, error) {
					p, err := s.Acquire(ctx, 1)
					if err != nil {
						return nil, err
					}
					return func() error { return s.Release(context.Background(), p) }, nil
				}
			}
			return ghostPrimitive{"leased", hs.Keys(), take(hs), take(ws)}
		},
	} {
		t.Run("", func(t *testing.T) {
			ctx := context.Background()
			g := p(t)
			t.Log(g.name)
			release, err := g.holder(ctx)
			require.NoError(t, err)

			first, cancel := context.WithCancel(ctx)
			gone := make(chan error, 1)
			go func() {
				_, err := g.waiter(first)
				gone <- err
			}()
			d := g.keys[0] + ":d"
			require.Eventually(t, func() bool { return rdb.ZCard(ctx, d).Val() == 1 }, 10*time.Second, time.Millisecond)
			before := takeSnapshot(t, rdb, g.keys)
			cancel()
			require.ErrorIs(t, <-gone, context.Canceled)
			require.Zero(t, rdb.ZCard(ctx, d).Val(), "the first call left the queue")
			before.restore(t, rdb, g.keys) // the failover: the entry of the call that ended is back

			got := make(chan error, 1)
			start := time.Now()
			go func() {
				ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				release, err := g.waiter(ctx)
				if err == nil {
					err = release()
				}
				got <- err
			}()
			require.Eventually(t, func() bool { return rdb.ZCard(ctx, d).Val() == 2 }, 10*time.Second, time.Millisecond)
			if lose {
				// The grant's message is lost: nobody listens when the release publishes it.
				// The Client finds the grant when it subscribes again, by looking at who
				// holds the primitive.
				require.NoError(t, rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err())
			}
			require.NoError(t, release())
			require.NoError(t, <-got, "the waiter behind the entry nobody waits for")
			took := time.Since(start)
			t.Logf("%s (message lost: %v): the next waiter had it %v after it queued", g.name, lose, took)
			assert.Less(t, took, 3*time.Second)
		})
	}
}

// lockOf adapts a lock's Lock and Unlock.
func lockOf(lock func(context.Context, ...aqs.LockOption) (context.Context, error),
	unlock func(context.Context) error) func(ctx context.Context) (func() error, error) {
	return func(ctx context.Context) (func() error, error) {
		held, err := lock(ctx)
		return func() error { return unlock(held) }, err
	}
}
