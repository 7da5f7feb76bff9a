package rwlock_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/benchutil"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/rwlock"
)

var benchSpan = benchutil.Span

var run = benchutil.Run

// BenchmarkRWReadersVsFloor runs 32 goroutines taking and releasing the read side of one lock,
// and 32 goroutines each doing the floor's cycle (SET NX PX, then Lua compare-and-delete) on a
// key of its own, alternately in slices of a tenth of the span, and reports the read rate as
// a ratio of the floor's: readers do not serialize.
func BenchmarkRWReadersVsFloor(b *testing.B) {
	rdb := redistest.Single(b).Client(b)
	l := newLock(b, newClient(b, rdb))
	ctx := context.Background()
	require.NoError(b, benchutil.LoadFloor(ctx, rdb))
	const goroutines = 32
	keys := make([]string, goroutines)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s:floor:%d", l.Key(), i)
	}
	token := uuid.NewString()
	read := func(int) {
		h, err := l.RLock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.RUnlock(h); err != nil {
			b.Fatal(err)
		}
	}
	floor := func(g int) { benchutil.FloorCycle(ctx, b, rdb, keys[g], token) }
	for i := 0; i < b.N; i++ {
		var reads, floors float64
		var readTime, floorTime time.Duration
		for range 5 {
			n, d := run(goroutines, benchSpan/10, read)
			reads, readTime = reads+float64(n), readTime+d
			n, d = run(goroutines, benchSpan/10, floor)
			floors, floorTime = floors+float64(n), floorTime+d
		}
		b.ReportMetric(reads/readTime.Seconds()/(floors/floorTime.Seconds()), "ratio")
		b.ReportMetric(reads/readTime.Seconds(), "reads/s")
	}
}

// BenchmarkRWWriterWaitUnderReadLoad keeps 32 readers busy on one lock, each holding about a
// millisecond at a time, while a writer takes the lock again and again; it reports the
// writer's wait, p99 and longest, in milliseconds and as a ratio of the bar (five read holds
// plus one hand-off, measured as two round trips under the same load), in the fair mode (the
// default) and in the non-fair mode, with what the read holds really took. A non-fair writer
// that waits a whole span gives up (its wait is counted as the span).
func BenchmarkRWWriterWaitUnderReadLoad(b *testing.B) {
	rdb := redistest.Single(b).Client(b)
	ctx := context.Background()
	const readers = 32
	const hold = time.Millisecond
	for i := 0; i < b.N; i++ {
		for _, mode := range []struct {
			name string
			opts []rwlock.Option
		}{{"fair", nil}, {"nonfair", []rwlock.Option{rwlock.WithNonFair()}}} {
			l := newLock(b, newClient(b, rdb), mode.opts...)
			writer, err := rwlock.New(newClient(b, rdb), l.Name(), mode.opts...)
			require.NoError(b, err)
			stop := make(chan struct{})
			var rmu sync.Mutex
			var rholds []time.Duration
			var wg sync.WaitGroup
			for r := 0; r < readers; r++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						h, err := l.RLock(ctx)
						if err != nil {
							b.Error(err)
							return
						}
						held := time.Now()
						time.Sleep(hold)
						rmu.Lock()
						rholds = append(rholds, time.Since(held))
						rmu.Unlock()
						if err := l.RUnlock(h); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			var waits, trips []time.Duration
			deadline := time.Now().Add(benchSpan)
			for time.Now().Before(deadline) || len(waits) < 5 {
				// One round trip under this load: an attempt that does not wait (it fails
				// while readers hold, and then marks nothing).
				start := time.Now()
				if h, ok, err := writer.TryLock(ctx); err != nil {
					b.Fatal(err)
				} else if ok {
					require.NoError(b, writer.Unlock(h))
				}
				trips = append(trips, time.Since(start))
				time.Sleep(time.Millisecond)
				start = time.Now()
				h, ok, err := writer.TryLock(ctx, aqs.WithWait(benchSpan))
				require.NoError(b, err)
				waits = append(waits, time.Since(start))
				if ok {
					time.Sleep(hold)
					require.NoError(b, writer.Unlock(h))
				}
				time.Sleep(5 * time.Millisecond)
			}
			close(stop)
			wg.Wait()
			sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
			sort.Slice(trips, func(i, j int) bool { return trips[i] < trips[j] })
			sort.Slice(rholds, func(i, j int) bool { return rholds[i] < rholds[j] })
			// What the readers' "1ms" holds really took: on a loaded machine the sleep
			// overruns, and a writer cannot get in before the readers already inside leave.
			b.Logf("%s: %d read holds, median %v, p99 %v, p99.9 %v", mode.name, len(rholds),
				rholds[len(rholds)/2], rholds[len(rholds)*99/100], rholds[len(rholds)*999/1000])
			b.ReportMetric(float64(rholds[len(rholds)*99/100].Microseconds())/1000, mode.name+"-read-hold-p99-ms")
			p99 := waits[min((len(waits)*99)/100, len(waits)-1)]
			// The bar: five read holds plus one hand-off, a hand-off being the wake message
			// and the writer's attempt: two round trips under this load (median).
			trip := trips[len(trips)/2]
			bar := 5*hold + 2*trip
			b.Logf("%s: %d waits, median %v, p90 %v, p99 %v; round trip under load %v; bar %v",
				mode.name, len(waits), waits[len(waits)/2], waits[len(waits)*9/10], p99, trip, bar)
			b.ReportMetric(float64(p99.Microseconds())/1000, mode.name+"-p99-ms")
			b.ReportMetric(float64(p99)/float64(bar), mode.name+"-p99/bar")
			b.ReportMetric(float64(waits[len(waits)-1].Microseconds())/1000, mode.name+"-max-ms")
		}
	}
}
