package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/election"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/scripts"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// The election's own faults. The table of primitives (prim_test.go) has the election's
// candidates face the kills, restarts, network faults and script flushes of every primitive
// as a lock; here its leadership does: leaders that write to a store that checks fencing
// tokens, an observer through the faults, and the replies of the election's own scripts lost.

// electionAt returns an aqs Client (with watchdog) on a new go-redis client of addr, closed
// at the end of the test, and the election of name on it.
func electionAt(t *testing.T, addr, name string, watchdog time.Duration) (*aqs.Client, *election.Election) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	c, err := aqs.New(context.Background(), rdb, aqs.WithWatchdogTimeout(watchdog))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	e, err := election.New(c, name, election.WithWaiterTimeout(loadWaiterTimeout))
	require.NoError(t, err)
	return c, e
}

// watchChanges collects what an observer reports until its channel closes.
func watchChanges(changes <-chan election.Leadership) (latest func() (election.Leadership, int), all func() []election.Leadership) {
	var mu sync.Mutex
	var seen []election.Leadership
	go func() {
		for l := range changes {
			mu.Lock()
			seen = append(seen, l)
			mu.Unlock()
		}
	}()
	latest = func() (election.Leadership, int) {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 {
			return election.Leadership{}, 0
		}
		return seen[len(seen)-1], len(seen)
	}
	all = func() []election.Leadership {
		mu.Lock()
		defer mu.Unlock()
		return append([]election.Leadership(nil), seen...)
	}
	return latest, all
}

// Candidates on three Clients behind a proxy campaign, lead, write to a store that checks
// fencing tokens, and resign, over and over, while the pub/sub connections are killed on the
// server and every connection is cut and delayed now and then (the faults of
// TestPubSubKillsAndDroppedConnectionsKeepWaitersMoving), and an observer behind the same
// proxy reports the leaders. Never two leaders at once (the witness that does not ask Redis),
// no write with a token below one the store saw (each leader checks its leading context
// before it writes), every candidate leads; once the faults stop, the election is free, a new
// leader leads at once, the observer, which reported the leaders in token order, reports it,
// and nothing is left in Redis.
func TestLeadersUnderNetworkFaultsNeverOverlapAndLeadershipComesBack(t *testing.T) {
	span := scale(3*time.Second, 30*time.Second)
	const (
		killEvery = 50 * time.Millisecond
		cutEvery  = 400 * time.Millisecond
		latency   = 10 * time.Millisecond
		watchdog  = time.Second
		work      = 2 * time.Millisecond
		workers   = 2 // per Client
		// maxGap bounds the time without a leader, as the network test's: a lost wakeup is
		// made up for by the waiters' fallback timers and heartbeats, a leadership orphaned
		// by a lost reply ends with its lease.
		maxGap = 5 * time.Second
	)
	srv := redistest.NewServer(t)
	admin := srv.Client(t)
	px := newProxy(t, srv.Addr())
	name := redistest.Name(t)
	var es []*election.Election
	for range 3 {
		_, e := electionAt(t, px.Addr(), name, watchdog)
		es = append(es, e)
	}
	_, watcher := electionAt(t, px.Addr(), name, watchdog)
	obs, stopObserving := context.WithCancel(context.Background())
	defer stopObserving()
	latest, all := watchChanges(watcher.Observe(obs))
	w := witness{dir: t.TempDir()}
	store := &fencedStore{}

	stop, faultsDone := make(chan struct{}), make(chan struct{})
	var kills, cuts int
	go func() {
		defer close(faultsDone)
		killTick, cutTick := time.NewTicker(killEvery), time.NewTicker(cutEvery)
		defer killTick.Stop()
		defer cutTick.Stop()
		end := time.After(span)
		for {
			select {
			case <-end:
				px.SetLatency(0)
				close(stop)
				return
			case <-killTick.C:
				n, err := admin.ClientKillByFilter(context.Background(), "TYPE", "pubsub").Result()
				if err != nil {
					t.Errorf("CLIENT KILL: %v", err)
				}
				kills += int(n)
			case <-cutTick.C:
				px.Cut()
				cuts++
				px.SetLatency(time.Duration(cuts%2) * latency)
			}
		}
	}()

	var (
		wg                sync.WaitGroup
		mu                sync.Mutex
		errs              []string
		last              = time.Now()
		gap               time.Duration
		overlaps, refused atomic.Int64
		lost, leaderships atomic.Int64
		perWorker         = make([]int64, len(es)*workers)
	)
	fail := func(what string, err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, what+": "+err.Error())
	}
	for i := range perWorker {
		e := es[i%len(es)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				lead, err := e.Campaign(ctx, fmt.Sprintf("worker %d", i))
				if err != nil {
					cancel()
					fail("campaign", err)
					continue
				}
				leave, err := w.enter(opExclusive)
				if errors.Is(err, errOverlap) {
					overlaps.Add(1)
					t.Errorf("overlap: worker %d leads at %s; in Redis: %s", i, time.Now().Format("15:04:05.000000"),
						dump(admin, e.Keys()))
				} else if err != nil {
					fail("witness", err)
				}
				tok, err := aqs.FencingToken(lead)
				if err != nil {
					fail("token", err)
				} else if lead.Err() == nil && !store.write(tok) { // the act of leadership, after its check
					refused.Add(1)
					t.Errorf("worker %d wrote with token %d below one the store saw", i, tok)
				}
				timer := time.NewTimer(work)
				select {
				case <-timer.C:
				case <-lead.Done():
					timer.Stop()
				}
				if lead.Err() != nil {
					lost.Add(1)
				}
				leave()
				if err := e.Resign(lead); err != nil && !errors.Is(err, aqs.ErrLockLost) {
					fail("resign", err)
				}
				cancel()
				leaderships.Add(1)
				perWorker[i]++
				now := time.Now()
				mu.Lock()
				gap, last = max(gap, now.Sub(last)), now
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	<-faultsDone

	// Once the faults stop, the election is free within the lease of a leadership orphaned by
	// a lost reply, and a new leader leads at once, reported by the observer.
	direct := srv.Client(t)
	c, err := aqs.New(context.Background(), direct, aqs.WithWatchdogTimeout(watchdog))
	require.NoError(t, err)
	defer c.Close()
	final, err := election.New(c, name)
	require.NoError(t, err)
	lock, err := fair.New(c, name)
	require.NoError(t, err)
	require.True(t, assertEventually(watchdog+5*time.Second, func() bool {
		locked, err := lock.IsLocked(context.Background())
		return err == nil && !locked
	}), "the election is not free after the faults; in Redis: %s", dump(admin, final.Keys()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lead, err := final.Campaign(ctx, "after the faults")
	require.NoError(t, err, "a leader after the faults")
	want := election.Leadership{Value: "after the faults", Token: 0, Client: c.ID()}
	want.Token, err = aqs.FencingToken(lead)
	require.NoError(t, err)
	require.True(t, assertEventually(10*time.Second, func() bool { l, _ := latest(); return l == want }),
		"the observer reported no leader after the faults")
	require.NoError(t, final.Resign(lead))
	stopObserving()
	reported := all()
	for i := 1; i < len(reported); i++ {
		assert.GreaterOrEqual(t, reported[i].Token, reported[i-1].Token, "the observer reported %+v after %+v",
			reported[i], reported[i-1])
	}
	for _, k := range final.Keys()[:3] {
		n, err := direct.Exists(context.Background(), k).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "%s is left", k)
	}
	redistest.AssertNoKeyWithoutTTL(t, direct, name, final.Keys()[0])

	count(int(overlaps.Load()), int(refused.Load()), 0)
	for i, n := range perWorker {
		assert.NotZero(t, n, "worker %d never led", i)
	}
	assert.Less(t, gap, maxGap, "longest time without a leadership")
	t.Logf("SUMMARY election network: %d leaderships (%d lost to the faults) in %v by %d candidates, longest time "+
		"without one %v; %d pub/sub connections killed, %d cuts of every connection, latency %v every other %v; "+
		"overlaps %d, writes below a seen token %d (store: %d accepted); the observer reported %d leaders and values, "+
		"in token order; errors %d: %s", leaderships.Load(), lost.Load(), span, len(perWorker), gap.Round(time.Millisecond),
		kills, cuts, latency, cutEvery, overlaps.Load(), refused.Load(), store.accepted, len(reported), len(errs),
		errorSample(errs, 3))
}

// The reply of one of the election's calls lost on the way back (the proxy drops exactly
// one, and cuts the connection): go-redis sends the call again, and the call succeeds, once.
// Campaign's acquisition, run again, finds the lock its own; its record (elect_lead), run
// again, changes nothing and publishes nothing (revision 1, one change observed); a Proclaim
// run again leaves the new value, observed once; a Resign sent again finds the leadership
// handed on by its first send, and the next candidate leads, once.
func TestElectionCallsWhoseReplyIsLostSucceedOnce(t *testing.T) {
	for _, tc := range []struct{ call, command string }{
		{"Campaign's acquisition", scripts.LockAcquire.SHA()},
		{"Campaign's record", scripts.ElectLead.SHA()},
		{"Proclaim", scripts.ElectProclaim.SHA()},
		{"Resign", scripts.LockRelease.SHA()},
	} {
		t.Run(tc.call, func(t *testing.T) {
			ctx := context.Background()
			srv, px, c := behindAProxy(t, &redis.Options{})
			name := redistest.Name(t)
			e, err := election.New(c, name)
			require.NoError(t, err)
			direct := srv.Client(t)
			t.Cleanup(func() { direct.Del(context.Background(), e.Keys()...) })
			dc, err := aqs.New(ctx, direct)
			require.NoError(t, err)
			t.Cleanup(func() { dc.Close() })
			other, err := election.New(dc, name)
			require.NoError(t, err)
			obs, stop := context.WithCancel(ctx)
			defer stop()
			changes := other.Observe(obs)
			observed := func(want election.Leadership, what string) {
				t.Helper()
				select {
				case l := <-changes:
					assert.Equal(t, want, l, what)
				case <-time.After(5 * time.Second):
					t.Fatalf("%s: not observed", what)
				}
				select {
				case l := <-changes:
					t.Errorf("%s: observed again as %+v", what, l)
				case <-time.After(100 * time.Millisecond):
				}
			}

			campaignDrops := tc.call == "Campaign's acquisition" || tc.call == "Campaign's record"
			if campaignDrops {
				px.DropReplyTo(tc.command)
			}
			lead, err := e.Campaign(ctx, "leader")
			require.NoError(t, err)
			if campaignDrops {
				require.Equal(t, 1, px.Dropped(), "the reply was dropped")
			}
			select { // the watchdog would end a leadership whose lease it counted from too early
			case <-lead.Done():
				t.Fatalf("the leadership was lost: %v", context.Cause(lead))
			case <-time.After(300 * time.Millisecond):
			}
			tok, err := aqs.FencingToken(lead)
			require.NoError(t, err)
			want := election.Leadership{Value: "leader", Token: tok, Client: c.ID()}
			l, ok, err := other.Leader(ctx)
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, want, l)
			rev, err := direct.HGet(ctx, e.Keys()[3], "r").Result()
			require.NoError(t, err)
			assert.Equal(t, "1", rev, "the record's revision: written once")
			observed(want, "the leader")

			switch tc.call {
			case "Proclaim":
				px.DropReplyTo(tc.command)
				require.NoError(t, e.Proclaim(lead, "again"))
				require.Equal(t, 1, px.Dropped(), "the reply was dropped")
				want.Value = "again"
				l, _, err := other.Leader(ctx)
				require.NoError(t, err)
				assert.Equal(t, want, l)
				observed(want, "the new value")
			case "Resign":
				w := make(chan error, 1)
				var next context.Context
				go func() {
					var err error
					next, err = other.Campaign(ctx, "next")
					w <- err
				}()
				require.Eventually(t, func() bool { return direct.ZCard(ctx, e.Keys()[2]).Val() == 1 }, 5*time.Second,
					time.Millisecond, "the next candidate queued")
				px.DropReplyTo(tc.command)
				require.NoError(t, e.Resign(lead), "the Resign ran, and its second send says so")
				require.Equal(t, 1, px.Dropped(), "the reply was dropped")
				require.NoError(t, <-w)
				tok, err := aqs.FencingToken(next)
				require.NoError(t, err)
				observed(election.Leadership{Value: "next", Token: tok, Client: dc.ID()}, "the next leader")
				require.NoError(t, other.Resign(next))
				lead = nil
			}
			if lead != nil {
				require.NoError(t, e.Resign(lead))
			}
			lock, err := fair.New(dc, name)
			require.NoError(t, err)
			locked, err := lock.IsLocked(ctx)
			require.NoError(t, err)
			assert.False(t, locked, "free after the Resign")
			assert.Zero(t, direct.ZCard(ctx, e.Keys()[2]).Val(), "nobody queued")
		})
	}
}

// Redis restarted without its data while a leader leads, a candidate waits and an observer
// watches: the leader's leading context ends with aqs.ErrLockLost, and the candidate leads
// (or fails, and leads when it campaigns again), reported by the observer, subscribed again.
func TestObserverAcrossARedisRestartReportsTheNextLeader(t *testing.T) {
	srv := redistest.NewServer(t)
	ctx := context.Background()
	name := redistest.Name(t)
	_, e1 := electionAt(t, srv.Addr(), name, restartLease)
	c2, e2 := electionAt(t, srv.Addr(), name, restartLease)
	_, watcher := electionAt(t, srv.Addr(), name, restartLease)
	obs, stop := context.WithCancel(ctx)
	defer stop()
	latest, _ := watchChanges(watcher.Observe(obs))

	lead, err := e1.Campaign(ctx, "before the restart")
	require.NoError(t, err)
	require.True(t, assertEventually(5*time.Second, func() bool { l, _ := latest(); return l.Value == "before the restart" }),
		"the observer reports the leader")
	type outcome struct {
		lead context.Context
		err  error
	}
	w := make(chan outcome, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, restartWaiters)
		defer cancel()
		l, err := e2.Campaign(cctx, "after the restart")
		w <- outcome{l, err}
	}()
	require.Eventually(t, func() bool { return srv.Client(t).ZCard(ctx, e1.Keys()[2]).Val() == 1 }, 5*time.Second,
		time.Millisecond, "the candidate queued")

	require.NoError(t, srv.Kill())
	require.NoError(t, srv.Restart())
	up := time.Now()
	select {
	case <-lead.Done():
		assert.ErrorIs(t, context.Cause(lead), aqs.ErrLockLost, "the leader learns its leadership is gone")
	case <-time.After(restartNotice):
		t.Fatalf("the leader's leading context did not end within %v of the restart", restartNotice)
	}
	notice := time.Since(up)
	var next context.Context
	select {
	case o := <-w:
		next = o.lead
		if o.err != nil {
			t.Logf("the waiting candidate failed: %v; it campaigns again", o.err)
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			next, err = e2.Campaign(cctx, "after the restart")
			require.NoError(t, err, "a campaign after the restart")
		}
	case <-time.After(restartWaiters + 5*time.Second):
		t.Fatal("the waiting candidate neither led nor failed")
	}
	tok, err := aqs.FencingToken(next)
	require.NoError(t, err)
	want := election.Leadership{Value: "after the restart", Token: tok, Client: c2.ID()}
	require.True(t, assertEventually(10*time.Second, func() bool { l, _ := latest(); return l == want }),
		"the observer reports the leader after the restart")
	reported := time.Since(up)
	require.NoError(t, e2.Resign(next))
	assert.ErrorIs(t, e1.Resign(lead), aqs.ErrNotOwner, "the former leader's Resign")
	t.Logf("SUMMARY election restart: the leader told ErrLockLost %v after the restart (lease %v); the next leader "+
		"observed %v after it", notice.Round(time.Millisecond), restartLease, reported.Round(time.Millisecond))
}
