package election_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/election"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// Observe: the current leader first, every change in order, latest-wins for a receiver that
// falls behind, the end of the channel, and a subscription that the server cuts.

// quiet checks that changes reports nothing within a moment.
func quiet(t *testing.T, changes <-chan election.Leadership, what string) {
	t.Helper()
	select {
	case l, ok := <-changes:
		t.Fatalf("%s: the observer reported %+v (open %v)", what, l, ok)
	case <-time.After(50 * time.Millisecond):
	}
}

// closes checks that changes is closed, within a bound.
func closes(t *testing.T, changes <-chan election.Leadership, what string) {
	t.Helper()
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-changes:
			if !ok {
				return
			}
		case <-timer.C:
			t.Fatalf("%s: the observer's channel was not closed", what)
		}
	}
}

// subscribers returns how many connections subscribe to the election's channel, on the node
// that serves it: a plain subscription on a single node, a sharded one on Redis Cluster.
func subscribers(t *testing.T, rdb redis.UniversalClient, e *election.Election) int64 {
	t.Helper()
	ctx := context.Background()
	channel := e.Keys()[3]
	var counts map[string]int64
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		node, nerr := cc.MasterForKey(ctx, channel)
		require.NoError(t, nerr)
		counts, err = node.PubSubShardNumSub(ctx, channel).Result()
	} else {
		counts, err = rdb.PubSubNumSub(ctx, channel).Result()
	}
	require.NoError(t, err)
	return counts[channel]
}

// killSubscribers kills every pub/sub connection of the node that serves the election's
// channel, as CLIENT KILL TYPE pubsub does, and returns how many it killed.
func killSubscribers(t *testing.T, rdb redis.UniversalClient, e *election.Election) int64 {
	t.Helper()
	ctx := context.Background()
	var node redis.Cmdable = rdb
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		n, err := cc.MasterForKey(ctx, e.Keys()[3])
		require.NoError(t, err)
		node = n
	}
	n, err := node.ClientKillByFilter(ctx, "TYPE", "pubsub").Result()
	require.NoError(t, err)
	return n
}

// An observer reports the current leader first (nothing while nobody leads), then each new
// leader and each new value, in order, a value with any bytes intact, never the same token
// and value twice in a row, and no time without a leader; its channel closes when its
// context ends, and its subscription goes with it.
func TestObserveReportsTheLeaderThenEveryChangeInOrder(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c1, c2 := newClient(t, rdb), newClient(t, rdb)
		e1 := newElection(t, c1)
		e2 := sameElection(t, c2, e1)
		obs, stop := context.WithCancel(ctx)
		defer stop()
		changes := e2.Observe(obs)
		require.Eventually(t, func() bool { return subscribers(t, rdb, e1) == 1 }, 5*time.Second, 2*time.Millisecond,
			"the observer subscribes")
		quiet(t, changes, "nobody leads")

		lead1, err := e1.Campaign(ctx, "a")
		require.NoError(t, err)
		t1 := tokenOf(t, lead1)
		want := func(value string, tok int64, c *aqs.Client) election.Leadership {
			return election.Leadership{Value: value, Token: tok, Client: c.ID()}
		}
		assert.Equal(t, want("a", t1, c1), next(t, changes))
		require.NoError(t, e1.Proclaim(lead1, "b"))
		assert.Equal(t, want("b", t1, c1), next(t, changes))
		require.NoError(t, e1.Proclaim(lead1, "b"))
		quiet(t, changes, "the same value again")
		odd := "c \x00 \xff  two spaces, then a newline\n"
		require.NoError(t, e1.Proclaim(lead1, odd))
		assert.Equal(t, want(odd, t1, c1), next(t, changes), "a value of any bytes")

		// A second observer, from now on: the current leader first.
		late := e1.Observe(obs)
		assert.Equal(t, want(odd, t1, c1), next(t, late), "the current leader first")

		w := campaignAsync(ctx, e2, "d")
		awaitCandidates(t, rdb, e1, 1)
		require.NoError(t, e1.Resign(lead1))
		lead2 := led(t, w, 5*time.Second)
		t2 := tokenOf(t, lead2)
		assert.Equal(t, want("d", t2, c2), next(t, changes), "the next leader")
		assert.Equal(t, want("d", t2, c2), next(t, late), "the next leader")
		require.NoError(t, e2.Resign(lead2))
		quiet(t, changes, "nobody leads")

		stop()
		closes(t, changes, "its context ended")
		closes(t, late, "its context ended")
		require.Eventually(t, func() bool { return subscribers(t, rdb, e1) == 0 }, 5*time.Second, 2*time.Millisecond,
			"the subscription ends with the observers")
		assertNothingLeft(t, rdb, e1)
	})
}

// A burst of changes (leaders that proclaim and resign, one after the other, without
// waiting for anyone): a receiver that keeps up gets them in order, and one that reads
// nothing until the burst is over finds the last change, having missed some, in order too.
// Neither ever gets a change older than one it got.
func TestObserveReceiverThatFallsBehindFindsTheLatestChange(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	ctx := context.Background()
	c := newClient(t, rdb)
	e := newElection(t, c)
	obs, stop := context.WithCancel(ctx)
	defer stop()
	eager, slow := e.Observe(obs), e.Observe(obs)
	require.Eventually(t, func() bool { return subscribers(t, rdb, e) == 2 }, 5*time.Second, 2*time.Millisecond,
		"the observers subscribe")
	got := make(chan []election.Leadership, 1)
	go func() {
		var ls []election.Leadership
		for l := range eager {
			ls = append(ls, l)
		}
		got <- ls
	}()

	const leaders, proclaims = 4, 5
	var truth []election.Leadership // every change, in the order it was made
	for i := range leaders {
		lead, err := e.Campaign(ctx, fmt.Sprintf("leader %d", i))
		require.NoError(t, err)
		tok := tokenOf(t, lead)
		truth = append(truth, election.Leadership{Value: fmt.Sprintf("leader %d", i), Token: tok, Client: c.ID()})
		for j := range proclaims {
			v := fmt.Sprintf("leader %d, value %d", i, j)
			require.NoError(t, e.Proclaim(lead, v))
			truth = append(truth, election.Leadership{Value: v, Token: tok, Client: c.ID()})
		}
		if i < leaders-1 {
			require.NoError(t, e.Resign(lead))
		} else {
			defer e.Resign(lead)
		}
	}
	last := truth[len(truth)-1]

	// The slow receiver reads only now.
	var slowGot []election.Leadership
	require.Eventually(t, func() bool {
		select {
		case l := <-slow:
			slowGot = append(slowGot, l)
			return l == last
		default:
			return false
		}
	}, 5*time.Second, time.Millisecond, "the slow receiver finds the last change")
	quiet(t, slow, "after the last change")
	stop()
	eagerGot := <-got
	require.NotEmpty(t, eagerGot)
	assert.Equal(t, last, eagerGot[len(eagerGot)-1], "the eager receiver's last change")
	for what, seq := range map[string][]election.Leadership{"eager": eagerGot, "slow": slowGot} {
		at := -1
		for _, l := range seq {
			i := slices.Index(truth, l)
			require.GreaterOrEqual(t, i, 0, "%s: %+v was never a change", what, l)
			require.Greater(t, i, at, "%s: %+v after a later change", what, l)
			at = i
		}
	}
	assert.Less(t, len(slowGot), len(truth), "the slow receiver got the latest change, not every one")
	t.Logf("of %d changes, the eager receiver got %d, the slow one %d", len(truth), len(eagerGot), len(slowGot))
}

// When the server kills the observer's connection (CLIENT KILL TYPE pubsub), the observer
// subscribes again and reports a leader that began while it was not subscribed, whose change
// was published to nobody. First the kill alone, with the change made at once (go-redis
// subscribes again on the next receive: the change may come as a message or be read after
// the subscription); then, so that the change is certainly made while the observer is out,
// with its Redis user refused the channel meanwhile (ACL), so that its new subscription is
// refused too, until the channel is allowed again.
func TestObserveResubscribesAfterTheServerKillsItsConnection(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c1, c2 := newClient(t, rdb), newClient(t, rdb)
		e1 := newElection(t, c1)
		e2 := sameElection(t, c2, e1)
		user := redistest.Name(t)
		acl := func(rules ...string) {
			t.Helper()
			args := append([]any{"acl", "setuser", user}, toAny(rules)...)
			require.NoError(t, forEachNode(ctx, rdb, func(n *redis.Client) error { return n.Do(ctx, args...).Err() }))
		}
		acl("on", ">"+user, "~*", "&*", "+@all")
		t.Cleanup(func() {
			_ = forEachNode(context.Background(), rdb, func(n *redis.Client) error {
				return n.Do(context.Background(), "acl", "deluser", user).Err()
			})
		})
		obs, stop := context.WithCancel(ctx)
		defer stop()
		changes := sameElection(t, newClient(t, asUser(t, rdb, user)), e1).Observe(obs)

		lead, err := e1.Campaign(ctx, "before the kill")
		require.NoError(t, err)
		assert.Equal(t, "before the kill", next(t, changes).Value)
		sides := []struct {
			e *election.Election
			c *aqs.Client
		}{{e1, c1}, {e2, c2}}
		cur := 0
		for round := range 3 { // the kill alone
			from, to := sides[cur], sides[1-cur]
			value := fmt.Sprintf("kill %d", round)
			w := campaignAsync(ctx, to.e, value)
			awaitCandidates(t, rdb, e1, 1)
			require.Eventually(t, func() bool { return subscribers(t, rdb, e1) == 1 }, 10*time.Second,
				2*time.Millisecond, "kill %d: the observer is subscribed", round)
			require.Positive(t, killSubscribers(t, rdb, e1), "kill %d", round)
			require.NoError(t, from.e.Resign(lead))
			lead = led(t, w, 5*time.Second)
			assert.Equal(t, election.Leadership{Value: value, Token: tokenOf(t, lead), Client: to.c.ID()}, next(t, changes),
				"kill %d: the leader that began as the connection was killed", round)
			cur = 1 - cur
		}
		for round := range 2 { // the kill, and the channel refused
			require.Eventually(t, func() bool { return subscribers(t, rdb, e1) == 1 }, 10*time.Second,
				2*time.Millisecond, "round %d: the observer is subscribed", round)
			from, to := sides[cur], sides[1-cur]
			value := fmt.Sprintf("round %d", round)
			w := campaignAsync(ctx, to.e, value)
			awaitCandidates(t, rdb, e1, 1)

			acl("resetchannels")
			killSubscribers(t, rdb, e1)
			require.Eventually(t, func() bool { return subscribers(t, rdb, e1) == 0 }, 5*time.Second,
				2*time.Millisecond, "round %d: the observer's connection is killed", round)
			require.NoError(t, from.e.Resign(lead))
			lead = led(t, w, 5*time.Second)
			assert.Zero(t, subscribers(t, rdb, e1), "round %d: the change was published to nobody", round)
			quiet(t, changes, "unsubscribed")

			acl("allchannels")
			assert.Equal(t, election.Leadership{Value: value, Token: tokenOf(t, lead), Client: to.c.ID()}, next(t, changes),
				"round %d: the leader that began meanwhile", round)
			cur = 1 - cur
		}
		require.NoError(t, sides[cur].e.Resign(lead))
		stop()
		closes(t, changes, "its context ended")
		assertNothingLeft(t, rdb, e1)
	})
}

// forEachNode runs f on the node of rdb, or on every master of a cluster.
func forEachNode(ctx context.Context, rdb redis.UniversalClient, f func(*redis.Client) error) error {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return f(n) })
	}
	return f(rdb.(*redis.Client))
}

// asUser returns a new client of rdb's Redis that logs in as user, closed at the end of the
// test.
func asUser(t *testing.T, rdb redis.UniversalClient, user string) redis.UniversalClient {
	t.Helper()
	var c redis.UniversalClient
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		opt := *cc.Options()
		opt.Username, opt.Password = user, user
		c = redis.NewClusterClient(&opt)
	} else {
		opt := *rdb.(*redis.Client).Options()
		opt.Username, opt.Password = user, user
		c = redis.NewClient(&opt)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func toAny(ss []string) []any {
	a := make([]any, len(ss))
	for i, s := range ss {
		a[i] = s
	}
	return a
}

// An observer's channel closes when its Client closes, and its subscription ends; Observe in
// a done context, or on a closed Client, returns a closed channel.
func TestObserveClosesWithItsClient(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c, err := aqs.New(ctx, rdb)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		e := newElection(t, c)
		done, cancel := context.WithCancel(ctx)
		cancel()
		_, ok := <-e.Observe(done)
		assert.False(t, ok, "Observe in a done context")

		changes := e.Observe(ctx)
		require.Eventually(t, func() bool { return subscribers(t, rdb, e) == 1 }, 5*time.Second, 2*time.Millisecond,
			"the observer subscribes")
		require.NoError(t, c.Close())
		closes(t, changes, "its Client closed")
		require.Eventually(t, func() bool { return subscribers(t, rdb, e) == 0 }, 5*time.Second, 2*time.Millisecond,
			"the subscription ends with the Client")
		_, ok = <-e.Observe(ctx)
		assert.False(t, ok, "Observe on a closed Client")
	})
}

// When a resharding moves the election's slot to another master, the old master ends the
// observers' subscriptions and refuses new ones (MOVED): an observer subscribed before the
// move, and one whose Client's slot map still shows the old owner when it begins, both
// subscribe on the new master and report the leader and its changes.
func TestObserveFollowsTheElectionsSlotToItsNewMaster(t *testing.T) {
	cl := redistest.NewCluster(t)
	rdb := cl.Client(t)
	ctx := context.Background()
	c := newClient(t, rdb)
	e := newElection(t, c)
	stale := sameElection(t, newClient(t, cl.Client(t)), e) // its slot map is loaded now
	obs, stop := context.WithCancel(ctx)
	defer stop()
	before := e.Observe(obs)

	lead, err := e.Campaign(ctx, "before the move")
	require.NoError(t, err)
	want := election.Leadership{Value: "before the move", Token: tokenOf(t, lead), Client: c.ID()}
	assert.Equal(t, want, next(t, before))

	channel := e.Keys()[3]
	slot, err := rdb.ClusterKeySlot(ctx, channel).Result()
	require.NoError(t, err)
	from := cl.MasterOf(channel)
	cl.MoveSlot(t, int(slot), (from+1)%3)
	after := stale.Observe(obs)
	assert.Equal(t, want, next(t, after), "the observer whose slot map was stale reports the leader")
	newMaster := redis.NewClient(&redis.Options{Addr: cl.Addrs()[(from+1)%3]})
	defer newMaster.Close()
	require.Eventually(t, func() bool {
		n, err := newMaster.PubSubShardNumSub(ctx, channel).Result()
		return err == nil && n[channel] == 2
	}, 10*time.Second, 5*time.Millisecond, "both observers subscribe on the new master")

	require.NoError(t, e.Proclaim(lead, "after the move"))
	want.Value = "after the move"
	assert.Equal(t, want, next(t, before), "the observer subscribed before the move")
	assert.Equal(t, want, next(t, after), "the observer whose slot map was stale")
	require.NoError(t, e.Resign(lead))
	stop()
	closes(t, before, "its context ended")
	closes(t, after, "its context ended")
	assertNothingLeft(t, rdb, e)
}
