package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/semaphore"
)

// Bad input: what the semaphores reject, with which error, and what each rejected call leaves
// behind in Redis (nothing).
//
// The helpers of this file are prefixed with "in" so as not to collide with the package's
// other tests.

// errInAcquired stands for a call that acquired permits where it had to fail.
var errInAcquired = errors.New("acquired, but the call had to fail")

// errInCause is the cause the tests cancel their contexts with.
var errInCause = errors.New("the test cancelled the wait")

// inCase is one call expected to fail with an error matching every error of want.
type inCase struct {
	name string
	call func(ctx context.Context) error
	want []error
}

// inTry turns a counting TryAcquire's result into an error: one that acquired is an error.
func inTry(ok bool, err error) error {
	if ok {
		return errInAcquired
	}
	return err
}

// inTryL turns a leased TryAcquire's result into an error: one that acquired is an error.
func inTryL(p *semaphore.Permit, ok bool, err error) error {
	if ok || p != nil {
		return errInAcquired
	}
	return err
}

// inAcqL turns a leased Acquire's result into an error: one that acquired is an error.
func inAcqL(p *semaphore.Permit, err error) error {
	if p != nil {
		return errInAcquired
	}
	return err
}

// inPrompt runs f with a context that has no deadline and fails the test unless f returns
// within a few seconds: a call that must fail at once must not wait.
func inPrompt(t testing.TB, f func(ctx context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(3 * time.Second):
		t.Errorf("the call waited instead of failing at once")
		cancel()
		return <-done
	}
}

// inRun runs the cases one by one: each must fail, at once, with an error matching its
// errors, and leave keys as they were before it; check, when not nil, then looks at the rest.
func inRun(t *testing.T, rdb redis.UniversalClient, keys []string, cases []inCase, check func(t *testing.T)) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := inSnapshot(t, rdb, keys...)
			err := inPrompt(t, tc.call)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.ErrorIs(t, err, w)
			}
			assert.Equal(t, before, inSnapshot(t, rdb, keys...), "the call changed the semaphore's keys")
			if check != nil {
				check(t)
			}
		})
	}
}

// inState is a snapshot of keys, to check that they are left as they were.
type inState struct {
	rdb  redis.UniversalClient
	keys []string
	was  []string
}

// inTake takes a snapshot of keys.
func inTake(t testing.TB, rdb redis.UniversalClient, keys ...string) *inState {
	t.Helper()
	return &inState{rdb: rdb, keys: keys, was: inSnapshot(t, rdb, keys...)}
}

// same checks that the keys hold what they held at the snapshot.
func (st *inState) same(t testing.TB, what string) {
	t.Helper()
	assert.Equal(t, st.was, inSnapshot(t, st.rdb, st.keys...), "%s changed", what)
}

// inSnapshot returns the contents of keys, by type, to compare before and after a call.
func inSnapshot(t testing.TB, rdb redis.UniversalClient, keys ...string) []string {
	t.Helper()
	ctx := context.Background()
	out := make([]string, len(keys))
	for i, k := range keys {
		typ, err := rdb.Type(ctx, k).Result()
		require.NoError(t, err)
		var v any
		switch typ {
		case "none":
		case "string":
			v, err = rdb.Get(ctx, k).Result()
		case "hash":
			v, err = rdb.HGetAll(ctx, k).Result()
		case "list":
			v, err = rdb.LRange(ctx, k, 0, -1).Result()
		case "zset":
			v, err = rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
		default:
			t.Fatalf("key %s holds an unexpected type %s", k, typ)
		}
		require.NoError(t, err)
		out[i] = fmt.Sprintf("%s %s %v", k, typ, v)
	}
	return out
}

// inNoKeys checks that none of keys exists.
func inNoKeys(t testing.TB, rdb redis.UniversalClient, keys ...string) {
	t.Helper()
	for _, k := range keys {
		n, err := rdb.Exists(context.Background(), k).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "key %s was written", k)
	}
}

// inQueueEmpty checks that nobody is queued: the queue list (keys[1]) and its deadlines
// (keys[2]) are empty or absent.
func inQueueEmpty(t testing.TB, rdb redis.UniversalClient, keys []string) {
	t.Helper()
	ctx := context.Background()
	l, err := rdb.LLen(ctx, keys[1]).Result()
	require.NoError(t, err)
	assert.Zero(t, l, "entries left in the queue %s", keys[1])
	z, err := rdb.ZCard(ctx, keys[2]).Result()
	require.NoError(t, err)
	assert.Zero(t, z, "deadlines left in %s", keys[2])
}

// inWaitQueued waits until the queue list at key holds n entries.
func inWaitQueued(t testing.TB, rdb redis.UniversalClient, key string, n int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		l, err := rdb.LLen(context.Background(), key).Result()
		return err == nil && l == n
	}, 5*time.Second, time.Millisecond, "queue %s never held %d entries", key, n)
}

// inSettle waits for the background clean-up of a failed attempt (see base.abandon).
func inSettle() { time.Sleep(50 * time.Millisecond) }

type inAvailabler interface {
	Available(ctx context.Context) (int, error)
}

// inAvail returns s's available permits.
func inAvail(t testing.TB, s inAvailabler) int {
	t.Helper()
	n, err := s.Available(context.Background())
	require.NoError(t, err)
	return n
}

// inUnset returns a counting and a leased semaphore whose permits were never set.
func inUnset(t testing.TB, c *aqs.Client) (*semaphore.Semaphore, *semaphore.Leased) {
	t.Helper()
	s, err := semaphore.New(c, redistest.Name(t))
	require.NoError(t, err)
	l, err := semaphore.NewLeased(c, redistest.Name(t))
	require.NoError(t, err)
	return s, l
}

// inAll returns every key of the semaphores given.
func inAll(keys ...[]string) []string {
	var all []string
	for _, k := range keys {
		all = append(all, k...)
	}
	return all
}

// inPermitHolds checks that p still holds n permits under a live lease.
func inPermitHolds(t testing.TB, p *semaphore.Permit, n int) {
	t.Helper()
	assert.Equal(t, n, p.Permits(), "permit %s", p.ID())
	assert.NoError(t, p.Context().Err(), "permit %s: held context done", p.ID())
}

func TestInputNegativePermitCountsAreInvalid(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c := newClient(t, rdb)
		us, ul := inUnset(t, c)
		s := newSem(t, c, 3)
		l := newLeased(t, c, 3)
		p, err := l.Acquire(ctx, 2)
		require.NoError(t, err)
		set := inAll(s.Keys(), l.Keys())
		stS, stL := inTake(t, rdb, s.Keys()...), inTake(t, rdb, l.Keys()...)
		var cases []inCase
		invalid := []error{aqs.ErrInvalidArgument}
		for _, n := range []int{-1, math.MinInt} { // 0 succeeds at once: zero_test.go
			for _, x := range []struct {
				name string
				s    *semaphore.Semaphore
				l    *semaphore.Leased
			}{{"unset", us, ul}, {"set", s, l}} {
				cs, cl := x.s, x.l
				cases = append(cases,
					inCase{fmt.Sprintf("counting/%s/Acquire(%d)", x.name, n),
						func(ctx context.Context) error { return cs.Acquire(ctx, n) }, invalid},
					inCase{fmt.Sprintf("counting/%s/TryAcquire(%d)", x.name, n),
						func(ctx context.Context) error { return inTry(cs.TryAcquire(ctx, n)) }, invalid},
					inCase{fmt.Sprintf("counting/%s/TryAcquire(%d,WithWait)", x.name, n),
						func(ctx context.Context) error { return inTry(cs.TryAcquire(ctx, n, aqs.WithWait(time.Minute))) }, invalid},
					inCase{fmt.Sprintf("counting/%s/Release(%d)", x.name, n),
						func(ctx context.Context) error { return cs.Release(ctx, n) }, invalid},
					inCase{fmt.Sprintf("leased/%s/Acquire(%d)", x.name, n),
						func(ctx context.Context) error { return inAcqL(cl.Acquire(ctx, n)) }, invalid},
					inCase{fmt.Sprintf("leased/%s/Acquire(%d,WithLease)", x.name, n),
						func(ctx context.Context) error { return inAcqL(cl.Acquire(ctx, n, aqs.WithLease(time.Minute))) }, invalid},
					inCase{fmt.Sprintf("leased/%s/TryAcquire(%d)", x.name, n),
						func(ctx context.Context) error { return inTryL(cl.TryAcquire(ctx, n)) }, invalid},
					inCase{fmt.Sprintf("leased/%s/TryAcquire(%d,WithWait)", x.name, n),
						func(ctx context.Context) error { return inTryL(cl.TryAcquire(ctx, n, aqs.WithWait(time.Minute))) }, invalid},
				)
			}
			cases = append(cases, inCase{fmt.Sprintf("leased/ReleasePart(%d)", n),
				func(ctx context.Context) error { return l.ReleasePart(ctx, p, n) }, invalid})
		}
		check := func(t *testing.T) {
			inNoKeys(t, rdb, inAll(us.Keys(), ul.Keys())...)
			inPermitHolds(t, p, 2)
		}
		inRun(t, rdb, set, cases, check)
		inSettle()
		check(t)
		stS.same(t, "the counting semaphore")
		stL.same(t, "the leased semaphore")
		assert.Equal(t, 3, inAvail(t, s))
		assert.Equal(t, 1, inAvail(t, l))
		require.NoError(t, l.Release(ctx, p))
	})
}

func TestInputTooManyPermitsFailAtOnce(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c := newClient(t, rdb)
		s := newSem(t, c, 3)
		l := newLeased(t, c, 3)
		tooMany := []error{semaphore.ErrTooManyPermits}
		cases := func(total int) []inCase {
			var cs []inCase
			for _, n := range []int{total + 1, 1000} {
				cs = append(cs,
					inCase{fmt.Sprintf("counting/Acquire(%d)", n),
						func(ctx context.Context) error { return s.Acquire(ctx, n) }, tooMany},
					inCase{fmt.Sprintf("counting/TryAcquire(%d)", n),
						func(ctx context.Context) error { return inTry(s.TryAcquire(ctx, n)) }, tooMany},
					inCase{fmt.Sprintf("counting/TryAcquire(%d,WithWait)", n),
						func(ctx context.Context) error { return inTry(s.TryAcquire(ctx, n, aqs.WithWait(time.Minute))) }, tooMany},
					inCase{fmt.Sprintf("leased/Acquire(%d)", n),
						func(ctx context.Context) error { return inAcqL(l.Acquire(ctx, n)) }, tooMany},
					inCase{fmt.Sprintf("leased/Acquire(%d,WithLease)", n),
						func(ctx context.Context) error { return inAcqL(l.Acquire(ctx, n, aqs.WithLease(time.Minute))) }, tooMany},
					inCase{fmt.Sprintf("leased/TryAcquire(%d)", n),
						func(ctx context.Context) error { return inTryL(l.TryAcquire(ctx, n)) }, tooMany},
					inCase{fmt.Sprintf("leased/TryAcquire(%d,WithWait)", n),
						func(ctx context.Context) error { return inTryL(l.TryAcquire(ctx, n, aqs.WithWait(time.Minute))) }, tooMany},
				)
			}
			return cs
		}

		t.Run("idle", func(t *testing.T) {
			stS, stL := inTake(t, rdb, s.Keys()...), inTake(t, rdb, l.Keys()...)
			check := func(t *testing.T) {
				inQueueEmpty(t, rdb, s.Keys())
				inQueueEmpty(t, rdb, l.Keys())
			}
			inRun(t, rdb, inAll(s.Keys(), l.Keys()), cases(3), check)
			inSettle()
			check(t)
			stS.same(t, "the counting semaphore")
			stL.same(t, "the leased semaphore")
			assert.Equal(t, 3, inAvail(t, s))
			assert.Equal(t, 3, inAvail(t, l))
		})

		// With a waiter queued, the attempt takes the queue's path through the scripts: the
		// request above the total must still fail at once, and leave the waiter in place.
		t.Run("behind a waiter", func(t *testing.T) {
			c2 := newClient(t, rdb)
			s2, err := semaphore.New(c2, s.Name())
			require.NoError(t, err)
			l2, err := semaphore.NewLeased(c2, l.Name())
			require.NoError(t, err)
			require.NoError(t, s.Acquire(ctx, 3))
			giveS := inOnce(t, func() error { return s.Release(ctx, 3) })
			held, err := l.Acquire(ctx, 3)
			require.NoError(t, err)
			giveL := inOnce(t, func() error { return l.Release(ctx, held) })
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			sw := make(chan inWaiter, 1)
			go func() { sw <- inWaiter{err: s2.Acquire(wctx, 1)} }()
			lw := make(chan inWaiter, 1)
			go func() { p, err := l2.Acquire(wctx, 1); lw <- inWaiter{p, err} }()
			inWaitQueued(t, rdb, s.Keys()[1], 1)
			inWaitQueued(t, rdb, l.Keys()[1], 1)
			stS, stL := inTake(t, rdb, s.Keys()[1]), inTake(t, rdb, l.Keys()[1])
			inRun(t, rdb, []string{s.Keys()[1], l.Keys()[1]}, cases(3), nil)
			inSettle()
			stS.same(t, "the counting semaphore's queue")
			stL.same(t, "the leased semaphore's queue")
			assert.Equal(t, 0, inAvail(t, s))
			assert.Equal(t, 0, inAvail(t, l))

			// The waiters are served as before.
			giveS()
			require.NoError(t, inAwait(t, sw).err)
			giveL()
			r := inAwait(t, lw)
			require.NoError(t, r.err)
			require.NoError(t, s.Release(ctx, 1))
			require.NoError(t, l2.Release(ctx, r.p))
			assert.Equal(t, 3, inAvail(t, s))
			assert.Equal(t, 3, inAvail(t, l))
			inQueueEmpty(t, rdb, s.Keys())
			inQueueEmpty(t, rdb, l.Keys())
		})
	})
}

func TestInputPermitsNotSet(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		c := newClient(t, rdb)
		s, l := inUnset(t, c)
		keys := inAll(s.Keys(), l.Keys())
		notSet := []error{semaphore.ErrNotSet}
		cases := []inCase{
			{"counting/Acquire", func(ctx context.Context) error { return s.Acquire(ctx, 1) }, notSet},
			{"counting/TryAcquire", func(ctx context.Context) error { return inTry(s.TryAcquire(ctx, 1)) }, notSet},
			{"counting/TryAcquire(WithWait)", func(ctx context.Context) error {
				return inTry(s.TryAcquire(ctx, 1, aqs.WithWait(time.Minute)))
			}, notSet},
			{"counting/Release", func(ctx context.Context) error { return s.Release(ctx, 1) }, notSet},
			{"leased/Acquire", func(ctx context.Context) error { return inAcqL(l.Acquire(ctx, 1)) }, notSet},
			{"leased/Acquire(WithLease)", func(ctx context.Context) error {
				return inAcqL(l.Acquire(ctx, 1, aqs.WithLease(time.Minute)))
			}, notSet},
			{"leased/TryAcquire", func(ctx context.Context) error { return inTryL(l.TryAcquire(ctx, 1)) }, notSet},
			{"leased/TryAcquire(WithWait)", func(ctx context.Context) error {
				return inTryL(l.TryAcquire(ctx, 1, aqs.WithWait(time.Minute)))
			}, notSet},
		}
		inRun(t, rdb, keys, cases, nil)
		assert.Equal(t, 0, inAvail(t, s))
		assert.Equal(t, 0, inAvail(t, l))
		n, err := s.Drain(context.Background())
		require.NoError(t, err)
		assert.Equal(t, 0, n, "Drain of a semaphore never set")
		inSettle()
		inNoKeys(t, rdb, s.Keys()...)
		inNoKeys(t, rdb, l.Keys()...)
	})
}

func TestInputCountingOverRelease(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		s := newSem(t, newClient(t, rdb), 3)
		over := []error{semaphore.ErrOverRelease}
		release := func(n int) inCase {
			return inCase{fmt.Sprintf("Release(%d)", n), func(ctx context.Context) error { return s.Release(ctx, n) }, over}
		}
		check := func(avail int) func(t *testing.T) {
			return func(t *testing.T) { assert.Equal(t, avail, inAvail(t, s)) }
		}
		t.Run("all available", func(t *testing.T) {
			inRun(t, rdb, s.Keys(), []inCase{release(1), release(3), release(1 << 40)}, check(3))
		})
		require.NoError(t, s.Acquire(ctx, 2))
		t.Run("two taken", func(t *testing.T) {
			inRun(t, rdb, s.Keys(), []inCase{release(3), release(4), release(1 << 40)}, check(1))
		})
		require.NoError(t, s.Release(ctx, 2))
		assert.Equal(t, 3, inAvail(t, s))
	})
}

func TestInputAddPermitsInsufficient(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c := newClient(t, rdb)
		s := newSem(t, c, 3)
		l := newLeased(t, c, 3)
		us, ul := inUnset(t, c)
		require.NoError(t, s.Acquire(ctx, 2))
		p, err := l.Acquire(ctx, 2)
		require.NoError(t, err)
		keys := inAll(s.Keys(), l.Keys(), us.Keys(), ul.Keys())
		insufficient := []error{semaphore.ErrInsufficientPermits}
		add := func(name string, f func(context.Context, int) error, delta int) inCase {
			return inCase{fmt.Sprintf("%s/AddPermits(%d)", name, delta),
				func(ctx context.Context) error { return f(ctx, delta) }, insufficient}
		}
		cases := []inCase{
			add("counting", s.AddPermits, -2),
			add("counting", s.AddPermits, -3),
			add("counting", s.AddPermits, -1000),
			add("leased", l.AddPermits, -2),
			add("leased", l.AddPermits, -3),
			add("leased", l.AddPermits, -1000),
			add("counting/unset", us.AddPermits, -1),
			add("leased/unset", ul.AddPermits, -1),
		}
		check := func(t *testing.T) {
			assert.Equal(t, 1, inAvail(t, s))
			assert.Equal(t, 1, inAvail(t, l))
			inPermitHolds(t, p, 2)
		}
		inRun(t, rdb, keys, cases, check)
		inNoKeys(t, rdb, us.Keys()...)
		inNoKeys(t, rdb, ul.Keys()...)
		// The total is unchanged: all the permits go back, and no more.
		require.NoError(t, s.Release(ctx, 2))
		require.ErrorIs(t, s.Release(ctx, 1), semaphore.ErrOverRelease)
		require.NoError(t, l.Release(ctx, p))
		assert.Equal(t, 3, inAvail(t, s))
		assert.Equal(t, 3, inAvail(t, l))
		_, err = l.Acquire(ctx, 4)
		require.ErrorIs(t, err, semaphore.ErrTooManyPermits)
	})
}

func TestInputTrySetPermitsNegative(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		c := newClient(t, rdb)
		us, ul := inUnset(t, c)
		s := newSem(t, c, 3)
		l := newLeased(t, c, 3)
		keys := inAll(s.Keys(), l.Keys(), us.Keys(), ul.Keys())
		set := func(name string, f func(context.Context, int) (bool, error), k int) inCase {
			return inCase{fmt.Sprintf("%s/TrySetPermits(%d)", name, k), func(ctx context.Context) error {
				ok, err := f(ctx, k)
				if ok {
					return errors.New("set")
				}
				return err
			}, []error{aqs.ErrInvalidArgument}}
		}
		var cases []inCase
		for _, k := range []int{-1, math.MinInt} {
			cases = append(cases, set("counting/unset", us.TrySetPermits, k), set("leased/unset", ul.TrySetPermits, k),
				set("counting/set", s.TrySetPermits, k), set("leased/set", l.TrySetPermits, k))
		}
		inRun(t, rdb, keys, cases, nil)
		inNoKeys(t, rdb, us.Keys()...)
		inNoKeys(t, rdb, ul.Keys()...)
	})
}

func TestInputLeasedBadReleases(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c := newClient(t, rdb)
		l := newLeased(t, c, 5)
		other := newLeased(t, c, 5)
		p, err := l.Acquire(ctx, 3)
		require.NoError(t, err)
		foreign, err := other.Acquire(ctx, 2)
		require.NoError(t, err)
		released, err := l.Acquire(ctx, 1)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx, released))
		// Now l has 2 available and p holds 3; other has 3 available and foreign holds 2.
		keys := inAll(l.Keys(), other.Keys())
		over := []error{semaphore.ErrOverRelease}
		invalid := []error{aqs.ErrInvalidArgument}
		notOwner := []error{aqs.ErrNotOwner}
		cases := []inCase{
			{"ReleasePart above the permits held", func(ctx context.Context) error { return l.ReleasePart(ctx, p, 4) }, over},
			{"ReleasePart far above the permits held", func(ctx context.Context) error { return l.ReleasePart(ctx, p, 1000) }, over},
			{"Release(nil)", func(ctx context.Context) error { return l.Release(ctx, nil) }, invalid},
			{"ReleasePart(nil)", func(ctx context.Context) error { return l.ReleasePart(ctx, nil, 1) }, invalid},
			{"SetLease(nil)", func(ctx context.Context) error { return l.SetLease(ctx, nil, time.Minute) }, invalid},
			{"SetLease(nil,0)", func(ctx context.Context) error { return l.SetLease(ctx, nil, 0) }, invalid},
			{"Release(foreign)", func(ctx context.Context) error { return l.Release(ctx, foreign) }, invalid},
			{"ReleasePart(foreign)", func(ctx context.Context) error { return l.ReleasePart(ctx, foreign, 1) }, invalid},
			{"ReleasePart(foreign,all)", func(ctx context.Context) error { return l.ReleasePart(ctx, foreign, 2) }, invalid},
			{"SetLease(foreign)", func(ctx context.Context) error { return l.SetLease(ctx, foreign, time.Minute) }, invalid},
			{"SetLease(foreign,0)", func(ctx context.Context) error { return l.SetLease(ctx, foreign, 0) }, invalid},
			{"Release(released)", func(ctx context.Context) error { return l.Release(ctx, released) }, notOwner},
			{"ReleasePart(released)", func(ctx context.Context) error { return l.ReleasePart(ctx, released, 1) }, notOwner},
			{"SetLease(released)", func(ctx context.Context) error { return l.SetLease(ctx, released, time.Minute) }, notOwner},
			{"SetLease negative", func(ctx context.Context) error { return l.SetLease(ctx, p, -time.Second) }, invalid},
			{"SetLease -1ns", func(ctx context.Context) error { return l.SetLease(ctx, p, -1) }, invalid},
			{"SetLease below 1ms", func(ctx context.Context) error { return l.SetLease(ctx, p, time.Microsecond) }, invalid},
		}
		check := func(t *testing.T) {
			inPermitHolds(t, p, 3)
			inPermitHolds(t, foreign, 2)
			assert.Equal(t, 2, inAvail(t, l))
			assert.Equal(t, 3, inAvail(t, other))
		}
		inRun(t, rdb, keys, cases, check)
		// Both permits still work with their own semaphore.
		require.NoError(t, l.ReleasePart(ctx, p, 1))
		require.NoError(t, l.Release(ctx, p))
		require.NoError(t, other.Release(ctx, foreign))
		assert.Equal(t, 5, inAvail(t, l))
		assert.Equal(t, 5, inAvail(t, other))
	})
}

func TestInputLeasedExpiredPermit(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		l := newLeased(t, newClient(t, rdb), 3)
		for _, op := range []struct {
			name string
			call func(p *semaphore.Permit) error
			ends bool // the call ends the permit's acquisition, as Release does
		}{
			{"Release", func(p *semaphore.Permit) error { return l.Release(ctx, p) }, true},
			{"ReleasePart", func(p *semaphore.Permit) error { return l.ReleasePart(ctx, p, 1) }, false},
			{"ReleasePart(all)", func(p *semaphore.Permit) error { return l.ReleasePart(ctx, p, 2) }, true},
			{"SetLease", func(p *semaphore.Permit) error { return l.SetLease(ctx, p, time.Minute) }, false},
			{"SetLease(watchdog)", func(p *semaphore.Permit) error { return l.SetLease(ctx, p, 0) }, false},
		} {
			t.Run(op.name, func(t *testing.T) {
				p, err := l.Acquire(ctx, 2, aqs.WithLease(50*time.Millisecond))
				require.NoError(t, err)
				select {
				case <-p.Context().Done():
				case <-time.After(5 * time.Second):
					t.Fatal("the held context outlived its 50ms lease")
				}
				assert.ErrorIs(t, context.Cause(p.Context()), aqs.ErrLockLost)
				// The permits come back in server time, at most a few ms after the local
				// deadline.
				require.Eventually(t, func() bool { return inAvail(t, l) == 3 }, 5*time.Second, time.Millisecond)
				err = op.call(p)
				assert.ErrorIs(t, err, semaphore.ErrPermitExpired)
				assert.ErrorIs(t, err, aqs.ErrLockLost)
				assert.Equal(t, 3, inAvail(t, l))
				assert.ErrorIs(t, context.Cause(p.Context()), aqs.ErrLockLost)
				// Nothing revived the permit: it stays expired (or released) for every call.
				if !op.ends {
					err = l.Release(ctx, p)
					assert.ErrorIs(t, err, semaphore.ErrPermitExpired)
					assert.ErrorIs(t, err, aqs.ErrLockLost)
				}
				assert.ErrorIs(t, l.Release(ctx, p), aqs.ErrNotOwner)
				assert.Equal(t, 3, inAvail(t, l))
				n, err := rdb.ZCard(ctx, l.Keys()[3]).Result()
				require.NoError(t, err)
				assert.Zero(t, n, "leased permits left in %s", l.Keys()[3])
			})
		}
	})
}

func TestInputBadOptions(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		c := newClient(t, rdb)
		invalid := []error{aqs.ErrInvalidArgument}

		t.Run("constructors", func(t *testing.T) {
			name := redistest.Name(t)
			for _, k := range []struct {
				kind string
				new  func(c *aqs.Client, name string, opts ...semaphore.Option) error
			}{
				{"counting", func(c *aqs.Client, name string, opts ...semaphore.Option) error {
					_, err := semaphore.New(c, name, opts...)
					return err
				}},
				{"leased", func(c *aqs.Client, name string, opts ...semaphore.Option) error {
					_, err := semaphore.NewLeased(c, name, opts...)
					return err
				}},
			} {
				newF := k.new
				cases := []inCase{
					{k.kind + "/empty name", func(context.Context) error { return newF(c, "") }, invalid},
					{k.kind + "/nil client", func(context.Context) error { return newF(nil, name) }, invalid},
					{k.kind + "/zero option", func(context.Context) error { return newF(c, name, semaphore.Option{}) }, invalid},
					{k.kind + "/zero option after a good one", func(context.Context) error {
						return newF(c, name, semaphore.WithWaiterTimeout(time.Second), semaphore.Option{})
					}, invalid},
				}
				for _, d := range []time.Duration{0, -time.Second, time.Millisecond, 30*time.Millisecond - 1} {
					cases = append(cases, inCase{fmt.Sprintf("%s/WithWaiterTimeout(%v)", k.kind, d),
						func(context.Context) error { return newF(c, name, semaphore.WithWaiterTimeout(d)) }, invalid})
				}
				for _, d := range []time.Duration{0, -time.Second, time.Millisecond, time.Second - 1} {
					cases = append(cases, inCase{fmt.Sprintf("%s/WithExpiry(%v)", k.kind, d),
						func(context.Context) error { return newF(c, name, semaphore.WithExpiry(d)) }, invalid})
				}
				cases = append(cases, inCase{k.kind + "/zero option after WithExpiry", func(context.Context) error {
					return newF(c, name, semaphore.WithExpiry(time.Second), semaphore.Option{})
				}, invalid})
				inRun(t, rdb, nil, cases, nil)
				assert.NoError(t, newF(c, name, semaphore.WithWaiterTimeout(30*time.Millisecond)), "30ms is allowed")
				assert.NoError(t, newF(c, name, semaphore.WithExpiry(time.Second)), "1s is allowed")
			}
			s, err := semaphore.New(c, name)
			require.NoError(t, err)
			l, err := semaphore.NewLeased(c, name)
			require.NoError(t, err)
			inNoKeys(t, rdb, inAll(s.Keys(), l.Keys())...)
		})

		t.Run("calls", func(t *testing.T) {
			s := newSem(t, c, 3)
			l := newLeased(t, c, 3)
			keys := inAll(s.Keys(), l.Keys())
			stS, stL := inTake(t, rdb, s.Keys()...), inTake(t, rdb, l.Keys()...)
			try := func(opts ...aqs.WaitOption) func(context.Context) error {
				return func(ctx context.Context) error { return inTry(s.TryAcquire(ctx, 1, opts...)) }
			}
			lacq := func(opts ...aqs.LeaseOption) func(context.Context) error {
				return func(ctx context.Context) error { return inAcqL(l.Acquire(ctx, 1, opts...)) }
			}
			ltry := func(opts ...aqs.TryOption) func(context.Context) error {
				return func(ctx context.Context) error { return inTryL(l.TryAcquire(ctx, 1, opts...)) }
			}
			cases := []inCase{
				{"counting/TryAcquire(WithWait(0))", try(aqs.WithWait(0)), invalid},
				{"counting/TryAcquire(WithWait(-1s))", try(aqs.WithWait(-time.Second)), invalid},
				{"counting/TryAcquire(WaitOption{})", try(aqs.WaitOption{}), invalid},
				{"leased/Acquire(WithLease(0))", lacq(aqs.WithLease(0)), invalid},
				{"leased/Acquire(WithLease(-1s))", lacq(aqs.WithLease(-time.Second)), invalid},
				{"leased/Acquire(LeaseOption{})", lacq(aqs.LeaseOption{}), invalid},
				{"leased/TryAcquire(WithLease(0))", ltry(aqs.WithLease(0)), invalid},
				{"leased/TryAcquire(WithWait(0))", ltry(aqs.WithWait(0)), invalid},
				{"leased/TryAcquire(nil)", ltry(nil), invalid},
			}
			check := func(t *testing.T) {
				assert.Equal(t, 3, inAvail(t, s))
				assert.Equal(t, 3, inAvail(t, l))
			}
			inRun(t, rdb, keys, cases, check)
			inSettle()
			check(t)
			stS.same(t, "the counting semaphore")
			stL.same(t, "the leased semaphore")
		})
	})
}

func TestInputKeyOfAnotherType(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c := newClient(t, rdb)
		wrongType := []error{aqs.ErrWrongType}

		// The semaphore's hash is a string, as if a lock of the same name held it.
		t.Run("permits key", func(t *testing.T) {
			s, l := inUnset(t, c)
			for _, k := range []string{s.Key(), l.Key()} {
				require.NoError(t, rdb.Set(ctx, k, "precious", 0).Err())
				t.Cleanup(func() { rdb.Del(context.Background(), k) })
			}
			cases := []inCase{
				{"counting/TrySetPermits", func(ctx context.Context) error { _, err := s.TrySetPermits(ctx, 3); return err }, wrongType},
				{"counting/AddPermits(1)", func(ctx context.Context) error { return s.AddPermits(ctx, 1) }, wrongType},
				{"counting/AddPermits(-1)", func(ctx context.Context) error { return s.AddPermits(ctx, -1) }, wrongType},
				{"counting/Acquire", func(ctx context.Context) error { return s.Acquire(ctx, 1) }, wrongType},
				{"counting/TryAcquire", func(ctx context.Context) error { return inTry(s.TryAcquire(ctx, 1)) }, wrongType},
				{"counting/TryAcquire(WithWait)", func(ctx context.Context) error {
					return inTry(s.TryAcquire(ctx, 1, aqs.WithWait(time.Minute)))
				}, wrongType},
				{"counting/Release", func(ctx context.Context) error { return s.Release(ctx, 1) }, wrongType},
				{"counting/Available", func(ctx context.Context) error { _, err := s.Available(ctx); return err }, wrongType},
				{"counting/Drain", func(ctx context.Context) error { _, err := s.Drain(ctx); return err }, wrongType},
				{"leased/TrySetPermits", func(ctx context.Context) error { _, err := l.TrySetPermits(ctx, 3); return err }, wrongType},
				{"leased/AddPermits(1)", func(ctx context.Context) error { return l.AddPermits(ctx, 1) }, wrongType},
				{"leased/AddPermits(-1)", func(ctx context.Context) error { return l.AddPermits(ctx, -1) }, wrongType},
				{"leased/Acquire", func(ctx context.Context) error { return inAcqL(l.Acquire(ctx, 1)) }, wrongType},
				{"leased/TryAcquire", func(ctx context.Context) error { return inTryL(l.TryAcquire(ctx, 1)) }, wrongType},
				{"leased/TryAcquire(WithWait)", func(ctx context.Context) error {
					return inTryL(l.TryAcquire(ctx, 1, aqs.WithWait(time.Minute)))
				}, wrongType},
				{"leased/Available", func(ctx context.Context) error { _, err := l.Available(ctx); return err }, wrongType},
			}
			// Each call leaves every key as it was (the string, and no other key).
			inRun(t, rdb, inAll(s.Keys(), l.Keys()), cases, nil)
			inSettle()
			for _, k := range []string{s.Key(), l.Key()} {
				v, err := rdb.Get(ctx, k).Result()
				require.NoError(t, err)
				assert.Equal(t, "precious", v, "key %s", k)
				ttl, err := rdb.PTTL(ctx, k).Result()
				require.NoError(t, err)
				assert.Equal(t, time.Duration(-1), ttl, "an expiry was set on %s", k)
			}
			inNoKeys(t, rdb, s.Keys()[1:]...)
			inNoKeys(t, rdb, l.Keys()[1:]...)

			_, err := s.TrySetPermits(ctx, 3)
			var wt *aqs.WrongTypeError
			require.ErrorAs(t, err, &wt)
			assert.Equal(t, s.Key(), wt.Key)
		})

		// The queue list is a string: a call that must queue fails, and nothing is taken.
		t.Run("queue key", func(t *testing.T) {
			s := newSem(t, c, 1)
			l := newLeased(t, c, 1)
			require.NoError(t, s.Acquire(ctx, 1))
			p, err := l.Acquire(ctx, 1)
			require.NoError(t, err)
			for _, k := range []string{s.Keys()[1], l.Keys()[1]} {
				require.NoError(t, rdb.Set(ctx, k, "precious", 0).Err())
				t.Cleanup(func() { rdb.Del(context.Background(), k) })
			}
			keys := inAll(s.Keys(), l.Keys())
			stS, stL := inTake(t, rdb, s.Keys()...), inTake(t, rdb, l.Keys()...)
			cases := []inCase{
				{"counting/Acquire", func(ctx context.Context) error { return s.Acquire(ctx, 1) }, wrongType},
				{"counting/TryAcquire(WithWait)", func(ctx context.Context) error {
					return inTry(s.TryAcquire(ctx, 1, aqs.WithWait(time.Minute)))
				}, wrongType},
				{"leased/Acquire", func(ctx context.Context) error { return inAcqL(l.Acquire(ctx, 1)) }, wrongType},
				{"leased/TryAcquire(WithWait)", func(ctx context.Context) error {
					return inTryL(l.TryAcquire(ctx, 1, aqs.WithWait(time.Minute)))
				}, wrongType},
			}
			check := func(t *testing.T) {
				assert.Equal(t, 0, inAvail(t, s))
				assert.Equal(t, 0, inAvail(t, l))
			}
			inRun(t, rdb, keys, cases, check)
			inSettle()
			check(t)
			stS.same(t, "the counting semaphore")
			stL.same(t, "the leased semaphore")
			// No permit was lost: the one held comes back.
			require.NoError(t, s.Release(ctx, 1))
			require.NoError(t, l.Release(ctx, p))
			assert.Equal(t, 1, inAvail(t, s), "counting")
			assert.Equal(t, 1, inAvail(t, l), "leased")
		})
	})
}

func TestInputAfterCloseFailsWithErrClosed(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c, err := aqs.New(ctx, rdb)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		s := newSem(t, c, 2)
		l := newLeased(t, c, 2)
		require.NoError(t, s.Acquire(ctx, 2))
		p, err := l.Acquire(ctx, 1)
		require.NoError(t, err)
		q, err := l.Acquire(ctx, 1)
		require.NoError(t, err)
		// A waiter of each kind, blocked in Acquire when the Client closes.
		sw := make(chan error, 1)
		go func() { sw <- s.Acquire(ctx, 1) }()
		lw := make(chan error, 1)
		go func() { lw <- inAcqL(l.Acquire(ctx, 1)) }()
		inWaitQueued(t, rdb, s.Keys()[1], 1)
		inWaitQueued(t, rdb, l.Keys()[1], 1)

		require.NoError(t, c.Close())
		for name, ch := range map[string]chan error{"counting": sw, "leased": lw} {
			select {
			case err := <-ch:
				assert.ErrorIs(t, err, aqs.ErrClosed, "%s waiter", name)
			case <-time.After(5 * time.Second):
				t.Fatalf("the %s waiter did not return after Close", name)
			}
		}
		inQueueEmpty(t, rdb, s.Keys())
		inQueueEmpty(t, rdb, l.Keys())
		assert.ErrorIs(t, context.Cause(p.Context()), aqs.ErrClosed)
		assert.ErrorIs(t, context.Cause(p.Context()), aqs.ErrLockLost)

		keys := inAll(s.Keys(), l.Keys())
		closed := []error{aqs.ErrClosed}
		cases := []inCase{
			{"counting/TrySetPermits", func(ctx context.Context) error { _, err := s.TrySetPermits(ctx, 3); return err }, closed},
			{"counting/AddPermits", func(ctx context.Context) error { return s.AddPermits(ctx, 1) }, closed},
			{"counting/Acquire", func(ctx context.Context) error { return s.Acquire(ctx, 1) }, closed},
			{"counting/TryAcquire", func(ctx context.Context) error { return inTry(s.TryAcquire(ctx, 1)) }, closed},
			{"counting/TryAcquire(WithWait)", func(ctx context.Context) error {
				return inTry(s.TryAcquire(ctx, 1, aqs.WithWait(time.Minute)))
			}, closed},
			{"counting/Release", func(ctx context.Context) error { return s.Release(ctx, 1) }, closed},
			{"counting/Available", func(ctx context.Context) error { _, err := s.Available(ctx); return err }, closed},
			{"counting/Drain", func(ctx context.Context) error { _, err := s.Drain(ctx); return err }, closed},
			{"leased/TrySetPermits", func(ctx context.Context) error { _, err := l.TrySetPermits(ctx, 3); return err }, closed},
			{"leased/AddPermits", func(ctx context.Context) error { return l.AddPermits(ctx, 1) }, closed},
			{"leased/Acquire", func(ctx context.Context) error { return inAcqL(l.Acquire(ctx, 1)) }, closed},
			{"leased/TryAcquire", func(ctx context.Context) error { return inTryL(l.TryAcquire(ctx, 1)) }, closed},
			{"leased/Available", func(ctx context.Context) error { _, err := l.Available(ctx); return err }, closed},
			{"leased/Release", func(ctx context.Context) error { return l.Release(ctx, p) }, closed},
			{"leased/ReleasePart", func(ctx context.Context) error { return l.ReleasePart(ctx, p, 1) }, closed},
			{"leased/SetLease", func(ctx context.Context) error { return l.SetLease(ctx, q, time.Minute) }, closed},
		}
		inRun(t, rdb, keys, cases, nil)

		// Redis still has what the closed Client held: seen through another Client.
		c2 := newClient(t, rdb)
		s2, err := semaphore.New(c2, s.Name())
		require.NoError(t, err)
		assert.Equal(t, 0, inAvail(t, s2))
		l2, err := semaphore.NewLeased(c2, l.Name())
		require.NoError(t, err)
		assert.Equal(t, 0, inAvail(t, l2), "Close does not release the permits: they expire with their lease")
		require.NoError(t, c.Close(), "Close is idempotent")
	})
}

func TestInputCancelledContextMakesNoCall(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		c := newClient(t, rdb)
		s := newSem(t, c, 3)
		l := newLeased(t, c, 3)
		us, ul := inUnset(t, c)
		keys := inAll(s.Keys(), l.Keys())

		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		withCause, cancelCause := context.WithCancelCause(context.Background())
		cancelCause(errInCause)
		expired, cancelExpired := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancelExpired()

		var cases []inCase
		for _, x := range []struct {
			name string
			ctx  context.Context
			want error
		}{{"cancelled", cancelled, context.Canceled}, {"cause", withCause, errInCause}, {"deadline", expired, context.DeadlineExceeded}} {
			cctx, want := x.ctx, []error{x.want}
			cases = append(cases,
				inCase{"counting/Acquire/" + x.name, func(context.Context) error { return s.Acquire(cctx, 1) }, want},
				inCase{"counting/TryAcquire/" + x.name, func(context.Context) error { return inTry(s.TryAcquire(cctx, 1)) }, want},
				inCase{"counting/TryAcquire(WithWait)/" + x.name, func(context.Context) error {
					return inTry(s.TryAcquire(cctx, 1, aqs.WithWait(time.Minute)))
				}, want},
				inCase{"leased/Acquire/" + x.name, func(context.Context) error { return inAcqL(l.Acquire(cctx, 1)) }, want},
				inCase{"leased/TryAcquire/" + x.name, func(context.Context) error { return inTryL(l.TryAcquire(cctx, 1)) }, want},
				inCase{"leased/TryAcquire(WithWait)/" + x.name, func(context.Context) error {
					return inTryL(l.TryAcquire(cctx, 1, aqs.WithWait(time.Minute)))
				}, want},
				// No call: a semaphore never set is not even looked at.
				inCase{"counting/unset/Acquire/" + x.name, func(context.Context) error { return us.Acquire(cctx, 1) }, want},
				inCase{"leased/unset/Acquire/" + x.name, func(context.Context) error { return inAcqL(ul.Acquire(cctx, 1)) }, want},
			)
		}
		check := func(t *testing.T) {
			inNoKeys(t, rdb, inAll(us.Keys(), ul.Keys())...)
			inQueueEmpty(t, rdb, s.Keys())
			inQueueEmpty(t, rdb, l.Keys())
		}
		inRun(t, rdb, keys, cases, check)
		assert.Equal(t, 3, inAvail(t, s))
		assert.Equal(t, 3, inAvail(t, l))

		// Releases do not use ctx's cancellation: they go through.
		t.Run("releases", func(t *testing.T) {
			ctx := context.Background()
			require.NoError(t, s.Acquire(ctx, 2))
			require.NoError(t, s.Release(cancelled, 2))
			p, err := l.Acquire(ctx, 3)
			require.NoError(t, err)
			require.NoError(t, l.ReleasePart(cancelled, p, 1))
			require.NoError(t, l.Release(withCause, p))
			assert.Equal(t, 3, inAvail(t, s))
			assert.Equal(t, 3, inAvail(t, l))
		})
	})
}

// inWaiter is the outcome of a waiter's Acquire.
type inWaiter struct {
	p   *semaphore.Permit // leased only
	err error
}

// inAwait returns the waiter's outcome, failing the test if it takes more than a few seconds.
func inAwait(t testing.TB, ch <-chan inWaiter) inWaiter {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter did not return")
		return inWaiter{}
	}
}

// inKind abstracts the two semaphores for the cancellation tests: the test holds permits
// through hold and gives them back through give.
type inKind struct {
	name  string
	keys  []string
	avail inAvailabler
	// hold takes n permits for the test; give gives them back.
	hold func(t testing.TB, n int) (give func())
	// wait starts a waiter of client i (0 or 1) asking n permits under ctx.
	wait func(ctx context.Context, i, n int) <-chan inWaiter
	// drop gives back the n permits a waiter of client i got.
	drop func(t testing.TB, i, n int, r inWaiter)
}

// inCtx returns a context cancelled at the end of the test, for waiters that must not outlive
// it.
func inCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// inOnce returns a function that gives back permits once: called by the test, or else at
// its end, so that a failed test does not leave the next one waiting.
func inOnce(t testing.TB, give func() error) func() {
	var once sync.Once
	f := func() { once.Do(func() { assert.NoError(t, give()) }) }
	t.Cleanup(f)
	return f
}

func inKinds(t *testing.T, rdb redis.UniversalClient, total int) []inKind {
	ctx := context.Background()
	c1, c2 := newClient(t, rdb), newClient(t, rdb)
	s := newSem(t, c1, total)
	s2, err := semaphore.New(c2, s.Name())
	require.NoError(t, err)
	sems := []*semaphore.Semaphore{s, s2}
	l := newLeased(t, c1, total)
	l2, err := semaphore.NewLeased(c2, l.Name())
	require.NoError(t, err)
	leaseds := []*semaphore.Leased{l, l2}
	return []inKind{
		{
			name: "counting", keys: s.Keys(), avail: s,
			hold: func(t testing.TB, n int) func() {
				actx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				require.NoError(t, s.Acquire(actx, n))
				return inOnce(t, func() error { return s.Release(ctx, n) })
			},
			wait: func(wctx context.Context, i, n int) <-chan inWaiter {
				ch := make(chan inWaiter, 1)
				go func() { ch <- inWaiter{err: sems[i].Acquire(wctx, n)} }()
				return ch
			},
			drop: func(t testing.TB, i, n int, r inWaiter) { require.NoError(t, sems[i].Release(ctx, n)) },
		},
		{
			name: "leased", keys: l.Keys(), avail: l,
			hold: func(t testing.TB, n int) func() {
				actx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				p, err := l.Acquire(actx, n)
				require.NoError(t, err)
				return inOnce(t, func() error { return l.Release(ctx, p) })
			},
			wait: func(wctx context.Context, i, n int) <-chan inWaiter {
				ch := make(chan inWaiter, 1)
				go func() { p, err := leaseds[i].Acquire(wctx, n); ch <- inWaiter{p: p, err: err} }()
				return ch
			},
			drop: func(t testing.TB, i, n int, r inWaiter) {
				require.Equal(t, n, r.p.Permits())
				require.NoError(t, leaseds[i].Release(ctx, r.p))
			},
		},
	}
}

func TestCancelWaiterLeavesNothing(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		for _, k := range inKinds(t, rdb, 2) {
			t.Run(k.name, func(t *testing.T) {
				// A waiter alone in the queue, of the Client holding the permits (served
				// through the hub) or of another one (served through pub/sub), cancelled the
				// moment it is seen queued (it may still be subscribing to its grants, or
				// making its next attempt: the first waiter of its Client on this semaphore
				// is), or once it has settled down to wait.
				for _, when := range []string{"at once", "settled"} {
					for i, client := range []string{"same client", "other client"} {
						t.Run(client+"/"+when, func(t *testing.T) {
							give := k.hold(t, 2)
							wctx, cancel := context.WithCancelCause(context.Background())
							ch := k.wait(wctx, i, 1)
							inWaitQueued(t, rdb, k.keys[1], 1)
							if when == "settled" {
								time.Sleep(100 * time.Millisecond)
							}
							cancel(errInCause)
							r := inAwait(t, ch)
							assert.ErrorIs(t, r.err, errInCause, "Acquire must return context.Cause(ctx)")
							assert.Nil(t, r.p)
							inQueueEmpty(t, rdb, k.keys)
							assert.Equal(t, 0, inAvail(t, k.avail))
							give()
							assert.Equal(t, 2, inAvail(t, k.avail))
							inQueueEmpty(t, rdb, k.keys)
						})
					}
				}

				// A large waiter at the head gives up: the small one behind it is no longer
				// held up by it.
				t.Run("head gives up", func(t *testing.T) {
					give := k.hold(t, 2)
					bctx, cancel := context.WithCancelCause(context.Background())
					big := k.wait(bctx, 1, 2)
					inWaitQueued(t, rdb, k.keys[1], 1)
					small := k.wait(inCtx(t), 0, 1)
					inWaitQueued(t, rdb, k.keys[1], 2)
					time.Sleep(100 * time.Millisecond) // both settled down to wait
					cancel(errInCause)
					r := inAwait(t, big)
					assert.ErrorIs(t, r.err, errInCause)
					require.Error(t, r.err)
					inWaitQueued(t, rdb, k.keys[1], 1)
					assert.Equal(t, 0, inAvail(t, k.avail))
					give() // 2 back: the small one takes 1
					r = inAwait(t, small)
					require.NoError(t, r.err)
					assert.Equal(t, 1, inAvail(t, k.avail))
					inQueueEmpty(t, rdb, k.keys)
					k.drop(t, 0, 1, r)
					assert.Equal(t, 2, inAvail(t, k.avail))
				})

				// A waiter behind another gives up: its deadline goes at once, its list entry
				// when it reaches the head, and it never gets permits.
				t.Run("second gives up", func(t *testing.T) {
					give := k.hold(t, 2)
					first := k.wait(inCtx(t), 1, 2)
					inWaitQueued(t, rdb, k.keys[1], 1)
					sctx, cancel := context.WithCancelCause(context.Background())
					second := k.wait(sctx, 0, 1)
					inWaitQueued(t, rdb, k.keys[1], 2)
					time.Sleep(100 * time.Millisecond) // both settled down to wait
					cancel(errInCause)
					r := inAwait(t, second)
					assert.ErrorIs(t, r.err, errInCause)
					require.Error(t, r.err)
					z, err := rdb.ZCard(context.Background(), k.keys[2]).Result()
					require.NoError(t, err)
					assert.Equal(t, int64(1), z, "only the first waiter is live")
					give()
					r = inAwait(t, first)
					require.NoError(t, r.err)
					assert.Equal(t, 0, inAvail(t, k.avail))
					k.drop(t, 1, 2, r)
					assert.Equal(t, 2, inAvail(t, k.avail))
					inQueueEmpty(t, rdb, k.keys)
				})
			})
		}
	})
}

func TestCancelRacingAGrantLosesNoPermit(t *testing.T) {
	const iterations = 50
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		for _, k := range inKinds(t, rdb, 1) {
			t.Run(k.name, func(t *testing.T) {
				granted := 0
				var notCause []string // cancellations that returned another error than the cause
				for it := range iterations {
					i := it % 2 // the waiter's Client: the releaser's, or another
					give := k.hold(t, 1)
					wctx, cancel := context.WithCancelCause(context.Background())
					ch := k.wait(wctx, i, 1)
					inWaitQueued(t, rdb, k.keys[1], 1)
					// The release and the cancellation go together, one of them a little
					// later by a delay that varies, so that either may win.
					delay := time.Duration(it%7) * 100 * time.Microsecond
					releaseLate := (it/2)%2 == 1
					var wg sync.WaitGroup
					wg.Add(2)
					go func() {
						defer wg.Done()
						if releaseLate {
							time.Sleep(delay)
						}
						give()
					}()
					go func() {
						defer wg.Done()
						if !releaseLate {
							time.Sleep(delay)
						}
						cancel(errInCause)
					}()
					wg.Wait()
					r := inAwait(t, ch)
					held := 0
					switch {
					case r.err == nil:
						held = 1
						granted++
					case !errors.Is(r.err, errInCause):
						// Not the cause: still a cancellation, never another failure.
						require.ErrorIs(t, r.err, context.Canceled, "iteration %d", it)
						notCause = append(notCause, fmt.Sprintf("iteration %d: %v", it, r.err))
					}
					require.Equal(t, 1, inAvail(t, k.avail)+held,
						"iteration %d (waiter of client %d, granted %v): a permit was lost or duplicated", it, i, r.err == nil)
					inQueueEmpty(t, rdb, k.keys)
					if held == 1 {
						k.drop(t, i, 1, r)
					}
					require.Equal(t, 1, inAvail(t, k.avail), "iteration %d", it)
				}
				t.Logf("the waiter got the permit in %d of %d iterations", granted, iterations)
				assert.Empty(t, notCause, "the cancelled waiter returned ctx.Err() instead of context.Cause(ctx)")
			})
		}
	})
}

// A deadline that runs out while the acquiring call is on the wire: the call may have taken
// the permits in Redis when its reply is lost. Acquire then fails (with the deadline, or the
// network error it caused), and must leave nothing behind: the permits come back. The go-redis
// clients here respect context deadlines on the wire (ContextTimeoutEnabled), as an
// application's may; a read timeout or a dropped connection loses a reply alike.
func TestCancelDuringTheCallLosesNoPermit(t *testing.T) {
	const iterations = 200
	for _, top := range []struct {
		name string
		rdb  func(t *testing.T) redis.UniversalClient
	}{
		{"single", func(t *testing.T) redis.UniversalClient {
			o := redistest.Single(t).Options()
			o.ContextTimeoutEnabled = true
			c := redis.NewClient(o)
			t.Cleanup(func() { c.Close() })
			return c
		}},
		{"cluster", func(t *testing.T) redis.UniversalClient {
			redistest.Cluster(t).Client(t) // the cluster is formed and answers
			o := redistest.Cluster(t).Options()
			o.ContextTimeoutEnabled = true
			c := redis.NewClusterClient(o)
			t.Cleanup(func() { c.Close() })
			return c
		}},
	} {
		t.Run(top.name, func(t *testing.T) { inCancelDuringTheCall(t, top.rdb(t), iterations) })
	}
}

// inCancelDuringTheCall runs TestCancelDuringTheCallLosesNoPermit on rdb.
func inCancelDuringTheCall(t *testing.T, rdb redis.UniversalClient, iterations int) {
	c := newClient(t, rdb)
	s := newSem(t, c, 1)
	l := newLeased(t, c, 1)
	bg := context.Background()
	for _, k := range []struct {
		name    string
		avail   inAvailabler
		acquire func(ctx context.Context) (release func() error, err error)
	}{
		{"counting", s, func(ctx context.Context) (func() error, error) {
			err := s.Acquire(ctx, 1)
			return func() error { return s.Release(bg, 1) }, err
		}},
		{"leased", l, func(ctx context.Context) (func() error, error) {
			p, err := l.Acquire(ctx, 1)
			return func() error { return l.Release(bg, p) }, err
		}},
	} {
		t.Run(k.name, func(t *testing.T) {
			got := 0
			for i := range iterations {
				// Deadlines from 0 to 2ms: some run out before the call, some during it,
				// some after it.
				d := time.Duration(i) * 10 * time.Microsecond
				ctx, cancel := context.WithTimeout(bg, d)
				release, err := k.acquire(ctx)
				cancel()
				if err == nil {
					got++
					require.NoError(t, release(), "iteration %d", i)
				}
				require.Eventually(t, func() bool {
					n, err := k.avail.Available(bg)
					return err == nil && n == 1
				}, 2*time.Second, time.Millisecond,
					"iteration %d (deadline %v, Acquire returned %v): the permit never came back", i, d, err)
			}
			t.Logf("Acquire got the permit in %d of %d iterations", got, iterations)
		})
	}
}
