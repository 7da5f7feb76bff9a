package semaphore_test

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
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/semaphore"
)

// Tests across OS processes. Each child is this test binary run again in a role of
// helper_test.go; see there for the protocol.

// TestWorkerPoolAcrossProcesses runs the leased semaphore on both topologies, and the counting
// one, whose waiting is the same, on a single node only, to keep the test short.
func TestWorkerPoolAcrossProcesses(t *testing.T) {
	const permits, processes, goroutines, jobs = 3, 4, 3, 8
	t.Run(kindLeased, func(t *testing.T) {
		topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
			workAcrossProcesses(t, rdb, kindLeased, permits, processes, goroutines, jobs)
		})
	})
	t.Run(kindCounting, func(t *testing.T) {
		workAcrossProcesses(t, redistest.Single(t).Client(t), kindCounting, permits, processes, goroutines, jobs)
	})
}

// workAcrossProcesses sets up a pool of k permits, starts the workers, lets them go at once,
// and checks the books they kept in Redis.
func workAcrossProcesses(t *testing.T, rdb redis.UniversalClient, kind string, k, processes, goroutines, jobs int) {
	ctx := context.Background()
	c := newClient(t, rdb)
	var (
		name, key string
		keys      []string
		available func(context.Context) (int, error)
	)
	if kind == kindLeased {
		s := newLeased(t, c, k)
		name, key, keys, available = s.Name(), s.Key(), s.Keys(), s.Available
	} else {
		s := newSem(t, c, k)
		name, key, keys, available = s.Name(), s.Key(), s.Keys(), s.Available
	}
	b := booksOf(key)
	// The permits have no TTL (they are configuration); the books expire but need not wait.
	// Registered first, so that it runs after the children are gone.
	t.Cleanup(func() { rdb.Del(ctx, append(keys, b.all()...)...) })

	params := workParams{Name: name, Kind: kind, Permits: k, Goroutines: goroutines, Jobs: jobs}
	children := make([]*redistest.Child, processes)
	for i := range children {
		children[i] = roleWork.Start(t, fmt.Sprintf("worker %d", i), redistest.TargetOf(t, rdb), params)
	}
	for _, c := range children {
		c.Expect(t, lineReady, 30*time.Second)
	}
	began := time.Now()
	for _, c := range children {
		c.Send(t, lineGo)
	}
	var done, violations int
	for _, c := range children {
		var d, v int
		line := c.Expect(t, lineDone+" ", 30*time.Second)
		_, err := fmt.Sscanf(line, "%d %d", &d, &v)
		require.NoError(t, err, "%s printed %q", c.Label(), line)
		done, violations = done+d, violations+v
		require.NoError(t, c.Wait(t, 10*time.Second), "%s failed", c.Label())
	}
	took := time.Since(began)

	count := func(key string) int {
		t.Helper()
		n, err := rdb.Get(ctx, key).Int()
		if errors.Is(err, redis.Nil) {
			return 0
		}
		require.NoError(t, err)
		return n
	}
	want := processes * goroutines * jobs
	t.Logf("%s semaphore of %d permits, %d processes × %d goroutines × %d jobs: %d jobs in %v; "+
		"up to %d jobs running at once; %d entries found more than %d running",
		kind, k, processes, goroutines, jobs, count(b.done), took.Round(time.Millisecond),
		count(b.max), count(b.violations), k)
	assert.Zero(t, count(b.violations), "more than %d jobs ran at once (Redis)", k)
	assert.Zero(t, violations, "more than %d jobs ran at once (children)", k)
	assert.LessOrEqual(t, count(b.max), k, "the most jobs running at once")
	assert.Greater(t, count(b.max), 1, "the jobs never ran concurrently")
	assert.Zero(t, count(b.inside), "a job is still running")
	assert.Equal(t, want, count(b.done), "jobs completed (Redis)")
	assert.Equal(t, want, done, "jobs completed (children)")

	n, err := available(ctx)
	require.NoError(t, err)
	assert.Equal(t, k, n, "every permit came back")
	queued, err := rdb.LLen(ctx, keys[1]).Result()
	require.NoError(t, err)
	assert.Zero(t, queued, "nobody is left in the queue")
}

// TestKilledWorkerPermitsComeBack runs on a single node only: what it checks, the lease of a
// dead process's permit, works alike on a cluster, where TestWorkerPoolAcrossProcesses runs.
func TestKilledWorkerPermitsComeBack(t *testing.T) {
	const (
		permits = 2
		lease   = time.Second // the worker's watchdog timeout, and so its permit's lease
		// within bounds the time from the kill to the waiter's permit: the dead worker's lease
		// has at most lease left, and the waiter looks again when it ends (the nearest lease end
		// its last attempt reported); the rest covers the round trips and the scheduling of a
		// loaded machine under -race.
		within = lease + 500*time.Millisecond
	)
	ctx := context.Background()
	rdb := redistest.Single(t).Client(t)
	s := newLeased(t, newClient(t, rdb), permits)
	t.Cleanup(func() { rdb.Del(ctx, s.Keys()...) }) // after the child is gone

	worker := roleHold.Start(t, "worker", redistest.TargetOf(t, rdb),
		holdParams{Name: s.Name(), Permits: permits, Watchdog: lease})
	worker.Expect(t, lineHeld, 30*time.Second)
	n, err := s.Available(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "the child holds every permit")

	// The child's watchdog keeps its permit past its lease, so what frees the permits below is
	// the kill.
	_, ok, err := s.TryAcquire(ctx, 1, aqs.WithWait(lease+lease/2))
	require.NoError(t, err)
	require.False(t, ok, "a permit came free while the worker was alive")

	type result struct {
		p   *semaphore.Permit
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	waitCtx, cancel := context.WithTimeout(ctx, lease+10*time.Second)
	defer cancel()
	go func() {
		p, err := s.Acquire(waitCtx, 1)
		got <- result{p, err, time.Now()}
	}()
	waitQueued(t, rdb, s.Keys()[1], 1)
	select {
	case r := <-got:
		t.Fatalf("the waiter got a permit before the kill: %v", r.err)
	default:
	}

	// The worker's lease end in server time, just before the kill: its score in the zset.
	leased, err := rdb.ZRangeWithScores(ctx, s.Keys()[3], 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, leased, 1, "one permit, the worker's")
	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	leaseLeft := time.Duration(int64(leased[0].Score)-now.UnixMilli()) * time.Millisecond

	killed := time.Now()
	exit := worker.Kill(t, 10*time.Second)
	assert.Equal(t, -1, exit.ExitCode(), "the worker ended by a signal: %v", exit)

	var r result
	select {
	case r = <-got:
	case <-time.After(lease + 10*time.Second):
		t.Fatal("the waiter never got a permit")
	}
	require.NoError(t, r.err)
	after := r.at.Sub(killed)
	t.Logf("the waiter got a permit %v after the kill -9 of the worker holding all %d; the worker's lease "+
		"(watchdog timeout) %v, %v of it left at the kill", after.Round(time.Millisecond), permits, lease,
		leaseLeft)
	assert.Less(t, after, within, "the dead worker held the permits back beyond its lease")

	n, err = s.Available(ctx)
	require.NoError(t, err)
	assert.Equal(t, permits-1, n, "the dead worker's permits came back, but the waiter's")
	require.NoError(t, s.Release(ctx, r.p))
	n, err = s.Available(ctx)
	require.NoError(t, err)
	assert.Equal(t, permits, n, "every permit came back")
	queued, err := rdb.LLen(ctx, s.Keys()[1]).Result()
	require.NoError(t, err)
	assert.Zero(t, queued, "nobody is left in the queue")
}

// TestReleaseIDAcrossProcesses: a permit taken in one process (the child) is released by its id
// from another (the test): the permits come back at once, and the holder's permit context ends
// with aqs.ErrReleased at its Client's next check, its own Release failing with
// ErrPermitReleased (the child checks both, see holdUntilReleasedByID).
func TestReleaseIDAcrossProcesses(t *testing.T) {
	const (
		permits  = 3
		watchdog = 600 * time.Millisecond // the child's: it checks its permit every third of it
	)
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		s := newLeased(t, newClient(t, rdb), permits)
		t.Cleanup(func() { rdb.Del(ctx, s.Keys()...) }) // after the child is gone

		holder := roleHoldByID.Start(t, "holder", redistest.TargetOf(t, rdb),
			holdParams{Name: s.Name(), Permits: 2, Watchdog: watchdog})
		id := strings.TrimSpace(holder.Expect(t, lineHeld+" ", 30*time.Second))
		assert.Equal(t, permits-2, inAvail(t, s), "the child holds 2 permits")

		released := time.Now()
		require.NoError(t, s.ReleaseID(ctx, id))
		assert.Equal(t, permits, inAvail(t, s), "the permits came back at once")
		holder.Expect(t, lineEnded, watchdog/3+10*time.Second)
		t.Logf("the holder's permit context ended %v after the release by id (its watchdog timeout %v)",
			time.Since(released).Round(time.Millisecond), watchdog)
		require.NoError(t, holder.Wait(t, 10*time.Second), "the holder failed")
		assert.Equal(t, permits, inAvail(t, s), "the holder's release gave back nothing more")
		// Released already: ErrPermitReleased until the lease the permit had would have ended
		// (the mark's life), no live permit after.
		assert.ErrorIs(t, s.ReleaseID(ctx, id), aqs.ErrNotOwner)
	})
}
