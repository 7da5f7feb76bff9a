package semaphore_test

import (
	"context"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/lintest"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/semaphore"
)

// Linearizability of both semaphores, with their queue.
//
// Several goroutines on three Clients (each on its own go-redis client) run random operations
// on a few semaphores for a short time; every operation is recorded with its input, its output
// and the times taken just before the library call and just after it returned. The history is
// then checked with porcupine against the semaphores' specification (lintest.SemModel: the
// permits available and a FIFO queue of waiters, served in order while the head's request
// fits; a waiter whose wait ran out may have been granted its permits in that instant, and
// gives them back as it leaves).
//
// (An earlier uncontended acquisition of the counting semaphore, a plain HINCRBY of -n undone
// by a script when it went negative, failed this check: until the undo, others saw fewer
// permits than there were, and a release beyond what was taken passed unseen. The acquisition
// is now always a script.)

// linSems is how many semaphores a run works on, and linTotal the permits of each; the other
// sizes of a run are the locks' (see internal/testkit/lintest), so that each semaphore's history has a
// few hundred operations.
const (
	linSems  = lintest.Locks
	linTotal = 3
)

// The counting semaphore is linearizable against lintest.SemModel: TryAcquire with and without
// waits, Acquire whose context reaches its deadline or is cancelled by another goroutine
// mid-wait, Release, Drain and Available, single node and cluster. The run leaves no key but
// the permits hash without a TTL.
func TestSemaphoreIsLinearizable(t *testing.T) {
	checkSemLinearizable(t, func(t *testing.T, c *aqs.Client) *semaphore.Semaphore { return newSem(t, c, linTotal) },
		semaphore.New, func(t *testing.T, clients []*aqs.Client, sems [][]*semaphore.Semaphore) []porcupine.Operation {
			return lintest.RunCounting(t, clients, sems, linTotal)
		})
}

// The leased semaphore is linearizable against lintest.SemModel: TryAcquire with and without
// waits, Acquire whose context reaches its deadline or is cancelled by another goroutine
// mid-wait, Release, ReleasePart and Available, single node and cluster. Every permit is given
// back at the end, and then no key of the semaphore is left without a TTL but its
// configuration hash (s, which has none by design).
func TestLeasedSemaphoreIsLinearizable(t *testing.T) {
	checkSemLinearizable(t, func(t *testing.T, c *aqs.Client) *semaphore.Leased { return newLeased(t, c, linTotal) },
		semaphore.NewLeased, func(t *testing.T, clients []*aqs.Client, sems [][]*semaphore.Leased) []porcupine.Operation {
			return lintest.RunLeased(t, clients, sems, linTotal)
		})
}

// linSem is what checkSemLinearizable needs of a semaphore of either kind.
type linSem interface {
	Name() string
	Key() string
	Available(ctx context.Context) (int, error)
}

// checkSemLinearizable runs, on each topology, linSems semaphores shared by lintest.Clients
// Clients (made by first on the first Client, opened by name on the others) through run,
// checks the history against lintest.SemModel, and then that every permit is available and
// that no key but the permits hash (s, which has no TTL by design) is left without a TTL.
func checkSemLinearizable[S linSem](t *testing.T, first func(*testing.T, *aqs.Client) S,
	open func(*aqs.Client, string, ...semaphore.Option) (S, error),
	run func(*testing.T, []*aqs.Client, [][]S) []porcupine.Operation) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		firsts := make([]S, linSems)
		sems := make([][]S, lintest.Clients) // [client][key]
		var clients []*aqs.Client
		for ci := range lintest.Clients {
			c := newClient(t, lintest.OwnRedis(t, rdb))
			clients = append(clients, c)
			for k := range linSems {
				if ci == 0 {
					firsts[k] = first(t, c)
				}
				s, err := open(c, firsts[k].Name())
				if err != nil {
					t.Fatal(err)
				}
				sems[ci] = append(sems[ci], s)
			}
		}

		history := run(t, clients, sems)
		if t.Failed() {
			return
		}
		lintest.LogSemOutcomes(t, history)
		lintest.Check(t, lintest.SemModel(linTotal), history)
		for _, s := range firsts {
			avail, err := s.Available(context.Background())
			if err != nil || avail != linTotal {
				t.Errorf("%s: %d permits available after the run (%v), want %d", s.Name(), avail, err, linTotal)
			}
			// Every key but s itself: "{name}:" is in the names of the others only.
			redistest.AssertNoKeyWithoutTTL(t, rdb, "{"+s.Name()+"}:", s.Key())
		}
	})
}
