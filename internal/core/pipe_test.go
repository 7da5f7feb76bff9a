package core_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// gate is a go-redis hook that holds every command "ECHO gate:..." until it is opened, so that
// a test can keep the pipe's round trips on their way for as long as it needs.
type gate struct{ open chan struct{} }

func newGate() *gate { return &gate{open: make(chan struct{})} }

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if s, ok := cmd.Args()[len(cmd.Args())-1].(string); ok && cmd.Name() == "echo" && len(s) > 5 && s[:5] == "gate:" {
			<-g.open
		}
		return next(ctx, cmd)
	}
}

func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// hold sends n gated commands routed as key is, each on a goroutine of its own, and waits until
// they occupy n round trips of the pipe. The returned function opens the gate and waits for
// them; calls after the first do nothing.
func (g *gate) hold(t *testing.T, p *core.Pipe, key string, n int) func() {
	t.Helper()
	before := p.Stats().Alone
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = p.Process(context.Background(), redis.NewStringCmd(context.Background(), "echo", "gate:{"+key+"}"))
		}()
	}
	require.Eventually(t, func() bool { return p.Stats().Alone == before+int64(n) }, 5*time.Second, time.Millisecond)
	return sync.OnceFunc(func() {
		close(g.open)
		wg.Wait()
	})
}

func pipeOf(t testing.TB, rdb redis.UniversalClient) *core.Pipe {
	t.Helper()
	c, err := aqs.New(context.Background(), rdb)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return runtimeOf(t, c).Pipe
}

// echo runs a script that answers its key and its argument.
func echo(ctx context.Context, p *core.Pipe, key string, arg int) *redis.Cmd {
	return p.Eval(ctx, "return {KEYS[1], ARGV[1]}", []string{key}, arg)
}

// A call made while the Client's round trips are all on their way waits, and goes to Redis
// with every other such call in one pipeline as soon as a round trip ends; each gets its own
// reply.
func TestPipeSendsQueuedCallsAsOnePipeline(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Single(t).Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	g := newGate()
	rdb.AddHook(g)
	p := pipeOf(t, rdb)
	ctx := context.Background()

	before := p.Stats()
	require.NoError(t, p.Process(ctx, redis.NewStringCmd(ctx, "echo", "alone")))
	assert.Equal(t, before.Alone+1, p.Stats().Alone, "a lone call goes at once, on its own")

	open := g.hold(t, p, "k", core.PipeLanes)
	const n = 50
	before = p.Stats()
	replies := make([]any, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := echo(ctx, p, "k"+strconv.Itoa(i), i).Result()
			assert.NoError(t, err)
			replies[i] = v
		}()
	}
	require.Eventually(t, func() bool { return p.Queued() == n }, 5*time.Second, time.Millisecond)
	open()
	wg.Wait()
	for i, v := range replies {
		assert.Equal(t, []any{"k" + strconv.Itoa(i), strconv.Itoa(i)}, v, "call %d", i)
	}
	after := p.Stats()
	assert.Equal(t, int64(1), after.Batches-before.Batches, "one pipeline")
	assert.Equal(t, int64(n), after.Batched-before.Batched)
	assert.Equal(t, before.Alone, after.Alone)
}

// Many concurrent calls, on both topologies: every call gets its own reply.
func TestPipeRepliesUnderLoad(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		p := pipeOf(t, rdb)
		ctx := context.Background()
		var wg sync.WaitGroup
		for g := range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 100 {
					key := fmt.Sprintf("pipe:%d:%d", g, i)
					v, err := echo(ctx, p, key, i).Result()
					if !assert.NoError(t, err) || !assert.Equal(t, []any{key, strconv.Itoa(i)}, v) {
						return
					}
				}
			}()
		}
		wg.Wait()
		st := p.Stats()
		t.Logf("%+v", st)
		assert.Equal(t, int64(6400), st.Alone+st.Batched)
	})
}

// On Redis Cluster each master has its own round trips: calls to one master wait while that
// master's round trips are on their way, not calls to another.
func TestPipeQueuesPerMaster(t *testing.T) {
	rdb := redistest.Cluster(t).Client(t)
	g := newGate()
	rdb.AddHook(g)
	p := pipeOf(t, rdb)
	ctx := context.Background()
	a, b := "a", ""
	ma, err := rdb.MasterForKey(ctx, a)
	require.NoError(t, err)
	for i := 0; b == ""; i++ {
		k := "b" + strconv.Itoa(i)
		mb, err := rdb.MasterForKey(ctx, k)
		require.NoError(t, err)
		if mb.Options().Addr != ma.Options().Addr {
			b = k
		}
	}
	open := g.hold(t, p, a, core.PipeLanes)
	defer open()
	done := make(chan error, 1)
	go func() { done <- echo(ctx, p, a, 1).Err() }()
	require.Eventually(t, func() bool { return p.Queued() == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, echo(ctx, p, b, 2).Err(), "another master's call goes at once")
	assert.Equal(t, 1, p.Queued())
	open()
	require.NoError(t, <-done)
}

// With a Redis client that honours context deadlines, a call waiting in the pipe returns when
// its context ends, and leaves the queue.
func TestPipeQueuedCallReturnsByItsDeadline(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Single(t).Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	g := newGate()
	rdb.AddHook(g)
	p := pipeOf(t, rdb)
	open := g.hold(t, p, "k", core.PipeLanes)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := echo(ctx, p, "k", 1).Err()
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), time.Second)
	assert.Equal(t, 0, p.Queued(), "it left the queue")
	before := p.Stats()
	open()
	assert.Equal(t, before.Batches, p.Stats().Batches, "nothing was sent for it")
}
