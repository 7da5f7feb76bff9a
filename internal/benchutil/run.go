package benchutil

import (
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Span is how long each measured phase of a throughput benchmark runs: AQS_BENCH_SPAN
// shortens it (make test runs every benchmark once that way, so that none of them rots); the
// figures want the default, 2s.
var Span = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("AQS_BENCH_SPAN")); err == nil && d > 0 {
		return d
	}
	return 2 * time.Second
}()

// Run starts n goroutines that call f (with their number) until span has passed, and returns
// the calls made and the time taken.
func Run(n int, span time.Duration, f func(g int)) (int64, time.Duration) {
	var calls atomic.Int64
	stop := time.Now().Add(span)
	start := time.Now()
	var wg sync.WaitGroup
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				f(g)
				calls.Add(1)
			}
		}()
	}
	wg.Wait()
	return calls.Load(), time.Since(start)
}

// Shapes measures how a lock serves n goroutines held two ways, interleaved in rounds so that
// drift of a shared machine hits both alike: shared, every goroutine acquiring through one
// value; per, a value built for every acquisition, as a request handler builds it. Each is
// one Lock/Unlock cycle of goroutine g. It returns the median over the rounds of per's
// acquisitions per second as a ratio of shared's (1.0: building a value per call costs
// nothing), and the two medians.
func Shapes(n, rounds int, span time.Duration, shared, per func(g int)) (ratio, sharedRate, perRate float64) {
	var ratios, sr, pr []float64
	rate := func(f func(int)) float64 {
		calls, took := Run(n, span, f)
		return float64(calls) / took.Seconds()
	}
	for r := 0; r < rounds; r++ {
		var s, p float64
		if r%2 == 0 {
			s, p = rate(shared), rate(per)
		} else {
			p, s = rate(per), rate(shared)
		}
		ratios, sr, pr = append(ratios, p/s), append(sr, s), append(pr, p)
	}
	return median(ratios), median(sr), median(pr)
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
