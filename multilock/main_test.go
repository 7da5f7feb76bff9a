package multilock_test

import (
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/multilock"
)

// TestMain runs the tests, or, in a child process of the multi-process tests, its role.
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// newClient returns an aqs Client on rdb, closed at the end of the test.
var newClient = redistest.NewClient

// topologies runs f on a single node and on a cluster.
func topologies(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient)) {
	t.Run("single", func(t *testing.T) { f(t, redistest.Single(t).Client(t)) })
	t.Run("cluster", func(t *testing.T) { f(t, redistest.Cluster(t).Client(t)) })
}

// names returns n names unique to the test that share one hash tag (one slot on a cluster).
func names(t testing.TB, n int) []string {
	base := "{" + redistest.Name(t) + "}:"
	out := make([]string, n)
	for i := range out {
		out[i] = base + string(rune('a'+i))
	}
	return out
}

func newLock(t testing.TB, c *aqs.Client, names []string, opts ...multilock.Option) *multilock.Lock {
	t.Helper()
	l, err := multilock.New(c, names, opts...)
	require.NoError(t, err)
	return l
}

func redistestSingle(t testing.TB) redis.UniversalClient  { return redistest.Single(t).Client(t) }
func redistestCluster(t testing.TB) redis.UniversalClient { return redistest.Cluster(t).Client(t) }
