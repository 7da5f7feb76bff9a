package main

import (
	"fmt"
	"math"
	"strings"
)

// The fair peers in BENCHMARKS.md: the servers in the Machine table, their rows in the
// Method, each lock's distance to its server's floor under each table, and the conclusions'
// comparison of aqs's fair primitives with them and with the FIFO floor.

// writePeerMachine writes the Machine table's rows of the peers' servers.
func writePeerMachine(b *strings.Builder, ps *peerServers) {
	if ps == nil {
		return
	}
	var run []string
	if ps.etcd != "" {
		run = append(run, fmt.Sprintf("etcd %s, single-member servers (one syncing its log as shipped, one with --unsafe-no-fsync)", ps.etcd))
	}
	if ps.zk != "" {
		run = append(run, fmt.Sprintf("ZooKeeper %s, a standalone server as shipped (it syncs its log)", ps.zk))
	}
	if len(run) > 0 {
		fmt.Fprintf(b, "| Fair peers | %s; on loopback, started by the run, data in temporary directories |\n", strings.Join(run, "; "))
	}
	for _, why := range ps.leftOut {
		fmt.Fprintf(b, "| Left out | %s |\n", why)
	}
}

// writePeerMethod writes what the rows of the peers that ran are.
func writePeerMethod(b *strings.Builder, ps *peerServers) {
	if ps == nil || ps.etcd == "" && ps.zk == "" {
		return
	}
	fmt.Fprint(b, `
The fair peers are locks on other servers that grant in the order of arrival, as aqs fair does,
each beside the floor of its own server: the cheapest correct lock cycle there, on a key of its
own per goroutine (nothing waits), two writes as a hand-off of the peer's lock has at the least.

| Row | What it is |
|---|---|
`)
	if ps.etcd != "" {
		fmt.Fprintf(b, "| etcd floor: Txn create + compare-and-delete | a Txn that creates the key if absent (with a lease), the critical section, a Txn that deletes it if it is still the one created |\n")
		fmt.Fprintf(b, "| etcd concurrency.Mutex | go.etcd.io/etcd/client/v3 %s concurrency.Mutex: one client per process, a Session per goroutine (a Mutex's holder is its Session); "+
			"on an etcd that syncs as shipped, and on one started with --unsafe-no-fsync. A waiter watches its predecessor from the revision it read, which etcd serves from a loop that runs every 100 ms |\n",
			version("go.etcd.io/etcd/client/v3"))
	}
	if ps.zk != "" {
		fmt.Fprintf(b, "| ZooKeeper floor: create + delete of an ephemeral node | the critical section between the two |\n")
		fmt.Fprintf(b, "| ZooKeeper lock recipe | github.com/go-zookeeper/zk %s zk.Lock (an ephemeral sequential node, a watch on the one before): "+
			"one connection per process; it takes no context, so a Lock pending at a slice's end waits for its turn |\n",
			version("github.com/go-zookeeper/zk"))
	}
}

// ratioTo returns the median over rounds of row a's rate over row o's in the same round;
// ok is false when no round has both.
func ratioTo(rows []row, a, o int) (float64, bool) {
	var rs []float64
	for k := range rows[a].rates {
		if k < len(rows[o].rates) && rows[o].rates[k] > 0 {
			rs = append(rs, rows[a].rates[k]/rows[o].rates[k])
		}
	}
	if len(rs) == 0 {
		return 0, false
	}
	return median(rs), true
}

// peerFloorNotes returns the line under a table that says how far each peer's lock is from
// its server's floor.
func peerFloorNotes(rows []row) []string {
	var parts []string
	for _, pair := range [][2]int{{etcdMutexFsync, etcdFloorFsync}, {etcdMutexNoFsync, etcdFloorNoFsync}, {zkLockRow, zkFloorRow}} {
		if x, ok := ratioTo(rows, pair[0], pair[1]); ok {
			parts = append(parts, fmt.Sprintf("%s %.2f×", implNames[pair[0]], x))
		}
	}
	if len(parts) == 0 {
		return nil
	}
	return []string{"Each peer's lock over its own server's floor (acquisitions per second over floor cycles, per round): " +
		strings.Join(parts, ", ") + "."}
}

// peerConclusion returns the conclusions' paragraph on the fair peers: for each scenario that
// ran them, aqs fair's and the counting semaphore's rate over each peer lock's and over the
// FIFO floor's, and the Jain indexes; "" when no scenario ran a peer.
func peerConclusion(results []result) string {
	peers := []struct {
		row  int
		name string
	}{{etcdMutexNoFsync, "etcd (no fsync)"}, {etcdMutexFsync, "etcd (fsync)"}, {zkLockRow, "ZooKeeper"}, {fifoFloor, "the FIFO floor"}}
	var lines []string
	for _, r := range results {
		if r.sc.cluster || !(r.sc.io == 0 && r.sc.sleep == 0 && r.sc.procs*r.sc.goroutines > 1) {
			continue // the plain contended scenarios say it; the others add no new comparison
		}
		var mine []string
		for _, a := range []struct {
			row  int
			name string
		}{{5, "aqs fair"}, {6, "the counting semaphore"}, {rwlockRow, "the rwlock's write side"}} {
			var xs []string
			for _, p := range peers {
				if x, ok := ratioTo(r.rows, a.row, p.row); ok {
					xs = append(xs, fmt.Sprintf("%.3g× %s", x, p.name))
				}
			}
			if len(xs) > 0 {
				mine = append(mine, fmt.Sprintf("%s %s", a.name, strings.Join(xs, ", ")))
			}
		}
		if len(mine) == 0 {
			continue
		}
		var jains []string
		for _, j := range []struct {
			row  int
			name string
		}{{5, "aqs fair"}, {6, "semaphore"}, {etcdMutexNoFsync, "etcd (no fsync)"}, {etcdMutexFsync, "etcd (fsync)"}, {zkLockRow, "ZooKeeper"}} {
			if v := median(r.rows[j.row].jains); !math.IsNaN(v) {
				jains = append(jains, fmt.Sprintf("%s %.3f", j.name, v))
			}
		}
		line := fmt.Sprintf("%s: %s", scenarioLabel(r.sc), strings.Join(mine, "; "))
		if len(jains) > 0 {
			line += "; Jain " + strings.Join(jains, ", ")
		}
		lines = append(lines, "  - "+line+".")
	}
	if len(lines) == 0 {
		return ""
	}
	return "Against the fair peers and the FIFO floor (acquisitions per second, the median of the per-round ratios):\n" +
		strings.Join(lines, "\n")
}

// scenarioLabel names a scenario in a conclusion.
func scenarioLabel(sc scenario) string {
	what := "One hot name"
	if sc.names > 0 {
		what = "Many names"
	}
	if sc.procs > 1 {
		return fmt.Sprintf("%s, %d processes × %d goroutines", what, sc.procs, sc.goroutines)
	}
	return fmt.Sprintf("%s, %d goroutines in one process", what, sc.goroutines)
}
