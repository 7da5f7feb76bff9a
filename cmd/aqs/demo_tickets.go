package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/fair"
)

// Ticket sales with the fair lock.
//
// A fixed number of tickets is on sale: a counter of tickets left in Redis. Buyers in several
// processes, all on one fair lock, come back again and again until the tickets are sold out.
// Each visit, a buyer takes a queue number (INCR of a counter), calls Lock, and holding the
// lock reads the tickets left with a GET and, if any is left, writes one less with a SET and
// records the sale in a list, in the order of the sales: a GET then a SET, so that two buyers
// inside at once would sell the same ticket twice, and more tickets than there are.
//
// FIFO violations. The fair lock serves waiters in the order their attempts reached Redis, and
// that moment is inside Lock, not visible to the buyer: a buyer's queue number is taken just
// before Lock, and another buyer with a later number may reach the queue first, and then
// rightly be served first. So the numbers alone cannot judge the order. What can: the moment
// a buyer takes its number, the same script reads the fair queue itself (the lock's list
// KEYS q, in arrival order, and its liveness zset d) and returns the waiters queued at that
// moment. Each of them reached the queue before this buyer's Lock was even called, so each must
// be served before it. When the buyer is served (holding the lock), a second script looks for
// them in the queue: every one still waiting there is a FIFO violation. Nothing in the demo
// gives up waiting, so a waiter leaves the queue only by being served (a waiter dropped as
// dead would re-queue with a new member, which is not looked for, so it cannot count falsely).
// The check holds every pair it looks at, and it looks at many: about every buyer queued ahead
// of every visit.

// roleBuyers is the role of a ticket-sales worker process: Goroutines buyers.
//
// Events: "sold <ticket> <queue number> <buyer> <late> <queued>", where late is how many
// waiters queued before the buyer took its number still wait (FIFO violations) and queued how
// many wait now; "soldout <buyer> <late>" when the buyer found none left, after which it stops;
// "done <sales>".
const roleBuyers = "buyers"

// ticketKeys are the demo's keys of the sale, in the fair lock's hash slot.
type ticketKeys struct {
	left       string // tickets left
	numbers    string // the last queue number given
	sales      string // list of "<ticket> <queue number> <buyer>", in the order of the sales
	violations string // FIFO violations found
	pairs      string // (served buyer, waiter queued before it) pairs checked
}

func ticketKeysOf(lock *fair.Lock) ticketKeys {
	stem := demoKeyStem(lock.Key())
	return ticketKeys{left: stem + "left", numbers: stem + "numbers", sales: stem + "sales",
		violations: stem + "fifo-violations", pairs: stem + "fifo-pairs"}
}

func (k ticketKeys) all() []string {
	return []string{k.left, k.numbers, k.sales, k.violations, k.pairs}
}

// demoKeyStem returns "aqs-demo:{tag}:" for a primitive's key "aqs:{tag}…": the demo's own keys
// are in the primitive's hash slot, for the scripts that read both, yet apart from the keys
// aqs owns.
func demoKeyStem(primitiveKey string) string {
	tag := primitiveKey
	if i := strings.IndexByte(tag, '{'); i >= 0 {
		tag = tag[i:]
		if j := strings.IndexByte(tag, '}'); j >= 0 {
			tag = tag[:j+1]
		}
	}
	return "aqs-demo:" + tag + ":"
}

// arriveScript gives a buyer its queue number and the fair queue as it is at that moment.
//
// KEYS[1] the queue numbers' counter, KEYS[2] the fair lock's queue list, KEYS[3] its liveness
// zset (member -> deadline, server ms). Reply: {number, the members of the live waiters, in
// queue order}.
var arriveScript = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local reply = {n}
for _, m in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
  local s = redis.call('ZSCORE', KEYS[3], m)
  if s and tonumber(s) > now then
    reply[#reply + 1] = m
  end
end
return reply
`)

// servedScript checks, for a buyer holding the lock, that no waiter queued before it took its
// number still waits, and records the sale.
//
// KEYS[1] the fair lock's liveness zset, KEYS[2] the violations counter, KEYS[3] the pairs
// counter, KEYS[4] the sales list. ARGV[1] the sale's record, "" for none; ARGV[2...] the
// members arriveScript returned. Reply: {members still waiting (violations), waiters now}.
var servedScript = redis.NewScript(`
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local late = 0
for i = 2, #ARGV do
  local s = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if s and tonumber(s) > now then
    late = late + 1
  end
end
redis.call('INCRBY', KEYS[3], #ARGV - 1)
if late > 0 then
  redis.call('INCRBY', KEYS[2], late)
end
if ARGV[1] ~= '' then
  redis.call('RPUSH', KEYS[4], ARGV[1])
end
return {late, redis.call('ZCARD', KEYS[1])}
`)

// fifoNote defines a FIFO violation for the summary.
const fifoNote = "a buyer served (given the lock) while a buyer that was already waiting in the fair queue " +
	"when the first took its queue number (just before its Lock) still waits. The queue is read in Redis, " +
	"the lock's list %s and its liveness zset; the numbers alone cannot judge, see the next note."

// runTickets is the parent side of the ticket sales: it puts the tickets on sale, runs the
// buyers until they are sold out, and judges the sales from Redis.
func runTickets(ctx context.Context, d *demoRun) ([]summaryRow, error) {
	name := d.cfg.name + "-tickets"
	lock, err := fair.New(d.client, name)
	if err != nil {
		return nil, err
	}
	k := ticketKeysOf(lock)
	keys := append(lock.Keys(), k.all()...)
	if err := d.rdb.Del(ctx, keys...).Err(); err != nil {
		return nil, err
	}
	defer d.deleteKeys(ctx, keys)
	if err := setUpTickets(ctx, d, lock, name, k); err != nil {
		return nil, err
	}
	f, err := d.startFleet(ctx, ticketSpecs(d, name))
	if err != nil {
		return nil, err
	}
	defer f.stop()
	t, err := watchTickets(ctx, d, f)
	if err != nil {
		return nil, err
	}
	return ticketsVerdict(ctx, d, lock, k, t)
}

// setUpTickets puts the tickets on sale and says what the run will do.
func setUpTickets(ctx context.Context, d *demoRun, lock *fair.Lock, name string, k ticketKeys) error {
	cfg := d.cfg
	if err := d.rdb.Set(ctx, k.left, cfg.tickets, 0).Err(); err != nil {
		return err
	}
	d.printf("  %d tickets (key %s); fair lock %q (key %s)\n", cfg.tickets, k.left, name, lock.Key())
	d.printf("  %d processes x %d buyers: each visit takes a queue number, waits for the lock, sells one ticket\n",
		cfg.processes, cfg.buyers)
	return nil
}

// ticketSpecs returns the buyers' processes.
func ticketSpecs(d *demoRun, name string) []workerSpec {
	specs := make([]workerSpec, d.cfg.processes)
	for i := range specs {
		specs[i] = d.spec(roleBuyers, name, i+1, d.cfg.buyers)
		specs[i].Tickets = d.cfg.tickets
	}
	return specs
}

// ticketTally is what the buyers reported.
type ticketTally struct {
	sold, away, late int
	lastSale         time.Duration // since the start

	step, width int // sales between two progress lines; the digits of the tickets
}

// watchTickets reads the buyers' events until every process has exited, and returns their
// tally.
func watchTickets(ctx context.Context, d *demoRun, f *fleet) (*ticketTally, error) {
	t := &ticketTally{step: max(d.cfg.tickets/10, 1), width: len(strconv.Itoa(d.cfg.tickets))}
	for f.live > 0 {
		ev, _, err := f.next(ctx, nil)
		if err != nil {
			return nil, err
		}
		if err := t.take(d, f, ev); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// take counts one event of the buyers, reporting progress.
func (t *ticketTally) take(d *demoRun, f *fleet, ev workerEvent) error {
	w := ev.words
	switch {
	case w == nil:
		return f.exited(ev.p)
	case w[0] == "sold" && len(w) == 6:
		t.sold++
		t.lastSale = time.Since(d.start)
		if n, _ := strconv.Atoi(w[4]); n > 0 {
			t.late += n
			d.progress("FIFO VIOLATION: %s served while %d buyers queued before it still wait", w[3], n)
		}
		if t.sold%t.step == 0 || t.sold == d.cfg.tickets {
			d.progress("sold %*d/%d  ticket %s to buyer %s (queue number %s), %s waiting",
				t.width, t.sold, d.cfg.tickets, w[1], w[3], w[2], w[5])
		}
	case w[0] == "soldout" && len(w) == 3:
		if t.away == 0 {
			d.progress("sold out: the buyers still queued find no ticket left and go home")
		}
		t.away++
		if n, _ := strconv.Atoi(w[2]); n > 0 {
			t.late += n
			d.progress("FIFO VIOLATION: %s served while %d buyers queued before it still wait", w[1], n)
		}
	case w[0] == lineDone:
		ev.p.done = true
	default:
		return fmt.Errorf("worker %s printed %q", ev.p, strings.Join(w, " "))
	}
	return nil
}

// ticketsVerdict judges the sales. The verdict comes from Redis, not from the workers' word.
func ticketsVerdict(ctx context.Context, d *demoRun, lock *fair.Lock, k ticketKeys, t *ticketTally) ([]summaryRow, error) {
	cfg := d.cfg
	sales, left, violations, pairs, err := readTicketSales(ctx, d.rdb, k)
	if err != nil {
		return nil, err
	}
	distinct, overtaken, err := judgeSales(sales)
	if err != nil {
		return nil, err
	}
	oversold := max(0, len(sales)-cfg.tickets)
	twice := len(sales) - distinct
	buyers := cfg.processes * cfg.buyers
	return []summaryRow{
		checkedRow("tickets sold", len(sales) == cfg.tickets && left == 0,
			"%d of %d, %d left, in %v (%.0f/s), %d buyers in %d processes", len(sales), cfg.tickets, left,
			t.lastSale.Round(time.Millisecond), perSecond(int64(len(sales)), t.lastSale), buyers, cfg.processes),
		checkedRow("oversold", oversold == 0 && twice == 0, "%d (sales beyond the tickets), %d tickets sold twice",
			oversold, twice),
		checkedRow("FIFO violations", violations == 0 && int(violations) == t.late,
			"%d in %d visits, %d (served, queued before) pairs checked", violations, len(sales)+t.away, pairs).withNote(fmt.Sprintf(fifoNote, lock.Keys()[1])),
		figureRow("sold in arrival order", "%s; by queue number, %d of %d sales overtaken", yesNo(violations == 0),
			overtaken, len(sales)).withNote("a buyer takes its number, then calls Lock; a buyer with a later " +
			"number may reach the queue first, and is then rightly served first: an overtaken sale is one made " +
			"after a sale with a later number."),
	}, nil
}

// readTicketSales reads the sale records, the tickets left, and the FIFO violations and the
// pairs checked (0 for a missing counter).
func readTicketSales(ctx context.Context, rdb *redis.Client, k ticketKeys) (sales []string, left int,
	violations, pairs int64, err error) {
	if sales, err = rdb.LRange(ctx, k.sales, 0, -1).Result(); err != nil {
		return nil, 0, 0, 0, err
	}
	if left, err = rdb.Get(ctx, k.left).Int(); err != nil {
		return nil, 0, 0, 0, err
	}
	for key, v := range map[string]*int64{k.violations: &violations, k.pairs: &pairs} {
		if *v, err = rdb.Get(ctx, key).Int64(); err != nil && !errors.Is(err, redis.Nil) {
			return nil, 0, 0, 0, err
		}
	}
	return sales, left, violations, pairs, nil
}

// judgeSales reads the sale records, "<ticket> <queue number> <buyer>" in the order of the
// sales: it returns the distinct tickets sold, and the sales overtaken, made after a sale with a
// later number.
func judgeSales(sales []string) (distinct, overtaken int, err error) {
	tickets := map[string]bool{}
	highest := int64(0)
	for _, s := range sales {
		w := lineWords(s)
		if len(w) != 3 {
			return 0, 0, fmt.Errorf("bad sale record %q", s)
		}
		tickets[w[0]] = true
		n, _ := strconv.ParseInt(w[1], 10, 64)
		if n < highest {
			overtaken++
		}
		highest = max(highest, n)
	}
	return len(tickets), overtaken, nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// runBuyers is the worker side of the ticket sales.
func runBuyers(ctx context.Context, w *worker) error {
	lock, err := fair.New(w.client, w.spec.Name)
	if err != nil {
		return err
	}
	b := &buyers{worker: w, lock: lock, keys: ticketKeysOf(lock)}
	return w.runBuyers(func(label string) (int, error) { return b.buy(ctx, label) })
}

// runBuyers runs the process's buyer goroutines, labelled "b<n>", each calling buy, and
// reports the sum of what they bought on its done line; it returns the first error of any.
func (w *worker) runBuyers(buy func(label string) (int, error)) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
		first error
	)
	for g := 1; g <= w.spec.Goroutines; g++ {
		wg.Go(func() {
			n, err := buy(goroutineLabel(w.spec.Proc, "b", g))
			mu.Lock()
			defer mu.Unlock()
			total += n
			if err != nil && first == nil {
				first = err
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	w.out.println(lineDone, total)
	return nil
}

// buyers is one process's share of the ticket sales.
type buyers struct {
	*worker
	lock *fair.Lock
	keys ticketKeys
}

// buy comes back for tickets until they are sold out, and returns how many it sold.
func (b *buyers) buy(ctx context.Context, label string) (int, error) {
	lk := b.lock.Keys() // the lock, its queue, its liveness zset
	for sales := 0; ; sales++ {
		r, err := arriveScript.Run(ctx, b.rdb, []string{b.keys.numbers, lk[1], lk[2]}).Slice()
		if err != nil {
			return sales, fmt.Errorf("taking a queue number: %w", err)
		}
		number := r[0].(int64)
		ahead := r[1:]

		held, err := b.lock.Lock(ctx)
		if err != nil {
			return sales, err
		}
		sold, late, err := b.sell(held, number, label, ahead)
		if uerr := b.lock.Unlock(held); err == nil {
			err = uerr
		}
		if err != nil {
			return sales, err
		}
		if !sold {
			b.out.println("soldout", label, late)
			return sales, nil
		}
	}
}

// sell runs holding the lock: it sells a ticket if one is left, and checks the order. Every
// Redis call takes the held context, so it stops as soon as the lock is lost.
func (b *buyers) sell(held context.Context, number int64, label string, ahead []any) (sold bool, late int64, err error) {
	left, err := b.rdb.Get(held, b.keys.left).Int()
	if err != nil {
		return false, 0, err
	}
	args := append([]any{""}, ahead...)
	ticket := 0
	if left > 0 {
		if err := b.rdb.Set(held, b.keys.left, left-1, 0).Err(); err != nil {
			return false, 0, err
		}
		ticket = b.spec.Tickets - left + 1
		args[0] = fmt.Sprintf("%d %d %s", ticket, number, label)
	}
	r, err := servedScript.Run(held, b.rdb, []string{b.lock.Keys()[2], b.keys.violations, b.keys.pairs, b.keys.sales},
		args...).Int64Slice()
	if err != nil {
		return false, 0, err
	}
	late = r[0]
	if left > 0 {
		b.out.println("sold", ticket, number, label, late, r[1])
	}
	return left > 0, late, nil
}
