package fair_test

import (
	"context"
	"fmt"
	"os"
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
	"github.com/redaqs/aqs/internal/scripts"
	"github.com/redaqs/aqs/internal/testkit/benchutil"
	"github.com/redaqs/aqs/internal/testkit/redistest"
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
	// Waiters of several Clients, so that each hand-off publishes its grant (a hand-off within
	// one Client would skip that).
	var clients []string
	for range 7 {
		clients = append(clients, uuid.NewString())
	}
	id := func(i int) string { return clients[i%len(clients)] + ":" + strconv.Itoa(i) }
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
		v, err := scripts.LockRelease.Run(ctx, rdb, q.keys, id(q.holder), "1", "PUBLISH", 3600000, "", "0").Result()
		if r, derr := scripts.DecodeRelease(v); err != nil || derr != nil || r.Kind != scripts.HandedRemote {
			b.Fatalf("release: %v %v %v", v, err, derr)
		}
		q.holder++
		v, err = scripts.LockAcquire.Run(ctx, rdb, q.keys, id(q.next), 3600000, 3600000, "1", "0", "1").Result()
		if r, derr := scripts.DecodeAttempt(v); err != nil || derr != nil || r.Status != scripts.Queued {
			b.Fatalf("join: %v %v %v", v, err, derr)
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

// The contended benchmarks alternate contention with a single connection's PING loop in
// short slices, five of each per round, and report the median over three rounds of the
// acquisition rate (acquisitions over the contention slices' time) as a ratio of the PING
// rate (PINGs over the PING slices' time): drift of a shared machine hits both alike.
//
// AQS_BENCH_SPAN sets a round's length (contention and PING slices each take half); make test
// runs every benchmark once with a short one, so that none of them rots. The figures want
// the default of two seconds.
const (
	contendRounds = 3
	contendSlices = 5
)

var contendSpan = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("AQS_BENCH_SPAN")); err == nil && d > 0 {
		return d
	}
	return 2 * time.Second
}()

// sliceSpan is the length of one contention or PING slice.
var sliceSpan = contendSpan / (2 * contendSlices)

// interleaved runs one round: contendSlices contention slices (contend runs one of sliceSpan
// and returns its acquisitions), each followed by a PING slice, and returns the acquisition
// rate and the PING rate per second.
func interleaved(b *testing.B, rdb redis.UniversalClient, contend func(time.Duration) float64) (rate, ping float64) {
	ctx := context.Background()
	var acquired, pings float64
	var contendTime, pingTime time.Duration
	for range contendSlices {
		start := time.Now()
		acquired += contend(sliceSpan)
		contendTime += time.Since(start)
		start = time.Now()
		for time.Since(start) < sliceSpan {
			require.NoError(b, rdb.Ping(ctx).Err())
			pings++
		}
		pingTime += time.Since(start)
	}
	return acquired / contendTime.Seconds(), pings / pingTime.Seconds()
}

// commandCalls returns how many times the server ran command since its stats were reset.
func commandCalls(b *testing.B, rdb *redis.Client, command string) float64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(b, err)
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+command+":calls="); ok {
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			require.NoError(b, err)
			return float64(n)
		}
	}
	return 0
}

// jain is Jain's fairness index of counts: 1 when all are equal, 1/n when one has all.
func jain(counts []float64) float64 {
	var sum, sq float64
	for _, c := range counts {
		sum += c
		sq += c * c
	}
	return sum * sum / (float64(len(counts)) * sq)
}

// BenchmarkFairContended runs 32 goroutines of one process on one fair lock, and reports
// acquisitions per second as a ratio of one connection's PINGs per second (median of the
// rounds), Jain's fairness index over the per-goroutine counts (the lowest of the rounds), and
// how often the releasing goroutine took the lock again next while others waited.
func BenchmarkFairContended(b *testing.B) {
	rdb := redistest.Single(b).Client(b)
	l := newLock(b, newClient(b, rdb))
	ctx := context.Background()
	const workers = 32
	for i := 0; i < b.N; i++ {
		var ratios []float64
		minJain := 1.0
		var repeats, total atomic.Int64
		for round := 0; round < contendRounds; round++ {
			counts := make([]float64, workers)
			rate, ping := interleaved(b, rdb, func(span time.Duration) float64 {
				var last, acquired, active atomic.Int64
				last.Store(-1)
				active.Store(workers)
				stop := time.Now().Add(span)
				var wg sync.WaitGroup
				for w := 0; w < workers; w++ {
					wg.Add(1)
					go func(w int) {
						defer wg.Done()
						defer active.Add(-1)
						for time.Now().Before(stop) {
							h, err := l.Lock(ctx)
							if err != nil {
								b.Error(err)
								return
							}
							// A repeat while every worker is still at it: the others were
							// queued (or about to be) and this one passed them. Once workers
							// stop at the end of a slice, the last ones may rightly find
							// nobody waiting.
							if last.Swap(int64(w)) == int64(w) && active.Load() == workers {
								repeats.Add(1)
							}
							acquired.Add(1)
							counts[w]++
							if err := l.Unlock(h); err != nil {
								b.Error(err)
								return
							}
						}
					}(w)
				}
				wg.Wait()
				total.Add(acquired.Load())
				return float64(acquired.Load())
			})
			b.Logf("round %d: %.0f acquisitions/s, %.0f PINGs/s", round, rate, ping)
			ratios = append(ratios, rate/ping)
			minJain = min(minJain, jain(counts))
		}
		b.ReportMetric(median(ratios), "ratio-to-ping")
		b.ReportMetric(minJain, "jain")
		b.ReportMetric(float64(repeats.Load())/float64(total.Load()), "reacquire-share")
	}
}

// BenchmarkFairContendedProcesses runs 4 processes × 8 goroutines on one fair lock, and
// reports acquisitions per second as a ratio of one connection's PINGs per second (median of
// the rounds) and Jain's fairness index over the 32 goroutines' counts (the lowest of the
// rounds).
func BenchmarkFairContendedProcesses(b *testing.B) {
	srv := redistest.Single(b)
	rdb := srv.Client(b)
	const procs, goroutines = 4, 8
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("%s-%d", redistest.Name(b), i)
		var children []*redistest.Child
		for p := 0; p < procs; p++ {
			c := roleContend.Start(b, fmt.Sprintf("contender %d", p), redistest.TargetOf(b, rdb),
				lockParams{Lock: name, WaiterTimeout: 5 * time.Second})
			c.Expect(b, lineReady, 10*time.Second)
			children = append(children, c)
		}
		var ratios []float64
		minJain := 1.0
		var crossed []float64
		for round := 0; round < contendRounds; round++ {
			require.NoError(b, rdb.ConfigResetStat(context.Background()).Err())
			var counts []float64
			rate, ping := interleaved(b, rdb, func(span time.Duration) float64 {
				for _, c := range children {
					c.Send(b, fmt.Sprintf("go %d %d", goroutines, span.Nanoseconds()))
				}
				var sum float64
				k := 0
				for _, c := range children {
					line := c.Expect(b, "counts ", span+30*time.Second)
					for _, f := range strings.Fields(line) {
						n, err := strconv.Atoi(f)
						require.NoError(b, err)
						if len(counts) <= k {
							counts = append(counts, 0)
						}
						counts[k] += float64(n)
						sum += float64(n)
						k++
					}
				}
				return sum
			})
			var sum float64
			for _, c := range counts {
				sum += c
			}
			// Each hand-off to a waiter of another process publishes its grant once; one
			// within a process publishes nothing (see hand_off in _fair_queue.lua).
			publishes := commandCalls(b, rdb, "publish")
			b.Logf("round %d: %.0f acquisitions/s, %.0f PINGs/s, %.0f%% of hand-offs across processes",
				round, rate, ping, 100*publishes/sum)
			ratios = append(ratios, rate/ping)
			crossed = append(crossed, publishes/sum)
			minJain = min(minJain, jain(counts))
		}
		b.ReportMetric(median(ratios), "ratio-to-ping")
		b.ReportMetric(minJain, "jain")
		b.ReportMetric(median(crossed), "cross-process-share")
	}
}

// BenchmarkValuePerCallVsShared runs 8 goroutines of one process on one name, Lock/Unlock back
// to back, with one Lock value shared by all of them and with a value built for every call
// (fair.New in the handler), interleaved, and reports the second's acquisitions per second
// as a ratio of the first's.
func BenchmarkValuePerCallVsShared(b *testing.B) {
	c := newClient(b, redistest.Single(b).Client(b))
	shared := newLock(b, c)
	benchutil.ValuePerCallVsShared(b, shared, func() (benchutil.Locker, error) { return fair.New(c, shared.Name()) })
}
