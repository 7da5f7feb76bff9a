package election_test

import (
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/election"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// TestMain runs the tests, or, in a child process of the multi-process tests, its role.
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// newClient returns an aqs Client on rdb, closed at the end of the test.
var newClient = redistest.NewClient

// newElection returns an election with a name unique to the test.
func newElection(t testing.TB, c *aqs.Client, opts ...election.Option) *election.Election {
	t.Helper()
	e, err := election.New(c, redistest.Name(t), opts...)
	require.NoError(t, err)
	return e
}

// topologies runs f on a single node and on a cluster.
func topologies(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient)) {
	t.Run("single", func(t *testing.T) { f(t, redistest.Single(t).Client(t)) })
	t.Run("cluster", func(t *testing.T) { f(t, redistest.Cluster(t).Client(t)) })
}
