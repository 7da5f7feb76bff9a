package core_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/internal/testkit/benchutil"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// setPX is the call the pipe's benchmark makes: a script that writes one key, as an
// acquisition does.
var setPX = redis.NewScript(`return redis.call('SET', KEYS[1], ARGV[1], 'PX', 10000)`)

// BenchmarkPipe measures the auto-pipeline itself: goroutines of one Client each make calls
// back to back (setPX on one of 1,000 keys at random), through the Client's pipe and, in
// alternating slices of the same length, straight through the same go-redis client. It
// reports, per number of goroutines:
//   - calls/s-ratio: calls per second through the pipe over calls per second straight (median
//     of the rounds);
//   - calls/pipeline: the calls the pipe sent per pipeline (0: it sent every call on its own);
//   - alone-%: the share of calls the pipe sent on their own;
//   - p50-straight-µs: a call's latency straight, at the median of all rounds' calls;
//   - p50-added-µs, p99-added-µs: a call's latency through the pipe minus straight, at the
//     median and the 99th percentile of all rounds' calls.
//
// AQS_BENCH_SPAN sets a round's length; make test runs every benchmark once with a short one.
func BenchmarkPipe(b *testing.B) {
	rdb := redistest.Single(b).Client(b)
	p := pipeOf(b, rdb)
	ctx := context.Background()
	require.NoError(b, setPX.Load(ctx, rdb).Err())
	const rounds = 5
	slice := benchutil.Span / (2 * rounds)
	for _, g := range []int{1, 2, 8, 64} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			var viaPipe, straight []time.Duration
			var ratios []float64
			before := p.Stats()
			run := func(s redis.Scripter) ([]time.Duration, float64) {
				lat := make([][]time.Duration, g)
				n, took := benchutil.Run(g, slice, func(i int) {
					key := "pipe:bench:" + strconv.Itoa(rand.IntN(1000))
					t := time.Now()
					if err := setPX.Run(ctx, s, []string{key}, "v").Err(); err != nil {
						b.Error(err)
					}
					lat[i] = append(lat[i], time.Since(t))
				})
				return slices.Concat(lat...), float64(n) / took.Seconds()
			}
			for range b.N {
				for r := range rounds {
					var pr, sr float64
					var pl, sl []time.Duration
					if r%2 == 0 {
						pl, pr = run(p)
						sl, sr = run(rdb)
					} else {
						sl, sr = run(rdb)
						pl, pr = run(p)
					}
					viaPipe, straight = append(viaPipe, pl...), append(straight, sl...)
					ratios = append(ratios, pr/sr)
				}
			}
			st := p.Stats()
			batches, batched, alone := st.Batches-before.Batches, st.Batched-before.Batched, st.Alone-before.Alone
			perPipeline := 0.0
			if batches > 0 {
				perPipeline = float64(batched) / float64(batches)
			}
			b.ReportMetric(median(ratios), "calls/s-ratio")
			b.ReportMetric(perPipeline, "calls/pipeline")
			b.ReportMetric(100*float64(alone)/float64(max(alone+batched, 1)), "alone-%")
			b.ReportMetric(micros(quantile(straight, 0.5)), "p50-straight-µs")
			b.ReportMetric(micros(quantile(viaPipe, 0.5)-quantile(straight, 0.5)), "p50-added-µs")
			b.ReportMetric(micros(quantile(viaPipe, 0.99)-quantile(straight, 0.99)), "p99-added-µs")
		})
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
