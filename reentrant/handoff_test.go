package reentrant_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/reentrant"
)

// The local hand-off (see the package doc): a goroutine that calls Lock while its own Client
// holds the lock boards, sending nothing, and the hold's release hands it the lock, eight
// times in a row at most while waiters of other Clients are queued; then the lock goes to the
// head of the queue and the releasing Client's waiters join its tail.
const maxLocalHandOffs = 16 // the package's (reentrant/lock.go)

// publishes returns how many PUBLISH commands the server ran (from scripts too).
func publishes(t *testing.T, rdb redis.UniversalClient) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_publish:calls="); ok {
			n, err := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	return 0
}

// waitMarked waits until a waiter has marked the lock (an attempt of its own failed and
// queued it).
func waitMarked(t *testing.T, rdb redis.UniversalClient, l *reentrant.Lock) {
	t.Helper()
	eventually(t, 5*time.Second, func() bool {
		v, _ := rdb.Get(context.Background(), l.Key()).Result()
		return strings.Contains(v, " w")
	}, "no waiter marked the lock")
}

// queuedIn is how many waiters the lock's queue holds in Redis (its deadline zset).
func queuedIn(t *testing.T, rdb redis.UniversalClient, l *reentrant.Lock) int64 {
	t.Helper()
	n, err := rdb.ZCard(context.Background(), l.Keys()[2]).Result()
	require.NoError(t, err)
	return n
}

// waitQueued waits until n waiters are queued in Redis.
func waitQueued(t *testing.T, rdb redis.UniversalClient, l *reentrant.Lock, n int64) {
	t.Helper()
	require.Eventually(t, func() bool { return queuedIn(t, rdb, l) == n }, 5*time.Second, time.Millisecond,
		"expected %d queued waiters", n)
}

// waitBoarded waits until a waiter has boarded l's hold. A window is short: it polls often.
func waitBoarded(t *testing.T, l *reentrant.Lock) {
	t.Helper()
	require.Eventually(t, func() bool { return l.Boarded() == 1 }, 5*time.Second, 200*time.Microsecond,
		"the waiter never boarded")
}

// lockAsync calls l.Lock(ctx) in a goroutine and sends the held context (nil on failure) on
// the returned channel.
func lockAsync(t *testing.T, ctx context.Context, l *reentrant.Lock) <-chan context.Context {
	got := make(chan context.Context, 1)
	go func() {
		h, err := l.Lock(ctx)
		if err != nil {
			assert.ErrorIs(t, err, context.Canceled)
		}
		got <- h
	}()
	return got
}

// assertFreed checks that the lock's key is gone.
func assertFreed(t *testing.T, rdb redis.UniversalClient, l *reentrant.Lock) {
	t.Helper()
	n, err := rdb.Exists(context.Background(), l.Key()).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "the lock's key is still there")
}

// lockCommands counts the commands a go-redis client sends that could take or free a lock:
// SET, EVAL and EVALSHA (not the pub/sub subscriptions).
type lockCommands struct{ n atomic.Int64 }

func (c *lockCommands) count(cmds ...redis.Cmder) {
	for _, cmd := range cmds {
		switch cmd.Name() {
		case "set", "eval", "evalsha":
			c.n.Add(1)
		}
	}
}

func (c *lockCommands) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *lockCommands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}

func (c *lockCommands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.count(cmds...)
		return next(ctx, cmds)
	}
}

// A goroutine that calls Lock while a goroutine of its own Client holds the lock boards: it
// sends nothing to Redis, and the holder's release hands it the lock, the release being the
// only command of the hand-off.
func TestWaiterOfTheHoldingClientBoardsWithoutACommand(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	sent := &lockCommands{}
	rdb.AddHook(sent)
	l := newLock(t, newClient(t, rdb))
	held, err := l.Lock(context.Background())
	require.NoError(t, err)

	before := sent.n.Load()
	got := lockAsync(t, context.Background(), l)
	waitBoarded(t, l)
	assert.Equal(t, before, sent.n.Load(), "a boarded waiter sent a command")

	require.NoError(t, l.Unlock(held))
	h := <-got
	require.NotNil(t, h)
	assert.Equal(t, before+1, sent.n.Load(), "the hand-off took more than the release")
	assert.Zero(t, l.Boarded())
	require.NoError(t, l.Unlock(h))
	assertFreed(t, rdb, l)
}

// A waiter of the holder's Client that queued in Redis on its own (its boarding window ran
// out) is handed the lock by the release all the same, past the queue, with no message
// published, and with its own lease.
func TestReleaseHandsTheLockToAQueuedWaiterOfItsOwnClient(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	c := newClient(t, rdb)
	l := newLock(t, c)
	// Two waiters of c queue in Redis behind a hold of another Client's; the first is granted
	// the lock by that hold's release, and its own release hands it to the second.
	x := sameLock(t, newClient(t, rdb), l)
	heldX, err := x.Lock(context.Background())
	require.NoError(t, err)
	first := lockAsync(t, context.Background(), l)
	waitQueued(t, rdb, l, 1)
	second := lockAsync(t, context.Background(), sameLock(t, c, l))
	waitQueued(t, rdb, l, 2)
	require.NoError(t, x.Unlock(heldX))
	held := <-first
	require.NotNil(t, held)
	before, err := l.Info(context.Background())
	require.NoError(t, err)
	p := publishes(t, rdb)

	require.NoError(t, l.Unlock(held))
	h := <-second
	require.NotNil(t, h)
	after, err := l.Info(context.Background())
	require.NoError(t, err)
	assert.True(t, after.Locked)
	assert.NotEqual(t, before.Holder, after.Holder, "the waiter holds the lock")
	assert.Equal(t, p, publishes(t, rdb), "handed over with no wakeup published")

	require.NoError(t, l.Unlock(h))
	assertFreed(t, rdb, l)
}

// riderLost explains the failure of a rider's Unlock after another Client's release granted it
// the lock: the engine adopts such a grant as long expired, and may find it lost at once.
const riderLost = "a rider granted through its Client's grant channel lost its hold: see " +
	"TestRiderGrantedByAnotherClientsReleaseKeepsItsHold in internal/acquire"

// acquisition is a Lock call's success: who called, on which Lock value, the held context.
type acquisition struct {
	who  string
	l    *reentrant.Lock
	held context.Context
}

// contenders starts Lock calls and reports their acquisitions on one channel.
type contenders struct {
	t   *testing.T
	got chan acquisition
}

func newContenders(t *testing.T) *contenders {
	return &contenders{t: t, got: make(chan acquisition, 16)}
}

func (c *contenders) lock(who string, l *reentrant.Lock) {
	go func() {
		h, err := l.Lock(context.Background())
		if assert.NoError(c.t, err) {
			c.got <- acquisition{who, l, h}
		}
	}()
}

// next returns the next acquisition, bounded.
func (c *contenders) next() acquisition {
	c.t.Helper()
	select {
	case a := <-c.got:
		return a
	case <-time.After(10 * time.Second):
		c.t.Fatal("nobody got the lock within 10s")
		return acquisition{}
	}
}

// handOffLocally has a goroutine of the holder's Client call Lock on the holder's Lock value,
// waits until it boarded (or, its window over, queued on its own: a local waiter the release
// may pick all the same), and releases the hold. It returns the next acquisition.
func (c *contenders) handOffLocally(rdb redis.UniversalClient, cur acquisition) acquisition {
	c.t.Helper()
	queued := queuedIn(c.t, rdb, cur.l)
	c.lock(cur.who, cur.l)
	require.Eventually(c.t, func() bool { return cur.l.Boarded() == 1 || queuedIn(c.t, rdb, cur.l) > queued },
		5*time.Second, 200*time.Microsecond, "%s's waiter neither boarded nor queued", cur.who)
	require.NoError(c.t, cur.l.Unlock(cur.held))
	return c.next()
}

// After maxLocalHandOffs hand-offs in a row to waiters of the releasing Client while a waiter
// of another Client is queued, that waiter gets the lock next; the releasing Client's waiter of
// that release joins the queue behind it, and gets the lock after it.
func TestStreakOfLocalHandOffsEndsWithTheQueuedWaiterOfAnotherClient(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		a := newLock(t, newClient(t, rdb))
		b := sameLock(t, newClient(t, rdb), a)
		c := newContenders(t)
		held, err := a.Lock(context.Background())
		require.NoError(t, err)
		c.lock("b", b)
		waitQueued(t, rdb, a, 1)

		cur := acquisition{"a", a, held}
		var order []string
		for cur.who == "a" {
			require.Less(t, len(order), 3*maxLocalHandOffs, "b never got the lock: %v", order)
			cur = c.handOffLocally(rdb, cur)
			order = append(order, cur.who)
		}
		want := append(slices.Repeat([]string{"a"}, maxLocalHandOffs), "b")
		assert.Equal(t, want, order, "local hand-offs, then the other Client's waiter")

		waitQueued(t, rdb, a, 1) // a's waiter that rode the last release
		require.NoError(t, b.Unlock(cur.held))
		last := c.next()
		assert.Equal(t, "a", last.who)
		require.NoError(t, a.Unlock(last.held), riderLost)
		assertFreed(t, rdb, a)
	})
}

// A waiter of another Client waits at most maxLocalHandOffs+1 holds for each Client ahead of
// it: here b's waiter queued behind c's, while a held the lock, and both a and c have
// goroutines that keep asking for the lock while they hold it. a keeps it for 17 holds (the one
// it had and 16 local hand-offs), then c's waiter gets it and c keeps it for 17, then b's gets it.
func TestWaiterOfAnotherClientWaitsAtMostSeventeenHoldsForEachClientAhead(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	a := newLock(t, newClient(t, rdb))
	b := sameLock(t, newClient(t, rdb), a)
	cl := sameLock(t, newClient(t, rdb), a)
	c := newContenders(t)
	held, err := a.Lock(context.Background())
	require.NoError(t, err)
	c.lock("c", cl)
	waitQueued(t, rdb, a, 1)
	c.lock("b", b)
	waitQueued(t, rdb, a, 2)

	cur := acquisition{"a", a, held}
	holds := map[string]int{"a": 1}
	for cur.who != "b" {
		require.Less(t, holds["a"]+holds["c"], 4*(maxLocalHandOffs+1), "b never got the lock: %v", holds)
		cur = c.handOffLocally(rdb, cur)
		holds[cur.who]++
	}
	assert.Equal(t, map[string]int{"a": maxLocalHandOffs + 1, "c": maxLocalHandOffs + 1, "b": 1}, holds,
		"holds before and including b's")

	// The waiters of a and c that rode the streaks' last releases get the lock in turn.
	for range 2 {
		require.NoError(t, cur.l.Unlock(cur.held), riderLost)
		cur = c.next()
	}
	require.NoError(t, cur.l.Unlock(cur.held), riderLost)
	assertFreed(t, rdb, a)
}

// Local hand-offs in a row are bounded under load too: goroutines of one process passing the
// lock among themselves cannot keep another process's waiter out. Without the bound it would
// wait for its fallback timer, the holder's remaining lease (the watchdog's 30s).
func TestLocalHandOffsLetAWaiterOfAnotherClientIn(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	busy := newLock(t, newClient(t, rdb))
	other, err := reentrant.New(newClient(t, rdb), busy.Name())
	require.NoError(t, err)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var acquired atomic.Int64
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				h, err := busy.Lock(context.Background())
				if !assert.NoError(t, err) {
					return
				}
				acquired.Add(1)
				assert.NoError(t, busy.Unlock(h))
			}
		}()
	}
	eventually(t, 5*time.Second, func() bool { return acquired.Load() > 100 }, "the busy process never got going")

	for i := 0; i < 5; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start, n := time.Now(), acquired.Load()
		h, err := other.Lock(ctx)
		cancel()
		require.NoError(t, err, "the other Client's waiter got no chance in 5s")
		t.Logf("the other Client got the lock after %v and %d holds of the busy one", time.Since(start), acquired.Load()-n)
		require.NoError(t, other.Unlock(h))
	}
	close(stop)
	wg.Wait()
}

// A boarded waiter stays boarded while its Client's hold is held, and makes its own attempt
// once the hold can no longer be trusted to end in a release: here a fixed lease runs out
// with no Unlock, and the waiter takes the expired lock.
func TestBoardedWaiterAttemptsWhenNoReleaseComes(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	l := newLock(t, newClient(t, rdb))
	held, err := l.Lock(context.Background(), aqs.WithLease(300*time.Millisecond))
	require.NoError(t, err)
	got := lockAsync(t, context.Background(), l)
	waitBoarded(t, l)
	var h context.Context
	select {
	case h = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the boarded waiter never took the expired lock")
	}
	require.NotNil(t, h)
	assert.Error(t, held.Err(), "the expired hold's context is cancelled")
	require.NoError(t, l.Unlock(h))
	assertFreed(t, rdb, l)
}

// A boarded waiter attempts on its own when its Client's hold ends without handing the lock
// over: here the hold was lost (freed by an administrator), and the waiter gets the lock. (That
// it attempts as soon as the hold's Unlock finds it lost, before its window ends, is tested
// with a window of a minute in internal/acquire.)
func TestBoardedWaiterAttemptsWhenTheHoldIsLost(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	l := newLock(t, newClient(t, rdb))
	admin := sameLock(t, newClient(t, rdb), l)
	held, err := l.Lock(context.Background())
	require.NoError(t, err)
	got := lockAsync(t, context.Background(), l)
	waitBoarded(t, l)

	ok, err := admin.ForceUnlock(context.Background())
	require.NoError(t, err)
	require.True(t, ok)
	assert.ErrorIs(t, l.Unlock(held), aqs.ErrLockLost)
	h := <-got
	require.NotNil(t, h, "the boarded waiter did not get the freed lock")
	require.NoError(t, l.Unlock(h))
	assertFreed(t, rdb, l)
}

// endRound ends a round of a waiter that gave up at some moment: it unlocks h through l when
// the waiter got the lock after all (and reports that it did), and checks that the lock is
// then free, or freed at once: within far less than the 30s lease. A lock left to a departed
// hold would stay held for that lease.
func endRound(t *testing.T, round int, l *reentrant.Lock, h context.Context, outsider *reentrant.Lock) (kept bool) {
	t.Helper()
	if h != nil {
		require.NoError(t, l.Unlock(h))
	}
	o, ok, err := outsider.TryLock(context.Background(), aqs.WithWait(3*time.Second))
	require.NoError(t, err)
	require.True(t, ok, "round %d: the lock stayed held after the waiter left", round)
	require.NoError(t, outsider.Unlock(o))
	return h != nil
}

// A waiter that gives up at the moment a release of its own Client hands it the lock leaves
// nothing held: the lock is afterwards free, or held by the waiter, which got it before it
// gave up, never by a hold that is gone. The waiter is boarded on the hold (the release hands
// it the lock straight away) or queued in Redis (it queued behind another Client's hold,
// which then passed to a waiter of its own Client ahead of it: the release hands it the lock
// from the queue and tells it through its Client).
func TestWaiterGivingUpAtAHandOffLeavesNothingHeld(t *testing.T) {
	type start func(t *testing.T, rdb redis.UniversalClient, ctx context.Context, l, w, outsider *reentrant.Lock) (context.Context, <-chan context.Context)
	for _, tc := range []struct {
		name  string
		start start
	}{
		{"boarded", func(t *testing.T, _ redis.UniversalClient, ctx context.Context, l, w, _ *reentrant.Lock) (context.Context, <-chan context.Context) {
			held, err := l.Lock(context.Background())
			require.NoError(t, err)
			res := lockAsync(t, ctx, w)
			waitBoarded(t, l)
			return held, res
		}},
		{"queued", func(t *testing.T, rdb redis.UniversalClient, ctx context.Context, l, w, outsider *reentrant.Lock) (context.Context, <-chan context.Context) {
			o, err := outsider.Lock(context.Background())
			require.NoError(t, err)
			first := lockAsync(t, context.Background(), l)
			waitQueued(t, rdb, l, 1)
			res := lockAsync(t, ctx, w)
			waitQueued(t, rdb, l, 2)
			require.NoError(t, outsider.Unlock(o))
			held := <-first
			require.NotNil(t, held)
			return held, res
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := redistest.Single(t).Client(t)
			c := newClient(t, rdb)
			l := newLock(t, c)
			w := sameLock(t, c, l)
			outsider := sameLock(t, newClient(t, rdb), l)
			handed := 0
			for i := 0; i < 40; i++ {
				ctx, cancel := context.WithCancel(context.Background())
				held, res := tc.start(t, rdb, ctx, l, w, outsider)
				// The cancellation lands at a point swept across the release's round trip,
				// from before its pick to after its settlement (a delay to spread a race, not
				// a wait).
				go func() {
					time.Sleep(time.Duration(i) * 15 * time.Microsecond)
					cancel()
				}()
				require.NoError(t, l.Unlock(held))
				if endRound(t, i, w, <-res, outsider) {
					handed++
				}
			}
			t.Logf("the waiter kept the lock in %d of 40 rounds", handed)
		})
	}
}

// A waiter whose own attempt takes the lock at the moment its call is cancelled gives the lock
// back, and that release does not hand it to the very waiter that is leaving (which would
// leave the lock held by nobody to the end of its lease).
func TestWaiterCancelledAsItsAttemptWinsGivesTheLockBack(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	holder := newLock(t, newClient(t, rdb))
	waiting := sameLock(t, newClient(t, rdb), holder)
	outsider := sameLock(t, newClient(t, rdb), holder)
	won := 0
	for i := 0; i < 40; i++ {
		held, err := holder.Lock(context.Background())
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		got := lockAsync(t, ctx, waiting)
		waitMarked(t, rdb, holder)
		// The release hands the lock to the waiter, whose grant then reaches it: the
		// cancellation lands at a point swept across that (a delay to spread a race, not a
		// wait).
		require.NoError(t, holder.Unlock(held))
		time.Sleep(time.Duration(i) * 10 * time.Microsecond)
		cancel()
		if endRound(t, i, waiting, <-got, outsider) {
			won++
		}
	}
	t.Logf("the waiter kept the lock in %d of 40 rounds", won)
}

// Waiters of other Clients than the holder's get the lock in the order they came, whoever
// answers first; a newcomer is not let in between.
func TestWaitersOfOtherClientsGetTheLockInTheOrderTheyCame(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		a := newLock(t, newClient(t, rdb))
		b := sameLock(t, newClient(t, rdb), a)
		c := sameLock(t, newClient(t, rdb), a)
		d := sameLock(t, newClient(t, rdb), a)

		held, err := a.Lock(context.Background())
		require.NoError(t, err)
		gotB := lockAsync(t, context.Background(), b)
		waitQueued(t, rdb, a, 1)
		gotC := lockAsync(t, context.Background(), c)
		waitQueued(t, rdb, a, 2)

		require.NoError(t, a.Unlock(held))
		hb := <-gotB
		require.NotNil(t, hb)
		_, ok, err := d.TryLock(context.Background())
		require.NoError(t, err)
		assert.False(t, ok, "a newcomer took the lock while c waited")
		select {
		case <-gotC:
			t.Fatal("c got the lock while b held it")
		default:
		}
		require.NoError(t, b.Unlock(hb))
		hc := <-gotC
		require.NotNil(t, hc)
		require.NoError(t, c.Unlock(hc))
		assertFreed(t, rdb, a)
	})
}

// A waiter that gave up holds nobody up: the release hands the lock to the next waiter at
// once, not after the one that left would have timed out.
func TestWaiterThatGaveUpHoldsNobodyUp(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		a := newLock(t, newClient(t, rdb))
		b := sameLock(t, newClient(t, rdb), a)
		c := sameLock(t, newClient(t, rdb), a)

		held, err := a.Lock(context.Background())
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		gotB := lockAsync(t, ctx, b)
		waitQueued(t, rdb, a, 1)
		gotC := lockAsync(t, context.Background(), c)
		waitQueued(t, rdb, a, 2)
		cancel()
		require.Nil(t, <-gotB)

		start := time.Now()
		require.NoError(t, a.Unlock(held))
		select {
		case hc := <-gotC:
			require.NotNil(t, hc)
			t.Logf("c got the lock %v after the release", time.Since(start))
			require.NoError(t, c.Unlock(hc))
		case <-time.After(2 * time.Second):
			t.Fatal("c did not get the lock at the release: b, which gave up, held it up")
		}
		assertFreed(t, rdb, a)
	})
}
