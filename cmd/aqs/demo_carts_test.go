package main

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/multilock"
)

// cartOf returns the multi-lock of client c on the store's SKUs, by number, and the demo's
// keys its scripts take: the queue list and liveness zset of each name (for cartArriveScript),
// and the SKUs in the order of the lock's names.
func cartOf(t *testing.T, c *aqs.Client, s *cartStore, skus ...int) (m *multilock.Lock, queues []string, order []int) {
	t.Helper()
	names := make([]string, len(skus))
	for i, n := range skus {
		names[i] = s.names[n-1]
	}
	m, err := multilock.New(c, names)
	require.NoError(t, err)
	for j, name := range m.Names() {
		queues = append(queues, m.Keys()[3*j+1], m.Keys()[3*j+2])
		order = append(order, s.index[name])
	}
	return m, queues, order
}

// heldKeys returns cartHeldScript's keys for a cart.
func heldKeys(m *multilock.Lock, k cartKeys, order []int) []string {
	var keys []string
	for j, i := range order {
		keys = append(keys, m.Keys()[3*j+2], k.holder(i))
	}
	return append(keys, k.violations(), k.pairs(), k.overlaps())
}

// doneKeys returns cartDoneScript's keys for a cart.
func doneKeys(k cartKeys, order []int) []string {
	var keys []string
	for _, i := range order {
		keys = append(keys, k.holder(i), k.sold(i))
	}
	return append(keys, k.oversells(), k.carts())
}

// TestCartChecksSeeAnOvertakenCartASecondHolderAndAnOversell shows that the carts' FIFO,
// held-twice and oversell checks are not vacuous: a cart that holds while a cart queued on one
// of its SKUs before it arrived still waits counts a violation, and none once that one was
// served; a cart that finds the marks of another on its SKUs counts a second holder per SKU;
// a sale beyond a SKU's stock counts an oversell per SKU.
func TestCartChecksSeeAnOvertakenCartASecondHolderAndAnOversell(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	rdb := srv.Client(t)
	ctx := t.Context()
	c, other := redistest.NewClient(t, srv.Client(t)), redistest.NewClient(t, srv.Client(t))
	s, err := openStore(c, redistest.Name(t), 3)
	require.NoError(t, err)
	k := s.k
	t.Cleanup(func() { rdb.Del(context.Background(), slices.Concat(s.all.Keys(), k.all(3))...) })

	holder, _, _ := cartOf(t, c, s, 1, 2)
	held, err := holder.Lock(ctx)
	require.NoError(t, err)
	waiter, _, _ := cartOf(t, other, s, 2, 3)
	waited := make(chan error, 1)
	go func() {
		h, err := waiter.Lock(ctx)
		if err == nil {
			err = waiter.Unlock(h)
		}
		waited <- err
	}()
	_, queues2, _ := cartOf(t, c, s, 2)
	require.Eventually(t, func() bool { return rdb.ZCard(ctx, queues2[1]).Val() == 1 }, 10*time.Second,
		time.Millisecond, "the waiter is queued on SKU 2 (SKU 3, free, is reserved for it)")

	late, queues, order := cartOf(t, c, s, 1, 2)
	require.Equal(t, []int{1, 2}, order)
	queued, err := cartArriveScript.Run(ctx, rdb, queues).Slice()
	require.NoError(t, err)
	require.Len(t, queued, 2, "one waiter, on the cart's second name")
	assert.Equal(t, int64(2), queued[0])

	hkeys := heldKeys(late, k, order)
	heldBy := func(cart string) []int64 {
		r, err := cartHeldScript.Run(ctx, rdb, hkeys, append([]any{cart}, queued...)...).Int64Slice()
		require.NoError(t, err)
		return r
	}
	assert.Equal(t, []int64{1, 1, 0}, heldBy("p1/b1#1"), "held while the waiter queued before it still waits")
	assert.Equal(t, []int64{1, 1, 2}, heldBy("p1/b2#1"), "and over the marks of p1/b1#1 on both SKUs")

	require.NoError(t, holder.Unlock(held)) // hands SKU 2 to the waiter, which then holds
	require.NoError(t, <-waited)
	assert.Equal(t, []int64{0, 1, 2}, heldBy("p1/b3#1"), "the waiter was served first: no violation")
	for key, want := range map[string]string{k.violations(): "2", k.pairs(): "3", k.overlaps(): "4"} {
		assert.Equal(t, want, rdb.Get(ctx, key).Val(), key)
	}

	// Each SKU started with 1 unit.
	dkeys := doneKeys(k, order)
	done := func(cart, bought string) int64 {
		rec := cart + " refused 1,2"
		if bought == "1" {
			rec = cart + " bought 1,2"
		}
		n, err := cartDoneScript.Run(ctx, rdb, dkeys, cart, bought, 1, rec).Int64()
		require.NoError(t, err)
		return n
	}
	assert.Equal(t, int64(0), done("p1/b3#1", "1"), "the one unit of each")
	assert.Equal(t, int64(2), done("p1/b2#1", "1"), "one beyond it on each SKU: oversold")
	assert.Equal(t, int64(0), done("p1/b1#1", "0"), "refused: nothing sold")
	assert.Equal(t, "2", rdb.Get(ctx, k.oversells()).Val())
	assert.Equal(t, "2", rdb.Get(ctx, k.sold(1)).Val())
	assert.Zero(t, rdb.Exists(ctx, k.holder(1), k.holder(2)).Val(), "the last mark went with its cart")
	records, err := rdb.LRange(ctx, k.carts(), 0, -1).Result()
	require.NoError(t, err)
	assert.Equal(t, []string{"p1/b3#1 bought 1,2", "p1/b2#1 bought 1,2", "p1/b1#1 refused 1,2"}, records)
	j, err := judgeCarts(records, nil)
	require.NoError(t, err)
	assert.Equal(t, 2, j.bought)
	assert.Equal(t, map[int]int{1: 2, 2: 2}, j.sold)
}

// TestCartOrderCheckFindsCartsThatDidNotHoldTheirSKUsAtOnce shows that the one-order check is
// not vacuous: holders lists that no order of the carts fits (two carts in opposite orders on
// two SKUs, three carts around three SKUs) put carts on a cycle, and a cart missing from the
// holders of one of its SKUs, or among those of a SKU it does not have, is misplaced.
func TestCartOrderCheckFindsCartsThatDidNotHoldTheirSKUsAtOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name              string
		records           []string
		holders           map[int][]string
		cyclic, misplaced int
	}{
		{"one order", []string{"a bought 1,2", "b bought 1,2", "c refused 2,3"},
			map[int][]string{1: {"a", "b"}, 2: {"a", "c", "b"}, 3: {"c"}}, 0, 0},
		{"two carts crossed", []string{"a bought 1,2", "b bought 1,2"},
			map[int][]string{1: {"a", "b"}, 2: {"b", "a"}}, 2, 0},
		{"three carts around", []string{"a bought 1,2", "b bought 2,3", "c bought 1,3"},
			map[int][]string{1: {"a", "c"}, 2: {"b", "a"}, 3: {"c", "b"}}, 3, 0},
		{"a cart after a cycle", []string{"a bought 1,2", "b bought 1,2", "c bought 2"},
			map[int][]string{1: {"a", "b"}, 2: {"b", "a", "c"}}, 3, 0},
		{"missing from a SKU", []string{"a bought 1,2"}, map[int][]string{1: {"a"}}, 0, 1},
		{"on a SKU not its own", []string{"a bought 1"}, map[int][]string{1: {"a"}, 2: {"a"}}, 0, 1},
		{"twice on a SKU", []string{"a bought 1", "b bought 1"}, map[int][]string{1: {"a", "b", "a"}}, 2, 1},
	} {
		j, err := judgeCarts(tc.records, tc.holders)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.cyclic, j.cyclic, "%s: carts on a cycle", tc.name)
		assert.Equal(t, tc.misplaced, j.misplaced, "%s: misplaced", tc.name)
	}
	_, err := judgeCarts([]string{"a sold 1"}, nil)
	assert.Error(t, err)
}

// TestCartStoreTakesItsSKUsInOneClusterSlot shows that the store's SKU names, which share its
// hash tag, make carts a Redis Cluster takes: the multi-lock accepts any of them together,
// every key of the store, aqs's and the demo's, is in one slot, and the demo's scripts run on
// a cart of 3 masters' cluster.
func TestCartStoreTakesItsSKUsInOneClusterSlot(t *testing.T) {
	t.Parallel()
	rdb := redistest.Cluster(t).Client(t)
	ctx := t.Context()
	c := redistest.NewClient(t, rdb)
	s, err := openStore(c, redistest.Name(t), 10)
	require.NoError(t, err, "one multi-lock on every SKU: no ErrCrossSlot")
	keys := slices.Concat(s.all.Keys(), s.k.all(10))
	t.Cleanup(func() { rdb.Del(context.Background(), keys...) })
	for _, key := range keys {
		assert.Equal(t, core.Slot(keys[0]), core.Slot(key), key)
	}

	m, queues, order := cartOf(t, c, s, 1, 5, 9, 10)
	queued, err := cartArriveScript.Run(ctx, rdb, queues).Slice()
	require.NoError(t, err)
	assert.Empty(t, queued)
	held, err := m.Lock(ctx)
	require.NoError(t, err)
	r, err := cartHeldScript.Run(held, rdb, heldKeys(m, s.k, order), "p1/b1#1").Int64Slice()
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 0, 0}, r)
	over, err := cartDoneScript.Run(held, rdb, doneKeys(s.k, order), "p1/b1#1", "1", 1, "p1/b1#1 bought 1,5,9,10").Int64()
	require.NoError(t, err)
	assert.Zero(t, over)
	require.NoError(t, m.Unlock(held))
}

// hogStoreEnv, set in the environment of this test binary's worker processes, makes their
// cart buyers wait for a store held whole (see runHoggedCartBuyers).
const hogStoreEnv = "AQS_TEST_HOG_STORE"

func init() {
	if os.Getenv(hogStoreEnv) != "" {
		roles[roleCarts] = runHoggedCartBuyers
	}
}

// runHoggedCartBuyers runs the cart buyers of a store that process 1 holds whole, with one
// multi-lock on every SKU, until its own buyers have given up: every buyer's first cart waits
// past the deadline.
func runHoggedCartBuyers(ctx context.Context, w *worker) error {
	s, err := openStore(w.client, w.spec.Name, w.spec.SKUs)
	if err != nil {
		return err
	}
	if w.spec.Proc == 1 {
		held, err := s.all.Lock(ctx)
		if err != nil {
			return err
		}
		err = runCartBuyers(ctx, w)
		// The store is held on until no buyer of any process waits for its SKUs any longer
		// (each gives up at its deadline, and leaves the queues), so that none gets a cart
		// in time. No event tells this process of the others' give-ups: it looks.
		for err == nil {
			var n int64
			for i := 2; i < len(s.all.Keys()); i += 3 {
				c, zerr := w.rdb.ZCard(ctx, s.all.Keys()[i]).Result()
				if zerr != nil {
					err = zerr
				}
				n += c
			}
			if n == 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if uerr := s.all.Unlock(held); err == nil {
			err = uerr
		}
		return err
	}
	var locks []string
	for i := 0; i < len(s.all.Keys()); i += 3 {
		locks = append(locks, s.all.Keys()[i])
	}
	for {
		// No event tells a process of another's hold: it looks.
		n, err := w.rdb.Exists(ctx, locks...).Result()
		if err != nil {
			return err
		}
		if n == int64(len(locks)) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return runCartBuyers(ctx, w)
}

// A store held whole, past the deadline, leaves every cart's Lock waiting: the demo reports
// the buyers stuck, and fails. Not parallel: the worker processes get the variable from the
// test's environment.
func TestDemoInventoryFailsWhenACartWaitsPastTheDeadline(t *testing.T) {
	t.Setenv(hogStoreEnv, "1")
	srv := redistest.Single(t)
	name, args := demoArgs(t, "inventory", "--redis", srv.Addr(), "--cart-deadline", "1s")
	code, stdout, stderr := aqsRun(t.Context(), nil, args...)
	require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Equal(t, 4, strings.Count(stdout, "STUCK: cart "), "every buyer's first cart")
	assert.Contains(t, stdout, "still waiting for its lock after 1")
	assert.Regexp(t, checkRow("carts deadlocked", `4: 4 Locks still waiting after 1s`, "FAILED"), stdout)
	assert.Regexp(t, checkRow("carts reserved", `0 of 16: 0 bought whole, 0 refused whole \(a SKU sold out\), in 0s, 4 buyers in 2 processes`, "FAILED"), stdout)
	assert.Regexp(t, checkRow("SKUs oversold", `0 \(units beyond a SKU's stock\); on each of 4 SKUs stock \+ sold = 7, lowest 7; 0 sold out`, "ok"), stdout)
	assert.Contains(t, stdout, "2 of 10 checks FAILED")
	assertNoDemoKeys(t, srv, name)
}
