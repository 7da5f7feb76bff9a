package latch_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// Tests across OS processes. Each child is this test binary run again in a role of
// helper_test.go; see there for the protocol.

// A waiter killed with SIGKILL in the middle of its Await leaves nothing that matters: the
// latch works for the waiters of the other processes, which one CountDown wakes.
func TestAWaiterKilledMidWaitLeavesTheLatchWorking(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c := newClient(t, rdb)
		l := setLatch(t, c, 1)
		target, p := redistest.TargetOf(t, rdb), latchParams{Name: l.Name()}
		victim := roleWait.Start(t, "waiter to kill", target, p)
		survivor := roleWait.Start(t, "waiter", target, p)
		victim.Expect(t, lineWaiting, 30*time.Second)
		survivor.Expect(t, lineWaiting, 30*time.Second)
		victim.Kill(t, 10*time.Second)

		out := awaitAsync(ctx, l)
		waitWaiters(t, c, 1)
		require.NoError(t, l.CountDown(ctx))
		require.NoError(t, returned(t, out, 5*time.Second))
		assert.Equal(t, "ok", survivor.Expect(t, lineDone+" ", 5*time.Second))
		require.NoError(t, survivor.Wait(t, 10*time.Second))
		assert.Equal(t, []string{l.Key()}, keysOf(t, rdb, l.Name()), "keys of the latch")
	})
}

// A counter killed with SIGKILL before its CountDown never counts down (counts are not
// owned): the count stays where it was, a waiter waits until its deadline, and the latch
// opens when someone else counts down in the dead counter's place.
func TestACounterKilledBeforeItsCountDownLeavesTheCountUnchanged(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Single(t).Client(t)
	c := newClient(t, rdb)
	l := setLatch(t, c, 2)
	target, p := redistest.TargetOf(t, rdb), latchParams{Name: l.Name()}
	victim := roleCount.Start(t, "counter to kill", target, p)
	counter := roleCount.Start(t, "counter", target, p)
	victim.Expect(t, lineReady, 30*time.Second)
	counter.Expect(t, lineReady, 30*time.Second)
	victim.Kill(t, 10*time.Second)
	counter.Send(t, lineGo)
	counter.Expect(t, lineCounted, 10*time.Second)
	require.NoError(t, counter.Wait(t, 10*time.Second))

	n, err := l.Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the count after one of two counters counted and the other died")
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, l.Await(dctx), context.DeadlineExceeded)

	require.NoError(t, l.CountDown(ctx)) // in the dead counter's place
	require.NoError(t, l.Await(ctx))
}

// keysOf returns the keys whose names contain name, on every master of rdb, but the keys of
// one call's own that TrySetCount and CountDown keep for a few seconds (":x:").
func keysOf(t *testing.T, rdb redis.UniversalClient, name string) []string {
	t.Helper()
	var mu sync.Mutex // ForEachMaster scans the masters concurrently
	var keys []string
	scan := func(ctx context.Context, node *redis.Client) error {
		ks, err := node.Keys(ctx, "*"+name+"*").Result()
		mu.Lock()
		defer mu.Unlock()
		for _, k := range ks {
			if !strings.Contains(k, ":x:") {
				keys = append(keys, k)
			}
		}
		return err
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		require.NoError(t, cc.ForEachMaster(context.Background(), scan))
	} else {
		require.NoError(t, scan(context.Background(), rdb.(*redis.Client)))
	}
	return keys
}
