package aqs_test

import (
	"context"
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

// recorder is an Observer that queues every event for the test to read in order.
type recorder struct{ ch chan aqs.Event }

func newRecorder() *recorder { return &recorder{ch: make(chan aqs.Event, 1024)} }

func (r *recorder) Observe(e aqs.Event) {
	select {
	case r.ch <- e:
	default:
		panic("recorder: more events than the test reads")
	}
}

// next returns the next event, which must be of kind k.
func (r *recorder) next(t *testing.T, k aqs.EventKind) aqs.Event {
	t.Helper()
	select {
	case e := <-r.ch:
		require.Equal(t, k, e.Kind, "event %+v", e)
		return e
	case <-time.After(10 * time.Second):
		t.Fatalf("no %v event within 10s", k)
		return aqs.Event{}
	}
}

// none checks that no event is left unread.
func (r *recorder) none(t *testing.T) {
	t.Helper()
	select {
	case e := <-r.ch:
		t.Fatalf("unexpected event %v: %+v", e.Kind, e)
	default:
	}
}

// newClient returns an aqs Client on rdb, closed at the end of the test.
var newClient = redistest.NewClient

type ctxKey struct{}

// A Lock that waits behind another Client's hold reports its join with the queue's length,
// then its acquisition with the whole wait, and its Unlock the hold's time, each with the
// caller's context.
func TestObserverReportsWaitQueueLengthAndHoldOfAContendedLock(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	rec := newRecorder()
	name := redistest.Name(t)
	holder, err := reentrant.New(newClient(t, rdb), name)
	require.NoError(t, err)
	waiter, err := reentrant.New(newClient(t, rdb, aqs.WithObserver(rec)), name)
	require.NoError(t, err)

	held, err := holder.Lock(context.Background())
	require.NoError(t, err)
	ctx := context.WithValue(context.Background(), ctxKey{}, "request")
	type result struct {
		held context.Context
		err  error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		h, err := waiter.Lock(ctx)
		done <- result{h, err}
	}()
	q := rec.next(t, aqs.EventQueued)
	assert.Equal(t, "reentrant", q.Primitive)
	assert.Equal(t, name, q.Name)
	assert.Equal(t, 1, q.QueueLen, "the only waiter")
	assert.Equal(t, "request", q.Context.Value(ctxKey{}))
	require.NoError(t, holder.Unlock(held))
	r := <-done
	require.NoError(t, r.err)
	waited := time.Since(start)

	a := rec.next(t, aqs.EventAcquired)
	assert.Equal(t, "reentrant", a.Primitive)
	assert.Equal(t, name, a.Name)
	assert.Equal(t, 1, a.QueueLen)
	assert.Greater(t, a.Wait, q.Wait, "the wait runs on after the join")
	assert.LessOrEqual(t, a.Wait, waited)
	assert.NoError(t, a.Err)
	assert.Equal(t, "request", a.Context.Value(ctxKey{}))

	// A re-entry reports its acquisition, marked Reentry, and its Unlock nothing; the hold's
	// last Unlock reports the hold's time.
	inner, err := waiter.Lock(r.held)
	require.NoError(t, err)
	assert.True(t, rec.next(t, aqs.EventAcquired).Reentry)
	require.NoError(t, waiter.Unlock(inner))
	rec.none(t)
	require.NoError(t, waiter.Unlock(r.held))
	rel := rec.next(t, aqs.EventReleased)
	assert.Equal(t, "reentrant", rel.Primitive)
	assert.Equal(t, name, rel.Name)
	assert.Greater(t, rel.Hold, time.Duration(0))
	assert.LessOrEqual(t, rel.Hold, time.Since(start))
	assert.Equal(t, "request", rel.Context.Value(ctxKey{}), "the released held context carries the caller's values")
	rec.none(t)
}

// An uncontended Lock reports no join and an acquisition with a queue length of 0.
func TestObserverReportsAnUncontendedLockWithoutJoin(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	rec := newRecorder()
	l, err := fair.New(newClient(t, rdb, aqs.WithObserver(rec)), redistest.Name(t))
	require.NoError(t, err)
	held, err := l.Lock(context.Background())
	require.NoError(t, err)
	a := rec.next(t, aqs.EventAcquired)
	assert.Equal(t, "fair", a.Primitive)
	assert.Zero(t, a.QueueLen)
	require.NoError(t, l.Unlock(held))
	assert.Equal(t, "fair", rec.next(t, aqs.EventReleased).Primitive)
	rec.none(t)
}

// Calls that end without the lock report a give-up: at the context's deadline (with its
// cause), when the wait bound runs out, and when a TryLock without wait finds it taken (both
// without an error).
func TestObserverReportsGiveUps(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	rec := newRecorder()
	name := redistest.Name(t)
	holder, err := reentrant.New(newClient(t, rdb), name)
	require.NoError(t, err)
	l, err := reentrant.New(newClient(t, rdb, aqs.WithObserver(rec)), name)
	require.NoError(t, err)
	held, err := holder.Lock(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Unlock(held) })

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = l.Lock(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, 1, rec.next(t, aqs.EventQueued).QueueLen)
	g := rec.next(t, aqs.EventGaveUp)
	assert.ErrorIs(t, g.Err, context.DeadlineExceeded)
	assert.GreaterOrEqual(t, g.Wait, 50*time.Millisecond)
	assert.Equal(t, 1, g.QueueLen)

	_, ok, err := l.TryLock(context.Background(), aqs.WithWait(30*time.Millisecond))
	require.NoError(t, err)
	require.False(t, ok)
	rec.next(t, aqs.EventQueued)
	g = rec.next(t, aqs.EventGaveUp)
	assert.NoError(t, g.Err)
	assert.GreaterOrEqual(t, g.Wait, 30*time.Millisecond)

	_, ok, err = l.TryLock(context.Background())
	require.NoError(t, err)
	require.False(t, ok)
	g = rec.next(t, aqs.EventGaveUp)
	assert.NoError(t, g.Err)
	assert.Zero(t, g.QueueLen, "a TryLock without wait does not join")
	rec.none(t)
}

// A call that fails reports the error it returns.
func TestObserverReportsFailures(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	rec := newRecorder()
	l, err := reentrant.New(newClient(t, rdb, aqs.WithObserver(rec)), redistest.Name(t))
	require.NoError(t, err)
	require.NoError(t, rdb.Set(context.Background(), l.Key(), "not a lock", time.Minute).Err())
	_, err = l.Lock(context.Background())
	require.ErrorIs(t, err, aqs.ErrWrongType)
	f := rec.next(t, aqs.EventFailed)
	assert.ErrorIs(t, f.Err, aqs.ErrWrongType)
	assert.Equal(t, "reentrant", f.Primitive)
	rec.none(t)
}

// A hold whose key is deleted under it is reported lost by the watchdog's next renewal, once,
// with the acquiring call's context; its Unlock then reports no release.
func TestObserverReportsALeaseLostUnderTheWatchdog(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	rec := newRecorder()
	l, err := reentrant.New(newClient(t, rdb, aqs.WithObserver(rec), aqs.WithWatchdogTimeout(300*time.Millisecond)),
		redistest.Name(t))
	require.NoError(t, err)
	ctx := context.WithValue(context.Background(), ctxKey{}, "request")
	held, err := l.Lock(ctx)
	require.NoError(t, err)
	rec.next(t, aqs.EventAcquired)
	require.NoError(t, rdb.Del(context.Background(), l.Key()).Err())
	lost := rec.next(t, aqs.EventLeaseLost)
	assert.ErrorIs(t, lost.Err, aqs.ErrLockLost)
	assert.Equal(t, "reentrant", lost.Primitive)
	assert.Equal(t, l.Name(), lost.Name)
	assert.Greater(t, lost.Hold, time.Duration(0))
	assert.Equal(t, "request", lost.Context.Value(ctxKey{}))
	<-held.Done()
	assert.ErrorIs(t, context.Cause(held), aqs.ErrLockLost)
	require.ErrorIs(t, l.Unlock(held), aqs.ErrLockLost)
	rec.none(t)
}

// A hold force-released before its Client noticed is reported released by its Unlock, then
// lost, since that release found it gone.
func TestObserverReportsAForceReleasedHoldAsReleasedThenLost(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	rec := newRecorder()
	l, err := fair.New(newClient(t, rdb, aqs.WithObserver(rec)), redistest.Name(t))
	require.NoError(t, err)
	held, err := l.Lock(context.Background())
	require.NoError(t, err)
	rec.next(t, aqs.EventAcquired)
	was, err := l.ForceUnlock(context.Background())
	require.NoError(t, err)
	require.True(t, was)
	require.ErrorIs(t, l.Unlock(held), aqs.ErrLockLost)
	rec.next(t, aqs.EventReleased)
	assert.Equal(t, "fair", rec.next(t, aqs.EventLeaseLost).Primitive)
	rec.none(t)
}

// Every primitive reports its calls under its own name; counting permits have no holder and
// report no release.
func TestObserverNamesEveryPrimitive(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	rec := newRecorder()
	c := newClient(t, rdb, aqs.WithObserver(rec))
	ctx := context.Background()
	name := redistest.Name(t)

	rw, err := rwlock.New(c, name+":rw")
	require.NoError(t, err)
	r, err := rw.RLock(ctx)
	require.NoError(t, err)
	assert.Equal(t, "rwlock-read", rec.next(t, aqs.EventAcquired).Primitive)
	require.NoError(t, rw.RUnlock(r))
	assert.Equal(t, "rwlock-read", rec.next(t, aqs.EventReleased).Primitive)
	w, err := rw.Lock(ctx)
	require.NoError(t, err)
	a := rec.next(t, aqs.EventAcquired)
	assert.Equal(t, "rwlock-write", a.Primitive)
	assert.Equal(t, name+":rw", a.Name)
	require.NoError(t, rw.Unlock(w))
	assert.Equal(t, "rwlock-write", rec.next(t, aqs.EventReleased).Primitive)

	s, err := semaphore.New(c, name+":sem")
	require.NoError(t, err)
	_, err = s.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	require.NoError(t, s.Acquire(ctx, 1))
	assert.Equal(t, "semaphore", rec.next(t, aqs.EventAcquired).Primitive)
	require.NoError(t, s.Release(ctx, 1))

	ls, err := semaphore.NewLeased(c, name+":lsem")
	require.NoError(t, err)
	_, err = ls.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	p, err := ls.Acquire(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, "leased-semaphore", rec.next(t, aqs.EventAcquired).Primitive)
	require.NoError(t, ls.Release(ctx, p))
	assert.Equal(t, "leased-semaphore", rec.next(t, aqs.EventReleased).Primitive)
	rec.none(t)
}

// A re-entry, through a value of its own or the one that took the hold, of every lock and
// side, reports its acquisition marked Reentry, and a re-entry of a hold found lost its
// failure; the hold's end is reported once, by its last release.
func TestObserverReportsReentries(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	rec := newRecorder()
	c := newClient(t, rdb, aqs.WithObserver(rec))
	ctx := context.Background()
	name := redistest.Name(t)
	type side struct {
		primitive       string
		lock            func(context.Context) (context.Context, error)
		unlock          func(context.Context) error
		lockFromAnother func(context.Context) (context.Context, error) // through another value
	}
	r1, err := reentrant.New(c, name+":r")
	require.NoError(t, err)
	r2, err := reentrant.New(c, name+":r")
	require.NoError(t, err)
	rw1, err := rwlock.New(c, name+":rw")
	require.NoError(t, err)
	rw2, err := rwlock.New(c, name+":rw")
	require.NoError(t, err)
	for _, s := range []side{
		{"reentrant", func(ctx context.Context) (context.Context, error) { return r1.Lock(ctx) }, r1.Unlock,
			func(ctx context.Context) (context.Context, error) { return r2.Lock(ctx) }},
		{"rwlock-write", func(ctx context.Context) (context.Context, error) { return rw1.Lock(ctx) }, rw1.Unlock,
			func(ctx context.Context) (context.Context, error) { return rw2.Lock(ctx) }},
		{"rwlock-read", func(ctx context.Context) (context.Context, error) { return rw1.RLock(ctx) }, rw1.RUnlock,
			func(ctx context.Context) (context.Context, error) { return rw2.RLock(ctx) }},
	} {
		held, err := s.lock(ctx)
		require.NoError(t, err)
		first := rec.next(t, aqs.EventAcquired)
		assert.False(t, first.Reentry, s.primitive)
		again, err := s.lockFromAnother(held)
		require.NoError(t, err)
		e := rec.next(t, aqs.EventAcquired)
		assert.True(t, e.Reentry, s.primitive)
		assert.Equal(t, s.primitive, e.Primitive)
		assert.True(t, e.Context == held, "%s: the event's context is the caller's", s.primitive)
		require.NoError(t, s.unlock(again))
		require.NoError(t, s.unlock(held))
		assert.Equal(t, s.primitive, rec.next(t, aqs.EventReleased).Primitive)
		rec.none(t)
	}

	// A re-entry of a hold that Redis no longer has fails, reported as such.
	held, err := r1.Lock(ctx)
	require.NoError(t, err)
	rec.next(t, aqs.EventAcquired)
	_, err = r1.ForceUnlock(ctx)
	require.NoError(t, err)
	_, err = r1.Lock(held)
	require.ErrorIs(t, err, aqs.ErrLockLost)
	rec.next(t, aqs.EventLeaseLost) // the hold found lost: by the re-entry, or the watchdog before it
	f := rec.next(t, aqs.EventFailed)
	assert.True(t, f.Reentry)
	assert.ErrorIs(t, f.Err, aqs.ErrLockLost)
}

// An invalid observer is refused at construction.
func TestWithObserverRefusesNil(t *testing.T) {
	_, err := aqs.New(context.Background(), redistest.Single(t).Client(t), aqs.WithObserver(nil))
	require.ErrorIs(t, err, aqs.ErrInvalidArgument)
}
