package semaphore_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/lintest"
	"github.com/redaqs/aqs/internal/redistest"
	"github.com/redaqs/aqs/semaphore"
)

// Linearizability of the leased-permit semaphore, with its queue.
//
// The specification (leasedModel): the state is the permits available and the queue of
// waiters, each asking for n, in order. TryAcquire(n) without wait takes n when they are
// available and nobody waits. Release and ReleasePart give permits back, and the waiters are
// then served in order while the head's request fits (a large request at the head holds the
// smaller ones behind it). Available reports the permits available.
//
// A TryAcquire with a wait is two operations of one call, as for the fair lock (see
// internal/lintest/fair.go): lsJoin, its first attempt, which takes the permits when it can
// or joins the tail of the queue, and lsEnd, its outcome: a success is legal only when the
// waiter was granted its permits (at its join, or by a release or a leaving waiter that served
// the queue); a failure leaves the queue, and gives back permits granted to it in the same
// instant, which serves the queue again. A wait that failed ends no earlier than its wait
// after the call. Granted waiters whose call has not returned are part of the state, so that
// the two halves agree.
//
// Leases are the watchdog's (renewed, 30s): expiry is out of play, and so are dropped waiters
// (the waiter timeout, 5s, is beyond the run).

// Operations of a leased semaphore's history.
const (
	lsTry         = iota // TryAcquire(n) without wait
	lsJoin               // TryAcquire(n) with a wait: its first attempt
	lsEnd                // the same call: its outcome
	lsRelease            // Release of a permit holding n
	lsReleasePart        // ReleasePart(n) of a permit holding more
	lsAvailable          // Available()
)

// lsInput is an operation on semaphore key: its kind, the acquisition it concerns (a number
// unique in the run) and n.
type lsInput struct {
	key  int
	op   int
	hold int
	n    int
	wait time.Duration
}

// lsOutput is an operation's result: ok for TryAcquire, the permits for Available (any error
// fails the test before the check).
type lsOutput struct {
	ok    bool
	avail int
}

// lsTotal is every leased semaphore's total permits.
const lsTotal = 3

// lsMax bounds the queue and the granted waiters of the model: each worker has one call at a
// time.
const lsMax = 16

type lsWaiter struct{ hold, n int }

// lsState is a leased semaphore's sequential state: the permits available, the queue
// (queue[:nq], in order) and the waiters granted their permits whose call has not returned
// (granted[:ng], sorted by hold).
type lsState struct {
	avail   int
	nq, ng  int
	queue   [lsMax]lsWaiter
	granted [lsMax]lsWaiter
}

func (s lsState) grant(w lsWaiter) lsState {
	s.avail -= w.n
	s.granted[s.ng] = w
	s.ng++
	for i := s.ng - 1; i > 0 && s.granted[i].hold < s.granted[i-1].hold; i-- {
		s.granted[i], s.granted[i-1] = s.granted[i-1], s.granted[i]
	}
	return s
}

// serve grants the head of the queue its permits while they are available.
func (s lsState) serve() lsState {
	for s.nq > 0 && s.queue[0].n <= s.avail {
		head := s.queue[0]
		copy(s.queue[:], s.queue[1:s.nq])
		s.nq--
		s.queue[s.nq] = lsWaiter{}
		s = s.grant(head)
	}
	return s
}

func (s lsState) ungrant(i int) lsState {
	copy(s.granted[i:], s.granted[i+1:s.ng])
	s.ng--
	s.granted[s.ng] = lsWaiter{}
	return s
}

var leasedModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		var parts [][]porcupine.Operation
		for _, op := range history {
			k := op.Input.(lsInput).key
			for len(parts) <= k {
				parts = append(parts, nil)
			}
			parts[k] = append(parts[k], op)
		}
		return parts
	},
	Init: func() any { return lsState{avail: lsTotal} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(lsState), input.(lsInput), output.(lsOutput)
		free := s.nq == 0 && s.avail >= in.n
		switch in.op {
		case lsTry:
			if out.ok {
				s.avail -= in.n
				return free, s
			}
			return !free, s
		case lsJoin:
			if free {
				return out.ok, s.grant(lsWaiter{in.hold, in.n})
			}
			if s.nq == lsMax {
				panic("queue of the model full")
			}
			s.queue[s.nq] = lsWaiter{in.hold, in.n}
			s.nq++
			return true, s
		case lsEnd:
			for i := range s.ng {
				if s.granted[i].hold == in.hold {
					if out.ok {
						return true, s.ungrant(i) // the permits stay taken, now reported
					}
					s.avail += in.n // granted in the instant it left: the permits go back
					return true, s.ungrant(i).serve()
				}
			}
			for i := range s.nq {
				if s.queue[i].hold == in.hold {
					if out.ok {
						return false, s // a success without a grant
					}
					copy(s.queue[i:], s.queue[i+1:s.nq])
					s.nq--
					s.queue[s.nq] = lsWaiter{}
					return true, s.serve() // a head leaving may let those behind it in
				}
			}
			return false, s // not joined yet
		case lsRelease, lsReleasePart:
			s.avail += in.n
			return s.avail <= lsTotal, s.serve()
		default:
			return out.avail == s.avail, s
		}
	},
	Equal: func(a, b any) bool { return a.(lsState) == b.(lsState) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(lsInput), output.(lsOutput)
		switch in.op {
		case lsTry:
			return fmt.Sprintf("sem%d TryAcquire(p%d, %d) -> %v", in.key, in.hold, in.n, out.ok)
		case lsJoin:
			return fmt.Sprintf("sem%d TryAcquire(p%d, %d, wait %v) joins (-> %v)", in.key, in.hold, in.n, in.wait, out.ok)
		case lsEnd:
			return fmt.Sprintf("sem%d TryAcquire(p%d, %d, wait %v) ends -> %v", in.key, in.hold, in.n, in.wait, out.ok)
		case lsRelease:
			return fmt.Sprintf("sem%d Release(p%d, all %d)", in.key, in.hold, in.n)
		case lsReleasePart:
			return fmt.Sprintf("sem%d ReleasePart(p%d, %d)", in.key, in.hold, in.n)
		default:
			return fmt.Sprintf("sem%d Available() -> %d", in.key, out.avail)
		}
	},
	DescribeState: func(state any) string {
		s := state.(lsState)
		var b strings.Builder
		fmt.Fprintf(&b, "%d available", s.avail)
		for i := range s.nq {
			fmt.Fprintf(&b, " ← p%d(%d)", s.queue[i].hold, s.queue[i].n)
		}
		if s.ng > 0 {
			fmt.Fprintf(&b, "; granted %v", s.granted[:s.ng])
		}
		return b.String()
	},
}

// lsSplit is a TryAcquire with a wait as the runner records it: its join and its end.
func lsSplit(call, ret int64, in lsInput, ok bool) []porcupine.Operation {
	join := porcupine.Operation{Input: in, Call: call, Output: lsOutput{ok: ok}, Return: ret}
	join.Input = lsInput{key: in.key, op: lsJoin, hold: in.hold, n: in.n, wait: in.wait}
	end := join
	end.Input = lsInput{key: in.key, op: lsEnd, hold: in.hold, n: in.n, wait: in.wait}
	if !ok {
		end.Call = min(call+in.wait.Nanoseconds(), ret)
	}
	return []porcupine.Operation{join, end}
}

// The model is not vacuous. Hand-written histories of one semaphore of 3 permits, times in ns.
func TestLeasedModelRejectsBrokenHistories(t *testing.T) {
	op := func(call, ret int64, in lsInput, out lsOutput) porcupine.Operation {
		return porcupine.Operation{Input: in, Call: call, Output: out, Return: ret}
	}
	try := func(call, ret int64, hold, n int, ok bool) porcupine.Operation {
		return op(call, ret, lsInput{op: lsTry, hold: hold, n: n}, lsOutput{ok: ok})
	}
	wait := func(call, ret int64, hold, n int, ok bool) []porcupine.Operation {
		return lsSplit(call, ret, lsInput{hold: hold, n: n, wait: 15}, ok)
	}
	release := func(call, ret int64, hold, n int) porcupine.Operation {
		return op(call, ret, lsInput{op: lsRelease, hold: hold, n: n}, lsOutput{})
	}
	available := func(call, ret int64, n int) porcupine.Operation {
		return op(call, ret, lsInput{op: lsAvailable}, lsOutput{avail: n})
	}
	cat := func(parts ...[]porcupine.Operation) []porcupine.Operation {
		var h []porcupine.Operation
		for _, p := range parts {
			h = append(h, p...)
		}
		return h
	}
	one := func(ops ...porcupine.Operation) []porcupine.Operation { return ops }
	for _, c := range []struct {
		name  string
		legal bool
		h     []porcupine.Operation
	}{
		{"more permits than the total", false, one(try(0, 1, 1, 2, true), try(2, 3, 2, 2, true))},
		{"a refusal with permits free", false, one(try(0, 1, 1, 2, true), try(2, 3, 2, 1, false))},
		{"a wrong count", false, one(try(0, 1, 1, 2, true), available(2, 3, 2))},
		{"a release beyond the total", false, one(release(0, 1, 1, 1))},
		{"permits back after a release", true, one(try(0, 1, 1, 3, true), release(2, 3, 1, 3), try(4, 5, 2, 3, true))},
		// A waiter for 2 that gave up may have been granted them in the instant it left:
		// meanwhile a newcomer for 1 is refused though 2 are free of every reported holder.
		{"the permits of a waiter that gave up", true, cat(
			one(try(0, 1, 1, 3, true), release(3, 4, 1, 3), try(5, 6, 3, 2, false)),
			wait(2, 20, 2, 2, false))},
		// Waiter 2 (for 3) is known to wait by 6: the newcomer for 1 at 5-6 is refused with 1
		// free, which only a waiter at the head explains. A newcomer for 1 passing it at 8-9
		// is illegal, and so is waiter 4 (for 1), which arrived after, being served first.
		{"a newcomer passing a waiter", false, cat(
			one(try(0, 1, 1, 2, true), try(5, 6, 3, 1, false), try(8, 9, 5, 1, true)),
			wait(2, 20, 2, 3, false))},
		{"a later waiter passing an earlier one", false, cat(
			one(try(0, 1, 1, 2, true), try(5, 6, 3, 1, false)),
			wait(2, 20, 2, 3, false), wait(7, 9, 4, 1, true))},
		{"a waiter served without the permits", false, cat(
			one(try(0, 1, 1, 3, true), release(30, 31, 1, 3)), wait(2, 10, 2, 1, true))},
	} {
		if got := porcupine.CheckOperations(leasedModel, c.h); got != c.legal {
			t.Errorf("%s: linearizable %v, want %v", c.name, got, c.legal)
		}
	}
}

// The leased semaphore is linearizable against leasedModel: TryAcquire with and without waits,
// Release, ReleasePart and Available on a few semaphores of lsTotal permits, single node and
// cluster. Every permit is given back at the end, and then no key of the semaphore is left
// without a TTL but its configuration hash (s, which has none by design).
func TestLeasedSemaphoreIsLinearizable(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		first := make([]*semaphore.Leased, linSems)
		sems := make([][]*semaphore.Leased, lintest.Clients) // [client][key]
		var clients []*aqs.Client
		for ci := range lintest.Clients {
			c := newClient(t, lintest.OwnRedis(t, rdb))
			clients = append(clients, c)
			for k := range linSems {
				if ci == 0 {
					first[k] = newLeased(t, c, lsTotal)
				}
				s, err := semaphore.NewLeased(c, first[k].Name())
				if err != nil {
					t.Fatal(err)
				}
				sems[ci] = append(sems[ci], s)
			}
		}

		history := runLeasedHistory(t, clients, sems)
		if t.Failed() {
			return
		}
		logLeasedOutcomes(t, history)
		lintest.Check(t, leasedModel, history)
		for _, s := range first {
			avail, err := s.Available(context.Background())
			if err != nil || avail != lsTotal {
				t.Errorf("%s: %d permits available after the run (%v), want %d", s.Name(), avail, err, lsTotal)
			}
			// Every key but s itself: "{name}:" is in the names of the others only.
			redistest.AssertNoKeyWithoutTTL(t, rdb, "{"+s.Name()+"}:", s.Key())
		}
	})
}

// logLeasedOutcomes logs how the history's operations ended, to show the run contended.
func logLeasedOutcomes(t *testing.T, history []porcupine.Operation) {
	t.Helper()
	n := map[[2]int]int{}
	for _, op := range history {
		in, out := op.Input.(lsInput), op.Output.(lsOutput)
		k := [2]int{in.op, 0}
		if out.ok {
			k[1] = 1
		}
		n[k]++
	}
	t.Logf("TryAcquire: %d won, %d not; with wait: %d won, %d not; Release: %d; ReleasePart: %d; Available: %d",
		n[[2]int{lsTry, 1}], n[[2]int{lsTry, 0}], n[[2]int{lsEnd, 1}], n[[2]int{lsEnd, 0}],
		n[[2]int{lsRelease, 0}], n[[2]int{lsReleasePart, 0}], n[[2]int{lsAvailable, 0}])
}

// runLeasedHistory runs lintest.Workers goroutines on each Client and returns the history they
// recorded. sems[c][k] is semaphore k of Client c. A worker holds up to two permits at a time.
func runLeasedHistory(t *testing.T, clients []*aqs.Client, sems [][]*semaphore.Leased) []porcupine.Operation {
	var holds atomic.Int64
	return lintest.Work(clients, func(w *lintest.Worker) {
		mine := sems[w.Client]
		ctx := context.Background()
		rng := w.Rand
		type held struct {
			p    *semaphore.Permit
			key  int
			hold int
			n    int
		}
		var permits []held
		fail := func(in lsInput, err error) {
			t.Errorf("worker %d: %+v: %v", w.ID, in, err)
		}
		release := func(i int) bool {
			h := permits[i]
			in := lsInput{key: h.key, op: lsRelease, hold: h.hold, n: h.n}
			callAt := w.Now()
			err := mine[h.key].Release(ctx, h.p)
			retAt := w.Now()
			if err != nil {
				fail(in, err)
				return false
			}
			w.Record(in, lsOutput{}, callAt, retAt)
			permits = append(permits[:i], permits[i+1:]...)
			return true
		}
		for w.More() {
			r := rng.IntN(100)
			switch {
			case r < 5:
				in := lsInput{key: rng.IntN(len(mine)), op: lsAvailable}
				callAt := w.Now()
				avail, err := mine[in.key].Available(ctx)
				retAt := w.Now()
				if err != nil {
					fail(in, err)
					return
				}
				w.Record(in, lsOutput{avail: avail}, callAt, retAt)
			case len(permits) > 0 && (r < 45 || len(permits) == 2):
				i := rng.IntN(len(permits))
				h := permits[i]
				if h.n == 1 || r%2 == 0 {
					if !release(i) {
						return
					}
					continue
				}
				in := lsInput{key: h.key, op: lsReleasePart, hold: h.hold, n: 1 + rng.IntN(h.n-1)}
				callAt := w.Now()
				err := mine[h.key].ReleasePart(ctx, h.p, in.n)
				retAt := w.Now()
				if err != nil {
					fail(in, err)
					return
				}
				w.Record(in, lsOutput{}, callAt, retAt)
				permits[i].n -= in.n
				if h.p.Permits() != permits[i].n {
					t.Errorf("worker %d: permit holds %d after ReleasePart, want %d", w.ID, h.p.Permits(), permits[i].n)
					return
				}
			default:
				in := lsInput{key: rng.IntN(len(mine)), op: lsTry, hold: int(holds.Add(1)), n: 1 + rng.IntN(2)}
				if r > 95 {
					in.n = lsTotal
				}
				var opts []aqs.TryOption
				if rng.IntN(2) == 0 {
					in.wait = time.Duration(1+rng.IntN(10)) * time.Millisecond
					opts = append(opts, aqs.WithWait(in.wait))
				}
				callAt := w.Now()
				p, ok, err := mine[in.key].TryAcquire(ctx, in.n, opts...)
				retAt := w.Now()
				if err != nil {
					fail(in, err)
					return
				}
				if in.wait == 0 {
					w.Record(in, lsOutput{ok: ok}, callAt, retAt)
				} else {
					for _, op := range lsSplit(callAt, retAt, in, ok) {
						w.Record(op.Input, op.Output, op.Call, op.Return)
					}
				}
				if ok {
					permits = append(permits, held{p, in.key, in.hold, in.n})
				}
			}
		}
		for len(permits) > 0 { // give back what is still held, recorded like the rest
			if !release(len(permits) - 1) {
				return
			}
		}
	})
}
