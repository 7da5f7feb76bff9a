package rwlock_test

import (
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/rwlock"
)

// TestMain runs the tests, or, in a child process of the multi-process tests, its role
// (helper_test.go).
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// newClient returns an aqs Client on rdb, closed at the end of the test.
var newClient = redistest.NewClient

// newLock returns a read-write lock with a name unique to the test.
func newLock(t testing.TB, c *aqs.Client, opts ...rwlock.Option) *rwlock.Lock {
	t.Helper()
	l, err := rwlock.New(c, redistest.Name(t), opts...)
	require.NoError(t, err)
	return l
}

// topologies runs f on a single node and on a cluster.
func topologies(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient)) {
	t.Run("single", func(t *testing.T) { f(t, redistest.Single(t).Client(t)) })
	t.Run("cluster", func(t *testing.T) { f(t, redistest.Cluster(t).Client(t)) })
}
