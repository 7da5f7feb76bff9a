package lintest

import (
	"fmt"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"
)

// The reentrant lock's specification with local hand-offs.
//
// A release by a Client that has waiters of its own for the lock may hand the lock straight
// to one of them instead of freeing it (internal/acquire/local.go), and a waiter that gives up
// after it was handed the lock gives it back. So, as for the fair lock (see fair.go), a wait
// that ends in failure may have held the lock for an instant, unreported, and the history is
// checked with each call that waits (a TryLock with a wait, a Lock) split in two
// (SplitWaits): linJoin, its first attempt, which takes a free lock or makes the caller a
// waiter, and linEnd, its outcome.
//
// Unlike the fair lock, the reentrant lock has no order: a free lock is taken by whoever
// tries, waiters or not, and which local waiter a release hands to is the Client's choice. So
// the model is nondeterministic: the end of a hold (a release, or a waiter giving back a lock
// handed to it) frees the lock or hands it to any waiter of the same Client. A waiter
// succeeds when it holds (handed the lock, or it took it at its join) or, still waiting, finds
// the lock free; it fails by leaving.
//
// Reservations. While waiters of other Clients wait, a release may reserve the lock for them
// instead of freeing it (lock_release.lua): for a moment (at most 20ms) the lock is free for
// the waiters of the Client whose turn it is, never the releaser's, and held for everyone else
// and for every newcomer's first attempt (a TryLock without wait, a join). The model lets the
// waiters of any Client but the releaser's take it: which Client's turn it is depends on which
// attempts failed, which a history does not record. The model lets a release
// end in a reservation by its Client, and a reservation end at any step: a history has no
// clock to bound it by, so the model is weaker there than the lock (a TryLock refused on a free
// lock long after a release would pass).

// handOffState is the lock's state: holder (0 when free), hold count, and the waiters,
// waiting[:n] sorted by hold.
type handOffState struct {
	holder, count int
	reserved      int // 1 + the Client that reserved the free lock for the others, or 0
	n             int
	waiting       [maxQueue]handOffWaiter
}

type handOffWaiter struct{ hold, client int }

func (s handOffState) waiter(hold int) int {
	for i := range s.n {
		if s.waiting[i].hold == hold {
			return i
		}
	}
	return -1
}

func (s handOffState) remove(i int) handOffState {
	copy(s.waiting[i:], s.waiting[i+1:s.n])
	s.n--
	s.waiting[s.n] = handOffWaiter{}
	return s
}

// end returns the states after the hold ends, by a release or a give-back of client: free,
// or handed to any waiter of client.
func (s handOffState) end(client int) []any {
	s.holder, s.count = 0, 0
	reserved := s
	reserved.reserved = client + 1
	next := []any{s, reserved}
	for i := range s.n {
		if s.waiting[i].client == client {
			h := s.remove(i)
			h.holder, h.count = s.waiting[i].hold, 1
			next = append(next, h)
		}
	}
	return next
}

var handOff = porcupine.NondeterministicModel{
	Partition: partitionByKey,
	Init:      func() []any { return []any{handOffState{}} },
	Step: func(state, input, output any) []any {
		s := state.(handOffState)
		if s.reserved == 0 {
			return handOffStep(s, input.(lockInput), output.(lockOutput))
		}
		expired := s
		expired.reserved = 0 // a reservation may have expired before this step
		return append(handOffStep(s, input.(lockInput), output.(lockOutput)),
			handOffStep(expired, input.(lockInput), output.(lockOutput))...)
	},
	Equal:             func(a, b any) bool { return a.(handOffState) == b.(handOffState) },
	DescribeOperation: describeLockOperation,
	DescribeState: func(state any) string {
		s := state.(handOffState)
		var b strings.Builder
		switch {
		case s.count > 0:
			fmt.Fprintf(&b, "h%d ×%d", s.holder, s.count)
		case s.reserved > 0:
			fmt.Fprintf(&b, "reserved by client %d", s.reserved-1)
		default:
			b.WriteString("free")
		}
		for i := range s.n {
			fmt.Fprintf(&b, "; h%d (client %d) waits", s.waiting[i].hold, s.waiting[i].client)
		}
		return b.String()
	},
}

func handOffStep(s handOffState, in lockInput, out lockOutput) []any {
	{
		legal := func(ok bool, next handOffState) []any {
			if ok {
				return []any{next}
			}
			return nil
		}
		// free: a newcomer can take the lock; a waiter of in's Client can when the lock is
		// only reserved for the others.
		free := s.count == 0 && s.reserved == 0
		freeToWaiter := s.count == 0 && s.reserved != in.client+1
		take := s
		take.holder, take.count, take.reserved = in.hold, 1, 0
		switch in.op {
		case linTry:
			if in.wait.how != waitNone {
				panic("lintest: HandOffLockModel needs a history made by SplitWaits")
			}
			if out.ok {
				return legal(free, take)
			}
			return legal(!free, s)
		case linJoin:
			if free {
				// A call ended by its context may have taken the lock and failed: it gives the
				// lock back at its end (see wait.go).
				return legal(out.ok || in.wait.byContext(), take)
			}
			if s.n == maxQueue {
				panic("lintest: waiters of the model full")
			}
			s.waiting[s.n] = handOffWaiter{in.hold, in.client}
			s.n++
			sort.Slice(s.waiting[:s.n], func(i, j int) bool { return s.waiting[i].hold < s.waiting[j].hold })
			return []any{s}
		case linEnd:
			if s.holder == in.hold && s.count > 0 {
				if out.ok {
					return []any{s}
				}
				return s.end(in.client) // handed the lock, it gives it back as it leaves
			}
			i := s.waiter(in.hold)
			switch {
			case i < 0:
				return nil // not joined yet
			case !out.ok:
				return []any{s.remove(i)}
			}
			take = s.remove(i)
			take.holder, take.count, take.reserved = in.hold, 1, 0
			return legal(freeToWaiter, take)
		case linReenter:
			s.count++
			return legal(s.holder == in.hold && s.count > 1 && out.ok, s)
		default: // linUnlock, linStale
			if s.holder == in.hold && s.count > 0 {
				switch {
				case out.notOwner:
					return nil
				case s.count == 1:
					return s.end(in.client)
				}
				s.count--
				return []any{s}
			}
			return legal(out.notOwner, s)
		}
	}
}

// HandOffLockModel is the sequential specification of the reentrant lock with local
// hand-offs (see above), for histories made by SplitWaits from RunLocks'.
var HandOffLockModel = handOff.ToModel()
