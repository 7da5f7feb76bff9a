package chaos_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/lintest"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/latch"
	"github.com/redaqs/aqs/reentrant"
	"github.com/redaqs/aqs/rwlock"
	"github.com/redaqs/aqs/semaphore"
)

// Linearizability under the faults that make no call fail.
//
// The witness of the loads (load_test.go) sees overlaps only; here the same faults meet the
// histories of internal/testkit/lintest, checked with porcupine against each primitive's
// specification with its queue: calls that wait (a wait bound, a context that reaches its
// deadline or is cancelled mid-wait) are their join and their end, and a waiter whose wait ran
// out may have been granted in that instant and gives the grant back as it leaves. The faults:
//
//   - the pub/sub connections killed on the server every 20ms: grant messages and wakeups are
//     lost, and a waiter whose grant was lost learns of it only when its Client, subscribed
//     again, wakes it to look, or not before its wait runs out: it then leaves holding the
//     grant, and must pass it on;
//   - the script cache flushed every 5ms: every script falls back from EVALSHA to EVAL, the
//     watchdog's and the heartbeats' pipelines included.
//
// Neither makes a call fail, so every operation of a history has a known outcome (the
// runners fail the test on any error): faults that cut connections, whose calls may end with
// an outcome unknown, are left to the witness.

// linFaults are the faults of the linearizability runs: each acts on the server every every.
var linFaults = []struct {
	name   string
	every  time.Duration
	inject func(ctx context.Context, admin *redis.Client) (int64, error)
}{
	{"pub/sub connections killed", 20 * time.Millisecond, func(ctx context.Context, admin *redis.Client) (int64, error) {
		return admin.ClientKillByFilter(ctx, "TYPE", "pubsub").Result()
	}},
	{"script cache flushed", 5 * time.Millisecond, func(ctx context.Context, admin *redis.Client) (int64, error) {
		return 1, admin.ScriptFlush(ctx).Err()
	}},
}

// Every primitive's histories (with waits, deadlines and cancellations) are linearizable
// against its specification with its queue (the latch's: its count) while either fault acts, and every run ends with
// the primitive found free (lintest's probes). The two faults run at once, each against one
// primitive after the other: five histories at once would load a small machine so that most
// waits run out.
func TestHistoriesStayLinearizableUnderFaultsThatFailNoCall(t *testing.T) {
	rounds := scale(1, 5)
	var names []string
	for _, f := range linFaults {
		names = append(names, f.name)
	}
	forEachKind(t, names, func(t *testing.T, name string) {
		fault := linFaults[slices.Index(names, name)]
		// The multi-lock and the election have no runner here: lintest's lock runner re-enters
		// its holds, which a multi-lock refuses (it is not reentrant), and so does an election
		// (a leader campaigns in vain).
		kinds := slices.DeleteFunc(slices.Clone(allKinds), func(k string) bool { return k == kindMulti || k == kindElection })
		for _, kind := range append(kinds, kindLatch) {
			t.Run(kind, func(t *testing.T) {
				for round := range rounds {
					linRound(t, kind, round, fault.name, fault.every, fault.inject)
				}
			})
		}
	})
}

// linRound runs one history of kind on a server of its own while inject acts on the server
// every every, and checks it.
func linRound(t *testing.T, kind string, round int, fault string, every time.Duration,
	inject func(ctx context.Context, admin *redis.Client) (int64, error)) {
	srv := redistest.NewServer(t)
	admin := srv.Client(t)
	var clients []*aqs.Client
	for range lintest.Clients {
		c, err := aqs.New(context.Background(), srv.Client(t))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	stop, done := make(chan struct{}), make(chan int64)
	go func() {
		var n int64
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				done <- n
				return
			case <-tick.C:
				k, err := inject(context.Background(), admin)
				if err != nil {
					t.Errorf("%s: %v", fault, err)
				}
				n += k
			}
		}
	}()
	model, history := linRun(t, kind, clients)
	close(stop)
	faults := <-done
	if t.Failed() {
		return
	}
	t.Logf("SUMMARY linearizability %s under %s, round %d: %d faults in %v", kind, fault, round, faults,
		lintest.RunFor)
	lintest.Check(t, model, history)
}

// linRun runs lintest's runner of kind on Locks primitives shared by clients, and returns the
// model to check the history against and the history (split into joins and ends). The
// read-write lock's last lock is non-fair; the semaphores have 2 permits, as in the loads.
func linRun(t *testing.T, kind string, clients []*aqs.Client) (porcupine.Model, []porcupine.Operation) {
	const permits = 2
	base := redistest.Name(t) // one name per call: every Client's k-th primitive is the same
	name := func(k int) string { return fmt.Sprintf("%s-%d", base, k) }
	switch kind {
	case kindReentrant, kindFair:
		locks := make([][]lintest.Locker, len(clients))
		for ci, c := range clients {
			for k := range lintest.Locks {
				var l lintest.Locker
				var err error
				if kind == kindReentrant {
					l, err = reentrant.New(c, name(k))
				} else {
					l, err = fair.New(c, name(k))
				}
				require.NoError(t, err)
				locks[ci] = append(locks[ci], l)
			}
		}
		history := lintest.RunLocks(t, clients, locks, true)
		lintest.LogLockOutcomes(t, history)
		if kind == kindReentrant {
			return lintest.HandOffLockModel, lintest.SplitWaits(history)
		}
		return lintest.FairLockModel, lintest.SplitWaits(history)
	case kindRWLock:
		nonFair := make([]bool, lintest.Locks)
		nonFair[lintest.Locks-1] = true
		locks := make([][]lintest.RWLocker, len(clients))
		for ci, c := range clients {
			for k := range lintest.Locks {
				var opts []rwlock.Option
				if nonFair[k] {
					opts = append(opts, rwlock.WithNonFair())
				}
				l, err := rwlock.New(c, name(k), opts...)
				require.NoError(t, err)
				locks[ci] = append(locks[ci], l)
			}
		}
		history := lintest.RunRW(t, clients, locks, nonFair)
		lintest.LogRWOutcomes(t, history)
		return lintest.RWModel, history
	case kindLatch:
		return lintest.LatchModel, linLatches(t, clients, name)
	case kindCounting:
		sems := make([][]*semaphore.Semaphore, len(clients))
		for ci, c := range clients {
			for k := range lintest.Locks {
				s, err := semaphore.New(c, name(k))
				require.NoError(t, err)
				if ci == 0 {
					_, err = s.TrySetPermits(context.Background(), permits)
					require.NoError(t, err)
				}
				sems[ci] = append(sems[ci], s)
			}
		}
		history := lintest.RunCounting(t, clients, sems, permits)
		lintest.LogSemOutcomes(t, history)
		return lintest.SemModel(permits), history
	default:
		sems := make([][]*semaphore.Leased, len(clients))
		for ci, c := range clients {
			for k := range lintest.Locks {
				s, err := semaphore.NewLeased(c, name(k))
				require.NoError(t, err)
				if ci == 0 {
					_, err = s.TrySetPermits(context.Background(), permits)
					require.NoError(t, err)
				}
				sems[ci] = append(sems[ci], s)
			}
		}
		history := lintest.RunLeased(t, clients, sems, permits)
		lintest.LogSemOutcomes(t, history)
		return lintest.SemModel(permits), history
	}
}

// linLatches runs lintest.RunLatches on Locks latches shared by clients (their expiry a
// minute, beyond the run), and returns the history.
func linLatches(t *testing.T, clients []*aqs.Client, name func(k int) string) []porcupine.Operation {
	latches := make([][]*latch.Latch, len(clients))
	for ci, c := range clients {
		for k := range lintest.Locks {
			l, err := latch.New(c, name(k), latch.WithExpiry(time.Minute))
			require.NoError(t, err)
			latches[ci] = append(latches[ci], l)
		}
	}
	history := lintest.RunLatches(t, clients, latches)
	lintest.LogLatchOutcomes(t, history)
	return history
}
