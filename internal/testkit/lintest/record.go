package lintest

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/core"
)

// Worker is one goroutine of a run made by Work: it draws its operations from Rand, runs them
// while More says so, and records each with Record (timestamps from Now, taken just before the
// library call and just after it returned).
type Worker struct {
	ID     int // unique in the run: Client*Workers + the worker's index
	Client int // which of the run's Clients the worker uses
	Rand   *rand.Rand

	start    time.Time
	stop     time.Time
	ops      *atomic.Int64
	rec      *recorder
	deferred func() int64 // its Client's core.Runtime.Deferred
}

// More reports whether the worker may run one more operation: the run's time is not over and
// its operations (MaxOps in all) are not used up. Operations that release what the worker
// still holds at the end need not ask.
func (w *Worker) More() bool { return time.Now().Before(w.stop) && w.ops.Add(1) <= MaxOps }

// Now returns the time since the run started, in ns, for the Call and Return of an operation.
func (w *Worker) Now() int64 { return time.Since(w.start).Nanoseconds() }

// Record adds an operation, input in and output out, called at call and returned at ret.
func (w *Worker) Record(in, out any, call, ret int64) {
	w.rec.add(porcupine.Operation{ClientId: w.ID, Input: in, Call: call, Output: out, Return: ret})
}

type recorder struct {
	mu  sync.Mutex
	ops []porcupine.Operation
}

func (r *recorder) add(op porcupine.Operation) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// Work runs Workers goroutines for each of clients, each running body for RunFor (and MaxOps
// operations in all), then settle on one more worker of the first Client, and returns the
// history they recorded.
func Work(clients []*aqs.Client, body func(w *Worker), settle func(w *Worker)) []porcupine.Operation {
	start := time.Now()
	var (
		ops atomic.Int64
		rec recorder
		wg  sync.WaitGroup
	)
	worker := func(id, ci int) *Worker {
		return &Worker{
			ID: id, Client: ci, start: start, stop: start.Add(RunFor), ops: &ops, rec: &rec,
			Rand:     rand.New(rand.NewPCG(uint64(id), uint64(start.UnixNano()))),
			deferred: core.RuntimeOf(clients[ci]).Deferred,
		}
	}
	for ci := range clients {
		for i := range Workers {
			w := worker(ci*Workers+i, ci)
			wg.Go(func() { body(w) })
		}
	}
	wg.Wait()
	settle(worker(len(clients)*Workers, 0))
	return rec.ops
}

// SettleTime bounds how long the primitives of a run may take to be free once its workers
// are done: the clean-ups that calls left to run after they returned (see wait.go) are bounded
// by 5s, and the rest is room for a loaded machine.
const SettleTime = 8 * time.Second

// settleAll probes each of n primitives of a run whose workers are done, with probe, until a
// probe succeeds, for at most SettleTime (the test fails beyond). A probe is an acquisition of
// the whole primitive without wait (the write side, every permit), released again when it
// succeeds, both recorded: so the history ends with the primitive free, its queue empty, and
// every end of a failed wait left open (see wait.go) must fit before that.
func settleAll(t *testing.T, n int, probe func(key int) (won, ok bool)) {
	deadline := time.Now().Add(SettleTime)
	for key := range n {
		for {
			won, ok := probe(key)
			switch {
			case !ok:
				return // it failed the test
			case won:
			case time.Now().After(deadline):
				t.Errorf("primitive %d not free %v after the run", key, SettleTime)
				return
			default:
				time.Sleep(10 * time.Millisecond) // a pause between probes, not a wait for a condition
				continue
			}
			break
		}
	}
}

// record runs call, one operation of worker w, and records it as in with call's output, unless
// it failed (the test fails then).
func record[O any](t *testing.T, w *Worker, in any, call func() (O, error)) bool {
	callAt := w.Now()
	out, err := call()
	retAt := w.Now()
	if err != nil {
		t.Errorf("worker %d: %+v: %v", w.ID, in, err)
		return false
	}
	w.Record(in, out, callAt, retAt)
	return true
}
