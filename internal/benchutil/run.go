package benchutil

import (
	"os"
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
