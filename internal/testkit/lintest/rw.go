package lintest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/redaqs/aqs"
)

// The read-write lock's specification.
//
// Any number of readers, each with its own hold count, or one writer with its count; and one
// queue of waiting readers and writers, in the order they joined, served as the lock serves
// it (see package rwlock's doc, and serve in internal/scripts/_rw.lua): whenever no writer
// holds, the head is granted what it waits for while it can have it, a writer when no reader
// holds (and then nobody after it), a reader always (and then the next waiter). Every step
// serves the queue, so a lock that nobody holds has nobody queued.
//
// A new reader (TryRLock without a wait, or the first attempt of one with a wait) enters when
// no writer holds and, in the fair mode, nobody is queued; a new writer enters when nobody
// holds. Re-entry through a held context always succeeds, and so does a downgrade: the writer
// takes the read side as a new read hold, kept when the write side is released. Unlock by the
// holder counts down, and the last one serves the queue; of a hold released already it is
// ErrNotOwner.
//
// A call that waits (TryLock or TryRLock with aqs.WithWait, or Lock or RLock, which wait until
// their context ends) is not one atomic step, as for the fair lock (see fair.go): its first
// attempt takes the lock or joins the queue, and later the waiter is granted by a release, or
// leaves the queue when its wait runs out (its bound, its context's deadline or cancellation:
// see wait.go), giving up what was granted to it in that instant. Others see the steps in
// between: while it waits, those who come after it wait behind it, and a waiter whose wait ran
// out may have held the lock an instant before it left, so a newcomer may be refused by a lock
// that no reported holder has. So each such call is two operations of the history, of the one
// call, each with its own linearization point, in that order:
//
//   - the join (rwReadJoin, rwWriteJoin): when the lock is open to it as to a newcomer, it
//     takes it (then the call must have succeeded, unless its context ended: see wait.go);
//     otherwise it joins the queue's tail;
//   - the end (rwReadEnd, rwWriteEnd): a success is legal only if the waiter holds (granted
//     by a release, or taken at its join), except that in the non-fair mode a queued reader
//     may take the read side whenever no writer holds (a retry of its does, as a newcomer
//     would), leaving the queue; a failure is the waiter leaving: out of the queue, or, if it
//     was granted meanwhile, giving that up; and the queue is served.
//
// The join's timestamps are the call's (when its first attempt reached Redis is not
// observable); a wait that failed ends no earlier than its wait was over (see splitWait).
// Waiters queued behind a holder that stays put are not ordered by anything the history shows,
// so their joins may be placed in any order their calls allow; the order chosen is then the
// queue's, and a waiter served out of it (a writer that gets in while a reader queued ahead of
// it still waits, say) makes the history illegal. Leases and the waiter timeout are out of
// play (the watchdog renews the leases, and the waits are far shorter than the timeout):
// nobody is dropped from the queue and no hold expires.

// RWLocker is what RunRW needs of a read-write lock: rwlock.Lock has it.
type RWLocker interface {
	Lock(ctx context.Context, opts ...aqs.LockOption) (context.Context, error)
	TryLock(ctx context.Context, opts ...aqs.TryLockOption) (context.Context, bool, error)
	Unlock(ctx context.Context) error
	RLock(ctx context.Context, opts ...aqs.LeaseOption) (context.Context, error)
	TryRLock(ctx context.Context, opts ...aqs.TryOption) (context.Context, bool, error)
	RUnlock(ctx context.Context) error
}

// Operations of a read-write lock's history.
const (
	rwRead         = iota // TryRLock with a fresh context, without wait
	rwReadReenter         // TryRLock through the worker's held read context
	rwReadUnlock          // RUnlock of the worker's top held read context
	rwReadStale           // RUnlock of a read hold released already
	rwWrite               // TryLock with a fresh context, without wait
	rwWriteJoin           // TryLock with a fresh context and a wait, or Lock: its first attempt
	rwWriteEnd            // the same call: its outcome
	rwWriteReenter        // TryLock through the worker's held write context
	rwWriteUnlock         // Unlock of the worker's top held write context
	rwWriteStale          // Unlock of a write hold released already
	rwDowngrade           // TryRLock through the worker's held write context: a new read hold
	rwReadJoin            // TryRLock with a fresh context and a wait, or RLock: its first attempt
	rwReadEnd             // the same call: its outcome
)

// rwInput is an operation on lock key; nonFair tells the model which mode that lock has. For
// rwDowngrade, hold is the new read hold and writer the write hold it was taken through.
type rwInput struct {
	key     int
	op      int
	hold    int
	writer  int
	wait    Wait
	nonFair bool
}

// rwMax bounds the readers and the waiters of the model: each worker has one call at a time,
// and two holds at most (a write hold and its downgrade).
const rwMax = 16

type holdCount struct{ hold, n int }

// rwWaiter is one waiter of the queue.
type rwWaiter struct {
	hold  int
	write bool
}

// rwState is the read-write lock's sequential state. readers[:nr] are sorted by hold, so
// that equal states are equal values; queue[:nq] are the waiters in order, head first.
type rwState struct {
	writer, wcount int
	nr, nq         int
	readers        [rwMax]holdCount
	queue          [rwMax]rwWaiter
}

func (s rwState) reader(hold int) int {
	for i := range s.nr {
		if s.readers[i].hold == hold {
			return i
		}
	}
	return -1
}

func (s rwState) waiter(hold int) int {
	for i := range s.nq {
		if s.queue[i].hold == hold {
			return i
		}
	}
	return -1
}

func (s rwState) addReader(hold int) rwState {
	if s.nr == rwMax {
		panic("lintest: readers of the model full")
	}
	s.readers[s.nr] = holdCount{hold, 1}
	s.nr++
	sort.Slice(s.readers[:s.nr], func(i, j int) bool { return s.readers[i].hold < s.readers[j].hold })
	return s
}

func (s rwState) removeReader(i int) rwState {
	copy(s.readers[i:], s.readers[i+1:s.nr])
	s.nr--
	s.readers[s.nr] = holdCount{}
	return s
}

// join puts a waiter at the tail of the queue.
func (s rwState) join(hold int, write bool) rwState {
	if s.nq == rwMax {
		panic("lintest: queue of the model full")
	}
	s.queue[s.nq] = rwWaiter{hold, write}
	s.nq++
	return s
}

// leave takes waiter i out of the queue.
func (s rwState) leave(i int) rwState {
	copy(s.queue[i:], s.queue[i+1:s.nq])
	s.nq--
	s.queue[s.nq] = rwWaiter{}
	return s
}

// readable reports whether a new reader may enter; writable whether a new writer may (the
// queue is empty then: it is always served).
func (s rwState) readable(nonFair bool) bool { return s.wcount == 0 && (nonFair || s.nq == 0) }
func (s rwState) writable() bool             { return s.wcount == 0 && s.nr == 0 }

func (s rwState) take(hold int) rwState {
	s.writer, s.wcount = hold, 1
	return s
}

// serve grants the head of the queue what it waits for while it can have it (see above).
func (s rwState) serve() rwState {
	for s.wcount == 0 && s.nq > 0 {
		head := s.queue[0]
		if head.write {
			if s.nr > 0 {
				break
			}
			return s.leave(0).take(head.hold)
		}
		s = s.leave(0).addReader(head.hold)
	}
	return s
}

// RWModel is the sequential specification of the read-write lock (see above).
var RWModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		return partitionBy(history, func(in any) int { return in.(rwInput).key })
	},
	Init: func() any { return rwState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(rwState), input.(rwInput), output.(lockOutput)
		switch in.op {
		case rwRead:
			if out.ok {
				return s.readable(in.nonFair), s.addReader(in.hold)
			}
			return !s.readable(in.nonFair), s
		case rwReadJoin:
			if s.readable(in.nonFair) {
				// A call ended by its context may have taken the read side and failed: it gives
				// it back at its end (see wait.go).
				return out.ok || in.wait.byContext(), s.addReader(in.hold)
			}
			return true, s.join(in.hold, false)
		case rwReadEnd:
			if i := s.reader(in.hold); i >= 0 {
				if out.ok {
					return true, s
				}
				return true, s.removeReader(i).serve() // granted in the instant it left: given up
			}
			i := s.waiter(in.hold)
			switch {
			case i < 0:
				return false, s // not joined yet
			case !out.ok:
				return true, s.leave(i).serve()
			case in.nonFair && s.wcount == 0:
				return true, s.leave(i).addReader(in.hold) // a retry takes it, as a newcomer would
			}
			return false, s // a success without a grant
		case rwReadReenter:
			i := s.reader(in.hold)
			if i < 0 {
				return false, s
			}
			s.readers[i].n++
			return out.ok, s
		case rwReadUnlock, rwReadStale:
			i := s.reader(in.hold)
			if i < 0 {
				return out.notOwner, s
			}
			if out.notOwner {
				return false, s
			}
			if s.readers[i].n > 1 {
				s.readers[i].n--
				return true, s
			}
			return true, s.removeReader(i).serve()
		case rwWrite:
			if out.ok {
				return s.writable(), s.take(in.hold)
			}
			return !s.writable(), s
		case rwWriteJoin:
			if s.writable() {
				return out.ok || in.wait.byContext(), s.take(in.hold)
			}
			return true, s.join(in.hold, true)
		case rwWriteEnd:
			if s.wcount > 0 && s.writer == in.hold {
				if out.ok {
					return true, s
				}
				s.writer, s.wcount = 0, 0 // granted in the instant it left: given up
				return true, s.serve()
			}
			i := s.waiter(in.hold)
			if i < 0 || out.ok {
				return false, s // not joined yet, or a success without a grant
			}
			return true, s.leave(i).serve()
		case rwDowngrade:
			if s.wcount > 0 && s.writer == in.writer {
				return out.ok, s.addReader(in.hold)
			}
			return false, s
		case rwWriteReenter:
			if s.wcount > 0 && s.writer == in.hold {
				s.wcount++
				return out.ok, s
			}
			return false, s
		default: // rwWriteUnlock, rwWriteStale
			if s.wcount > 0 && s.writer == in.hold {
				if out.notOwner {
					return false, s
				}
				s.wcount--
				if s.wcount == 0 {
					s.writer = 0
					s = s.serve()
				}
				return true, s
			}
			return out.notOwner, s
		}
	},
	Equal: func(a, b any) bool { return a.(rwState) == b.(rwState) },
	Hash: func(state any) uint64 {
		s := state.(rwState)
		h := uint64(s.writer)*31 + uint64(s.wcount)
		for i := range s.nr {
			h = h*131 + uint64(s.readers[i].hold)*7 + uint64(s.readers[i].n)
		}
		for i := range s.nq {
			h = h*137 + uint64(s.queue[i].hold)*2
			if s.queue[i].write {
				h++
			}
		}
		return h
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(rwInput), output.(lockOutput)
		names := [...]string{"TryRLock", "TryRLock(held)", "RUnlock", "RUnlock(released)", "TryLock",
			"TryLock joins", "TryLock ends", "TryLock(held)", "Unlock", "Unlock(released)", "TryRLock(write held)",
			"TryRLock joins", "TryRLock ends"}
		name := names[in.op]
		if in.wait.byContext() { // Lock and RLock, not TryLock and TryRLock
			name = strings.Replace(name, "Try", "", 1)
		}
		mode := ""
		if in.nonFair {
			mode = " nonfair"
		}
		res := fmt.Sprint(out.ok)
		if in.op == rwReadUnlock || in.op == rwReadStale || in.op == rwWriteUnlock || in.op == rwWriteStale {
			res = fmt.Sprintf("notOwner=%v", out.notOwner)
		}
		if in.op == rwDowngrade {
			return fmt.Sprintf("rw%d%s %s(h%d from writer h%d) -> %s", in.key, mode, name, in.hold, in.writer, res)
		}
		return fmt.Sprintf("rw%d%s %s(h%d, %v) -> %s", in.key, mode, name, in.hold, in.wait, res)
	},
	DescribeState: func(state any) string {
		s := state.(rwState)
		var b strings.Builder
		switch {
		case s.wcount > 0:
			fmt.Fprintf(&b, "writer h%d ×%d", s.writer, s.wcount)
			if s.nr > 0 {
				b.WriteString(", and ")
			}
		case s.nr == 0:
			b.WriteString("free")
		}
		if s.nr > 0 {
			b.WriteString("readers")
			for i := range s.nr {
				fmt.Fprintf(&b, " h%d×%d", s.readers[i].hold, s.readers[i].n)
			}
		}
		for i := range s.nq {
			side := "r"
			if s.queue[i].write {
				side = "w"
			}
			fmt.Fprintf(&b, " ← h%d(%s)", s.queue[i].hold, side)
		}
		return b.String()
	},
}

// partitionBy splits a history by the object each operation's input names.
func partitionBy(history []porcupine.Operation, key func(input any) int) [][]porcupine.Operation {
	var parts [][]porcupine.Operation
	for _, op := range history {
		k := key(op.Input)
		for len(parts) <= k {
			parts = append(parts, nil)
		}
		parts[k] = append(parts[k], op)
	}
	return parts
}

// RunRW runs Workers goroutines on each Client and returns the history they recorded:
// acquisitions of either side through fresh contexts, half of them waiting (drawWait: TryRLock
// or TryLock with a wait bound, or RLock or Lock whose context reaches its deadline or is
// cancelled by another goroutine, each after 1-10ms, recorded as its join and its end), the
// others TryRLock or TryLock without wait; re-entry, downgrades (TryRLock through a held write
// context), unlocks, and unlocks of holds released already. locks[c][k] is lock k of Client c;
// nonFair[k] says whether lock k was made with rwlock.WithNonFair.
func RunRW(t *testing.T, clients []*aqs.Client, locks [][]RWLocker, nonFair []bool) []porcupine.Operation {
	return Work(clients, func(w *Worker) {
		mine := locks[w.Client]
		// A hold of the worker: its held contexts, innermost last. The worker has one hold at
		// a time, or a write hold and the read hold it took as a downgrade, in either order
		// once the write hold re-entered or released.
		type hold struct {
			key   int
			id    int
			write bool
			first context.Context // the outermost held context, kept for stale unlocks
			ctxs  []context.Context
			// live: the held contexts are not done, so the hold may be re-entered or
			// downgraded through them (a Lock's held context ends with the caller's context,
			// at its deadline say); cancel ends the caller's context once the hold is
			// released.
			live   bool
			cancel context.CancelFunc
		}
		var holds []*hold
		var released []*hold // holds released already, for stale unlocks
		rng := w.Rand
		// do runs call and records it as in, unless it failed (the test fails then).
		do := func(in rwInput, call func() (lockOutput, error)) bool {
			in.nonFair = nonFair[in.key]
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
		// unlock releases ctx of h and records it as op.
		unlock := func(h *hold, ctx context.Context, op int) bool {
			return do(rwInput{key: h.key, op: op, hold: h.id}, func() (lockOutput, error) {
				var err error
				if h.write {
					err = mine[h.key].Unlock(ctx)
				} else {
					err = mine[h.key].RUnlock(ctx)
				}
				if errors.Is(err, aqs.ErrNotOwner) {
					return lockOutput{notOwner: true}, nil
				}
				return lockOutput{}, err
			})
		}
		// unlockTop releases the innermost context of holds[i].
		unlockTop := func(i int) bool {
			h := holds[i]
			op := rwReadUnlock
			if h.write {
				op = rwWriteUnlock
			}
			if !unlock(h, h.ctxs[len(h.ctxs)-1], op) {
				return false
			}
			h.ctxs = h.ctxs[:len(h.ctxs)-1]
			if len(h.ctxs) == 0 {
				h.cancel()
				holds = append(holds[:i], holds[i+1:]...)
				released = append(released, h)
			}
			return true
		}
		for w.More() {
			r := rng.IntN(100)
			switch {
			case len(holds) == 0 && len(released) > 0 && r < 10:
				h := released[rng.IntN(len(released))]
				op := rwReadStale
				if h.write {
					op = rwWriteStale
				}
				if !unlock(h, h.first, op) {
					return
				}
			case len(holds) == 0:
				key := rng.IntN(len(mine))
				h := &hold{key: key, id: int(holdIDs.Add(1)), write: r < 50}
				in := rwInput{key: key, op: rwRead, hold: h.id, nonFair: nonFair[key], wait: drawWait(rng, true)}
				l := mine[key]
				wc := startWait(in.wait, w)
				callAt := w.Now()
				var ctx context.Context
				var ok bool
				var err error
				switch {
				case in.wait.how == waitNone && h.write:
					ctx, ok, err = l.TryLock(wc.ctx)
				case in.wait.how == waitNone:
					ctx, ok, err = l.TryRLock(wc.ctx)
				case in.wait.how == waitBound && h.write:
					ctx, ok, err = l.TryLock(wc.ctx, aqs.WithWait(in.wait.d))
				case in.wait.how == waitBound:
					ctx, ok, err = l.TryRLock(wc.ctx, aqs.WithWait(in.wait.d))
				default:
					if h.write {
						ctx, err = l.Lock(wc.ctx)
					} else {
						ctx, err = l.RLock(wc.ctx)
					}
					ok = err == nil
					if contextEnded(in.wait, err) {
						err = nil // its wait ran out
					}
				}
				retAt := w.Now()
				in.wait, h.live = wc.ended(callAt)
				if err != nil {
					wc.cancel()
					t.Errorf("worker %d: %+v (write %v): %v", w.ID, in, h.write, err)
					return
				}
				out := lockOutput{ok: ok}
				switch {
				case in.wait.how == waitNone && h.write:
					in.op = rwWrite
					w.Record(in, out, callAt, retAt)
				case in.wait.how == waitNone:
					w.Record(in, out, callAt, retAt)
				default: // a call that waits: its join, and its end
					join, end := in, in
					join.op, end.op = rwReadJoin, rwReadEnd
					if h.write {
						join.op, end.op = rwWriteJoin, rwWriteEnd
					}
					j, e := splitWait(porcupine.Operation{Call: callAt, Return: retAt}, in.wait, ok, join, end)
					w.Record(j.Input, out, j.Call, j.Return)
					w.Record(e.Input, out, e.Call, e.Return)
				}
				if !ok {
					wc.cancel()
					continue
				}
				h.first, h.ctxs, h.cancel = ctx, []context.Context{ctx}, wc.cancel
				holds = append(holds, h)
			default:
				i := rng.IntN(len(holds))
				h := holds[i]
				top := h.ctxs[len(h.ctxs)-1]
				switch {
				case h.write && h.live && len(holds) == 1 && r < 15:
					// A downgrade: the writer takes the read side too, at once.
					d := &hold{key: h.key, id: int(holdIDs.Add(1))}
					var ctx context.Context
					if !do(rwInput{key: h.key, op: rwDowngrade, hold: d.id, writer: h.id}, func() (lockOutput, error) {
						var ok bool
						var err error
						ctx, ok, err = mine[h.key].TryRLock(top)
						return lockOutput{ok: ok}, err
					}) {
						return
					}
					if ctx != nil {
						// Detached from the write side's context: live as long as its own hold.
						d.first, d.ctxs, d.live, d.cancel = ctx, []context.Context{ctx}, true, func() {}
						holds = append(holds, d)
					}
				case h.live && len(h.ctxs) < 3 && r < 40:
					op := rwReadReenter
					if h.write {
						op = rwWriteReenter
					}
					var ctx context.Context
					if !do(rwInput{key: h.key, op: op, hold: h.id}, func() (lockOutput, error) {
						var ok bool
						var err error
						if h.write {
							ctx, ok, err = mine[h.key].TryLock(top)
						} else {
							ctx, ok, err = mine[h.key].TryRLock(top)
						}
						return lockOutput{ok: ok}, err
					}) {
						return
					}
					if ctx != nil {
						h.ctxs = append(h.ctxs, ctx)
					}
				default:
					if !unlockTop(i) {
						return
					}
				}
			}
		}
		for len(holds) > 0 { // release what is still held, recorded like the rest
			if !unlockTop(len(holds) - 1) {
				return
			}
		}
	}, func(w *Worker) {
		mine := locks[w.Client]
		settleAll(t, len(mine), func(key int) (bool, bool) {
			in := rwInput{key: key, op: rwWrite, hold: int(holdIDs.Add(1)), nonFair: nonFair[key]}
			unlock := in
			unlock.op = rwWriteUnlock
			return probeLock(t, w, mine[key], in, unlock)
		})
	})
}

// holdIDs numbers the holds of every run, so that each hold is unique.
var holdIDs atomic.Int64

// LogRWOutcomes logs how the history's operations ended, to show the run contended.
func LogRWOutcomes(t *testing.T, history []porcupine.Operation) {
	t.Helper()
	type kind struct{ op, how, ok int }
	n := map[kind]int{}
	for _, op := range history {
		in, out := op.Input.(rwInput), op.Output.(lockOutput)
		k := kind{op: in.op, how: in.wait.how}
		if out.ok || out.notOwner {
			k.ok = 1
		}
		n[k]++
	}
	// acquisitions returns how the acquisitions of a side ended, by how they waited: op is
	// the side's operation without wait, end the end of one that waits.
	acquisitions := func(op, end int) string {
		won := func(op, how int) string {
			return fmt.Sprintf("%d won, %d not", n[kind{op, how, 1}], n[kind{op, how, 0}])
		}
		return fmt.Sprintf("%s; with wait: %s; with a deadline: %s; cancelled meanwhile: %s",
			won(op, waitNone), won(end, waitBound), won(end, waitDeadline), won(end, waitCancel))
	}
	t.Logf("read: %s; write: %s; re-entries: %d read, %d write; unlocks: %d read, %d write; "+
		"unlocks of released holds: %d read, %d write; downgrades: %d",
		acquisitions(rwRead, rwReadEnd), acquisitions(rwWrite, rwWriteEnd),
		n[kind{rwReadReenter, 0, 1}], n[kind{rwWriteReenter, 0, 1}], n[kind{rwReadUnlock, 0, 0}],
		n[kind{rwWriteUnlock, 0, 0}], n[kind{rwReadStale, 0, 1}], n[kind{rwWriteStale, 0, 1}],
		n[kind{rwDowngrade, 0, 1}])
}
