package latch_test

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/scripts"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/latch"
)

// TestMain runs the tests, or, in a child process of the multi-process tests, its role
// (helper_test.go).
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// newClient returns an aqs Client on rdb, closed at the end of the test.
var newClient = redistest.NewClient

// newLatch returns a latch with a name unique to the test, not set. Its key expires with the
// latch's expiry (a minute unless opts say otherwise), so none outlives the test for long.
func newLatch(t testing.TB, c *aqs.Client, opts ...latch.Option) *latch.Latch {
	t.Helper()
	l, err := latch.New(c, redistest.Name(t), append([]latch.Option{latch.WithExpiry(time.Minute)}, opts...)...)
	require.NoError(t, err)
	return l
}

// sameLatch returns the latch of l's name through the Client c.
func sameLatch(t testing.TB, c *aqs.Client, l *latch.Latch, opts ...latch.Option) *latch.Latch {
	t.Helper()
	x, err := latch.New(c, l.Name(), append([]latch.Option{latch.WithExpiry(time.Minute)}, opts...)...)
	require.NoError(t, err)
	return x
}

// setLatch returns a latch with a name unique to the test, set to n.
func setLatch(t testing.TB, c *aqs.Client, n int, opts ...latch.Option) *latch.Latch {
	t.Helper()
	l := newLatch(t, c, opts...)
	ok, err := l.TrySetCount(context.Background(), n)
	require.NoError(t, err)
	require.True(t, ok)
	return l
}

// topologies runs f on a single node and on a cluster.
func topologies(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient)) {
	t.Run("single", func(t *testing.T) { f(t, redistest.Single(t).Client(t)) })
	t.Run("cluster", func(t *testing.T) { f(t, redistest.Cluster(t).Client(t)) })
}

// hubWaiters reports how many local waiters the Client's hub has registered.
func hubWaiters(c *aqs.Client) int {
	return core.RuntimeOf(c).Hub.Waiters()
}

// waitWaiters waits until the Client's hub has n waiters registered: the Awaits started are
// subscribed and waiting (a registered waiter made its first attempt, or is about to, and any
// CountDown after its registration reaches it).
func waitWaiters(t testing.TB, c *aqs.Client, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return hubWaiters(c) == n }, 10*time.Second, time.Millisecond,
		"hub waiters: want %d", n)
}

// attemptCounter is a go-redis hook that counts the Await attempts (runs of the latch's
// attempt script) whose replies came back, so that a test can tell when a waiter has made its
// attempt after subscribing and is waiting for a message, its fallback timer or its heartbeat.
type attemptCounter struct{ n atomic.Int64 }

func (h *attemptCounter) count(cmd redis.Cmder) {
	if args := cmd.Args(); len(args) > 1 && args[0] == "evalsha" && args[1] == scripts.LatchAwait.SHA() &&
		cmd.Err() == nil {
		h.n.Add(1)
	}
}

func (h *attemptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *attemptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.count(cmd)
		return err
	}
}

func (h *attemptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.count(cmd)
		}
		return err
	}
}
