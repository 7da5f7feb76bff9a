package fair_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// kill -9 of a Condition's waiter and of its signaller, in child processes (cond_helper_test.go
// describes them). The producer adds an item to a stock list and signals under the lock; the
// consumers wait on the condition until the stock has an item, and take it.

// condTolerance covers the round trips and the scheduling of a loaded machine under -race
// beyond a timeout that is due.
const condTolerance = 1500 * time.Millisecond

// condProcess is a fair lock of the test with its condition, on a single node, and the means to
// start children on it.
type condProcess struct {
	rdb           *redis.Client
	l             *fair.Lock
	c             *fair.Condition
	waiterTimeout time.Duration
}

func newCondProcess(t *testing.T, waiterTimeout time.Duration) *condProcess {
	p := &condProcess{rdb: redistest.Single(t).Client(t), waiterTimeout: waiterTimeout}
	var err error
	p.l, err = fair.New(newClient(t, p.rdb), redistest.Name(t), fair.WithWaiterTimeout(waiterTimeout))
	require.NoError(t, err)
	p.c = newCond(t, p.l)
	t.Cleanup(func() { p.rdb.Del(context.Background(), stockKey(p.l)) }) // after the children are gone
	return p
}

// start starts a child in role, with the watchdog timeout watchdog (the default when 0), and
// waits until it is ready.
func (p *condProcess) start(t *testing.T, role redistest.Role[lockParams], label string, watchdog time.Duration) *redistest.Child {
	c := role.Start(t, label, redistest.TargetOf(t, p.rdb),
		lockParams{Lock: p.l.Name(), WaiterTimeout: p.waiterTimeout, Watchdog: watchdog})
	c.Expect(t, lineReady, 30*time.Second)
	return c
}

// produce adds an item under the lock and signals, and reports whether the Signal moved a
// waiter.
func (p *condProcess) produce(t *testing.T) bool {
	ctx := context.Background()
	held, err := p.l.Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, p.rdb.RPush(held, stockKey(p.l), "parent").Err())
	ok, err := p.c.Signal(ctx)
	require.NoError(t, err)
	require.NoError(t, p.l.Unlock(held))
	return ok
}

// serverMs returns the server's time in ms.
func (p *condProcess) serverMs(t *testing.T) int64 {
	now, err := p.rdb.Time(context.Background()).Result()
	require.NoError(t, err)
	return now.UnixMilli()
}

// state describes the lock's and the condition's keys, for a failure message.
func (p *condProcess) state(t *testing.T) string {
	ctx := context.Background()
	var b strings.Builder
	fmt.Fprintf(&b, "server time %d ms; lock %q", p.serverMs(t), p.rdb.Get(ctx, p.l.Key()).Val())
	for _, k := range append([]string{p.l.Key() + ":q", p.l.Key() + ":d"}, p.c.Keys()...) {
		fmt.Fprintf(&b, "; %s: %v %v", k, p.rdb.LRange(ctx, k, 0, -1).Val(), p.rdb.ZRangeWithScores(ctx, k, 0, -1).Val())
	}
	return b.String()
}

// assertClean checks that the lock is free, nobody waits, the stock is empty and no key is
// left without a TTL.
func (p *condProcess) assertClean(t *testing.T) {
	assertCondFree(t, p.rdb, p.l, p.c)
	n, err := p.rdb.LLen(context.Background(), stockKey(p.l)).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "items left in the stock")
	redistest.AssertNoKeyWithoutTTL(t, p.rdb, p.l.Name(), p.l.Key())
}

// A consumer killed while it waits on the condition takes at most the one Signal that finds
// its entry still live, and holds the lock it is handed then no longer than its liveness
// deadline (at most the waiter timeout after the kill); a Signal after that deadline passes
// over it. The live consumers are signalled in the order they waited, and get every item.
func TestConditionKilledWaiterTakesNoSignalBeyondItsDeadline(t *testing.T) {
	// Two seconds: with one, the waiters of a machine loaded by the children under -race were
	// seen to miss their heartbeats for that long, die on the condition and wake without a
	// Signal (which Wait's contract allows, and which would spoil the wait order here).
	const waiterTimeout = 2 * time.Second
	p := newCondProcess(t, waiterTimeout)
	ctx := context.Background()
	// Wait order: victim 1, live 1, victim 2, live 2.
	labels := []string{"victim 1", "consumer 1", "victim 2", "consumer 2"}
	var children []*redistest.Child
	for i, label := range labels {
		c := p.start(t, roleCondWaiter, label, 0)
		c.Send(t, "wait")
		condWaiting(t, p.rdb, p.c, int64(i+1))
		children = append(children, c)
	}
	members, err := p.rdb.LRange(ctx, p.c.Keys()[0], 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, members, len(labels), "one entry per waiter; %s", p.state(t))
	for _, i := range []int{0, 2} {
		exit := children[i].Kill(t, 10*time.Second)
		require.Equal(t, -1, exit.ExitCode(), "%s ended by a signal: %v", labels[i], exit)
	}
	killed := time.Now()
	deadline2, err := p.rdb.ZScore(ctx, p.c.Keys()[1], members[2]).Result()
	require.NoError(t, err, "victim 2 still waits on the condition")

	// The first Signal finds victim 1's entry live: the lock goes to the dead waiter, and comes
	// back when its deadline passes.
	require.True(t, p.produce(t), "the first Signal moved nobody")
	held, err := p.l.Lock(ctx)
	require.NoError(t, err)
	back := time.Since(killed)
	require.NoError(t, p.l.Unlock(held))
	assert.Less(t, back, waiterTimeout+condTolerance, "the lock handed to the dead waiter came back after the waiter timeout")

	// The next Signal moves consumer 1, which takes the item the dead one never took.
	require.True(t, p.produce(t), "the second Signal moved nobody")
	children[1].Expect(t, "woken", 10*time.Second)
	children[1].Expect(t, "released", 10*time.Second)
	require.NoError(t, children[1].Wait(t, 10*time.Second))

	// Victim 2's deadline passes with nothing to renew it; the next Signal passes over it.
	require.Eventually(t, func() bool { return p.serverMs(t) >= int64(deadline2) }, 2*waiterTimeout, 5*time.Millisecond,
		"victim 2's deadline")
	require.True(t, p.produce(t), "the third Signal moved nobody")
	children[3].Expect(t, "woken", 10*time.Second)
	children[3].Expect(t, "released", 10*time.Second)
	require.NoError(t, children[3].Wait(t, 10*time.Second))

	ok, err := p.c.Signal(ctx)
	require.NoError(t, err)
	assert.False(t, ok, "a Signal found a waiter when only dead ones were left")
	// One item is left: the dead consumer's, which nobody waits for now.
	n, err := p.rdb.LPop(ctx, stockKey(p.l)).Result()
	require.NoError(t, err)
	t.Logf("the lock handed to the dead waiter was back %v after the kill (waiter timeout %v); left in the stock: %s",
		back.Round(time.Millisecond), waiterTimeout, n)
	p.assertClean(t)
}

// A producer killed while it holds the lock, after adding an item and before it signals or
// unlocks: the lock comes back within the watchdog timeout, the consumer still waits on the
// condition (nothing woke it, nothing dropped it), and a later producer's Signal wakes it to
// take the dead producer's item.
func TestConditionKilledSignallerGivesTheLockBackWithinTheWatchdogTimeout(t *testing.T) {
	const watchdog = time.Second
	p := newCondProcess(t, 2*time.Second) // see the waiter timeout above
	ctx := context.Background()

	consumer, err := fair.New(newClient(t, p.rdb), p.l.Name(), fair.WithWaiterTimeout(p.waiterTimeout))
	require.NoError(t, err)
	cc, err := consumer.NewCondition("c")
	require.NoError(t, err)
	held, err := consumer.Lock(ctx)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		held, err := consume(p.rdb, consumer, cc, held)
		if err == nil {
			err = consumer.Unlock(held)
		}
		done <- err
	}()
	condWaiting(t, p.rdb, p.c, 1)

	producer := p.start(t, roleSignaller, "producer", watchdog)
	producer.Send(t, "stock")
	producer.Expect(t, "holding", 10*time.Second)
	exit := producer.Kill(t, 10*time.Second)
	require.Equal(t, -1, exit.ExitCode(), "the producer ended by a signal: %v", exit)
	killed := time.Now()

	held, err = p.l.Lock(ctx)
	require.NoError(t, err)
	back := time.Since(killed)
	assert.Less(t, back, watchdog+condTolerance, "the dead producer's lock came back after the watchdog timeout")
	n, err := p.rdb.ZCard(ctx, p.c.Keys()[1]).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the consumer waits on the condition; %s", p.state(t))
	select {
	case err := <-done:
		t.Fatalf("the consumer returned (%v) without a Signal", err)
	default:
	}
	ok, err := p.c.Signal(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, p.l.Unlock(held))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the signalled consumer did not finish")
	}
	t.Logf("the dead producer's lock was back %v after the kill (watchdog timeout %v)", back.Round(time.Millisecond), watchdog)
	p.assertClean(t)
}
