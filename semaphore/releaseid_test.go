package semaphore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/semaphore"
)

// Releases of a leased permit by its id (Leased.ReleaseID, ReleasePartID), from a Client other
// than the holder's (another process, as far as Redis can tell) and from the holder's own.

// ridWatchdog is the holder Client's watchdog timeout in these tests: it checks its permits
// every third of it, which bounds when it learns of a release by id made elsewhere.
const ridWatchdog = 600 * time.Millisecond

// ridLearns bounds the time from a release by id made elsewhere to the end of the holder's
// permit context: the next check, a third of ridWatchdog, and room for a loaded machine under
// -race.
const ridLearns = ridWatchdog/3 + 3*time.Second

// ridOther returns the semaphore l on a Client of its own on rdb.
func ridOther(t *testing.T, rdb redis.UniversalClient, l *semaphore.Leased) *semaphore.Leased {
	t.Helper()
	o, err := semaphore.NewLeased(newClient(t, rdb), l.Name())
	require.NoError(t, err)
	return o
}

// ridEnded waits until ctx is done, and checks that its cause is aqs.ErrReleased.
func ridEnded(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(ridLearns):
		t.Fatalf("the holder's permit context did not end within %v of the release by id", ridLearns)
	}
	cause := context.Cause(ctx)
	assert.ErrorIs(t, cause, aqs.ErrReleased)
	assert.NotErrorIs(t, cause, aqs.ErrLockLost)
}

func TestReleaseIDFromAnotherClient(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		holder := newLeased(t, newClient(t, rdb, aqs.WithWatchdogTimeout(ridWatchdog)), 3)
		other := ridOther(t, rdb, holder)

		t.Run("watchdog lease", func(t *testing.T) {
			p, err := holder.Acquire(ctx, 2)
			require.NoError(t, err)
			require.NoError(t, other.ReleaseID(ctx, p.ID()))
			assert.Equal(t, 3, inAvail(t, holder), "the permits came back at once")
			ridEnded(t, p.Context())
			err = holder.Release(ctx, p)
			assert.ErrorIs(t, err, semaphore.ErrPermitReleased)
			assert.ErrorIs(t, err, aqs.ErrNotOwner)
			assert.NotErrorIs(t, err, semaphore.ErrPermitExpired)
			assert.Equal(t, 3, inAvail(t, holder), "the holder's release gave back nothing")
			// Released already (ErrPermitReleased while the mark lives: TestInputReleaseIDBadInput).
			assert.ErrorIs(t, other.ReleaseID(ctx, p.ID()), aqs.ErrNotOwner)
			assert.Equal(t, 3, inAvail(t, holder))
		})

		t.Run("fixed lease", func(t *testing.T) {
			// A fixed lease is only checked, every third of the watchdog timeout: the check
			// finds the mark.
			p, err := holder.Acquire(ctx, 1, aqs.WithLease(time.Minute))
			require.NoError(t, err)
			require.NoError(t, other.ReleaseID(ctx, p.ID()))
			ridEnded(t, p.Context())
			assert.ErrorIs(t, holder.SetLease(ctx, p, time.Minute), aqs.ErrNotOwner,
				"SetLease of a permit whose context ended")
			assert.ErrorIs(t, holder.Release(ctx, p), semaphore.ErrPermitReleased)
			assert.Equal(t, 3, inAvail(t, holder))
		})

		t.Run("the holder releases before it learns", func(t *testing.T) {
			// A Client whose watchdog does not look for a minute: its Release finds the mark.
			slow := newLeased(t, newClient(t, rdb, aqs.WithWatchdogTimeout(3*time.Minute)), 3)
			other := ridOther(t, rdb, slow)
			p, err := slow.Acquire(ctx, 1)
			require.NoError(t, err)
			q, err := slow.Acquire(ctx, 2)
			require.NoError(t, err)
			require.NoError(t, other.ReleaseID(ctx, p.ID()))
			require.NoError(t, other.ReleaseID(ctx, q.ID()))
			require.NoError(t, p.Context().Err(), "this Client has not checked yet")
			err = slow.Release(ctx, p)
			assert.ErrorIs(t, err, semaphore.ErrPermitReleased)
			assert.ErrorIs(t, err, aqs.ErrNotOwner)
			// A partial release and SetLease find it as well, and end the permit's context with
			// aqs.ErrReleased.
			err = slow.SetLease(ctx, q, time.Minute)
			assert.ErrorIs(t, err, semaphore.ErrPermitReleased)
			assert.ErrorIs(t, context.Cause(q.Context()), aqs.ErrReleased)
			assert.Equal(t, 3, inAvail(t, slow))
			q2, err := slow.Acquire(ctx, 2)
			require.NoError(t, err)
			require.NoError(t, other.ReleaseID(ctx, q2.ID()))
			assert.ErrorIs(t, slow.ReleasePart(ctx, q2, 1), semaphore.ErrPermitReleased)
			assert.ErrorIs(t, context.Cause(q2.Context()), aqs.ErrReleased)
			assert.Equal(t, 3, inAvail(t, slow))
		})

		t.Run("part", func(t *testing.T) {
			p, err := holder.Acquire(ctx, 3)
			require.NoError(t, err)
			require.NoError(t, other.ReleasePartID(ctx, p.ID(), 2))
			assert.Equal(t, 2, inAvail(t, holder))
			assert.NoError(t, p.Context().Err(), "the permit keeps the rest, and its lease")
			assert.ErrorIs(t, other.ReleasePartID(ctx, p.ID(), 2), semaphore.ErrOverRelease)
			// The holder's count is stale until its next release: one above the permits left
			// is refused, and tells it how many it holds.
			assert.ErrorIs(t, holder.ReleasePart(ctx, p, 2), semaphore.ErrOverRelease)
			assert.Equal(t, 2, inAvail(t, holder))
			require.NoError(t, holder.Release(ctx, p))
			assert.Equal(t, 3, inAvail(t, holder))
			assert.ErrorIs(t, context.Cause(p.Context()), aqs.ErrReleased)
		})

		t.Run("serves the queue", func(t *testing.T) {
			p, err := holder.Acquire(ctx, 3)
			require.NoError(t, err)
			got := make(chan error, 1)
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			go func() {
				w, err := other.Acquire(wctx, 2)
				if err == nil {
					err = other.Release(ctx, w)
				}
				got <- err
			}()
			waitQueued(t, rdb, holder.Keys()[1], 1)
			require.NoError(t, other.ReleasePartID(ctx, p.ID(), 1))
			assert.Equal(t, 1, inAvail(t, holder), "1 free: the waiter of 2 still waits")
			require.NoError(t, holder.ReleaseID(ctx, p.ID()))
			require.NoError(t, <-got, "the release by id granted the waiter")
			assert.Equal(t, 3, inAvail(t, holder))
		})
	})
}

// A release by id of a permit of the caller's own Client ends its context at once.
func TestReleaseIDOfOwnPermitEndsItAtOnce(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		l := newLeased(t, newClient(t, rdb, aqs.WithWatchdogTimeout(3*time.Minute)), 2)
		p, err := l.Acquire(ctx, 2)
		require.NoError(t, err)
		require.NoError(t, l.ReleaseID(ctx, p.ID()))
		require.Error(t, p.Context().Err(), "the permit's context is done on return")
		assert.ErrorIs(t, context.Cause(p.Context()), aqs.ErrReleased)
		err = l.Release(ctx, p)
		assert.ErrorIs(t, err, semaphore.ErrPermitReleased)
		assert.ErrorIs(t, err, aqs.ErrNotOwner)
		assert.Equal(t, 2, inAvail(t, l))
	})
}

// The marks of permits released by id expire: none is left without a TTL, and the key goes
// once the leases the permits had would have ended.
func TestReleaseIDLeavesNoKeyBehind(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		l := newLeased(t, newClient(t, rdb), 2)
		p, err := l.Acquire(ctx, 1, aqs.WithLease(300*time.Millisecond))
		require.NoError(t, err)
		require.NoError(t, l.ReleaseID(ctx, p.ID()))
		pr := l.Keys()[5]
		ttl, err := rdb.PTTL(ctx, pr).Result()
		require.NoError(t, err)
		assert.Positive(t, ttl, "the marks of %s expire", pr)
		assert.LessOrEqual(t, ttl, 1300*time.Millisecond, "the marks live a second past the lease")
		require.Eventually(t, func() bool { return rdb.Exists(ctx, pr).Val() == 0 }, 5*time.Second, 20*time.Millisecond)
		for _, k := range l.Keys()[1:] {
			assert.Zero(t, rdb.Exists(ctx, k).Val(), "%s is left", k)
		}
	})
}

func TestInputReleaseIDBadInput(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c := newClient(t, rdb)
		l := newLeased(t, c, 5)
		p, err := l.Acquire(ctx, 3)
		require.NoError(t, err)
		gone, err := l.Acquire(ctx, 1)
		require.NoError(t, err)
		byID, err := l.Acquire(ctx, 1)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx, gone))
		require.NoError(t, l.ReleaseID(ctx, byID.ID()))
		empty, err := l.Acquire(ctx, 0)
		require.NoError(t, err)
		// Now p holds 3, 2 are available.
		invalid := []error{aqs.ErrInvalidArgument}
		notOwner := []error{aqs.ErrNotOwner}
		unknown := p.ID() + "0" // the shape of a permit id, no permit's
		cases := []inCase{
			{"ReleaseID(\"\")", func(ctx context.Context) error { return l.ReleaseID(ctx, "") }, invalid},
			{"ReleaseID(a permit of 0 permits)", func(ctx context.Context) error { return l.ReleaseID(ctx, empty.ID()) }, invalid},
			{"ReleaseID(not an id)", func(ctx context.Context) error { return l.ReleaseID(ctx, "job-42") }, invalid},
			{"ReleasePartID(\"\")", func(ctx context.Context) error { return l.ReleasePartID(ctx, "", 1) }, invalid},
			{"ReleasePartID(-1)", func(ctx context.Context) error { return l.ReleasePartID(ctx, p.ID(), -1) }, invalid},
			{"ReleaseID(unknown)", func(ctx context.Context) error { return l.ReleaseID(ctx, unknown) }, notOwner},
			{"ReleasePartID(unknown)", func(ctx context.Context) error { return l.ReleasePartID(ctx, unknown, 1) }, notOwner},
			{"ReleaseID(released)", func(ctx context.Context) error { return l.ReleaseID(ctx, gone.ID()) }, notOwner},
			{"ReleaseID(released by id)", func(ctx context.Context) error { return l.ReleaseID(ctx, byID.ID()) },
				[]error{semaphore.ErrPermitReleased, aqs.ErrNotOwner}},
			{"ReleasePartID(released by id)", func(ctx context.Context) error { return l.ReleasePartID(ctx, byID.ID(), 1) },
				[]error{semaphore.ErrPermitReleased}},
			{"ReleasePartID above the permits held", func(ctx context.Context) error { return l.ReleasePartID(ctx, p.ID(), 4) },
				[]error{semaphore.ErrOverRelease}},
			{"ReleaseID of a permit of another semaphore", func(ctx context.Context) error {
				return newLeased(t, c, 1).ReleaseID(ctx, p.ID())
			}, notOwner},
		}
		check := func(t *testing.T) {
			inPermitHolds(t, p, 3)
			assert.Equal(t, 2, inAvail(t, l))
		}
		inRun(t, rdb, l.Keys(), cases, check)
		// ReleasePartID of 0 changes nothing and sends nothing.
		require.NoError(t, l.ReleasePartID(ctx, unknown, 0))
		check(t)
		require.NoError(t, l.Release(ctx, p))
		assert.Equal(t, 5, inAvail(t, l))
	})
}
