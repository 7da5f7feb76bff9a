package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/reentrant"
	"github.com/redaqs/aqs/rwlock"
	"github.com/redaqs/aqs/semaphore"
)

// unlockYes runs aqs unlock --force --yes on name and checks that it succeeded.
func unlockYes(t *testing.T, srv *redistest.Server, name string) string {
	t.Helper()
	code, stdout, stderr := aqsRun(t.Context(), nil, "unlock", "--force", "--yes", "--redis", srv.Addr(), name)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Empty(t, stderr, "nothing is asked with --yes")
	t.Logf("aqs unlock --force --yes %s:\n%s", name, stdout)
	return stdout
}

func TestUnlockForceFreesAReentrantLockAndLetsTheWaiterIn(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	a := newAdminClient(t, srv, aqs.WithWatchdogTimeout(holderWatchdog))
	b := newAdminClient(t, srv)
	la, err := reentrant.New(a, name)
	require.NoError(t, err)
	lb, err := reentrant.New(b, name)
	require.NoError(t, err)
	held, err := la.Lock(t.Context())
	require.NoError(t, err)
	chB := inBackground(func() (context.Context, error) { return lb.Lock(t.Context()) })
	st := waitState(t, srv, name, "b queued", waitingN(1))

	stdout := unlockYes(t, srv, name)
	assert.Contains(t, stdout, fmt.Sprintf("released lock %q held by %s (count 1, token -, lease ", name, st.Holders[0].Hold))
	assert.Contains(t, stdout, "; 1 waiting\n")
	// The forced release hands the lock to the head of the queue.
	assert.Contains(t, stdout, fmt.Sprintf("now: lock %q (key aqs:{%s}): held by %s\n", name, name, st.Waiters[0].Hold))
	requireLost(t, held, "a's hold")
	r := awaitBG(t, chB, "b's Lock")
	require.NoError(t, r.err)
	require.NoError(t, lb.Unlock(r.held))
}

func TestUnlockForceHandsAFairLockToTheHeadOfItsQueue(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	a := newAdminClient(t, srv, aqs.WithWatchdogTimeout(holderWatchdog))
	b, c := newAdminClient(t, srv), newAdminClient(t, srv)
	locks := make([]*fair.Lock, 3)
	for i, cl := range []*aqs.Client{a, b, c} {
		var err error
		locks[i], err = fair.New(cl, name)
		require.NoError(t, err)
	}
	held, err := locks[0].Lock(t.Context())
	require.NoError(t, err)
	inner, err := locks[0].Lock(held)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	chB := inBackground(func() (context.Context, error) { return locks[1].Lock(ctx) })
	waitState(t, srv, name, "b queued", waitingN(1))
	chC := inBackground(func() (context.Context, error) { return locks[2].Lock(ctx) })
	before := waitState(t, srv, name, "c queued", waitingN(2))

	stdout := unlockYes(t, srv, name)
	assert.Contains(t, stdout, fmt.Sprintf("released lock %q held by %s (count 2, token -, lease ", name, before.Holders[0].Hold))
	assert.Contains(t, stdout, "; 2 waiting\n")
	// The hand-off happens in the forced release itself: b holds at once, c is next.
	assert.Contains(t, stdout, fmt.Sprintf("now: lock %q (key aqs:{%s}): held by %s; 1 waiting\n", name, name, before.Waiters[0].Hold))

	requireLost(t, inner, "a's re-entry")
	requireLost(t, held, "a's hold")
	r := awaitBG(t, chB, "b's Lock")
	require.NoError(t, r.err)
	st := stateOf(t, srv, name)
	require.Len(t, st.Holders, 1)
	assert.Equal(t, before.Waiters[0].Hold, st.Holders[0].Hold)
	require.Len(t, st.Waiters, 1)
	assert.Equal(t, before.Waiters[1].Hold, st.Waiters[0].Hold)
	assert.Equal(t, 1, st.Waiters[0].Position)
	requireBlocked(t, chC, "c's Lock")

	require.NoError(t, locks[1].Unlock(r.held))
	rc := awaitBG(t, chC, "c's Lock")
	require.NoError(t, rc.err)
	require.NoError(t, locks[2].Unlock(rc.held))
}

func TestUnlockForceFreesAReadWriteLock(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	open := func(t *testing.T, name string, cs ...*aqs.Client) []*rwlock.Lock {
		ls := make([]*rwlock.Lock, len(cs))
		for i, c := range cs {
			var err error
			ls[i], err = rwlock.New(c, name)
			require.NoError(t, err)
		}
		return ls
	}

	t.Run("readers, a writer waiting", func(t *testing.T) {
		t.Parallel()
		name := redistest.Name(t)
		r0 := newAdminClient(t, srv, aqs.WithWatchdogTimeout(holderWatchdog))
		r1 := newAdminClient(t, srv, aqs.WithWatchdogTimeout(holderWatchdog))
		ls := open(t, name, r0, r1, newAdminClient(t, srv))
		h0, err := ls[0].RLock(t.Context())
		require.NoError(t, err)
		h0b, err := ls[0].RLock(h0)
		require.NoError(t, err)
		h1, err := ls[1].RLock(t.Context())
		require.NoError(t, err)
		chW := inBackground(func() (context.Context, error) { return ls[2].Lock(t.Context()) })
		before := waitState(t, srv, name, "a waiting writer", waitingN(1))

		stdout := unlockYes(t, srv, name)
		assert.Contains(t, stdout, fmt.Sprintf("released read-write lock %q held by 2 readers (", name))
		assert.Contains(t, stdout, "; 1 waiting\n")
		// The forced release gives the write side to the head of the queue.
		assert.Contains(t, stdout, fmt.Sprintf(" held by %s\n", before.Waiters[0].Hold))
		requireLost(t, h0b, "reader 0's re-entry")
		requireLost(t, h0, "reader 0")
		requireLost(t, h1, "reader 1")
		r := awaitBG(t, chW, "the writer's Lock")
		require.NoError(t, r.err)
		require.NoError(t, ls[2].Unlock(r.held))
	})

	t.Run("a writer alone", func(t *testing.T) {
		t.Parallel()
		name := redistest.Name(t)
		w := newAdminClient(t, srv, aqs.WithWatchdogTimeout(holderWatchdog))
		ls := open(t, name, w)
		held, err := ls[0].Lock(t.Context())
		require.NoError(t, err)

		// It looks like any lock, and is freed as one.
		stdout := unlockYes(t, srv, name)
		assert.Contains(t, stdout, fmt.Sprintf("released lock %q held by ", name))
		assert.Contains(t, stdout, fmt.Sprintf("now: nothing at %s (free)\n", name))
		requireLost(t, held, "the writer")
		again, err := ls[0].Lock(t.Context())
		require.NoError(t, err)
		require.NoError(t, ls[0].Unlock(again))
	})

	t.Run("a writer, a reader waiting", func(t *testing.T) {
		t.Parallel()
		name := redistest.Name(t)
		w := newAdminClient(t, srv, aqs.WithWatchdogTimeout(holderWatchdog))
		ls := open(t, name, w, newAdminClient(t, srv))
		held, err := ls[0].Lock(t.Context(), aqs.WithFencingToken())
		require.NoError(t, err)
		token, err := ls[0].Token(held)
		require.NoError(t, err)
		chR := inBackground(func() (context.Context, error) { return ls[1].RLock(t.Context()) })
		before := waitState(t, srv, name, "a waiting reader", waitingN(1))
		require.Equal(t, "read", before.Waiters[0].Mode)

		stdout := unlockYes(t, srv, name)
		assert.Contains(t, stdout, fmt.Sprintf("released read-write lock %q held by writer ", name))
		assert.Contains(t, stdout, fmt.Sprintf("(count 1, token %d, lease ", token))
		assert.Contains(t, stdout, "; 1 waiting\n")
		// The forced release lets the queued reader in.
		assert.Contains(t, stdout, fmt.Sprintf("now: read-write lock %q (key aqs:{%s}): held by reader %s\n", name, name, before.Waiters[0].Hold))
		requireLost(t, held, "the writer")
		r := awaitBG(t, chR, "the reader's RLock")
		require.NoError(t, r.err)
		require.NoError(t, ls[1].RUnlock(r.held))
	})
}

func TestUnlockForceMakesACountingSemaphoresPermitsAvailableAndServesTheQueue(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	sems := make([]*semaphore.Semaphore, 3)
	for i := range sems {
		var err error
		sems[i], err = semaphore.New(newAdminClient(t, srv), name)
		require.NoError(t, err)
	}
	t.Cleanup(func() { srv.Client(t).Del(context.Background(), sems[0].Keys()...) })
	_, err := sems[0].TrySetPermits(t.Context(), 3)
	require.NoError(t, err)
	require.NoError(t, sems[0].Acquire(t.Context(), 2))
	chB := inBackgroundErr(func() error { return sems[1].Acquire(t.Context(), 2) })
	waitState(t, srv, name, "b queued", waitingN(1))
	chC := inBackgroundErr(func() error { return sems[2].Acquire(t.Context(), 1) })
	waitState(t, srv, name, "c queued", waitingN(2))

	stdout := unlockYes(t, srv, name)
	assert.Contains(t, stdout, fmt.Sprintf("released counting semaphore %q: 2 of 3 permits taken, 1 available; 2 waiting\n", name))
	assert.Contains(t, stdout, "now: counting semaphore")
	require.NoError(t, awaitBG(t, chB, "b's Acquire").err)
	require.NoError(t, awaitBG(t, chC, "c's Acquire").err)
	st := stateOf(t, srv, name)
	assert.Equal(t, &permitCounts{Set: true, Total: 3, Available: 0, Taken: 3}, st.Permits)
	assert.Empty(t, st.Waiters)

	require.NoError(t, sems[1].Release(t.Context(), 2))
	require.NoError(t, sems[2].Release(t.Context(), 1))
	assert.Equal(t, int64(3), stateOf(t, srv, name).Permits.Available)
}

func TestUnlockForceDropsALeasedSemaphoresPermitsAndServesTheQueue(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	a := newAdminClient(t, srv, aqs.WithWatchdogTimeout(holderWatchdog))
	sa, err := semaphore.NewLeased(a, name)
	require.NoError(t, err)
	sb, err := semaphore.NewLeased(newAdminClient(t, srv), name)
	require.NoError(t, err)
	sc, err := semaphore.NewLeased(newAdminClient(t, srv), name)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Client(t).Del(context.Background(), sa.Keys()...) })
	_, err = sa.TrySetPermits(t.Context(), 3)
	require.NoError(t, err)
	p2, err := sa.Acquire(t.Context(), 2)
	require.NoError(t, err)
	p1, err := sa.Acquire(t.Context(), 1, aqs.WithLease(time.Minute))
	require.NoError(t, err)
	var pb, pc *semaphore.Permit
	chB := inBackgroundErr(func() (err error) { pb, err = sb.Acquire(t.Context(), 2); return err })
	waitState(t, srv, name, "b queued", waitingN(1))
	chC := inBackgroundErr(func() (err error) { pc, err = sc.Acquire(t.Context(), 1); return err })
	waitState(t, srv, name, "c queued", waitingN(2))

	stdout := unlockYes(t, srv, name)
	assert.Contains(t, stdout, fmt.Sprintf("released leased semaphore %q: 3 of 3 permits leased (%s: 2, %s: 1), 0 available; 2 waiting\n",
		name, p2.ID(), p1.ID()))
	requireLost(t, p2.Context(), "the watchdog's permit")
	requireLost(t, p1.Context(), "the fixed-lease permit")
	require.NoError(t, awaitBG(t, chB, "b's Acquire").err)
	require.NoError(t, awaitBG(t, chC, "c's Acquire").err)
	assert.ErrorIs(t, sa.Release(t.Context(), p2), semaphore.ErrPermitExpired)

	st := stateOf(t, srv, name)
	assert.Equal(t, &permitCounts{Set: true, Total: 3, Available: 0, Taken: 3}, st.Permits)
	var ids []string
	for _, h := range st.Holders {
		ids = append(ids, h.Hold)
	}
	assert.ElementsMatch(t, []string{pb.ID(), pc.ID()}, ids)
	require.NoError(t, sb.Release(t.Context(), pb))
	require.NoError(t, sc.Release(t.Context(), pc))
}

func TestUnlockOfWhatIsNotHeldChangesNothing(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	s, err := semaphore.NewLeased(newAdminClient(t, srv), name)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Client(t).Del(context.Background(), s.Keys()...) })
	_, err = s.TrySetPermits(t.Context(), 2)
	require.NoError(t, err)
	code, stdout, stderr := aqsRun(t.Context(), nil, "unlock", "--force", "--redis", srv.Addr(), name)
	assert.Equal(t, 0, code, stderr)
	assert.Equal(t, fmt.Sprintf("nothing to release: leased semaphore %q is not held (0 of 2 permits leased, 2 available)\n", name), stdout)
	assert.Empty(t, stderr, "nothing to ask")

	missing := redistest.Name(t)
	code, _, stderr = aqsRun(t.Context(), nil, "unlock", "--force", "--yes", "--redis", srv.Addr(), missing)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "aqs unlock: nothing at "+missing)

	foreign := redistest.Name(t)
	rdb := srv.Client(t)
	require.NoError(t, rdb.RPush(t.Context(), "aqs:{"+foreign+"}", "x").Err())
	t.Cleanup(func() { rdb.Del(context.Background(), "aqs:{"+foreign+"}") })
	code, _, stderr = aqsRun(t.Context(), nil, "unlock", "--force", "--yes", "--redis", srv.Addr(), foreign)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, foreign+" holds a list that is not an aqs primitive")
	assert.Equal(t, int64(1), rdb.LLen(t.Context(), "aqs:{"+foreign+"}").Val(), "left alone")
}

func TestUnlockCommandLineErrors(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"unlock", "--redis", srv.Addr(), "x"}, "give --force to mean it"},
		{[]string{"unlock", "--force", "x"}, "no Redis address"},
		{[]string{"unlock", "--force", "--redis", srv.Addr()}, "missing NAME"},
		{[]string{"unlock", "--force", "--redis", srv.Addr(), "x", "y"}, `unexpected argument "y"`},
	} {
		code, _, stderr := aqsRun(t.Context(), nil, tc.args...)
		assert.Equal(t, 2, code, "%q", tc.args)
		assert.Contains(t, stderr, tc.stderr, "%q", tc.args)
		assert.NotContains(t, stderr, "throwaway", "%q", tc.args)
	}
	code, _, stderr := aqsRun(t.Context(), nil, "unlock", "-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, stderr, "Usage: aqs unlock --force NAME [flags]")
	assert.Contains(t, stderr, "-yes")
}

// The tests below answer the question on stdin: they replace confirmInput, so they do not
// run in parallel (top-level parallel tests start only once every other test has returned).

// answer makes unlock read r as its stdin for the rest of the test.
func answer(t *testing.T, r io.Reader) {
	old := confirmInput
	confirmInput = r
	t.Cleanup(func() { confirmInput = old })
}

func TestUnlockAsksAndAnsweringNoChangesNothing(t *testing.T) {
	srv := redistest.Single(t)
	name := redistest.Name(t)
	a, b := newAdminClient(t, srv), newAdminClient(t, srv)
	la, err := fair.New(a, name)
	require.NoError(t, err)
	lb, err := fair.New(b, name)
	require.NoError(t, err)
	held, err := la.Lock(t.Context())
	require.NoError(t, err)
	chB := inBackground(func() (context.Context, error) { return lb.Lock(t.Context()) })
	before := waitState(t, srv, name, "b queued", waitingN(1))
	hold := before.Holders[0].Hold

	for _, in := range []string{"n\n", "\n", "no\n", "whatever\n", ""} {
		answer(t, strings.NewReader(in))
		code, stdout, stderr := aqsRun(t.Context(), nil, "unlock", "--force", "--redis", srv.Addr(), name)
		assert.Equal(t, 1, code, "%q", in)
		assert.Empty(t, stdout, "%q", in)
		assert.Contains(t, stderr, fmt.Sprintf("release lock %q held by %s (count 1, token -, lease ", name, hold), "%q", in)
		assert.Contains(t, stderr, "; 1 waiting? [y/N] ", "%q", in)
		if in == "" {
			assert.Contains(t, stderr, "aqs unlock: no answer on stdin (give --yes not to be asked): nothing changed", "%q", in)
		} else {
			assert.Contains(t, stderr, "aqs unlock: not confirmed: nothing changed", "%q", in)
		}
		after := stateOf(t, srv, name)
		require.Len(t, after.Holders, 1)
		assert.Equal(t, hold, after.Holders[0].Hold, "%q", in)
		require.Len(t, after.Waiters, 1)
		assert.Equal(t, before.Waiters[0].Hold, after.Waiters[0].Hold, "%q", in)
		assert.NoError(t, held.Err(), "%q: the holder keeps its hold", in)
		requireBlocked(t, chB, "b's Lock")
	}

	answer(t, strings.NewReader("y\n"))
	code, stdout, stderr := aqsRun(t.Context(), nil, "unlock", "--force", "--redis", srv.Addr(), name)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "released lock")
	r := awaitBG(t, chB, "b's Lock")
	require.NoError(t, r.err)
	require.NoError(t, lb.Unlock(r.held))
	assert.Error(t, la.Unlock(held), "a's hold was released")
}

// onRead is a stdin that runs f when first read, then reads s.
type onRead struct {
	once sync.Once
	f    func()
	r    io.Reader
}

func (o *onRead) Read(p []byte) (int, error) {
	o.once.Do(o.f)
	return o.r.Read(p)
}

func TestUnlockReleasesNothingWhenTheHolderChangedWhileItAsked(t *testing.T) {
	srv := redistest.Single(t)
	name := redistest.Name(t)
	la, err := reentrant.New(newAdminClient(t, srv), name)
	require.NoError(t, err)
	lb, err := reentrant.New(newAdminClient(t, srv), name)
	require.NoError(t, err)
	heldA, err := la.Lock(t.Context())
	require.NoError(t, err)
	var heldB context.Context
	answer(t, &onRead{r: strings.NewReader("yes\n"), f: func() {
		// While the question waits for its answer, a releases and b takes the lock.
		require.NoError(t, la.Unlock(heldA))
		heldB, err = lb.Lock(t.Context())
		require.NoError(t, err)
	}})
	code, stdout, stderr := aqsRun(t.Context(), nil, "unlock", "--force", "--redis", srv.Addr(), name)
	assert.Equal(t, 1, code)
	assert.Empty(t, stdout)
	st := stateOf(t, srv, name)
	require.Len(t, st.Holders, 1)
	assert.Contains(t, stderr, fmt.Sprintf("aqs unlock: %s changed while you answered (now: held by %s): nothing released; run aqs unlock again", name, st.Holders[0].Hold))
	assert.NoError(t, heldB.Err(), "b keeps the lock")
	require.NoError(t, lb.Unlock(heldB))
}
