package acquire_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/excl"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// Most of the engine's tests drive it through the exclusive lock (internal/excl), the rule
// set that packages fair and reentrant present, on real Redis: its local hand-off with
// boarding windows chosen by each test, a minute where a test must see its waiters boarded,
// and Boarded to see them. Everything else is observed in Redis: the queue's deadline zset,
// the lock key. fake_test.go drives it against a rule set held in memory instead.

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// waiterTimeout is the locks' waiter timeout, the fair and the reentrant lock's default.
const waiterTimeout = 5 * time.Second

// newClient returns an aqs Client on rdb, closed at the end of the test.
var newClient = redistest.NewClient

// newLock returns the exclusive lock of the given name through c, whose waiters board for
// board and whose releases hand the lock to a local waiter streak times in a row (0: the fair
// lock's configuration).
func newLock(t testing.TB, c *aqs.Client, name string, board time.Duration, streak int) *excl.Lock {
	t.Helper()
	l, err := excl.New(core.RuntimeOf(c), name, excl.Config{
		Kind: "test", WaiterTimeout: waiterTimeout, Board: board, Streak: streak,
	})
	require.NoError(t, err)
	return l
}

// fairLock returns a lock of the fair lock's configuration, with the test's name, whose
// waiters board for board.
func fairLock(t testing.TB, c *aqs.Client, board time.Duration) *excl.Lock {
	t.Helper()
	return newLock(t, c, redistest.Name(t), board, 0)
}

func lock(ctx context.Context, l *excl.Lock) (context.Context, error) {
	held, _, err := l.Acquire(ctx, core.LockConfig{}, true)
	return held, err
}

// topologies runs f on a single node and on a cluster.
func topologies(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient)) {
	t.Run("single", func(t *testing.T) { f(t, redistest.Single(t).Client(t)) })
	t.Run("cluster", func(t *testing.T) { f(t, redistest.Cluster(t).Client(t)) })
}

// queued is how many entries the lock's deadline zset holds: its queued waiters.
func queued(t testing.TB, rdb redis.UniversalClient, l *excl.Lock) int64 {
	t.Helper()
	n, err := rdb.ZCard(context.Background(), l.Keys()[2]).Result()
	require.NoError(t, err)
	return n
}

func waitQueued(t testing.TB, rdb redis.UniversalClient, l *excl.Lock, n int64) {
	t.Helper()
	require.Eventually(t, func() bool { return queued(t, rdb, l) == n }, 5*time.Second, time.Millisecond,
		"expected %d queued waiters", n)
}

func waitBoarded(t testing.TB, l *excl.Lock, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return l.Boarded() == n }, 5*time.Second, time.Millisecond,
		"expected %d boarded waiters", n)
}

// assertNoKeysLeft asserts that the lock left none of its keys behind.
func assertNoKeysLeft(t testing.TB, rdb redis.UniversalClient, l *excl.Lock) {
	t.Helper()
	n, err := rdb.Exists(context.Background(), l.Keys()...).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "keys left behind")
}

// acquirer runs Locks in goroutines and records, in order, the names that got the lock; each
// holds until its release channel is closed.
type acquirer struct {
	mu    sync.Mutex
	order []string
	errs  chan error
	wg    sync.WaitGroup
}

func newAcquirer() *acquirer { return &acquirer{errs: make(chan error, 16)} }

func (a *acquirer) lock(ctx context.Context, l *excl.Lock, name string, release <-chan struct{}) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		held, err := lock(ctx, l)
		if err != nil {
			a.errs <- err
			return
		}
		a.mu.Lock()
		a.order = append(a.order, name)
		a.mu.Unlock()
		<-release
		a.errs <- l.Unlock(held)
	}()
}

// board starts the named goroutines' Locks one after the other, each once the one before it
// boarded on l's hold.
func (a *acquirer) board(t *testing.T, ctx context.Context, l *excl.Lock, names []string, release <-chan struct{}) {
	t.Helper()
	for i, name := range names {
		a.lock(ctx, l, name, release)
		waitBoarded(t, l, i+1)
	}
}

// finish waits for every Lock started and requires that none failed.
func (a *acquirer) finish(t *testing.T) {
	t.Helper()
	a.wg.Wait()
	close(a.errs)
	for err := range a.errs {
		require.NoError(t, err)
	}
}

func (a *acquirer) got() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.order...)
}
