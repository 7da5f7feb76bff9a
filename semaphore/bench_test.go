package semaphore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/internal/testkit/benchutil"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/semaphore"
)

var benchSpan = benchutil.Span

// BenchmarkSemaphoreVsFloor interleaves a floor cycle (SET NX PX, then Lua compare-and-delete)
// and an uncontended Acquire(1)+Release(1) of each semaphore in every iteration, so that drift
// of a shared, noisy machine hits all alike, and reports each semaphore's rate as a ratio of
// the floor's (1.0 = as fast as the floor).
func BenchmarkSemaphoreVsFloor(b *testing.B) {
	rdb := redistest.Single(b).Client(b)
	ctx := context.Background()
	require.NoError(b, benchutil.LoadFloor(ctx, rdb))
	c := newClient(b, rdb)
	s := newSem(b, c, 1)
	l := newLeased(b, c, 1)
	key := s.Key() + ":floor"
	token := uuid.NewString()
	counting := func() {
		if err := s.Acquire(ctx, 1); err != nil {
			b.Fatal(err)
		}
		if err := s.Release(ctx, 1); err != nil {
			b.Fatal(err)
		}
	}
	leased := func() {
		p, err := l.Acquire(ctx, 1)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
	counting()
	leased()
	var floor, cnt, lsd time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		benchutil.FloorCycle(ctx, b, rdb, key, token)
		t1 := time.Now()
		counting()
		t2 := time.Now()
		leased()
		lsd += time.Since(t2)
		cnt += t2.Sub(t1)
		floor += t1.Sub(t0)
	}
	b.ReportMetric(float64(floor)/float64(cnt), "counting-ratio")
	b.ReportMetric(float64(floor)/float64(lsd), "leased-ratio")
}

// BenchmarkSemaphoreContended runs 32 goroutines sharing one semaphore of 8 permits (each
// Acquire(1), Release(1) in a loop) and, alternately in slices of a tenth of the span, 8
// goroutines each on an uncontended semaphore of its own, and reports the shared rate as a
// ratio of the uncontended one, for each kind of semaphore. The permits are all in use all
// the time: the ratio measures what the queue's hand-offs cost.
func BenchmarkSemaphoreContended(b *testing.B) {
	rdb := redistest.Single(b).Client(b)
	ctx := context.Background()
	c := newClient(b, rdb)
	const goroutines, permits = 32, 8
	shared := newSem(b, c, permits)
	sharedL := newLeased(b, c, permits)
	own := make([]*semaphore.Semaphore, permits)
	ownL := make([]*semaphore.Leased, permits)
	for i := range own {
		var err error
		own[i], err = semaphore.New(c, fmt.Sprintf("%s:own:%d", shared.Name(), i))
		require.NoError(b, err)
		_, err = own[i].TrySetPermits(ctx, 1)
		require.NoError(b, err)
		ownL[i], err = semaphore.NewLeased(c, fmt.Sprintf("%s:ownl:%d", shared.Name(), i))
		require.NoError(b, err)
		_, err = ownL[i].TrySetPermits(ctx, 1)
		require.NoError(b, err)
	}
	cycle := func(s *semaphore.Semaphore) {
		if err := s.Acquire(ctx, 1); err != nil {
			b.Fatal(err)
		}
		if err := s.Release(ctx, 1); err != nil {
			b.Fatal(err)
		}
	}
	cycleL := func(s *semaphore.Leased) {
		p, err := s.Acquire(ctx, 1)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Release(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < b.N; i++ {
		var sh, ow, shL, owL rate
		for range 5 {
			sh.add(run(goroutines, benchSpan/10, func(int) { cycle(shared) }))
			ow.add(run(permits, benchSpan/10, func(g int) { cycle(own[g]) }))
			shL.add(run(goroutines, benchSpan/10, func(int) { cycleL(sharedL) }))
			owL.add(run(permits, benchSpan/10, func(g int) { cycleL(ownL[g]) }))
		}
		b.ReportMetric(sh.per()/ow.per(), "counting-ratio")
		b.ReportMetric(shL.per()/owL.per(), "leased-ratio")
		b.ReportMetric(sh.per(), "counting-acq/s")
	}
}

// rate sums calls and time over slices.
type rate struct {
	calls float64
	took  time.Duration
}

func (r *rate) add(n int64, d time.Duration) { r.calls, r.took = r.calls+float64(n), r.took+d }
func (r *rate) per() float64                 { return r.calls / r.took.Seconds() }

var run = benchutil.Run
