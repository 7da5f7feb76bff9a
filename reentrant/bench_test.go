package reentrant_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/internal/testkit/benchutil"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/reentrant"
)

func reentrantCycle(ctx context.Context, b testing.TB, l *reentrant.Lock) {
	held, err := l.Lock(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Unlock(held); err != nil {
		b.Fatal(err)
	}
}

func benchSetup(b *testing.B) (*redis.Client, *benchutil.Counter, *reentrant.Lock, string) {
	srv := redistest.Single(b)
	rdb := srv.Client(b)
	cnt := &benchutil.Counter{}
	rdb.AddHook(cnt)
	l := newLock(b, newClient(b, rdb))
	key := l.Key() + ":floor"
	require.NoError(b, benchutil.LoadFloor(context.Background(), rdb))
	return rdb, cnt, l, key
}

// BenchmarkFloor: SET NX PX plus a Lua compare-and-delete, the minimal correct lock.
func BenchmarkFloor(b *testing.B) {
	rdb, cnt, _, key := benchSetup(b)
	ctx := context.Background()
	token := uuid.NewString()
	cnt.Cmds.Store(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchutil.FloorCycle(ctx, b, rdb, key, token)
	}
	b.ReportMetric(float64(cnt.Cmds.Load())/float64(b.N), "cmds/op")
}

// BenchmarkReentrantUncontended: Lock+Unlock of the reentrant lock with the watchdog.
func BenchmarkReentrantUncontended(b *testing.B) {
	_, cnt, l, _ := benchSetup(b)
	ctx := context.Background()
	reentrantCycle(ctx, b, l) // the first EVALSHA of each script
	cnt.Cmds.Store(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		reentrantCycle(ctx, b, l)
	}
	b.ReportMetric(float64(cnt.Cmds.Load())/float64(b.N), "cmds/op")
	b.ReportMetric(float64(cnt.Subscribes.Load()), "subscribes")
}

// BenchmarkReentrantVsFloor interleaves a floor cycle and a reentrant cycle in every
// iteration, so that drift of a shared, noisy machine hits both alike, and reports the
// reentrant lock's rate as a ratio of the floor's (1.0 = as fast as the floor).
func BenchmarkReentrantVsFloor(b *testing.B) {
	rdb, cnt, l, key := benchSetup(b)
	ctx := context.Background()
	token := uuid.NewString()
	reentrantCycle(ctx, b, l)
	var floor, ours time.Duration
	var ourCmds int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		benchutil.FloorCycle(ctx, b, rdb, key, token)
		t1 := time.Now()
		c0 := cnt.Cmds.Load()
		reentrantCycle(ctx, b, l)
		ourCmds += cnt.Cmds.Load() - c0
		ours += time.Since(t1)
		floor += t1.Sub(t0)
	}
	b.ReportMetric(float64(floor)/float64(ours), "ratio")
	b.ReportMetric(float64(ourCmds)/float64(b.N), "cmds/op")
	b.ReportMetric(float64(cnt.Subscribes.Load()), "subscribes")
}

// BenchmarkValuePerCallVsShared runs 8 goroutines of one process on one name, Lock/Unlock back
// to back, with one Lock value shared by all of them and with a value built for every call
// (reentrant.New in the handler), interleaved, and reports the second's acquisitions per second
// as a ratio of the first's.
func BenchmarkValuePerCallVsShared(b *testing.B) {
	c := newClient(b, redistest.Single(b).Client(b))
	shared := newLock(b, c)
	benchutil.ValuePerCallVsShared(b, shared, func() (benchutil.Locker, error) { return reentrant.New(c, shared.Name()) })
}
