package semaphore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/semaphore"
)

// countCalls counts the commands a go-redis client sends.
type countCalls struct{ n atomic.Int64 }

func (c *countCalls) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *countCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *countCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// counted returns a second go-redis client to rdb's server(s), and the count of what it sends.
func counted(t *testing.T, rdb redis.UniversalClient) (redis.UniversalClient, *countCalls) {
	var r redis.UniversalClient
	switch x := rdb.(type) {
	case *redis.Client:
		r = redis.NewClient(x.Options())
	case *redis.ClusterClient:
		r = redis.NewClusterClient(x.Options())
	default:
		t.Fatalf("a go-redis client of type %T", rdb)
	}
	t.Cleanup(func() { _ = r.Close() })
	calls := &countCalls{}
	r.AddHook(calls)
	return r, calls
}

// An acquire or release of 0 permits succeeds at once, as in golang.org/x/sync/semaphore, on a
// semaphore whose permits are all taken and whose queue has a waiter, and on one never set: it
// sends nothing, waits for nothing, and changes nothing.
func TestZeroPermitsSucceedAtOnce(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c := newClient(t, rdb)
		s := newSem(t, c, 2)
		l := newLeased(t, c, 2)
		require.NoError(t, s.Acquire(ctx, 2))
		p, err := l.Acquire(ctx, 2)
		require.NoError(t, err)
		waitCtx, stop := context.WithCancel(ctx)
		defer stop()
		waited := make(chan error, 2)
		go func() { waited <- s.Acquire(waitCtx, 1) }()
		go func() { _, err := l.Acquire(waitCtx, 1); waited <- err }()
		waitQueued(t, rdb, s.Keys()[1], 1)
		waitQueued(t, rdb, l.Keys()[1], 1)
		// Their permits, queues and the leased permits' counts; not the deadlines of the
		// queued waiters or the leases, which their heartbeats and the watchdog move.
		ks, kl := s.Keys(), l.Keys()
		stS, stL := inTake(t, rdb, ks[0], ks[1]), inTake(t, rdb, kl[0], kl[1], kl[4])

		// The calls of 0 permits go through a second Client, which holds nothing and has
		// nobody waiting: nothing else of it sends commands after aqs.New.
		rdb2, calls := counted(t, rdb)
		c2 := newClient(t, rdb2)
		sent := calls.n.Load()
		us, ul := inUnset(t, c2)
		s2, err := semaphore.New(c2, s.Name())
		require.NoError(t, err)
		l2, err := semaphore.NewLeased(c2, l.Name())
		require.NoError(t, err)
		for _, x := range []struct {
			name string
			s    *semaphore.Semaphore
			l    *semaphore.Leased
		}{{"unset", us, ul}, {"taken", s2, l2}} {
			t.Run(x.name, func(t *testing.T) {
				require.NoError(t, x.s.Acquire(ctx, 0))
				ok, err := x.s.TryAcquire(ctx, 0)
				require.NoError(t, err)
				require.True(t, ok)
				ok, err = x.s.TryAcquire(ctx, 0, aqs.WithWait(time.Minute))
				require.NoError(t, err)
				require.True(t, ok)
				require.NoError(t, x.s.Release(ctx, 0))

				z, err := x.l.Acquire(ctx, 0, aqs.WithLease(time.Minute))
				require.NoError(t, err)
				assert.Equal(t, 0, z.Permits())
				assert.Empty(t, z.ID())
				require.NoError(t, z.Context().Err())
				require.NoError(t, x.l.SetLease(ctx, z, 0))
				require.NoError(t, x.l.ReleasePart(ctx, z, 0))
				require.ErrorIs(t, x.l.ReleasePart(ctx, z, 1), semaphore.ErrOverRelease)
				require.NoError(t, x.l.Release(ctx, z))
				require.ErrorIs(t, context.Cause(z.Context()), aqs.ErrReleased)
				require.ErrorIs(t, x.l.Release(ctx, z), aqs.ErrNotOwner, "a second release")

				z, ok, err = x.l.TryAcquire(ctx, 0)
				require.NoError(t, err)
				require.True(t, ok)
				require.NoError(t, x.l.Release(ctx, z))
			})
		}
		require.NoError(t, l.ReleasePart(ctx, p, 0), "0 of a permit of 2") // a check of p alone
		inPermitHolds(t, p, 2)

		cancelled, cancel := context.WithCancelCause(ctx)
		why := errors.New("gone")
		cancel(why)
		require.ErrorIs(t, s2.Acquire(cancelled, 0), why, "a done context still ends an acquire")
		_, err = l2.Acquire(cancelled, 0)
		require.ErrorIs(t, err, why)
		require.NoError(t, s2.Release(cancelled, 0), "a release does not use ctx's cancellation")
		assert.Equal(t, sent, calls.n.Load(), "commands sent by calls of 0 permits")

		stS.same(t, "the counting semaphore")
		stL.same(t, "the leased semaphore")
		inNoKeys(t, rdb, inAll(us.Keys(), ul.Keys())...)
		select {
		case err := <-waited:
			t.Fatalf("a waiter for 1 permit returned (%v) while all were taken", err)
		default:
		}
		stop()
		require.ErrorIs(t, <-waited, context.Canceled)
		require.ErrorIs(t, <-waited, context.Canceled)
		require.NoError(t, s.Release(ctx, 2))
		require.NoError(t, l.Release(ctx, p))
	})
}
