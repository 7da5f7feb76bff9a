package main

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redaqs/aqs"
)

// aqs demo --metrics.
//
// With --metrics, every worker process installs an observer of its own on its aqs.Client
// (aqs.WithObserver): demoMetrics, which counts the events by primitive and keeps the waits and
// hold times in logarithmic buckets. When its role is over, after its "done" line, the worker
// prints them on one "metrics" line; the fleet (demo_proc.go) takes those lines in, whatever the
// scenario, and merges them, and the demo prints the scenario's figures when it ends. So the
// figures are of every worker process that ended on its own: the pool's killed worker takes
// its own with it, and the lease its death loses is seen by no Client (its permits come back
// when the lease runs out, in Redis). The parent's own Client, which sets up and inspects,
// takes no part. The percentiles are read from the buckets: each is an upper bound within 1/8
// of an octave (9%) of the true value.

// bucketsPerOctave sets the resolution of the duration buckets.
const bucketsPerOctave = 8

// durations counts durations in logarithmic buckets: bucket 0 holds everything under 1µs,
// bucket i > 0 durations below 1µs * 2^(i/bucketsPerOctave).
type durations map[int]int64

func bucketOf(d time.Duration) int {
	us := float64(d) / float64(time.Microsecond)
	if us < 1 {
		return 0
	}
	return int(math.Floor(math.Log2(us)*bucketsPerOctave)) + 1
}

// upper returns the upper bound of bucket i.
func upper(i int) time.Duration {
	return time.Duration(math.Pow(2, float64(i)/bucketsPerOctave) * float64(time.Microsecond))
}

// quantile returns the upper bound of the bucket that holds the q-quantile, or 0 when empty.
func (h durations) quantile(q float64) time.Duration {
	var n int64
	keys := make([]int, 0, len(h))
	for i, c := range h {
		n += c
		keys = append(keys, i)
	}
	if n == 0 {
		return 0
	}
	slices.Sort(keys)
	rank := int64(math.Ceil(q * float64(n)))
	var seen int64
	for _, i := range keys {
		if seen += h[i]; seen >= rank {
			return upper(i)
		}
	}
	return upper(keys[len(keys)-1])
}

// primitiveFigures are the figures of one primitive.
type primitiveFigures struct {
	acquired, gaveUp, failed, lost int64
	wait, hold                     durations
}

// demoMetrics is the workers' observer, and the parent's sum of what they report. It is safe
// for concurrent use, and never blocks for long.
type demoMetrics struct {
	mu  sync.Mutex
	by  map[string]*primitiveFigures
	got int // worker processes whose figures were merged
}

func newDemoMetrics() *demoMetrics { return &demoMetrics{by: map[string]*primitiveFigures{}} }

func (m *demoMetrics) figures(primitive string) *primitiveFigures {
	f := m.by[primitive]
	if f == nil {
		f = &primitiveFigures{wait: durations{}, hold: durations{}}
		m.by[primitive] = f
	}
	return f
}

// Observe counts e (see aqs.Observer).
func (m *demoMetrics) Observe(e aqs.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.figures(e.Primitive)
	switch e.Kind {
	case aqs.EventAcquired:
		f.acquired++
		f.wait[bucketOf(e.Wait)]++
	case aqs.EventGaveUp:
		f.gaveUp++
	case aqs.EventFailed:
		f.failed++
	case aqs.EventReleased:
		f.hold[bucketOf(e.Hold)]++
	case aqs.EventLeaseLost:
		f.lost++
	}
}

// The metrics line: "metrics" and, per primitive, one word
// "<primitive>/<acquired>/<gave up>/<failed>/<lost>/<wait buckets>/<hold buckets>", the
// buckets as "<bucket>:<count>" joined by commas.
const lineMetrics = "metrics"

// words returns the figures as the metrics line's words.
func (m *demoMetrics) words() []any {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []any{lineMetrics}
	for _, p := range slices.Sorted(maps.Keys(m.by)) {
		f := m.by[p]
		out = append(out, fmt.Sprintf("%s/%d/%d/%d/%d/%s/%s", p, f.acquired, f.gaveUp, f.failed, f.lost,
			encodeBuckets(f.wait), encodeBuckets(f.hold)))
	}
	return out
}

func encodeBuckets(h durations) string {
	parts := make([]string, 0, len(h))
	for i, c := range h {
		parts = append(parts, fmt.Sprintf("%d:%d", i, c))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// merge adds the figures of a metrics line's words (after "metrics") of one worker process.
func (m *demoMetrics) merge(words []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range words {
		parts := strings.Split(w, "/")
		if len(parts) != 7 {
			return fmt.Errorf("bad metrics word %q", w)
		}
		f := m.figures(parts[0])
		for i, dst := range []*int64{&f.acquired, &f.gaveUp, &f.failed, &f.lost} {
			n, err := strconv.ParseInt(parts[1+i], 10, 64)
			if err != nil {
				return fmt.Errorf("bad metrics word %q", w)
			}
			*dst += n
		}
		for i, h := range []durations{f.wait, f.hold} {
			if parts[5+i] == "" {
				continue
			}
			for _, b := range strings.Split(parts[5+i], ",") {
				k, c, ok := strings.Cut(b, ":")
				bi, err1 := strconv.Atoi(k)
				n, err2 := strconv.ParseInt(c, 10, 64)
				if !ok || err1 != nil || err2 != nil {
					return fmt.Errorf("bad metrics word %q", w)
				}
				h[bi] += n
			}
		}
	}
	m.got++
	return nil
}

// print prints the figures of one scenario, a line per primitive.
func (m *demoMetrics) print(w io.Writer, processes int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fmt.Fprintf(w, "  metrics of the workers' aqs Clients (%d of %d processes reported):\n", m.got, processes)
	if len(m.by) == 0 {
		fmt.Fprintln(w, "    no events")
		return
	}
	for _, p := range slices.Sorted(maps.Keys(m.by)) {
		f := m.by[p]
		fmt.Fprintf(w, "    %-16s acquisitions %d, wait p50 %v p99 %v, hold p50 %v p99 %v, give-ups %d, errors %d, leases lost %d\n",
			p, f.acquired, round(f.wait.quantile(0.5)), round(f.wait.quantile(0.99)),
			round(f.hold.quantile(0.5)), round(f.hold.quantile(0.99)), f.gaveUp, f.failed, f.lost)
	}
}

// round rounds a percentile to three significant figures or so, for reading.
func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
