package chaos_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// Fault 1: kill -9 of holders and of waiters.
//
// Each round starts two fresh victim processes: one takes the primitive and keeps it, the
// other joins the waiters, between the waiters of two surviving processes (join order: s0,
// victim, s1, s0). Then both victims are killed with SIGKILL, the waiter first. The dead
// holder's lease runs out in Redis (the watchdog's, renewed until the kill), the dead waiter is
// dropped after the waiter timeout (it may be served first, and its grant then runs out as a
// lease does), and the survivors must all get in, one at a time (the witness), the fair lock's
// and the multi-lock's in their join order. The recovery is the time from the holder's kill to
// the first survivor's acquisition; it must not exceed the lease by more than the tolerance.
// At the end the primitive must be free.
//
// The counting semaphore's permits are not owned and have no lease: a holder that dies takes
// them with it, by design (see package semaphore), and so does a waiter granted permits before
// its waiter timeout ran out (see grants_in in internal/scripts/_csem.lua: it may have taken
// them). Its rounds kill a waiter only, while the test itself holds every permit, and the test
// releases them once the dead waiter's liveness deadline has passed in Redis; the recovery is
// then counted from that release.

const (
	killLease = time.Second // the children's watchdog timeout: their holds' lease
	// killWaiterTimeout is above the lease, so that the dead waiter is still taken for live
	// when the holder's lease runs out: it is served, and its grant must run out too.
	killWaiterTimeout = 2 * time.Second
	killWork          = 20 * time.Millisecond // each survivor's time under the hold
	// killTolerance is what a recovery may take beyond the lease (or a dead waiter's stall
	// beyond the waiter timeout): the waiters' next look (the remaining lease their last
	// attempt reported, or a heartbeat, a third of the waiter timeout), round trips, and the
	// scheduling of a loaded two-core machine under -race.
	killTolerance = time.Second
	killPermits   = 2
)

func TestKilledHoldersAndWaitersRecoverWithinLease(t *testing.T) {
	rounds := scale(1, 4)
	forEachKind(t, allKinds, func(t *testing.T, kind string) {
		srv := redistest.Single(t)
		c := newCast(t, srv.Addr(), primConfig{kind: kind, name: redistest.Name(t),
			waiterTimeout: killWaiterTimeout, permits: killPermits}, killLease)
		survivors := []*actor{c.start(t, "survivor 0"), c.start(t, "survivor 1")}
		var recoveries, stalls []time.Duration
		n := rounds
		if kind == kindRWLock {
			n = 2 * rounds // a writer, then a reader is killed holding
		}
		for r := 0; r < n; r++ {
			rec, stall := killRound(t, c, survivors, r)
			recoveries = append(recoveries, rec)
			if stall > 0 {
				stalls = append(stalls, stall)
			}
		}
		c.end(t)
		c.awaitFree(t, 5*time.Second)
		assert.Empty(t, c.failures, "failed acquisitions or releases")
		count(c.overlaps, 0, 0)
		assert.Zero(t, c.overlaps, "overlaps")
		from := "the holder's kill"
		if kind == kindCounting {
			from = "the test's release (no holder killed: permits are not owned)"
		}
		stallText := "n/a"
		if len(stalls) > 0 {
			stallText = fmt.Sprintf("max %v (waiter timeout %v)", slices.Max(stalls).Round(time.Millisecond), killWaiterTimeout)
		}
		t.Logf("SUMMARY kill -9 %s: %d rounds, %d holders and %d waiters killed; recovery (from %s to the first "+
			"survivor's acquisition) max %v, median %v, lease %v; dead waiter's stall %s; overlaps %d; failures %d",
			kind, n, countHolderKills(kind, n), n, from, slices.Max(recoveries).Round(time.Millisecond),
			median(recoveries).Round(time.Millisecond), killLease, stallText, c.overlaps, len(c.failures))
	})
}

func countHolderKills(kind string, rounds int) int {
	if kind == kindCounting {
		return 0
	}
	return rounds
}

// killRound runs one round and returns the recovery time and, for the fair lock and the
// multi-lock, how long the dead waiter held up the queue (0 elsewhere).
func killRound(t *testing.T, c *cast, survivors []*actor, r int) (recovery, stall time.Duration) {
	t.Helper()
	ctx := context.Background()
	kind := c.cfg.kind
	victimH := c.start(t, fmt.Sprintf("round %d holder victim", r))
	victimW := c.start(t, fmt.Sprintf("round %d waiter victim", r))

	// What the holder takes and what the four waiters ask for.
	holdOp := opExclusive
	ops := []string{opExclusive, opExclusive, opExclusive, opExclusive}
	switch kind {
	case kindRWLock:
		// A writer holds while a writer and readers wait; or a reader holds while writers
		// wait, and readers behind them (fair mode).
		ops = []string{opExclusive, opExclusive, opRead, opRead}
		if r%2 == 1 {
			holdOp = opRead
			ops = []string{opExclusive, opExclusive, opRead, opExclusive}
		}
	case kindCounting, kindLeased:
		holdOp = strconv.Itoa(killPermits)
		ops = []string{"1", "1", "1", "1"}
	}

	var mine *held
	if kind == kindCounting {
		var err error
		mine, err = c.p.acquire(ctx, holdOp)
		require.NoError(t, err)
	} else {
		c.await(t, "got", c.hold(t, victimH, holdOp, 0), 30*time.Second)
	}
	who := []*actor{survivors[0], victimW, survivors[1], survivors[0]}
	joins := make([]int, len(who))
	perActor := map[*actor]int{}
	for i, a := range who {
		joins[i] = c.join(t, a, ops[i], killWork)
		perActor[a]++
		c.awaitQueuedN(t, a, ops[i], perActor[a])
	}

	c.kill(t, victimW)
	var t0 time.Time
	if kind == kindCounting {
		c.awaitDeadlinePassed(t, victimW)
		t0 = time.Now()
		require.NoError(t, mine.Release())
	} else {
		t0 = c.kill(t, victimH)
	}
	live := []int{joins[0], joins[2], joins[3]}
	c.pump(t, killLease+2*killWaiterTimeout+10*time.Second, "the survivors' acquisitions", func() bool {
		for _, k := range live {
			if !c.has("rel", k) && !c.has("failed", k) {
				return false
			}
		}
		return true
	})
	var first time.Time
	var order []int
	got := map[int]time.Time{}
	for _, k := range live {
		e, ok := c.find("got", k)
		if !ok {
			t.Fatalf("round %d: acquisition %d failed: %v", r, k, c.failures)
		}
		got[k] = time.Unix(0, e.ns)
		if first.IsZero() || got[k].Before(first) {
			first = got[k]
		}
		order = append(order, k)
	}
	recovery = first.Sub(t0)
	limit := killLease + killTolerance
	if kind == kindCounting {
		limit = killTolerance
	}
	assert.Less(t, recovery, limit, "round %d: recovery from the kill", r)

	if kind == kindFair || kind == kindMulti {
		slices.SortFunc(order, func(a, b int) int { return got[a].Compare(got[b]) })
		assert.Equal(t, live, order, "round %d: the survivors acquired in join order", r)
		rel, _ := c.find("rel", joins[0])
		stall = got[joins[2]].Sub(time.Unix(0, rel.ns))
		assert.Less(t, stall, killWaiterTimeout+killTolerance, "round %d: the dead waiter held up the queue", r)
	}
	// Nothing stays stuck: the dead holder's lease and whatever the dead waiter was granted run
	// out, and the primitive is free.
	c.awaitFree(t, killLease+killWaiterTimeout+killTolerance)
	return recovery, stall
}

// awaitQueuedN waits, bounded, until a has n waiters queued (see queued); where a's waiters
// cannot be told apart (no queue in Redis), until it waits at all.
func (c *cast) awaitQueuedN(t *testing.T, a *actor, op string, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		got, exact := c.queuedCount(t, a, op)
		return got >= n || !exact && got > 0
	}, 10*time.Second, 2*time.Millisecond,
		"%s: %d waiters never queued", a.Label(), n)
}

// awaitDeadlinePassed waits, bounded, until every queue entry of a has a liveness deadline
// (its score in the queue's zset of deadlines) in the past by the server's clock.
func (c *cast) awaitDeadlinePassed(t *testing.T, a *actor) {
	t.Helper()
	ctx := context.Background()
	require.Eventually(t, func() bool {
		now, err := c.rdb.Time(ctx).Result()
		require.NoError(t, err)
		entries, err := c.rdb.ZRangeWithScores(ctx, c.p.key+":d", 0, -1).Result()
		require.NoError(t, err)
		for _, e := range entries {
			if strings.HasPrefix(e.Member.(string), a.id+":") && int64(e.Score) > now.UnixMilli() {
				return false
			}
		}
		return true
	}, c.cfg.waiterTimeout+killTolerance, 5*time.Millisecond, "%s: a queue entry still live", a.Label())
}

// median returns the middle value (the upper one of an even count).
func median(xs []time.Duration) time.Duration {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
