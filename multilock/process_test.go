package multilock_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// Tests across OS processes: kill -9 of a process that holds a multi-lock, and of one whose
// goroutine waits for one. The children are this test binary run again in roleTaker
// (helper_test.go describes the protocol). Each test queues its waiters one at a time,
// checking in Redis that each is queued before the next one starts, so the arrival order is
// the test's.
//
// The bounds are correctness bounds, not figures of speed: a dead holder's names must not
// pass before its lease ends (read in Redis right after the kill), and a dead waiter's queue
// entries and kept names must end by its liveness deadline (at most the waiter timeout after
// its last heartbeat, so after the kill); the next waiters must then get them within
// killTolerance.

const (
	// killWatchdog is the children's watchdog timeout: the lease of their holds, renewed until
	// the kill.
	killWatchdog = time.Second
	// killWaiterTimeout is the children's waiter timeout: a dead waiter is dropped, and the
	// names kept for it pass on, by then.
	killWaiterTimeout = time.Second
	// killTolerance is what a hand-over may take beyond the end of a lease or of a dead
	// waiter's liveness: the waiters' next look (the remaining lease their last attempt
	// reported, or a heartbeat, a third of the waiter timeout), round trips, and the scheduling
	// of a loaded two-core machine under -race.
	killTolerance = 1500 * time.Millisecond
)

// A process holding a multi-lock on a, b and c is killed while a multi-lock on b, c, d (d,
// free, is kept for it at once) and the fair lock of a wait in other processes, and, behind
// the multi-lock, the fair locks of c and d. When the dead hold's lease runs out, and not
// before, a goes to its fair waiter and b, c to the multi-lock, which then passes c and d to
// their fair waiters; nothing is left held or queued.
func TestKilledMultiLockHolderPassesEveryNameOnWhenItsLeaseEnds(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ns := names(t, 4)
		a, b, c, d := ns[0], ns[1], ns[2], ns[3]
		x := startTakers(t, rdb, "victim", "multi-lock waiter", "fair waiters")
		victim, multi, fairs := x.children[0], x.children[1], x.children[2]

		k0 := x.take(t, victim, lineHold, kindMulti, a, b, c)
		x.await(t, lineGot, k0, 30*time.Second)
		k1 := x.take(t, multi, lineJoin, kindMulti, b, c, d)
		x.awaitQueued(t, c, 1)
		require.Equal(t, int64(1), x.queued(t, b), "the multi-lock waits for b too")
		k2 := x.take(t, fairs, lineJoin, kindFair, a)
		x.awaitQueued(t, a, 1)
		k3 := x.take(t, fairs, lineJoin, kindFair, c)
		x.awaitQueued(t, c, 2)
		k4 := x.take(t, fairs, lineJoin, kindFair, d)
		x.awaitQueued(t, d, 1)
		hold := x.holderOf(t, a)
		for _, n := range []string{b, c} {
			require.Equal(t, hold, x.holderOf(t, n), "one hold of a, b and c")
		}

		killed := x.kill(t, victim)
		ends := map[string]time.Time{}
		for _, n := range []string{a, b, c} {
			end, ok := x.leaseEnd(t, n, hold)
			require.True(t, ok, "%q passed on at once after the kill, while the dead hold's lease ran", n)
			assert.False(t, end.After(killed.Add(killWatchdog)), "%q: the dead hold's lease ends %v after the kill, beyond the watchdog timeout",
				n, end.Sub(killed))
			ends[n] = end
		}
		x.awaitAll(t, []int{k1, k2, k3, k4}, killWatchdog+killTolerance)
		x.end(t)

		assertNotBefore(t, x.got[k1], ends[b], "the multi-lock got b")
		assertNotBefore(t, x.got[k1], ends[c], "the multi-lock got c")
		assertNotBefore(t, x.got[k2], ends[a], "the fair lock got a")
		assertNotBefore(t, x.got[k3], x.rel[k1], "the fair lock of c, queued behind the multi-lock, got c")
		assertNotBefore(t, x.got[k4], x.rel[k1], "the fair lock of d, kept for the multi-lock, got d")
		last := slices.MaxFunc([]time.Time{ends[a], ends[b], ends[c]}, time.Time.Compare)
		t.Logf("holder of 3 names killed; its lease ended %v after the kill; the waiters got the names %v (fair, a) "+
			"and %v (multi-lock, b and c) after the kill; watchdog timeout %v", last.Sub(killed).Round(time.Millisecond),
			x.got[k2].Sub(killed).Round(time.Millisecond), x.got[k1].Sub(killed).Round(time.Millisecond), killWatchdog)
		assertNothingHeldOrQueued(t, rdb, ns)
	})
}

// A process whose multi-lock on a, b and c waits for a (held by the test) while b and c, free
// at its join, are kept for it, is killed; behind it wait the fair lock of b, a multi-lock on
// c and d, and a multi-lock on a and c. Its queue entry and the names kept for it end by its
// liveness deadline, at most the waiter timeout after the kill, and not before: b and c pass
// to the next waiters, who are served without the test releasing a; once it does, the
// multi-lock on a and c is served, after the one on c and d.
func TestKilledMultiLockWaiterLeavesEveryQueueAndItsKeptNamesPassOn(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		ns := names(t, 4)
		a, b, c, d := ns[0], ns[1], ns[2], ns[3]
		own, err := fair.New(newClient(t, rdb), a)
		require.NoError(t, err)
		held, err := own.Lock(ctx)
		require.NoError(t, err)
		x := startTakers(t, rdb, "victim", "waiters")
		victim, waiters := x.children[0], x.children[1]

		x.take(t, victim, lineJoin, kindMulti, a, b, c)
		x.awaitQueued(t, a, 1)
		members, err := rdb.LRange(ctx, x.keys(t, a)[1], 0, -1).Result()
		require.NoError(t, err)
		require.Len(t, members, 1)
		hold, _, _ := strings.Cut(members[0], " ")
		for _, n := range []string{b, c} {
			require.Equal(t, hold, x.holderOf(t, n), "%q, free at the join, is kept for the waiter", n)
		}
		k1 := x.take(t, waiters, lineJoin, kindFair, b)
		x.awaitQueued(t, b, 1)
		k2 := x.take(t, waiters, lineJoin, kindMulti, c, d)
		x.awaitQueued(t, c, 1)
		k3 := x.take(t, waiters, lineJoin, kindMulti, a, c)
		x.awaitQueued(t, a, 2)
		require.Equal(t, int64(2), x.queued(t, c), "the multi-lock on a and c waits for c too")

		killed := x.kill(t, victim)
		// What Redis holds of the dead waiter now is all it will ever hold: nothing refreshes it.
		liveness := killed.Add(killWaiterTimeout)
		kept := map[string]time.Time{}
		for _, n := range []string{b, c} {
			end, ok := x.leaseEnd(t, n, hold)
			require.True(t, ok, "%q passed on at once after the kill, while it was kept for a waiter that may live", n)
			assert.False(t, end.After(liveness), "%q is kept for the dead waiter %v after the kill, beyond the waiter timeout",
				n, end.Sub(killed))
			kept[n] = end
		}
		deadline, ok := x.deadlineOf(t, a, members[0])
		require.True(t, ok, "the dead waiter left the queue of a at once")
		assert.False(t, deadline.After(liveness), "the dead waiter's entry in the queue of a lives %v after the kill, "+
			"beyond the waiter timeout", deadline.Sub(killed))
		x.awaitAll(t, []int{k1, k2}, killWaiterTimeout+killTolerance)
		assertNotBefore(t, x.got[k1], kept[b], "the fair lock got b")
		assertNotBefore(t, x.got[k2], kept[c], "the multi-lock got c")
		for _, n := range []string{a, b, c} {
			_, live := x.deadlineOf(t, n, members[0])
			assert.False(t, live, "the dead waiter is still a live entry of the queue of %q", n)
		}
		require.NoError(t, held.Err(), "the test still holds a")
		_, early := x.got[k3]
		require.False(t, early, "the multi-lock on a and c got a while the test held it")

		released := time.Now()
		require.NoError(t, own.Unlock(held))
		x.awaitAll(t, []int{k3}, killTolerance)
		x.end(t)
		assertNotBefore(t, x.got[k3], released, "the multi-lock on a and c got a")
		assertNotBefore(t, x.got[k3], x.rel[k2], "the multi-lock on a and c, behind the one on c and d, got c")
		t.Logf("waiter for 3 names (2 kept for it) killed; the kept names passed %v (b) and %v (c) after the kill; "+
			"waiter timeout %v; the multi-lock behind it on a got it %v after the test's release",
			x.got[k1].Sub(killed).Round(time.Millisecond), x.got[k2].Sub(killed).Round(time.Millisecond), killWaiterTimeout,
			x.got[k3].Sub(released).Round(time.Millisecond))
		assertNothingHeldOrQueued(t, rdb, ns)
	})
}

// takers is the child processes of one test, whose lines the test reads into got and rel.
type takers struct {
	rdb      redis.UniversalClient
	children []*redistest.Child
	events   <-chan redistest.ChildLine
	next     int               // the last acquisition's number
	got, rel map[int]time.Time // by acquisition
}

// startTakers starts a child in roleTaker for each label, and waits until all are ready.
func startTakers(t *testing.T, rdb redis.UniversalClient, labels ...string) *takers {
	t.Helper()
	x := &takers{rdb: rdb, got: map[int]time.Time{}, rel: map[int]time.Time{}}
	for _, label := range labels {
		x.children = append(x.children, roleTaker.Start(t, label, redistest.TargetOf(t, rdb),
			takerParams{WaiterTimeout: killWaiterTimeout, Watchdog: killWatchdog}))
	}
	x.events = redistest.Merge(x.children...)
	for range labels {
		select {
		case line := <-x.events:
			require.Equal(t, lineReady, line.Text, "%s", line.Child.Label())
		case <-time.After(30 * time.Second):
			t.Fatalf("the children were not ready within 30s")
		}
	}
	return x
}

// take has child take kind on names (how: lineHold or lineJoin), and returns the
// acquisition's number.
func (x *takers) take(t *testing.T, child *redistest.Child, how, kind string, names ...string) int {
	t.Helper()
	x.next++
	child.Send(t, fmt.Sprintf("%s %d %s %s", how, x.next, kind, strings.Join(names, " ")))
	return x.next
}

// read reads one line of the children into got and rel, failing the test on a failure or a
// line out of the protocol; it reports false when no line came within the timer.
func (x *takers) read(t *testing.T, timer <-chan time.Time) bool {
	t.Helper()
	var line redistest.ChildLine
	select {
	case line = <-x.events:
	case <-timer:
		return false
	}
	f := strings.Fields(line.Text)
	if len(f) >= 1 && f[0] == lineFailed {
		t.Fatalf("%s: %s", line.Child.Label(), line.Text)
	}
	if len(f) != 3 || (f[0] != lineGot && f[0] != lineRel) {
		t.Fatalf("%s printed %q", line.Child.Label(), line.Text)
	}
	k, err1 := strconv.Atoi(f[1])
	ns, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("%s printed %q", line.Child.Label(), line.Text)
	}
	if f[0] == lineGot {
		x.got[k] = time.Unix(0, ns)
	} else {
		x.rel[k] = time.Unix(0, ns)
	}
	return true
}

// await waits, at most within, for the line word of acquisition k.
func (x *takers) await(t *testing.T, word string, k int, within time.Duration) {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	seen := map[string]map[int]time.Time{lineGot: x.got, lineRel: x.rel}[word]
	for {
		if _, ok := seen[k]; ok {
			return
		}
		if !x.read(t, timer.C) {
			t.Fatalf("no %q of acquisition %d within %v; %s", word, k, within, x.state(t))
		}
	}
}

// awaitAll waits, at most within, until acquisitions ks have got their locks and released.
func (x *takers) awaitAll(t *testing.T, ks []int, within time.Duration) {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		var missing []int
		for _, k := range ks {
			if _, ok := x.rel[k]; !ok {
				missing = append(missing, k)
			}
		}
		if len(missing) == 0 {
			return
		}
		if !x.read(t, timer.C) {
			t.Fatalf("acquisitions %v not done within %v; %s", missing, within, x.state(t))
		}
	}
}

// kill kills child with SIGKILL and returns when the signal was sent.
func (x *takers) kill(t *testing.T, child *redistest.Child) time.Time {
	t.Helper()
	at := time.Now()
	exit := child.Kill(t, 10*time.Second)
	require.Equal(t, -1, exit.ExitCode(), "%s ended by a signal: %v", child.Label(), exit)
	return at
}

// end tells the live children that no more acquisitions come, and checks that they exit
// cleanly.
func (x *takers) end(t *testing.T) {
	t.Helper()
	for _, c := range x.children {
		if !c.Killed() {
			c.Send(t, lineEnd)
		}
	}
	for _, c := range x.children {
		if !c.Killed() {
			require.NoError(t, c.Wait(t, 10*time.Second), "%s failed", c.Label())
		}
	}
}

// keys returns name's lock key, queue and deadlines.
func (x *takers) keys(t *testing.T, name string) []string {
	t.Helper()
	l, err := fair.New(newClient(t, x.rdb), name)
	require.NoError(t, err)
	return l.Keys()
}

// queued returns how many entries the queue of name has, live or not.
func (x *takers) queued(t *testing.T, name string) int64 {
	t.Helper()
	n, err := x.rdb.ZCard(context.Background(), x.keys(t, name)[2]).Result()
	require.NoError(t, err)
	return n
}

// awaitQueued waits, bounded, until the queue of name has n entries.
func (x *takers) awaitQueued(t *testing.T, name string, n int64) {
	t.Helper()
	require.Eventually(t, func() bool { return x.queued(t, name) == n }, 10*time.Second, 2*time.Millisecond,
		"the queue of %q never had %d entries", name, n)
}

// holderOf returns the hold id in name's lock value ("" when the key is gone).
func (x *takers) holderOf(t *testing.T, name string) string {
	t.Helper()
	v, err := x.rdb.Get(context.Background(), x.keys(t, name)[0]).Result()
	if err == redis.Nil {
		return ""
	}
	require.NoError(t, err)
	hold, _, _ := strings.Cut(v, " ")
	return hold
}

// leaseEnd returns when hold's hold of name (or the keeping of name for hold) ends, by the
// server's clock: the lease end its value records, or else its key's expiry. It reports false
// when hold no longer has name.
func (x *takers) leaseEnd(t *testing.T, name, hold string) (time.Time, bool) {
	t.Helper()
	ctx := context.Background()
	key := x.keys(t, name)[0]
	v, err := x.rdb.Get(ctx, key).Result()
	if err == redis.Nil {
		return time.Time{}, false
	}
	require.NoError(t, err)
	f := strings.Fields(v)
	if f[0] != hold {
		return time.Time{}, false
	}
	for _, field := range f[1:] {
		if ms, ok := strings.CutPrefix(field, "e"); ok {
			n, err := strconv.ParseInt(ms, 10, 64)
			require.NoError(t, err, "value %q", v)
			return time.UnixMilli(n), true
		}
	}
	pttl, err := x.rdb.PTTL(ctx, key).Result()
	require.NoError(t, err)
	now, err := x.rdb.Time(ctx).Result()
	require.NoError(t, err)
	return now.Add(pttl), true
}

// deadlineOf returns member's liveness deadline in the queue of name, and whether it is there
// and live by the server's clock (a zero time when it is not there).
func (x *takers) deadlineOf(t *testing.T, name, member string) (time.Time, bool) {
	t.Helper()
	ctx := context.Background()
	score, err := x.rdb.ZScore(ctx, x.keys(t, name)[2], member).Result()
	if err == redis.Nil {
		return time.Time{}, false
	}
	require.NoError(t, err)
	now, err := x.rdb.Time(ctx).Result()
	require.NoError(t, err)
	deadline := time.UnixMilli(int64(score))
	return deadline, deadline.After(now)
}

// state describes the acquisitions seen, for a failure message.
func (x *takers) state(t *testing.T) string {
	t.Helper()
	var got, rel []int
	for k := range x.got {
		got = append(got, k)
	}
	for k := range x.rel {
		rel = append(rel, k)
	}
	slices.Sort(got)
	slices.Sort(rel)
	return fmt.Sprintf("acquisitions that got their locks: %v, released: %v", got, rel)
}

// assertNotBefore checks that at is not before from (at millisecond precision: Redis keeps
// time in milliseconds).
func assertNotBefore(t *testing.T, at, from time.Time, what string) {
	t.Helper()
	require.False(t, at.IsZero(), "%s: never", what)
	assert.False(t, at.Truncate(time.Millisecond).Before(from.Truncate(time.Millisecond)), "%s %v before it could",
		what, from.Sub(at))
}

// assertNothingHeldOrQueued checks that every name is free, with no live entry in its queue,
// and that no key of the test is left without a TTL.
func assertNothingHeldOrQueued(t *testing.T, rdb redis.UniversalClient, names []string) {
	t.Helper()
	ctx := context.Background()
	c := newClient(t, rdb)
	var first string
	for _, n := range names {
		l, err := fair.New(c, n)
		require.NoError(t, err)
		locked, err := l.IsLocked(ctx)
		require.NoError(t, err)
		assert.False(t, locked, "%q is held once every holder released or died", n)
		now, err := rdb.Time(ctx).Result()
		require.NoError(t, err)
		live, err := rdb.ZCount(ctx, l.Keys()[2], fmt.Sprintf("(%d", now.UnixMilli()), "+inf").Result()
		require.NoError(t, err)
		assert.Zero(t, live, "%q has live waiters left", n)
		if first == "" {
			first = l.Key()
		}
	}
	tag, _, _ := strings.Cut(strings.TrimPrefix(names[0], "{"), "}") // the test's own (see names)
	redistest.AssertNoKeyWithoutTTL(t, rdb, tag, first)
}
