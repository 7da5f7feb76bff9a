package reentrant_test

import (
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/reentrant"
)

// TestMain runs the tests, or, in a child process of the multi-process tests, its role
// (helper_test.go).
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// newClient returns an aqs Client on rdb, closed at the end of the test.
var newClient = redistest.NewClient

// sameLock returns the lock of l's name through the Client c.
func sameLock(t testing.TB, c *aqs.Client, l *reentrant.Lock) *reentrant.Lock {
	t.Helper()
	x, err := reentrant.New(c, l.Name())
	require.NoError(t, err)
	return x
}

// newLock returns a lock with a name unique to the test.
func newLock(t testing.TB, c *aqs.Client) *reentrant.Lock {
	t.Helper()
	l, err := reentrant.New(c, redistest.Name(t))
	require.NoError(t, err)
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
