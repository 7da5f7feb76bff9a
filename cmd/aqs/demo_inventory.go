package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/fair"
)

// Inventory reservation.
//
// The scenario runs in two stages, each with worker processes of its own: carts of several
// SKUs reserved with the multi-lock (demo_carts.go), then single items reserved under one fair
// lock, waiting on its Condition for a restocker's stock (here).
//
// Restocking with a Condition of the fair lock.
//
// Stock is a counter in Redis, written under one fair lock. Buyers in several processes each
// reserve Items items, one at a time: each item is one hold of the lock, in which the buyer
// reads the stock and, while it is 0, waits on the lock's Condition "stock" (which gives the
// lock up); once it finds stock it writes one less and records the reservation. The stock is
// read with a GET and written with a SET, so that two holders at once would show as
// reservations beyond what was restocked. A restocker, in a process of its own, adds stock in
// batches of 1 to Batch items, restockEvery apart, until it has added exactly what the buyers
// want in all: so every buyer finishes, and the stock ends at 0.
//
// Signal per item. Holding the lock, the restocker adds n items and calls Signal up to n
// times, stopping at the first that finds nobody waiting: one waiter woken per item, in the
// order they began to wait, as AQS's ConditionObject does. SignalAll would wake every waiter
// for a batch of one, and all but one would find the stock gone and wait again, at the back.
// No buyer is left waiting while stock is left: a waiter only begins to wait when the stock is
// 0, every item added while buyers wait is paired with a Signal, and a signalled buyer that
// finds the stock taken waits again with the stock at 0.
//
// Order. The Condition promises that waiters take the lock back in the order they began to
// wait: Signal moves the longest waiter onto the tail of the lock's queue, which serves in
// order. Just before each Wait the buyer, holding the lock, takes a wait number (INCR) and
// adds it to a set of pending waits: holding the lock, no other buyer can come between the
// number and the Wait, so the numbers are exactly the condition's order. When Wait returns
// (holding the lock again) the buyer takes its number out of the set, and every smaller number
// still in it is a FIFO violation: a buyer served while one that began to wait before it still
// waits. A buyer that was not waiting may rightly be served first: one that queued on the lock
// (coming back for its next item) before a Signal moved the waiter onto the queue behind it.
// Such a buyer may take the item the Signal was for; the signalled one then finds no stock and
// waits again, with a new number, at the back. Those re-waits are counted, and they are why
// reservations are judged by the number of the Wait they followed, not of a buyer's first Wait
// for the item.
//
// Signal to reservation. Nothing leaves the condition but by a Signal (nothing gives up
// waiting, nor dies), so the j-th Signal that moved a waiter moved wait number j: the
// restocker records the server time of each such Signal in a list, and a woken buyer finds its
// own at index j-1. A wake whose Signal is not there yet woke without one (a spurious wake-up,
// which the Condition allows); it is counted, and its time left out.

// Roles of the inventory reservation.
//
// roleShoppers: Goroutines buyers of Items items each. Events: "woke <buyer> <wait number>
// <late> <stock found>", late being the FIFO violations of the wake; "reserved <buyer> <item>
// <stock left>"; "left <buyer> <items reserved>" when told to stop while waiting; "done
// <reservations>".
//
// roleRestocker: Items items in batches of 1 to Batch, restockEvery apart. Events: "restock
// <items> <stock after> <waiters moved> <waiters left on the condition>"; "done <items>
// <signals that moved a waiter> <signals that found none>".
const (
	roleShoppers  = "shoppers"
	roleRestocker = "restocker"
	// restockEvery is the pause between the restocker's batches: buyers run out in between.
	restockEvery = 60 * time.Millisecond
	// stockCondition is the name of the lock's Condition the buyers wait on.
	stockCondition = "stock"
	// probeEvery is how often the parent looks, once restocking is over, whether a buyer
	// waits while stock is left and nobody is in line to take it (see stuckScript).
	probeEvery = 250 * time.Millisecond
)

// inventoryKeys are the demo's keys of the inventory, in the fair lock's hash slot.
type inventoryKeys struct {
	stock        string // items in stock, written under the lock
	restocked    string // items ever added: the witness of oversells
	reserved     string // items ever reserved
	oversells    string // reservations that found reserved > restocked
	waits        string // the last wait number given
	pending      string // zset of the wait numbers whose Wait has not returned
	violations   string // FIFO violations found
	unsignalled  string // wakes with no Signal recorded for them
	signals      string // list: server ms of each Signal that moved a waiter, in order
	reservations string // list of reservation records, in order
}

func inventoryKeysOf(lock *fair.Lock) inventoryKeys {
	stem := demoKeyStem(lock.Key()) + "inv-"
	return inventoryKeys{stock: stem + "stock", restocked: stem + "restocked", reserved: stem + "reserved",
		oversells: stem + "oversells", waits: stem + "waits", pending: stem + "pending",
		violations: stem + "fifo-violations", unsignalled: stem + "unsignalled", signals: stem + "signals",
		reservations: stem + "reservations"}
}

func (k inventoryKeys) all() []string {
	return []string{k.stock, k.restocked, k.reserved, k.oversells, k.waits, k.pending, k.violations,
		k.unsignalled, k.signals, k.reservations}
}

// serverMs is the Lua that sets now to the server's time in ms: every time of the scenario
// is the server's, one clock for every process.
const serverMs = `local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
`

// waitNumberScript gives a buyer about to Wait its wait number and marks the wait pending.
//
// KEYS[1] the wait numbers' counter, KEYS[2] the pending zset. Reply: {number, now ms}.
var waitNumberScript = redis.NewScript(serverMs + `
local n = redis.call('INCR', KEYS[1])
redis.call('ZADD', KEYS[2], n, n)
return {n, now}
`)

// wokeScript runs when a buyer's Wait has returned, holding the lock: it ends the wait's
// pending mark, counts the earlier waits still pending as FIFO violations, and finds the time
// of the Signal that moved this wait.
//
// KEYS[1] the pending zset, KEYS[2] the violations counter, KEYS[3] the signals list, KEYS[4]
// the unsignalled counter. ARGV[1] the wait number. Reply: {late, signal ms or -1}.
var wokeScript = redis.NewScript(`
redis.call('ZREM', KEYS[1], ARGV[1])
local late = redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. ARGV[1])
if late > 0 then
  redis.call('INCRBY', KEYS[2], late)
end
local signal = redis.call('LINDEX', KEYS[3], tonumber(ARGV[1]) - 1)
if not signal then
  redis.call('INCR', KEYS[4])
  return {late, -1}
end
return {late, tonumber(signal)}
`)

// reserveScript records a reservation, made holding the lock, and checks it against the
// witness: never more reserved than restocked.
//
// KEYS[1] the reserved counter, KEYS[2] the restocked counter, KEYS[3] the oversells counter,
// KEYS[4] the reservations list. ARGV[1] the record, to which the server time is appended.
// Reply: {items reserved in all, 1 if oversold}.
var reserveScript = redis.NewScript(serverMs + `
local r = redis.call('INCR', KEYS[1])
local over = 0
if r > tonumber(redis.call('GET', KEYS[2]) or '0') then
  over = 1
  redis.call('INCR', KEYS[3])
end
redis.call('RPUSH', KEYS[4], ARGV[1] .. ' ' .. now)
return {r, over}
`)

// signalledScript records the time of a Signal that moved a waiter. KEYS[1] the signals list.
var signalledScript = redis.NewScript(serverMs + `
return redis.call('RPUSH', KEYS[1], now)
`)

// stuckScript reads, for a holder of the lock, the stock and who waits: a buyer left waiting
// while stock is left is one on the condition while nobody waits on the lock's queue (where
// the signalled ones are) to take that stock.
//
// KEYS[1] the stock, KEYS[2] the condition's deadline zset, KEYS[3] the lock's. Reply: {stock,
// live waiters on the condition, live waiters on the lock's queue}.
var stuckScript = redis.NewScript(serverMs + `
return {tonumber(redis.call('GET', KEYS[1]) or '0'),
  redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf'),
  redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf')}
`)

// Notes of the summary.
const (
	inventoryFIFONote = "a buyer whose Wait on the condition returns (it has the lock back) while a " +
		"buyer that began to wait before it still waits. Each buyer takes a wait number just before its " +
		"Wait, holding the lock, so the numbers are the condition's order; the reservations that follow " +
		"a Wait must be in the order of those numbers too. A buyer that was not waiting (back for its " +
		"next item, queued on the lock before a Signal moved a waiter behind it) may rightly be served " +
		"first, and is not judged."
	firstWaitNote = "a buyer that waited again (a re-wait, see above) is judged here by its first Wait for " +
		"the item: it may rightly be overtaken by buyers that began to wait after that one but before " +
		"its second."
	rewaitNote = "a re-wait is that of a signalled buyer that found the stock taken by a buyer queued " +
		"on the lock ahead of it, and waited again, at the back; a reservation is judged by the Wait it " +
		"followed."
	leftWaitingNote = "once restocking is over, the parent takes the lock at once and then every %v, " +
		"and looks: buyers on the condition while stock is left and nobody is on the lock's queue to " +
		"take it would wait forever; it then stops the buyers and counts them."
)

// runInventory runs the inventory's two stages, the carts and the restocking, and returns the
// rows of both.
func runInventory(ctx context.Context, d *demoRun) ([]summaryRow, error) {
	carts, err := runCarts(ctx, d)
	if err != nil {
		return nil, err
	}
	restock, err := runRestock(ctx, d)
	if err != nil {
		return nil, err
	}
	return append(carts, restock...), nil
}

// runRestock is the parent side of the restocking: it sets the stock up, runs the buyers and
// the restocker to the end, probing for buyers left waiting once restocking is over, and
// judges the run.
func runRestock(ctx context.Context, d *demoRun) ([]summaryRow, error) {
	name := d.cfg.name + "-inventory"
	lock, err := fair.New(d.client, name)
	if err != nil {
		return nil, err
	}
	cond, err := lock.NewCondition(stockCondition)
	if err != nil {
		return nil, err
	}
	k := inventoryKeysOf(lock)
	keys := slices.Concat(lock.Keys(), cond.Keys(), k.all())
	if err := d.rdb.Del(ctx, keys...).Err(); err != nil {
		return nil, err
	}
	defer d.deleteKeys(ctx, keys)
	if err := setUpInventory(ctx, d, lock, name, k); err != nil {
		return nil, err
	}
	f, err := d.startFleet(ctx, inventorySpecs(d, name))
	if err != nil {
		return nil, err
	}
	defer f.stop()
	buyers := d.cfg.processes * d.cfg.buyers
	iw := newInventoryWatch(d, f, lock, cond, k, inventoryTally{total: buyers * d.cfg.items, buyers: buyers})
	if err := iw.run(ctx); err != nil {
		return nil, err
	}
	return inventoryVerdict(ctx, d, k, iw.t)
}

// setUpInventory sets the stock and the restocked witness to 0, and says what the run will do.
func setUpInventory(ctx context.Context, d *demoRun, lock *fair.Lock, name string, k inventoryKeys) error {
	cfg := d.cfg
	if err := d.rdb.MSet(ctx, k.stock, 0, k.restocked, 0).Err(); err != nil {
		return err
	}
	total := cfg.processes * cfg.buyers * cfg.items
	d.printf("  restocking: stock 0 (key %s); fair lock %q (key %s), its condition %q\n", k.stock, name, lock.Key(), stockCondition)
	d.printf("  %d processes x %d buyers, %s each, one a hold: while the stock is 0, wait on the condition\n",
		cfg.processes, cfg.buyers, plural(cfg.items, "item"))
	d.printf("  a restocker (one more process) adds %d items in batches of 1 to %d, every %v, with a Signal per item\n",
		total, cfg.batch, restockEvery)
	return nil
}

// inventorySpecs returns the inventory's worker processes: the buyers' processes, then the
// restocker, last, which adds what the buyers want in all.
func inventorySpecs(d *demoRun, name string) []workerSpec {
	cfg := d.cfg
	specs := make([]workerSpec, cfg.processes+1)
	for i := range cfg.processes {
		specs[i] = d.spec(roleShoppers, name, i+1, cfg.buyers)
		specs[i].Items = cfg.items
	}
	specs[cfg.processes] = d.spec(roleRestocker, name, cfg.processes+1, 1)
	specs[cfg.processes].Items, specs[cfg.processes].Batch = cfg.processes*cfg.buyers*cfg.items, cfg.batch
	return specs
}

// inventoryWatch is the parent reading the inventory's events: it tallies them, reports
// progress, and, once restocking is over, probes for buyers left waiting.
type inventoryWatch struct {
	d    *demoRun
	f    *fleet
	lock *fair.Lock
	cond *fair.Condition
	k    inventoryKeys
	t    inventoryTally

	step, width int          // reservations between two progress lines; the digits of the total
	restocked   bool         // the restocker's done line came
	stopped     bool         // the probe found buyers left waiting, and stopped the buyers
	ticker      *time.Ticker // the probe's, from the restocker's done line
}

func newInventoryWatch(d *demoRun, f *fleet, lock *fair.Lock, cond *fair.Condition, k inventoryKeys,
	t inventoryTally) *inventoryWatch {
	return &inventoryWatch{d: d, f: f, lock: lock, cond: cond, k: k, t: t,
		step: max(t.total/10, 1), width: len(strconv.Itoa(t.total))}
}

// run reads the events until every process has exited.
func (iw *inventoryWatch) run(ctx context.Context) error {
	defer func() {
		if iw.ticker != nil {
			iw.ticker.Stop()
		}
	}()
	for iw.f.live > 0 {
		var tick <-chan time.Time
		if iw.ticker != nil {
			tick = iw.ticker.C
		}
		ev, ticked, err := iw.f.next(ctx, tick)
		if err != nil {
			return err
		}
		if ticked {
			err = iw.look(ctx)
		} else {
			err = iw.take(ctx, ev)
		}
		if err != nil {
			return err
		}
	}
	if !iw.restocked {
		return errors.New("the restocker ended without its done line")
	}
	return nil
}

// take counts one event of the inventory's workers, reporting progress.
func (iw *inventoryWatch) take(ctx context.Context, ev workerEvent) error {
	d, t, w := iw.d, &iw.t, ev.words
	switch {
	case w == nil:
		return iw.f.exited(ev.p)
	case w[0] == "restock" && len(w) == 5:
		t.restocks++
		m, _ := strconv.Atoi(w[3])
		d.progress("restock +%s -> stock %s, %s signalled, %s still waiting", w[1], w[2], plural(m, "waiter"), w[4])
	case w[0] == "woke" && len(w) == 5:
		t.wakes++
		if w[4] == "0" {
			t.rewaits++
		}
		if n, _ := strconv.Atoi(w[3]); n > 0 {
			t.late += n
			d.progress("FIFO VIOLATION: %s (wait %s) woke while %d buyers that began to wait before it still wait",
				w[1], w[2], n)
		}
	case w[0] == "reserved" && len(w) == 4:
		t.reserved++
		t.last = time.Since(d.start)
		if t.reserved%iw.step == 0 || t.reserved == t.total {
			d.progress("reserved %*d/%d  item %s by buyer %s, stock %s", iw.width, t.reserved, t.total, w[2], w[1], w[3])
		}
	case w[0] == "left" && len(w) == 3:
		d.progress("buyer %s left waiting with %s of %s", w[1], w[2], plural(d.cfg.items, "item"))
	case w[0] == lineDone && ev.p.role == roleRestocker && len(w) == 4:
		ev.p.done, iw.restocked = true, true
		t.empty, _ = strconv.Atoi(w[3])
		if iw.ticker != nil {
			iw.ticker.Stop()
		}
		iw.ticker = time.NewTicker(probeEvery)
		return iw.look(ctx) // once at once: the buyers may all be done by the first tick
	case w[0] == lineDone:
		ev.p.done = true
	default:
		return fmt.Errorf("worker %s printed %q", ev.p, strings.Join(w, " "))
	}
	return nil
}

// look probes for buyers left waiting with stock left, and stops the buyers when it finds
// some: they would wait forever.
func (iw *inventoryWatch) look(ctx context.Context) error {
	if iw.stopped {
		return nil // found already
	}
	n, left, err := probeStuck(ctx, iw.d.rdb, iw.lock, iw.cond, iw.k)
	if err != nil {
		return err
	}
	iw.t.probes++
	if n > 0 {
		iw.t.leftWaiting, iw.t.stockLeft, iw.stopped = n, left, true
		iw.d.progress("STUCK: %d buyers wait on the condition with %d items in stock and nobody in line: stopping them",
			n, left)
		iw.f.broadcast(lineStop)
	}
	return nil
}

// probeStuck takes the lock and looks whether buyers wait on the condition while stock is left
// and nobody is on the lock's queue: it returns how many, and the stock.
func probeStuck(ctx context.Context, rdb *redis.Client, lock *fair.Lock, cond *fair.Condition, k inventoryKeys) (waiting, stock int, err error) {
	held, err := lock.Lock(ctx)
	if err != nil {
		return 0, 0, err
	}
	r, err := stuckScript.Run(held, rdb, []string{k.stock, cond.Keys()[1], lock.Keys()[2]}).Int64Slice()
	if uerr := lock.Unlock(held); err == nil {
		err = uerr
	}
	if err != nil {
		return 0, 0, err
	}
	if r[0] > 0 && r[1] > 0 && r[2] == 0 {
		return int(r[1]), int(r[0]), nil
	}
	return 0, int(r[0]), nil
}

// inventoryTally is what the parent counted from the workers' events.
type inventoryTally struct {
	total, buyers                  int
	reserved, wakes, rewaits, late int
	restocks, empty                int
	leftWaiting, stockLeft, probes int
	last                           time.Duration
}

// inventoryVerdict judges the run from what is in Redis, and the tally of the events.
func inventoryVerdict(ctx context.Context, d *demoRun, k inventoryKeys, t inventoryTally) ([]summaryRow, error) {
	cfg := d.cfg
	counters, records, signals, err := readInventory(ctx, d.rdb, k)
	if err != nil {
		return nil, err
	}
	stock, restocked, reserved := counters[k.stock], counters[k.restocked], counters[k.reserved]
	rs, err := judgeReservations(records)
	if err != nil {
		return nil, err
	}
	violations := counters[k.violations]
	inStock := t.stockLeft // when the probe found buyers stuck; else at the end
	if t.leftWaiting == 0 {
		inStock = stock
	}
	return []summaryRow{
		checkedRow("items reserved", reserved == t.total && restocked == t.total && stock == 0 && len(records) == reserved,
			"%d of %d restocked, %d in stock, in %v, %d buyers in %d processes", reserved, restocked, stock,
			t.last.Round(time.Millisecond), t.buyers, cfg.processes),
		checkedRow("oversold", counters[k.oversells] == 0 && reserved+stock == restocked,
			"%d (beyond the restocked); %d reserved + %d in stock = %d restocked",
			counters[k.oversells], reserved, stock, restocked),
		checkedRow("FIFO violations among waiters", violations == 0 && violations == t.late && rs.byLast.overtaken == 0,
			"%d in %d wakes; %d of %d reservations out of the order of their Waits",
			violations, t.wakes, rs.byLast.overtaken, rs.byLast.seen).withNote(inventoryFIFONote),
		checkedRow("left waiting with stock", t.leftWaiting == 0,
			"%d buyers, %d items in stock; %s after the last restock", t.leftWaiting, inStock, plural(t.probes, "look")).withNote(fmt.Sprintf(leftWaitingNote, probeEvery)),
		figureRow("waits on the condition", "%d, of which %d re-waits; %d woke without a Signal", counters[k.waits],
			t.rewaits, counters[k.unsignalled]).withNote(rewaitNote),
		figureRow("reserved in wait order", "%s; by the first Wait for the item, %d of %d overtaken",
			yesNo(rs.byFirst.overtaken == 0), rs.byFirst.overtaken, rs.byFirst.seen).withNote(firstWaitNote),
		figureRow("signals", "%d moved a waiter, %d found none, in %d restocks (Signal per item)", signals, t.empty,
			t.restocks),
		figureRow("longest wait for stock", "%s", rs.longest(len(records))),
		figureRow("Signal to reservation", "%s", rs.latency()),
	}, nil
}

// readInventory reads the inventory's counters (0 for a missing one), its reservation records
// and the number of Signals that moved a waiter.
func readInventory(ctx context.Context, rdb *redis.Client, k inventoryKeys) (counters map[string]int, records []string,
	signals int64, err error) {
	counters = map[string]int{}
	for _, key := range []string{k.stock, k.restocked, k.reserved, k.oversells, k.waits, k.violations, k.unsignalled} {
		n, err := rdb.Get(ctx, key).Int()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, nil, 0, err
		}
		counters[key] = n
	}
	if records, err = rdb.LRange(ctx, k.reservations, 0, -1).Result(); err != nil {
		return nil, nil, 0, err
	}
	if signals, err = rdb.LLen(ctx, k.signals).Result(); err != nil {
		return nil, nil, 0, err
	}
	return counters, records, signals, nil
}

// reservationStats is what the reservation records show about the waits.
type reservationStats struct {
	waited      []time.Duration // from a reservation's first Wait for its item, for those that waited
	afterSignal []time.Duration // from the Signal that moved a reservation's Wait, for those it did
	longestBy   string          // the buyer of the longest wait
	byFirst     overtaking      // by the numbers of the first Wait for the item
	byLast      overtaking      // by the numbers of the last
}

// judgeReservations reads the reservation records. Each record: "<buyer> <item> <first wait
// ms or -1> <first wait number or 0> <wait number or 0> <signal ms or -1> <reservation ms>",
// in the order of the reservations. A reservation is overtaken, by the numbers of the first or
// of the last Wait for its item, when one made before it had a higher number.
func judgeReservations(records []string) (reservationStats, error) {
	var rs reservationStats
	for _, rec := range records {
		w := lineWords(rec)
		if len(w) != 7 {
			return rs, fmt.Errorf("bad reservation record %q", rec)
		}
		var v [5]int64
		for i, s := range w[2:] {
			var err error
			if v[i], err = strconv.ParseInt(s, 10, 64); err != nil {
				return rs, fmt.Errorf("bad reservation record %q", rec)
			}
		}
		first, signal, at := v[0], v[3], v[4]
		rs.byFirst.see(v[1])
		rs.byLast.see(v[2])
		if first >= 0 {
			dur := time.Duration(at-first) * time.Millisecond
			if len(rs.waited) == 0 || dur > slices.Max(rs.waited) {
				rs.longestBy = w[0]
			}
			rs.waited = append(rs.waited, dur)
		}
		if signal >= 0 {
			rs.afterSignal = append(rs.afterSignal, time.Duration(at-signal)*time.Millisecond)
		}
	}
	return rs, nil
}

// longest describes the longest wait for stock, out of the given number of reservations.
func (rs reservationStats) longest(records int) string {
	if len(rs.waited) == 0 {
		return "none waited"
	}
	return fmt.Sprintf("%v (buyer %s); %d of %d reservations waited, p50 %v", slices.Max(rs.waited), rs.longestBy,
		len(rs.waited), records, quantileOf(rs.waited, 0.5))
}

// latency describes the time from a Signal to the reservation it led to.
func (rs reservationStats) latency() string {
	if len(rs.afterSignal) == 0 {
		return "no reservation followed a Signal"
	}
	return fmt.Sprintf("p50 %v, p99 %v, max %v (%d reservations)", quantileOf(rs.afterSignal, 0.5),
		quantileOf(rs.afterSignal, 0.99), slices.Max(rs.afterSignal), len(rs.afterSignal))
}

// overtaking counts, in a sequence of wait numbers (0 for none), those that come after a higher
// one.
type overtaking struct {
	highest, seen, overtaken int64
}

func (o *overtaking) see(n int64) {
	if n <= 0 {
		return
	}
	o.seen++
	if n < o.highest {
		o.overtaken++
	}
	o.highest = max(o.highest, n)
}

// quantileOf returns the q-quantile of ds, which it sorts.
func quantileOf(ds []time.Duration, q float64) time.Duration {
	slices.Sort(ds)
	i := int(q*float64(len(ds)) + 0.5)
	return ds[min(max(i-1, 0), len(ds)-1)]
}

// openInventory returns the worker's lock and its condition of stock.
func openInventory(w *worker) (*fair.Lock, *fair.Condition, error) {
	lock, err := fair.New(w.client, w.spec.Name)
	if err != nil {
		return nil, nil, err
	}
	cond, err := lock.NewCondition(stockCondition)
	if err != nil {
		return nil, nil, err
	}
	return lock, cond, nil
}

// runShoppers is the worker side of the buyers.
func runShoppers(ctx context.Context, w *worker) error {
	lock, cond, err := openInventory(w)
	if err != nil {
		return err
	}
	s := &shoppers{worker: w, lock: lock, cond: cond, keys: inventoryKeysOf(lock)}
	return w.runBuyers(s.shop)
}

// shoppers is one process's buyers.
type shoppers struct {
	*worker
	lock *fair.Lock
	cond *fair.Condition
	keys inventoryKeys
}

// shop reserves the buyer's items one at a time, and returns how many it reserved. Told to
// stop while it waits, it says so and returns with no error.
func (s *shoppers) shop(label string) (int, error) {
	for item := 1; item <= s.spec.Items; item++ {
		// The stop context bounds every wait: the hold's, and so the Wait's (see Condition.Wait).
		held, err := s.lock.Lock(s.stop)
		if err == nil {
			held, err = s.reserve(held, label, item)
			if err != nil && held != nil {
				_ = s.lock.Unlock(held) // best effort: the run failed already
			}
		}
		if err != nil {
			if s.stop.Err() != nil {
				s.out.println("left", label, item-1)
				return item - 1, nil
			}
			return item - 1, err
		}
		if err := s.lock.Unlock(held); err != nil {
			return item, err
		}
	}
	return s.spec.Items, nil
}

// reserve runs holding the lock: while the stock is 0 it waits on the condition, then takes
// one item. It returns the held context of the hold it ends in. Every Redis call takes the held
// context, so it stops as soon as the lock is lost.
func (s *shoppers) reserve(held context.Context, label string, item int) (context.Context, error) {
	k := s.keys
	first, firstNumber, number, signal, late := int64(-1), int64(0), int64(0), int64(-1), int64(0)
	for {
		stock, err := s.rdb.Get(held, k.stock).Int()
		if err != nil {
			return held, err
		}
		if number > 0 {
			s.out.println("woke", label, number, late, stock)
		}
		if stock > 0 {
			// A GET then a SET: see "Inventory reservation" above.
			if err := s.rdb.Set(held, k.stock, stock-1, 0).Err(); err != nil {
				return held, err
			}
			rec := fmt.Sprintf("%s %d %d %d %d %d", label, item, first, firstNumber, number, signal)
			if err := reserveScript.Run(held, s.rdb, []string{k.reserved, k.restocked, k.oversells, k.reservations}, rec).Err(); err != nil {
				return held, err
			}
			s.out.println("reserved", label, item, stock-1)
			return held, nil
		}
		r, err := waitNumberScript.Run(held, s.rdb, []string{k.waits, k.pending}).Int64Slice()
		if err != nil {
			return held, err
		}
		number = r[0]
		if first < 0 {
			first, firstNumber = r[1], number
		}
		if held, err = s.cond.Wait(held); err != nil {
			return held, err
		}
		r, err = wokeScript.Run(held, s.rdb, []string{k.pending, k.violations, k.signals, k.unsignalled}, number).Int64Slice()
		if err != nil {
			return held, err
		}
		late, signal = r[0], r[1]
	}
}

// runRestocker is the worker side of the restocker.
func runRestocker(ctx context.Context, w *worker) error {
	lock, cond, err := openInventory(w)
	if err != nil {
		return err
	}
	k := inventoryKeysOf(lock)
	moved, empty := 0, 0
	for added := 0; added < w.spec.Items; {
		time.Sleep(restockEvery) // the pace of deliveries: buyers run out in between
		n := min(1+rand.IntN(w.spec.Batch), w.spec.Items-added)
		held, err := lock.Lock(ctx)
		if err != nil {
			return err
		}
		stock, m, e, waiting, err := restock(held, w, cond, k, n)
		if uerr := lock.Unlock(held); err == nil {
			err = uerr
		}
		if err != nil {
			return err
		}
		added += n
		moved, empty = moved+m, empty+e
		w.out.println("restock", n, stock, m, waiting)
	}
	w.out.println(lineDone, w.spec.Items, moved, empty)
	return nil
}

// restock adds n items, holding the lock, and signals the condition once per item until a
// Signal finds nobody waiting. It returns the stock after, the waiters moved, the Signals that
// found none (0 or 1), and the waiters left on the condition.
func restock(held context.Context, w *worker, cond *fair.Condition, k inventoryKeys, n int) (stock, moved, empty int, waiting int64, err error) {
	// The witness first: a reservation of these items can never find it behind.
	if err := w.rdb.IncrBy(held, k.restocked, int64(n)).Err(); err != nil {
		return 0, 0, 0, 0, err
	}
	if stock, err = w.rdb.Get(held, k.stock).Int(); err != nil {
		return 0, 0, 0, 0, err
	}
	stock += n
	if err := w.rdb.Set(held, k.stock, stock, 0).Err(); err != nil {
		return 0, 0, 0, 0, err
	}
	for range n {
		ok, err := cond.Signal(held)
		if err != nil {
			return 0, 0, 0, 0, err
		}
		if !ok {
			empty = 1
			break
		}
		moved++
		if err := signalledScript.Run(held, w.rdb, []string{k.signals}).Err(); err != nil {
			return 0, 0, 0, 0, err
		}
	}
	waiting, err = w.rdb.ZCard(held, cond.Keys()[1]).Result()
	return stock, moved, empty, waiting, err
}
