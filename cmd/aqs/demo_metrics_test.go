package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// With --metrics, each scenario prints what the workers' Clients observed, merged from every
// worker process, a line per primitive.
func TestDemoWithMetricsPrintsEachScenariosFigures(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name, args := demoArgs(t, "tickets,config", "--redis", srv.Addr(), "--metrics")
	code, stdout, stderr := aqsRun(t.Context(), nil, args...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stdout, "metrics of the workers' aqs Clients (2 of 2 processes reported):")
	assert.Contains(t, stdout, "metrics of the workers' aqs Clients (3 of 3 processes reported):")
	// Every buyer visits the lock once per ticket it sells and once to find it sold out.
	assert.Regexp(t, `\n    fair +acquisitions (3[4-9]|[4-9]\d), wait p50 \S+ p99 \S+, hold p50 \S+ p99 \S+, give-ups 0, errors 0, leases lost 0\n`, stdout)
	assert.Regexp(t, `\n    rwlock-read +acquisitions [1-9]\d*, wait p50 `, stdout)
	assert.Regexp(t, `\n    rwlock-write +acquisitions 3, wait p50 \S+ p99 \S+, hold p50 \S+ p99 \S+, give-ups 0, errors 0, leases lost 0\n`, stdout)
	assertNoDemoKeys(t, srv, name)
}

// The figures survive their trip from a worker to the parent, and the percentiles are upper
// bounds within a bucket of the true value.
func TestDemoMetricsMergeAcrossProcessesAndBoundThePercentiles(t *testing.T) {
	a, b := newDemoMetrics(), newDemoMetrics()
	for i := 1; i <= 100; i++ {
		d := time.Duration(i) * time.Millisecond
		w := a
		if i%2 == 0 {
			w = b
		}
		w.figures("fair").acquired++
		w.figures("fair").wait[bucketOf(d)]++
	}
	b.figures("fair").lost++
	sum := newDemoMetrics()
	for _, m := range []*demoMetrics{a, b} {
		words := m.words()
		require.Equal(t, lineMetrics, words[0])
		var ws []string
		for _, w := range words[1:] {
			ws = append(ws, w.(string))
		}
		require.NoError(t, sum.merge(ws))
	}
	f := sum.by["fair"]
	assert.Equal(t, int64(100), f.acquired)
	assert.Equal(t, int64(1), f.lost)
	for q, want := range map[float64]time.Duration{0.5: 50 * time.Millisecond, 0.99: 99 * time.Millisecond} {
		got := f.wait.quantile(q)
		assert.GreaterOrEqual(t, got, want, "p%v", q*100)
		assert.Less(t, float64(got), float64(want)*1.1, "p%v", q*100)
	}
	assert.Error(t, sum.merge([]string{"fair/1/2"}))
}
