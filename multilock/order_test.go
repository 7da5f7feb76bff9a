package multilock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
)

// waitQueued waits until key's deadline zset (a name's queue) has n entries.
func waitQueued(t *testing.T, rdb redis.UniversalClient, d string, n int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		got, err := rdb.ZCard(context.Background(), d).Result()
		return err == nil && got == n
	}, 10*time.Second, time.Millisecond, "%s never had %d waiters", d, n)
}

type got struct {
	who  string
	held context.Context
}

// TestAManyNameRequestIsNotOvertakenByLaterOnes queues, in this order, behind holders of a and
// c: a request for {a, b, c}, then a request for b alone, for {b, c}, for a alone, each on a
// Client of its own. The first is served first, and the others after it, in their order,
// though b was free all along.
func TestAManyNameRequestIsNotOvertakenByLaterOnes(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ns := names(t, 3) // a, b, c
		a, err := fair.New(newClient(t, rdb), ns[0])
		require.NoError(t, err)
		c, err := fair.New(newClient(t, rdb), ns[2])
		require.NoError(t, err)
		ah, err := a.Lock(ctx)
		require.NoError(t, err)
		ch, err := c.Lock(ctx)
		require.NoError(t, err)

		order := make(chan got, 4)
		start := func(who string, take func(context.Context, ...aqs.LockOption) (context.Context, error), d string, n int64) {
			go func() {
				h, err := take(ctx)
				assert.NoError(t, err, who)
				order <- got{who, h}
			}()
			waitQueued(t, rdb, d, n)
		}
		all := newLock(t, newClient(t, rdb), ns)
		dOf := func(i int) string { return all.Keys()[3*i+2] }
		// {a,b,c} reserves b (free) and queues on a and c.
		start("abc", all.Lock, dOf(0), 1)
		bl, err := fair.New(newClient(t, rdb), ns[1])
		require.NoError(t, err)
		_, ok, err := bl.TryLock(ctx)
		require.NoError(t, err)
		require.False(t, ok, "b was free for a later request while {a, b, c} waited")
		start("b", bl.Lock, dOf(1), 1)
		bc := newLock(t, newClient(t, rdb), ns[1:])
		start("bc", bc.Lock, dOf(1), 2)
		al, err := fair.New(newClient(t, rdb), ns[0])
		require.NoError(t, err)
		start("a", al.Lock, dOf(0), 2)

		require.NoError(t, a.Unlock(ah))
		select {
		case g := <-order:
			t.Fatalf("%s got its names while c was still held", g.who)
		case <-time.After(50 * time.Millisecond):
		}
		require.NoError(t, c.Unlock(ch))
		unlock := map[string]func(context.Context) error{"abc": all.Unlock, "b": bl.Unlock, "bc": bc.Unlock, "a": al.Unlock}
		first := <-order
		require.Equal(t, "abc", first.who)
		select {
		case g := <-order:
			t.Fatalf("%s got its names while {a, b, c} held them", g.who)
		default:
		}
		require.NoError(t, unlock["abc"](first.held))
		// a and b are free of each other: both are served now, in either order; {b, c} after b.
		var rest []string
		for range 3 {
			g := <-order
			rest = append(rest, g.who)
			require.NoError(t, unlock[g.who](g.held))
		}
		assert.ElementsMatch(t, []string{"a", "b", "bc"}, rest)
		assert.Less(t, indexOf(rest, "b"), indexOf(rest, "bc"), "{b, c} passed b, which arrived before it")
	})
}

func indexOf(s []string, x string) int {
	for i, v := range s {
		if v == x {
			return i
		}
	}
	return -1
}

// TestAWaiterThatGivesUpLeavesNothing: a Lock whose context ends while it waits, with a name
// reserved for it, leaves every queue, and the reserved name is free again at once.
func TestAWaiterThatGivesUpLeavesNothing(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		ns := names(t, 2)
		c := newClient(t, rdb)
		a, err := fair.New(c, ns[0])
		require.NoError(t, err)
		ah, err := a.Lock(ctx)
		require.NoError(t, err)
		m := newLock(t, newClient(t, rdb), ns)
		_, ok, err := m.TryLock(ctx, aqs.WithWait(100*time.Millisecond))
		require.NoError(t, err)
		require.False(t, ok)
		for _, k := range m.Keys()[3:] {
			n, err := rdb.Exists(ctx, k).Result()
			require.NoError(t, err)
			assert.Zero(t, n, "%s is left behind", k)
		}
		card, err := rdb.ZCard(ctx, a.Keys()[2]).Result()
		require.NoError(t, err)
		assert.Zero(t, card, "the waiter is still queued on a")

		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error)
		go func() {
			_, err := m.Lock(wctx)
			done <- err
		}()
		waitQueued(t, rdb, a.Keys()[2], 1)
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
		b, err := fair.New(c, ns[1])
		require.NoError(t, err)
		bh, ok, err := b.TryLock(ctx)
		require.NoError(t, err)
		require.True(t, ok, "b is still reserved for a waiter that gave up")
		require.NoError(t, b.Unlock(bh))
		require.NoError(t, a.Unlock(ah))
	})
}

// TestALostNameCancelsTheHold: a name taken from the hold (ForceUnlock of its fair lock)
// cancels the held context with aqs.ErrLockLost at the next renewal, and Unlock reports it,
// releasing the names the hold still had.
func TestALostNameCancelsTheHold(t *testing.T) {
	ctx := context.Background()
	rdb := redistestSingle(t)
	c := newClient(t, rdb, aqs.WithWatchdogTimeout(300*time.Millisecond))
	ns := names(t, 3)
	m := newLock(t, c, ns)
	held, err := m.Lock(ctx)
	require.NoError(t, err)
	f, err := fair.New(c, ns[1])
	require.NoError(t, err)
	was, err := f.ForceUnlock(ctx)
	require.NoError(t, err)
	require.True(t, was)
	select {
	case <-held.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the held context outlived the loss of a name")
	}
	assert.ErrorIs(t, context.Cause(held), aqs.ErrLockLost)
	err = m.Unlock(held)
	assert.ErrorIs(t, err, aqs.ErrLockLost)
	for _, n := range []string{ns[0], ns[2]} {
		l, err := fair.New(c, n)
		require.NoError(t, err)
		h, ok, err := l.TryLock(ctx)
		require.NoError(t, err)
		require.True(t, ok, "%q is still held after the lost hold's Unlock", n)
		require.NoError(t, l.Unlock(h))
	}
}

// TestTheWatchdogKeepsAHoldAndAFixedLeaseEndsIt.
func TestTheWatchdogKeepsAHoldAndAFixedLeaseEndsIt(t *testing.T) {
	ctx := context.Background()
	rdb := redistestSingle(t)
	c := newClient(t, rdb, aqs.WithWatchdogTimeout(200*time.Millisecond))
	ns := names(t, 2)
	m := newLock(t, c, ns)
	held, err := m.Lock(ctx)
	require.NoError(t, err)
	other := newLock(t, newClient(t, rdb), ns)
	// Past several watchdog timeouts, the hold is still there.
	_, ok, err := other.TryLock(ctx, aqs.WithWait(700*time.Millisecond))
	require.NoError(t, err)
	assert.False(t, ok, "the hold was lost although its Client renewed it")
	require.NoError(t, held.Err())
	require.NoError(t, m.Unlock(held))

	fixed, err := m.Lock(ctx, aqs.WithLease(150*time.Millisecond))
	require.NoError(t, err)
	h, ok, err := other.TryLock(ctx, aqs.WithWait(5*time.Second))
	require.NoError(t, err)
	require.True(t, ok, "a fixed lease did not end")
	<-fixed.Done()
	assert.ErrorIs(t, context.Cause(fixed), aqs.ErrLockLost)
	require.NoError(t, other.Unlock(h))
}

// TestALockIsNotReentrant: a context that holds the multi-lock, or one of its names, cannot
// wait for it.
func TestALockIsNotReentrant(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, redistestSingle(t))
	ns := names(t, 2)
	m := newLock(t, c, ns)
	held, err := m.Lock(ctx)
	require.NoError(t, err)
	_, err = m.Lock(held)
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	// Another multi-lock that shares a name, or one of another Lock value of the same names.
	overlapping := newLock(t, c, []string{ns[1], ns[0] + "-other"})
	_, err = overlapping.Lock(held)
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	_, _, err = newLock(t, c, ns).TryLock(held)
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	// A disjoint one nests.
	disjoint := newLock(t, c, []string{ns[0] + "-x", ns[1] + "-y"})
	inner, err := disjoint.Lock(held)
	require.NoError(t, err)
	assert.ErrorIs(t, overlapping.Unlock(inner), aqs.ErrNotOwner)
	require.NoError(t, disjoint.Unlock(inner))
	require.NoError(t, m.Unlock(held))

	f, err := fair.New(c, ns[1])
	require.NoError(t, err)
	fh, err := f.Lock(ctx)
	require.NoError(t, err)
	_, _, err = m.TryLock(fh)
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	require.NoError(t, f.Unlock(fh))
}

// TestManyNamesAndDuplicates: 100 names, given twice, are one hold of 100 names.
func TestManyNamesAndDuplicates(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c := newClient(t, rdb)
		tag := "{" + t.Name() + "}"
		var ns []string
		for i := range 100 {
			ns = append(ns, tag+string(rune(0x4e00+i)))
		}
		m := newLock(t, c, append(ns, ns...))
		require.Len(t, m.Names(), 100)
		held, err := m.Lock(ctx, aqs.WithFencingToken())
		require.NoError(t, err)
		other := newLock(t, c, ns[99:])
		_, ok, err := other.TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok)
		require.NoError(t, m.Unlock(held))
		h, ok, err := other.TryLock(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, other.Unlock(h))
	})
}

// TestKeysOfAnotherTypeAreReportedAndNothingIsWritten.
func TestKeysOfAnotherTypeAreReportedAndNothingIsWritten(t *testing.T) {
	ctx := context.Background()
	rdb := redistestSingle(t)
	c := newClient(t, rdb)
	ns := names(t, 3)
	m := newLock(t, c, ns)
	keys := m.Keys()
	// b is held, so that the attempt must queue there (and reach its queue's keys): a's and c's
	// lock keys, a's queue, b's queue and deadlines.
	for _, bad := range []int{0, 1, 4, 5, 6} {
		require.NoError(t, rdb.Del(ctx, keys...).Err())
		f, err := fair.New(c, ns[1])
		require.NoError(t, err)
		fh, err := f.Lock(ctx)
		require.NoError(t, err)
		require.NoError(t, rdb.Set(ctx, keys[bad], "not aqs", 0).Err())
		tag := ns[0][1:strings.IndexByte(ns[0], '}')]
		before := dump(t, rdb, tag)
		_, _, err = m.TryLock(ctx, aqs.WithWait(50*time.Millisecond))
		assert.ErrorIs(t, err, aqs.ErrWrongType, "key %s", keys[bad])
		assert.Equal(t, before, dump(t, rdb, tag), "a refused attempt wrote (key %s of another type)", keys[bad])
		require.NoError(t, rdb.Del(ctx, keys[bad]).Err())
		require.NoError(t, f.Unlock(fh))
	}
	require.NoError(t, rdb.Del(ctx, keys...).Err())
}

// dump returns every key whose name holds tag, with its type and value.
func dump(t *testing.T, rdb redis.UniversalClient, tag string) map[string]string {
	ctx := context.Background()
	out := map[string]string{}
	keys, err := rdb.Keys(ctx, "*"+tag+"*").Result()
	require.NoError(t, err)
	for _, k := range keys {
		typ, err := rdb.Type(ctx, k).Result()
		require.NoError(t, err)
		var v any
		switch typ {
		case "string":
			v, err = rdb.Get(ctx, k).Result()
		case "list":
			v, err = rdb.LRange(ctx, k, 0, -1).Result()
		case "zset":
			v, err = rdb.ZRange(ctx, k, 0, -1).Result()
		}
		require.NoError(t, err)
		out[k] = typ + " " + fmtAny(v)
	}
	return out
}

func fmtAny(v any) string { return fmt.Sprint(v) }
