package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/layout"
	"github.com/redaqs/aqs/internal/scripts"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/multilock"
)

// Lost replies of the multi-lock's scripts (see lostreply_test.go for the proxy's part; the
// release's is in the table of TestReleaseWhoseReplyIsLostSucceedsAndReleasesOnce). Each case
// drops the reply to one script of a multi-lock on a, b and c whose Client reaches Redis
// through the proxy, with go-redis's retries (the script runs again) and without them (the
// call fails, and the Client or the caller makes it again). Another Client, straight to Redis,
// holds a with its fair lock where a case needs the multi-lock to wait. After each case every
// name is free, with no live entry in its queue, and a TryLock of all three succeeds.

const (
	// multiLostWaiterTimeout is the multi-lock's waiter timeout: heartbeats every third of it.
	multiLostWaiterTimeout = 600 * time.Millisecond
	// multiLostLease is the proxied Client's watchdog timeout (behindAProxy): renewals every
	// third of it.
	multiLostLease = 3 * time.Second
	// multiLostSlack is how late after its deadline a Lock may return: the scheduling of a
	// loaded two-core machine under -race.
	multiLostSlack = 250 * time.Millisecond
)

func TestMultiLockCallsWhoseReplyIsLostLeaveNothingBehind(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, x *multiLost, retries bool)
	}{
		{"first attempt", multiLostFirstAttempt},
		{"attempt after a grant", multiLostGrantedAttempt},
		{"heartbeat", multiLostHeartbeat},
		{"renewal", multiLostRenewal},
		{"give-up", multiLostGiveUp},
	}
	for _, tc := range cases {
		for _, retries := range []int{0, -1} { // go-redis's default (3), and none
			label := map[int]string{0: "go-redis retries", -1: "no retries"}[retries]
			t.Run(tc.name+"/"+label, func(t *testing.T) {
				x := newMultiLost(t, retries)
				tc.run(t, x, retries == 0)
				x.assertClean(t)
			})
		}
	}
}

// multiLost is one case's set-up.
type multiLost struct {
	srv   *redistest.Server
	rdb   *redis.Client // straight to Redis
	px    *proxy
	m     *multilock.Lock // through the proxy
	a     *fair.Lock      // the fair lock of a, straight to Redis
	names []string
}

func newMultiLost(t *testing.T, retries int) *multiLost {
	t.Helper()
	ctx := context.Background()
	srv, px, c := behindAProxy(t, &redis.Options{MaxRetries: retries})
	x := &multiLost{srv: srv, rdb: srv.Client(t), px: px}
	tag := "{" + redistest.Name(t) + "}:"
	x.names = []string{tag + "a", tag + "b", tag + "c"}
	var err error
	x.m, err = multilock.New(c, x.names, multilock.WithWaiterTimeout(multiLostWaiterTimeout))
	require.NoError(t, err)
	direct, err := aqs.New(ctx, x.rdb)
	require.NoError(t, err)
	t.Cleanup(func() { _ = direct.Close() })
	x.a, err = fair.New(direct, x.names[0])
	require.NoError(t, err)
	t.Cleanup(func() { x.rdb.Del(context.Background(), x.m.Keys()...) })
	return x
}

// waitBehindA has the test's fair lock take a and a Lock of the multi-lock wait behind it
// with ctx; it returns the fair hold and where the Lock's outcome goes.
func (x *multiLost) waitBehindA(t *testing.T, ctx context.Context) (context.Context, chan multiOutcome) {
	t.Helper()
	fh, err := x.a.Lock(context.Background())
	require.NoError(t, err)
	out := make(chan multiOutcome, 1)
	go func() {
		held, err := x.m.Lock(ctx)
		out <- multiOutcome{held, err, time.Now()}
	}()
	require.Eventually(t, func() bool { return x.liveEntries(t, x.names[0]) == 1 }, 10*time.Second, time.Millisecond,
		"the multi-lock never queued for a")
	return fh, out
}

// multiOutcome is what a Lock returned, and when.
type multiOutcome struct {
	held context.Context
	err  error
	at   time.Time
}

// await returns the Lock's outcome, failing the test when none comes within 10s.
func await(t *testing.T, out chan multiOutcome) multiOutcome {
	t.Helper()
	select {
	case o := <-out:
		return o
	case <-time.After(10 * time.Second):
		t.Fatal("the Lock did not return")
	}
	panic("unreachable")
}

// awaitDropped waits until the proxy has dropped n replies.
func (x *multiLost) awaitDropped(t *testing.T, n int, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return x.px.Dropped() >= n }, within, time.Millisecond, "no reply dropped")
	require.Equal(t, n, x.px.Dropped(), "one reply dropped")
}

// liveEntries returns how many live entries the queue of name has.
func (x *multiLost) liveEntries(t *testing.T, name string) int64 {
	t.Helper()
	ctx := context.Background()
	now, err := x.rdb.Time(ctx).Result()
	require.NoError(t, err)
	n, err := x.rdb.ZCount(ctx, x.keys(name)[2], fmt.Sprintf("(%d", now.UnixMilli()), "+inf").Result()
	require.NoError(t, err)
	return n
}

// keys returns name's lock key, queue and deadlines.
func (x *multiLost) keys(name string) []string {
	for i, n := range x.m.Names() {
		if n == name {
			return x.m.Keys()[3*i : 3*i+3]
		}
	}
	panic("not a name of the lock: " + name)
}

// assertTrustedAndUnlock checks that the hold of held stays trusted for a moment (a watchdog that
// counted its lease from too early would end it), and releases it.
func (x *multiLost) assertTrustedAndUnlock(t *testing.T, held context.Context) {
	t.Helper()
	select {
	case <-held.Done():
		t.Fatalf("the hold was lost: %v", context.Cause(held))
	case <-time.After(300 * time.Millisecond): // a span for a wrong lease to show, not a condition
	}
	require.NoError(t, x.m.Unlock(held))
}

// assertClean checks, bounded by the waiter timeout and the lease, that every name is free
// with no live entry in its queue, and that a TryLock of all the names succeeds.
func (x *multiLost) assertClean(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var left []string
	ok := assertEventually(multiLostWaiterTimeout+multiLostLease+2*time.Second, func() bool {
		left = left[:0]
		for _, n := range x.names {
			v, err := x.rdb.Get(ctx, x.keys(n)[0]).Result()
			if err == nil && x.live(v) {
				left = append(left, n+" held by "+v)
			}
			if k := x.liveEntries(t, n); k > 0 {
				left = append(left, fmt.Sprintf("%s has %d live waiters", n, k))
			}
		}
		return len(left) == 0
	})
	require.True(t, ok, "left behind: %s; in Redis: %s", strings.Join(left, "; "), dump(x.rdb, x.m.Keys()))
	held, got, err := x.m.TryLock(ctx)
	require.NoError(t, err)
	require.True(t, got, "a TryLock of every name")
	require.NoError(t, x.m.Unlock(held))
}

// live reports whether a lock value v is a live hold: without a lease end, or with one ahead
// by the server's clock.
func (x *multiLost) live(v string) bool {
	for _, f := range strings.Fields(v)[1:] {
		if ms, ok := strings.CutPrefix(f, "e"); ok {
			now, err := x.rdb.Time(context.Background()).Result()
			if err != nil {
				return true
			}
			var end int64
			fmt.Sscan(ms, &end)
			return end > now.UnixMilli()
		}
	}
	return true
}

// The first attempt of a Lock on free names ran, its reply lost: with go-redis's retries it
// runs again and finds the names its own; without them the Lock fails or tries again, and a
// failed one leaves nothing behind.
func multiLostFirstAttempt(t *testing.T, x *multiLost, retries bool) {
	x.px.DropReplyTo(scripts.MultiAcquire.SHA())
	held, err := x.m.Lock(context.Background())
	x.awaitDropped(t, 1, time.Second)
	if retries {
		require.NoError(t, err)
	}
	if err != nil {
		t.Logf("the Lock failed: %v", err)
		return
	}
	x.assertTrustedAndUnlock(t, held)
}

// The attempt that takes the names after a grant (the fair holder of a released it) ran, its
// reply lost: with go-redis's retries the Lock holds, trusted, and one Unlock frees every
// name; without them it may fail with the Redis error, as any call may, and leave the names
// granted to it to pass on.
//
// A queued waiter attempts again once its subscriptions are confirmed, since a grant may have
// come before them; a grant that comes after them completes it with no attempt (its message
// names the last part missing: see Config.Parts in internal/acquire). So the proxy holds back
// the waiter's subscription to a's grant channel while a is released: the attempt after it is
// the one that takes the names.
func multiLostGrantedAttempt(t *testing.T, x *multiLost, retries bool) {
	fh, err := x.a.Lock(context.Background())
	require.NoError(t, err)
	caught, release := x.px.HoldBack(layout.GrantChannel(x.keys(x.names[0])[0], ""))
	defer release()
	out := make(chan multiOutcome, 1)
	go func() {
		held, err := x.m.Lock(context.Background())
		out <- multiOutcome{held, err, time.Now()}
	}()
	select {
	case <-caught:
	case <-time.After(10 * time.Second):
		t.Fatal("the multi-lock never subscribed to a's grants")
	}
	require.EqualValues(t, 1, x.liveEntries(t, x.names[0]), "the multi-lock queued for a before it subscribed")
	x.px.DropReplyTo(scripts.MultiAcquire.SHA())
	require.NoError(t, x.a.Unlock(fh))
	release()
	x.awaitDropped(t, 1, 5*time.Second)
	o := await(t, out)
	if retries {
		require.NoError(t, o.err)
	}
	if o.err != nil {
		t.Logf("the Lock failed: %v", o.err)
		return
	}
	x.assertTrustedAndUnlock(t, o.held)
}

// A heartbeat of the waiting Lock ran, its reply lost: the waiter keeps its place (a later
// heartbeat extends its entry), and is served when a is released.
func multiLostHeartbeat(t *testing.T, x *multiLost, retries bool) {
	fh, out := x.waitBehindA(t, context.Background())
	x.px.DropReplyTo(scripts.MultiHeartbeat.SHA())
	x.awaitDropped(t, 1, 5*time.Second)
	dropped := time.Now()
	member, err := x.rdb.LIndex(context.Background(), x.keys(x.names[0])[1], 0).Result()
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		s, err := x.rdb.ZScore(context.Background(), x.keys(x.names[0])[2], member).Result()
		return err == nil && time.UnixMilli(int64(s)).After(dropped.Add(multiLostWaiterTimeout))
	}, 2*multiLostWaiterTimeout, time.Millisecond, "no heartbeat after the lost one renewed the waiter's entry")
	require.NoError(t, x.a.Unlock(fh))
	o := await(t, out)
	require.NoError(t, o.err)
	x.assertTrustedAndUnlock(t, o.held)
}

// A renewal of the hold ran, its reply lost: the hold stays trusted for more than a lease,
// since the next renewals go on, and one Unlock frees every name.
func multiLostRenewal(t *testing.T, x *multiLost, retries bool) {
	held, err := x.m.Lock(context.Background())
	require.NoError(t, err)
	x.px.DropReplyTo(scripts.MultiRenew.SHA())
	x.awaitDropped(t, 1, multiLostLease)
	select {
	case <-held.Done():
		t.Fatalf("the hold was lost after a renewal lost its reply: %v", context.Cause(held))
	case <-time.After(multiLostLease + 500*time.Millisecond): // a lease with no renewal would end it
	}
	require.NoError(t, x.m.Unlock(held))
}

// The give-up of a Lock whose deadline came while it waited for a (b and c kept for it) ran,
// its reply lost: the Lock returns by its deadline, and b and c pass on: they are free while
// the test still holds a.
func multiLostGiveUp(t *testing.T, x *multiLost, retries bool) {
	const deadline = 400 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	fh, out := x.waitBehindA(t, ctx)
	for _, n := range x.names[1:] {
		v, err := x.rdb.Get(context.Background(), x.keys(n)[0]).Result()
		require.NoError(t, err, "%q is kept for the waiter", n)
		require.True(t, x.live(v), "%q is kept for the waiter", n)
	}
	x.px.DropReplyTo(scripts.MultiGiveUp.SHA())
	o := await(t, out)
	end, _ := ctx.Deadline()
	require.True(t, errors.Is(o.err, context.DeadlineExceeded), "the Lock's error is its context's: %v", o.err)
	assert.Less(t, o.at.Sub(end), multiLostSlack, "the Lock returned %v after its deadline", o.at.Sub(end))
	x.awaitDropped(t, 1, 5*time.Second)
	ok := assertEventually(multiLostWaiterTimeout+2*time.Second, func() bool {
		for _, n := range x.names[1:] {
			v, err := x.rdb.Get(context.Background(), x.keys(n)[0]).Result()
			if err == nil && x.live(v) {
				return false
			}
		}
		return x.liveEntries(t, x.names[0]) == 0
	})
	require.True(t, ok, "b and c still kept, or a still queued for, the Lock that gave up; in Redis: %s", dump(x.rdb, x.m.Keys()))
	require.NoError(t, x.a.Unlock(fh))
}
