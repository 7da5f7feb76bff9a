package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/internal/lintest"
	"github.com/redaqs/aqs/internal/redistest"
	"github.com/redaqs/aqs/semaphore"
)

// Linearizability of the counting semaphore.
//
// Several goroutines on three Clients (each on its own go-redis client) run random
// operations on a few semaphores for a short time; every operation is recorded with its
// input, its output and the times taken just before the library call and just after it
// returned. The history is then checked with porcupine against the sequential
// specification below. Nobody waits (TryAcquire without WithWait), so the queue stays
// empty and the state is the available permits alone.

// Semaphore operations of the history.
const (
	semTry     = iota // TryAcquire(n) without wait
	semRelease        // Release(n)
	semDrain          // Drain()
)

// semInput is an operation on semaphore key: its kind and n.
type semInput struct {
	key int
	op  int
	n   int
}

// semOutput is an operation's result: ok for TryAcquire; for Release, overRelease when it
// failed with ErrOverRelease; for Drain, the permits it took (any other error fails the test
// before the check).
type semOutput struct {
	ok          bool
	overRelease bool
	drained     int
}

// semTotal is every semaphore's total permits.
const semTotal = 3

// semModel is the sequential specification of the counting semaphore: the state is the
// available permits (an int), semTotal at first. TryAcquire(n) takes n when n are available
// and fails otherwise; Release(n) gives n back unless that would make more than the total
// available (ErrOverRelease, no change); Drain takes every available permit.
//
// (An earlier uncontended acquisition, a plain HINCRBY of -n undone by a script when it went
// negative, failed this check: until the undo, others saw fewer permits than there were, and a
// release beyond what was taken passed unseen. The acquisition is now always a script.)
var semModel = porcupine.Model{
	Partition: partitionSemByKey,
	Init:      func() any { return semTotal },
	Step: func(state, input, output any) (bool, any) {
		avail, in, out := state.(int), input.(semInput), output.(semOutput)
		switch in.op {
		case semTry:
			if out.ok {
				return avail >= in.n, avail - in.n
			}
			return avail < in.n, avail
		case semRelease:
			if out.overRelease {
				return avail+in.n > semTotal, avail
			}
			return avail+in.n <= semTotal, avail + in.n
		default:
			return out.drained == avail, 0
		}
	},
	Equal: func(a, b any) bool { return a.(int) == b.(int) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(semInput), output.(semOutput)
		switch in.op {
		case semTry:
			return fmt.Sprintf("sem%d TryAcquire(%d) -> %v", in.key, in.n, out.ok)
		case semRelease:
			return fmt.Sprintf("sem%d Release(%d) -> overRelease=%v", in.key, in.n, out.overRelease)
		default:
			return fmt.Sprintf("sem%d Drain() -> %d", in.key, out.drained)
		}
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%d available", state.(int)) },
}

// partitionSemByKey splits a history by semaphore: they are independent objects.
func partitionSemByKey(history []porcupine.Operation) [][]porcupine.Operation {
	var parts [][]porcupine.Operation
	for _, op := range history {
		k := op.Input.(semInput).key
		for len(parts) <= k {
			parts = append(parts, nil)
		}
		parts[k] = append(parts[k], op)
	}
	return parts
}

// linSems is how many semaphores a run works on; the other sizes of a run are the locks' (see
// internal/lintest), so that each semaphore's history has a few hundred operations.
const linSems = lintest.Locks

func TestSemaphoreIsLinearizable(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		first := make([]*semaphore.Semaphore, linSems)
		sems := make([][]*semaphore.Semaphore, lintest.Clients) // [client][key]
		for ci := range lintest.Clients {
			c := newClient(t, lintest.OwnRedis(t, rdb))
			for k := range linSems {
				if ci == 0 {
					first[k] = newSem(t, c, semTotal)
				}
				s, err := semaphore.New(c, first[k].Name())
				if err != nil {
					t.Fatal(err)
				}
				sems[ci] = append(sems[ci], s)
			}
		}

		history := runSemHistory(t, sems)
		if t.Failed() {
			return
		}
		logSemOutcomes(t, history)
		lintest.Check(t, semModel, history)
		for _, s := range first {
			// Every key but s itself, which has no TTL by design: "{name}:" is in the names
			// of the others only.
			redistest.AssertNoKeyWithoutTTL(t, rdb, "{"+s.Name()+"}:", s.Key())
		}
	})
}

// logSemOutcomes logs how the history's operations ended, to show the run contended.
func logSemOutcomes(t *testing.T, history []porcupine.Operation) {
	t.Helper()
	var won, lost, released, refused, drains, drained int
	for _, op := range history {
		in, out := op.Input.(semInput), op.Output.(semOutput)
		switch {
		case in.op == semTry && out.ok:
			won++
		case in.op == semTry:
			lost++
		case in.op == semRelease && out.overRelease:
			refused++
		case in.op == semRelease:
			released++
		default:
			drains++
			drained += out.drained
		}
	}
	t.Logf("TryAcquire: %d won, %d not; Release: %d done, %d ErrOverRelease; Drain: %d, %d permits",
		won, lost, released, refused, drains, drained)
}

// runSemHistory runs lintest.Workers goroutines on each Client and returns the history they
// recorded. sems[c][k] is semaphore k of Client c.
func runSemHistory(t *testing.T, sems [][]*semaphore.Semaphore) []porcupine.Operation {
	start := time.Now()
	stop := start.Add(lintest.RunFor)
	ctx := context.Background()
	var (
		ops  atomic.Int64
		mu   sync.Mutex
		hist []porcupine.Operation
		wg   sync.WaitGroup
	)
	for ci, mine := range sems {
		for w := range lintest.Workers {
			id := ci*lintest.Workers + w
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(id), uint64(start.UnixNano())))
				taken := make([]int, linSems) // permits this worker took and did not give back
				for time.Now().Before(stop) && ops.Add(1) <= lintest.MaxOps {
					in := semInput{key: rng.IntN(linSems), n: 1 + rng.IntN(2)}
					s := mine[in.key]
					r := rng.IntN(100)
					switch {
					case r < 3:
						in.op, in.n = semDrain, 0
					case taken[in.key] > 0 && r < 50:
						in.op, in.n = semRelease, 1+rng.IntN(taken[in.key])
					default:
						in.op = semTry
						if r > 95 {
							in.n = semTotal
						}
					}
					var out semOutput
					var err error
					callAt := time.Since(start).Nanoseconds()
					switch in.op {
					case semTry:
						out.ok, err = s.TryAcquire(ctx, in.n)
					case semRelease:
						err = s.Release(ctx, in.n)
						if errors.Is(err, semaphore.ErrOverRelease) {
							out.overRelease, err = true, nil
						}
					default:
						out.drained, err = s.Drain(ctx)
					}
					retAt := time.Since(start).Nanoseconds()
					if err != nil {
						t.Errorf("worker %d: %+v: %v", id, in, err)
						return
					}
					switch {
					case in.op == semTry && out.ok:
						taken[in.key] += in.n
					case in.op == semRelease && !out.overRelease:
						taken[in.key] -= in.n
					case in.op == semDrain:
						taken[in.key] += out.drained
					}
					mu.Lock()
					hist = append(hist, porcupine.Operation{ClientId: id, Input: in, Call: callAt, Output: out, Return: retAt})
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	return hist
}
