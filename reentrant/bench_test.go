package reentrant_test

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/internal/redistest"
	"github.com/redaqs/aqs/reentrant"
)

// counter counts the commands a client sends, and SUBSCRIBEs apart.
type counter struct {
	cmds, subscribes atomic.Int64
}

func (c *counter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.cmds.Add(1)
		if strings.HasSuffix(strings.ToLower(cmd.Name()), "subscribe") {
			c.subscribes.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// floorDel is the floor's release: delete the key only if it still holds our token.
var floorDel = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// floorCycle is the minimal correct lock: SET NX PX, then a Lua compare-and-delete. Two round
// trips, the baseline every lock is measured against.
func floorCycle(ctx context.Context, b testing.TB, rdb *redis.Client, key, token string) {
	ok, err := rdb.SetNX(ctx, key, token, 30*time.Second).Result()
	if err != nil || !ok {
		b.Fatalf("floor: SET NX: %v %v", ok, err)
	}
	if err := floorDel.Run(ctx, rdb, []string{key}, token).Err(); err != nil {
		b.Fatal(err)
	}
}

func reentrantCycle(ctx context.Context, b testing.TB, l *reentrant.Lock) {
	held, err := l.Lock(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Unlock(held); err != nil {
		b.Fatal(err)
	}
}

func benchSetup(b *testing.B) (*redis.Client, *counter, *reentrant.Lock, string) {
	srv := redistest.Single(b)
	rdb := srv.Client(b)
	cnt := &counter{}
	rdb.AddHook(cnt)
	l := newLock(b, newClient(b, rdb))
	key := l.Key() + ":floor"
	require.NoError(b, floorDel.Load(context.Background(), rdb).Err())
	return rdb, cnt, l, key
}

// BenchmarkFloor: SET NX PX plus a Lua compare-and-delete, the minimal correct lock.
func BenchmarkFloor(b *testing.B) {
	rdb, cnt, _, key := benchSetup(b)
	ctx := context.Background()
	token := uuid.NewString()
	cnt.cmds.Store(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		floorCycle(ctx, b, rdb, key, token)
	}
	b.ReportMetric(float64(cnt.cmds.Load())/float64(b.N), "cmds/op")
}

// BenchmarkReentrantUncontended: Lock+Unlock of the reentrant lock with the watchdog.
func BenchmarkReentrantUncontended(b *testing.B) {
	_, cnt, l, _ := benchSetup(b)
	ctx := context.Background()
	reentrantCycle(ctx, b, l) // the first EVALSHA of each script
	cnt.cmds.Store(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		reentrantCycle(ctx, b, l)
	}
	b.ReportMetric(float64(cnt.cmds.Load())/float64(b.N), "cmds/op")
	b.ReportMetric(float64(cnt.subscribes.Load()), "subscribes")
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
		floorCycle(ctx, b, rdb, key, token)
		t1 := time.Now()
		c0 := cnt.cmds.Load()
		reentrantCycle(ctx, b, l)
		ourCmds += cnt.cmds.Load() - c0
		ours += time.Since(t1)
		floor += t1.Sub(t0)
	}
	b.ReportMetric(float64(floor)/float64(ours), "ratio")
	b.ReportMetric(float64(ourCmds)/float64(b.N), "cmds/op")
	b.ReportMetric(float64(cnt.subscribes.Load()), "subscribes")
}
