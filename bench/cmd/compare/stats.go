package main

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// row gathers one implementation's slices in one scenario, over the measured rounds.
type row struct {
	rates    []float64 // per round: acquisitions (or operations) per second
	ratios   []float64 // per round: rate / the floor cycle's rate in the same round
	jains    []float64 // per round
	waits    []int64
	cut      []int64
	acquired int64
	repeats  int64
	failures int64
	overlaps int64
	firstErr string
	cmds     int64 // see sliceResult.Cmds
	trips    int64
	conns    *connStats // the cluster scenarios' connection counts (cluster.go); nil elsewhere
	used     usage      // the processes' CPU and wake-ups over the slices (cpu.go)
	server   usage      // the redis-server's, over the slices where it was measured
	served   int64      // the acquisitions of those slices
}

func (r *row) add(res sliceResult, rate float64, overlaps int64) {
	r.rates = append(r.rates, rate)
	if len(res.Counts) > 1 {
		r.jains = append(r.jains, jain(res.Counts))
	}
	r.waits = append(r.waits, res.Waits...)
	r.cut = append(r.cut, res.Cut...)
	r.acquired += res.Ops
	r.cmds += res.Cmds
	r.trips += res.Trips
	r.used.cpu += res.CPU
	r.used.wakes += res.Wakes
	if res.server != nil {
		r.server.cpu += res.server.cpu
		r.server.wakes += res.server.wakes
		r.server.cmds += res.server.cmds
		r.served += res.Ops
	}
	r.repeats += res.Repeats
	r.failures += res.Failures
	r.overlaps += overlaps
	if r.firstErr == "" {
		r.firstErr = res.FirstErr
	}
}

// jain is Jain's fairness index of counts: (Σx)² / (n·Σx²), 1 when all are equal, 1/n when
// one goroutine has them all.
func jain(counts []int64) float64 {
	var sum, sq float64
	for _, c := range counts {
		sum += float64(c)
		sq += float64(c) * float64(c)
	}
	if sq == 0 {
		return math.NaN()
	}
	return sum * sum / (float64(len(counts)) * sq)
}

func median(xs []float64) float64 {
	var ok []float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			ok = append(ok, x)
		}
	}
	if len(ok) == 0 {
		return math.NaN()
	}
	slices.Sort(ok)
	if n := len(ok); n%2 == 1 {
		return ok[n/2]
	} else {
		return (ok[n/2-1] + ok[n/2]) / 2
	}
}

// waitQuantile returns the nearest-rank q-quantile of the waits, completed and cut off
// together, and whether that sample is a wait cut off at a slice's end: then the wait it
// stands for lasted longer, and the figure is only a lower bound.
func waitQuantile(done, cut []int64, q float64) (v time.Duration, lower, ok bool) {
	type sample struct {
		ns  int64
		cut bool
	}
	n := len(done) + len(cut)
	if n == 0 {
		return 0, false, false
	}
	all := make([]sample, 0, n)
	for _, d := range done {
		all = append(all, sample{d, false})
	}
	for _, c := range cut {
		all = append(all, sample{c, true})
	}
	// Among equal values a completed wait sorts first, so a tie is not marked.
	sort.Slice(all, func(i, j int) bool {
		if all[i].ns != all[j].ns {
			return all[i].ns < all[j].ns
		}
		return !all[i].cut && all[j].cut
	})
	k := max(0, min(n-1, int(math.Ceil(q*float64(n)))-1))
	return time.Duration(all[k].ns), all[k].cut, true
}

// fmtDur prints d with three significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return trim3(d.Seconds()) + " s"
	case d >= time.Millisecond:
		return trim3(float64(d)/1e6) + " ms"
	default:
		return trim3(float64(d)/1e3) + " µs"
	}
}

func trim3(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.2f", x)
	}
}

// fmtRate prints a rate per second with no more precision than it has.
func fmtRate(x float64) string {
	switch {
	case math.IsNaN(x):
		return "—"
	case x >= 1000:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.2f", x)
	}
}
