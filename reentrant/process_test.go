package reentrant_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/reentrant"
)

// Tests across OS processes. Each child is this test binary run again in a role of
// helper_test.go; see there for the protocol.

func TestProcessesAndGoroutinesNeverOverlapInTheCriticalSection(t *testing.T) {
	const processes, goroutines, rounds = 3, 4, 20
	t.Run("single", func(t *testing.T) {
		contendAcrossProcesses(t, redistest.Single(t).Client(t), processes, goroutines, rounds)
	})
	t.Run("cluster", func(t *testing.T) {
		contendAcrossProcesses(t, redistest.Cluster(t).Client(t), processes, goroutines, rounds)
	})
}

// contendAcrossProcesses starts the contenders, lets them go at once, and checks the books
// they kept in Redis.
func contendAcrossProcesses(t *testing.T, rdb redis.UniversalClient, processes, goroutines, rounds int) {
	ctx := context.Background()
	name := redistest.Name(t)
	l, err := reentrant.New(newClient(t, rdb), name)
	require.NoError(t, err)
	keys := keysOf(l)
	t.Cleanup(func() { rdb.Del(ctx, keys.all()...) }) // after the children are gone

	children := make([]*redistest.Child, processes)
	for i := range children {
		children[i] = roleContend.Start(t, fmt.Sprintf("contender %d", i), redistest.TargetOf(t, rdb),
			contendParams{Lock: name, Goroutines: goroutines, Rounds: rounds})
	}
	for _, c := range children {
		c.Expect(t, lineReady, 30*time.Second)
	}
	began := time.Now()
	for _, c := range children {
		c.Send(t, lineGo)
	}
	reported := 0
	for _, c := range children {
		n, err := strconv.Atoi(c.Expect(t, lineDone+" ", time.Minute))
		require.NoError(t, err)
		reported += n
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
	want := processes * goroutines * rounds
	overlaps, completed := count(keys.overlaps), count(keys.completed)
	regressions, switches := count(keys.regressions), count(keys.switches)
	t.Logf("%d processes × %d goroutines × %d rounds: %d critical sections in %v, %d overlaps, "+
		"%d fencing-token regressions, %d hand-overs between processes",
		processes, goroutines, rounds, completed, took.Round(time.Millisecond), overlaps, regressions, switches)
	assert.Zero(t, overlaps, "holders overlapped in the critical section")
	assert.Zero(t, count(keys.inside), "someone is still inside")
	assert.Equal(t, want, completed, "critical sections completed (Redis)")
	assert.Equal(t, want, reported, "critical sections completed (children)")
	assert.Zero(t, regressions, "a holder's fencing token was not above its predecessor's")
	locked, err := l.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked, "the lock is free once every contender is done")

	require.NoError(t, rdb.Del(ctx, keys.all()...).Err())
	t.Run("LeavesNoKeyWithoutTTL", func(t *testing.T) { redistest.AssertNoKeyWithoutTTL(t, rdb, name, l.Key()) })
}

func TestKillDashNineOfHolderFreesLockWithinWatchdogTimeout(t *testing.T) {
	const (
		timeout = time.Second
		// tolerance covers the acquire round trips and scheduling of a loaded machine under
		// -race; the waiter's wake-up itself is due when the lease ends.
		tolerance = 500 * time.Millisecond
	)
	ctx := context.Background()
	srv := redistest.Single(t)
	rdb := srv.Client(t)
	name := redistest.Name(t)
	holder := roleHold.Start(t, "holder", redistest.TargetOf(t, rdb), holdParams{Lock: name, Watchdog: timeout})
	holderToken, err := strconv.ParseInt(holder.Expect(t, lineHeld+" ", 30*time.Second), 10, 64)
	require.NoError(t, err)

	c := newClient(t, rdb, aqs.WithWatchdogTimeout(timeout))
	l, err := reentrant.New(c, name)
	require.NoError(t, err)
	info, err := l.Info(ctx)
	require.NoError(t, err)
	require.True(t, info.Locked)
	assert.False(t, strings.HasPrefix(info.Holder, c.ID()+":"), "the holder is the child, not us")
	assert.Equal(t, 2, info.HoldCount, "the child re-entered its hold")
	assert.Equal(t, holderToken, info.Token)

	// The child's watchdog keeps the hold past its lease, so what frees it below is the kill.
	_, ok, err := l.TryLock(ctx, aqs.WithWait(timeout+timeout/2))
	require.NoError(t, err)
	require.False(t, ok, "the lock was free while its holder was alive")

	type result struct {
		held context.Context
		err  error
		at   time.Time
	}
	got := make(chan result, 1)
	waitCtx, cancel := context.WithTimeout(ctx, timeout+10*time.Second)
	defer cancel()
	go func() {
		held, err := l.Lock(waitCtx)
		got <- result{held, err, time.Now()}
	}()
	waitForWaiters(t, c, 1)
	select {
	case r := <-got:
		t.Fatalf("the waiter got the lock before the kill: %v", r.err)
	default:
	}

	lease, err := l.RemainingLease(ctx)
	require.NoError(t, err)
	killed := time.Now()
	exit := holder.Kill(t, 10*time.Second)
	assert.Equal(t, -1, exit.ExitCode(), "the holder ended by a signal: %v", exit)

	var r result
	select {
	case r = <-got:
	case <-time.After(timeout + 10*time.Second):
		t.Fatal("the waiter never got the lock")
	}
	require.NoError(t, r.err)
	after := r.at.Sub(killed)
	t.Logf("waiter got the lock %v after kill -9; watchdog timeout %v, lease left at the kill %v",
		after.Round(time.Millisecond), timeout, lease)
	assert.LessOrEqual(t, after, timeout+tolerance, "the dead holder's lock outlived the watchdog timeout")
	token, err := l.Token(r.held)
	require.NoError(t, err)
	assert.Greater(t, token, holderToken, "the new hold is fenced above the dead one")
	require.NoError(t, l.Unlock(r.held))

	t.Run("LeavesNoKeyWithoutTTL", func(t *testing.T) { redistest.AssertNoKeyWithoutTTL(t, rdb, name, l.Key()) })
}
