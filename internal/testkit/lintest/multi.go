package lintest

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/redaqs/aqs"
)

// The multi-name lock's specification, with the queues of its names (package multilock),
// shared with the fair locks of the same names.
//
// A request asks for a set of names, at most MultiNames of them, as a bit mask: a fair lock's
// request for one name, a multi-lock's for one or more. Each name is an exclusive lock with
// a FIFO queue, and the state is, for each name, its owner (the request that holds it, or that
// it is reserved for) and its queue. As with FairLockModel, a call that waits is its join and
// its end (SplitMultiWaits, and wait.go for when each may come):
//
//   - A TryLock without wait takes every name when each is free (which implies that nobody
//     queues for it), and nothing otherwise.
//   - A join takes every name when each is free. Otherwise, in one step, the request joins the
//     tail of the queue of every name that is owned, and every free name is reserved for it:
//     its owner, though the request does not hold yet. So all queues order the requests by one
//     arrival order.
//   - The end of a wait that succeeded is legal only when the request owns every name. The
//     end of one that failed is the request leaving: it leaves every queue, and every name it
//     owns (reserved for it, or all of them, granted to it in that instant) passes on.
//   - An Unlock by the holder, and a failed wait's leaving, hand each name owned to the head
//     of its queue, or free it: a name is never free while somebody queues for it. A name
//     handed to a request is its own, reserved; the request holds once it owns them all.
//   - An Unlock by anyone else, and an Unlock of a hold released already, is ErrNotOwner and
//     changes nothing.
//
// So requests that share a name are served in arrival order, a request waits only for older
// ones, and reservations are invisible holds: a newcomer's TryLock fails on a name reserved
// for a waiter although no reported holder has it, exactly between the waiter's join and its
// end. Re-entry is the fair lock's own (FairLockModel) and is not part of these histories.

// MultiNames is the most names a history of MultiLockModel may use.
const MultiNames = 4

// multiInput is an operation of a multi-name history: its kind (linTry, linJoin, linEnd,
// linUnlock, linStale, as for the fair lock), the request's names as a bit mask, the hold it
// concerns (unique to one request), how the call waits, whether it is a fair lock's, and its
// Client.
type multiInput struct {
	op     int
	names  uint8
	hold   int
	wait   Wait
	fair   bool
	client int
}

// multiState is the sequential state: for each name its owner (0 when free) and its queue,
// queue[i][:n[i]].
type multiState struct {
	owner [MultiNames]int
	n     [MultiNames]int
	queue [MultiNames][maxQueue]int
}

// owns reports whether hold owns every name of names.
func (s multiState) owns(hold int, names uint8) bool {
	for i := range MultiNames {
		if names&(1<<i) != 0 && s.owner[i] != hold {
			return false
		}
	}
	return true
}

// free reports whether every name of names is free.
func (s multiState) free(names uint8) bool {
	for i := range MultiNames {
		if names&(1<<i) != 0 && s.owner[i] != 0 {
			return false
		}
	}
	return true
}

// handOff ends the claim on name i: the head of its queue owns it, or it is free.
func (s *multiState) handOff(i int) {
	if s.n[i] == 0 {
		s.owner[i] = 0
		return
	}
	s.owner[i] = s.queue[i][0]
	copy(s.queue[i][:], s.queue[i][1:s.n[i]])
	s.n[i]--
	s.queue[i][s.n[i]] = 0
}

// leave takes hold out of the queues of names and passes on every name it owns; it reports
// whether hold had joined at all.
func (s *multiState) leave(hold int, names uint8) bool {
	joined := false
	for i := range MultiNames {
		if names&(1<<i) == 0 {
			continue
		}
		if s.owner[i] == hold {
			s.handOff(i)
			joined = true
			continue
		}
		for j := range s.n[i] {
			if s.queue[i][j] == hold {
				copy(s.queue[i][j:], s.queue[i][j+1:s.n[i]])
				s.n[i]--
				s.queue[i][s.n[i]] = 0
				joined = true
				break
			}
		}
	}
	return joined
}

// MultiLockModel is the sequential specification of the multi-name lock and the fair locks of
// its names (see above), for histories made by SplitMultiWaits from RunMultiLocks'.
var MultiLockModel = porcupine.Model{
	Init: func() any { return multiState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(multiState), input.(multiInput), output.(lockOutput)
		switch in.op {
		case linTry:
			if in.wait.how != waitNone {
				panic("lintest: MultiLockModel needs a history made by SplitMultiWaits")
			}
			free := s.free(in.names)
			if out.ok && free {
				for i := range MultiNames {
					if in.names&(1<<i) != 0 {
						s.owner[i] = in.hold
					}
				}
			}
			return out.ok == free, s
		case linJoin:
			// A call ended by its context may have taken every name and failed: it gives them
			// back at its end (see wait.go).
			legal := !s.free(in.names) || out.ok || in.wait.byContext()
			for i := range MultiNames {
				if in.names&(1<<i) == 0 {
					continue
				}
				if s.owner[i] == 0 {
					s.owner[i] = in.hold
					continue
				}
				if s.n[i] == maxQueue {
					panic("lintest: queue of the model full")
				}
				s.queue[i][s.n[i]] = in.hold
				s.n[i]++
			}
			return legal, s
		case linEnd:
			if out.ok {
				return s.owns(in.hold, in.names), s
			}
			return s.leave(in.hold, in.names), s
		default: // linUnlock, linStale
			if s.owns(in.hold, in.names) {
				if out.notOwner {
					return false, s
				}
				for i := range MultiNames {
					if in.names&(1<<i) != 0 {
						s.handOff(i)
					}
				}
				return true, s
			}
			return out.notOwner, s
		}
	},
	Equal: func(a, b any) bool { return a.(multiState) == b.(multiState) },
	Hash: func(state any) uint64 {
		s := state.(multiState)
		var h uint64
		for i := range MultiNames {
			h = h*31 + uint64(s.owner[i])
			for j := range s.n[i] {
				h = h*131 + uint64(s.queue[i][j])
			}
			h = h*7 + uint64(s.n[i])
		}
		return h
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(multiInput), output.(lockOutput)
		what := fmt.Sprintf("%s%s h%d", multiKind(in), maskNames(in.names), in.hold)
		switch in.op {
		case linTry:
			return fmt.Sprintf("%s TryLock -> %v", what, out.ok)
		case linJoin:
			return fmt.Sprintf("%s %s(%v) joins (-> %v)", what, lockCall(in.wait), in.wait, out.ok)
		case linEnd:
			return fmt.Sprintf("%s %s(%v) ends -> %v", what, lockCall(in.wait), in.wait, out.ok)
		case linUnlock:
			return fmt.Sprintf("%s Unlock -> notOwner=%v", what, out.notOwner)
		}
		return fmt.Sprintf("%s Unlock(released) -> notOwner=%v", what, out.notOwner)
	},
	DescribeState: func(state any) string {
		s := state.(multiState)
		var b strings.Builder
		for i := range MultiNames {
			if i > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "%c: ", 'a'+i)
			if s.owner[i] == 0 {
				b.WriteString("free")
			} else {
				fmt.Fprintf(&b, "h%d", s.owner[i])
			}
			for j := range s.n[i] {
				fmt.Fprintf(&b, " ← h%d", s.queue[i][j])
			}
		}
		return b.String()
	},
}

func multiKind(in multiInput) string {
	if in.fair {
		return "fair"
	}
	return "multi"
}

// maskNames names the names of a mask: {a,c}.
func maskNames(names uint8) string {
	var parts []string
	for i := range MultiNames {
		if names&(1<<i) != 0 {
			parts = append(parts, string(rune('a'+i)))
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// SplitMultiWaits returns history with every acquisition that waits made into its join and
// its end for MultiLockModel, as SplitWaits does for the fair lock.
func SplitMultiWaits(history []porcupine.Operation) []porcupine.Operation {
	var out []porcupine.Operation
	for _, op := range history {
		in := op.Input.(multiInput)
		if in.op != linTry || in.wait.how == waitNone {
			out = append(out, op)
			continue
		}
		join, end := in, in
		join.op, end.op = linJoin, linEnd
		j, e := splitWait(op, in.wait, op.Output.(lockOutput).ok, join, end)
		out = append(out, j, e)
	}
	return out
}

// MultiLocker makes the locks of a multi-name run: Lock returns the lock of Client c on the
// names of the mask (fair: a fair lock, on one name; otherwise a multi-lock).
type MultiLocker func(c int, names uint8, fair bool) Locker

// RunMultiLocks runs Workers goroutines on each of clients and returns the history they
// recorded over names names (at most MultiNames): each worker takes a request at a time, a
// fair lock on one name (a quarter of them) or a multi-lock on one name or more, drawn at
// random; half of the acquisitions wait (drawWait: a TryLock with a wait bound, or a Lock whose
// context reaches its deadline or is cancelled, after 1-10ms), the others are TryLock without
// wait; a hold is released by Unlock, and now and then a released hold is unlocked again.
// Then every name is probed with a fair lock until it is free (see settleAll).
func RunMultiLocks(t *testing.T, clients []*aqs.Client, names int, lock MultiLocker) []porcupine.Operation {
	if names < 1 || names > MultiNames {
		panic(fmt.Sprintf("lintest: RunMultiLocks on %d names", names))
	}
	var holds atomic.Int64
	return Work(clients, func(w *Worker) {
		rng := w.Rand
		type held struct {
			ctx    context.Context
			in     multiInput
			l      Locker
			cancel context.CancelFunc
		}
		var mine *held       // the worker's hold, if any
		var released []*held // holds released already, for stale unlocks
		unlock := func(h *held, op int) bool {
			in := h.in
			in.op, in.wait, in.client = op, Wait{}, w.Client
			return record(t, w, in, func() (lockOutput, error) {
				err := h.l.Unlock(h.ctx)
				if errors.Is(err, aqs.ErrNotOwner) {
					return lockOutput{notOwner: true}, nil
				}
				return lockOutput{}, err
			})
		}
		for w.More() {
			r := rng.IntN(100)
			switch {
			case mine != nil:
				if !unlock(mine, linUnlock) {
					return
				}
				mine.cancel()
				released = append(released, mine)
				mine = nil
			case len(released) > 0 && r < 10:
				if !unlock(released[rng.IntN(len(released))], linStale) {
					return
				}
			default:
				in := multiInput{op: linTry, hold: int(holds.Add(1)), wait: drawWait(rng, true), client: w.Client}
				if rng.IntN(4) == 0 {
					in.fair, in.names = true, 1<<rng.IntN(names)
				} else {
					for in.names == 0 {
						in.names = uint8(rng.IntN(1 << names))
					}
				}
				l := lock(w.Client, in.names, in.fair)
				wc := startWait(in.wait, w)
				callAt := w.Now()
				hctx, ok, err := take(l, wc, in.wait)
				retAt := w.Now()
				in.wait, _ = wc.ended(callAt)
				if err != nil {
					wc.cancel()
					t.Errorf("worker %d: %+v: %v", w.ID, in, err)
					return
				}
				w.Record(in, lockOutput{ok: ok}, callAt, retAt)
				if !ok {
					wc.cancel()
					continue
				}
				mine = &held{ctx: hctx, in: in, l: l, cancel: wc.cancel}
			}
		}
		if mine != nil && unlock(mine, linUnlock) { // release what is still held, recorded like the rest
			mine.cancel()
		}
	}, func(w *Worker) {
		settleAll(t, names, func(key int) (bool, bool) {
			in := multiInput{op: linTry, names: 1 << key, fair: true, hold: int(holds.Add(1)), client: w.Client}
			unlock := in
			unlock.op = linUnlock
			return probeLock(t, w, lock(w.Client, in.names, true), in, unlock)
		})
	})
}

// LogMultiOutcomes logs how many operations of each kind the history has and how they ended,
// to show the run contended.
func LogMultiOutcomes(t *testing.T, history []porcupine.Operation) {
	t.Helper()
	type kind struct {
		how   int
		multi bool
	}
	won, lost := map[kind]int{}, map[kind]int{}
	unlocks, stale, sizes := 0, 0, map[int]int{}
	for _, op := range history {
		in, out := op.Input.(multiInput), op.Output.(lockOutput)
		switch in.op {
		case linUnlock:
			unlocks++
			continue
		case linStale:
			stale++
			continue
		}
		k := kind{in.wait.how, !in.fair}
		if out.ok {
			won[k]++
			sizes[bits.OnesCount8(in.names)]++
		} else {
			lost[k]++
		}
	}
	for _, multi := range []bool{false, true} {
		var parts []string
		for how, name := range []string{"TryLock", "TryLock with wait", "Lock with a deadline", "Lock cancelled meanwhile"} {
			parts = append(parts, fmt.Sprintf("%s: %d won, %d not", name, won[kind{how, multi}], lost[kind{how, multi}]))
		}
		who := "fair locks"
		if multi {
			who = "multi-locks"
		}
		t.Logf("%s: %s", who, strings.Join(parts, "; "))
	}
	t.Logf("holds by number of names: %v; unlocks: %d; unlocks of released holds: %d", sizes, unlocks, stale)
}
