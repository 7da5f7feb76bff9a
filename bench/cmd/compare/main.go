// Command compare measures aqs's locks against other Go Redis locks, and against the floor,
// on one redis-server it starts itself (the cluster scenarios: on a 3-master Redis Cluster it
// starts too, see cluster.go), and prints Markdown tables (see BENCHMARKS.md at the
// repository's root for what each figure means); with -o, it also draws them as two SVG
// charts beside the report (charts.go).
//
//	cd bench && go run ./cmd/compare          # about 8 minutes (make bench-compare)
//	cd bench && go run ./cmd/compare -quick   # about 30 seconds, for a smoke run
//	cd bench && go run ./cmd/compare -h       # the other flags
//
// # Method
//
// A shared machine drifts: another tenant, a CPU frequency change, the VM's steal. Measured
// one after another, two implementations would be compared under different conditions. So
// every scenario runs in rounds (9 by default), and each round gives every implementation
// one short slice (300ms), in an order rotated from round to round; rates are medians over
// the rounds, and ratios are taken within a round, against the floor's slice of the same
// round, before the median. A first round warms connection pools and subscriptions and is
// not counted. The processes scenario runs its contenders as copies of this program (see
// child.go).
//
// The floor is what no lock on Redis can beat: PING, EVALSHA of a script that returns 1, and
// the minimal correct lock cycle (SET NX PX, the critical section, a Lua compare-and-delete:
// two round trips). In a scenario with n goroutines the floor rows run n goroutines too, each
// on a key of its own, so nothing waits: "× floor" is a lock's acquisitions per second over
// what n goroutines get from the floor cycle with no contention at all.
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// config is what the flags set.
type config struct {
	slice  time.Duration
	rounds int
	work   time.Duration
	procs  int
	only   map[string]bool // scenarios to run, by tag; nil: all
	impls  []int           // rows to run, by index into implNames, the floor cycle always among them
	asked  bool            // whether -impls chose the rows
	v      bool            // log every slice's rate to stderr
	out    string          // a file to write the report to, besides stdout; "" for none
}

// scenario is one contention setting: procs processes (1: this one) of goroutines each.
type scenario struct {
	tag               string // its name for -scenarios
	title             string
	procs, goroutines int
	// names, when above 0, spreads the acquisitions at random over that many lock names (the
	// production workload: a lock per order, per seat), each held for sleep.
	names int
	sleep time.Duration
	// io is how many round trips to Redis each critical section makes (see sliceSpec.IO).
	io int
	// cluster runs it on a 3-master Redis Cluster, with the rows of cluster.go.
	cluster bool
	// cart makes every acquisition take a cart of 2 to 4 of the names (carts.go), held for the
	// busy work; only the cart rows, and the floor cycle, run in it.
	cart bool
}

// cartPools are the sizes of the pools of names the cart scenarios draw their carts from.
var cartPools = []int{100, 1000}

// manyNames is how many lock names the many-names scenarios spread their acquisitions over.
const manyNames = 1000

func main() {
	if os.Getenv(childEnv) == "1" {
		if err := childMain(); err != nil {
			fmt.Fprintln(os.Stderr, "compare (contender process):", err)
			os.Exit(1)
		}
		return
	}
	// Children are started from this goroutine; see dieWithParent.
	runtime.LockOSThread()

	var cfg config
	quick := flag.Bool("quick", false, "a smoke run of about 30 seconds: -slice 150ms -rounds 2")
	flag.DurationVar(&cfg.slice, "slice", 300*time.Millisecond, "length of one implementation's slice of a round")
	flag.IntVar(&cfg.rounds, "rounds", 9, "measured rounds per scenario (one more warms up)")
	flag.DurationVar(&cfg.work, "work", 10*time.Microsecond, "length of the critical section (busy, not a sleep)")
	flag.IntVar(&cfg.procs, "procs", 4, "processes of the multi-process scenario, 8 goroutines each (0: leave it out)")
	flag.BoolVar(&cfg.v, "v", false, "log every slice's rate to stderr")
	flag.StringVar(&cfg.out, "o", "", "also write the report to this file (make bench-compare: ../BENCHMARKS.md), and its charts to bench/charts/ beside it")
	only := flag.String("scenarios", "", "comma-separated scenarios to run, of 1, 2, 8, 32, procs, 32-io, procs-io, many, many-1ms, many-procs, many-procs-1ms, carts-100, carts-1000, cluster, cluster-procs, cluster-carts-100 and cluster-carts-1000 (default all)")
	rowsFlag := flag.String("impls", "", "comma-separated words; run only the rows whose name contains one of them, in any case (and the floor cycle, which the ratios need); default all")
	flag.Parse()
	cfg.impls, cfg.asked = chooseImpls(*rowsFlag), *rowsFlag != ""
	if cfg.impls == nil {
		fmt.Fprintln(os.Stderr, "compare: -impls matches no row of:", strings.Join(implNames, "; "))
		os.Exit(2)
	}
	if *only != "" {
		cfg.only = map[string]bool{}
		for _, t := range strings.Split(*only, ",") {
			cfg.only[strings.TrimSpace(t)] = true
		}
	}
	if *quick {
		cfg.slice, cfg.rounds = 150*time.Millisecond, 2
	}
	if cfg.slice <= 0 || cfg.rounds < 1 || cfg.work < 0 || cfg.procs < 0 {
		fmt.Fprintln(os.Stderr, "compare: -slice must be positive, -rounds at least 1, -work and -procs not negative")
		os.Exit(2)
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	srv, err := startServer()
	if err != nil {
		return err
	}
	defer srv.stop()
	peers, err := startPeers(&cfg)
	if err != nil {
		return err
	}
	defer peers.stop()
	ctx := context.Background()
	p, err := newImpls(ctx, srv.addr)
	if err != nil {
		return err
	}
	defer p.close()

	scenarios := []scenario{
		{tag: "1", title: "Uncontended: 1 goroutine", procs: 1, goroutines: 1},
		{tag: "2", title: "Contended: 2 goroutines, one process", procs: 1, goroutines: 2},
		{tag: "8", title: "Contended: 8 goroutines, one process", procs: 1, goroutines: 8},
		{tag: "32", title: "Contended: 32 goroutines, one process", procs: 1, goroutines: 32},
	}
	if cfg.procs > 0 {
		scenarios = append(scenarios, scenario{tag: "procs",
			title: fmt.Sprintf("Contended: %d processes × 8 goroutines", cfg.procs), procs: cfg.procs, goroutines: 8})
	}
	// A critical section that reads what the lock guards: two GETs, after the work.
	scenarios = append(scenarios, scenario{tag: "32-io",
		title: "Contended, Redis I/O in the hold: 32 goroutines, one process, 2 GETs per critical section",
		procs: 1, goroutines: 32, io: 2})
	if cfg.procs > 0 {
		scenarios = append(scenarios, scenario{tag: "procs-io",
			title: fmt.Sprintf("Contended, Redis I/O in the hold: %d processes × 8 goroutines, 2 GETs per critical section", cfg.procs),
			procs: cfg.procs, goroutines: 8, io: 2})
	}
	for _, hold := range []time.Duration{0, time.Millisecond} {
		suffix, held := "", "held for no time"
		if hold > 0 {
			suffix, held = "-1ms", fmt.Sprintf("each held for %v (asleep)", hold)
		}
		scenarios = append(scenarios, scenario{tag: "many" + suffix,
			title: fmt.Sprintf("Many names: 64 goroutines, one process, each lock one of %d names at random, %s", manyNames, held),
			procs: 1, goroutines: 64, names: manyNames, sleep: hold})
		if cfg.procs > 0 {
			scenarios = append(scenarios, scenario{tag: "many-procs" + suffix,
				title: fmt.Sprintf("Many names: %d processes × 16 goroutines, each lock one of %d names at random, %s", cfg.procs, manyNames, held),
				procs: cfg.procs, goroutines: 16, names: manyNames, sleep: hold})
		}
	}
	if cfg.procs > 0 {
		for _, pool := range cartPools {
			scenarios = append(scenarios, scenario{tag: fmt.Sprintf("carts-%d", pool), cart: true,
				title: fmt.Sprintf("Carts: %d processes × 8 goroutines, each takes %d–%d names at once of %d, held for the critical section",
					cfg.procs, cartMin, cartMax, pool),
				procs: cfg.procs, goroutines: 8, names: pool})
		}
	}
	scenarios = append(scenarios, clusterScenarios(cfg)...)
	if cfg.only != nil {
		var chosen []scenario
		for _, sc := range scenarios {
			if cfg.only[sc.tag] {
				chosen = append(chosen, sc)
			}
		}
		if len(chosen) == 0 {
			return fmt.Errorf("-scenarios names none of 1, 2, 8, 32, procs, 32-io, procs-io, many, many-1ms, many-procs, many-procs-1ms, " +
				"carts-100, carts-1000, cluster, cluster-procs, cluster-carts-100, cluster-carts-1000 (the processes' and carts' scenarios need -procs above 0)")
		}
		scenarios = chosen
	}
	m := takeMachine(ctx, srv.addr)
	m.peers = peers
	var cb clusterBench // started by the first cluster scenario
	defer cb.stop()
	var results []result
	for si, sc := range scenarios {
		var rows []row
		var err error
		if sc.cluster {
			rows, err = cb.runScenario(ctx, cfg, si, sc)
		} else {
			rows, err = runScenario(p, srv.addr, cfg, si, sc)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", sc.title, err)
		}
		results = append(results, result{sc, rows})
	}
	m.ended, m.loadEnd = time.Now(), loadAvg()
	var b strings.Builder
	writeReport(&b, m, cfg, results)
	fmt.Print(b.String())
	if cfg.out != "" {
		if err := writeCharts(chartsFolder(cfg.out), results); err != nil {
			return err
		}
		if err := os.WriteFile(cfg.out, []byte(b.String()), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "compare: wrote %s, and its charts in %s\n", cfg.out, chartsFolder(cfg.out))
	}
	fmt.Fprintf(os.Stderr, "compare: done in %v\n", m.ended.Sub(m.began).Round(time.Second))
	return nil
}

// runScenario runs the warm-up round and cfg.rounds measured rounds of one scenario.
// chooseImpls returns the indexes of the rows whose name contains one of the comma-separated
// words of sel (all rows when sel is empty), the floor cycle always included; nil when a word
// matches no row.
func chooseImpls(sel string) []int {
	var chosen []int
	words := strings.Split(sel, ",")
	for i, name := range implNames {
		ok := sel == "" || i == floorCycle
		for _, w := range words {
			ok = ok || (strings.TrimSpace(w) != "" && containsFold(name, strings.TrimSpace(w)))
		}
		if ok {
			chosen = append(chosen, i)
		}
	}
	for _, w := range words {
		w = strings.TrimSpace(w)
		if w != "" && !slices.ContainsFunc(slices.Concat(implNames, clusterImplNames), func(name string) bool { return containsFold(name, w) }) {
			return nil
		}
	}
	return chosen
}

// runsIn says whether row im runs in scenario sc; floor marks the table's floor cycle, which
// every scenario runs (the ratios need it). The FIFO floor is a hand-off on one key, the
// server's pipelined capacity a figure of the many-names scenarios only, and the ways to take
// a cart run in the cart scenarios, alone.
func runsIn(sc scenario, im *impl, floor bool) bool {
	switch {
	case floor:
		return true
	case sc.cart || im.carts != nil:
		return sc.cart && im.carts != nil
	}
	return !(sc.names > 0 && im.oneOnly || sc.names == 0 && im.manyOnly)
}

// containsFold says whether s contains substr, letter case aside (-impls zookeeper).
func containsFold(s, substr string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(substr))
}

func runScenario(p *procImpls, addr string, cfg config, si int, sc scenario) ([]row, error) {
	n := len(p.impls)
	watch := newServerWatch(context.Background(), p.app)
	wit := newLocalWitness()
	var children []*child
	if sc.procs > 1 {
		shared, path, err := createSharedWitness()
		if err != nil {
			return nil, err
		}
		defer os.Remove(path)
		defer shared.unmap()
		wit = shared
		for range sc.procs {
			c, err := startChild(addr, path, cfg.work)
			if err != nil {
				return nil, err
			}
			defer c.stop()
			children = append(children, c)
		}
	}

	var impls []int
	for _, i := range cfg.impls {
		if runsIn(sc, p.impls[i], i == floorCycle) {
			impls = append(impls, i)
		}
	}
	rows := make([]row, n)
	for round := 0; round <= cfg.rounds; round++ {
		if round == 0 {
			fmt.Fprintf(os.Stderr, "compare: %s: warming up\n", sc.title)
		} else {
			fmt.Fprintf(os.Stderr, "compare: %s: round %d of %d\n", sc.title, round, cfg.rounds)
		}
		results := make([]sliceResult, n)
		rates := make([]float64, n)
		overlaps := make([]int64, n)
		for k := range impls {
			i := impls[(k+round)%len(impls)]
			wit.last.Store(-1)
			before := wit.overlaps.Load()
			sp := sliceSpec{
				Impl:       i,
				Key:        fmt.Sprintf("bench:s%d:i%d:r%d", si, i, round),
				Goroutines: sc.goroutines,
				Names:      sc.names,
				Sleep:      int64(sc.sleep),
				IO:         sc.io,
				Cart:       sc.cart,
			}
			// Time to build the goroutines' handles before the start: a thousand names'
			// take a moment.
			setup := 2 * time.Millisecond
			if sc.names > 0 {
				setup = 200 * time.Millisecond
			}
			if children != nil {
				setup += 48 * time.Millisecond // for every child to read its line
			}
			sp.Start = time.Now().Add(setup).UnixNano()
			sp.Stop = sp.Start + int64(cfg.slice)
			server := watch.window(time.Unix(0, sp.Start), time.Unix(0, sp.Stop))
			var err error
			if children == nil {
				results[i] = runSlice(p, p.impls[i], sp, wit, cfg.work)
			} else {
				results[i], err = runChildren(children, sp, cfg.slice, setup)
				if err != nil {
					return nil, err
				}
			}
			if u, ok := server(); ok && peerVariant(i) == noPeer {
				results[i].server = &u
			}
			rates[i] = float64(results[i].Ops) / cfg.slice.Seconds()
			overlaps[i] = wit.overlaps.Load() - before
			if cfg.v {
				fmt.Fprintf(os.Stderr, "compare:   %-40s %8.0f/s\n", implNames[i], rates[i])
			}
		}
		if round == 0 {
			continue
		}
		for _, i := range impls {
			rows[i].add(results[i], rates[i], overlaps[i])
			rows[i].ratios = append(rows[i].ratios, rates[i]/rates[floorCycle])
		}
	}
	return rows, nil
}

// runChildren runs one slice in every child at once and merges their results. Child c's
// goroutines are c*1000+g in the witness.
func runChildren(children []*child, sp sliceSpec, slice, setup time.Duration) (sliceResult, error) {
	// Time for every child to read its line and build its handles before the common start,
	// unless the caller set the start.
	if sp.Start == 0 {
		sp.Start = time.Now().Add(48*time.Millisecond + setup).UnixNano()
		sp.Stop = sp.Start + int64(slice)
	}
	for c, ch := range children {
		sp.IDBase = int64(c) * 1000
		if err := ch.send(sp); err != nil {
			return sliceResult{}, err
		}
	}
	var all sliceResult
	for _, ch := range children {
		r, err := ch.result(sp)
		if err != nil {
			return sliceResult{}, fmt.Errorf("contender process: %w", err)
		}
		all.merge(r)
	}
	return all, nil
}

// writeTable writes one scenario's rows.
func writeTable(b *strings.Builder, sc scenario, rows []row) {
	fmt.Fprintf(b, "\n### %s\n\n", sc.title)
	b.WriteString("| Implementation | acq/s | × floor | wait p50 | wait p99 | wait max | releaser re-acquires | Jain | overlaps | errors | acquisitions |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	contended := sc.procs*sc.goroutines > 1
	var notes, trips []string
	for i, r := range rows {
		if len(r.rates) == 0 {
			continue // a row left out by -impls
		}
		floorRow := isFloorRow(sc, i)
		cells := []string{rowName(sc, i), fmtRate(median(r.rates)), fmt.Sprintf("%.2f×", median(r.ratios))}
		if floorRow {
			cells = append(cells, "—", "—", "—", "—", "—", "—")
		} else {
			for _, q := range []float64{0.5, 0.99, 1} {
				v, lower, ok := waitQuantile(r.waits, r.cut, q)
				switch {
				case !ok:
					cells = append(cells, "—")
				case lower:
					cells = append(cells, "≥ "+fmtDur(v))
				default:
					cells = append(cells, fmtDur(v))
				}
			}
			if contended && sc.names == 0 && r.acquired > 0 {
				cells = append(cells, fmt.Sprintf("%.1f%%", 100*float64(r.repeats)/float64(r.acquired)))
			} else {
				cells = append(cells, "—")
			}
			if j := median(r.jains); contended && !math.IsNaN(j) {
				cells = append(cells, fmt.Sprintf("%.3f", j))
			} else {
				cells = append(cells, "—")
			}
			if sc.names == 0 || sc.cart {
				cells = append(cells, fmt.Sprint(r.overlaps))
			} else {
				cells = append(cells, "—") // holders of many names at once: no witness
			}
		}
		cells = append(cells, fmt.Sprint(r.failures), fmt.Sprint(r.acquired))
		fmt.Fprintf(b, "| %s |\n", strings.Join(cells, " | "))
		if r.firstErr != "" {
			notes = append(notes, fmt.Sprintf("%s, first error: %s", rowName(sc, i), r.firstErr))
		}
		if r.trips > 0 {
			trips = append(trips, fmt.Sprintf("%s %.1f", strings.TrimPrefix(rowName(sc, i), "aqs "), float64(r.cmds)/float64(r.trips)))
		}
	}
	if !sc.cluster { // the cluster's rows are its own (clusterImplNames), without the peers
		notes = append(notes, peerFloorNotes(rows)...)
	}
	if sc.cart {
		notes, trips = append(notes, cartNotes(sc, rows)...), nil // the rows' clients are not all the aqs Client's
	}
	if len(trips) > 0 {
		notes = append(notes, "Commands per round trip of the aqs Client's go-redis client (its auto-pipeline; all rounds): "+
			strings.Join(trips, ", ")+".")
	}
	for _, n := range notes {
		fmt.Fprintf(b, "\n%s\n", n)
	}
	if !sc.cluster {
		writeCPUTable(b, rows)
	}
	if sc.cluster {
		writeClusterNotes(b, sc, rows)
	}
}
