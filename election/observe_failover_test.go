package election_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/election"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// A controlled Sentinel failover (SENTINEL FAILOVER) leaves the old master running, a master
// still, with the observer's subscription on it and answering its pings, until Sentinel turns
// it into a replica some ten seconds later; what is published on the new master never reaches
// it. The observer finds that the server its Client's calls go to does not know its
// subscription, subscribes again there, and reports the leader that began on the new master,
// well before the old master is a replica.
func TestObserveFollowsAControlledSentinelFailover(t *testing.T) {
	ctx := context.Background()
	g := redistest.NewSentinel(t)
	rdb := g.Client(t)
	c := newClient(t, rdb)
	e := newElection(t, c)
	obs, stop := context.WithCancel(ctx)
	defer stop()
	changes := e.Observe(obs)

	lead, err := e.Campaign(ctx, "before the failover")
	require.NoError(t, err)
	assert.Equal(t, "before the failover", next(t, changes).Value)
	require.Eventually(t, func() bool { return subscribers(t, rdb, e) == 1 }, 5*time.Second, 2*time.Millisecond,
		"the observer subscribes")
	require.NoError(t, e.Resign(lead))
	// The lock is free on the replica too before it is promoted, so that the next candidate
	// leads at once on the new master.
	replica := redis.NewClient(&redis.Options{Addr: g.ReplicaAddr()})
	defer replica.Close()
	require.Eventually(t, func() bool {
		n, err := replica.Exists(ctx, e.Keys()[0]).Result()
		return err == nil && n == 0
	}, 5*time.Second, 2*time.Millisecond, "the resignation reaches the replica")

	_, err = g.SwitchOver()
	require.NoError(t, err)
	promoted := time.Now()
	// A candidate of a Client made now: its calls go to the new master.
	after := newClient(t, g.Client(t))
	lead, err = sameElection(t, after, e).Campaign(ctx, "after the failover")
	require.NoError(t, err)
	defer func() { assert.NoError(t, sameElection(t, after, e).Resign(lead)) }()

	// Within twice the observer's idle period (its pings, its check) and a margin; the old
	// master becomes a replica some ten seconds after the promotion, and even then hears
	// nothing of what was published before.
	timer := time.NewTimer(8 * time.Second)
	defer timer.Stop()
	for {
		select {
		case l, ok := <-changes:
			require.True(t, ok, "the observer's channel closed")
			if l.Value != "after the failover" {
				continue
			}
			assert.Equal(t, election.Leadership{Value: "after the failover", Token: tokenOf(t, lead), Client: after.ID()}, l)
			t.Logf("the observer reported the new leader %v after the promotion", time.Since(promoted).Round(time.Millisecond))
			return
		case <-timer.C:
			t.Fatalf("the observer did not report the leader that began on the new master")
		}
	}
}
