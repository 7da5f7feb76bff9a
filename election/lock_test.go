package election_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/election"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// The election's behaviour on the fair lock's queue: the order of candidates, a candidate
// that gives up, the end of a leadership by Resign, by its lease, by a forced unlock and by
// Client.Close, and the election and fair.New(c, name) as one lock.

// sameElection returns, on c, the election of e's name.
func sameElection(t testing.TB, c *aqs.Client, e *election.Election) *election.Election {
	t.Helper()
	same, err := election.New(c, e.Name())
	require.NoError(t, err)
	return same
}

// Candidates of three Clients lead in the order their campaigns reached Redis, each once the
// one before it resigned, each with a greater token, and Leader reports each in turn. A
// Resign through another Client is not the leader's.
func TestCandidatesLeadInArrivalOrderAcrossClients(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c0 := newClient(t, rdb)
		es, ids := []*election.Election{newElection(t, c0)}, []string{c0.ID()}
		for range 2 {
			c := newClient(t, rdb)
			es, ids = append(es, sameElection(t, c, es[0])), append(ids, c.ID())
		}
		first, err := es[0].Campaign(ctx, "first")
		require.NoError(t, err)

		const n = 7
		var waiting []<-chan campaign
		for i := range n {
			waiting = append(waiting, campaignAsync(ctx, es[i%3], fmt.Sprintf("candidate %d", i)))
			awaitCandidates(t, rdb, es[0], int64(i+1))
		}
		lead, prev, resignVia := first, tokenOf(t, first), es[0]
		for i := range n {
			require.NoError(t, resignVia.Resign(lead))
			lead = led(t, waiting[i], 5*time.Second)
			for j := i + 1; j < n; j++ {
				select {
				case r := <-waiting[j]:
					t.Fatalf("candidate %d led (%v) while candidate %d did", j, r.err, i)
				default:
				}
			}
			tok := tokenOf(t, lead)
			assert.Greater(t, tok, prev, "candidate %d's token", i)
			other := es[(i+1)%3]
			leaderIs(t, other, election.Leadership{Value: fmt.Sprintf("candidate %d", i), Token: tok, Client: ids[i%3]})
			assert.ErrorIs(t, other.Resign(lead), aqs.ErrNotOwner, "candidate %d resigned through another Client", i)
			assert.NoError(t, lead.Err(), "candidate %d still leads", i)
			prev, resignVia = tok, es[i%3]
		}
		require.NoError(t, resignVia.Resign(lead))
		noLeader(t, es[0])
		assertNothingLeft(t, rdb, es[0])
	})
}

var errGaveUp = errors.New("the candidate gave up")

// A candidate whose context ends while it waits (cancelled, cancelled with a cause, past its
// deadline) fails with the context's cause and leaves the queue before Campaign returns;
// when the leader resigns, nobody is left to lead and nothing is left in Redis.
func TestCandidateWhoseContextEndsLeavesTheQueue(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c1 := newClient(t, rdb)
		e1 := newElection(t, c1)
		e2 := sameElection(t, newClient(t, rdb), e1)
		lead, err := e1.Campaign(ctx, "leader")
		require.NoError(t, err)

		cancelled, cancel := context.WithCancel(ctx)
		defer cancel()
		caused, cancelCause := context.WithCancelCause(ctx)
		defer cancelCause(nil)
		w1 := campaignAsync(cancelled, e2, "cancelled")
		awaitCandidates(t, rdb, e1, 1)
		w2 := campaignAsync(caused, e2, "cancelled with a cause")
		awaitCandidates(t, rdb, e1, 2)

		cancel()
		r := <-w1
		assert.ErrorIs(t, r.err, context.Canceled, "cancelled")
		assert.Nil(t, r.lead)
		assert.Equal(t, int64(1), candidatesQueued(t, rdb, e1), "the cancelled candidate left the queue")
		cancelCause(errGaveUp)
		r = <-w2
		assert.ErrorIs(t, r.err, errGaveUp, "cancelled with a cause")
		assert.Nil(t, r.lead)
		assert.Zero(t, candidatesQueued(t, rdb, e1), "the candidate cancelled with a cause left the queue")
		short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancelShort()
		r = <-campaignAsync(short, e2, "deadline")
		assert.ErrorIs(t, r.err, context.DeadlineExceeded, "deadline")
		assert.Nil(t, r.lead)
		assert.Zero(t, candidatesQueued(t, rdb, e1), "the candidate past its deadline left the queue")

		leaderIs(t, e2, election.Leadership{Value: "leader", Token: tokenOf(t, lead), Client: c1.ID()})
		require.NoError(t, e1.Resign(lead))
		noLeader(t, e2)
		assertNothingLeft(t, rdb, e1)
	})
}

// A candidate whose context ends as the leadership is handed to it passes it on: the next
// candidate leads, whichever way the race went. A candidate that led all the same, before its
// context ended, still leads until it resigns: its leading context is not its campaign's.
func TestCampaignEndingAsLeadershipArrivesPassesItOn(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	ctx := context.Background()
	e1 := newElection(t, newClient(t, rdb))
	e2 := sameElection(t, newClient(t, rdb), e1)
	c3 := newClient(t, rdb)
	e3 := sameElection(t, c3, e1)
	passed, kept := 0, 0
	for i := range 10 {
		lead, err := e1.Campaign(ctx, "leader")
		require.NoError(t, err)
		gives, giveUp := context.WithCancel(ctx)
		first := campaignAsync(gives, e2, "gives up")
		awaitCandidates(t, rdb, e1, 1)
		second := campaignAsync(ctx, e3, "next")
		awaitCandidates(t, rdb, e1, 2)
		if i%2 == 0 { // the context ends first, the resignation follows before it is noticed
			giveUp()
			require.NoError(t, e1.Resign(lead))
		} else { // the other way round
			require.NoError(t, e1.Resign(lead))
			giveUp()
		}
		r := <-first
		if r.err == nil {
			kept++
			require.NoError(t, r.lead.Err(), "round %d: the leadership outlives its campaign's context", i)
			require.NoError(t, e2.Resign(r.lead), "round %d: the candidate that led all the same resigns", i)
		} else {
			passed++
			require.ErrorIs(t, r.err, context.Canceled, "round %d", i)
		}
		next := led(t, second, 5*time.Second)
		leaderIs(t, e1, election.Leadership{Value: "next", Token: tokenOf(t, next), Client: c3.ID()})
		require.NoError(t, e3.Resign(next))
		assertNothingLeft(t, rdb, e1)
	}
	t.Logf("of 10 candidates whose context ended as the leadership came, %d passed it on, %d led first", passed, kept)
}

// The leader record lives as long as the leadership: it outlives its first lease while the
// watchdog renews it, and once the leader's process stops renewing (here its Client is
// closed without a Resign), the lock and the record expire with the lease. A record left by a
// Resign names a hold that no longer holds: nobody leads, and it expires too.
func TestLeaderRecordExpiresWithTheLease(t *testing.T) {
	const lease = 600 * time.Millisecond
	rdb := redistest.Single(t).Client(t)
	ctx := context.Background()
	c, err := aqs.New(ctx, rdb, aqs.WithWatchdogTimeout(lease))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	e := newElection(t, c)
	reader := sameElection(t, newClient(t, rdb), e)
	record := e.Keys()[3]

	lead, err := e.Campaign(ctx, "short-lived")
	require.NoError(t, err)
	pttl, err := rdb.PTTL(ctx, record).Result()
	require.NoError(t, err)
	assert.Positive(t, pttl, "the record expires")
	assert.LessOrEqual(t, pttl, lease, "the record expires with the lease")
	time.Sleep(2 * lease) // two leases pass while the watchdog renews
	require.NoError(t, lead.Err(), "the leadership outlived its first lease")
	leaderIs(t, reader, election.Leadership{Value: "short-lived", Token: tokenOf(t, lead), Client: c.ID()})

	require.NoError(t, c.Close())
	require.Eventually(t, func() bool {
		n, err := rdb.Exists(ctx, e.Keys()...).Result()
		return err == nil && n == 0
	}, lease+5*time.Second, 5*time.Millisecond, "the lock and the record expire with the lease")
	noLeader(t, reader)

	// A Resign hands the lock on; with nobody to hand it to, the record stays a while, stale.
	c2 := newClient(t, rdb, aqs.WithWatchdogTimeout(lease))
	e2 := sameElection(t, c2, e)
	lead, err = e2.Campaign(ctx, "resigns")
	require.NoError(t, err)
	require.NoError(t, e2.Resign(lead))
	noLeader(t, reader)
	assertNothingLeft(t, rdb, e)
	require.Eventually(t, func() bool {
		n, err := rdb.Exists(ctx, record).Result()
		return err == nil && n == 0
	}, lease+5*time.Second, 5*time.Millisecond, "the stale record expires")
}

// aqs unlock --force (fair.Lock.ForceUnlock of the election's name) ends a leadership: the
// next candidate leads at once, the former leader's leading context ends with
// aqs.ErrLockLost at its next renewal, and its Proclaim and Resign are not the leader's.
func TestForceUnlockEndsTheLeadershipAndTheNextCandidateLeads(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		const watchdog = 900 * time.Millisecond // renewals every 300ms
		ctx := context.Background()
		c1 := newClient(t, rdb, aqs.WithWatchdogTimeout(watchdog))
		e1 := newElection(t, c1)
		c2 := newClient(t, rdb)
		e2 := sameElection(t, c2, e1)
		admin, err := fair.New(newClient(t, rdb), e1.Name())
		require.NoError(t, err)

		lead, err := e1.Campaign(ctx, "forced out")
		require.NoError(t, err)
		next := campaignAsync(ctx, e2, "next")
		awaitCandidates(t, rdb, e1, 1)

		ok, err := admin.ForceUnlock(ctx)
		require.NoError(t, err)
		require.True(t, ok, "the leader held the lock")
		lead2 := led(t, next, 5*time.Second)
		tok2 := tokenOf(t, lead2)
		assert.Greater(t, tok2, tokenOf(t, lead))
		leaderIs(t, e1, election.Leadership{Value: "next", Token: tok2, Client: c2.ID()})

		select {
		case <-lead.Done():
			assert.ErrorIs(t, context.Cause(lead), aqs.ErrLockLost)
		case <-time.After(watchdog + 5*time.Second):
			t.Fatal("the forced-out leader's leading context did not end")
		}
		err = e1.Proclaim(lead, "still me")
		assert.ErrorIs(t, err, aqs.ErrNotOwner, "Proclaim of the forced-out leader")
		assert.ErrorIs(t, e1.Resign(lead), aqs.ErrNotOwner, "Resign of the forced-out leader")
		leaderIs(t, e1, election.Leadership{Value: "next", Token: tok2, Client: c2.ID()})
		require.NoError(t, e2.Resign(lead2))
		assertNothingLeft(t, rdb, e1)
	})
}

// The election and fair.New(c, name) are one lock, in one queue: a fair holder excludes every
// leader, a leader every fair holder, and fair lockers and candidates are served in the order
// they came; the same holds for the two on one Client.
func TestElectionAndFairLockOfOneNameAreOneLock(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		for _, clients := range []string{"two Clients", "one Client"} {
			t.Run(clients, func(t *testing.T) {
				ctx := context.Background()
				ce, cf := newClient(t, rdb), newClient(t, rdb)
				if clients == "one Client" {
					cf = ce
				}
				e := newElection(t, ce)
				f, err := fair.New(cf, e.Name())
				require.NoError(t, err)
				e2 := sameElection(t, newClient(t, rdb), e)

				// A fair holder: candidates wait, and nobody leads.
				held, err := f.Lock(ctx)
				require.NoError(t, err)
				w := campaignAsync(ctx, e, "after the fair holder")
				awaitCandidates(t, rdb, e, 1)
				noLeader(t, e)
				assertWaiting(t, w, "behind a fair holder")
				require.NoError(t, f.Unlock(held))
				lead := led(t, w, 5*time.Second)
				leaderIs(t, e2, election.Leadership{Value: "after the fair holder", Token: tokenOf(t, lead), Client: ce.ID()})

				// A leader: fair lockers wait, in one queue with the candidates.
				_, ok, err := f.TryLock(ctx)
				require.NoError(t, err)
				assert.False(t, ok, "TryLock of a leader's lock")
				fairHeld := make(chan context.Context, 1)
				go func() {
					h, err := f.Lock(ctx)
					assert.NoError(t, err)
					fairHeld <- h
				}()
				awaitCandidates(t, rdb, e, 1)
				w2 := campaignAsync(ctx, e2, "after the fair locker")
				awaitCandidates(t, rdb, e, 2)
				require.NoError(t, e.Resign(lead))
				var h context.Context
				select {
				case h = <-fairHeld:
				case <-time.After(5 * time.Second):
					t.Fatal("the fair locker, first in the queue, did not get the lock")
				}
				noLeader(t, e)
				assertWaiting(t, w2, "behind the fair holder")
				require.NoError(t, f.Unlock(h))
				lead2 := led(t, w2, 5*time.Second)
				leaderHas(t, e, "after the fair locker", lead2)
				require.NoError(t, e2.Resign(lead2))
				assertNothingLeft(t, rdb, e)
			})
		}
	})
}

// leaderHas checks that the leader is lead's, with value.
func leaderHas(t *testing.T, e *election.Election, value string, lead context.Context) {
	t.Helper()
	l, ok, err := e.Leader(context.Background())
	require.NoError(t, err)
	require.True(t, ok, "nobody leads")
	assert.Equal(t, value, l.Value)
	assert.Equal(t, tokenOf(t, lead), l.Token)
}

// After Client.Close every call fails with aqs.ErrClosed, a leader's leading context ends
// with a cause matching aqs.ErrLockLost and aqs.ErrClosed, a queued candidate is woken with
// aqs.ErrClosed and leaves the queue, observers' channels close, and the leadership is left
// to expire in Redis, not deleted.
func TestCallsAfterCloseFailWithErrClosed(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	ctx := context.Background()
	c, err := aqs.New(ctx, rdb)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	c2, err := aqs.New(ctx, rdb)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c2.Close() })
	e := newElection(t, c)
	e2 := sameElection(t, c2, e)
	reader := sameElection(t, newClient(t, rdb), e)

	lead, err := e.Campaign(ctx, "closing")
	require.NoError(t, err)
	tok := tokenOf(t, lead)
	changes := e.Observe(ctx)
	assert.Equal(t, election.Leadership{Value: "closing", Token: tok, Client: c.ID()}, next(t, changes))
	waiting := campaignAsync(ctx, e2, "queued")
	awaitCandidates(t, rdb, e, 1)

	require.NoError(t, c2.Close())
	select {
	case r := <-waiting:
		assert.ErrorIs(t, r.err, aqs.ErrClosed, "the queued candidate")
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake the queued candidate")
	}
	assert.Zero(t, candidatesQueued(t, rdb, e), "the candidate left the queue")

	require.NoError(t, c.Close())
	assert.ErrorIs(t, context.Cause(lead), aqs.ErrLockLost)
	assert.ErrorIs(t, context.Cause(lead), aqs.ErrClosed)
	_, err = e.Campaign(ctx, "again")
	assert.ErrorIs(t, err, aqs.ErrClosed, "Campaign")
	assert.ErrorIs(t, e.Proclaim(lead, "again"), aqs.ErrClosed, "Proclaim")
	assert.ErrorIs(t, e.Resign(lead), aqs.ErrClosed, "Resign")
	_, _, err = e.Leader(ctx)
	assert.ErrorIs(t, err, aqs.ErrClosed, "Leader")
	_, err = e2.Campaign(ctx, "again")
	assert.ErrorIs(t, err, aqs.ErrClosed, "Campaign of the other closed Client")
	select {
	case l, ok := <-changes:
		assert.False(t, ok, "the observer's channel is closed, not sent %+v", l)
	case <-time.After(5 * time.Second):
		t.Fatal("the observer's channel was not closed")
	}
	_, ok := <-e.Observe(ctx)
	assert.False(t, ok, "Observe after Close returns a closed channel")

	// The leadership was not deleted: it expires with its lease.
	leaderIs(t, reader, election.Leadership{Value: "closing", Token: tok, Client: c.ID()})
	for _, k := range []string{e.Keys()[0], e.Keys()[3]} {
		pttl, err := rdb.PTTL(ctx, k).Result()
		require.NoError(t, err)
		assert.Positive(t, pttl, "%s expires", k)
	}
	require.NoError(t, c.Close(), "Close is idempotent")
	require.NoError(t, rdb.Del(ctx, e.Keys()...).Err())
}
