package semaphore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/semaphore"
)

// Semaphores that expire (WithExpiry): an idle semaphore's keys go, every call extends its
// life, leases and waiters keep it, and an expired one is set again by WithSize or reports
// ErrNotSet.

// exShort is the expiry of the tests that wait for a semaphore to expire: the shortest
// allowed.
const exShort = time.Second

// exGone bounds the wait for an idle semaphore's keys to go: its expiry, the second its
// leases, grant records and release marks are kept past their end, and room for a loaded
// machine under -race.
const exGone = 10 * time.Second

// exWaiter is the waiter timeout of the tests that wait for an expiry: its queue's keys live
// twice that past the last heartbeat, well within exGone.
var exWaiter = semaphore.WithWaiterTimeout(600 * time.Millisecond)

// exLeft returns the keys among keys that exist.
func exLeft(t testing.TB, rdb redis.UniversalClient, keys []string) []string {
	t.Helper()
	var left []string
	for _, k := range keys {
		n, err := rdb.Exists(context.Background(), k).Result()
		require.NoError(t, err)
		if n == 1 {
			left = append(left, k)
		}
	}
	return left
}

// exWaitGone waits until none of keys exists, and checks that no key of the name is left
// without a TTL (the calls' keys of their own live 10s: see sem_release.lua).
func exWaitGone(t testing.TB, rdb redis.UniversalClient, name, key string, keys []string) {
	t.Helper()
	require.Eventually(t, func() bool { return len(exLeft(t, rdb, keys)) == 0 }, exGone, 10*time.Millisecond,
		"the idle semaphore's keys were not deleted")
	redistest.AssertNoKeyWithoutTTL(t, rdb, name, key)
}

// exServerTime returns the server's clock (the one the leases and deadlines are in).
func exServerTime(t testing.TB, rdb redis.UniversalClient) time.Time {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	require.NoError(t, err)
	return now
}

// exWaitServerTime waits until the server's clock reaches at.
func exWaitServerTime(t testing.TB, rdb redis.UniversalClient, at time.Time) {
	t.Helper()
	require.Eventually(t, func() bool { return !exServerTime(t, rdb).Before(at) }, exGone, 10*time.Millisecond)
}

// exWaitLive waits until the queue's deadlines zset d holds n live waiters (a waiter's list
// entry may stay behind it as a ghost, and a waiter whose deadline passed starts over).
func exWaitLive(t testing.TB, rdb redis.UniversalClient, d string, n int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		now := exServerTime(t, rdb).UnixMilli()
		live, err := rdb.ZCount(context.Background(), d, fmt.Sprintf("(%d", now), "+inf").Result()
		return err == nil && live == n
	}, 5*time.Second, time.Millisecond, "the queue never held %d live waiters", n)
}

// exKept checks that s (keys[0]) lives at least min more, and that it outlives every other key
// of keys (each read after s, so that its TTL then is at most s's when s was read).
func exKept(t testing.TB, rdb redis.UniversalClient, keys []string, min time.Duration, what string) {
	t.Helper()
	ctx := context.Background()
	s, err := rdb.PTTL(ctx, keys[0]).Result()
	require.NoError(t, err)
	require.GreaterOrEqual(t, s, min, "%s: the permits' hash %s", what, keys[0])
	for _, k := range exLeft(t, rdb, keys[1:]) {
		pttl, err := rdb.PTTL(ctx, k).Result()
		require.NoError(t, err)
		assert.Positive(t, pttl, "%s: key %s has no TTL", what, k)
		assert.LessOrEqual(t, pttl, s, "%s: key %s outlives the permits' hash", what, k)
	}
}

func TestExpiryAnIdleSemaphoreLeavesNoKey(t *testing.T) {
	t.Parallel() // it waits for expiries: alongside the package's other waits
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		t.Run("counting", func(t *testing.T) {
			name := redistest.Name(t)
			opts := []semaphore.Option{semaphore.WithExpiry(exShort), exWaiter}
			a, err := semaphore.New(newClient(t, rdb), name, opts...)
			require.NoError(t, err)
			b, err := semaphore.New(newClient(t, rdb), name, opts...)
			require.NoError(t, err)
			ok, err := a.TrySetPermits(ctx, 1)
			require.NoError(t, err)
			require.True(t, ok)

			// Every key written: a waiter queues (q, d), the release grants it its permit
			// (g, until it collects the grant).
			require.NoError(t, a.Acquire(ctx, 1))
			done := make(chan error, 1)
			go func() { done <- b.Acquire(ctx, 1) }()
			inWaitQueued(t, rdb, a.Keys()[1], 1)
			redistest.AssertNoKeyWithoutTTL(t, rdb, name, a.Key())
			require.NoError(t, a.Release(ctx, 1))
			require.NoError(t, <-done)
			require.NoError(t, b.Release(ctx, 1))
			redistest.AssertNoKeyWithoutTTL(t, rdb, name, a.Key())
			assert.Contains(t, exLeft(t, rdb, a.Keys()), a.Key(), "the semaphore expired at once")

			exWaitGone(t, rdb, name, a.Key(), a.Keys())
		})
		t.Run("leased", func(t *testing.T) {
			name := redistest.Name(t)
			opts := []semaphore.Option{semaphore.WithExpiry(exShort), exWaiter}
			// A short watchdog timeout: a release by id keeps its mark until the lease the
			// permit had would have ended.
			ca := newClient(t, rdb, aqs.WithWatchdogTimeout(600*time.Millisecond))
			a, err := semaphore.NewLeased(ca, name, opts...)
			require.NoError(t, err)
			b, err := semaphore.NewLeased(newClient(t, rdb), name, opts...)
			require.NoError(t, err)
			ok, err := a.TrySetPermits(ctx, 2)
			require.NoError(t, err)
			require.True(t, ok)

			// Every key written: a permit of two (p, pn), a waiter (q, d), a release by id
			// (pr).
			p, err := a.Acquire(ctx, 2)
			require.NoError(t, err)
			done := make(chan *semaphore.Permit, 1)
			go func() {
				q, err := b.Acquire(ctx, 1)
				assert.NoError(t, err)
				done <- q
			}()
			inWaitQueued(t, rdb, a.Keys()[1], 1)
			redistest.AssertNoKeyWithoutTTL(t, rdb, name, a.Key())
			require.NoError(t, b.ReleaseID(ctx, p.ID()))
			q := <-done
			require.NotNil(t, q)
			require.NoError(t, b.Release(ctx, q))
			redistest.AssertNoKeyWithoutTTL(t, rdb, name, a.Key())
			assert.Contains(t, exLeft(t, rdb, a.Keys()), a.Key(), "the semaphore expired at once")

			exWaitGone(t, rdb, name, a.Key(), a.Keys())
		})
	})
}

// Each kind of call extends the life of the semaphore to its expiry: its permits' hash, which
// outlives every other key of the semaphore. The keys are aged first (their TTLs cut to a few
// seconds, as if the time had passed), then the call must give the hash the expiry again;
// Available, which only reads, must not.
func TestExpiryEveryCallExtendsIt(t *testing.T) {
	const expiry = time.Hour
	const aged = 5 * time.Second
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		// age cuts the TTL of every key of keys that exists to aged.
		age := func(t *testing.T, keys []string) {
			t.Helper()
			for _, k := range exLeft(t, rdb, keys) {
				require.NoError(t, rdb.PExpire(ctx, k, aged).Err())
			}
		}
		// extends ages the keys, runs call and checks that it gave the semaphore the expiry
		// again.
		extends := func(t *testing.T, keys []string, what string, call func() error) {
			t.Helper()
			age(t, keys)
			require.NoError(t, call(), what)
			exKept(t, rdb, keys, expiry-time.Minute, what)
		}
		// notAged checks that the keys still have their aged TTLs.
		notAged := func(t *testing.T, keys []string, what string) {
			t.Helper()
			for _, k := range exLeft(t, rdb, keys) {
				pttl, err := rdb.PTTL(ctx, k).Result()
				require.NoError(t, err)
				assert.LessOrEqual(t, pttl, aged, "%s extended key %s", what, k)
			}
		}
		// waitersExtend checks that waiters extend the semaphore whose keys are keys, each
		// made by acquire(ctx, its waiter timeout), which returns once the waiter is done: a
		// queued waiter's heartbeats (the keys are aged once it is queued, and a heartbeat, a
		// third of the waiter timeout apart, must give them the expiry again) and its give-up,
		// then the give-up of a waiter whose heartbeats are seconds apart, so that only it runs.
		waitersExtend := func(t *testing.T, keys []string, acquire func(ctx context.Context, waiterTimeout time.Duration) error) {
			t.Helper()
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- acquire(wctx, 600*time.Millisecond) }()
			exWaitLive(t, rdb, keys[2], 1)
			age(t, keys)
			require.Eventually(t, func() bool {
				pttl, err := rdb.PTTL(ctx, keys[0]).Result()
				return err == nil && pttl > expiry-time.Minute
			}, 5*time.Second, 5*time.Millisecond, "no heartbeat extended the semaphore")
			exKept(t, rdb, keys, expiry-time.Minute, "heartbeat")
			cancel()
			require.ErrorIs(t, <-done, context.Canceled)
			exWaitLive(t, rdb, keys[2], 0) // its give-up ran

			wctx, cancel = context.WithCancel(ctx)
			go func() { done <- acquire(wctx, 30*time.Second) }()
			exWaitLive(t, rdb, keys[2], 1)
			age(t, keys)
			cancel()
			require.ErrorIs(t, <-done, context.Canceled)
			require.Eventually(t, func() bool {
				pttl, err := rdb.PTTL(ctx, keys[0]).Result()
				return err == nil && pttl > expiry-time.Minute
			}, 5*time.Second, 5*time.Millisecond, "the give-up did not extend the semaphore")
		}

		t.Run("counting", func(t *testing.T) {
			c := newClient(t, rdb)
			s, err := semaphore.New(c, redistest.Name(t), semaphore.WithExpiry(expiry))
			require.NoError(t, err)
			k := s.Keys()
			extends(t, k, "TrySetPermits", func() error {
				ok, err := s.TrySetPermits(ctx, 2)
				assert.True(t, ok)
				return err
			})
			extends(t, k, "TrySetPermits when set", func() error {
				ok, err := s.TrySetPermits(ctx, 2)
				assert.False(t, ok)
				return err
			})
			extends(t, k, "AddPermits", func() error { return s.AddPermits(ctx, 1) })
			extends(t, k, "AddPermits(-1)", func() error { return s.AddPermits(ctx, -1) })
			extends(t, k, "Acquire", func() error { return s.Acquire(ctx, 1) })
			extends(t, k, "TryAcquire", func() error {
				ok, err := s.TryAcquire(ctx, 1)
				assert.True(t, ok)
				return err
			})
			extends(t, k, "TryAcquire that gets none", func() error { return inTry(s.TryAcquire(ctx, 1)) })
			extends(t, k, "Release", func() error { return s.Release(ctx, 1) })
			age(t, k)
			require.ErrorIs(t, s.Release(ctx, 2), semaphore.ErrOverRelease)
			exKept(t, rdb, k, expiry-time.Minute, "a Release that fails")
			extends(t, k, "Drain", func() error {
				n, err := s.Drain(ctx)
				assert.Equal(t, 1, n)
				return err
			})
			extends(t, k, "ForceRelease", func() error {
				n, err := s.ForceRelease(ctx)
				assert.Equal(t, 2, n)
				return err
			})
			age(t, k)
			assert.Equal(t, 2, inAvail(t, s))
			notAged(t, k, "Available")

			// Waiters: their heartbeats, and waiters that give up.
			require.NoError(t, s.Acquire(ctx, 2))
			waitersExtend(t, k, func(ctx context.Context, waiterTimeout time.Duration) error {
				w, err := semaphore.New(c, s.Name(), semaphore.WithExpiry(expiry), semaphore.WithWaiterTimeout(waiterTimeout))
				require.NoError(t, err)
				return w.Acquire(ctx, 1)
			})
			require.NoError(t, s.Release(ctx, 2))
		})

		t.Run("leased", func(t *testing.T) {
			c := newClient(t, rdb)
			l, err := semaphore.NewLeased(c, redistest.Name(t), semaphore.WithExpiry(expiry))
			require.NoError(t, err)
			// Every key but pr, the marks of the permits released by their id, which live
			// until the lease end each permit had and may outlive their semaphore, harmlessly
			// (see keep_semaphore in internal/scripts/_sem.lua).
			k, pr := l.Keys()[:5], l.Keys()[5]
			extends(t, k, "TrySetPermits", func() error {
				ok, err := l.TrySetPermits(ctx, 3)
				assert.True(t, ok)
				return err
			})
			extends(t, k, "AddPermits", func() error { return l.AddPermits(ctx, 1) })
			extends(t, k, "AddPermits(-1)", func() error { return l.AddPermits(ctx, -1) })
			var p, q *semaphore.Permit
			extends(t, k, "Acquire", func() (err error) {
				p, err = l.Acquire(ctx, 2)
				return err
			})
			extends(t, k, "TryAcquire", func() error {
				var ok bool
				q, ok, err = l.TryAcquire(ctx, 1)
				assert.True(t, ok)
				return err
			})
			extends(t, k, "TryAcquire that gets none", func() error { return inTryL(l.TryAcquire(ctx, 1)) })
			extends(t, k, "SetLease", func() error { return l.SetLease(ctx, p, time.Minute) })
			extends(t, k, "SetLease(0)", func() error { return l.SetLease(ctx, p, 0) })
			extends(t, k, "ReleasePart", func() error { return l.ReleasePart(ctx, p, 1) })
			extends(t, k, "Release", func() error { return l.Release(ctx, p) })
			extends(t, k, "Acquire", func() (err error) {
				p, err = l.Acquire(ctx, 2)
				return err
			})
			extends(t, k, "ReleasePartID", func() error { return l.ReleasePartID(ctx, p.ID(), 1) })
			extends(t, k, "ReleaseID", func() error { return l.ReleaseID(ctx, p.ID()) })
			assert.Positive(t, rdb.PTTL(ctx, pr).Val(), "the mark of the release by id")
			extends(t, k, "ForceRelease", func() error {
				n, err := l.ForceRelease(ctx)
				assert.Equal(t, 1, n, "q's permit")
				return err
			})
			age(t, k)
			assert.Equal(t, 3, inAvail(t, l))
			notAged(t, k, "Available")
			assert.Error(t, l.Release(ctx, q), "ForceRelease took q's permit")

			// Waiters: their heartbeats, and waiters that give up.
			p, err = l.Acquire(ctx, 3)
			require.NoError(t, err)
			waitersExtend(t, k, func(ctx context.Context, waiterTimeout time.Duration) error {
				w, err := semaphore.NewLeased(c, l.Name(), semaphore.WithExpiry(expiry), semaphore.WithWaiterTimeout(waiterTimeout))
				require.NoError(t, err)
				_, err = w.Acquire(ctx, 1)
				return err
			})
			require.NoError(t, l.Release(ctx, p))
		})
	})
}

// A semaphore in use does not expire: leased permits renewed by the watchdog, a fixed lease
// longer than the expiry, and queued waiters keep it past its expiry; a counting semaphore's
// taken permits alone do not. The four run side by side, so that their waits overlap.
func TestExpiryWaitsForLeasesAndWaiters(t *testing.T) {
	t.Parallel() // it waits for expiries: alongside the package's other waits
	// Leases of 1s, renewed every third of it: without the renewals' keeping it, the
	// semaphore would go 2s after the acquisition (its lease end, and a second).
	const watchdog = time.Second
	// A waiter timeout of 1s: its join keeps the queue, and so the semaphore, 2s; its
	// heartbeats, a third of a second apart, keep them past that. (A waiter unheard of for its
	// timeout is dead, and once its queue's keys are gone the semaphore may go: the timeout is
	// long enough for a loaded machine's heartbeats.)
	const timeout = time.Second
	// look is when the semaphores are looked at: past the expiry of their last call, past the
	// first lease and its second, past the life the waiter's join gave the queue.
	const look = 2*timeout + exShort
	// lease is the fixed lease, which ends after look.
	const lease = look + exShort
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		start := exServerTime(t, rdb)

		renewed := newLeased(t, newClient(t, rdb, aqs.WithWatchdogTimeout(watchdog)), 2, semaphore.WithExpiry(exShort))
		rp, err := renewed.Acquire(ctx, 1)
		require.NoError(t, err)

		fixed := newLeased(t, newClient(t, rdb), 2, semaphore.WithExpiry(exShort))
		fp, err := fixed.Acquire(ctx, 1, aqs.WithLease(lease))
		require.NoError(t, err)

		opts := []semaphore.Option{semaphore.WithExpiry(exShort), semaphore.WithWaiterTimeout(timeout)}
		held := newSem(t, newClient(t, rdb), 1, opts...)
		waiter, err := semaphore.New(newClient(t, rdb), held.Name(), opts...)
		require.NoError(t, err)
		require.NoError(t, held.Acquire(ctx, 1))
		done := make(chan error, 1)
		go func() { done <- waiter.Acquire(ctx, 1) }()
		inWaitQueued(t, rdb, held.Keys()[1], 1)

		taken := newSem(t, newClient(t, rdb), 2, semaphore.WithExpiry(exShort))
		require.NoError(t, taken.Acquire(ctx, 1)) // never given back, and no other call

		exWaitServerTime(t, rdb, start.Add(look))
		end, err := rdb.ZScore(ctx, renewed.Keys()[3], rp.ID()).Result()
		require.NoError(t, err, "the renewed permit is gone")
		assert.Greater(t, int64(end), start.Add(look).UnixMilli(), "the watchdog renewed the permit")
		assert.Equal(t, 1, inAvail(t, renewed), "the renewals kept the semaphore")
		require.NoError(t, rp.Context().Err())
		assert.Equal(t, 1, inAvail(t, fixed), "the fixed lease kept the semaphore")
		require.NoError(t, fp.Context().Err())
		require.Contains(t, exLeft(t, rdb, held.Keys()), held.Key(), "the semaphore expired under its waiter")
		exWaitGone(t, rdb, taken.Name(), taken.Key(), taken.Keys()) // gone already

		require.NoError(t, renewed.Release(ctx, rp))
		require.NoError(t, held.Release(ctx, 1))
		require.NoError(t, <-done, "the waiter got the permit")
		require.NoError(t, waiter.Release(ctx, 1))
		// The fixed lease is never released: its semaphore goes after the lease ends.
		exWaitGone(t, rdb, renewed.Name(), renewed.Key(), inAll(renewed.Keys(), fixed.Keys(), held.Keys()))
		redistest.AssertNoKeyWithoutTTL(t, rdb, fixed.Name(), fixed.Key())
		redistest.AssertNoKeyWithoutTTL(t, rdb, held.Name(), held.Key())
		assert.Error(t, fp.Context().Err(), "the fixed lease ended")
	})
}

// An expired semaphore is one whose permits were never set: WithSize sets them again at its
// next use; without it the calls fail with ErrNotSet, and leave no key, until the permits are
// set again. The four semaphores expire side by side.
func TestExpiryThenWithSizeOrErrNotSet(t *testing.T) {
	t.Parallel() // it waits for expiries: alongside the package's other waits
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c := newClient(t, rdb)
		cs, err := semaphore.New(c, redistest.Name(t)+"-cs", semaphore.WithSize(2), semaphore.WithExpiry(exShort))
		require.NoError(t, err)
		cn := newSem(t, c, 2, semaphore.WithExpiry(exShort))
		ls, err := semaphore.NewLeased(c, redistest.Name(t)+"-ls", semaphore.WithSize(2), semaphore.WithExpiry(exShort))
		require.NoError(t, err)
		ln := newLeased(t, c, 2, semaphore.WithExpiry(exShort))
		all := inAll(cs.Keys(), cn.Keys(), ls.Keys(), ln.Keys())

		require.NoError(t, cs.Acquire(ctx, 1), "set by WithSize")
		require.NoError(t, cn.Acquire(ctx, 1))
		for _, l := range []*semaphore.Leased{ls, ln} {
			p, err := l.Acquire(ctx, 1)
			require.NoError(t, err)
			require.NoError(t, l.Release(ctx, p))
		}
		exWaitGone(t, rdb, cn.Name(), cn.Key(), all)

		t.Run("counting with size", func(t *testing.T) {
			// The late release of a permit taken before the expiry is absorbed: it sets the
			// size again.
			require.NoError(t, cs.Release(ctx, 1))
			assert.Equal(t, 2, inAvail(t, cs))
			require.NoError(t, cs.Acquire(ctx, 1))
			exWaitGone(t, rdb, cs.Name(), cs.Key(), cs.Keys())

			// Once the size is set again, a late release gives its permits back, up to the
			// total.
			require.NoError(t, cs.Acquire(ctx, 2), "set by WithSize, all available")
			require.NoError(t, cs.Release(ctx, 1), "the late release")
			assert.Equal(t, 1, inAvail(t, cs))
			assert.ErrorIs(t, cs.Release(ctx, 2), semaphore.ErrOverRelease)
			require.NoError(t, cs.Release(ctx, 1))
			assert.Equal(t, 2, inAvail(t, cs))
		})
		t.Run("counting without size", func(t *testing.T) {
			assert.ErrorIs(t, cn.Acquire(ctx, 1), semaphore.ErrNotSet)
			_, err := cn.TryAcquire(ctx, 1)
			assert.ErrorIs(t, err, semaphore.ErrNotSet)
			assert.ErrorIs(t, cn.Release(ctx, 1), semaphore.ErrNotSet, "the late release")
			_, err = cn.ForceRelease(ctx)
			assert.ErrorIs(t, err, semaphore.ErrNotSet)
			n, err := cn.Drain(ctx)
			require.NoError(t, err)
			assert.Zero(t, n)
			assert.Zero(t, inAvail(t, cn))
			assert.Empty(t, exLeft(t, rdb, cn.Keys()), "the failed calls wrote keys")

			ok, err := cn.TrySetPermits(ctx, 2)
			require.NoError(t, err)
			require.True(t, ok)
			require.NoError(t, cn.Acquire(ctx, 2))
			require.NoError(t, cn.Release(ctx, 2))
		})
		t.Run("leased with size", func(t *testing.T) {
			p, err := ls.Acquire(ctx, 2)
			require.NoError(t, err, "set by WithSize")
			require.NoError(t, ls.Release(ctx, p))
			assert.Equal(t, 2, inAvail(t, ls))
		})
		t.Run("leased without size", func(t *testing.T) {
			_, err := ln.Acquire(ctx, 1)
			assert.ErrorIs(t, err, semaphore.ErrNotSet)
			_, _, err = ln.TryAcquire(ctx, 1)
			assert.ErrorIs(t, err, semaphore.ErrNotSet)
			_, err = ln.ForceRelease(ctx)
			assert.ErrorIs(t, err, semaphore.ErrNotSet)
			assert.Zero(t, inAvail(t, ln))
			assert.Empty(t, exLeft(t, rdb, ln.Keys()), "the failed calls wrote keys")

			require.NoError(t, ln.AddPermits(ctx, 2), "sets the permits")
			p, err := ln.Acquire(ctx, 2)
			require.NoError(t, err)
			require.NoError(t, ln.Release(ctx, p))
		})
	})
}

// Without WithExpiry a semaphore's permits hash has no TTL. A value of the same name with an
// expiry, on the same Client, gives it one, and the two values serve each other's waiters as
// two Clients would.
func TestExpiryIsPerValue(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Single(t).Client(t)
	c := newClient(t, rdb)
	plain := newSem(t, c, 1)
	require.NoError(t, plain.Acquire(ctx, 1))
	require.NoError(t, plain.Release(ctx, 1))
	assert.Equal(t, time.Duration(-1), rdb.PTTL(ctx, plain.Key()).Val(), "no TTL without WithExpiry")

	expiring, err := semaphore.New(c, plain.Name(), semaphore.WithExpiry(time.Hour))
	require.NoError(t, err)
	require.NoError(t, expiring.Acquire(ctx, 1))
	exKept(t, rdb, plain.Keys(), time.Hour-time.Minute, "a call of the value with an expiry")
	done := make(chan error, 1)
	go func() { done <- plain.Acquire(ctx, 1) }()
	inWaitQueued(t, rdb, plain.Keys()[1], 1)
	require.NoError(t, expiring.Release(ctx, 1))
	require.NoError(t, <-done)
	require.NoError(t, plain.Release(ctx, 1))
	require.NoError(t, rdb.Del(ctx, plain.Keys()...).Err())
}
