package core_test

import (
	"context"
	"fmt"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/reentrant"
)

// The hub is driven here through the public reentrant lock, whose waiters park on the channel
// "<lock key>:ch", and observed both from inside (core.Runtime's Hub) and from the server.
// None of these tests runs in parallel: they count goroutines and pub/sub connections.

// topologies runs f on the shared single node and on the shared cluster.
func topologies(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient)) {
	t.Run("single", func(t *testing.T) { f(t, redistest.Single(t).Client(t)) })
	t.Run("cluster", func(t *testing.T) { f(t, redistest.Cluster(t).Client(t)) })
}

func runtimeOf(t testing.TB, c *aqs.Client) *core.Runtime {
	t.Helper()
	rt := core.RuntimeOf(c)
	require.NotNil(t, rt)
	return rt
}

// channelOf is the channel the lock's waiters subscribe to.
// channelOf is the channel on which c's waiters of l hear of grants.
func channelOf(c *aqs.Client, l *reentrant.Lock) string { return l.Key() + ":c:" + c.ID() }

// serverOf returns the server that serves channel's subscribers: the master of its slot on a
// cluster (sharded pub/sub), the one server otherwise.
func serverOf(t *testing.T, rdb redis.UniversalClient, channel string) *redis.Client {
	t.Helper()
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		m, err := cc.MasterForKey(context.Background(), channel)
		require.NoError(t, err)
		return m
	}
	return rdb.(*redis.Client)
}

// subscribers reports how many connections the server counts on channel: PUBSUB SHARDNUMSUB
// on a cluster, PUBSUB NUMSUB on a single node. A failed query counts as -1. It may run in
// a condition of require.Eventually, so it never fails the test itself.
func subscribers(rdb redis.UniversalClient, channel string) int64 {
	ctx := context.Background()
	var counts map[string]int64
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		var m *redis.Client
		if m, err = cc.MasterForKey(ctx, channel); err != nil {
			return -1
		}
		counts, err = m.PubSubShardNumSub(ctx, channel).Result()
	} else {
		counts, err = rdb.PubSubNumSub(ctx, channel).Result()
	}
	if err != nil {
		return -1
	}
	return counts[channel]
}

// startWaiters starts n goroutines that each take l, check that nobody else is inside, and
// release it. Each reports its outcome on the returned channel.
func startWaiters(ctx context.Context, l *reentrant.Lock, n int) <-chan error {
	errs := make(chan error, n)
	var inside atomic.Int32
	for range n {
		go func() {
			held, err := l.Lock(ctx)
			if err != nil {
				errs <- err
				return
			}
			if k := inside.Add(1); k != 1 {
				err = fmt.Errorf("%d holders inside at once", k)
			}
			inside.Add(-1)
			if uerr := l.Unlock(held); err == nil {
				err = uerr
			}
			errs <- err
		}()
	}
	return errs
}

// results waits, at most within, for n outcomes of startWaiters.
func results(t *testing.T, errs <-chan error, n int, within time.Duration) []error {
	t.Helper()
	timeout := time.After(within)
	var got []error
	for len(got) < n {
		select {
		case err := <-errs:
			got = append(got, err)
		case <-timeout:
			t.Fatalf("only %d of %d waiters returned within %v", len(got), n, within)
		}
	}
	return got
}

// TestLocalWaitersShareOneSubscriptionThatEndsAfterTheLinger parks ten goroutines of one Client
// on a held lock: the server sees one subscriber on the lock's channel. Once the lock went
// round all of them, the subscription stays for the linger and then goes.
func TestLocalWaitersShareOneSubscriptionThatEndsAfterTheLinger(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := newClient(t, rdb)
		rt := runtimeOf(t, c)
		require.Equal(t, core.DefaultConfig().Linger, rt.Cfg.Linger)
		l, err := reentrant.New(c, redistest.Name(t))
		require.NoError(t, err)
		channel := channelOf(c, l)

		held, err := l.Lock(ctx)
		require.NoError(t, err)
		const n = 10
		errs := startWaiters(ctx, l, n)
		// A waiter registers with the hub before the subscription is confirmed: wait for both.
		require.Eventually(t, func() bool {
			return rt.Hub.Waiters() == n && subscribers(rdb, channel) >= 1
		}, 10*time.Second, 5*time.Millisecond, "all waiters parked, the channel subscribed")
		assert.Equal(t, 1, rt.Hub.Channels())
		assert.Equal(t, int64(1), subscribers(rdb, channel), "one subscription for %d local waiters", n)
		if cc, ok := rdb.(*redis.ClusterClient); ok {
			require.NoError(t, cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
				counts, err := m.PubSubNumSub(ctx, channel).Result()
				assert.Zero(t, counts[channel], "a cluster uses sharded pub/sub only")
				return err
			}))
		}

		released := time.Now()
		require.NoError(t, l.Unlock(held))
		for _, err := range results(t, errs, n, 30*time.Second) {
			assert.NoError(t, err)
		}
		assert.Zero(t, rt.Hub.Waiters())

		linger := rt.Cfg.Linger
		require.Eventually(t, func() bool {
			return subscribers(rdb, channel) == 0 && rt.Hub.Channels() == 0
		}, linger+10*time.Second, 10*time.Millisecond, "the subscription ends after the linger")
		assert.GreaterOrEqual(t, time.Since(released), linger, "the subscription lingered")
	})
}

// TestClientCloseLeavesNoGoroutineBehind closes a Client with waiters parked, a subscription
// lingering and a hold under the watchdog: the waiters return ErrClosed, and every goroutine
// the Client started ends.
func TestClientCloseLeavesNoGoroutineBehind(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, rdb.Ping(ctx).Err())
		before := runtime.NumGoroutine()

		c, err := aqs.New(ctx, rdb)
		require.NoError(t, err)
		rt := runtimeOf(t, c)
		base := redistest.Name(t)
		parked, err := reentrant.New(c, base+"-parked")
		require.NoError(t, err)
		lingering, err := reentrant.New(c, base+"-lingering")
		require.NoError(t, err)
		t.Cleanup(func() { rdb.Del(context.Background(), parked.Key(), lingering.Key()) })

		// A lock that was waited on and is free again: its channel lingers.
		held, err := lingering.Lock(ctx)
		require.NoError(t, err)
		errs := startWaiters(ctx, lingering, 1)
		require.Eventually(t, func() bool { return rt.Hub.Waiters() == 1 }, 10*time.Second, 5*time.Millisecond)
		require.NoError(t, lingering.Unlock(held))
		require.NoError(t, results(t, errs, 1, 30*time.Second)[0])

		// A lock held under the watchdog with waiters parked on it.
		held, err = parked.Lock(ctx)
		require.NoError(t, err)
		const n = 5
		errs = startWaiters(ctx, parked, n)
		require.Eventually(t, func() bool { return rt.Hub.Waiters() == n }, 10*time.Second, 5*time.Millisecond)
		require.Equal(t, 2, rt.Hub.Channels(), "one channel waited on, one lingering")

		require.NoError(t, c.Close())
		for _, err := range results(t, errs, n, 10*time.Second) {
			assert.ErrorIs(t, err, aqs.ErrClosed)
		}
		assert.ErrorIs(t, context.Cause(held), aqs.ErrClosed)
		assert.ErrorIs(t, context.Cause(held), aqs.ErrLockLost)

		// Close waits for what the Client started, so only the waiters' goroutines may still be
		// on their way out. The bound stays below the linger: a hub left running would end its
		// subscriptions, and with them its goroutines, after the linger on its own. Polled here
		// rather than with assert.Eventually, whose own goroutines would count.
		deadline := time.Now().Add(rt.Cfg.Linger / 2)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond) // the poll interval of a bounded wait
		}
		if after := runtime.NumGoroutine(); after > before {
			var dump strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&dump, 1)
			t.Errorf("%d goroutines before the Client, %d after Close:\n%s", before, after, dump.String())
		}
	})
}

// pubsubConns lists the ids of m's pub/sub connections named name (any name when empty).
func pubsubConns(m *redis.Client, name string) ([]int64, error) {
	list, err := m.Do(context.Background(), "CLIENT", "LIST", "TYPE", "pubsub").Text()
	if err != nil {
		return nil, err
	}
	var ids []int64
	for line := range strings.Lines(list) {
		var id int64 = -1
		named := name == ""
		for field := range strings.FieldsSeq(line) {
			k, v, _ := strings.Cut(field, "=")
			switch {
			case k == "id":
				if id, err = strconv.ParseInt(v, 10, 64); err != nil {
					return nil, fmt.Errorf("CLIENT LIST line %q: %w", line, err)
				}
			case k == "name" && v == name:
				named = true
			}
		}
		if id >= 0 && named {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// TestParkedWaitersAcquireAfterTheirPubSubConnectionIsKilled kills the hub's pub/sub
// connection while ten waiters are parked, then releases the lock: the hub reconnects, the
// waiters re-check, and every one of them gets the lock, long before the holder's lease (the
// waiters' only other way out) would have run out. The lock is released either at once, when
// the release may be published while nobody is subscribed, or once the subscription is back.
func TestParkedWaitersAcquireAfterTheirPubSubConnectionIsKilled(t *testing.T) {
	// setup returns a client of a deployment, the server of its pub/sub connections and a
	// kill of the Client's pub/sub connections that reports how many it killed.
	type deployment struct {
		rdb    redis.UniversalClient
		server func(channel string) *redis.Client
		name   string // the client name of rdb's connections; "" when the server is ours alone
		kill   func(channel string) int64
	}
	deployments := map[string]func(t *testing.T) deployment{
		// A server of its own, so that CLIENT KILL TYPE pubsub hits this test's connection only.
		"single": func(t *testing.T) deployment {
			rdb := redistest.NewServer(t).Client(t)
			return deployment{
				rdb:    rdb,
				server: func(string) *redis.Client { return rdb },
				kill: func(string) int64 {
					n, err := rdb.ClientKillByFilter(context.Background(), "TYPE", "pubsub").Result()
					require.NoError(t, err)
					return n
				},
			}
		},
		// The shared cluster: kill only the pub/sub connections of this test's client, by name.
		"cluster": func(t *testing.T) deployment {
			opts := redistest.Cluster(t).Options()
			opts.ClientName = redistest.Name(t)
			cc := redis.NewClusterClient(opts)
			t.Cleanup(func() { _ = cc.Close() })
			require.NoError(t, cc.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
				return m.Ping(ctx).Err()
			}))
			d := deployment{rdb: cc, name: opts.ClientName}
			d.server = func(channel string) *redis.Client { return serverOf(t, cc, channel) }
			d.kill = func(channel string) int64 {
				m := d.server(channel)
				var killed int64
				ids, err := pubsubConns(m, d.name)
				require.NoError(t, err)
				for _, id := range ids {
					n, err := m.ClientKillByFilter(context.Background(), "ID", strconv.FormatInt(id, 10), "TYPE", "pubsub").Result()
					require.NoError(t, err)
					killed += n
				}
				return killed
			}
			return d
		},
	}
	for _, topology := range []string{"single", "cluster"} {
		for _, afterResubscribe := range []bool{false, true} {
			name := topology + "/release at once"
			if afterResubscribe {
				name = topology + "/release once resubscribed"
			}
			t.Run(name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				d := deployments[topology](t)
				c := newClient(t, d.rdb)
				rt := runtimeOf(t, c)
				l, err := reentrant.New(c, redistest.Name(t))
				require.NoError(t, err)
				channel := channelOf(c, l)

				const lease = time.Minute
				held, err := l.Lock(ctx, aqs.WithLease(lease))
				require.NoError(t, err)
				const n = 10
				errs := startWaiters(ctx, l, n)
				require.Eventually(t, func() bool {
					return rt.Hub.Waiters() == n && subscribers(d.rdb, channel) == 1
				}, 10*time.Second, 5*time.Millisecond, "all waiters parked and subscribed")
				server := d.server(channel)
				before, err := pubsubConns(server, d.name)
				require.NoError(t, err)
				require.Len(t, before, 1, "the Client's one pub/sub connection")

				require.Positive(t, d.kill(channel), "killed the hub's pub/sub connection")
				if afterResubscribe {
					require.Eventually(t, func() bool {
						now, err := pubsubConns(server, d.name)
						return err == nil && len(now) == 1 && !slices.Contains(before, now[0]) && subscribers(d.rdb, channel) == 1
					}, 10*time.Second, 5*time.Millisecond, "the hub subscribed again on a new connection")
				}
				released := time.Now()
				require.NoError(t, l.Unlock(held))
				for _, err := range results(t, errs, n, lease/4) {
					assert.NoError(t, err)
				}
				t.Logf("%d waiters went through in %v", n, time.Since(released))
				assert.Zero(t, rt.Hub.Waiters())
			})
		}
	}
}

// TestCloseRacingAFirstWaitIsRaceFree closes a runtime while a first waiter is opening the
// hub's connection: under -race, Close must not race the start of the receiving goroutine.
func TestCloseRacingAFirstWaitIsRaceFree(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	channel := redistest.Name(t)
	for range 300 {
		rt, err := core.NewRuntime(context.Background(), rdb, core.DefaultConfig())
		require.NoError(t, err)
		waited := make(chan struct{})
		go func() {
			defer close(waited)
			if w, err := rt.Hub.Wait(context.Background(), channel, "", nil); err == nil {
				w.Close()
			}
		}()
		require.NoError(t, rt.Close())
		<-waited
	}
}

// A resharding moves a lock's slot to another master while a waiter is parked: the old master
// ends the waiter's shard channel subscription itself. The hub moves the channel to a
// connection to the new master, so the holder's release, published there, still wakes the
// waiter at once, instead of leaving it to its fallback timer (the holder's remaining lease,
// here the watchdog's 30s).
func TestWaiterIsWokenAfterItsSlotMovesToAnotherMaster(t *testing.T) {
	cl := redistest.NewCluster(t)
	rdb := cl.Client(t)
	ctx := context.Background()
	holderClient, err := aqs.New(ctx, rdb)
	require.NoError(t, err)
	defer holderClient.Close()
	waiterClient, err := aqs.New(ctx, rdb)
	require.NoError(t, err)
	defer waiterClient.Close()
	name := redistest.Name(t)
	holderLock, err := reentrant.New(holderClient, name)
	require.NoError(t, err)
	waiterLock, err := reentrant.New(waiterClient, name)
	require.NoError(t, err)

	// A Client whose go-redis slot map predates the move: its first subscription after the
	// move may go to the old master, which refuses it (MOVED).
	staleClient, err := aqs.New(ctx, cl.Client(t))
	require.NoError(t, err)
	defer staleClient.Close()
	staleLock, err := reentrant.New(staleClient, name)
	require.NoError(t, err)

	held, err := holderLock.Lock(ctx)
	require.NoError(t, err)
	got := make(chan error, 1)
	// lockOnce takes l and releases it at once, in a goroutine, and reports on got.
	lockOnce := func(l *reentrant.Lock) {
		go func() {
			h, err := l.Lock(ctx)
			if err == nil {
				err = l.Unlock(h)
			}
			got <- err
		}()
	}
	lockOnce(waiterLock)
	channel := channelOf(waiterClient, waiterLock)
	require.Eventually(t, func() bool { return subscribers(rdb, channel) == 1 }, 5*time.Second, time.Millisecond)

	slot := int(core.Slot(channel))
	to := 0
	for i, addr := range cl.Addrs() {
		if m, _ := rdb.MasterForKey(ctx, channel); m != nil && m.Options().Addr != addr {
			to = i
			break
		}
	}
	cl.MoveSlot(t, slot, to)
	newMaster := redis.NewClient(&redis.Options{Addr: cl.Addrs()[to]})
	defer newMaster.Close()
	require.Eventually(t, func() bool {
		n, err := newMaster.PubSubShardNumSub(ctx, channel).Result()
		return err == nil && n[channel] == 1
	}, 5*time.Second, 5*time.Millisecond, "the waiter's subscription did not move to the new master")

	require.NoError(t, holderLock.Unlock(held))
	awaitWoken(t, got, "the waiter, after its slot moved")

	// The stale Client's waiter subscribes after the move, and is woken by the next release.
	require.NoError(t, waiterClient.Close()) // its lingering subscription ends
	require.Eventually(t, func() bool {
		n, err := newMaster.PubSubShardNumSub(ctx, channel).Result()
		return err == nil && n[channel] == 0
	}, 5*time.Second, 5*time.Millisecond)
	held, err = holderLock.Lock(ctx)
	require.NoError(t, err)
	lockOnce(staleLock)
	stale := channelOf(staleClient, staleLock) // in the same slot
	require.Eventually(t, func() bool {
		n, err := newMaster.PubSubShardNumSub(ctx, stale).Result()
		return err == nil && n[stale] == 1
	}, 5*time.Second, 5*time.Millisecond, "the stale Client's waiter did not subscribe on the new master")
	require.NoError(t, holderLock.Unlock(held))
	awaitWoken(t, got, "the stale Client's waiter")
}

// awaitWoken waits for a waiter, released just now, to report that it got the lock, well
// before its fallback timer (the holder's remaining lease, about 30s) would have let it.
func awaitWoken(t *testing.T, got <-chan error, who string) {
	t.Helper()
	start := time.Now()
	select {
	case err := <-got:
		require.NoError(t, err)
		assert.Less(t, time.Since(start), 5*time.Second, who)
	case <-time.After(10 * time.Second):
		t.Fatalf("%s was not woken by the release", who)
	}
}

// A message of tags wakes exactly the waiters registered with one of them, marked tagged (a
// script's grants to several waiters of one Client come as one message); "*" wakes every
// waiter, untagged (to look again).
func TestTagsMessageWakesExactlyItsWaiters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := redistest.Single(t).Client(t)
	c := newClient(t, rdb)
	rt := runtimeOf(t, c)
	channel := redistest.Name(t) + ":c:" + c.ID()
	var ws []*core.Waiter
	for _, tag := range []string{"a", "b", "c"} {
		w, err := rt.Hub.Wait(ctx, channel, tag, nil)
		require.NoError(t, err)
		defer w.Close()
		ws = append(ws, w)
	}
	require.NoError(t, rdb.Publish(ctx, channel, "a c").Err())
	for _, i := range []int{0, 2} {
		select {
		case <-ws[i].C:
			assert.True(t, ws[i].Tagged(), "waiter %d", i)
		case <-ctx.Done():
			t.Fatalf("waiter %d was not woken by its tag", i)
		}
	}
	assert.False(t, ws[1].Tagged(), "a waiter whose tag the message does not name")
	select {
	case <-ws[1].C:
		t.Fatal("a waiter whose tag the message does not name was woken")
	default:
	}
	rt.Hub.Deliver(channel, "*")
	select {
	case <-ws[1].C:
		assert.False(t, ws[1].Tagged(), "a wakeup to look again is not a grant")
	case <-ctx.Done():
		t.Fatal("\"*\" did not wake every waiter")
	}
}
