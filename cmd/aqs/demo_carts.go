package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/multilock"
)

// Carts with the multi-lock: the inventory scenario's first stage.
//
// A store has SKUs, each a counter of stock in Redis, each the name of a lock. Buyers in
// several processes reserve carts of 1 to 4 distinct SKUs, one of each, with one multi-lock
// per cart on the cart's SKUs (package multilock): holding it, the buyer reads the stock of
// every SKU with a GET, and if each has one left writes one less to each with a SET; if any is
// sold out, the cart is refused whole and nothing is written. The stock is read, a moment of
// packing passes (cartWork), and then written: two holders of one SKU at once would both sell
// its last unit. Each SKU starts with about three quarters of what the carts ask of it, so
// SKUs sell out and refusals happen.
//
// The SKU names share one hash tag, the store's ("{<name>-store}:sku-3"), so every cart's
// names live in one Redis Cluster slot, as the multi-lock requires there. The demo itself runs
// on a single server (or the primary a URL names), not on a Cluster.
//
// What is checked, all from Redis but the deadline:
//
//   - Oversold. The sale, holding the lock, increments the SKU's sold counter and counts every
//     unit beyond the SKU's starting stock; at the end, stock + sold must be the starting
//     stock on every SKU (a lost SET would break it) and the sold counters must be what the
//     records of the bought carts add up to.
//   - Held twice at once. Holding the lock, before anything else, the buyer marks each SKU
//     with its cart (cartHeldScript): a mark of another cart already there is a second holder.
//     The marks go when the cart is done (cartDoneScript).
//   - Deadlocks. Each Lock has a deadline (--cart-deadline, generous): a Lock not returned by
//     then gives up, and its buyer reports itself stuck and stops. Every buyer must finish
//     every cart.
//   - Arrival order among overlapping carts. The multi-lock serves requests that share a name
//     in the order they joined the queues, and that moment is inside Lock. What a buyer can
//     see from outside: just before it calls Lock, a script (cartArriveScript) reads the queue
//     of each of its SKUs, the lock's list and its liveness zset, and returns the waiters
//     queued there at that moment. Each of them joined that SKU's queue before this cart's
//     Lock was called, so it must get the SKU first. Once the cart holds, cartHeldScript looks
//     for them in those queues: one still waiting there (a multi-lock waiter leaves a name's
//     queue when the name is reserved for it, or when it holds) is a FIFO violation. Nothing
//     gives up waiting in a passing run, and a waiter dropped as dead would queue again under a
//     new member, which is not looked for: a violation cannot be counted falsely.
//   - One order. Holding the lock, the buyer appends its cart to each SKU's list of holders,
//     one SKU at a time, each with a command of its own (in one script, the lists would agree
//     whatever the lock did). When each cart holds all its SKUs during one interval, alone,
//     the holds of two carts that share a SKU do not overlap, and the lists fit one order of
//     the carts (the order of the holds); a cycle (cart A before B on one SKU and B before A
//     on another, or a longer one) would be a cart that did not hold its SKUs at once, as
//     when each SKU is locked and let go in turn. It checks the atomic hold, not the arrival
//     order, which the check above judges.

// roleCarts is the role of a cart buyers' process: Goroutines buyers of Carts carts each.
//
// Events: "cart <cart> <bought|refused> <SKUs> <short SKUs or -> <late> <wait in µs>", the
// cart being "<buyer>#<n>", its SKUs comma-separated numbers, late the FIFO violations found
// when it held; "stuck <cart> <SKUs> <wait in µs>" when its Lock did not return by the
// deadline, after which the buyer stops; "done <carts done>".
const roleCarts = "carts"

const (
	// cartWork is how long a buyer holding a cart's lock takes between reading the stock and
	// writing it: the window in which a second holder would sell the same units.
	cartWork = time.Millisecond
	// maxCartSKUs is the most SKUs in one cart.
	maxCartSKUs = 4
	// defaultCartDeadline is --cart-deadline's default.
	defaultCartDeadline = 15 * time.Second
)

// errCartDeadline is the cause with which a buyer's Lock is cancelled at the deadline.
var errCartDeadline = errors.New("the cart's Lock did not return by the deadline")

// skuName returns the name of SKU i (from 1) of a store: the store's hash tag, then the SKU.
func skuName(store string, i int) string { return "{" + store + "}:sku-" + strconv.Itoa(i) }

// cartStore is a store's SKUs, as the parent and the buyers see them.
type cartStore struct {
	names []string       // names[i-1] is SKU i's
	index map[string]int // name -> SKU number
	all   *multilock.Lock
	k     cartKeys
}

// openStore returns the store of name with skus SKUs. Its multi-lock on every SKU, all, gives
// the store's keys; the demo never takes it.
func openStore(c *aqs.Client, name string, skus int) (*cartStore, error) {
	s := &cartStore{index: map[string]int{}}
	for i := 1; i <= skus; i++ {
		n := skuName(name, i)
		s.names = append(s.names, n)
		s.index[n] = i
	}
	all, err := multilock.New(c, s.names)
	if err != nil {
		return nil, err
	}
	s.all = all
	s.k = cartKeys{stem: demoKeyStem(all.Keys()[0])}
	return s, nil
}

// cartKeys are the demo's keys of the store, in the SKUs' hash slot.
type cartKeys struct {
	stem string
}

// stock is SKU i's units in stock; sold, its units sold; holder, the mark of the cart that
// holds it; holders, the list of the carts that held it, in order.
func (k cartKeys) stock(i int) string   { return k.stem + "sku-" + strconv.Itoa(i) + ":stock" }
func (k cartKeys) sold(i int) string    { return k.stem + "sku-" + strconv.Itoa(i) + ":sold" }
func (k cartKeys) holder(i int) string  { return k.stem + "sku-" + strconv.Itoa(i) + ":holder" }
func (k cartKeys) holders(i int) string { return k.stem + "sku-" + strconv.Itoa(i) + ":holders" }

// carts is the list of cart records, "<cart> <bought|refused> <SKUs>", in the order the carts
// were done.
func (k cartKeys) carts() string      { return k.stem + "carts" }
func (k cartKeys) oversells() string  { return k.stem + "oversells" }  // units sold beyond a SKU's stock
func (k cartKeys) overlaps() string   { return k.stem + "overlaps" }   // SKUs found held by another cart
func (k cartKeys) violations() string { return k.stem + "violations" } // FIFO violations
func (k cartKeys) pairs() string      { return k.stem + "fifo-pairs" } // (cart, waiter queued before it) pairs

func (k cartKeys) all(skus int) []string {
	keys := []string{k.carts(), k.oversells(), k.overlaps(), k.violations(), k.pairs()}
	for i := 1; i <= skus; i++ {
		keys = append(keys, k.stock(i), k.sold(i), k.holder(i), k.holders(i))
	}
	return keys
}

// cartArriveScript returns the waiters queued, at this moment, for each of a cart's names.
//
// KEYS[2j-1], KEYS[2j] the queue list and the liveness zset (member -> deadline, server ms)
// of the cart's name j. Reply: {j, member, j, member, ...} for the live waiters, in queue
// order per name.
var cartArriveScript = redis.NewScript(serverMs + `
local reply = {}
for j = 1, #KEYS / 2 do
  for _, m in ipairs(redis.call('LRANGE', KEYS[2 * j - 1], 0, -1)) do
    local s = redis.call('ZSCORE', KEYS[2 * j], m)
    if s and tonumber(s) > now then
      reply[#reply + 1] = j
      reply[#reply + 1] = m
    end
  end
end
return reply
`)

// cartHeldScript runs first thing when a cart holds its lock: it counts the waiters that
// cartArriveScript found which still wait (FIFO violations), and marks each SKU as the cart's,
// counting a mark of another cart found there (a second holder).
//
// KEYS[2j-1], KEYS[2j] the liveness zset and the holder mark of the cart's name j; then the
// violations, pairs and overlaps counters. ARGV[1] the cart;
// ARGV[2...] cartArriveScript's reply. A waiter queued for several of the cart's names is one
// pair, and one violation if it still waits for any of them. Reply: {violations, pairs,
// overlaps}.
var cartHeldScript = redis.NewScript(serverMs + `
local n = (#KEYS - 3) / 2
local seen, late, pairs, violations = {}, {}, 0, 0
for a = 2, #ARGV, 2 do
  local j, m = tonumber(ARGV[a]), ARGV[a + 1]
  if not seen[m] then
    seen[m] = true
    pairs = pairs + 1
  end
  local s = redis.call('ZSCORE', KEYS[2 * j - 1], m)
  if s and tonumber(s) > now and not late[m] then
    late[m] = true
    violations = violations + 1
  end
end
local overlaps = 0
for j = 1, n do
  if redis.call('GET', KEYS[2 * j]) then
    overlaps = overlaps + 1
  end
  redis.call('SET', KEYS[2 * j], ARGV[1])
end
redis.call('INCRBY', KEYS[2 * n + 1], violations)
redis.call('INCRBY', KEYS[2 * n + 2], pairs)
redis.call('INCRBY', KEYS[2 * n + 3], overlaps)
return {violations, pairs, overlaps}
`)

// cartDoneScript runs last thing while a cart holds its lock: it takes the cart's marks off
// its SKUs (a mark another cart put over it stays, counted already), counts the sale of a
// bought cart and every unit sold beyond a SKU's stock, and records the cart.
//
// KEYS[2j-1], KEYS[2j] the holder mark and the sold counter of the cart's name j; then the
// oversells counter and the carts list. ARGV[1] the cart, ARGV[2] "1" if bought, ARGV[3] the
// stock each SKU started with, ARGV[4] the cart's record. Reply: the units oversold.
var cartDoneScript = redis.NewScript(`
local n = (#KEYS - 2) / 2
local over = 0
for j = 1, n do
  if redis.call('GET', KEYS[2 * j - 1]) == ARGV[1] then
    redis.call('DEL', KEYS[2 * j - 1])
  end
  if ARGV[2] == '1' and redis.call('INCR', KEYS[2 * j]) > tonumber(ARGV[3]) then
    over = over + 1
  end
end
if over > 0 then
  redis.call('INCRBY', KEYS[2 * n + 1], over)
end
redis.call('RPUSH', KEYS[2 * n + 2], ARGV[4])
return over
`)

// Notes of the summary.
const (
	cartsFIFONote = "a cart that holds its SKUs while a cart that was already waiting in the queue of " +
		"one of them, when the first called Lock, still waits there. Just before Lock, a script reads the " +
		"queues of the cart's SKUs (each SKU's list and liveness zset), so those waiters joined before the " +
		"cart did; holding, a second script looks for them. A pair is a cart and one waiter queued before " +
		"it on a SKU they share."
	cartsOrderNote = "holding its lock, each cart appends itself to the holders of each of its SKUs, one SKU " +
		"at a time. Carts that hold all their SKUs during one interval, alone, fit one order across those " +
		"lists; a cycle (cart A before B on one SKU, B before A on another, or longer) would be a cart that " +
		"held its SKUs one after the other. This checks the atomic hold; the arrival order is the FIFO row's."
	cartsDeadlockNote = "a cart's Lock that has not returned after --cart-deadline (%v) counts as deadlocked: " +
		"it gives up, and its buyer reports itself stuck and stops. The multi-lock promises that a request " +
		"waits only for older ones that share a SKU with it, so every Lock returns."
)

// cartStock returns the stock each SKU starts with: about three quarters of what the carts ask
// of one SKU, on average, so that SKUs sell out and some carts are refused.
func cartStock(cfg demoConfig) int {
	size := min(maxCartSKUs, cfg.skus)
	asked := cfg.processes * cfg.buyers * cfg.carts * (1 + size) // twice the units asked in all
	return max(1, asked*3/(8*cfg.skus))
}

// runCarts is the parent side of the carts: it stocks the store, runs the buyers to the end,
// and judges the run.
func runCarts(ctx context.Context, d *demoRun) ([]summaryRow, error) {
	cfg := d.cfg
	name := cfg.name + "-store"
	s, err := openStore(d.client, name, cfg.skus)
	if err != nil {
		return nil, err
	}
	keys := slices.Concat(s.all.Keys(), s.k.all(cfg.skus))
	if err := d.rdb.Del(ctx, keys...).Err(); err != nil {
		return nil, err
	}
	defer d.deleteKeys(ctx, keys)
	stock := cartStock(cfg)
	pairs := make([]any, 0, 2*cfg.skus)
	for i := 1; i <= cfg.skus; i++ {
		pairs = append(pairs, s.k.stock(i), stock)
	}
	if err := d.rdb.MSet(ctx, pairs...).Err(); err != nil {
		return nil, err
	}
	total := cfg.processes * cfg.buyers * cfg.carts
	d.printf("  carts: %d SKUs, names %s to %s (one hash tag), %d units each in stock (keys %s)\n",
		cfg.skus, s.names[0], s.names[cfg.skus-1], stock, s.k.stem+"sku-N:stock")
	d.printf("  %d processes x %d buyers, %s each (%d in all) of 1 to %d SKUs, one multi-lock per cart on its SKUs:\n"+
		"  a cart is bought whole, or refused whole when a SKU is sold out\n",
		cfg.processes, cfg.buyers, plural(cfg.carts, "cart"), total, min(maxCartSKUs, cfg.skus))
	specs := make([]workerSpec, cfg.processes)
	for i := range specs {
		specs[i] = d.spec(roleCarts, name, i+1, cfg.buyers)
		specs[i].Carts, specs[i].SKUs, specs[i].Stock, specs[i].Deadline = cfg.carts, cfg.skus, stock, cfg.cartDeadline
	}
	f, err := d.startFleet(ctx, specs)
	if err != nil {
		return nil, err
	}
	defer f.stop()
	t := &cartTally{total: total, step: max(total/10, 1), width: len(strconv.Itoa(total)), sold: map[int]bool{}}
	for f.live > 0 {
		ev, _, err := f.next(ctx, nil)
		if err != nil {
			return nil, err
		}
		if err := t.take(d, f, ev); err != nil {
			return nil, err
		}
	}
	return cartsVerdict(ctx, d, s, stock, t)
}

// cartTally is what the parent counted from the buyers' events.
type cartTally struct {
	total, done, bought, refused, stuck int
	late                                int
	sizes                               [maxCartSKUs + 1]int
	waits                               []time.Duration
	longest                             string // the cart of the longest wait
	last                                time.Duration
	sold                                map[int]bool // the SKUs reported sold out

	step, width int // carts between two progress lines; the digits of the total
}

// take counts one event of the buyers, reporting progress.
func (t *cartTally) take(d *demoRun, f *fleet, ev workerEvent) error {
	w := ev.words
	switch {
	case w == nil:
		return f.exited(ev.p)
	case w[0] == "cart" && len(w) == 7:
		t.done++
		t.last = time.Since(d.start)
		t.sizes[min(len(strings.Split(w[3], ",")), maxCartSKUs)]++
		wait := micros(w[6])
		if len(t.waits) == 0 || wait > slices.Max(t.waits) {
			t.longest = w[1]
		}
		t.waits = append(t.waits, wait)
		if w[2] == "bought" {
			t.bought++
		} else {
			t.refused++
			for _, s := range strings.Split(w[4], ",") {
				if n, _ := strconv.Atoi(s); !t.sold[n] {
					t.sold[n] = true
					d.progress("SKU %d sold out: cart %s (SKUs %s) refused whole, nothing taken", n, w[1], w[3])
				}
			}
		}
		if n, _ := strconv.Atoi(w[5]); n > 0 {
			t.late += n
			d.progress("FIFO VIOLATION: cart %s held its SKUs while %d carts queued before it on them still wait", w[1], n)
		}
		if t.done%t.step == 0 || t.done == t.total {
			d.progress("cart %*d/%d  %s %s SKUs %s after %v", t.width, t.done, t.total, w[1], w[2], w[3],
				wait.Round(10*time.Microsecond))
		}
	case w[0] == "stuck" && len(w) == 4:
		t.stuck++
		d.progress("STUCK: cart %s (SKUs %s) still waiting for its lock after %v: its buyer stops", w[1], w[2],
			micros(w[3]).Round(time.Millisecond))
	case w[0] == lineDone && len(w) == 2:
		ev.p.done = true
	default:
		return fmt.Errorf("worker %s printed %q", ev.p, strings.Join(w, " "))
	}
	return nil
}

// cartsVerdict judges the carts from what is in Redis, and the tally of the events.
func cartsVerdict(ctx context.Context, d *demoRun, s *cartStore, stock int, t *cartTally) ([]summaryRow, error) {
	cfg := d.cfg
	r, err := readCarts(ctx, d.rdb, s.k, cfg.skus)
	if err != nil {
		return nil, err
	}
	j, err := judgeCarts(r.records, r.holders)
	if err != nil {
		return nil, err
	}
	kept, soldOut, lowest := true, 0, stock
	for i := 1; i <= cfg.skus; i++ {
		kept = kept && r.stock[i]+r.sold[i] == stock && r.sold[i] == j.sold[i]
		lowest = min(lowest, stock-r.sold[i])
		if r.stock[i] == 0 {
			soldOut++
		}
	}
	bought, refused := j.bought, len(r.records)-j.bought
	buyers := cfg.processes * cfg.buyers
	deadlocked := fmt.Sprintf("0: every Lock returned; longest wait %v", longestWait(t.waits))
	if t.stuck > 0 {
		deadlocked = fmt.Sprintf("%d: %s still waiting after %v", t.stuck, plural(t.stuck, "Lock"), cfg.cartDeadline)
	}
	return []summaryRow{
		checkedRow("carts reserved", len(r.records) == t.total && t.done == t.total,
			"%d of %d: %d bought whole, %d refused whole (a SKU sold out), in %v, %d buyers in %d processes",
			len(r.records), t.total, bought, refused, t.last.Round(time.Millisecond), buyers, cfg.processes),
		checkedRow("SKUs oversold", r.oversells == 0 && kept && lowest >= 0,
			"%d (units beyond a SKU's stock); on each of %d SKUs stock + sold = %d, lowest %d; %d sold out",
			r.oversells, cfg.skus, stock, lowest, soldOut),
		checkedRow("SKUs held twice at once", r.overlaps == 0, "%d in %d holds of a SKU", r.overlaps, j.holds),
		checkedRow("carts deadlocked", t.stuck == 0, "%s", deadlocked).withNote(fmt.Sprintf(cartsDeadlockNote, cfg.cartDeadline)),
		checkedRow("FIFO violations among carts", r.violations == 0 && int(r.violations) == t.late,
			"%d in %d carts, %d (cart, cart queued before it on a shared SKU) pairs checked",
			r.violations, len(r.records), r.pairs).withNote(cartsFIFONote),
		checkedRow("carts in one order", j.cyclic == 0 && j.misplaced == 0,
			"%s: the holders of the %d SKUs fit one order of the carts; %d in cycles, %d misplaced",
			yesNo(j.cyclic == 0 && j.misplaced == 0), cfg.skus, j.cyclic, j.misplaced).withNote(cartsOrderNote),
		figureRow("cart sizes", "1 SKU: %d, 2: %d, 3: %d, 4: %d", t.sizes[1], t.sizes[2], t.sizes[3], t.sizes[4]),
		figureRow("longest wait for a cart", "%s", t.longestWait()),
	}, nil
}

// longestWait returns the longest of waits, 0 for none.
func longestWait(waits []time.Duration) time.Duration {
	if len(waits) == 0 {
		return 0
	}
	return slices.Max(waits).Round(10 * time.Microsecond)
}

// longestWait describes the longest wait for a cart's lock.
func (t *cartTally) longestWait() string {
	if len(t.waits) == 0 {
		return "no cart was done"
	}
	longest := slices.Max(t.waits)
	return fmt.Sprintf("%v (cart %s); p50 %v of %d carts", longest.Round(10*time.Microsecond), t.longest,
		quantileOf(slices.Clone(t.waits), 0.5).Round(10*time.Microsecond), len(t.waits))
}

// cartsRead is the store as it is in Redis at the end.
type cartsRead struct {
	stock, sold                            map[int]int // by SKU
	oversells, overlaps, violations, pairs int64
	records                                []string
	holders                                map[int][]string // by SKU
}

// readCarts reads the store's keys (0 for a missing counter).
func readCarts(ctx context.Context, rdb *redis.Client, k cartKeys, skus int) (cartsRead, error) {
	r := cartsRead{stock: map[int]int{}, sold: map[int]int{}, holders: map[int][]string{}}
	get := func(key string) (int64, error) {
		n, err := rdb.Get(ctx, key).Int64()
		if errors.Is(err, redis.Nil) {
			return 0, nil
		}
		return n, err
	}
	var err error
	for key, v := range map[string]*int64{k.oversells(): &r.oversells, k.overlaps(): &r.overlaps,
		k.violations(): &r.violations, k.pairs(): &r.pairs} {
		if *v, err = get(key); err != nil {
			return r, err
		}
	}
	for i := 1; i <= skus; i++ {
		stock, err := get(k.stock(i))
		if err != nil {
			return r, err
		}
		sold, err := get(k.sold(i))
		if err != nil {
			return r, err
		}
		r.stock[i], r.sold[i] = int(stock), int(sold)
		if r.holders[i], err = rdb.LRange(ctx, k.holders(i), 0, -1).Result(); err != nil {
			return r, err
		}
	}
	r.records, err = rdb.LRange(ctx, k.carts(), 0, -1).Result()
	return r, err
}

// cartJudgement is what the cart records and the SKUs' holders show.
type cartJudgement struct {
	bought    int
	sold      map[int]int // units of each SKU in the bought carts
	holds     int         // entries in the holders lists
	misplaced int         // carts missing from the holders of one of their SKUs, or there twice, or there without it
	cyclic    int         // carts on a cycle of the holders' orders
}

// judgeCarts reads the cart records, "<cart> <bought|refused> <SKUs>", and the holders of each
// SKU in order: it counts the bought carts and their units per SKU, checks that each cart is
// among the holders of exactly its SKUs, once, and finds the carts on cycles of the order the
// holders lists give (cart a before cart b when a precedes b in some SKU's list).
func judgeCarts(records []string, holders map[int][]string) (cartJudgement, error) {
	j := cartJudgement{sold: map[int]int{}}
	skusOf := map[string][]int{}
	for _, rec := range records {
		w := lineWords(rec)
		if len(w) != 3 || (w[1] != "bought" && w[1] != "refused") {
			return j, fmt.Errorf("bad cart record %q", rec)
		}
		skus, err := parseSKUs(w[2])
		if err != nil {
			return j, fmt.Errorf("bad cart record %q", rec)
		}
		if _, dup := skusOf[w[0]]; dup {
			j.misplaced++
		}
		skusOf[w[0]] = skus
		if w[1] == "bought" {
			j.bought++
			for _, i := range skus {
				j.sold[i]++
			}
		}
	}
	// Each cart among the holders of its SKUs once, and of no other.
	seen := map[string]int{}
	after := map[string][]string{} // cart -> the carts right after it on some SKU
	before := map[string]int{}     // cart -> how many carts are right before it on some SKU
	for i, list := range holders {
		j.holds += len(list)
		here := map[string]bool{}
		for n, cart := range list {
			seen[cart]++
			if !slices.Contains(skusOf[cart], i) || here[cart] {
				j.misplaced++
			}
			here[cart] = true
			before[cart] += 0 // every holder is a node of the order
			if n > 0 && list[n-1] != cart {
				after[list[n-1]] = append(after[list[n-1]], cart)
				before[cart]++
			}
		}
	}
	for cart, skus := range skusOf {
		if seen[cart] < len(skus) {
			j.misplaced++
		}
	}
	// Kahn's algorithm: whatever cannot be put in order is on a cycle, or after one.
	var ready []string
	for cart, n := range before {
		if n == 0 {
			ready = append(ready, cart)
		}
	}
	ordered := 0
	for len(ready) > 0 {
		cart := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		ordered++
		for _, next := range after[cart] {
			if before[next]--; before[next] == 0 {
				ready = append(ready, next)
			}
		}
	}
	j.cyclic = len(before) - ordered
	return j, nil
}

// parseSKUs parses "1,4,7".
func parseSKUs(s string) ([]int, error) {
	var skus []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad SKU %q", f)
		}
		skus = append(skus, n)
	}
	return skus, nil
}

// joinSKUs formats SKU numbers as "1,4,7".
func joinSKUs(skus []int) string {
	s := make([]string, len(skus))
	for i, n := range skus {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// runCartBuyers is the worker side of the carts.
func runCartBuyers(ctx context.Context, w *worker) error {
	s, err := openStore(w.client, w.spec.Name, w.spec.SKUs)
	if err != nil {
		return err
	}
	b := &cartBuyers{worker: w, store: s}
	return w.runBuyers(func(label string) (int, error) { return b.shop(ctx, label) })
}

// cartBuyers is one process's cart buyers.
type cartBuyers struct {
	*worker
	store *cartStore
}

// shop reserves the buyer's carts one after the other, and returns how many it did. A cart
// whose Lock does not return by the deadline stops it, with no error.
func (b *cartBuyers) shop(ctx context.Context, label string) (int, error) {
	for n := 1; n <= b.spec.Carts; n++ {
		perm := rand.Perm(b.spec.SKUs)[:1+rand.IntN(min(maxCartSKUs, b.spec.SKUs))]
		skus := make([]int, len(perm))
		for i, p := range perm {
			skus[i] = p + 1
		}
		slices.Sort(skus)
		ok, err := b.reserve(ctx, fmt.Sprintf("%s#%d", label, n), skus)
		if err != nil || !ok {
			return n - 1, err
		}
	}
	return b.spec.Carts, nil
}

// reserve takes the cart's multi-lock, buys or refuses the cart, and lets go. It returns false
// when the Lock did not return by the deadline.
func (b *cartBuyers) reserve(ctx context.Context, cart string, skus []int) (bool, error) {
	names := make([]string, len(skus))
	for i, n := range skus {
		names[i] = b.store.names[n-1]
	}
	m, err := multilock.New(b.client, names)
	if err != nil {
		return false, err
	}
	// The SKUs in the order of m's names and keys, which the scripts take.
	order := make([]int, len(m.Names()))
	arrive := make([]string, 0, 2*len(order))
	for j, name := range m.Names() {
		order[j] = b.store.index[name]
		arrive = append(arrive, m.Keys()[3*j+1], m.Keys()[3*j+2])
	}
	queued, err := cartArriveScript.Run(ctx, b.rdb, arrive).Slice()
	if err != nil {
		return false, fmt.Errorf("reading the queues: %w", err)
	}

	// The deadline ends the wait, not the hold: the held context is a child of lctx.
	lctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(b.spec.Deadline, func() { cancel(errCartDeadline) })
	asked := time.Now()
	held, err := m.Lock(lctx)
	wait := time.Since(asked)
	if !timer.Stop() {
		if err == nil {
			_ = m.Unlock(held) // in time, just: but not by the deadline
		}
		b.out.println("stuck", cart, joinSKUs(skus), wait.Microseconds())
		return false, nil
	}
	if err != nil {
		return false, err
	}
	bought, short, late, err := b.buy(held, m, cart, order, queued)
	if uerr := m.Unlock(held); err == nil {
		err = uerr
	}
	if err != nil {
		return false, err
	}
	outcome := "bought"
	if !bought {
		outcome = "refused"
	}
	b.out.println("cart", cart, outcome, joinSKUs(skus), cmp.Or(joinSKUs(short), "-"), late, wait.Microseconds())
	return true, nil
}

// buy runs holding the cart's lock: it marks the SKUs, reads their stock, and if every one has
// a unit left writes one less to each; else it takes nothing. order holds the SKUs in the
// order of m's names. It returns whether it bought, the SKUs found sold out (in SKU order),
// and the FIFO violations found. Every Redis call takes the held context, so it stops as
// soon as the lock is lost.
func (b *cartBuyers) buy(held context.Context, m *multilock.Lock, cart string, order []int, queued []any) (
	bought bool, short []int, late int64, err error) {
	k := b.store.k
	keys := make([]string, 0, 2*len(order)+3)
	for j, i := range order {
		keys = append(keys, m.Keys()[3*j+2], k.holder(i))
	}
	keys = append(keys, k.violations(), k.pairs(), k.overlaps())
	r, err := cartHeldScript.Run(held, b.rdb, keys, append([]any{cart}, queued...)...).Int64Slice()
	if err != nil {
		return false, nil, 0, err
	}
	late = r[0]
	stock := make([]int, len(order))
	for j, i := range order {
		// One SKU at a time: see "Carts with the multi-lock" above.
		if err := b.rdb.RPush(held, k.holders(i), cart).Err(); err != nil {
			return false, nil, 0, err
		}
		if stock[j], err = b.rdb.Get(held, k.stock(i)).Int(); err != nil {
			return false, nil, 0, err
		}
		if stock[j] < 1 {
			short = append(short, i)
		}
	}
	slices.Sort(short)
	time.Sleep(cartWork) // packing the cart
	bought = len(short) == 0
	if bought {
		for j, i := range order {
			if err := b.rdb.Set(held, k.stock(i), stock[j]-1, 0).Err(); err != nil {
				return false, nil, 0, err
			}
		}
	}
	keys = keys[:0]
	for _, i := range order {
		keys = append(keys, k.holder(i), k.sold(i))
	}
	keys = append(keys, k.oversells(), k.carts())
	sorted := slices.Sorted(slices.Values(order))
	outcome, flag := "refused", "0"
	if bought {
		outcome, flag = "bought", "1"
	}
	rec := fmt.Sprintf("%s %s %s", cart, outcome, joinSKUs(sorted))
	if err := cartDoneScript.Run(held, b.rdb, keys, cart, flag, b.spec.Stock, rec).Err(); err != nil {
		return false, nil, 0, err
	}
	return bought, short, late, nil
}
