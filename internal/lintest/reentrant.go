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
// to one of them instead of freeing it (internal/core/pick.go), and a waiter that gives up
// after it was handed the lock gives it back. So, as for the fair lock (see fair.go), a wait
// that ends in failure may have held the lock for an instant, unreported, and the history is
// checked with each TryLock with a wait split in two (SplitWaits): linJoin, its first attempt,
// which takes a free lock or makes the caller a waiter, and linEnd, its outcome.
//
// Unlike the fair lock, the reentrant lock has no order: a free lock is taken by whoever
// tries, waiters or not, and which local waiter a release hands to is the Client's choice. So
// the model is nondeterministic: the end of a hold (a release, or a waiter giving back a lock
// handed to it) frees the lock or hands it to any waiter of the same Client. A waiter
// succeeds when it holds (handed the lock, or it took it at its join) or, still waiting, finds
// the lock free; it fails by leaving.

// handOffState is the lock's state: holder (0 when free), hold count, and the waiters,
// waiting[:n] sorted by hold.
type handOffState struct {
	holder, count int
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
	next := []any{s}
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
		s, in, out := state.(handOffState), input.(lockInput), output.(lockOutput)
		legal := func(ok bool, next handOffState) []any {
			if ok {
				return []any{next}
			}
			return nil
		}
		take := s
		take.holder, take.count = in.hold, 1
		switch in.op {
		case linTry:
			if in.wait > 0 {
				panic("lintest: HandOffLockModel needs a history made by SplitWaits")
			}
			if out.ok {
				return legal(s.count == 0, take)
			}
			return legal(s.count > 0, s)
		case linJoin:
			if s.count == 0 {
				return legal(out.ok, take)
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
			take.holder, take.count = in.hold, 1
			return legal(s.count == 0, take)
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
	},
	Equal:             func(a, b any) bool { return a.(handOffState) == b.(handOffState) },
	DescribeOperation: describeLockOperation,
	DescribeState: func(state any) string {
		s := state.(handOffState)
		var b strings.Builder
		if s.count == 0 {
			b.WriteString("free")
		} else {
			fmt.Fprintf(&b, "h%d ×%d", s.holder, s.count)
		}
		for i := range s.n {
			fmt.Fprintf(&b, "; h%d (client %d) waits", s.waiting[i].hold, s.waiting[i].client)
		}
		return b.String()
	},
}

// HandOffLockModel is the sequential specification of the reentrant lock with local
// hand-offs (see above), for histories made by SplitWaits from RunLocks'.
var HandOffLockModel = handOff.ToModel()
