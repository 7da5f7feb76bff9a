package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The charts that open BENCHMARKS.md.
//
// A reader should see at a glance where aqs stands, before reading any table: so the run
// draws two figures of its own results, acquisitions per second and p99 wait, one panel per
// scenario and one bar per row of its table, aqs's rows in blue, the other libraries in grey,
// the floors (what no lock can beat, not locks themselves) hatched. The SVG is written by
// hand, with fmt: the bench module takes no plotting dependency for two bar charts.
//
// Throughput panels each have their own linear scale from zero, because the report's figures
// are to be read as ratios within a table (the machine's rate drifts from scenario to
// scenario). The floors of single commands (PING, EVALSHA, the server's pipelined capacity)
// run several to many times faster than any lock cycle and would squash the locks, which a
// panel is there to compare, to slivers: they set no scale, and a bar of theirs that passes
// the scale's end is drawn broken at the panel's edge, its value written beside it (see
// panelScale). Waits span orders of magnitude, from a hand-off's few round trips to a
// library's 100 ms retry sleep, so the p99 chart has one log scale for all its panels. A row
// with no figure (— in its table) has no bar.

// chartsFolder is where a report written to the file out keeps its charts, and chartsLink the
// same folder as the report's links name it (relative to the report's folder, with slashes).
const chartsLink = "bench/charts"

func chartsFolder(out string) string {
	return filepath.Join(filepath.Dir(out), filepath.FromSlash(chartsLink))
}

// The charts' files in chartsFolder.
const (
	throughputFile = "throughput.svg"
	p99File        = "p99.svg"
)

// writeCharts writes the throughput and p99 charts of results into folder, creating it. On
// failure a chart may be missing or partly written.
func writeCharts(folder string, results []result) error {
	if err := os.MkdirAll(folder, 0o755); err != nil {
		return err
	}
	for name, c := range map[string]chart{throughputFile: throughputChart(results), p99File: p99Chart(results)} {
		if err := os.WriteFile(filepath.Join(folder, name), c.svg(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeChartLinks writes the Markdown that shows the charts written by writeCharts into
// chartsFolder of the report's file.
func writeChartLinks(b *strings.Builder) {
	fmt.Fprintf(b, "![Acquisitions per second in each scenario: aqs's locks beside the other libraries and the floors](%s/%s)\n\n",
		chartsLink, throughputFile)
	fmt.Fprintf(b, "![Wait p99 in each scenario, log scale: aqs's locks beside the other libraries](%s/%s)\n\n",
		chartsLink, p99File)
}

// barKind is what a row is, which gives its bar's colour and its place in a panel: the kinds
// are in the order the panels show them.
type barKind int

const (
	kindFloor      barKind = iota // a floor or the server's capacity: a reference, not a lock
	kindAQS                       // one of aqs's locks
	kindAQSPerCall                // one of aqs's locks, a Lock value built per acquisition
	kindOther                     // another library's lock
)

// kindOf tells a row's kind by its name, so that rows added to implNames need no entry here.
func kindOf(name string) barKind {
	switch {
	case strings.HasPrefix(name, "aqs ") && strings.Contains(name, "per call"):
		return kindAQSPerCall
	case strings.HasPrefix(name, "aqs "):
		return kindAQS
	case strings.Contains(name, "floor") || strings.HasPrefix(name, "capacity"):
		return kindFloor
	}
	return kindOther
}

// chartNames are the rows' names in the charts, shorter than the tables' so that two panels
// fit side by side; a row not listed keeps its table name.
var chartNames = map[string]string{
	"floor: PING":                                                     "floor: PING",
	"floor: EVALSHA `return 1`":                                       "floor: EVALSHA",
	"floor: SET NX PX + compare-and-delete":                           "floor: SET NX + del",
	"FIFO floor: BLPOP + RPUSH of a token":                            "FIFO floor: BLPOP",
	"aqs counting semaphore, 1 permit":                                "aqs semaphore, 1 permit",
	"redsync (defaults)":                                              "redsync",
	"redsync, retry delay 1ms":                                        "redsync, 1ms retry",
	"redislock, linear 100ms":                                         "redislock, 100ms",
	"redislock, linear 1ms":                                           "redislock, 1ms",
	"rueidislock (defaults)":                                          "rueidislock",
	"capacity: SET × 16 per pipeline":                                 "capacity: SET ×16",
	"aqs reentrant, a value per call":                                 "aqs reentrant, per call",
	"aqs fair, a value per call":                                      "aqs fair, per call",
	"aqs reentrant, a value per goroutine and name":                   "aqs reentrant, per goroutine",
	"aqs fair, a value per goroutine and name":                        "aqs fair, per goroutine",
	"etcd floor (fsync): Txn create + compare-and-delete":             "etcd floor: Txn",
	"etcd concurrency.Mutex (fsync)":                                  "etcd Mutex",
	"etcd floor (--unsafe-no-fsync): Txn create + compare-and-delete": "etcd floor: Txn, no fsync",
	"etcd concurrency.Mutex (--unsafe-no-fsync)":                      "etcd Mutex, no fsync",
	"ZooKeeper floor: create + delete of an ephemeral node":           "ZooKeeper floor: create + delete",
	"ZooKeeper lock recipe (go-zookeeper zk.Lock)":                    "ZooKeeper lock",
	"aqs multilock, a value per cart":                                 "aqs multilock",
	"aqs fair, one name at a time in sorted order":                    "aqs fair, one at a time",
	"redislock, sorted, release all and retry":                        "redislock, retry all",
	"redsync, sorted, release all and retry":                          "redsync, retry all",
}

func chartName(name string) string {
	if s, ok := chartNames[name]; ok {
		return s
	}
	return name
}

// bar is one row's figure in one panel.
type bar struct {
	row   string // the row's name in its table
	kind  barKind
	v     float64 // in the chart's unit: per second, or nanoseconds
	label string  // v as written beside the bar
	// single marks a floor of single commands (PING, EVALSHA, the pipelined SETs), which
	// sets no linear panel's scale: see panelScale.
	single bool
}

// panel is one scenario's bars: the floors, aqs's, aqs's with a value per call, the other
// libraries', each kind in the order of the table (see byKind).
type panel struct {
	tag, title string
	bars       []bar
}

// chart is one figure: a panel per scenario, in a grid of two columns.
type chart struct {
	title    string
	subtitle []string // lines under the title
	log      bool     // one log scale for all panels; otherwise a linear one from 0 per panel
	tick     func(float64) string
	notes    []note // legend entries after the kinds' swatches
	panels   []panel
}

// note is an entry of a chart's legend: a text, after the sign of a broken bar if broken.
type note struct {
	text   string
	broken bool
}

// throughputChart draws every row's median acquisitions (or operations) per second.
func throughputChart(results []result) chart {
	c := chart{
		title: "Acquisitions per second in each scenario (higher is better)",
		subtitle: []string{
			"Median over the rounds. Each panel has its own linear scale from 0, set by the locks and the lock cycle's",
			"floor (SET NX + del): compare the bars within a panel. Floors of single commands may run past it.",
		},
		tick: fmtTickRate,
	}
	for _, r := range results {
		p := panel{tag: r.sc.tag, title: r.sc.title}
		for i, row := range r.rows {
			if v := median(row.rates); len(row.rates) > 0 && !math.IsNaN(v) {
				name := rowName(r.sc, i)
				p.bars = append(p.bars, bar{row: name, kind: kindOf(name), v: v, label: fmtChartRate(v),
					single: !r.sc.cluster && (i == floorPing || i == floorEval || i == capacityRow)})
			}
		}
		if len(p.bars) > 0 {
			c.panels = append(c.panels, byKind(p))
		}
	}
	for _, p := range c.panels {
		s := panelScale(p.bars)
		if slices.ContainsFunc(p.bars, func(b bar) bool { return b.v > s.hi }) {
			c.notes = []note{{text: "runs past its panel's scale", broken: true}}
			break
		}
	}
	return c
}

// p99Chart draws every lock's p99 wait, from calling Lock to holding the lock.
func p99Chart(results []result) chart {
	c := chart{
		title: "Wait p99 in each scenario, from calling Lock to holding the lock (lower is better)",
		subtitle: []string{
			"All rounds pooled. Log scale, the same in every panel: each grid line is 10× the one before.",
		},
		log:   true,
		tick:  fmtTickDur,
		notes: []note{{text: "≥: a lower bound, the wait was cut off by the slice's end"}},
	}
	for _, r := range results {
		p := panel{tag: r.sc.tag, title: r.sc.title}
		for i, row := range r.rows {
			if isFloorRow(r.sc, i) || len(row.rates) == 0 {
				continue
			}
			d, lower, ok := waitQuantile(row.waits, row.cut, 0.99)
			if !ok || d <= 0 {
				continue
			}
			label := fmtDur(d)
			if lower {
				label = "≥ " + label
			}
			name := rowName(r.sc, i)
			p.bars = append(p.bars, bar{row: name, kind: kindOf(name), v: float64(d), label: label})
		}
		if len(p.bars) > 0 {
			c.panels = append(c.panels, byKind(p))
		}
	}
	return c
}

// byKind returns p with its bars grouped by kind, floors first, then aqs's locks, then the
// other libraries', so that aqs's bars stand together beside the others; within a kind the
// table's order stays.
func byKind(p panel) panel {
	slices.SortStableFunc(p.bars, func(a, b bar) int { return int(a.kind) - int(b.kind) })
	return p
}

// fmtChartRate writes a rate in three significant digits, thousands as k.
func fmtChartRate(x float64) string {
	switch {
	case x >= 1e5:
		return fmt.Sprintf("%.0fk", x/1e3)
	case x >= 1e4:
		return fmt.Sprintf("%.1fk", x/1e3)
	case x >= 1e3:
		return fmt.Sprintf("%.2fk", x/1e3)
	case x >= 10:
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.1f", x)
}

// fmtTickRate writes a linear axis's round value: 0, 250, 5k, 12.5k.
func fmtTickRate(x float64) string {
	if x >= 1000 {
		return fmt.Sprintf("%gk", x/1e3)
	}
	return fmt.Sprintf("%g", x)
}

// fmtTickDur writes a log axis's power of ten of nanoseconds: 10 µs, 1 ms, 1 s.
func fmtTickDur(ns float64) string {
	d := time.Duration(math.Round(ns))
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%g s", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%g ms", float64(d)/1e6)
	case d >= time.Microsecond:
		return fmt.Sprintf("%g µs", float64(d)/1e3)
	}
	return fmt.Sprintf("%g ns", ns)
}
