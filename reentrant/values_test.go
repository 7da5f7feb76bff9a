package reentrant_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/reentrant"
)

// Values of one name on one Client are one lock to the Client, as one shared value is: a
// goroutine that builds its own value while another goroutine's value holds the lock boards,
// sending nothing, and the release made through a third value hands it the lock with the
// release as the only command.
func TestValuesOfOneNameShareTheLocalHandOff(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	sent := &lockCommands{}
	rdb.AddHook(sent)
	c := newClient(t, rdb)
	a := newLock(t, c)
	held, err := a.Lock(context.Background())
	require.NoError(t, err)

	before := sent.n.Load()
	b := sameLock(t, c, a)
	got := lockAsync(t, context.Background(), b)
	waitBoarded(t, a) // a's view: b's waiter boarded the hold a took
	assert.Equal(t, before, sent.n.Load(), "a boarded waiter sent a command")

	require.NoError(t, sameLock(t, c, a).Unlock(held))
	h := <-got
	require.NotNil(t, h)
	assert.Equal(t, before+1, sent.n.Load(), "the hand-off took more than the release")
	require.NoError(t, a.Unlock(h))
	assertFreed(t, rdb, a)
}

// Values of one name that differ in their configuration do not share: a lock with another
// waiter timeout waits as another Client's waiter would, in Redis's queue.
func TestValuesWithAnotherWaiterTimeoutQueueInRedis(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	c := newClient(t, rdb)
	a := newLock(t, c)
	held, err := a.Lock(context.Background())
	require.NoError(t, err)
	b, err := reentrant.New(c, a.Name(), reentrant.WithWaiterTimeout(7*time.Second))
	require.NoError(t, err)
	got := lockAsync(t, context.Background(), b)
	waitQueued(t, rdb, a, 1)
	assert.Zero(t, a.Boarded())
	require.NoError(t, a.Unlock(held))
	h := <-got
	require.NotNil(t, h)
	require.NoError(t, b.Unlock(h))
	assertFreed(t, rdb, a)
}

// A Client keeps no local state of a name it no longer uses: once no value, call or hold of
// a name is left, its entry leaves the Client's registry.
func TestTheClientForgetsNamesNoLongerUsed(t *testing.T) {
	c := newClient(t, redistest.Single(t).Client(t))
	entries := func() int {
		n := 0
		core.RuntimeOf(c).Queues.Range(func(any, any) bool { n++; return true })
		return n
	}
	base := redistest.Name(t)
	func() {
		for i := range 50 {
			l, err := reentrant.New(c, fmt.Sprintf("%s:%d", base, i))
			require.NoError(t, err)
			held, err := l.Lock(context.Background())
			require.NoError(t, err)
			require.NoError(t, l.Unlock(held))
		}
	}()
	require.Positive(t, entries())

	// A value still in use keeps its entry.
	kept, err := reentrant.New(c, base+":kept")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		runtime.GC()
		return entries() == 1
	}, 10*time.Second, 10*time.Millisecond, "the registry still holds %d entries", entries())
	runtime.KeepAlive(kept)
}
