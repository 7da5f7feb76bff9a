package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/reentrant"
)

// The cluster scenarios: many names on a 3-master Redis Cluster.
//
// The run starts the cluster itself, from redis-server processes on loopback ports with no
// replicas (internal/testkit/redistest forms it and waits until every node agrees on every
// slot's owner), the first time a cluster scenario runs, and stops it at the end. Each
// process, the parent as each contender, has one go-redis ClusterClient that every row's
// library shares, as a service would (aqs, redsync, redislock, the floor); rueidislock has
// its own rueidis client, which finds the cluster by itself. The rows have a table of their
// own (clusterImplNames): a child is told the cluster's addresses, comma-separated, in place
// of the server's, and builds that table (implsFor).
//
// Each slice is also watched for the connections it costs (conns.go).

// clusterImplNames lists the rows of the cluster scenarios, in the order of their table; a
// child is told which one to run by its index.
var clusterImplNames = []string{
	"floor: SET NX PX + compare-and-delete",
	"aqs reentrant",
	"aqs reentrant, a value per goroutine and name",
	"aqs fair",
	"aqs fair, a value per goroutine and name",
	"aqs counting semaphore, 1 permit",
	"redsync (defaults)",
	"redsync, retry delay 1ms",
	"redislock, linear 100ms",
	"redislock, linear 1ms",
	"rueidislock (defaults)",
	// The cart scenarios' rows (carts.go), from clusterCartMultiRow on.
	cartImplNames[0], cartImplNames[1], cartImplNames[2], cartImplNames[3],
}

const (
	clusterFloor     = 0
	clusterSemaphore = 5
)

// The cluster rows of aqs, and of the other libraries.
var (
	clusterAQSRows   = []int{1, 2, 3, 4, 5}
	clusterOtherRows = []int{6, 7, 8, 9, 10}
)

// clusterSetup is the time every process gets, before a cluster slice of row i starts, to
// build its goroutines' lock values: 64 goroutines × 1,000 names take well under 100ms for a
// value per goroutine, but the semaphore's 1,000 round trips to set its permits took up to
// 400ms in a contender process on a loaded machine.
func clusterSetup(i int) time.Duration {
	if i == clusterSemaphore {
		return 700 * time.Millisecond
	}
	return 200 * time.Millisecond
}

// clusterScenarios returns the cluster scenarios; the processes one only if cfg.procs > 0.
func clusterScenarios(cfg config) []scenario {
	out := []scenario{{tag: "cluster", cluster: true,
		title: fmt.Sprintf("Redis Cluster, 3 masters: 64 goroutines, one process, each lock one of %d names at random, held for no time", manyNames),
		procs: 1, goroutines: 64, names: manyNames}}
	if cfg.procs > 0 {
		out = append(out, scenario{tag: "cluster-procs", cluster: true,
			title: fmt.Sprintf("Redis Cluster, 3 masters: %d processes × 16 goroutines, each lock one of %d names at random, held for no time", cfg.procs, manyNames),
			procs: cfg.procs, goroutines: 16, names: manyNames})
		for _, pool := range cartPools {
			out = append(out, scenario{tag: fmt.Sprintf("cluster-carts-%d", pool), cluster: true, cart: true,
				title: fmt.Sprintf("Redis Cluster, 3 masters: carts, %d processes × 8 goroutines, each takes %d–%d names at once of %d (one hash tag, one slot), held for the critical section",
					cfg.procs, cartMin, cartMax, pool),
				procs: cfg.procs, goroutines: 8, names: pool})
		}
	}
	return out
}

// rowName returns the name of row i of scenario sc's table.
func rowName(sc scenario, i int) string {
	if sc.cluster {
		return clusterImplNames[i]
	}
	return implNames[i]
}

// isFloorRow reports whether row i of sc's table is a floor, whose waits and fairness mean
// nothing (the FIFO floor is a lock in that sense).
func isFloorRow(sc scenario, i int) bool {
	if sc.cluster {
		return i == clusterFloor
	}
	return i <= floorCycle || i == capacityRow || isPeerFloor(i)
}

// lockRow reports whether row i of sc's table is a lock that the conclusions' count of
// acquisitions, overlaps and failures takes in.
func lockRow(sc scenario, i int) bool {
	if sc.cluster {
		return i != clusterFloor
	}
	return i > fifoFloor && i != capacityRow && !isPeerFloor(i)
}

// implsFor connects this process's implementations: to the server at addr, or, when addr
// lists several addresses separated by commas, to the cluster of those nodes.
func implsFor(ctx context.Context, addr string) (*procImpls, error) {
	if strings.Contains(addr, ",") {
		return newClusterImpls(ctx, strings.Split(addr, ","))
	}
	return newImpls(ctx, addr)
}

// benchClientName is the name every connection of this process's cluster clients carries
// (CLIENT SETNAME), so that CLIENT LIST tells the processes apart.
func benchClientName() string { return fmt.Sprintf("aqs-bench-%d", os.Getpid()) }

// newClusterImpls builds the rows of clusterImplNames on the cluster of nodes addrs.
func newClusterImpls(ctx context.Context, addrs []string) (*procImpls, error) {
	p := &procImpls{}
	fail := func(err error) (*procImpls, error) {
		p.close()
		return nil, err
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ClientName: benchClientName()})
	p.closers = append(p.closers, func() { cc.Close() })
	// Counted on each node's client, where a round trip to a server is made (a pipeline is
	// split by node); only the aqs rows read it, and only their slices move it much.
	trips := &tripCounter{}
	cc.OnNewNode(func(node *redis.Client) { node.AddHook(trips) })
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return floorDel.Load(ctx, m).Err()
	})
	if err != nil {
		return fail(fmt.Errorf("cluster client of %v: loading the floor's script: %w", addrs, err))
	}

	token := randomToken()
	bg := context.Background()
	p.impls = append(p.impls, &impl{name: clusterImplNames[0], op: func(key string, hold func()) error {
		ok, err := cc.SetNX(bg, key, token, lockTTL).Result()
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("floor: %s is taken", key)
		}
		hold()
		return floorDel.EvalSha(bg, cc, []string{key}, token).Err()
	}})

	client, err := aqs.New(ctx, cc)
	if err != nil {
		return fail(fmt.Errorf("aqs.New on the cluster: %w", err))
	}
	p.closers = append(p.closers, func() { client.Close() })
	// aqsRow builds a row of aqs from newLock, which makes one Lock value of a name: shared,
	// one value serves the process's goroutines; else each goroutine gets its own.
	type lockFuncs struct {
		lock   func(context.Context) (context.Context, error)
		unlock func(context.Context) error
	}
	aqsRow := func(name string, shared bool, newLock func(key string) (lockFuncs, error)) *impl {
		return &impl{name: name, trips: trips, locks: func(key string, n int) ([]acquireFunc, error) {
			out := make([]acquireFunc, n)
			var l lockFuncs
			for g := range out {
				if g == 0 || !shared {
					var err error
					if l, err = newLock(key); err != nil {
						return nil, err
					}
				}
				l := l
				out[g] = func(ctx context.Context) (func() error, error) {
					held, err := l.lock(ctx)
					if err != nil {
						return nil, err
					}
					return func() error { return l.unlock(held) }, nil
				}
			}
			return out, nil
		}}
	}
	newReentrant := func(key string) (lockFuncs, error) {
		l, err := reentrant.New(client, key)
		if err != nil {
			return lockFuncs{}, err
		}
		return lockFuncs{func(ctx context.Context) (context.Context, error) { return l.Lock(ctx) }, l.Unlock}, nil
	}
	newFair := func(key string) (lockFuncs, error) {
		l, err := fair.New(client, key)
		if err != nil {
			return lockFuncs{}, err
		}
		return lockFuncs{func(ctx context.Context) (context.Context, error) { return l.Lock(ctx) }, l.Unlock}, nil
	}
	p.impls = append(p.impls,
		aqsRow(clusterImplNames[1], true, newReentrant),
		aqsRow(clusterImplNames[2], false, newReentrant),
		aqsRow(clusterImplNames[3], true, newFair),
		aqsRow(clusterImplNames[4], false, newFair),
		// As in the single-node table: one permit, set once per name by the first process.
		&impl{name: clusterImplNames[5], trips: trips, locks: semaphoreLocks(client)},
	)

	// redsync: a Mutex per goroutine and name (it remembers its hold's value).
	rs := redsync.New(redsyncgoredis.NewPool(cc))
	p.impls = append(p.impls,
		&impl{name: clusterImplNames[6], locks: redsyncLocks(rs)},
		&impl{name: clusterImplNames[7], locks: redsyncLocks(rs, redsync.WithRetryDelay(time.Millisecond), redsync.WithTries(1<<20))},
	)

	// redislock: a deadline far beyond any slice, as in the single-node table.
	rl := redislock.New(cc)
	redislockLocks := func(backoff time.Duration) func(string, int) ([]acquireFunc, error) {
		return func(key string, n int) ([]acquireFunc, error) {
			acq := func(ctx context.Context) (func() error, error) {
				ctx, cancel := context.WithTimeout(ctx, time.Hour)
				defer cancel()
				l, err := rl.Obtain(ctx, key, lockTTL, &redislock.Options{RetryStrategy: redislock.LinearBackoff(backoff)})
				if err != nil {
					return nil, err
				}
				return func() error { return l.Release(bg) }, nil
			}
			return repeat(acquireFunc(acq), n), nil
		}
	}
	p.impls = append(p.impls,
		&impl{name: clusterImplNames[8], locks: redislockLocks(100 * time.Millisecond)},
		&impl{name: clusterImplNames[9], locks: redislockLocks(time.Millisecond)},
	)

	// rueidislock: its own rueidis client, which reads the slot map from the seeds.
	locker, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption: rueidis.ClientOption{InitAddress: addrs, ClientName: benchClientName() + "-rueidis"},
	})
	if err != nil {
		return fail(fmt.Errorf("rueidislock.NewLocker on the cluster: %w", err))
	}
	p.closers = append(p.closers, locker.Close)
	p.impls = append(p.impls, &impl{name: clusterImplNames[10], locks: func(key string, n int) ([]acquireFunc, error) {
		acq := func(ctx context.Context) (func() error, error) {
			_, release, err := locker.WithContext(ctx, key)
			if err != nil {
				return nil, err
			}
			return func() error { release(); return nil }, nil
		}
		return repeat(acquireFunc(acq), n), nil
	}})

	// The carts' rows, on the same ClusterClient as the rows above.
	p.impls = append(p.impls, newCartImpls(client, trips, rl, rs, trips)...)

	for i, im := range p.impls {
		if im.name != clusterImplNames[i] {
			panic("compare: newClusterImpls out of step with clusterImplNames at " + im.name)
		}
	}
	return p, nil
}

// clusterBench is the parent's side of the cluster scenarios: the cluster, started on first
// use, this process's rows on it, and a client of each master to watch the slices.
type clusterBench struct {
	c        *redistest.RedisCluster
	addr     string // the nodes' addresses, comma-separated, as a child is told them
	masters  []string
	watchers []*redis.Client // one per master, in slot order
	p        *procImpls
}

// start starts the cluster and connects to it, unless done before.
func (cb *clusterBench) start(ctx context.Context) error {
	if cb.c != nil {
		return nil
	}
	fmt.Fprintln(os.Stderr, "compare: starting a Redis Cluster of 3 masters")
	c, err := redistest.StartCluster()
	if err != nil {
		return err
	}
	cb.c = c
	cb.masters = c.Addrs()
	cb.addr = strings.Join(cb.masters, ",")
	for _, a := range cb.masters {
		w := redis.NewClient(&redis.Options{Addr: a, PoolSize: 1})
		cb.watchers = append(cb.watchers, w)
		if err := w.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("cluster node %s: %w", a, err)
		}
	}
	cb.p, err = newClusterImpls(ctx, cb.masters)
	return err
}

// stop closes the clients and stops the cluster; it does nothing if start never ran.
func (cb *clusterBench) stop() {
	if cb.p != nil {
		cb.p.close()
	}
	for _, w := range cb.watchers {
		w.Close()
	}
	if cb.c != nil {
		cb.c.Stop()
	}
}

// chooseRows returns the indexes of the rows of names that the -impls words of sel pick (all
// when sel is empty), floor always included. A word that picks none of them is no error
// here: chooseImpls has checked the words against every table.
func chooseRows(names []string, floor int, sel string) []int {
	var chosen []int
	for i, name := range names {
		ok := sel == "" || i == floor
		for _, w := range strings.Split(sel, ",") {
			ok = ok || (strings.TrimSpace(w) != "" && strings.Contains(name, strings.TrimSpace(w)))
		}
		if ok {
			chosen = append(chosen, i)
		}
	}
	return chosen
}

// runScenario runs a cluster scenario as runScenario runs the others: a warm-up round, then
// cfg.rounds measured rounds of one slice per row, in an order rotated from round to round,
// each slice watched for the connections it costs.
func (cb *clusterBench) runScenario(ctx context.Context, cfg config, si int, sc scenario) ([]row, error) {
	if err := cb.start(ctx); err != nil {
		return nil, err
	}
	p := cb.p
	var children []*child
	if sc.procs > 1 {
		// The witness goes unused (many names), but a child maps one.
		shared, path, err := createSharedWitness()
		if err != nil {
			return nil, err
		}
		defer os.Remove(path)
		defer shared.unmap()
		for range sc.procs {
			c, err := startChild(cb.addr, path, cfg.work)
			if err != nil {
				return nil, err
			}
			defer c.stop()
			children = append(children, c)
		}
	}
	// The words of -impls, which config keeps only as the single-node table's rows.
	sel := ""
	if f := flag.Lookup("impls"); f != nil {
		sel = f.Value.String()
	}
	var impls []int
	for _, i := range chooseRows(clusterImplNames, clusterFloor, sel) {
		if runsIn(sc, p.impls[i], i == clusterFloor) {
			impls = append(impls, i)
		}
	}
	n := len(p.impls)
	rows := make([]row, n)
	for _, i := range impls {
		rows[i].conns = &connStats{}
	}
	for round := 0; round <= cfg.rounds; round++ {
		if round == 0 {
			fmt.Fprintf(os.Stderr, "compare: %s: warming up\n", sc.title)
		} else {
			fmt.Fprintf(os.Stderr, "compare: %s: round %d of %d\n", sc.title, round, cfg.rounds)
		}
		results := make([]sliceResult, n)
		rates := make([]float64, n)
		watched := make([]connSample, n)
		for k := range impls {
			i := impls[(k+round)%len(impls)]
			sp := sliceSpec{
				Impl:       i,
				Key:        fmt.Sprintf("bench:c%d:i%d:r%d", si, i, round),
				Goroutines: sc.goroutines,
				Names:      sc.names,
				Sleep:      int64(sc.sleep),
				Cart:       sc.cart,
			}
			setup := clusterSetup(i)
			if children != nil {
				setup += 48 * time.Millisecond // for every child to read its line, as runChildren allows
			}
			start := time.Now().Add(setup)
			sp.Start, sp.Stop = start.UnixNano(), start.Add(cfg.slice).UnixNano()
			skip := "" // the parent's connections, when it runs the slice
			if children != nil {
				skip = benchClientName()
			}
			watch := cb.watch(start, start.Add(cfg.slice), skip)
			if children == nil {
				results[i] = runSlice(p, p.impls[i], sp, newLocalWitness(), cfg.work)
			} else {
				var err error
				if results[i], err = runChildren(children, sp, cfg.slice, setup); err != nil {
					return nil, err
				}
			}
			watched[i] = <-watch
			if watched[i].err != nil {
				return nil, fmt.Errorf("watching %s: %w", clusterImplNames[i], watched[i].err)
			}
			rates[i] = float64(results[i].Ops) / cfg.slice.Seconds()
			if cfg.v {
				fmt.Fprintf(os.Stderr, "compare:   %-45s %8.0f/s; per master, connections dialled %v, pub/sub connections of a Client %v\n",
					clusterImplNames[i], rates[i], watched[i].dialled, watched[i].pubsub)
			}
		}
		if round == 0 {
			continue
		}
		for _, i := range impls {
			rows[i].add(results[i], rates[i], 0)
			rows[i].ratios = append(rows[i].ratios, rates[i]/rates[clusterFloor])
			rows[i].conns.add(watched[i], cfg.slice)
		}
	}
	return rows, nil
}

// writeClusterNotes writes what a cluster section's table needs besides its rows: how the
// rows use the cluster, the connections they cost (conns.go), and aqs against the fastest
// other library.
func writeClusterNotes(b *strings.Builder, sc scenario, rows []row) {
	b.WriteString("\nOn a Redis Cluster of 3 masters and no replicas, started by the run on loopback. Each process " +
		"has one go-redis ClusterClient, shared by aqs, redsync, redislock and the floor")
	if sc.cart {
		b.WriteString(". Every name of a slice has the same hash tag, so all live on one master.\n")
	} else {
		b.WriteString("; rueidislock has its own rueidis client. \"A value per goroutine and name\": each goroutine builds " +
			"its own Lock value of every name before the slice, where the other aqs rows share one value of a name among the " +
			"process's goroutines.\n")
	}
	writeConns(b, rows)
	// aqs against the fastest other library, round by round, as the conclusions do elsewhere.
	var parts []string
	best, bestRate := -1, 0.0
	for _, o := range clusterOtherRows {
		if len(rows[o].rates) > 0 && median(rows[o].rates) > bestRate {
			best, bestRate = o, median(rows[o].rates)
		}
	}
	if best < 0 {
		return
	}
	for _, i := range clusterAQSRows {
		var ratios []float64
		for k, x := range rows[i].rates {
			top := 0.0
			for _, o := range clusterOtherRows {
				if k < len(rows[o].rates) {
					top = max(top, rows[o].rates[k])
				}
			}
			if top > 0 {
				ratios = append(ratios, x/top)
			}
		}
		if len(ratios) > 0 {
			parts = append(parts, fmt.Sprintf("%s %.2f×", strings.TrimPrefix(clusterImplNames[i], "aqs "), median(ratios)))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(b, "\nAgainst the fastest other library in the same round (%s has the highest median): aqs %s.\n",
			clusterImplNames[best], strings.Join(parts, ", "))
	}
}
