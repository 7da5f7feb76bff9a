package lintest

import (
	"fmt"
	"strings"

	"github.com/anishathalye/porcupine"
)

// The fair lock's specification, with its queue and its hand-off.
//
// A call that waits (a TryLock with a wait, or a Lock, which waits until its context ends) is
// not one atomic step: its first attempt either takes the lock or joins the queue, and later
// the waiter is either handed the lock by a release or leaves the queue when its wait runs
// out (its bound, or its context's deadline or cancellation). Only the outcome is reported, yet the steps in between are seen
// by others: while it waits, a newcomer's TryLock fails on a lock held by someone behind whom
// it queues, and a waiter whose wait runs out may have been handed the lock an instant before
// it left (it then passes the lock on as it leaves), so others fail on a lock that no reported
// holder has.
//
// So each call that waits is two operations of the history (SplitWaits), linJoin and
// linEnd, of the one call, and FairLockModel gives each its own linearization point, in that
// order (linEnd is illegal before its linJoin):
//
//   - linJoin, the first attempt: on a free lock it takes it (then the call must have
//     succeeded, unless its context ended: see wait.go); otherwise the waiter joins the tail
//     of the queue.
//   - linEnd, the outcome: a success is legal only if the waiter holds (handed the lock, or it
//     took it at its join). A failure is the waiter leaving: out of the queue, or, if it was
//     handed the lock meanwhile, passing it on to the next waiter as a release would. So a
//     wait that ends in failure is "joined the queue, and possibly was granted and gave up",
//     and the lock may be busy without a reported holder exactly between its join and its end.
//
// A release hands the lock to the head of the queue at once, so a lock is never free while
// somebody queues; a TryLock without wait takes it only when it is free (which implies nobody
// queues).
//
// What the timestamps allow. A waiter's join can be placed anywhere between its call and its
// return: when its first attempt reached Redis is not observable (or later, for a call whose
// context ended while that attempt was on its way: see wait.go). The end of a wait that
// failed cannot come before its wait was over: the bound ran out (at least the wait after the
// call: the bound's timer starts inside the call), or the context reached its deadline or was
// cancelled (see wait.go). SplitWaits gives linEnd that later call time, so an invisible hold
// that began early lasts at least until then. Beyond that, "queued strictly
// before" means what the rest of the history forces: a waiter is known to queue (or to hold
// invisibly) from the moment some operation could not be explained otherwise, a newcomer's
// failure on a lock that was free. Because the release hands off directly, a newcomer or a
// later waiter passing such a waiter shows as two holders at once, which the model rejects
// (see fair_test.go). Two waiters queued behind one holder that stays put are not ordered by
// anything the history can see, so their order among themselves is not checked.

// Halves of a call that waits, made by SplitWaits for FairLockModel.
const (
	linJoin = linStale + 1 + iota // the first attempt: take a free lock, or queue
	linEnd                        // the outcome: granted, or leave (passing on a lock handed over)
)

// maxQueue bounds a queue of the model: each worker has one call at a time.
const maxQueue = 16

// fairState is the fair lock's sequential state: its holder (0 when free), hold count, and
// the waiters in order, queue[:n].
type fairState struct {
	holder int
	count  int
	n      int
	queue  [maxQueue]int
}

// handOff ends the hold: the head of the queue holds, or the lock is free.
func (s fairState) handOff() fairState {
	if s.n == 0 {
		return fairState{}
	}
	next := fairState{holder: s.queue[0], count: 1, n: s.n - 1}
	copy(next.queue[:], s.queue[1:s.n])
	return next
}

func (s fairState) find(hold int) int {
	for i := range s.n {
		if s.queue[i] == hold {
			return i
		}
	}
	return -1
}

// SplitWaits returns history with every acquisition that waits (recorded by RunLocks as one
// operation: a TryLock with a wait bound, or a Lock) made into its two halves for
// FairLockModel: linJoin over the call, and linEnd over the call too, except that a wait that
// failed ends no earlier than its wait was over, and maybe after its call returned (see
// splitWait).
func SplitWaits(history []porcupine.Operation) []porcupine.Operation {
	var out []porcupine.Operation
	for _, op := range history {
		in := op.Input.(lockInput)
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

// FairLockModel is the sequential specification of the fair lock (see above), for histories
// made by SplitWaits from RunLocks'.
var FairLockModel = porcupine.Model{
	Partition: partitionByKey,
	Init:      func() any { return fairState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(fairState), input.(lockInput), output.(lockOutput)
		switch in.op {
		case linTry:
			if in.wait.how != waitNone {
				panic("lintest: FairLockModel needs a history made by SplitWaits")
			}
			free := s.count == 0 && s.n == 0
			if out.ok {
				return free, fairState{holder: in.hold, count: 1}
			}
			return !free, s
		case linJoin:
			if s.count == 0 && s.n == 0 {
				// A call ended by its context may have taken the lock and failed: it gives the
				// lock back at its end (see wait.go).
				return out.ok || in.wait.byContext(), fairState{holder: in.hold, count: 1}
			}
			if s.n == maxQueue {
				panic("lintest: queue of the model full")
			}
			s.queue[s.n] = in.hold
			s.n++
			return true, s
		case linEnd:
			if s.holder == in.hold && s.count > 0 {
				if out.ok {
					return true, s
				}
				return true, s.handOff() // handed the lock, it passes it on as it leaves
			}
			i := s.find(in.hold)
			if i < 0 || out.ok {
				return false, s // not joined yet, or a success without the lock
			}
			copy(s.queue[i:], s.queue[i+1:s.n])
			s.n--
			s.queue[s.n] = 0
			return true, s
		case linReenter:
			if s.holder == in.hold && s.count > 0 {
				s.count++
				return out.ok, s
			}
			return false, s
		default: // linUnlock, linStale
			if s.holder == in.hold && s.count > 0 {
				if out.notOwner {
					return false, s
				}
				if s.count == 1 {
					return true, s.handOff()
				}
				s.count--
				return true, s
			}
			return out.notOwner, s
		}
	},
	Equal: func(a, b any) bool { return a.(fairState) == b.(fairState) },
	Hash: func(state any) uint64 {
		s := state.(fairState)
		h := uint64(s.holder)*31 + uint64(s.count)
		for i := range s.n {
			h = h*131 + uint64(s.queue[i])
		}
		return h
	},
	DescribeOperation: describeLockOperation,
	DescribeState: func(state any) string {
		s := state.(fairState)
		var b strings.Builder
		if s.count == 0 {
			b.WriteString("free")
		} else {
			fmt.Fprintf(&b, "h%d ×%d", s.holder, s.count)
		}
		for i := range s.n {
			fmt.Fprintf(&b, " ← h%d", s.queue[i])
		}
		return b.String()
	},
}

// describeLockOperation describes the operations of a history made by SplitWaits.
func describeLockOperation(input, output any) string {
	in, out := input.(lockInput), output.(lockOutput)
	switch in.op {
	case linJoin:
		return fmt.Sprintf("lock%d %s(h%d, %v) joins (-> %v)", in.key, lockCall(in.wait), in.hold, in.wait, out.ok)
	case linEnd:
		return fmt.Sprintf("lock%d %s(h%d, %v) ends -> %v", in.key, lockCall(in.wait), in.hold, in.wait, out.ok)
	}
	return LockModel.DescribeOperation(input, output)
}
