package main

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// The inventory reserves every cart whole or not at all, in arrival order among carts that share
// a SKU, with no deadlock; then every item once, waking waiters in wait order.
func TestDemoInventoryReservesCartsAndItemsInOrderNoneOversold(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name, args := demoArgs(t, "inventory", "--redis", srv.Addr())
	code, stdout, stderr := aqsRun(t.Context(), nil, args...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assertInventoryOK(t, stdout)
	assert.Contains(t, stdout, "all 10 checks passed")
	assert.Contains(t, stdout, "carts: 4 SKUs, names {"+name+"-store}:sku-1 to {"+name+"-store}:sku-4 (one hash tag), 7 units each in stock")
	assert.Contains(t, stdout, `fair lock "`+name+`-inventory" (key aqs:{`+name+`-inventory}), its condition "stock"`)
	assert.Contains(t, stdout, "FIFO violations among waiters: a buyer whose Wait on the condition returns")

	// The cart buyers in two processes of their own; then the buyers in two more, the
	// restocker in a third.
	pids := workerPIDs(t, stdout)
	require.Len(t, pids, 2)
	assert.Len(t, pids[0], 2)
	assert.Len(t, pids[1], 3)
	for _, p := range pids {
		assert.NotContains(t, p, os.Getpid())
	}
	assertNoDemoKeys(t, srv, name)
}

// inventoryLock returns a fair lock of its own aqs.Client, and its stock condition.
func inventoryLock(t *testing.T, srv *redistest.Server, name string) (*fair.Lock, *fair.Condition) {
	t.Helper()
	c, err := aqs.New(t.Context(), srv.Client(t))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	l, err := fair.New(c, name)
	require.NoError(t, err)
	cond, err := l.NewCondition(stockCondition)
	require.NoError(t, err)
	return l, cond
}

// TestInventoryChecksSeeAnOvertakenWaiterAndAnOversell shows that the scenario's FIFO and
// oversell checks are not vacuous: a wake while an earlier wait is still pending counts one
// violation per such wait, and a reservation beyond what was restocked counts an oversell.
func TestInventoryChecksSeeAnOvertakenWaiterAndAnOversell(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	rdb := srv.Client(t)
	ctx := t.Context()
	l, _ := inventoryLock(t, srv, redistest.Name(t))
	k := inventoryKeysOf(l)
	t.Cleanup(func() { rdb.Del(context.Background(), k.all()...) })

	for want := range int64(3) {
		r, err := waitNumberScript.Run(ctx, rdb, []string{k.waits, k.pending}).Int64Slice()
		require.NoError(t, err)
		assert.Equal(t, want+1, r[0], "wait numbers in order")
	}
	woke := func(n int) []int64 {
		r, err := wokeScript.Run(ctx, rdb, []string{k.pending, k.violations, k.signals, k.unsignalled}, n).Int64Slice()
		require.NoError(t, err)
		return r
	}
	require.NoError(t, signalledScript.Run(ctx, rdb, []string{k.signals}).Err())
	assert.Equal(t, int64(2), woke(3)[0], "woken while waits 1 and 2 still wait")
	r := woke(1)
	assert.Equal(t, int64(0), r[0], "nothing before wait 1")
	assert.Positive(t, r[1], "the time of the first Signal")
	assert.Equal(t, []int64{0, -1}, woke(2), "wait 2 woke with no second Signal recorded")
	assert.Equal(t, "2", rdb.Get(ctx, k.violations).Val())
	assert.Equal(t, "2", rdb.Get(ctx, k.unsignalled).Val(), "waits 2 and 3 had no Signal of their own")

	require.NoError(t, rdb.Set(ctx, k.restocked, 1, 0).Err())
	reserve := func() []int64 {
		r, err := reserveScript.Run(ctx, rdb, []string{k.reserved, k.restocked, k.oversells, k.reservations},
			"p1/b1 1 -1 0 0 -1").Int64Slice()
		require.NoError(t, err)
		return r
	}
	assert.Equal(t, []int64{1, 0}, reserve(), "the one item restocked")
	assert.Equal(t, []int64{2, 1}, reserve(), "one beyond it: an oversell")
	assert.Equal(t, "1", rdb.Get(ctx, k.oversells).Val())
	records, err := rdb.LRange(ctx, k.reservations, 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, records, 2)
	assert.Len(t, lineWords(records[0]), 7, "the record with the server time appended")
}

// TestInventoryProbeFindsABuyerLeftWaitingWithStock shows that the left-waiting check is not
// vacuous: a buyer on the condition while stock is left and nobody is on the lock's queue is
// found, and once a Signal moves it, it is not.
func TestInventoryProbeFindsABuyerLeftWaitingWithStock(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	rdb := srv.Client(t)
	ctx := t.Context()
	name := redistest.Name(t)
	prober, cond := inventoryLock(t, srv, name)
	buyer, buyerCond := inventoryLock(t, srv, name)
	k := inventoryKeysOf(prober)
	t.Cleanup(func() {
		rdb.Del(context.Background(), slices.Concat(prober.Keys(), cond.Keys(), k.all())...)
	})

	held, err := buyer.Lock(ctx)
	require.NoError(t, err)
	woken := make(chan error, 1)
	go func() {
		h, err := buyerCond.Wait(held)
		if err == nil {
			err = buyer.Unlock(h)
		}
		woken <- err
	}()
	require.Eventually(t, func() bool { return rdb.ZCard(ctx, cond.Keys()[1]).Val() == 1 }, 10*time.Second,
		time.Millisecond, "the buyer waits on the condition")

	waiting, stock, err := probeStuck(ctx, rdb, prober, cond, k)
	require.NoError(t, err)
	assert.Equal(t, 0, waiting, "no stock: waiting is right")
	assert.Equal(t, 0, stock)

	require.NoError(t, rdb.Set(ctx, k.stock, 2, 0).Err()) // restocked with no Signal
	waiting, stock, err = probeStuck(ctx, rdb, prober, cond, k)
	require.NoError(t, err)
	assert.Equal(t, 1, waiting, "left waiting with stock")
	assert.Equal(t, 2, stock)

	ok, err := cond.Signal(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, <-woken)
	waiting, _, err = probeStuck(ctx, rdb, prober, cond, k)
	require.NoError(t, err)
	assert.Equal(t, 0, waiting)
}

// muteRestockerEnv, set in the environment of this test binary's worker processes, makes their
// restocker one that never signals (see runMuteRestocker).
const muteRestockerEnv = "AQS_TEST_MUTE_RESTOCKER"

func init() {
	if os.Getenv(muteRestockerEnv) != "" {
		roles[roleRestocker] = runMuteRestocker
	}
}

// runMuteRestocker is a broken restocker: once every buyer (Items of them, one item each) waits
// on the condition, it adds their items with no Signal, so that they wait on with stock left.
func runMuteRestocker(ctx context.Context, w *worker) error {
	lock, cond, err := openInventory(w)
	if err != nil {
		return err
	}
	k := inventoryKeysOf(lock)
	for {
		// No event tells a process of another's Wait: it looks.
		n, err := w.rdb.ZCard(ctx, cond.Keys()[1]).Result()
		if err != nil {
			return err
		}
		if n == int64(w.spec.Items) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	held, err := lock.Lock(ctx)
	if err != nil {
		return err
	}
	err = w.rdb.IncrBy(held, k.restocked, int64(w.spec.Items)).Err()
	if err == nil {
		err = w.rdb.Set(held, k.stock, w.spec.Items, 0).Err()
	}
	if uerr := lock.Unlock(held); err == nil {
		err = uerr
	}
	if err != nil {
		return err
	}
	w.out.println("restock", w.spec.Items, w.spec.Items, 0, w.spec.Items)
	w.out.println(lineDone, w.spec.Items, 0, 0)
	return nil
}

// A restocker that adds stock without signalling leaves the buyers waiting: the demo finds
// them, stops them, and fails. Not parallel: the worker processes get the variable from the
// test's environment.
func TestDemoInventoryFailsWhenBuyersAreLeftWaitingWithStock(t *testing.T) {
	t.Setenv(muteRestockerEnv, "1")
	srv := redistest.Single(t)
	name, args := demoArgs(t, "inventory", "--redis", srv.Addr(), "--items", "1")
	code, stdout, stderr := aqsRun(t.Context(), nil, args...)
	require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stdout, "STUCK: 4 buyers wait on the condition with 4 items in stock and nobody in line")
	assert.Regexp(t, checkRow("left waiting with stock", `4 buyers, 4 items in stock; 1 look after the last restock`, "FAILED"), stdout)
	assert.Regexp(t, checkRow("items reserved", `0 of 4 restocked, 4 in stock, in \S+, 4 buyers in 2 processes`, "FAILED"), stdout)
	assert.Contains(t, stdout, "left waiting with 0 of 1 item")
	assert.Contains(t, stdout, "2 of 10 checks FAILED")
	assertNoDemoKeys(t, srv, name)
}
