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

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/redistest"
	"github.com/redaqs/aqs/reentrant"
)

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

// waitMarked waits until a waiter has marked the lock (its first attempt failed).
func waitMarked(t *testing.T, rdb redis.UniversalClient, l *reentrant.Lock) {
	t.Helper()
	eventually(t, 5*time.Second, func() bool {
		v, _ := rdb.Get(context.Background(), l.Key()).Result()
		return strings.Contains(v, " w")
	}, "no waiter marked the lock")
}

func TestReleaseHandsTheLockToAWaiterOfItsOwnClient(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	l := newLock(t, newClient(t, rdb))
	held, err := l.Lock(context.Background())
	require.NoError(t, err)
	before, err := l.Info(context.Background())
	require.NoError(t, err)
	got := make(chan context.Context, 1)
	go func() {
		h, err := l.Lock(context.Background())
		assert.NoError(t, err)
		got <- h
	}()
	waitMarked(t, rdb, l)
	p := publishes(t, rdb)

	require.NoError(t, l.Unlock(held))
	h := <-got
	after, err := l.Info(context.Background())
	require.NoError(t, err)
	assert.True(t, after.Locked)
	assert.NotEqual(t, before.Holder, after.Holder, "the waiter holds the lock")
	assert.Equal(t, p, publishes(t, rdb), "handed over with no wakeup published")
	assert.Greater(t, after.RemainingLease, 20*time.Second, "with the waiter's own lease")

	require.NoError(t, l.Unlock(h))
	locked, err := l.IsLocked(context.Background())
	require.NoError(t, err)
	assert.False(t, locked)
}

// Local hand-offs in a row are bounded: goroutines of one process passing the lock among
// themselves cannot keep another process's waiter out. Without the bound it would wait for
// its fallback timer, the holder's remaining lease (the watchdog's 30s).
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
		start := time.Now()
		h, err := other.Lock(ctx)
		cancel()
		require.NoError(t, err, "the other Client's waiter got no chance in 5s")
		t.Logf("the other Client got the lock after %v", time.Since(start))
		require.NoError(t, other.Unlock(h))
	}
	close(stop)
	wg.Wait()
}

// endRound ends a round of a waiter that gave up at some moment: it unlocks h through l when
// the waiter got the lock after all (and reports that it did), and checks that the lock is
// then free, or freed at once: within far less than the 30s lease.
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

// A waiter that gives up at the moment a release of its own Client hands it the lock gives it
// back: the lock is never left held by nobody until its lease ends.
func TestWaiterGivingUpAtAHandOffLeavesNothingHeld(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	l := newLock(t, newClient(t, rdb))
	outsider, err := reentrant.New(newClient(t, rdb), l.Name())
	require.NoError(t, err)
	handed := 0
	for i := 0; i < 40; i++ {
		held, err := l.Lock(context.Background())
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		res := lockAsync(t, ctx, l)
		waitMarked(t, rdb, l)
		// The cancellation lands at a point swept across the release's round trip, from
		// before its pick to after its settlement (a delay to spread a race, not a wait).
		go func() {
			time.Sleep(time.Duration(i) * 15 * time.Microsecond)
			cancel()
		}()
		require.NoError(t, l.Unlock(held))
		if endRound(t, i, l, <-res, outsider) {
			handed++
		}
	}
	t.Logf("the waiter kept the lock in %d of 40 rounds", handed)
}

// turnsOf returns the Client ids of the lock value's turn queue (its r field), in order.
func turnsOf(t *testing.T, rdb redis.UniversalClient, l *reentrant.Lock) []string {
	t.Helper()
	v, err := rdb.Get(context.Background(), l.Key()).Result()
	if err == redis.Nil {
		return nil
	}
	require.NoError(t, err)
	var ids []string
	for _, f := range strings.Fields(v)[1:] {
		if rest, ok := strings.CutPrefix(f, "r"); ok {
			require.Zero(t, len(rest)%36, "turn queue %q", f)
			for i := 0; i < len(rest); i += 36 {
				ids = append(ids, rest[i:i+36])
			}
		}
	}
	return ids
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

// Waiters of other Clients than the holder's get the lock Client by Client in the order their
// Clients first waited, whoever answers the wakeup first; a newcomer is not let in between.
func TestClientsTakeTurnsInTheOrderTheyCame(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ca, cb, cc, cd := newClient(t, rdb), newClient(t, rdb), newClient(t, rdb), newClient(t, rdb)
		a := newLock(t, ca)
		b := sameLock(t, cb, a)
		c := sameLock(t, cc, a)
		d := sameLock(t, cd, a)

		held, err := a.Lock(context.Background())
		require.NoError(t, err)
		gotB := lockAsync(t, context.Background(), b)
		eventually(t, 5*time.Second, func() bool { return len(turnsOf(t, rdb, a)) == 1 }, "b's Client never queued")
		gotC := lockAsync(t, context.Background(), c)
		eventually(t, 5*time.Second, func() bool { return len(turnsOf(t, rdb, a)) == 2 }, "c's Client never queued")
		require.Equal(t, []string{cb.ID(), cc.ID()}, turnsOf(t, rdb, a))

		require.NoError(t, a.Unlock(held))
		hb := <-gotB
		require.NotNil(t, hb)
		_, ok, err := d.TryLock(context.Background())
		require.NoError(t, err)
		assert.False(t, ok, "a newcomer took the lock while c's Client waited for its turn")
		select {
		case <-gotC:
			t.Fatal("c got the lock while b held it")
		default:
		}
		assert.Equal(t, []string{cc.ID()}, turnsOf(t, rdb, a))
		require.NoError(t, b.Unlock(hb))
		hc := <-gotC
		require.NotNil(t, hc)
		require.NoError(t, c.Unlock(hc))
		assertFreed(t, rdb, a)
	})
}

// A Client whose turn comes when its waiters are gone holds nobody up for longer than the
// reservation: the next Client's waiter gets the lock.
func TestTurnOfAClientWithoutWaitersPassesOn(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ca, cb, cc := newClient(t, rdb), newClient(t, rdb), newClient(t, rdb)
		a := newLock(t, ca)
		b := sameLock(t, cb, a)
		c := sameLock(t, cc, a)

		held, err := a.Lock(context.Background())
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		gotB := lockAsync(t, ctx, b)
		eventually(t, 5*time.Second, func() bool { return len(turnsOf(t, rdb, a)) == 1 }, "b's Client never queued")
		gotC := lockAsync(t, context.Background(), c)
		eventually(t, 5*time.Second, func() bool { return len(turnsOf(t, rdb, a)) == 2 }, "c's Client never queued")
		cancel()
		require.Nil(t, <-gotB)

		start := time.Now()
		require.NoError(t, a.Unlock(held))
		select {
		case hc := <-gotC:
			require.NotNil(t, hc)
			t.Logf("c got the lock %v after the release", time.Since(start))
			require.NoError(t, c.Unlock(hc))
		case <-time.After(5 * time.Second):
			t.Fatal("c never got the lock after the turn of b's Client, which has no waiter, came")
		}
		assertFreed(t, rdb, a)
	})
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
	eventually(t, 5*time.Second, func() bool { return l.Boarded() == 1 }, "the waiter never boarded")
	assert.Equal(t, before, sent.n.Load(), "a boarded waiter sent a command")

	require.NoError(t, l.Unlock(held))
	h := <-got
	require.NotNil(t, h)
	assert.Equal(t, before+1, sent.n.Load(), "the hand-off took more than the release")
	assert.Zero(t, l.Boarded())
	require.NoError(t, l.Unlock(h))
	assertFreed(t, rdb, l)
}

// A boarded waiter whose Client's hold is not released within the boarding window makes its
// own attempt, as any waiter: it marks the lock, so a release by another Lock value or the
// hold's expiry reaches it as it reaches every waiter.
func TestBoardedWaiterAttemptsWhenNoReleaseComes(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	l := newLock(t, newClient(t, rdb))
	held, err := l.Lock(context.Background())
	require.NoError(t, err)
	got := lockAsync(t, context.Background(), l)
	waitMarked(t, rdb, l)
	assert.Zero(t, l.Boarded())
	require.NoError(t, l.Unlock(held))
	h := <-got
	require.NotNil(t, h)
	require.NoError(t, l.Unlock(h))
}

// A boarded waiter is woken to attempt when its Client's hold ends without handing the lock
// over: here the hold was lost (freed by an administrator), and the waiter gets the lock.
func TestBoardedWaiterAttemptsWhenTheHoldIsLost(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	l := newLock(t, newClient(t, rdb))
	admin := sameLock(t, newClient(t, rdb), l)
	held, err := l.Lock(context.Background())
	require.NoError(t, err)
	got := lockAsync(t, context.Background(), l)
	eventually(t, 5*time.Second, func() bool { return l.Boarded() == 1 }, "the waiter never boarded")

	ok, err := admin.ForceUnlock(context.Background())
	require.NoError(t, err)
	require.True(t, ok)
	h := <-got
	require.NotNil(t, h, "the boarded waiter did not get the freed lock")
	assert.ErrorIs(t, l.Unlock(held), aqs.ErrLockLost)
	require.NoError(t, l.Unlock(h))
	assertFreed(t, rdb, l)
}

// A Client whose streak of local hand-offs ends while it still has waiters gives the lock to
// the next Client's turn and queues itself for a turn after the others: its waiters need not
// fail an attempt to be queued.
func TestStreakEndQueuesTheReleasersClientBehindTheOthers(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ca, cb := newClient(t, rdb), newClient(t, rdb)
		a := newLock(t, ca)
		b := sameLock(t, cb, a)

		held, err := a.Lock(context.Background())
		require.NoError(t, err)
		gotB := lockAsync(t, context.Background(), b)
		eventually(t, 5*time.Second, func() bool { return len(turnsOf(t, rdb, a)) == 1 }, "b's Client never queued")
		// Two goroutines of a's Client pass the lock to each other until the streak is over; a
		// hold of a's that is handed over is turned into the next one's at once.
		for i := 0; ; i++ {
			require.Less(t, i, 20, "b never got its turn")
			got := lockAsync(t, context.Background(), a)
			eventually(t, 5*time.Second, func() bool { return a.Boarded() == 1 }, "a's waiter never boarded")
			require.NoError(t, a.Unlock(held))
			select {
			case hb := <-gotB:
				require.NotNil(t, hb)
				assert.Equal(t, []string{ca.ID()}, turnsOf(t, rdb, a), "a's Client, with a waiter, is not queued")
				require.NoError(t, b.Unlock(hb))
				held = <-got
				require.NotNil(t, held)
				require.NoError(t, a.Unlock(held))
				assertFreed(t, rdb, a)
				return
			case held = <-got:
				require.NotNil(t, held)
			}
		}
	})
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
		// The release wakes the waiter, whose attempt then takes the free lock: the
		// cancellation lands at a point swept across that attempt (a delay to spread a race,
		// not a wait).
		require.NoError(t, holder.Unlock(held))
		time.Sleep(time.Duration(i) * 10 * time.Microsecond)
		cancel()
		if endRound(t, i, waiting, <-got, outsider) {
			won++
		}
	}
	t.Logf("the waiter kept the lock in %d of 40 rounds", won)
}

// A Client that finds the queue of turns full (32 Clients) is not queued, and its waiter,
// which no turn message is meant for, tries again within a few tens of milliseconds rather
// than at the end of the holder's lease: it gets a place once there is room.
func TestClientFindingTheTurnQueueFullGetsAPlaceOnceThereIsRoom(t *testing.T) {
	srv := redistest.Single(t)
	rdb := srv.Client(t)
	l := newLock(t, newClient(t, rdb))
	// Held, for a minute, by a hold of a Client that is not running, with 32 Clients queued.
	ids := make([]string, 32)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	held := uuid.NewString() + ":1 w"
	require.NoError(t, rdb.Set(context.Background(), l.Key(), held+" r"+strings.Join(ids, ""), time.Minute).Err())
	t.Cleanup(func() { rdb.Del(context.Background(), l.Key()) })

	wrdb := srv.Client(t)
	sent := &lockCommands{}
	wrdb.AddHook(sent)
	wc := newClient(t, wrdb)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := lockAsync(t, ctx, sameLock(t, wc, l))
	eventually(t, 5*time.Second, func() bool { return sent.n.Load() >= 4 }, "the waiter did not try again soon")
	assert.Equal(t, ids, turnsOf(t, rdb, l), "a 33rd Client was queued")

	// A place frees up: the waiter's Client takes it.
	require.NoError(t, rdb.Set(context.Background(), l.Key(), held+" r"+strings.Join(ids[1:], ""), redis.KeepTTL).Err())
	eventually(t, 5*time.Second, func() bool { return slices.Contains(turnsOf(t, rdb, l), wc.ID()) }, "the waiter's Client never got a place")
	assert.Equal(t, append(slices.Clone(ids[1:]), wc.ID()), turnsOf(t, rdb, l))
	cancel()
	assert.Nil(t, <-got)
}
