package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/layout"
)

// The demo.
//
// aqs demo runs the five uses the library exists for, one after the other, each across
// several OS processes: aqs runs itself again as worker processes (demo_worker.go,
// demo_proc.go), each with its own Redis connection pool and aqs.Client, as the processes of
// a real deployment would have. The parent starts them, prints their progress, and judges the
// outcome from what they report and from what is in Redis:
//
//   - tickets (demo_tickets.go): buyers sell a fixed number of tickets under one fair lock;
//   - config (demo_config.go): readers read a configuration under the read lock while a writer
//     updates it under the write lock;
//   - pool (demo_pool.go): workers run jobs under the permits of a leased semaphore, and one
//     worker process is killed with SIGKILL in the middle of a job;
//   - inventory: buyers reserve carts of 1 to 4 SKUs, each cart with one multi-lock on its SKUs
//     (demo_carts.go); then buyers wait on a Condition of the fair lock for stock that a
//     restocker adds and signals (demo_inventory.go);
//   - leader (demo_leader.go): candidate processes campaign in a leader election; the leader
//     is killed, a standby takes over, and the later leaders resign in turn.
//
// Each scenario ends with rows for the summary table, some of them checks; the command fails
// when any check does. The resources the locks guard are written non-atomically on purpose (a
// GET then a SET, two HSETs), so that a lock that failed to exclude would show in the figures.

const demoSynopsis = `Runs the five uses aqs exists for, each across several OS processes (aqs itself,
run again as workers, each with its own Redis connections and aqs.Client), with
progress as they go and a summary table at the end:

  tickets  buyers sell a fixed number of tickets under the fair lock: every ticket
           sold once, none oversold, and no buyer served while one that queued
           before it still waits;
  config   readers read a configuration under the read lock while a writer updates
           it under the write lock: no reader ever sees half a write;
  pool     workers run jobs under the permits of a leased semaphore, K at once; one
           worker process is killed with SIGKILL mid-job, and its permit comes back
           when its lease runs out;
  inventory
           first, buyers reserve carts of 1 to 4 SKUs, each cart under one
           multi-lock on its SKUs, bought whole or refused whole: no SKU oversold,
           no SKU held by two carts at once, no deadlock (every Lock returns), and
           carts that share a SKU served in the order they joined its queue; then
           buyers reserve items one at a time under the fair lock, waiting on its
           Condition while the stock is 0, while a restocker adds stock in batches
           and signals once per item: none oversold, no buyer left waiting while
           stock is left, and waiters woken in the order they began to wait;
  leader   candidate processes campaign in a leader election; the leader does a
           job through a fencing-token witness; it is killed with SIGKILL, and a
           standby leads once its lease runs out; the later leaders resign in turn:
           never two leaders, the takeover within the lease, standbys in arrival
           order, and every leader seen by an observer in the order they led.

The exit status is 1 when any check fails.`

// demoConfig is the demo's command line.
type demoConfig struct {
	scenarios []scenario
	name      string // the stem of every name and key of the run
	processes int

	buyers, tickets        int           // tickets (buyers: inventory too)
	carts, skus            int           // inventory's carts
	cartDeadline           time.Duration // inventory's carts
	items, batch           int           // inventory's restocking
	readers, writes        int           // config
	candidates             int           // leader
	workers, permits, jobs int           // pool
	jobTime                time.Duration // pool
	lease                  time.Duration // the watchdog timeout of the workers' Clients
	metrics                bool          // the workers observe their Clients (demo_metrics.go)
}

// scenario is one of the demo's uses. run prints its progress and returns its summary rows.
type scenario struct {
	name, title string
	run         func(ctx context.Context, d *demoRun) ([]summaryRow, error)
}

// scenarios lists the scenarios in the order they run.
var scenarios = []scenario{
	{"tickets", "ticket sales with the fair lock", runTickets},
	{"config", "shared configuration with the read-write lock", runConfig},
	{"pool", "a worker pool with the leased-permit semaphore", runPool},
	{"inventory", "inventory reservation: carts with the multi-lock, restocking with a Condition", runInventory},
	{"leader", "a singleton job with leader election, its leader killed", runLeader},
}

func runDemo(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "demo", demoSynopsis)
	redisAddr := addRedisFlag(fs)
	var cfg demoConfig
	which := fs.String("scenario", "all", "the scenarios to run: all, or a comma-separated list of tickets, config, pool, inventory, leader")
	fs.IntVar(&cfg.processes, "processes", 4, "worker processes per scenario (config runs its writer in one more)")
	fs.IntVar(&cfg.buyers, "buyers", 4, "tickets, inventory: buyers per process")
	fs.IntVar(&cfg.tickets, "tickets", 1000, "tickets: the tickets on sale")
	fs.IntVar(&cfg.candidates, "candidates", 3, "leader: the candidate processes of the election")
	fs.IntVar(&cfg.readers, "readers", 6, "config: readers per process")
	fs.IntVar(&cfg.writes, "writes", 12, "config: the writer's updates, one every "+writeEvery.String())
	fs.IntVar(&cfg.workers, "workers", 2, "pool: workers per process")
	fs.IntVar(&cfg.permits, "permits", 3, "pool: the semaphore's permits, K")
	fs.IntVar(&cfg.jobs, "jobs", 60, "pool: jobs to run; the kill comes after a third of them, and the\n"+
		"run goes on until the killed worker's permit is back")
	fs.DurationVar(&cfg.jobTime, "job-time", 150*time.Millisecond, "pool: how long a job takes, about")
	fs.IntVar(&cfg.carts, "carts", 6, "inventory: the carts each buyer reserves, of 1 to 4 SKUs, one after the other")
	fs.IntVar(&cfg.skus, "skus", 8, "inventory: the SKUs of the store, each stocked with about 3/4 of what the carts\n"+
		"ask of it, so that some sell out")
	fs.DurationVar(&cfg.cartDeadline, "cart-deadline", defaultCartDeadline, "inventory: how long a buyer's Lock on a cart "+
		"may wait before the buyer counts\nas stuck in a deadlock (under the demo's "+stallTimeout.String()+" stall timeout)")
	fs.IntVar(&cfg.items, "items", 5, "inventory: the items each buyer reserves, one at a time, after the carts; the\n"+
		"restocker adds exactly what the buyers want in all")
	fs.IntVar(&cfg.batch, "batch", 6, "inventory: the restocker's largest batch, one every "+restockEvery.String())
	fs.DurationVar(&cfg.lease, "lease", 2*time.Second, "the watchdog timeout of the workers' aqs Clients: how long the\n"+
		"permit of a killed worker stays leased at most")
	fs.BoolVar(&cfg.metrics, "metrics", false, "print, per scenario, what the workers' aqs Clients observed: acquisitions,\n"+
		"wait and hold p50/p99, give-ups, errors, leases lost")
	fs.StringVar(&cfg.name, "name", "", "the `stem` of the names of the demo's locks, semaphore and keys\n"+
		"(default demo-<random hex>)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := cfg.check(*which); err != nil {
		return err
	}

	conn, err := connectRedis(ctx, e, *redisAddr, true)
	if err != nil {
		return err
	}
	defer conn.Close()
	return demo(ctx, e, conn, cfg)
}

// check validates the command line and fills in the scenarios and the default name.
func (cfg *demoConfig) check(which string) error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"processes", cfg.processes}, {"buyers", cfg.buyers}, {"tickets", cfg.tickets},
		{"readers", cfg.readers}, {"writes", cfg.writes},
		{"workers", cfg.workers}, {"permits", cfg.permits}, {"jobs", cfg.jobs},
		{"carts", cfg.carts}, {"skus", cfg.skus}, {"items", cfg.items}, {"batch", cfg.batch},
		{"candidates", cfg.candidates},
	} {
		if f.v < 1 {
			return usagef("--%s must be at least 1, not %d", f.name, f.v)
		}
	}
	if cfg.jobTime <= 0 {
		return usagef("--job-time must be positive, not %v", cfg.jobTime)
	}
	if cfg.cartDeadline <= 0 || cfg.cartDeadline >= stallTimeout {
		// A stuck buyer must be heard of before the demo gives up on silent workers.
		return usagef("--cart-deadline must be positive and under %v, not %v", stallTimeout, cfg.cartDeadline)
	}
	if cfg.lease < 30*time.Millisecond {
		return usagef("--lease must be at least 30ms, not %v", cfg.lease)
	}
	cfg.scenarios = nil
	if which == "all" {
		cfg.scenarios = scenarios
	} else {
		for _, name := range strings.Split(which, ",") {
			i := indexScenario(strings.TrimSpace(name))
			if i < 0 {
				return usagef("--scenario: unknown scenario %q (want all, or some of tickets, config, pool, inventory, leader)", name)
			}
			cfg.scenarios = append(cfg.scenarios, scenarios[i])
		}
	}
	if cfg.runs("pool") && (cfg.processes < 2 || (cfg.processes-1)*cfg.workers < cfg.permits) {
		// After the kill, the workers left must be able to fill every permit, or the pool could
		// not show that the dead worker's permit came back.
		return usagef("pool: --processes %d x --workers %d: the workers outside the killed process must be at least --permits %d",
			cfg.processes, cfg.workers, cfg.permits)
	}
	if cfg.runs("leader") && cfg.candidates < 2 {
		// The first leader is killed: a standby must be there to take over.
		return usagef("leader: --candidates must be at least 2, not %d", cfg.candidates)
	}
	if cfg.name == "" {
		var b [3]byte
		rand.Read(b[:]) // never fails; see crypto/rand.Read
		cfg.name = "demo-" + hex.EncodeToString(b[:])
	}
	return nil
}

func indexScenario(name string) int {
	for i, s := range scenarios {
		if s.name == name {
			return i
		}
	}
	return -1
}

// runs reports whether the scenario is among those to run.
func (cfg *demoConfig) runs(name string) bool {
	for _, s := range cfg.scenarios {
		if s.name == name {
			return true
		}
	}
	return false
}

// demoRun is what the scenarios share: the configuration, the output, the way to start
// workers, and the parent's own Redis client and aqs.Client, which set up and inspect the
// primitives but take no part in the contention.
type demoRun struct {
	cfg    demoConfig
	out    io.Writer
	conn   *redisConn
	exec   workerExec
	rdb    *redis.Client
	client *aqs.Client
	start  time.Time // of the current scenario, for the progress lines
	// metrics sums the current scenario's metrics lines (--metrics; else nil), from procs
	// worker processes (of each of its fleets).
	metrics *demoMetrics
	procs   int
}

// printf prints a progress line. Only the scenario's goroutine prints.
func (d *demoRun) printf(format string, args ...any) {
	fmt.Fprintf(d.out, format, args...)
}

// progress prints a progress line stamped with the time since the scenario's workers started.
func (d *demoRun) progress(format string, args ...any) {
	fmt.Fprintf(d.out, "  %6.2fs  ", time.Since(d.start).Seconds())
	fmt.Fprintf(d.out, format, args...)
	fmt.Fprintln(d.out)
}

// spec returns the spec of worker process proc of a scenario.
func (d *demoRun) spec(role, name string, proc, goroutines int) workerSpec {
	return workerSpec{Role: role, Redis: d.conn.addr, Name: name, Proc: proc, Goroutines: goroutines, Lease: d.cfg.lease,
		Metrics: d.cfg.metrics}
}

// startFleet starts the worker processes of specs, says which they are, and tells them to
// go. The caller must stop the fleet.
func (d *demoRun) startFleet(ctx context.Context, specs []workerSpec) (*fleet, error) {
	f, err := startFleet(ctx, d.exec, specs)
	if err != nil {
		return nil, err
	}
	f.metrics = d.metrics
	d.procs += len(specs)
	pids := make([]string, len(f.procs))
	for i, p := range f.procs {
		pids[i] = fmt.Sprint(p.pid())
	}
	d.printf("  worker processes started and connected: pids %s\n", strings.Join(pids, ", "))
	d.start = time.Now()
	f.broadcast(lineGo)
	return f, nil
}

// deleteKeys deletes keys, even when ctx was cancelled: for the scenarios' deferred clean-up.
// The keys that releases keep for a while under their hash tags (layout.OnceSuffix) go too:
// they would expire within seconds, but the demo leaves nothing behind.
func (d *demoRun) deleteKeys(ctx context.Context, keys []string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	all := slices.Clone(keys)
	tags := map[string]bool{}
	for _, k := range keys {
		i, j := strings.IndexByte(k, '{'), strings.IndexByte(k, '}')
		if i < 0 || j < i || tags[k[i:j+1]] {
			continue
		}
		tags[k[i:j+1]] = true
		iter := d.rdb.Scan(cctx, 0, "*"+k[i:j+1]+layout.OnceSuffix+"*", 1000).Iterator()
		for iter.Next(cctx) {
			all = append(all, iter.Val())
		}
	}
	d.rdb.Del(cctx, all...)
}

func demo(ctx context.Context, e *env, conn *redisConn, cfg demoConfig) error {
	rdb := conn.newClient()
	defer rdb.Close()
	client, err := aqs.New(ctx, rdb)
	if err != nil {
		return fmt.Errorf("connecting to Redis at %s: %w", conn.addr, err)
	}
	defer client.Close()
	d := &demoRun{cfg: cfg, out: e.stdout, conn: conn, exec: e.worker, rdb: rdb, client: client}

	names := make([]string, len(cfg.scenarios))
	for i, s := range cfg.scenarios {
		names[i] = s.name
	}
	opts, _ := parseRedisAddr(conn.addr) // checked by connectRedis; the address without credentials
	d.printf("aqs demo: %s, each across worker processes (aqs run again), on Redis at %s; names %s-*\n",
		strings.Join(names, ", "), opts.Addr, cfg.name)
	var results []scenarioRows
	for i, s := range cfg.scenarios {
		d.printf("\n== %d/%d %s: %s\n", i+1, len(cfg.scenarios), s.name, s.title)
		if cfg.metrics {
			d.metrics = newDemoMetrics()
		}
		d.procs = 0
		rows, err := s.run(ctx, d)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if d.metrics != nil {
			d.metrics.print(d.out, d.procs)
		}
		results = append(results, scenarioRows{s.name, rows})
	}
	return printSummary(d.out, results)
}

// Summary rows.

// verdict is a summary row's check: none (a figure only), passed or failed.
type verdict int

const (
	noCheck verdict = iota
	passed
	failed
)

// summaryRow is one line of the summary table. It may carry a note, printed under the table:
// the definition of what it counts.
type summaryRow struct {
	what, figure string
	check        verdict
	note         string
}

// figureRow returns a row that reports a figure and checks nothing.
func figureRow(what, format string, args ...any) summaryRow {
	return summaryRow{what: what, figure: fmt.Sprintf(format, args...)}
}

// checkedRow returns a row that checks ok.
func checkedRow(what string, ok bool, format string, args ...any) summaryRow {
	r := summaryRow{what: what, figure: fmt.Sprintf(format, args...), check: failed}
	if ok {
		r.check = passed
	}
	return r
}

// withNote returns r with a note.
func (r summaryRow) withNote(note string) summaryRow {
	r.note = note
	return r
}

type scenarioRows struct {
	scenario string
	rows     []summaryRow
}

// printSummary prints the summary table and returns an error when a check failed.
func printSummary(w io.Writer, results []scenarioRows) error {
	fmt.Fprintln(w, "\nsummary:")
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  scenario\tfigure\tvalue\tcheck")
	var checks, fails int
	var notes []string
	for _, res := range results {
		for i, r := range res.rows {
			name := ""
			if i == 0 {
				name = res.scenario
			}
			check := ""
			switch r.check {
			case passed:
				check = "ok"
				checks++
			case failed:
				check = "FAILED"
				checks++
				fails++
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", name, r.what, r.figure, check)
			if r.note != "" {
				notes = append(notes, r.what+": "+r.note)
			}
		}
	}
	tw.Flush()
	for line := range strings.Lines(table.String()) {
		fmt.Fprintln(w, strings.TrimRight(line, " \n")) // the padding of an empty check column
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprint(w, wrapNote(n, "  ", "    ", noteWidth))
		}
	}
	fmt.Fprintln(w)
	if fails > 0 {
		fmt.Fprintf(w, "%d of %d checks FAILED\n", fails, checks)
		return fmt.Errorf("%d of %d checks failed", fails, checks)
	}
	fmt.Fprintf(w, "all %d checks passed\n", checks)
	return nil
}

// noteWidth is the width the notes under the summary are wrapped to.
const noteWidth = 100

// wrap breaks text into lines of at most width bytes where it can, the first line indented
// with first, the others with rest.
func wrapNote(text, first, rest string, width int) string {
	var b strings.Builder
	line := first
	for i, word := range strings.Fields(text) {
		if i > 0 && len(line)+1+len(word) > width {
			b.WriteString(line + "\n")
			line = rest + word
			continue
		}
		if i > 0 {
			line += " "
		}
		line += word
	}
	b.WriteString(line + "\n")
	return b.String()
}

// plural returns "1 job", "2 jobs".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
