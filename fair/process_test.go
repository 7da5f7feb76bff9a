package fair_test

import (
	"cmp"
	"context"
	"fmt"
	"maps"
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

// Tests across OS processes. Each child is this test binary run again as a process of
// waiters (helper_test.go describes the protocol). The parent holds the lock while the
// waiters join, one at a time, so the join order is the test's; the order list in Redis then
// shows the order in which they got the lock.

func TestWaitersInFiveProcessesAcquireInJoinOrder(t *testing.T) {
	const processes, goroutines = 5, 3
	// Waiter k runs in process k mod 5: consecutive waiters are always in different processes.
	assign := make([]int, processes*goroutines)
	for k := range assign {
		assign[k] = k % processes
	}
	q := joinInOrder(t, processes, assign, 5*time.Second)

	released := time.Now()
	require.NoError(t, q.l.Unlock(q.held))
	got, rel := q.awaitWaiters(t, allBut(len(assign), -1), 10*time.Second)
	q.end(t)

	order := q.order(t)
	assert.Equal(t, allBut(len(assign), -1), order, "acquisitions in join order")
	last := slices.MaxFunc(slices.Collect(maps.Values(got)), time.Time.Compare)
	var gaps []time.Duration
	for k := 1; k < len(assign); k++ {
		gaps = append(gaps, got[k].Sub(rel[k-1]))
	}
	t.Logf("%d waiters in %d processes × %d goroutines acquired in order %v; %v from the release to the last "+
		"acquisition; hand-off (Unlock called to the next acquisition, across processes) median %v, max %v",
		len(assign), processes, goroutines, order, last.Sub(released).Round(time.Millisecond),
		median(gaps).Round(time.Microsecond), slices.Max(gaps).Round(time.Microsecond))
	q.assertClean(t)
}

func TestKilledWaiterIsSkippedWithinWaiterTimeoutAndOthersKeepOrder(t *testing.T) {
	const (
		waiterTimeout = time.Second
		// tolerance covers the hand-off round trips and scheduling of a loaded machine under
		// -race; the skip itself is due when the dead waiter's deadline passes.
		tolerance = 1500 * time.Millisecond
		victim    = 2 // the process, and the waiter: the third in the queue
	)
	// Process 2 holds waiter 2 alone; the others two waiters each, interleaved.
	assign := []int{0, 1, victim, 3, 4, 0, 1, 3, 4}
	q := joinInOrder(t, 5, assign, waiterTimeout)
	ctx := context.Background()

	// Kill the victim while everyone is queued: its entry stays, and nothing refreshes it.
	exit := q.children[victim].Kill(t, 10*time.Second)
	require.Equal(t, -1, exit.ExitCode(), "%s ended by a signal: %v", q.children[victim].Label(), exit)
	deadline, err := q.rdb.ZScore(ctx, q.l.Key()+":d", q.members[victim]).Result()
	require.NoError(t, err, "the dead waiter is still queued")
	now, err := q.rdb.Time(ctx).Result()
	require.NoError(t, err)
	liveness := time.Duration(int64(deadline)-now.UnixMilli()) * time.Millisecond

	require.NoError(t, q.l.Unlock(q.held))
	live := allBut(len(assign), victim)
	got, rel := q.awaitWaiters(t, live, waiterTimeout+5*time.Second)
	q.end(t)

	order := q.order(t)
	assert.Equal(t, live, order, "the live waiters acquired in join order, without the dead one")
	// Waiter 1's release reached the dead waiter's turn; waiter 3 is the next live one.
	skip := got[victim+1].Sub(rel[victim-1])
	t.Logf("order %v with waiter %d killed; the skip took %v (from waiter %d's release to waiter %d's "+
		"acquisition); the dead waiter's deadline was %v ahead after the kill; waiter timeout %v",
		order, victim, skip.Round(time.Millisecond), victim-1, victim+1, liveness, waiterTimeout)
	assert.Less(t, skip, waiterTimeout+tolerance, "the dead waiter stalled the queue beyond the waiter timeout")
	q.assertClean(t)
}

// processQueue is a fair lock held by the test, with waiters of child processes queued
// behind it.
type processQueue struct {
	rdb      *redis.Client
	l        *fair.Lock // the test's own
	held     context.Context
	children []*redistest.Child
	events   <-chan redistest.ChildLine
	members  []string // the queue member of each waiter, in join order
}

// joinInOrder starts the child processes, takes the lock, and has waiter k, for each k in
// turn, join the queue in process assign[k], waiting until it is queued before starting the
// next.
func joinInOrder(t *testing.T, processes int, assign []int, waiterTimeout time.Duration) *processQueue {
	t.Helper()
	srv := redistest.Single(t)
	q := &processQueue{rdb: srv.Client(t)}
	name := redistest.Name(t)
	var err error
	q.l, err = fair.New(newClient(t, q.rdb), name, fair.WithWaiterTimeout(waiterTimeout))
	require.NoError(t, err)
	ctx := context.Background()
	t.Cleanup(func() { q.rdb.Del(ctx, orderKey(q.l)) }) // after the children are gone

	for i := 0; i < processes; i++ {
		q.children = append(q.children, roleWaiters.Start(t, fmt.Sprintf("process %d", i), redistest.TargetOf(t, q.rdb),
			lockParams{Lock: name, WaiterTimeout: waiterTimeout}))
	}
	q.events = redistest.Merge(q.children...)
	for ready := 0; ready < processes; ready++ {
		if line := q.next(t, 30*time.Second); line.Text != lineReady {
			t.Fatalf("%s printed %q, want %q", line.Child.Label(), line.Text, lineReady)
		}
	}

	q.held, err = q.l.Lock(ctx)
	require.NoError(t, err)
	for k, p := range assign {
		q.children[p].Send(t, fmt.Sprintf("%s %d", lineStart, k))
		waitQueued(t, q.rdb, q.l, int64(k+1))
	}
	q.members, err = q.rdb.LRange(ctx, q.l.Key()+":q", 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, q.members, len(assign), "one queue entry per waiter")
	return q
}

// next returns the next line of any child.
func (q *processQueue) next(t *testing.T, within time.Duration) redistest.ChildLine {
	t.Helper()
	select {
	case line := <-q.events:
		return line
	case <-time.After(within):
		t.Fatalf("no child printed anything within %v", within)
	}
	panic("unreachable")
}

// awaitWaiters waits until waiters ks have got the lock and released it, and returns when
// each did (by its process's clock). A waiter's failure, or a line out of the protocol, fails
// the test at once.
func (q *processQueue) awaitWaiters(t *testing.T, ks []int, within time.Duration) (got, released map[int]time.Time) {
	t.Helper()
	got, released = map[int]time.Time{}, map[int]time.Time{}
	timer := time.NewTimer(within)
	defer timer.Stop()
	for len(released) < len(ks) {
		var line redistest.ChildLine
		select {
		case line = <-q.events:
		case <-timer.C:
			var missing []int
			for _, k := range ks {
				if _, ok := released[k]; !ok {
					missing = append(missing, k)
				}
			}
			t.Fatalf("waiters %v not done within %v; %s", missing, within, q.state())
		}
		word, rest, _ := strings.Cut(line.Text, " ")
		num, at, _ := strings.Cut(rest, " ")
		k, err := strconv.Atoi(num)
		if word == lineFailed {
			t.Fatalf("%s: waiter %s failed: %s", line.Child.Label(), num, at)
		}
		ns, err2 := strconv.ParseInt(at, 10, 64)
		if err != nil || err2 != nil || (word != lineGot && word != lineReleased) {
			t.Fatalf("%s printed %q", line.Child.Label(), line.Text)
		}
		if word == lineGot {
			got[k] = time.Unix(0, ns)
		} else {
			released[k] = time.Unix(0, ns)
		}
	}
	return got, released
}

// state describes the lock and its queue, for a failure message.
func (q *processQueue) state() string {
	ctx := context.Background()
	info, err := q.l.Info(ctx)
	if err != nil {
		return fmt.Sprintf("lock info: %v", err)
	}
	queue, _ := q.rdb.LRange(ctx, q.l.Key()+":q", 0, -1).Result()
	deadlines, _ := q.rdb.ZRangeWithScores(ctx, q.l.Key()+":d", 0, -1).Result()
	now, _ := q.rdb.Time(ctx).Result()
	holder := "nobody"
	if i := slices.IndexFunc(q.members, func(m string) bool { return strings.HasPrefix(m, info.Holder+" ") }); info.Locked && i >= 0 {
		holder = fmt.Sprintf("waiter %d", i)
	} else if info.Locked {
		holder = info.Holder
	}
	return fmt.Sprintf("lock held by %s (lease left %v); queue %q; deadlines %v at server time %d ms",
		holder, info.RemainingLease, queue, deadlines, now.UnixMilli())
}

// end tells the children that no more waiters come, and checks that all but the killed ones
// exit cleanly.
func (q *processQueue) end(t *testing.T) {
	t.Helper()
	for _, c := range q.children {
		if !c.Killed() {
			c.Send(t, lineEnd)
		}
	}
	for _, c := range q.children {
		if !c.Killed() {
			require.NoError(t, c.Wait(t, 10*time.Second), "%s failed", c.Label())
		}
	}
}

// order returns the waiters' numbers in the order in which they held the lock.
func (q *processQueue) order(t *testing.T) []int {
	t.Helper()
	ss, err := q.rdb.LRange(context.Background(), orderKey(q.l), 0, -1).Result()
	require.NoError(t, err)
	order := make([]int, len(ss))
	for i, s := range ss {
		order[i], err = strconv.Atoi(s)
		require.NoError(t, err)
	}
	return order
}

// assertClean checks that the lock is free, its queue gone, and no key is left without a TTL.
func (q *processQueue) assertClean(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	locked, err := q.l.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked, "the lock is free once every waiter is done")
	n, err := q.rdb.Exists(ctx, q.l.Key()+":q", q.l.Key()+":d").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "the queue keys are gone")
	require.NoError(t, q.rdb.Del(ctx, orderKey(q.l)).Err())
	redistest.AssertNoKeyWithoutTTL(t, q.rdb, q.l.Name(), q.l.Key())
}

// allBut returns 0..n-1 without skip.
func allBut(n, skip int) []int {
	var ks []int
	for k := 0; k < n; k++ {
		if k != skip {
			ks = append(ks, k)
		}
	}
	return ks
}

// median returns the middle value (the upper one of an even count).
func median[T cmp.Ordered](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
