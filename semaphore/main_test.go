package semaphore_test

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/semaphore"
)

// TestMain runs the tests, or, in a child process of the multi-process tests, its role
// (helper_test.go).
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// newClient returns an aqs Client on rdb, closed at the end of the test.
var newClient = redistest.NewClient

// newSem returns a counting semaphore with a name unique to the test and k permits set.
func newSem(t testing.TB, c *aqs.Client, k int, opts ...semaphore.Option) *semaphore.Semaphore {
	t.Helper()
	s, err := semaphore.New(c, redistest.Name(t), opts...)
	require.NoError(t, err)
	ok, err := s.TrySetPermits(context.Background(), k)
	require.NoError(t, err)
	require.True(t, ok)
	return s
}

// newLeased returns a leased-permit semaphore with a name unique to the test and k permits.
func newLeased(t testing.TB, c *aqs.Client, k int, opts ...semaphore.Option) *semaphore.Leased {
	t.Helper()
	s, err := semaphore.NewLeased(c, redistest.Name(t), opts...)
	require.NoError(t, err)
	ok, err := s.TrySetPermits(context.Background(), k)
	require.NoError(t, err)
	require.True(t, ok)
	return s
}

// topologies runs f on a single node and on a cluster.
func topologies(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient)) {
	t.Run("single", func(t *testing.T) { f(t, redistest.Single(t).Client(t)) })
	t.Run("cluster", func(t *testing.T) { f(t, redistest.Cluster(t).Client(t)) })
}
