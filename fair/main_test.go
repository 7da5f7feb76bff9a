package fair_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// TestMain runs the tests, or, in a child process of the multi-process tests, its role
// (helper_test.go, cond_helper_test.go).
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// newClient returns an aqs Client on rdb, closed at the end of the test.
var newClient = redistest.NewClient

// newLock returns a fair lock with a name unique to the test.
func newLock(t testing.TB, c *aqs.Client, opts ...fair.Option) *fair.Lock {
	t.Helper()
	l, err := fair.New(c, redistest.Name(t), opts...)
	require.NoError(t, err)
	return l
}

// topologies runs f on a single node and on a cluster.
func topologies(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient)) {
	t.Run("single", func(t *testing.T) { f(t, redistest.Single(t).Client(t)) })
	t.Run("cluster", func(t *testing.T) { f(t, redistest.Cluster(t).Client(t)) })
}

// queued returns how many live entries the lock's deadline zset has.
func queued(t *testing.T, rdb redis.UniversalClient, l *fair.Lock) int64 {
	t.Helper()
	n, err := rdb.ZCard(context.Background(), l.Key()+":d").Result()
	require.NoError(t, err)
	return n
}

// waitQueued waits, bounded, until n waiters are queued.
func waitQueued(t *testing.T, rdb redis.UniversalClient, l *fair.Lock, n int64) {
	t.Helper()
	require.Eventually(t, func() bool { return queued(t, rdb, l) == n }, 5*time.Second, 2*time.Millisecond,
		"expected %d queued waiters", n)
}
