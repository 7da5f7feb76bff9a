package lintest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/semaphore"
)

// The semaphores' specification, with their queue.
//
// Both semaphores (the counting one and the leased one) share it: the state is the permits
// available and the queue of waiters, each asking for n, in arrival order (see package
// semaphore's doc, and dispatch in internal/scripts/_sem.lua). A newcomer (TryAcquire without
// wait, or the first attempt of a call that waits) takes its n permits when they are available
// and nobody waits; otherwise TryAcquire fails, and a call that waits joins the tail. Whatever
// frees permits (a release, a waiter leaving) serves the queue in order while the head's
// request fits: a large request at the head holds back smaller ones behind it, and a newcomer
// never passes a waiter. Available reports the permits available; the counting semaphore's
// Drain takes them all, whoever waits, and its Release fails with ErrOverRelease, changing
// nothing, when it would make more available than the total (a leased permit is given back
// only by its holder, so a leased release never does).
//
// A call that waits (TryAcquire with aqs.WithWait, or Acquire until its context's deadline or
// cancellation) is two operations of one call, as for the fair lock (see fair.go and wait.go):
// semJoin, its first attempt, which takes the permits when it can (or, for a call ended by its
// context, may take them and fail, giving them back at its end) or joins the tail, and semEnd,
// its outcome: a success is legal only when the waiter was granted its permits (at its join,
// or by whatever served the queue); a failure leaves the queue, and gives back permits granted
// to it in that same instant, which serves the queue again. Granted waiters whose call has not
// returned are part of the state, so that the two halves agree.
//
// Leases are the watchdog's (renewed, 30s): expiry is out of play, and so are dropped waiters
// (the waiter timeout, 5s, is beyond the run). AddPermits, ForceRelease and SetLease are not
// in the histories.

// Operations of a semaphore's history.
const (
	semTry         = iota // TryAcquire(n) without wait
	semJoin               // a call that waits: its first attempt
	semEnd                // the same call: its outcome
	semRelease            // Release(n) of the counting semaphore; Release of a permit of n
	semReleasePart        // ReleasePart(n) of a leased permit holding more
	semDrain              // Drain() of the counting semaphore
	semAvailable          // Available()
)

// semInput is an operation on semaphore key: its kind, the acquisition it concerns (a number
// unique in the run: for a leased release, its permit's), n, and how a call that waits waits.
type semInput struct {
	key  int
	op   int
	hold int
	n    int
	wait Wait
}

// semOutput is an operation's result: ok for an acquisition; overRelease for a counting
// Release that failed with ErrOverRelease; for Drain the permits it took, for Available the
// permits it reported (any other error fails the test before the check).
type semOutput struct {
	ok          bool
	overRelease bool
	value       int
}

// semMax bounds the queue and the granted waiters of the model: each worker has one call at a
// time.
const semMax = 16

type semWaiter struct{ hold, n int }

// semState is a semaphore's sequential state: the permits available, the queue (queue[:nq],
// in order) and the waiters granted their permits whose call has not returned (granted[:ng],
// sorted by hold).
type semState struct {
	avail   int
	nq, ng  int
	queue   [semMax]semWaiter
	granted [semMax]semWaiter
}

func (s semState) grant(w semWaiter) semState {
	if s.ng == semMax {
		panic("lintest: granted waiters of the model full")
	}
	s.avail -= w.n
	s.granted[s.ng] = w
	s.ng++
	for i := s.ng - 1; i > 0 && s.granted[i].hold < s.granted[i-1].hold; i-- {
		s.granted[i], s.granted[i-1] = s.granted[i-1], s.granted[i]
	}
	return s
}

// serve grants the head of the queue its permits while they are available.
func (s semState) serve() semState {
	for s.nq > 0 && s.queue[0].n <= s.avail {
		head := s.queue[0]
		s = s.leave(0).grant(head)
	}
	return s
}

// leave takes waiter i out of the queue.
func (s semState) leave(i int) semState {
	copy(s.queue[i:], s.queue[i+1:s.nq])
	s.nq--
	s.queue[s.nq] = semWaiter{}
	return s
}

func (s semState) ungrant(i int) semState {
	copy(s.granted[i:], s.granted[i+1:s.ng])
	s.ng--
	s.granted[s.ng] = semWaiter{}
	return s
}

// SemModel is the sequential specification of a semaphore of total permits (see above), the
// counting or the leased one, for histories made by RunCounting and RunLeased.
func SemModel(total int) porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			return partitionBy(history, func(in any) int { return in.(semInput).key })
		},
		Init: func() any { return semState{avail: total} },
		Step: func(state, input, output any) (bool, any) {
			s, in, out := state.(semState), input.(semInput), output.(semOutput)
			free := s.nq == 0 && s.avail >= in.n
			switch in.op {
			case semTry:
				if out.ok {
					s.avail -= in.n
					return free, s
				}
				return !free, s
			case semJoin:
				if free {
					// A call ended by its context may have taken them and failed: it gives them
					// back at its end (see wait.go).
					return out.ok || in.wait.byContext(), s.grant(semWaiter{in.hold, in.n})
				}
				if s.nq == semMax {
					panic("lintest: queue of the model full")
				}
				s.queue[s.nq] = semWaiter{in.hold, in.n}
				s.nq++
				return true, s
			case semEnd:
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
						return true, s.leave(i).serve() // a head leaving may let those behind it in
					}
				}
				return false, s // not joined yet
			case semRelease, semReleasePart:
				if s.avail+in.n > total {
					return out.overRelease, s
				}
				if out.overRelease {
					return false, s
				}
				s.avail += in.n
				return true, s.serve()
			case semDrain:
				ok := out.value == s.avail
				s.avail = 0
				return ok, s
			default: // semAvailable
				return out.value == s.avail, s
			}
		},
		Equal: func(a, b any) bool { return a.(semState) == b.(semState) },
		Hash: func(state any) uint64 {
			s := state.(semState)
			h := uint64(s.avail)
			for i := range s.nq {
				h = h*131 + uint64(s.queue[i].hold)*4 + uint64(s.queue[i].n)
			}
			for i := range s.ng {
				h = h*137 + uint64(s.granted[i].hold)*4 + uint64(s.granted[i].n)
			}
			return h
		},
		DescribeOperation: describeSemOperation,
		DescribeState: func(state any) string {
			s := state.(semState)
			var b strings.Builder
			fmt.Fprintf(&b, "%d available", s.avail)
			for i := range s.nq {
				fmt.Fprintf(&b, " ← p%d(%d)", s.queue[i].hold, s.queue[i].n)
			}
			if s.ng > 0 {
				b.WriteString("; granted")
				for i := range s.ng {
					fmt.Fprintf(&b, " p%d(%d)", s.granted[i].hold, s.granted[i].n)
				}
			}
			return b.String()
		},
	}
}

func describeSemOperation(input, output any) string {
	in, out := input.(semInput), output.(semOutput)
	call := "TryAcquire"
	if in.wait.byContext() {
		call = "Acquire"
	}
	switch in.op {
	case semTry:
		return fmt.Sprintf("sem%d TryAcquire(p%d, %d) -> %v", in.key, in.hold, in.n, out.ok)
	case semJoin:
		return fmt.Sprintf("sem%d %s(p%d, %d, %v) joins (-> %v)", in.key, call, in.hold, in.n, in.wait, out.ok)
	case semEnd:
		return fmt.Sprintf("sem%d %s(p%d, %d, %v) ends -> %v", in.key, call, in.hold, in.n, in.wait, out.ok)
	case semRelease:
		return fmt.Sprintf("sem%d Release(p%d, %d) -> overRelease=%v", in.key, in.hold, in.n, out.overRelease)
	case semReleasePart:
		return fmt.Sprintf("sem%d ReleasePart(p%d, %d)", in.key, in.hold, in.n)
	case semDrain:
		return fmt.Sprintf("sem%d Drain() -> %d", in.key, out.value)
	default:
		return fmt.Sprintf("sem%d Available() -> %d", in.key, out.value)
	}
}

// semHolds numbers the acquisitions of every run, so that each is unique.
var semHolds atomic.Int64

// acquireSem runs one acquisition of n permits of semaphore key that waits as wait says, by
// call, which makes it with the context it is given: a TryAcquire without wait or with a wait
// bound, or an Acquire. It records the acquisition (split, when it waits) and reports whether
// it got the permits, or false with ok false when the call failed otherwise than by its
// context (the test fails then).
func acquireSem(t *testing.T, w *Worker, in semInput, call func(ctx context.Context) (bool, error)) (got, ok bool) {
	wc := startWait(in.wait, w)
	defer wc.cancel() // no held context outlives the call: a permit's is its own business
	callAt := w.Now()
	got, err := call(wc.ctx)
	retAt := w.Now()
	if contextEnded(in.wait, err) {
		got, err = false, nil // its wait ran out
	}
	in.wait, _ = wc.ended(callAt)
	if err != nil {
		t.Errorf("worker %d: %+v: %v", w.ID, in, err)
		return false, false
	}
	out := semOutput{ok: got}
	if in.wait.how == waitNone {
		in.op = semTry
		w.Record(in, out, callAt, retAt)
		return got, true
	}
	join, end := in, in
	join.op, end.op = semJoin, semEnd
	j, e := splitWait(porcupine.Operation{Call: callAt, Return: retAt}, in.wait, got, join, end)
	w.Record(j.Input, out, j.Call, j.Return)
	w.Record(e.Input, out, e.Call, e.Return)
	return got, true
}

// recordSem runs call, an operation on a semaphore other than an acquisition, and records it as
// in, unless it failed (the test fails then).
func recordSem(t *testing.T, w *Worker, in semInput, call func() (semOutput, error)) bool {
	return record(t, w, in, call)
}

// RunCounting runs Workers goroutines on each of clients and returns the history they
// recorded: acquisitions of 1 or 2 permits (now and then all total), half of them waiting
// (drawWait: TryAcquire with a wait bound, or Acquire whose context reaches its deadline or is
// cancelled by another goroutine, each after 1-10ms), the others TryAcquire without wait;
// releases of permits the worker took (whenever it holds total of them, so that no worker
// keeps a semaphore to itself), Drain and Available. Then each semaphore is probed until all
// its permits are free (see settleAll). sems[c][k] is semaphore k of Client c, clients[c],
// each of total permits.
func RunCounting(t *testing.T, clients []*aqs.Client, sems [][]*semaphore.Semaphore, total int) []porcupine.Operation {
	return Work(clients, func(w *Worker) {
		mine := sems[w.Client]
		rng := w.Rand
		background := context.Background()
		taken := make([]int, len(mine)) // permits this worker took and did not give back
		held := 0                       // their sum
		for w.More() {
			in := semInput{key: rng.IntN(len(mine)), hold: int(semHolds.Add(1)), n: 1 + rng.IntN(2)}
			s := mine[in.key]
			r := rng.IntN(100)
			switch {
			case r < 3:
				in.op, in.n = semDrain, 0
				var drained int
				if !recordSem(t, w, in, func() (semOutput, error) {
					var err error
					drained, err = s.Drain(background)
					return semOutput{value: drained}, err
				}) {
					return
				}
				taken[in.key] += drained
				held += drained
			case r < 6:
				in.op, in.n = semAvailable, 0
				if !recordSem(t, w, in, func() (semOutput, error) {
					n, err := s.Available(background)
					return semOutput{value: n}, err
				}) {
					return
				}
			case taken[in.key] > 0 && (r < 50 || held >= total):
				in.op, in.n = semRelease, 1+rng.IntN(taken[in.key])
				refused := false
				if !recordSem(t, w, in, func() (semOutput, error) {
					err := s.Release(background, in.n)
					if errors.Is(err, semaphore.ErrOverRelease) {
						refused, err = true, nil
					}
					return semOutput{overRelease: refused}, err
				}) {
					return
				}
				if !refused {
					taken[in.key] -= in.n
					held -= in.n
				}
			default:
				if r > 95 {
					in.n = total
				}
				in.wait = drawWait(rng, true)
				got, ok := acquireSem(t, w, in, func(ctx context.Context) (bool, error) {
					switch in.wait.how {
					case waitNone:
						return s.TryAcquire(ctx, in.n)
					case waitBound:
						return s.TryAcquire(ctx, in.n, aqs.WithWait(in.wait.d))
					}
					err := s.Acquire(ctx, in.n)
					return err == nil, err
				})
				if !ok {
					return
				}
				if got {
					taken[in.key] += in.n
					held += in.n
				}
			}
		}
		for k, n := range taken { // give back what is still taken, recorded like the rest
			if n > 0 && !recordSem(t, w, semInput{key: k, op: semRelease, n: n}, func() (semOutput, error) {
				return semOutput{}, mine[k].Release(background, n)
			}) {
				return
			}
		}
	}, func(w *Worker) {
		mine := sems[w.Client]
		settleAll(t, len(mine), func(key int) (bool, bool) {
			return probeSem(t, w, key, total, func() (func() error, bool, error) {
				won, err := mine[key].TryAcquire(context.Background(), total)
				return func() error { return mine[key].Release(context.Background(), total) }, won, err
			})
		})
	})
}

// RunLeased runs Workers goroutines on each of clients and returns the history they recorded:
// acquisitions as RunCounting's, each a permit (a worker holds two at most), releases of the
// worker's permits (whole, or part of one holding more), and Available; then the probes of
// RunCounting. sems[c][k] is semaphore k of Client c, clients[c], each of total permits.
func RunLeased(t *testing.T, clients []*aqs.Client, sems [][]*semaphore.Leased, total int) []porcupine.Operation {
	return Work(clients, func(w *Worker) {
		mine := sems[w.Client]
		rng := w.Rand
		background := context.Background()
		type held struct {
			p    *semaphore.Permit
			key  int
			hold int
			n    int
		}
		var permits []held
		release := func(i int) bool {
			h := permits[i]
			in := semInput{key: h.key, op: semRelease, hold: h.hold, n: h.n}
			if !recordSem(t, w, in, func() (semOutput, error) { return semOutput{}, mine[h.key].Release(background, h.p) }) {
				return false
			}
			permits = append(permits[:i], permits[i+1:]...)
			return true
		}
		for w.More() {
			r := rng.IntN(100)
			switch {
			case r < 5:
				in := semInput{key: rng.IntN(len(mine)), op: semAvailable}
				if !recordSem(t, w, in, func() (semOutput, error) {
					n, err := mine[in.key].Available(background)
					return semOutput{value: n}, err
				}) {
					return
				}
			case len(permits) > 0 && (r < 45 || len(permits) == 2):
				i := rng.IntN(len(permits))
				h := permits[i]
				if h.n == 1 || r%2 == 0 {
					if !release(i) {
						return
					}
					continue
				}
				in := semInput{key: h.key, op: semReleasePart, hold: h.hold, n: 1 + rng.IntN(h.n-1)}
				if !recordSem(t, w, in, func() (semOutput, error) {
					return semOutput{}, mine[h.key].ReleasePart(background, h.p, in.n)
				}) {
					return
				}
				permits[i].n -= in.n
				if h.p.Permits() != permits[i].n {
					t.Errorf("worker %d: permit holds %d after ReleasePart, want %d", w.ID, h.p.Permits(), permits[i].n)
					return
				}
			default:
				in := semInput{key: rng.IntN(len(mine)), hold: int(semHolds.Add(1)), n: 1 + rng.IntN(2)}
				if r > 95 {
					in.n = total
				}
				in.wait = drawWait(rng, true)
				s := mine[in.key]
				var p *semaphore.Permit
				got, ok := acquireSem(t, w, in, func(ctx context.Context) (bool, error) {
					var got bool
					var err error
					switch in.wait.how {
					case waitNone:
						p, got, err = s.TryAcquire(ctx, in.n)
					case waitBound:
						p, got, err = s.TryAcquire(ctx, in.n, aqs.WithWait(in.wait.d))
					default:
						p, err = s.Acquire(ctx, in.n)
						got = err == nil
					}
					return got, err
				})
				if !ok {
					return
				}
				if got {
					permits = append(permits, held{p, in.key, in.hold, in.n})
				}
			}
		}
		for len(permits) > 0 { // give back what is still held, recorded like the rest
			if !release(len(permits) - 1) {
				return
			}
		}
	}, func(w *Worker) {
		mine := sems[w.Client]
		settleAll(t, len(mine), func(key int) (bool, bool) {
			return probeSem(t, w, key, total, func() (func() error, bool, error) {
				p, won, err := mine[key].TryAcquire(context.Background(), total)
				return func() error { return mine[key].Release(context.Background(), p) }, won, err
			})
		})
	})
}

// LogSemOutcomes logs how the history's operations ended, to show the run contended.
func LogSemOutcomes(t *testing.T, history []porcupine.Operation) {
	t.Helper()
	type kind struct{ op, how, ok int }
	n := map[kind]int{}
	drained := 0
	for _, op := range history {
		in, out := op.Input.(semInput), op.Output.(semOutput)
		k := kind{op: in.op, how: in.wait.how}
		if out.ok || out.overRelease {
			k.ok = 1
		}
		if in.op == semDrain {
			drained += out.value
		}
		n[k]++
	}
	won := func(op, how int) string {
		return fmt.Sprintf("%d won, %d not", n[kind{op, how, 1}], n[kind{op, how, 0}])
	}
	t.Logf("TryAcquire: %s; with wait: %s; Acquire with a deadline: %s; cancelled meanwhile: %s; "+
		"Release: %d (ErrOverRelease %d); ReleasePart: %d; Drain: %d, %d permits; Available: %d",
		won(semTry, waitNone), won(semEnd, waitBound), won(semEnd, waitDeadline), won(semEnd, waitCancel),
		n[kind{semRelease, 0, 0}]+n[kind{semRelease, 0, 1}], n[kind{semRelease, 0, 1}],
		n[kind{semReleasePart, 0, 0}], n[kind{semDrain, 0, 0}], drained, n[kind{semAvailable, 0, 0}])
}

// probeSem is one probe of settleAll on semaphore key: take takes every permit without wait
// and returns their release; both are recorded.
func probeSem(t *testing.T, w *Worker, key, total int, take func() (release func() error, won bool, err error)) (won, ok bool) {
	in := semInput{key: key, op: semTry, hold: int(semHolds.Add(1)), n: total}
	var release func() error
	if !recordSem(t, w, in, func() (semOutput, error) {
		var err error
		release, won, err = take()
		return semOutput{ok: won}, err
	}) {
		return false, false
	}
	if !won {
		return false, true
	}
	in.op = semRelease
	return true, recordSem(t, w, in, func() (semOutput, error) { return semOutput{}, release() })
}
