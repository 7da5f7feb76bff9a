package lintest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/redaqs/aqs"
)

// The specification of a Condition of an exclusive lock (fair.Condition, reentrant.Condition).
//
// The state is the lock's holder, the lock's queue and the condition's queue, both FIFO. Lock
// and Condition.Wait block, and each is two operations of the history (SplitConds), with the
// call's window each, in order:
//
//   - a Lock's join: on a free lock it takes it, otherwise it joins the lock's queue; its end
//     is legal only once it holds (a release handed it the lock);
//   - a Wait's begin: legal only for the holder; the hold ends (the lock passes to the head
//     of its queue) and the waiter's new hold joins the tail of the condition's queue, in one
//     step; its end is legal only once the new hold holds the lock.
//
// A Signal that reports true moves the head of the condition's queue to the tail of the lock's
// queue, and one that reports false finds the condition's queue empty; SignalAll moves them
// all, and reports how many. When the lock is free then, its queue's head takes it. An Unlock
// is legal only for the holder, and hands off.
//
// So a Signal that reports false while a waiter is known to wait (its begin could not be placed
// after the Signal) is a lost signal, waiters that take the lock back out of the order they
// waited in show as two holders at once, and a Wait that returns without a Signal that moved it
// (a spurious wake-up, which the runs' faults do not cause) has no legal end. RunConds uses no
// context that ends and no re-entry, so every call has a known outcome.

// Operations of a condition history.
const (
	condLock      = iota // Lock of hold, until it succeeds
	condUnlock           // Unlock of hold
	condWait             // Wait by hold; next is the new hold
	condSignal           // Signal; ok is its result
	condSignalAll        // SignalAll; n is its result
	condLockJoin         // made by SplitConds
	condLockEnd
	condWaitBegin
	condWaitEnd
)

type condInput struct {
	op   int
	hold int
	next int
}

type condOutput struct {
	ok bool
	n  int
}

// condState is the sequential state: the holder (0 when free), the lock's queue lq[:ln] and
// the condition's queue cq[:cn].
type condState struct {
	holder int
	ln, cn int
	lq, cq [maxQueue]int
}

func (s condState) handOff() condState {
	s.holder = 0
	if s.ln > 0 {
		s.holder = s.lq[0]
		copy(s.lq[:], s.lq[1:s.ln])
		s.ln--
		s.lq[s.ln] = 0
	}
	return s
}

// move moves the condition's first n waiters to the lock's queue's tail, and hands a free lock
// to its head.
func (s condState) move(n int) condState {
	if s.ln+n > maxQueue {
		panic("lintest: queue of the model full")
	}
	copy(s.lq[s.ln:], s.cq[:n])
	s.ln += n
	copy(s.cq[:], s.cq[n:s.cn])
	for i := s.cn - n; i < s.cn; i++ {
		s.cq[i] = 0
	}
	s.cn -= n
	if s.holder == 0 {
		return s.handOff()
	}
	return s
}

// SplitConds returns history with every Lock and Wait made into its two halves for CondModel,
// each over the call's window.
func SplitConds(history []porcupine.Operation) []porcupine.Operation {
	var out []porcupine.Operation
	for _, op := range history {
		in := op.Input.(condInput)
		switch in.op {
		case condLock, condWait:
			a, b := op, op
			first, second := in, in
			first.op, second.op = condLockJoin, condLockEnd
			if in.op == condWait {
				first.op, second.op = condWaitBegin, condWaitEnd
			}
			a.Input, b.Input = first, second
			out = append(out, a, b)
		default:
			out = append(out, op)
		}
	}
	return out
}

// CondModel is the sequential specification of a lock with a condition (see above), for
// histories made by SplitConds from RunConds'.
var CondModel = porcupine.Model{
	Init: func() any { return condState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(condState), input.(condInput), output.(condOutput)
		switch in.op {
		case condLockJoin:
			if s.holder == 0 && s.ln == 0 {
				s.holder = in.hold
				return true, s
			}
			if s.ln == maxQueue {
				panic("lintest: queue of the model full")
			}
			s.lq[s.ln] = in.hold
			s.ln++
			return true, s
		case condLockEnd:
			return s.holder == in.hold, s
		case condWaitEnd:
			return s.holder == in.next, s
		case condUnlock:
			if s.holder != in.hold {
				return false, s
			}
			return true, s.handOff()
		case condWaitBegin:
			if s.holder != in.hold {
				return false, s
			}
			if s.cn == maxQueue {
				panic("lintest: queue of the model full")
			}
			s.cq[s.cn] = in.next
			s.cn++
			return true, s.handOff()
		case condSignal:
			if s.cn == 0 {
				return !out.ok, s
			}
			return out.ok, s.move(1)
		case condSignalAll:
			return out.n == s.cn, s.move(s.cn)
		default:
			panic("lintest: CondModel needs a history made by SplitConds")
		}
	},
	Equal: func(a, b any) bool { return a.(condState) == b.(condState) },
	Hash: func(state any) uint64 {
		s := state.(condState)
		h := uint64(s.holder)
		for i := range s.ln {
			h = h*131 + uint64(s.lq[i])
		}
		h = h*31 + 7
		for i := range s.cn {
			h = h*131 + uint64(s.cq[i])
		}
		return h
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(condInput), output.(condOutput)
		switch in.op {
		case condLockJoin:
			return fmt.Sprintf("Lock(h%d) joins", in.hold)
		case condLockEnd:
			return fmt.Sprintf("Lock(h%d) returns", in.hold)
		case condUnlock:
			return fmt.Sprintf("Unlock(h%d)", in.hold)
		case condWaitBegin:
			return fmt.Sprintf("Wait(h%d) releases, waits as h%d", in.hold, in.next)
		case condWaitEnd:
			return fmt.Sprintf("Wait(h%d) returns h%d", in.hold, in.next)
		case condSignal:
			return fmt.Sprintf("Signal -> %v", out.ok)
		case condSignalAll:
			return fmt.Sprintf("SignalAll -> %d", out.n)
		}
		return fmt.Sprintf("op %d", in.op)
	},
	DescribeState: func(state any) string {
		s := state.(condState)
		var b strings.Builder
		if s.holder == 0 {
			b.WriteString("free")
		} else {
			fmt.Fprintf(&b, "h%d", s.holder)
		}
		for i := range s.ln {
			fmt.Fprintf(&b, " ← h%d", s.lq[i])
		}
		b.WriteString(" | cond")
		for i := range s.cn {
			fmt.Fprintf(&b, " h%d", s.cq[i])
		}
		return b.String()
	},
}

// CondLock is what RunConds needs of an exclusive lock: fair.Lock and reentrant.Lock have it.
type CondLock interface {
	Lock(ctx context.Context, opts ...aqs.LockOption) (context.Context, error)
	Unlock(ctx context.Context) error
}

// Cond is what RunConds needs of a condition: fair.Condition and reentrant.Condition have it.
type Cond interface {
	Wait(held context.Context) (context.Context, error)
	Signal(ctx context.Context) (bool, error)
	SignalAll(ctx context.Context) (int, error)
}

// RunConds runs Workers goroutines on each of clients on one lock and its condition
// (locks[c] and conds[c] are the lock and the condition of Client c, clients[c]) and returns
// the history they recorded. The first worker of each Client is a signaller: it signals, with
// the lock held or not, by Signal and SignalAll, and goes on after the run's time until every
// other worker is done. The others lock, then wait on the condition (half the time), signal,
// or do nothing, and unlock. No call ends before its outcome, so every operation has a
// known outcome; an error fails the test. Every call is bounded by RunFor+SettleTime.
func RunConds(t *testing.T, clients []*aqs.Client, locks []CondLock, conds []Cond) []porcupine.Operation {
	var holds, active atomic.Int64
	active.Store(int64(len(clients) * (Workers - 1)))
	// Every call is bounded, so that a run whose signallers failed (or a lost signal) ends the
	// waits with an error instead of hanging the test: the held contexts, and the Waits,
	// inherit the bound.
	background, cancel := context.WithTimeout(context.Background(), RunFor+SettleTime)
	defer cancel()
	return Work(clients, func(w *Worker) {
		l, c, rng := locks[w.Client], conds[w.Client], w.Rand
		lock := func() (context.Context, int, bool) {
			in := condInput{op: condLock, hold: int(holds.Add(1))}
			var held context.Context
			ok := record(t, w, in, func() (_ condOutput, err error) {
				held, err = l.Lock(background)
				return condOutput{}, err
			})
			return held, in.hold, ok
		}
		signal := func(all bool) (int, bool) {
			if all {
				var n int
				return n, record(t, w, condInput{op: condSignalAll}, func() (_ condOutput, err error) {
					n, err = c.SignalAll(background)
					return condOutput{n: n}, err
				})
			}
			var ok bool
			return 0, record(t, w, condInput{op: condSignal}, func() (_ condOutput, err error) {
				ok, err = c.Signal(background)
				return condOutput{ok: ok}, err
			})
		}
		if w.ID%Workers == 0 {
			for {
				more := w.More()
				if !more && active.Load() == 0 {
					return
				}
				if !more {
					// The run is over: wake whoever still waits.
					if n, ok := signal(true); !ok {
						return
					} else if n == 0 {
						time.Sleep(time.Millisecond) // a pause between probes, not a wait for a condition
					}
					continue
				}
				var (
					held context.Context
					hold int
				)
				locked := rng.IntN(2) == 0
				if locked {
					var ok bool
					if held, hold, ok = lock(); !ok {
						return
					}
				}
				if _, ok := signal(rng.IntN(4) == 0); !ok {
					return
				}
				if locked && !record(t, w, condInput{op: condUnlock, hold: hold}, func() (condOutput, error) {
					return condOutput{}, l.Unlock(held)
				}) {
					return
				}
			}
		}
		defer active.Add(-1)
		for w.More() {
			held, hold, ok := lock()
			if !ok {
				return
			}
			switch r := rng.IntN(10); {
			case r < 5:
				in := condInput{op: condWait, hold: hold, next: int(holds.Add(1))}
				if !record(t, w, in, func() (_ condOutput, err error) {
					held, err = c.Wait(held)
					return condOutput{}, err
				}) {
					return
				}
				hold = in.next
			case r < 8:
				if _, ok := signal(r == 7); !ok {
					return
				}
			}
			if !record(t, w, condInput{op: condUnlock, hold: hold}, func() (condOutput, error) {
				return condOutput{}, l.Unlock(held)
			}) {
				return
			}
		}
	}, func(*Worker) {}) // nothing to settle: every hold is released, every waiter woken
}

// LogCondOutcomes logs how many of each operation the history has, and how many signals moved
// a waiter, to show that the run waited and signalled.
func LogCondOutcomes(t *testing.T, history []porcupine.Operation) {
	t.Helper()
	var locks, waits, signals, signalled, alls, moved int
	for _, op := range history {
		in, out := op.Input.(condInput), op.Output.(condOutput)
		switch in.op {
		case condLock:
			locks++
		case condWait:
			waits++
		case condSignal:
			signals++
			if out.ok {
				signalled++
			}
		case condSignalAll:
			alls++
			moved += out.n
		}
	}
	t.Logf("Lock: %d; Wait: %d; Signal: %d, %d of them moved a waiter; SignalAll: %d, moving %d waiters",
		locks, waits, signals, signalled, alls, moved)
}
