package benchutil

import (
	"context"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redaqs/aqs"
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

// Locker is a lock as the Shapes benchmarks take it (aqs.Locker without options).
type Locker interface {
	Lock(ctx context.Context, opts ...aqs.LockOption) (context.Context, error)
	Unlock(held context.Context) error
}

// ValuePerCallVsShared runs Shapes for 8 goroutines of one process on one name, Lock/Unlock
// back to back: through shared, one value of the lock, and through a value that newLock builds
// for every call (New in a request's handler). It reports the median ratio of the second's
// acquisitions per second to the first's, and both rates.
func ValuePerCallVsShared(b *testing.B, shared Locker, newLock func() (Locker, error)) {
	ctx := context.Background()
	cycle := func(l Locker) {
		held, err := l.Lock(ctx)
		if err != nil {
			b.Error(err)
			return
		}
		if err := l.Unlock(held); err != nil {
			b.Error(err)
		}
	}
	for i := 0; i < b.N; i++ {
		ratio, s, p := Shapes(8, 5, Span/2, func(int) { cycle(shared) }, func(int) {
			l, err := newLock()
			if err != nil {
				b.Error(err)
				return
			}
			cycle(l)
		})
		b.ReportMetric(ratio, "ratio")
		b.ReportMetric(s, "shared/s")
		b.ReportMetric(p, "per-call/s")
	}
}
