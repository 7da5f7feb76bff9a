package fair_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/benchutil"
	"github.com/redaqs/aqs/internal/redistest"
	"github.com/redaqs/aqs/internal/scripts"
)

// BenchmarkFairVsFloor interleaves a floor cycle and an uncontended fair Lock+Unlock in every
// iteration and reports the fair lock's rate as a ratio of the floor's.
func BenchmarkFairVsFloor(b *testing.B) {
	rdb := redistest.Single(b).Client(b)
	cnt := &benchutil.Counter{}
	rdb.AddHook(cnt)
	l := newLock(b, newClient(b, rdb))
	ctx := context.Background()
	require.NoError(b, benchutil.LoadFloor(ctx, rdb))
	key, token := l.Key()+":floor", uuid.NewString()
	cycle := func() {
		h, err := l.Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(h); err != nil {
			b.Fatal(err)
		}
	}
	cycle() // subscribes to the grant channel, which then lingers
	var floor, ours time.Duration
	var cmds int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		benchutil.FloorCycle(ctx, b, rdb, key, token)
		t1 := time.Now()
		c0 := cnt.Cmds.Load()
		cycle()
		cmds += cnt.Cmds.Load() - c0
		ours += time.Since(t1)
		floor += t1.Sub(t0)
	}
	b.ReportMetric(float64(floor)/float64(ours), "ratio")
	b.ReportMetric(float64(cmds)/float64(b.N), "cmds/op")
}

// BenchmarkFairQueueDepth measures a handoff cycle (the holder releases, handing the lock to
// the head of the queue; a newcomer joins at the tail) with 10 and with 10,000 waiters
// queued, interleaved, and reports the deep queue's cost as a ratio of the shallow one's.
func BenchmarkFairQueueDepth(b *testing.B) {
	rdb := redistest.Single(b).Client(b)
	ctx := context.Background()
	client := uuid.NewString()
	id := func(i int) string { return client + ":" + strconv.Itoa(i) }
	// Waiters are numbered in arrival order: holder is the current holder's number, next the
	// number of the next newcomer; the queue holds holder+1 .. next-1.
	type queue struct {
		keys         []string
		holder, next int
	}
	setup := func(depth int) *queue {
		l, err := fair.New(newClient(b, rdb), fmt.Sprintf("%s-%d", redistest.Name(b), depth))
		require.NoError(b, err)
		q := &queue{keys: []string{l.Key(), l.Key() + ":q", l.Key() + ":d"}, next: 1}
		require.NoError(b, rdb.Set(ctx, q.keys[0], id(0)+" w", time.Hour).Err())
		p := rdb.Pipeline()
		deadline := float64(time.Now().Add(time.Hour).UnixMilli())
		for ; q.next <= depth; q.next++ {
			m := id(q.next) + " 3600000"
			p.RPush(ctx, q.keys[1], m)
			p.ZAdd(ctx, q.keys[2], redis.Z{Score: deadline, Member: m})
		}
		_, err = p.Exec(ctx)
		require.NoError(b, err)
		b.Cleanup(func() { rdb.Del(ctx, q.keys...) })
		return q
	}
	cycle := func(q *queue) {
		if n, err := scripts.FairRelease.Run(ctx, rdb, q.keys, id(q.holder), "1", "PUBLISH").Int64(); err != nil || n != 0 {
			b.Fatalf("release: %v %v", n, err)
		}
		q.holder++
		r, err := scripts.FairAcquire.Run(ctx, rdb, q.keys, id(q.next), 3600000, 3600000, "1", "0").Int64()
		if err != nil || r >= 0 {
			b.Fatalf("join: %v %v", r, err)
		}
		q.next++
	}
	shallow, deep := setup(10), setup(10000)
	cycle(shallow)
	cycle(deep)
	var ts, td time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		cycle(shallow)
		t1 := time.Now()
		cycle(deep)
		td += time.Since(t1)
		ts += t1.Sub(t0)
	}
	b.ReportMetric(float64(td)/float64(ts), "deep/shallow")
}

// BenchmarkFairContended runs 32 goroutines of one process on one fair lock for a fixed time,
// then a single connection's PING loop for the same time, and reports acquisitions per
// second as a ratio of PINGs per second, Jain's fairness index over the per-goroutine counts,
// and how often the releasing goroutine took the lock again next while others waited.
func BenchmarkFairContended(b *testing.B) {
	rdb := redistest.Single(b).Client(b)
	l := newLock(b, newClient(b, rdb))
	ctx := context.Background()
	const workers = 32
	const span = time.Second
	for i := 0; i < b.N; i++ {
		counts := make([]int64, workers)
		var last atomic.Int64
		var repeats, total atomic.Int64
		last.Store(-1)
		stop := time.Now().Add(span)
		var wg sync.WaitGroup
		start := time.Now()
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for time.Now().Before(stop) {
					h, err := l.Lock(ctx)
					if err != nil {
						b.Error(err)
						return
					}
					if last.Swap(int64(w)) == int64(w) {
						repeats.Add(1)
					}
					total.Add(1)
					counts[w]++
					if err := l.Unlock(h); err != nil {
						b.Error(err)
						return
					}
				}
			}(w)
		}
		wg.Wait()
		rate := float64(total.Load()) / time.Since(start).Seconds()
		pings, pstart := 0, time.Now()
		for time.Since(pstart) < span {
			if err := rdb.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			pings++
		}
		pingRate := float64(pings) / time.Since(pstart).Seconds()
		var sum, sq float64
		for _, c := range counts {
			sum += float64(c)
			sq += float64(c) * float64(c)
		}
		b.ReportMetric(rate/pingRate, "ratio-to-ping")
		b.ReportMetric(sum*sum/(workers*sq), "jain")
		b.ReportMetric(float64(repeats.Load())/float64(total.Load()), "reacquire-share")
	}
}

// BenchmarkFairContendedProcesses runs 4 processes × 8 goroutines on one fair lock for a
// fixed time, then a single connection's PING loop for the same time, and reports
// acquisitions per second as a ratio of PINGs per second and Jain's fairness index over the
// 32 goroutines' counts.
func BenchmarkFairContendedProcesses(b *testing.B) {
	srv := redistest.Single(b)
	rdb := srv.Client(b)
	ctx := context.Background()
	const procs, goroutines = 4, 8
	const span = time.Second
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("%s-%d", redistest.Name(b), i)
		var children []*redistest.Child
		for p := 0; p < procs; p++ {
			c := redistest.StartChild(b, fmt.Sprintf("contender %d", p),
				helperEnv+"="+roleContend, helperAddrEnv+"="+srv.Addr(), helperLockEnv+"="+name,
				helperTimeoutEnv+"=5s")
			c.Expect(b, lineReady, 10*time.Second)
			children = append(children, c)
		}
		start := time.Now()
		for _, c := range children {
			c.Send(b, fmt.Sprintf("go %d %d", goroutines, span.Nanoseconds()))
		}
		var counts []float64
		for _, c := range children {
			line := c.Expect(b, "counts", span+30*time.Second)
			for _, f := range strings.Fields(line)[1:] {
				n, err := strconv.Atoi(f)
				require.NoError(b, err)
				counts = append(counts, float64(n))
			}
		}
		elapsed := time.Since(start)
		pings, pstart := 0, time.Now()
		for time.Since(pstart) < span {
			require.NoError(b, rdb.Ping(ctx).Err())
			pings++
		}
		pingRate := float64(pings) / time.Since(pstart).Seconds()
		var sum, sq float64
		for _, c := range counts {
			sum += c
			sq += c * c
		}
		b.ReportMetric(sum/elapsed.Seconds()/pingRate, "ratio-to-ping")
		b.ReportMetric(sum*sum/(float64(len(counts))*sq), "jain")
	}
}
