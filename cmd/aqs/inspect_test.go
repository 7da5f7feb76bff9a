package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/election"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/reentrant"
	"github.com/redaqs/aqs/rwlock"
	"github.com/redaqs/aqs/semaphore"
)

// assertHolder checks one holder of a lock.
func assertHolder(t *testing.T, h holdInfo, c *aqs.Client, mode string, count int64, token *int64, maxLease time.Duration) {
	t.Helper()
	assert.Equal(t, c.ID(), h.Client)
	assert.True(t, strings.HasPrefix(h.Hold, c.ID()+":"), "hold %q is of client %s", h.Hold, c.ID())
	assert.Equal(t, mode, h.Mode)
	assert.Equal(t, count, h.Count)
	if token == nil {
		assert.Nil(t, h.Token)
	} else if assert.NotNil(t, h.Token) {
		assert.Equal(t, *token, *h.Token)
	}
	assert.Positive(t, h.LeaseRemainingMS)
	assert.LessOrEqual(t, h.LeaseRemainingMS, maxLease.Milliseconds())
}

// assertWaiter checks one waiter.
func assertWaiter(t *testing.T, w waitInfo, position int, c *aqs.Client, mode string, permits int64, lease, timeout time.Duration) {
	t.Helper()
	assert.Equal(t, position, w.Position)
	assert.Equal(t, c.ID(), w.Client)
	assert.True(t, strings.HasPrefix(w.Hold, c.ID()+":"), "hold %q is of client %s", w.Hold, c.ID())
	assert.Equal(t, mode, w.Mode)
	assert.Equal(t, permits, w.Permits)
	assert.Equal(t, lease.Milliseconds(), w.LeaseMS)
	assert.Positive(t, w.DeadlineInMS)
	assert.LessOrEqual(t, w.DeadlineInMS, timeout.Milliseconds())
}

// row matches a table row of the text output holding the given cells in order.
func row(cells ...string) *regexp.Regexp {
	for i, c := range cells {
		cells[i] = regexp.QuoteMeta(c)
	}
	return regexp.MustCompile(`(?m)^  ` + strings.Join(cells, ` +`) + ` *$`)
}

func TestInspectShowsAReentrantLockHeldWithReentryAndToken(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	a := newAdminClient(t, srv)
	l, err := reentrant.New(a, name)
	require.NoError(t, err)
	held, err := l.Lock(t.Context(), aqs.WithFencingToken())
	require.NoError(t, err)
	inner, err := l.Lock(held)
	require.NoError(t, err)
	token, err := aqs.FencingToken(inner)
	require.NoError(t, err)

	st := inspectJSON(t, srv, name)
	assert.Equal(t, name, st.Name)
	assert.Equal(t, "aqs:{"+name+"}", st.Key)
	assert.Equal(t, primLock, st.Kind)
	assert.True(t, st.Held)
	require.Len(t, st.Holders, 1)
	assertHolder(t, st.Holders[0], a, "exclusive", 2, &token, 30*time.Second)
	assert.Empty(t, st.Waiters)
	assert.Nil(t, st.Permits)
	assert.InDelta(t, time.Now().UnixMilli(), st.ServerTimeMS, float64(time.Minute.Milliseconds()))

	text := inspectText(t, srv, name)
	hold := st.Holders[0].Hold
	assert.Contains(t, text, fmt.Sprintf("lock %q (key aqs:{%s}): held by %s\n", name, name, hold))
	assert.Regexp(t, row("HOLD", "COUNT", "TOKEN", "LEASE LEFT"), text)
	assert.Regexp(t, regexp.MustCompile(`(?m)^  `+regexp.QuoteMeta(hold)+` +2 +`+strconv.FormatInt(token, 10)+` +[0-9.]+m?s$`), text)
	assert.Contains(t, text, "(a reentrant or a fair lock, which look alike, or a read-write lock's writer")

	require.NoError(t, l.Unlock(inner))
	require.NoError(t, l.Unlock(held))
}

// A reentrant lock's waiters of other Clients queue in Redis: inspect lists them in the order
// the lock serves them.
func TestInspectListsAReentrantLocksQueuedWaitersInOrder(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	a, b, c := newAdminClient(t, srv), newAdminClient(t, srv), newAdminClient(t, srv)
	locks := make([]*reentrant.Lock, 3)
	for i, cl := range []*aqs.Client{a, b, c} {
		var err error
		locks[i], err = reentrant.New(cl, name)
		require.NoError(t, err)
	}
	held, err := locks[0].Lock(t.Context())
	require.NoError(t, err)
	chB := inBackground(func() (context.Context, error) { return locks[1].Lock(t.Context()) })
	waitState(t, srv, name, "b queued", waitingN(1))
	chC := inBackground(func() (context.Context, error) { return locks[2].Lock(t.Context(), aqs.WithLease(10*time.Second)) })
	waitState(t, srv, name, "c queued", waitingN(2))

	st := inspectJSON(t, srv, name)
	assert.Equal(t, primLock, st.Kind, "a reentrant lock looks like any lock")
	require.Len(t, st.Holders, 1)
	assertHolder(t, st.Holders[0], a, "exclusive", 1, nil, 30*time.Second)
	require.Len(t, st.Waiters, 2)
	assertWaiter(t, st.Waiters[0], 1, b, "exclusive", 0, 30*time.Second, 5*time.Second)
	assertWaiter(t, st.Waiters[1], 2, c, "exclusive", 0, 10*time.Second, 5*time.Second)
	text := inspectText(t, srv, name)
	t.Logf("aqs inspect %s:\n%s", name, text)
	assert.Contains(t, text, fmt.Sprintf("lock %q (key aqs:{%s}): held by %s; 2 waiting\n", name, name, st.Holders[0].Hold))
	assert.Regexp(t, regexp.MustCompile(`(?m)^  `+regexp.QuoteMeta(st.Holders[0].Hold)+` +1 +- +`), text)
	assert.Contains(t, text, "queue (served in this order)")
	assert.Regexp(t, regexp.MustCompile(`(?m)^  1 +`+regexp.QuoteMeta(st.Waiters[0].Hold)+` +30s +[0-9.]+m?s$`), text)
	assert.Regexp(t, regexp.MustCompile(`(?m)^  2 +`+regexp.QuoteMeta(st.Waiters[1].Hold)+` +10s +[0-9.]+m?s$`), text)

	// They are served in that order.
	require.NoError(t, locks[0].Unlock(held))
	r := awaitBG(t, chB, "b's Lock")
	require.NoError(t, r.err)
	requireBlocked(t, chC, "c's Lock")
	after := stateOf(t, srv, name)
	require.Len(t, after.Holders, 1)
	assert.Equal(t, st.Waiters[0].Hold, after.Holders[0].Hold)
	require.Len(t, after.Waiters, 1)
	assert.Equal(t, st.Waiters[1].Hold, after.Waiters[0].Hold)
	assert.Equal(t, 1, after.Waiters[0].Position)
	require.NoError(t, locks[1].Unlock(r.held))
	rc := awaitBG(t, chC, "c's Lock")
	require.NoError(t, rc.err)
	require.NoError(t, locks[2].Unlock(rc.held))
}

func TestInspectFindsNothingAtAFreeLock(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	l, err := reentrant.New(newAdminClient(t, srv), name)
	require.NoError(t, err)
	held, err := l.Lock(t.Context())
	require.NoError(t, err)
	require.NoError(t, l.Unlock(held))
	for _, json := range []bool{false, true} {
		args := []string{"inspect", "--redis", srv.Addr(), name}
		if json {
			args = append(args, "--json")
		}
		code, stdout, stderr := aqsRun(t.Context(), nil, args...)
		assert.Equal(t, 1, code)
		assert.Empty(t, stdout)
		assert.Contains(t, stderr, fmt.Sprintf("aqs inspect: nothing at %s: no key aqs:{%s}", name, name))
	}
}

func TestInspectShowsAFairLocksQueueInOrder(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	a, b, c := newAdminClient(t, srv), newAdminClient(t, srv), newAdminClient(t, srv)
	locks := make([]*fair.Lock, 3)
	for i, cl := range []*aqs.Client{a, b, c} {
		var err error
		locks[i], err = fair.New(cl, name)
		require.NoError(t, err)
	}
	held, err := locks[0].Lock(t.Context(), aqs.WithFencingToken())
	require.NoError(t, err)
	inner, err := locks[0].Lock(held)
	require.NoError(t, err)
	token, err := aqs.FencingToken(held)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	chB := inBackground(func() (context.Context, error) { return locks[1].Lock(ctx) })
	waitState(t, srv, name, "b queued", waitingN(1))
	chC := inBackground(func() (context.Context, error) { return locks[2].Lock(ctx) })
	waitState(t, srv, name, "c queued", waitingN(2))

	st := inspectJSON(t, srv, name)
	assert.Equal(t, primLock, st.Kind, "a fair lock looks like any lock")
	assert.True(t, st.Held)
	require.Len(t, st.Holders, 1)
	assertHolder(t, st.Holders[0], a, "exclusive", 2, &token, 30*time.Second)
	require.Len(t, st.Waiters, 2)
	assertWaiter(t, st.Waiters[0], 1, b, "exclusive", 0, 30*time.Second, 5*time.Second)
	assertWaiter(t, st.Waiters[1], 2, c, "exclusive", 0, 30*time.Second, 5*time.Second)
	assert.Zero(t, st.StaleEntries)

	text := inspectText(t, srv, name)
	t.Logf("aqs inspect %s:\n%s", name, text)
	assert.Contains(t, text, fmt.Sprintf("lock %q (key aqs:{%s}): held by %s; 2 waiting\n", name, name, st.Holders[0].Hold))
	assert.Contains(t, text, "queue (served in this order)")
	assert.Regexp(t, row("POS", "HOLD", "LEASE", "DEADLINE IN"), text)
	assert.Regexp(t, regexp.MustCompile(`(?m)^  1 +`+regexp.QuoteMeta(st.Waiters[0].Hold)+` +30s +[0-9.]+m?s$`), text)
	assert.Regexp(t, regexp.MustCompile(`(?m)^  2 +`+regexp.QuoteMeta(st.Waiters[1].Hold)+` +30s +[0-9.]+m?s$`), text)

	require.NoError(t, locks[0].Unlock(inner))
	require.NoError(t, locks[0].Unlock(held))
	r := awaitBG(t, chB, "b's Lock")
	require.NoError(t, r.err)
	cancel()
	awaitBG(t, chC, "c's Lock")
	require.NoError(t, locks[1].Unlock(r.held))
}

func TestInspectShowsAReadWriteLock(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	// open returns the lock of name for each of n new Clients.
	open := func(t *testing.T, name string, n int) ([]*aqs.Client, []*rwlock.Lock) {
		cs := make([]*aqs.Client, n)
		ls := make([]*rwlock.Lock, n)
		for i := range n {
			cs[i] = newAdminClient(t, srv)
			var err error
			ls[i], err = rwlock.New(cs[i], name)
			require.NoError(t, err)
		}
		return cs, ls
	}

	t.Run("readers", func(t *testing.T) {
		t.Parallel()
		name := redistest.Name(t)
		cs, ls := open(t, name, 2)
		r0, err := ls[0].RLock(t.Context())
		require.NoError(t, err)
		r0b, err := ls[0].RLock(r0)
		require.NoError(t, err)
		r1, err := ls[1].RLock(t.Context())
		require.NoError(t, err)

		st := inspectJSON(t, srv, name)
		assert.Equal(t, primRW, st.Kind)
		assert.True(t, st.Held)
		require.Len(t, st.Holders, 2)
		slices.SortFunc(st.Holders, func(x, y holdInfo) int { return int(y.Count - x.Count) })
		assertHolder(t, st.Holders[0], cs[0], "read", 2, nil, 30*time.Second)
		assertHolder(t, st.Holders[1], cs[1], "read", 1, nil, 30*time.Second)
		assert.Empty(t, st.Waiters)

		text := inspectText(t, srv, name)
		assert.Contains(t, text, fmt.Sprintf("read-write lock %q (key aqs:{%s}): held by 2 readers (", name, name))
		assert.Regexp(t, row("HOLD", "COUNT", "LEASE LEFT"), text)
		assert.Regexp(t, regexp.MustCompile(`(?m)^  `+regexp.QuoteMeta(st.Holders[0].Hold)+` +2 +[0-9.]+m?s$`), text)

		require.NoError(t, ls[0].RUnlock(r0b))
		require.NoError(t, ls[0].RUnlock(r0))
		require.NoError(t, ls[1].RUnlock(r1))
	})

	t.Run("writer, then a reader waiting", func(t *testing.T) {
		t.Parallel()
		name := redistest.Name(t)
		cs, ls := open(t, name, 2)
		w, err := ls[0].Lock(t.Context(), aqs.WithFencingToken())
		require.NoError(t, err)
		token, err := ls[0].Token(w)
		require.NoError(t, err)

		// A writer alone is one key holding a lock value: it looks like any lock.
		st := inspectJSON(t, srv, name)
		assert.Equal(t, primLock, st.Kind)
		require.Len(t, st.Holders, 1)
		assertHolder(t, st.Holders[0], cs[0], "exclusive", 1, &token, 30*time.Second)

		chR := inBackground(func() (context.Context, error) { return ls[1].RLock(t.Context()) })
		st = waitState(t, srv, name, "a waiting reader", waitingN(1))
		assert.Equal(t, primRW, st.Kind, "its queue's read member tells a read-write lock")
		st = inspectJSON(t, srv, name)
		assert.Equal(t, primRW, st.Kind)
		assert.True(t, st.Held)
		require.Len(t, st.Holders, 1)
		assertHolder(t, st.Holders[0], cs[0], "write", 1, &token, 30*time.Second)
		require.Len(t, st.Waiters, 1)
		assertWaiter(t, st.Waiters[0], 1, cs[1], "read", 0, 30*time.Second, 5*time.Second)
		text := inspectText(t, srv, name)
		t.Logf("aqs inspect %s:\n%s", name, text)
		assert.Contains(t, text, fmt.Sprintf("read-write lock %q (key aqs:{%s}): held by writer %s; 1 waiting\n", name, name, st.Holders[0].Hold))
		assert.Contains(t, text, "writer\n")
		assert.Regexp(t, row("POS", "HOLD", "MODE", "LEASE", "DEADLINE IN"), text)
		assert.Regexp(t, regexp.MustCompile(`(?m)^  1 +`+regexp.QuoteMeta(st.Waiters[0].Hold)+` +read +30s +[0-9.]+m?s$`), text)

		require.NoError(t, ls[0].Unlock(w))
		r := awaitBG(t, chR, "the reader's RLock")
		require.NoError(t, r.err)
		require.NoError(t, ls[1].RUnlock(r.held))
	})

	t.Run("a writer waiting, a reader queued behind it", func(t *testing.T) {
		t.Parallel()
		name := redistest.Name(t)
		cs, ls := open(t, name, 3)
		r0, err := ls[0].RLock(t.Context())
		require.NoError(t, err)
		chW := inBackground(func() (context.Context, error) { return ls[1].Lock(t.Context(), aqs.WithLease(20*time.Second)) })
		waitState(t, srv, name, "a waiting writer", waitingN(1))
		// The fair mode: a new reader does not pass the waiting writer.
		chR := inBackground(func() (context.Context, error) { return ls[2].RLock(t.Context()) })
		waitState(t, srv, name, "a reader queued behind it", waitingN(2))

		st := inspectJSON(t, srv, name)
		assert.Equal(t, primRW, st.Kind)
		assert.True(t, st.Held)
		require.Len(t, st.Holders, 1)
		assertHolder(t, st.Holders[0], cs[0], "read", 1, nil, 30*time.Second)
		require.Len(t, st.Waiters, 2)
		assertWaiter(t, st.Waiters[0], 1, cs[1], "write", 0, 20*time.Second, 5*time.Second)
		assertWaiter(t, st.Waiters[1], 2, cs[2], "read", 0, 30*time.Second, 5*time.Second)
		text := inspectText(t, srv, name)
		t.Logf("aqs inspect %s:\n%s", name, text)
		assert.Contains(t, text, fmt.Sprintf("held by reader %s; 2 waiting\n", st.Holders[0].Hold))
		assert.Contains(t, text, "queue (served in this order)")
		assert.Regexp(t, regexp.MustCompile(`(?m)^  1 +`+regexp.QuoteMeta(st.Waiters[0].Hold)+` +write +20s +[0-9.]+m?s$`), text)
		assert.Regexp(t, regexp.MustCompile(`(?m)^  2 +`+regexp.QuoteMeta(st.Waiters[1].Hold)+` +read +30s +[0-9.]+m?s$`), text)

		// They are served in that order: the writer when the reader leaves, then the reader.
		require.NoError(t, ls[0].RUnlock(r0))
		rw := awaitBG(t, chW, "the writer's Lock")
		require.NoError(t, rw.err)
		requireBlocked(t, chR, "the queued reader's RLock")
		after := stateOf(t, srv, name)
		require.Len(t, after.Holders, 1)
		assert.Equal(t, "write", after.Holders[0].Mode)
		assert.Equal(t, st.Waiters[0].Hold, after.Holders[0].Hold)
		require.Len(t, after.Waiters, 1)
		assert.Equal(t, st.Waiters[1].Hold, after.Waiters[0].Hold)
		assert.Equal(t, 1, after.Waiters[0].Position)
		require.NoError(t, ls[1].Unlock(rw.held))
		rr := awaitBG(t, chR, "the queued reader's RLock")
		require.NoError(t, rr.err)
		require.NoError(t, ls[2].RUnlock(rr.held))
	})
}

func TestInspectShowsACountingSemaphore(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	a, b, c := newAdminClient(t, srv), newAdminClient(t, srv), newAdminClient(t, srv)
	sems := make([]*semaphore.Semaphore, 3)
	for i, cl := range []*aqs.Client{a, b, c} {
		var err error
		sems[i], err = semaphore.New(cl, name)
		require.NoError(t, err)
	}
	t.Cleanup(func() { srv.Client(t).Del(context.Background(), sems[0].Keys()...) })
	ok, err := sems[0].TrySetPermits(t.Context(), 3)
	require.NoError(t, err)
	require.True(t, ok)

	st := inspectJSON(t, srv, name)
	assert.Equal(t, primSemaphore, st.Kind)
	assert.False(t, st.Held)
	assert.Equal(t, &permitCounts{Set: true, Total: 3, Available: 3, Taken: 0}, st.Permits)
	assert.Contains(t, inspectText(t, srv, name),
		fmt.Sprintf("counting semaphore %q (key aqs:{%s}): 0 of 3 permits taken, 3 available\n", name, name))

	require.NoError(t, sems[0].Acquire(t.Context(), 2))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	chB := inBackgroundErr(func() error { return sems[1].Acquire(ctx, 2) })
	waitState(t, srv, name, "b queued", waitingN(1))
	chC := inBackgroundErr(func() error { return sems[2].Acquire(ctx, 1) })
	waitState(t, srv, name, "c queued", waitingN(2))

	st = inspectJSON(t, srv, name)
	assert.True(t, st.Held)
	assert.Equal(t, &permitCounts{Set: true, Total: 3, Available: 1, Taken: 2}, st.Permits)
	assert.Empty(t, st.Holders)
	require.Len(t, st.Waiters, 2)
	assertWaiter(t, st.Waiters[0], 1, b, "acquire", 2, 0, 5*time.Second)
	assertWaiter(t, st.Waiters[1], 2, c, "acquire", 1, 0, 5*time.Second)
	text := inspectText(t, srv, name)
	assert.Contains(t, text, "2 of 3 permits taken, 1 available; 2 waiting\n")
	assert.Regexp(t, row("POS", "HOLD", "PERMITS", "DEADLINE IN"), text)
	assert.Regexp(t, regexp.MustCompile(`(?m)^  1 +`+regexp.QuoteMeta(st.Waiters[0].Hold)+` +2 +[0-9.]+m?s$`), text)
	assert.Regexp(t, regexp.MustCompile(`(?m)^  2 +`+regexp.QuoteMeta(st.Waiters[1].Hold)+` +1 +[0-9.]+m?s$`), text)
	assert.Contains(t, text, "counting permits have no owner")

	cancel()
	awaitBG(t, chB, "b's Acquire")
	awaitBG(t, chC, "c's Acquire")
	require.NoError(t, sems[0].Release(t.Context(), 2))
}

func TestInspectShowsALeasedSemaphore(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	a, b, c := newAdminClient(t, srv), newAdminClient(t, srv), newAdminClient(t, srv)
	sems := make([]*semaphore.Leased, 3)
	for i, cl := range []*aqs.Client{a, b, c} {
		var err error
		sems[i], err = semaphore.NewLeased(cl, name)
		require.NoError(t, err)
	}
	t.Cleanup(func() { srv.Client(t).Del(context.Background(), sems[0].Keys()...) })
	ok, err := sems[0].TrySetPermits(t.Context(), 3)
	require.NoError(t, err)
	require.True(t, ok)

	st := inspectJSON(t, srv, name)
	assert.Equal(t, primLeased, st.Kind)
	assert.False(t, st.Held)
	assert.Equal(t, &permitCounts{Set: true, Total: 3, Available: 3, Taken: 0}, st.Permits)
	assert.Contains(t, inspectText(t, srv, name),
		fmt.Sprintf("leased semaphore %q (key aqs:{%s}): 0 of 3 permits leased, 3 available\n", name, name))

	p2, err := sems[0].Acquire(t.Context(), 2)
	require.NoError(t, err)
	p1, err := sems[0].Acquire(t.Context(), 1, aqs.WithLease(time.Minute))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	chB := inBackground(func() (context.Context, error) { _, err := sems[1].Acquire(ctx, 2); return nil, err })
	waitState(t, srv, name, "b queued", waitingN(1))
	chC := inBackground(func() (context.Context, error) {
		_, err := sems[2].Acquire(ctx, 1, aqs.WithLease(10*time.Second))
		return nil, err
	})
	waitState(t, srv, name, "c queued", waitingN(2))

	st = inspectJSON(t, srv, name)
	assert.True(t, st.Held)
	assert.Equal(t, &permitCounts{Set: true, Total: 3, Available: 0, Taken: 3}, st.Permits)
	require.Len(t, st.Holders, 2)
	byID := map[string]holdInfo{}
	for _, h := range st.Holders {
		byID[h.Hold] = h
		assert.Equal(t, "permit", h.Mode)
		assert.Equal(t, a.ID(), h.Client)
		assert.Equal(t, int64(1), h.Count)
		assert.Nil(t, h.Token)
		assert.Positive(t, h.LeaseRemainingMS)
	}
	assert.Equal(t, int64(2), byID[p2.ID()].Permits)
	assert.LessOrEqual(t, byID[p2.ID()].LeaseRemainingMS, int64(30000))
	assert.Equal(t, int64(1), byID[p1.ID()].Permits)
	assert.Greater(t, byID[p1.ID()].LeaseRemainingMS, int64(30000), "the fixed lease of a minute")
	require.Len(t, st.Waiters, 2)
	assertWaiter(t, st.Waiters[0], 1, b, "acquire", 2, 30*time.Second, 5*time.Second)
	assertWaiter(t, st.Waiters[1], 2, c, "acquire", 1, 10*time.Second, 5*time.Second)

	text := inspectText(t, srv, name)
	t.Logf("aqs inspect %s:\n%s", name, text)
	assert.Contains(t, text, "3 of 3 permits leased, 0 available; 2 waiting\n")
	assert.Regexp(t, row("PERMIT", "PERMITS", "LEASE LEFT"), text)
	assert.Regexp(t, regexp.MustCompile(`(?m)^  `+regexp.QuoteMeta(p2.ID())+` +2 +[0-9.]+m?s$`), text)
	assert.Regexp(t, row("POS", "HOLD", "PERMITS", "LEASE", "DEADLINE IN"), text)
	assert.Regexp(t, regexp.MustCompile(`(?m)^  2 +`+regexp.QuoteMeta(st.Waiters[1].Hold)+` +1 +10s +[0-9.]+m?s$`), text)

	cancel()
	awaitBG(t, chB, "b's Acquire")
	awaitBG(t, chC, "c's Acquire")
	require.NoError(t, sems[0].Release(t.Context(), p2))
	require.NoError(t, sems[0].Release(t.Context(), p1))
}

func TestInspectJSONHasTheDocumentedShape(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	a, b := newAdminClient(t, srv), newAdminClient(t, srv)
	sa, err := semaphore.NewLeased(a, name)
	require.NoError(t, err)
	sb, err := semaphore.NewLeased(b, name)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Client(t).Del(context.Background(), sa.Keys()...) })
	_, err = sa.TrySetPermits(t.Context(), 1)
	require.NoError(t, err)
	p, err := sa.Acquire(t.Context(), 1)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch := inBackground(func() (context.Context, error) { _, err := sb.Acquire(ctx, 1); return nil, err })
	waitState(t, srv, name, "b queued", waitingN(1))

	code, stdout, stderr := aqsRun(t.Context(), nil, "inspect", "--json", "--redis", srv.Addr(), name)
	require.Equal(t, 0, code, stderr)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &m))
	keys := func(m map[string]any) []string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		return ks
	}
	assert.ElementsMatch(t, []string{"name", "key", "kind", "server_time_ms", "held", "holders", "waiters",
		"stale_entries", "permits"}, keys(m))
	assert.Equal(t, "leased-semaphore", m["kind"])
	h := m["holders"].([]any)[0].(map[string]any)
	assert.ElementsMatch(t, []string{"hold", "client", "mode", "count", "permits", "token", "lease_remaining_ms"}, keys(h))
	assert.Nil(t, h["token"])
	w := m["waiters"].([]any)[0].(map[string]any)
	assert.ElementsMatch(t, []string{"position", "hold", "client", "mode", "permits", "lease_ms", "deadline_in_ms"}, keys(w))
	assert.ElementsMatch(t, []string{"set", "total", "available", "taken"}, keys(m["permits"].(map[string]any)))

	cancel()
	awaitBG(t, ch, "b's Acquire")
	require.NoError(t, sa.Release(t.Context(), p))
}

func TestInspectReportsWhatIsNotAnAqsPrimitive(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	rdb := srv.Client(t)
	ctx := t.Context()
	for _, tc := range []struct {
		what   string
		set    func(key string) error
		suffix string // of the key named in the message
		typ    string
	}{
		{"a plain string", func(k string) error { return rdb.Set(ctx, k, "hello", time.Minute).Err() }, "", "string"},
		{"a string shaped almost like a lock value", func(k string) error {
			return rdb.Set(ctx, k, "123e4567-e89b-12d3-a456-426614174000:1 zz", time.Minute).Err()
		}, "", "string"},
		{"a list", func(k string) error { return rdb.RPush(ctx, k, "x").Err() }, "", "list"},
		{"a set", func(k string) error { return rdb.SAdd(ctx, k, "x").Err() }, "", "set"},
		{"a zset", func(k string) error { return rdb.ZAdd(ctx, k, redis.Z{Score: 1, Member: "x"}).Err() }, "", "zset"},
		{"a hash of other fields", func(k string) error { return rdb.HSet(ctx, k, "t", 3, "other", 1).Err() }, "", "hash"},
		{"a reentrant lock's reservation in the former layout (its turns field is gone)", func(k string) error {
			return rdb.Set(ctx, k, "0f8a9c1e-2b3d-4e5f-8a6b-7c8d9e0f1a2b:r w r1e2d3c4b-5a69-4788-9a0b-c1d2e3f4a5b6", time.Minute).Err()
		}, "", "string"},
		{"a companion of another type", func(k string) error { return rdb.Set(ctx, k+":q", "x", time.Minute).Err() }, ":q", "string"},
	} {
		name := redistest.Name(t)
		key := "aqs:{" + name + "}"
		require.NoError(t, tc.set(key), tc.what)
		t.Cleanup(func() { rdb.Del(context.Background(), key, key+":q") })
		code, stdout, stderr := aqsRun(ctx, nil, "inspect", "--redis", srv.Addr(), name)
		assert.Equal(t, 1, code, tc.what)
		assert.Empty(t, stdout, tc.what)
		assert.Contains(t, stderr, fmt.Sprintf("aqs inspect: %s holds a %s that is not an aqs primitive (key %s%s)\n",
			name, tc.typ, key, tc.suffix), tc.what)
	}
}

func TestInspectAddressAndCommandLineErrors(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	// Port 1 (tcpmux) has no listener: a free port picked from the ephemeral range could be
	// taken by a server of a test running meanwhile.
	refused := "127.0.0.1:1"
	for _, tc := range []struct {
		args   []string
		vars   map[string]string
		code   int
		stderr string
	}{
		{[]string{"inspect", "x"}, nil, 2, "no Redis address: give --redis host:port or set REDIS_URL"},
		{[]string{"inspect", "--redis", refused, "x"}, nil, 1, "cannot reach Redis at " + refused + ": connection refused"},
		{[]string{"inspect", "x"}, map[string]string{"REDIS_URL": "redis://" + refused}, 1, "cannot reach Redis at redis://" + refused + ": connection refused"},
		{[]string{"inspect", "--redis", srv.Addr()}, nil, 2, "missing NAME"},
		{[]string{"inspect", "--redis", srv.Addr(), "a", "b"}, nil, 2, `unexpected argument "b": one NAME only`},
		{[]string{"inspect", "--redis", srv.Addr(), ""}, nil, 2, "empty NAME"},
		{[]string{"inspect", "--redis", srv.Addr(), "--prefix", "", "x"}, nil, 2, "--prefix: aqs: invalid argument: empty key prefix"},
		{[]string{"inspect", "--redis", srv.Addr(), "--prefix", "a{b", "x"}, nil, 2, "contains a brace"},
		{[]string{"inspect", "--redis", "localhost", "x"}, nil, 2, `bad Redis address "localhost"`},
		{[]string{"inspect", "--redis", "a:1,b", "x"}, nil, 2, `bad Redis Cluster address "b"`},
		{[]string{"inspect", "--nope", "x"}, nil, 2, "flag provided but not defined: -nope"},
	} {
		code, stdout, stderr := aqsRun(t.Context(), tc.vars, tc.args...)
		assert.Equal(t, tc.code, code, "%q", tc.args)
		assert.Empty(t, stdout, "%q", tc.args)
		assert.Contains(t, stderr, tc.stderr, "%q", tc.args)
		assert.NotContains(t, stderr, "throwaway", "%q: inspect never starts a server", tc.args)
	}
}

func TestInspectTakesFlagsAnywhereAndTheNameAfterDashes(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	c := newAdminClient(t, srv)
	name := "-" + redistest.Name(t)
	l, err := reentrant.New(c, name)
	require.NoError(t, err)
	held, err := l.Lock(t.Context())
	require.NoError(t, err)
	for _, args := range [][]string{
		{"--redis", srv.Addr(), "--json", "--", name},
		{"--json", "--redis=" + srv.Addr(), "--", name},
	} {
		code, stdout, stderr := aqsRun(t.Context(), nil, append([]string{"inspect"}, args...)...)
		require.Equal(t, 0, code, "%q: %s", args, stderr)
		assert.Contains(t, stdout, `"kind": "lock"`, "%q", args)
	}
	other := redistest.Name(t)
	lo, err := reentrant.New(c, other)
	require.NoError(t, err)
	heldO, err := lo.Lock(t.Context())
	require.NoError(t, err)
	code, stdout, stderr := aqsRun(t.Context(), nil, "inspect", other, "--json", "--redis", srv.Addr())
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, `"kind": "lock"`)
	require.NoError(t, l.Unlock(held))
	require.NoError(t, lo.Unlock(heldO))
}

func TestInspectUsesThePrefixAndEscapesTheName(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := "a{b}%c-" + redistest.Name(t)
	rdb := srv.Client(t)
	c, err := aqs.New(t.Context(), rdb, aqs.WithKeyPrefix("other"))
	require.NoError(t, err)
	defer c.Close()
	l, err := fair.New(c, name)
	require.NoError(t, err)
	held, err := l.Lock(t.Context())
	require.NoError(t, err)

	code, _, stderr := aqsRun(t.Context(), nil, "inspect", "--redis", srv.Addr(), name)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "nothing at "+name)
	code, stdout, stderr := aqsRun(t.Context(), map[string]string{"REDIS_URL": srv.Addr()}, "inspect", "--prefix", "other", "--json", name)
	require.Equal(t, 0, code, stderr)
	var st nameState
	require.NoError(t, json.Unmarshal([]byte(stdout), &st))
	assert.Equal(t, l.Key(), st.Key)
	// The name's own hash tag, {b}, places it in that slot (see internal/core/keys.go).
	assert.Equal(t, "other:{b}{a%7Bb%7D%25c-"+strings.TrimPrefix(name, "a{b}%c-")+"}", st.Key)
	assert.True(t, st.Held)
	require.NoError(t, l.Unlock(held))
}

func TestInspectReachesARedisCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.Cluster(t)
	cc := cl.Client(t)
	c, err := aqs.New(t.Context(), cc)
	require.NoError(t, err)
	defer c.Close()
	// A name served by another master than the first, the one the single address names.
	var name string
	for {
		name = redistest.Name(t)
		m, err := cc.MasterForKey(t.Context(), "aqs:{"+name+"}")
		require.NoError(t, err)
		if m.Options().Addr != cl.Addrs()[0] {
			break
		}
	}
	l, err := fair.New(c, name)
	require.NoError(t, err)
	held, err := l.Lock(t.Context(), aqs.WithFencingToken())
	require.NoError(t, err)
	token, err := aqs.FencingToken(held)
	require.NoError(t, err)

	for _, addr := range []string{cl.Addrs()[0], strings.Join(cl.Addrs(), ","),
		"redis://" + cl.Addrs()[0] + "?addr=" + cl.Addrs()[1]} {
		code, stdout, stderr := aqsRun(t.Context(), nil, "inspect", "--redis", addr, "--json", name)
		require.Equal(t, 0, code, "%s: %s", addr, stderr)
		var st nameState
		require.NoError(t, json.Unmarshal([]byte(stdout), &st), addr)
		require.Len(t, st.Holders, 1, addr)
		assertHolder(t, st.Holders[0], c, "exclusive", 1, &token, 30*time.Second)
	}
	require.NoError(t, l.Unlock(held))
}

func TestNewUniversalClientTellsClusterAndSentinelAddresses(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"127.0.0.1:6379":                                     "*redis.Client",
		"redis://127.0.0.1:6379/1":                           "*redis.Client",
		"unix:///run/redis.sock":                             "*redis.Client",
		"10.0.0.1:7000,10.0.0.2:7000":                        "*redis.ClusterClient",
		"redis://10.0.0.1:7000?addr=10.0.0.2:7000":           "*redis.ClusterClient",
		"redis://10.0.0.1:26379?master_name=mymaster":        "*redis.Client",
		"rediss://u:p@10.0.0.1:26379?master_name=m&addr=x:1": "*redis.Client",
	} {
		rdb, single, err := newUniversalClient(addr)
		if !assert.NoError(t, err, addr) {
			continue
		}
		got := fmt.Sprintf("%T", rdb)
		assert.Equal(t, !strings.Contains(addr, ",") && !strings.Contains(addr, "?"), single, addr)
		if strings.Contains(addr, "master_name") {
			// NewFailoverClient returns a *redis.Client that talks to the master Sentinel names.
			assert.Equal(t, want, got, addr)
			assert.Equal(t, "FailoverClient", rdb.(*redis.Client).Options().Addr, addr)
		} else {
			assert.Equal(t, want, got, addr)
		}
		rdb.Close()
	}
	for _, bad := range []string{"host", "a:1,b", "redis://h:1?master_name=m&nope=1", "redis://h:1?addr=x:1&nope=1"} {
		_, _, err := newUniversalClient(bad)
		assert.Error(t, err, bad)
	}
}

func TestInspectSkipsStaleQueueEntriesAndJudgesTheLeaseByItsRecordedEnd(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	rdb := srv.Client(t)
	ctx := t.Context()
	now := func() int64 {
		tm, err := rdb.Time(ctx).Result()
		require.NoError(t, err)
		return tm.UnixMilli()
	}
	const (
		holder = "123e4567-e89b-12d3-a456-426614174000:7"
		ghost  = "223e4567-e89b-12d3-a456-426614174000:1 30000" // gave up: out of d
		dead   = "323e4567-e89b-12d3-a456-426614174000:1 30000" // its deadline passed
		live   = "423e4567-e89b-12d3-a456-426614174000:1 20000"
	)
	// A lock as lock_acquire.lua leaves it with a queue, the values written by hand.
	name := redistest.Name(t)
	key := "aqs:{" + name + "}"
	t.Cleanup(func() { rdb.Del(context.Background(), key, key+":q", key+":d") })
	n := now()
	require.NoError(t, rdb.Set(ctx, key, fmt.Sprintf("%s n2 t77 w e%d", holder, n+10000), time.Minute).Err())
	require.NoError(t, rdb.RPush(ctx, key+":q", ghost, dead, live).Err())
	require.NoError(t, rdb.ZAdd(ctx, key+":d", redis.Z{Score: float64(n - 1000), Member: dead},
		redis.Z{Score: float64(n + 5000), Member: live}).Err())

	st := inspectJSON(t, srv, name)
	assert.Equal(t, primLock, st.Kind)
	assert.True(t, st.Held)
	require.Len(t, st.Holders, 1)
	assert.Equal(t, holder, st.Holders[0].Hold)
	assert.Equal(t, int64(2), st.Holders[0].Count)
	assert.Equal(t, int64(77), *st.Holders[0].Token)
	assert.InDelta(t, 10000, st.Holders[0].LeaseRemainingMS, 2000, "the lease runs to e, not to the key's TTL")
	require.Len(t, st.Waiters, 1)
	assert.Equal(t, 1, st.Waiters[0].Position)
	assert.Equal(t, "423e4567-e89b-12d3-a456-426614174000:1", st.Waiters[0].Hold)
	assert.Equal(t, int64(20000), st.Waiters[0].LeaseMS)
	assert.Equal(t, 2, st.StaleEntries)
	assert.Contains(t, inspectText(t, srv, name), "2 stale entries")

	// The holder's lease end passed: the lock is free, its key kept for the queue's head.
	require.NoError(t, rdb.Set(ctx, key, fmt.Sprintf("%s w e%d", holder, now()-1), time.Minute).Err())
	st = inspectJSON(t, srv, name)
	assert.False(t, st.Held)
	assert.Empty(t, st.Holders)
	assert.Contains(t, inspectText(t, srv, name), fmt.Sprintf("lock %q (key %s): free; 1 waiting\n", name, key))
	code, stdout, _ := aqsRun(ctx, nil, "unlock", "--force", "--yes", "--redis", srv.Addr(), name)
	assert.Equal(t, 0, code)
	assert.Contains(t, stdout, "nothing to release")
}

// The kind is told from which keys exist and what they hold, also where the primitives would
// otherwise look alike: a semaphore's hash by the field only its kind writes, a queue without
// its base key by its members' shape.
func TestInspectTellsTheKindFromWhatRedisHolds(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	rdb := srv.Client(t)
	ctx := t.Context()
	tm, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	live := float64(tm.UnixMilli() + 60000)
	const hold = "123e4567-e89b-12d3-a456-426614174000:3"
	queue := func(member string) func(key string) error {
		return func(key string) error {
			if err := rdb.RPush(ctx, key+":q", member).Err(); err != nil {
				return err
			}
			return rdb.ZAdd(ctx, key+":d", redis.Z{Score: live, Member: member}).Err()
		}
	}
	hash := func(fields ...any) func(key string) error {
		return func(key string) error { return rdb.HSet(ctx, key, fields...).Err() }
	}
	for _, tc := range []struct {
		what    string
		set     func(key string) error
		kind    string
		held    bool
		permits *permitCounts
		mode    string // of the one waiter, if any
	}{
		{"a counting semaphore with every permit taken", hash("t", 3, "a", 0), primSemaphore, true,
			&permitCounts{Set: true, Total: 3, Available: 0, Taken: 3}, ""},
		{"a leased semaphore with no permit leased", hash("t", 3, "u", 0), primLeased, false,
			&permitCounts{Set: true, Total: 3, Available: 3, Taken: 0}, ""},
		{"a leased semaphore given permits by AddPermits only", hash("t", 2), primLeased, false,
			&permitCounts{Set: true, Total: 2, Available: 2, Taken: 0}, ""},
		{"a counting semaphore set to 0 permits", hash("t", 0), primSemaphore, false,
			&permitCounts{Set: true}, ""},
		{"a lock's queue, its key gone", queue(hold + " 30000"), primLock, false, nil, "exclusive"},
		{"a read-write lock's queue, its keys gone", queue(hold + " 30000 x"), primRW, false, nil, "write"},
		{"a leased semaphore's queue, its hash gone", queue(hold + " 2 30000"), primLeased, false,
			&permitCounts{}, "acquire"},
	} {
		name := redistest.Name(t)
		key := "aqs:{" + name + "}"
		t.Cleanup(func() { rdb.Del(context.Background(), key, key+":q", key+":d") })
		require.NoError(t, tc.set(key), tc.what)
		st := stateOf(t, srv, name)
		assert.Equal(t, tc.kind, st.Kind, tc.what)
		assert.Equal(t, tc.held, st.Held, tc.what)
		assert.Equal(t, tc.permits, st.Permits, tc.what)
		if tc.mode == "" {
			assert.Empty(t, st.Waiters, tc.what)
			continue
		}
		if assert.Len(t, st.Waiters, 1, tc.what) {
			assert.Equal(t, tc.mode, st.Waiters[0].Mode, tc.what)
			assert.Equal(t, hold, st.Waiters[0].Hold, tc.what)
			assert.Equal(t, 1, st.Waiters[0].Position, tc.what)
		}
	}
}

func TestInspectShowsAnElectionsLeaderBesideItsLock(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	a, b := newAdminClient(t, srv), newAdminClient(t, srv)
	ea, err := election.New(a, name)
	require.NoError(t, err)
	eb, err := election.New(b, name)
	require.NoError(t, err)
	leading, err := ea.Campaign(t.Context(), "worker on host-1")
	require.NoError(t, err)
	token, err := aqs.FencingToken(leading)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	chB := inBackground(func() (context.Context, error) { return eb.Campaign(ctx, "standby") })
	waitState(t, srv, name, "b queued", waitingN(1))

	st := inspectJSON(t, srv, name)
	assert.Equal(t, primLock, st.Kind, "an election's lock is the fair lock of its name")
	require.Len(t, st.Holders, 1)
	assertHolder(t, st.Holders[0], a, "exclusive", 1, &token, 30*time.Second)
	require.NotNil(t, st.Leader)
	assert.Equal(t, leaderInfo{Hold: st.Holders[0].Hold, Token: token, Value: "worker on host-1"}, *st.Leader)
	require.Len(t, st.Waiters, 1)
	assertWaiter(t, st.Waiters[0], 1, b, "exclusive", 0, 30*time.Second, 5*time.Second)
	text := inspectText(t, srv, name)
	t.Logf("aqs inspect %s:\n%s", name, text)
	assert.Contains(t, text, "leader (election)")
	assert.Regexp(t, row(st.Holders[0].Hold, strconv.FormatInt(token, 10), `"worker on host-1"`), text)

	// Once the leader resigned and the next one leads, the record names it; a record that
	// names a former holder is no leader.
	require.NoError(t, ea.Resign(leading))
	r := awaitBG(t, chB, "b's Campaign")
	require.NoError(t, r.err)
	st = inspectJSON(t, srv, name)
	require.NotNil(t, st.Leader)
	assert.Equal(t, "standby", st.Leader.Value)
	assert.Equal(t, st.Holders[0].Hold, st.Leader.Hold)
	require.NoError(t, eb.Resign(r.held))
	st = inspectJSON(t, srv, name)
	assert.Nil(t, st.Leader)
	assert.NotContains(t, inspectText(t, srv, name), "leader (election)")
}
