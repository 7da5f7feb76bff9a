package failovertest

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/reentrant"
)

// The Client follows the master: its subscriptions after a controlled Sentinel failover, its
// calls after a cluster master's death, and its waiters when the replicas cannot acknowledge.

// talksTo waits until rdb's calls reach the server at addr (a failover client learns of a
// switch from its own sentinel subscription).
func talksTo(t *testing.T, rdb redis.UniversalClient, addr string) {
	t.Helper()
	_, want, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := rdb.ConfigGet(context.Background(), "port").Result()
		return err == nil && got["port"] == want
	}, 10*time.Second, 10*time.Millisecond, "the client's calls never reached %s", addr)
}

// inQueue waits until the lock's queue in Redis (on rdb) holds n entries.
func inQueue(t *testing.T, rdb redis.UniversalClient, l *reentrant.Lock, n int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		got, err := rdb.LLen(context.Background(), l.Key()+":q").Result()
		return err == nil && got == n
	}, 10*time.Second, time.Millisecond, "the queue of %s never held %d", l.Name(), n)
}

// After SENTINEL FAILOVER the old master stays a running master, its pub/sub connections
// open, for some ten seconds; the Client's calls go to the new master at once. A waiter
// subscribed on the old master must still hear of its grant, published on the new master,
// long before the old master is turned into a replica, its heartbeat (a third of a 30s waiter
// timeout) or its fallback timer (the holder's 30s lease).
func TestWaiterHearsItsGrantAfterAControlledFailover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := redistest.NewSentinel(t)
	holderRedis, waiterRedis := g.Client(t), g.Client(t)
	holder, waiter := newClient(t, holderRedis), newClient(t, waiterRedis)
	name := redistest.Name(t)
	hl, err := reentrant.New(holder, name)
	require.NoError(t, err)
	wl, err := reentrant.New(waiter, name, reentrant.WithWaiterTimeout(30*time.Second))
	require.NoError(t, err)

	held, err := hl.Lock(ctx)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		held, err := wl.Lock(ctx)
		if err == nil {
			err = wl.Unlock(held)
		}
		got <- err
	}()
	inQueue(t, holderRedis, hl, 1)
	require.NoError(t, holderRedis.Wait(ctx, 1, 5*time.Second).Err()) // the replica has the queue

	_, err = g.SwitchOver()
	require.NoError(t, err)
	talksTo(t, holderRedis, g.Master())
	require.NoError(t, hl.Unlock(held)) // on the new master, which publishes the grant there
	released := time.Now()
	select {
	case err := <-got:
		require.NoError(t, err)
		took := time.Since(released)
		t.Logf("the waiter had the lock %v after its release on the new master", took)
		assert.Less(t, took, 5*time.Second, "the waiter heard of its grant only by a fallback")
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter never had the lock")
	}
}

// A cluster client sends a slot's calls to the master it knows until a MOVED reply or its
// periodic reload (every 60s by default), and a dead master sends no MOVED. The Client makes
// it reload when a call cannot reach the node: a call after the promotion of the dead
// master's replica takes the lock within moments.
func TestCallsReachTheReplicaThatTookOverAKilledClusterMaster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cl := redistest.NewClusterWithReplicas(t)
	rdb := redis.NewClusterClient(cl.Options())
	t.Cleanup(func() { rdb.Close() })
	c := newClient(t, rdb, aqs.WithWatchdogTimeout(2*time.Second))
	name := redistest.Name(t)
	l, err := reentrant.New(c, name)
	require.NoError(t, err)
	held, err := l.Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(held))

	shard := cl.MasterOf(l.Key())
	require.NoError(t, cl.KillMaster(shard))
	_, err = cl.WaitPromoted(shard)
	require.NoError(t, err)
	promoted := time.Now()
	var errs []error
	for {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		held, err = l.Lock(ctx)
		cancel()
		if err == nil {
			break
		}
		errs = append(errs, err)
		require.Less(t, time.Since(promoted), 10*time.Second, "no lock after the promotion: %v", errs)
	}
	took := time.Since(promoted)
	require.NoError(t, l.Unlock(held))
	t.Logf("locked %v after the promotion (%d failed calls first: %v)", took, len(errs), errs)
	assert.Less(t, took, 3*time.Second)
}

// With the replica-sync policy on, nothing can be acquired while no replica acknowledges. A
// call queued behind a holder does not wait for its deadline: it leaves within about two
// replica-sync timeouts with a *ReplicaSyncError, and the next call fails at once; once the
// replica answers again, calls acquire.
func TestQueuedCallsFailWhenTheReplicasCannotAcknowledge(t *testing.T) {
	t.Parallel()
	const syncTimeout = 500 * time.Millisecond
	ctx := context.Background()
	g := redistest.NewSentinel(t)
	holderRedis := g.Client(t)
	holder := newClient(t, holderRedis, aqs.WithReplicaSync(1, syncTimeout))
	waiter := newClient(t, g.Client(t), aqs.WithReplicaSync(1, syncTimeout))
	name := redistest.Name(t)
	hl, err := reentrant.New(holder, name)
	require.NoError(t, err)
	wl, err := reentrant.New(waiter, name)
	require.NoError(t, err)

	held, err := hl.Lock(ctx)
	require.NoError(t, err)
	type result struct {
		err  error
		took time.Duration
	}
	lock := func() result {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		start := time.Now()
		held, err := wl.Lock(ctx)
		if err == nil {
			err = wl.Unlock(held)
			if err == nil {
				err = errors.New("acquired")
			}
		}
		return result{err, time.Since(start)}
	}
	got := make(chan result, 1)
	go func() { got <- lock() }()
	inQueue(t, holderRedis, hl, 1)

	require.NoError(t, g.PauseReplicas())
	paused := time.Now()
	t.Cleanup(func() { _ = g.ResumeReplicas() })
	var r result
	select {
	case r = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("the queued call never returned")
	}
	left := time.Since(paused)
	var se *aqs.ReplicaSyncError
	require.ErrorAs(t, r.err, &se)
	assert.True(t, se.Queued, "%v", se)
	assert.Less(t, left, 2*syncTimeout+time.Second, "the queued call waited %v for the replicas", left)
	t.Logf("the queued call left %v after the replica stalled: %v", left, r.err)

	r = lock()
	require.ErrorIs(t, r.err, aqs.ErrReplicaSync)
	assert.Less(t, r.took, 2*syncTimeout+time.Second)
	t.Logf("the next call failed in %v: %v", r.took, r.err)

	require.NoError(t, g.ResumeReplicas())
	require.NoError(t, hl.Unlock(held))
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		held, err := wl.Lock(ctx)
		if err != nil {
			return false
		}
		return wl.Unlock(held) == nil
	}, 10*time.Second, 10*time.Millisecond, "no lock once the replica answered again")
}
