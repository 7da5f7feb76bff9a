package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Where the CPU goes: each slice also measures, over its window (start to stop), the CPU time
// and the wake-ups of the processes that ran it, and of the redis-server that served it.
//
//   - A process's CPU is its user and system time (getrusage, every thread), and its wake-ups
//     are its voluntary context switches: a thread that blocked (on the network, a futex) and
//     was woken. A contender process reports its own; the parent adds them up.
//   - The server's CPU is INFO's used_cpu_user + used_cpu_sys, and its wake-ups are the
//     voluntary context switches of its main thread (/proc), which runs every command.
//
// Divided by the acquisitions of the slice, they say what one hand-off costs: on 2 cores
// shared by Redis and every client, the CPU spent per hand-off is what bounds the rate.

// usage is a process's CPU time and wake-ups so far.
type usage struct{ cpu, wakes, cmds int64 }

// serverWatch samples a redis-server's usage.
type serverWatch struct {
	rdb *redis.Client
	pid string // its process id, for /proc; "" when unknown
}

func newServerWatch(ctx context.Context, rdb *redis.Client) *serverWatch {
	w := &serverWatch{rdb: rdb}
	if info, err := rdb.Info(ctx, "server").Result(); err == nil {
		w.pid = infoField(info, "process_id")
	}
	return w
}

// usage returns the server's usage so far; ok is false when it could not be read.
func (w *serverWatch) usage(ctx context.Context) (u usage, ok bool) {
	info, err := w.rdb.Info(ctx, "cpu", "stats").Result()
	if err != nil {
		return usage{}, false
	}
	if u.cmds, err = strconv.ParseInt(infoField(info, "total_commands_processed"), 10, 64); err != nil {
		return usage{}, false
	}
	user, err1 := strconv.ParseFloat(infoField(info, "used_cpu_user"), 64)
	sys, err2 := strconv.ParseFloat(infoField(info, "used_cpu_sys"), 64)
	if err1 != nil || err2 != nil {
		return usage{}, false
	}
	u.cpu = int64((user + sys) * 1e9)
	if w.pid != "" {
		status, err := os.ReadFile("/proc/" + w.pid + "/status")
		if err != nil {
			return usage{}, false
		}
		for line := range strings.Lines(string(status)) {
			if v, found := strings.CutPrefix(line, "voluntary_ctxt_switches:"); found {
				u.wakes, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			}
		}
	}
	return u, true
}

// window samples the server at start and at stop, in the background; the returned function
// waits for the second sample and returns the difference (ok false when a sample failed).
func (w *serverWatch) window(start, stop time.Time) func() (usage, bool) {
	done := make(chan struct{})
	var d usage
	var ok bool
	go func() {
		defer close(done)
		ctx := context.Background()
		time.Sleep(time.Until(start))
		a, okA := w.usage(ctx)
		time.Sleep(time.Until(stop))
		b, okB := w.usage(ctx)
		// The second sample's INFO is not counted yet when it is served; the first's is.
		d, ok = usage{cpu: b.cpu - a.cpu, wakes: b.wakes - a.wakes, cmds: b.cmds - a.cmds - 1}, okA && okB
	}()
	return func() (usage, bool) {
		<-done
		return d, ok
	}
}

// infoField returns the value of key in an INFO reply, "" when absent.
func infoField(info, key string) string {
	for line := range strings.Lines(info) {
		if v, found := strings.CutPrefix(line, key+":"); found {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// fmtPer formats a per-acquisition figure: CPU in µs, wake-ups as a count.
func fmtPer(total int64, ops int64, cpu bool) string {
	if ops == 0 {
		return "—"
	}
	x := float64(total) / float64(ops)
	if cpu {
		return fmt.Sprintf("%.1f µs", x/1e3)
	}
	return fmt.Sprintf("%.2f", x)
}

// writeCPUTable writes, under a scenario's table, what each Redis row's acquisition (or a
// floor's operation) cost in CPU and wake-ups, of the client processes and of the server.
func writeCPUTable(b *strings.Builder, rows []row) {
	var lines []string
	for i, r := range rows {
		if len(r.rates) == 0 || r.acquired == 0 || peerVariant(i) != noPeer {
			continue
		}
		lines = append(lines, fmt.Sprintf("| %s | %s | %s | %s | %s | %s |", implNames[i],
			fmtPer(r.used.cpu, r.acquired, true), fmtPer(r.server.cpu, r.served, true),
			fmtPer(r.server.cmds, r.served, false),
			fmtPer(r.used.wakes, r.acquired, false), fmtPer(r.server.wakes, r.served, false)))
	}
	if len(lines) == 0 {
		return
	}
	b.WriteString("\nWhere the CPU goes, per acquisition (a floor row: per operation), over the measured slices: " +
		"the client processes' CPU (the critical section's busy work included) and the server's, the commands " +
		"the server ran (a script's own calls counted, as INFO counts them), and how often a client thread and the server's main thread were woken from sleep.\n\n")
	b.WriteString("| Implementation | client CPU | server CPU | server commands | client wake-ups | server wake-ups |\n|---|--:|--:|--:|--:|--:|\n")
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
}

// handOffConclusion returns the conclusions' paragraph on what one hand-off costs on a hot
// name, beside the FIFO floor's: for the one-key scenarios of 8 goroutines and of several
// processes, each FIFO row's client and server CPU, server commands and client wake-ups per
// acquisition; "" when neither ran.
func handOffConclusion(byTag map[string]result) string {
	rowsOf := []struct {
		row  int
		name string
	}{{fifoFloor, "the FIFO floor"}, {5, "aqs fair"}, {6, "the counting semaphore"}, {rwlockRow, "the rwlock's write side"}}
	var lines []string
	for _, tag := range []string{"8", "procs"} {
		r, ok := byTag[tag]
		if !ok {
			continue
		}
		var parts []string
		for _, x := range rowsOf {
			row := r.rows[x.row]
			if row.acquired == 0 || row.served == 0 {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %s client + %s server CPU, %s server commands, %s client wake-ups", x.name,
				fmtPer(row.used.cpu, row.acquired, true), fmtPer(row.server.cpu, row.served, true),
				fmtPer(row.server.cmds, row.served, false), fmtPer(row.used.wakes, row.acquired, false)))
		}
		if len(parts) > 1 {
			lines = append(lines, fmt.Sprintf("  - %s: %s.", scenarioLabel(r.sc), strings.Join(parts, "; ")))
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return "What one hand-off on a hot name costs, per acquisition (the tables' CPU sections; the critical section's 10µs of busy work is in the client's figure):\n" +
		strings.Join(lines, "\n")
}
