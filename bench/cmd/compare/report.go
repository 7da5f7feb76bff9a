package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// result is one scenario's rows.
type result struct {
	sc   scenario
	rows []row
}

// machine is what the report says of the run's machine and time.
type machine struct {
	began, ended       time.Time
	loadStart, loadEnd string
	cpu, kernel, redis string
	peers              *peerServers // the fair peers' servers (peers_server.go)
}

// takeMachine notes the machine, the server's version and the time and load at the start.
func takeMachine(ctx context.Context, addr string) machine {
	m := machine{began: time.Now(), loadStart: loadAvg(), cpu: "unknown", kernel: runtime.GOOS, redis: "redis-server unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = runtime.GOOS + " " + strings.TrimSpace(string(b))
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	if info, err := rdb.InfoMap(ctx, "server").Result(); err == nil {
		m.redis = "redis-server " + info["Server"]["redis_version"]
		// Valkey reports the Redis version it is compatible with (7.2.4) as redis_version,
		// and its own as valkey_version.
		if v, ok := info["Server"]["valkey_version"]; ok {
			m.redis = "valkey-server " + v
		}
	}
	_ = rdb.Close()
	return m
}

// loadAvg returns the load averages over 1, 5 and 15 minutes where /proc/loadavg exists,
// otherwise "unknown".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// version returns the version of module path this program was built with.
func version(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "(unknown version)"
}

// writeReport writes the whole report: BENCHMARKS.md.
func writeReport(b *strings.Builder, m machine, cfg config, results []result) {
	b.WriteString(`# Benchmarks

aqs's locks against the other Go lock libraries on Redis, and against what no lock on Redis can
beat.

`)
	if cfg.out != "" {
		writeChartLinks(b) // writeCharts draws them beside the report's file
	}
	b.WriteString(`This file is written by ` + "`make bench-compare`" + ` (the program
[` + "`bench/cmd/compare`" + `](bench/cmd/compare), a module of its own so that the library's users
never download the libraries it compares against); each run replaces it, and its charts.

## Machine

`)
	fmt.Fprintf(b, "| | |\n|---|---|\n")
	fmt.Fprintf(b, "| Date | %s to %s |\n", m.began.UTC().Format("2006-01-02 15:04"), m.ended.UTC().Format("15:04 MST"))
	fmt.Fprintf(b, "| CPU | %s, %d CPUs |\n", m.cpu, runtime.NumCPU())
	fmt.Fprintf(b, "| OS | %s |\n", m.kernel)
	fmt.Fprintf(b, "| Go | %s, GOMAXPROCS %d |\n", runtime.Version(), runtime.GOMAXPROCS(0))
	fmt.Fprintf(b, "| Redis | %s on loopback, started by the run, no persistence |\n", m.redis)
	writePeerMachine(b, m.peers)
	fmt.Fprintf(b, "| Load average (1, 5, 15 min) | %s at the start, %s at the end |\n", m.loadStart, m.loadEnd)

	fmt.Fprintf(b, `
## Method

- **Interleaved rounds.** Each scenario runs %d measured rounds after one warm-up round. A round
  gives every row one slice of %v against the same redis-server, in an order rotated from
  round to round, so that the rows of a table share the machine's conditions. Each slice
  uses fresh keys. Figures are medians over the rounds; read them as ratios within a table,
  not as absolute rates.
- **The loop.** Every goroutine loops: lock, critical section, unlock. The critical section
  checks a witness (is anyone else inside?) and busy-works for %v; in the "Redis I/O"
  scenarios it also makes two GETs on the application's own go-redis client. Across processes
  the witness lives in shared memory, so an overlap between processes counts too.
- **Processes.** The multi-process scenarios run copies of this program as contenders, each
  with its own clients and its own aqs.Client, as separate services would.
- **The end of a slice** cancels every pending Lock through its context; only acquisitions
  made before the end count.
- **Many names.** Each acquisition takes one of %d names at random (a lock per order, per
  seat), held for the time the title gives.
- **Carts.** Each acquisition takes a cart of %d to %d names at once (each size as likely),
  drawn from a pool of 100 or 1,000 names that share one hash tag, and holds all of them for
  the critical section: a shop reserving the SKUs of a cart. Only the ways to take a cart run
  there, beside the floor cycle (whose "× floor" is still one name's cycle). The witness keeps
  a mark per name, so an overlap on any name counts. A wait runs from the first call for a
  cart to holding all of its names, retries included.
- **Where the CPU goes.** Each slice also measures, over its window, the CPU time and the
  voluntary context switches (a thread woken from sleep) of the processes that ran it, and the
  redis-server's CPU, commands (a script's own calls counted, as INFO counts them) and main
  thread wake-ups; a table under each single-server scenario divides them by the
  acquisitions. On 2 cores shared by Redis and the clients, what a hand-off costs both sides,
  and how long Redis takes over it (the next holder waits for it), bounds the rate. The
  Redis instructions of each script path, beside the floors', are measured by
  `+"`make callgrind`"+` (internal/scripts/cost_test.go).

| Row | What it is |
|---|---|
| floor: PING | PING, as fast as the goroutines can send it |
| floor: EVALSHA `+"`return 1`"+` | the cheapest script call |
| floor: SET NX PX + compare-and-delete | the minimal correct lock cycle (two round trips), each goroutine on a key of its own, so that nothing waits: the "× floor" column's denominator |
| FIFO floor: BLPOP + RPUSH of a token | the cheapest strictly FIFO hand-off on one key; not a usable lock (no lease) |
| aqs reentrant, aqs fair | one aqs.Client per process, one Lock value shared by its goroutines, default options |
| aqs counting semaphore, 1 permit | semaphore.New with 1 permit: Acquire(ctx, 1) / Release(ctx, 1) |
| aqs rwlock, write side | rwlock.New: Lock / Unlock, the write side alone, on one name (the one-key scenarios) |
| redsync | go-redsync/redsync %s: defaults (32 tries, 50-250 ms between them), and with a 1 ms retry delay |
| redislock | bsm/redislock %s, linear retry of 100 ms and of 1 ms |
| rueidislock | redis/rueidis %s rueidislock, defaults (3 keys, majority of 2) |
| capacity: SET × 16 per pipeline | the server's pipelined capacity (many-names scenarios) |
| aqs reentrant, aqs fair, a value per call | the same Client, with a Lock value built for every acquisition (New in a request's handler) |
| aqs multilock, a value per cart | (carts) multilock.New on the cart's names for every cart, then Lock / Unlock: one request in every name's queue at once |
| aqs fair, one name at a time in sorted order | (carts) a fair.Lock per name shared by the process's goroutines, locked in sorted order, each on the held context of the one before, unlocked in reverse |
| redislock / redsync, sorted, release all and retry | (carts) what their users write today: one try of each name in sorted order (redislock Obtain without retry, redsync TryLockContext); on the first name taken, release those taken, pause %v ± 50%%, start again |

Each library has its own go-redis %s client with its defaults (rueidislock its own rueidis
client).

| Column | Meaning |
|---|---|
| acq/s | acquisitions (floor rows: operations) per second |
| × floor | acq/s over the floor lock cycle's rate in the same round, run by as many goroutines |
| wait p50 / p99 / max | from calling Lock to holding the lock, all rounds pooled; ≥ marks a wait cut off by the slice's end (a lower bound) |
| releaser re-acquires | share of acquisitions taken by the goroutine that held the lock just before: near 100%% means the others starve |
| Jain | Jain's fairness index of the goroutines' acquisition counts: 1 when all got as many, 1/n when one got them all |
| overlaps | critical sections that found another holder inside: must be 0 |
| errors | calls that failed (and were retried) |
| acquisitions | acquisitions counted over all rounds: the sample behind the figures |
`, cfg.rounds, cfg.slice, cfg.work, manyNames, cartMin, cartMax,
		version("github.com/go-redsync/redsync/v4"), version("github.com/bsm/redislock"),
		version("github.com/redis/rueidis"), cartBackoff, version("github.com/redis/go-redis/v9"))
	writePeerMethod(b, m.peers)
	b.WriteString("\n## Results\n")
	for _, r := range results {
		writeTable(b, r.sc, r.rows)
	}
	if cs := conclusions(results); len(cs) > 0 {
		b.WriteString("\n## Conclusions\n\n")
		for _, c := range cs {
			fmt.Fprintf(b, "- %s\n", c)
		}
	}
}

// The rows of aqs, and of the other libraries.
var (
	aqsRows   = []int{4, 5, 6, capacityRow + 1, capacityRow + 2}
	otherRows = []int{7, 8, 9, 10, 11}
)

// vsBest returns the median over rounds of row i's rate over the fastest other library's rate
// in the same round, and the name of the other library with the highest median rate; ok is
// false when either is missing.
func vsBest(rows []row, i int) (ratio float64, best int, ok bool) {
	mine := rows[i].rates
	if len(mine) == 0 {
		return 0, 0, false
	}
	best = -1
	var ratios []float64
	for k := range mine {
		top := 0.0
		for _, o := range otherRows {
			if k < len(rows[o].rates) {
				top = max(top, rows[o].rates[k])
			}
		}
		if top > 0 {
			ratios = append(ratios, mine[k]/top)
		}
	}
	for _, o := range otherRows {
		if len(rows[o].rates) > 0 && (best < 0 || median(rows[o].rates) > median(rows[best].rates)) {
			best = o
		}
	}
	if best < 0 || len(ratios) == 0 {
		return 0, 0, false
	}
	return median(ratios), best, true
}

// conclusions returns the findings of the run, computed from its tables.
func conclusions(results []result) []string {
	byTag := map[string]result{}
	for _, r := range results {
		byTag[r.sc.tag] = r
	}
	var out []string
	// versus lists aqs's rows against the fastest other library in the scenario of tag.
	versus := func(tag string, showFair bool) {
		r, ok := byTag[tag]
		if !ok {
			return
		}
		what := fmt.Sprintf("One hot name, %d goroutines in one process", r.sc.goroutines)
		if r.sc.names > 0 {
			what = fmt.Sprintf("Many names, %d goroutines in one process", r.sc.goroutines)
		}
		if r.sc.procs > 1 {
			what = fmt.Sprintf("%s, %d processes × %d goroutines", strings.Split(what, ",")[0], r.sc.procs, r.sc.goroutines)
		}
		var parts []string
		best := -1
		for _, i := range aqsRows {
			x, b, ok := vsBest(r.rows, i)
			if !ok {
				continue
			}
			best = b
			parts = append(parts, fmt.Sprintf("%s %.2f×", strings.TrimPrefix(implNames[i], "aqs "), x))
		}
		if best < 0 {
			return
		}
		line := fmt.Sprintf("%s: aqs %s the acquisitions per second of the fastest other library (%s)",
			what, strings.Join(parts, ", "), implNames[best])
		if showFair {
			o := r.rows[best]
			if j := median(o.jains); !math.IsNaN(j) && o.acquired > 0 {
				line += fmt.Sprintf(", whose releaser re-took the lock %.0f%% of the time (Jain %.2f; aqs fair %.2f)",
					100*float64(o.repeats)/float64(o.acquired), j, median(r.rows[5].jains))
			}
		}
		if r.rows[4].trips > 0 {
			line += fmt.Sprintf("; the aqs Client sent %.1f commands per round trip", float64(r.rows[4].cmds)/float64(r.rows[4].trips))
		}
		out = append(out, line+".")
	}
	versus("many", false)
	versus("many-procs", false)
	versus("32", true)
	versus("procs", true)
	for _, r := range results {
		if r.sc.cart {
			if s := cartSummary(r.sc, r.rows); s != "" {
				where := ""
				if r.sc.cluster {
					where = ", Redis Cluster"
				}
				out = append(out, fmt.Sprintf("Carts of %d–%d names among %d, %d processes × %d goroutines%s: %s",
					cartMin, cartMax, r.sc.names, r.sc.procs, r.sc.goroutines, where, s))
			}
		}
	}
	if p := peerConclusion(results); p != "" {
		out = append(out, p)
	}
	if h := handOffConclusion(byTag); h != "" {
		out = append(out, h)
	}

	var overlaps, failures, acquired int64
	for _, r := range results {
		for i, row := range r.rows {
			if lockRow(r.sc, i) {
				overlaps += row.overlaps
				failures += row.failures
				acquired += row.acquired
			}
		}
	}
	if acquired > 0 {
		out = append(out, fmt.Sprintf("Mutual exclusion: %d overlaps in %d acquisitions of every lock in every scenario; %d failed calls.",
			overlaps, acquired, failures))
	}
	return out
}
