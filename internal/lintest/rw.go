package lintest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/redaqs/aqs"
)

// The read-write lock's specification.
//
// Any number of readers, each with its own hold count, or one writer with its count. A new
// reader enters when no writer holds and, in the fair mode, no writer waits; a new writer
// enters when nobody holds (waiting writers are not ordered among themselves, so any writer may
// go first). Re-entry through a held context always succeeds, and so does a downgrade: the
// writer takes the read side as a new read hold, kept when the write side is released. Unlock by the holder counts
// down; of a hold released already it is ErrNotOwner.
//
// Waiting writers are part of the state because, in the fair mode, they keep new readers out.
// A TryLock with a wait is two operations of one call, as for the fair lock (see fair.go):
// rwWriteJoin, its first attempt, which takes a free lock or marks the writer waiting, and
// rwWriteEnd, its outcome: it takes the lock when nobody holds (or confirms the take of its
// join), or the writer leaves. A wait that failed ends no earlier than its wait after the
// call. A reader's wait has no effect on others, so a TryRLock with a wait is one operation: it
// succeeded at some attempt that found the lock open to it, or failed at its first attempt,
// which found it closed.

// RWLocker is what RunRW needs of a read-write lock: rwlock.Lock has it.
type RWLocker interface {
	TryLock(ctx context.Context, opts ...aqs.TryLockOption) (context.Context, bool, error)
	Unlock(ctx context.Context) error
	TryRLock(ctx context.Context, opts ...aqs.TryOption) (context.Context, bool, error)
	RUnlock(ctx context.Context) error
}

// Operations of a read-write lock's history.
const (
	rwRead         = iota // TryRLock with a fresh context, with or without a wait
	rwReadReenter         // TryRLock through the worker's held read context
	rwReadUnlock          // RUnlock of the worker's top held read context
	rwReadStale           // RUnlock of a read hold released already
	rwWrite               // TryLock with a fresh context, without wait
	rwWriteJoin           // TryLock with a fresh context and a wait: its first attempt
	rwWriteEnd            // the same call: its outcome
	rwWriteReenter        // TryLock through the worker's held write context
	rwWriteUnlock         // Unlock of the worker's top held write context
	rwWriteStale          // Unlock of a write hold released already
	rwDowngrade           // TryRLock through the worker's held write context: a new read hold
)

// rwInput is an operation on lock key; nonFair tells the model which mode that lock has. For
// rwDowngrade, hold is the new read hold and writer the write hold it was taken through.
type rwInput struct {
	key     int
	op      int
	hold    int
	writer  int
	wait    time.Duration
	nonFair bool
}

// rwMax bounds the readers and the waiting writers of the model: each worker has one hold.
const rwMax = 16

type holdCount struct{ hold, n int }

// rwState is the read-write lock's sequential state. readers[:nr] and waiting[:nw] are
// sorted by hold, so that equal states are equal values.
type rwState struct {
	writer, wcount int
	nr, nw         int
	readers        [rwMax]holdCount
	waiting        [rwMax]int
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
	for i := range s.nw {
		if s.waiting[i] == hold {
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

func (s rwState) addWaiter(hold int) rwState {
	if s.nw == rwMax {
		panic("lintest: waiting writers of the model full")
	}
	s.waiting[s.nw] = hold
	s.nw++
	sort.Ints(s.waiting[:s.nw])
	return s
}

func (s rwState) removeWaiter(i int) rwState {
	copy(s.waiting[i:], s.waiting[i+1:s.nw])
	s.nw--
	s.waiting[s.nw] = 0
	return s
}

// readable reports whether a new reader may enter; writable whether a new writer may.
func (s rwState) readable(nonFair bool) bool { return s.wcount == 0 && (nonFair || s.nw == 0) }
func (s rwState) writable() bool             { return s.wcount == 0 && s.nr == 0 }

func (s rwState) take(hold int) rwState {
	s.writer, s.wcount = hold, 1
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
			return true, s.removeReader(i)
		case rwWrite:
			if out.ok {
				return s.writable(), s.take(in.hold)
			}
			return !s.writable(), s
		case rwWriteJoin:
			if s.writable() {
				return out.ok, s.take(in.hold)
			}
			return true, s.addWaiter(in.hold)
		case rwWriteEnd:
			if s.wcount > 0 && s.writer == in.hold {
				return out.ok, s // took it at its join
			}
			i := s.waiter(in.hold)
			if i < 0 {
				return false, s // not joined yet
			}
			if !out.ok {
				return true, s.removeWaiter(i)
			}
			return s.writable(), s.removeWaiter(i).take(in.hold)
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
		for i := range s.nw {
			h = h*137 + uint64(s.waiting[i])
		}
		return h
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(rwInput), output.(lockOutput)
		names := [...]string{"TryRLock", "TryRLock(held)", "RUnlock", "RUnlock(released)", "TryLock",
			"TryLock joins", "TryLock ends", "TryLock(held)", "Unlock", "Unlock(released)", "TryRLock(write held)"}
		mode := ""
		if in.nonFair {
			mode = " nonfair"
		}
		res := fmt.Sprint(out.ok)
		if in.op == rwReadUnlock || in.op == rwReadStale || in.op == rwWriteUnlock || in.op == rwWriteStale {
			res = fmt.Sprintf("notOwner=%v", out.notOwner)
		}
		if in.op == rwDowngrade {
			return fmt.Sprintf("rw%d%s %s(h%d from writer h%d) -> %s", in.key, mode, names[in.op], in.hold, in.writer, res)
		}
		return fmt.Sprintf("rw%d%s %s(h%d, wait %v) -> %s", in.key, mode, names[in.op], in.hold, in.wait, res)
	},
	DescribeState: func(state any) string {
		s := state.(rwState)
		var b strings.Builder
		switch {
		case s.wcount > 0:
			fmt.Fprintf(&b, "writer h%d ×%d", s.writer, s.wcount)
		case s.nr > 0:
			b.WriteString("readers")
			for i := range s.nr {
				fmt.Fprintf(&b, " h%d×%d", s.readers[i].hold, s.readers[i].n)
			}
		default:
			b.WriteString("free")
		}
		if s.nw > 0 {
			fmt.Fprintf(&b, "; writers waiting %v", s.waiting[:s.nw])
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
// TryRLock and TryLock of fresh contexts (each with a wait of 1-10ms half of the time),
// re-entry, downgrades (TryRLock through a held write context), unlocks, and unlocks of holds
// released already. locks[c][k] is lock k of Client c; nonFair[k] says whether lock k was made
// with rwlock.WithNonFair.
func RunRW(t *testing.T, locks [][]RWLocker, nonFair []bool) []porcupine.Operation {
	return Work(len(locks), func(w *Worker) {
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
				in := rwInput{key: key, op: rwRead, hold: h.id, nonFair: nonFair[key]}
				var wopts []aqs.TryLockOption // the write side's options
				var ropts []aqs.TryOption     // the read side's: the same wait
				if rng.IntN(2) == 0 {
					in.wait = time.Duration(1+rng.IntN(10)) * time.Millisecond
					wopts, ropts = append(wopts, aqs.WithWait(in.wait)), append(ropts, aqs.WithWait(in.wait))
				}
				callAt := w.Now()
				var ctx context.Context
				var ok bool
				var err error
				if h.write {
					ctx, ok, err = mine[key].TryLock(context.Background(), wopts...)
				} else {
					ctx, ok, err = mine[key].TryRLock(context.Background(), ropts...)
				}
				retAt := w.Now()
				if err != nil {
					t.Errorf("worker %d: %+v (write %v): %v", w.ID, in, h.write, err)
					return
				}
				out := lockOutput{ok: ok}
				switch {
				case !h.write:
					w.Record(in, out, callAt, retAt)
				case in.wait == 0:
					in.op = rwWrite
					w.Record(in, out, callAt, retAt)
				default:
					in.op = rwWriteJoin
					w.Record(in, out, callAt, retAt)
					in.op = rwWriteEnd
					endAt := callAt
					if !ok {
						endAt = min(callAt+in.wait.Nanoseconds(), retAt)
					}
					w.Record(in, out, endAt, retAt)
				}
				if ok {
					h.first, h.ctxs = ctx, []context.Context{ctx}
					holds = append(holds, h)
				}
			default:
				i := rng.IntN(len(holds))
				h := holds[i]
				top := h.ctxs[len(h.ctxs)-1]
				switch {
				case h.write && len(holds) == 1 && r < 15:
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
						d.first, d.ctxs = ctx, []context.Context{ctx}
						holds = append(holds, d)
					}
				case len(h.ctxs) < 3 && r < 40:
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
	})
}

// holdIDs numbers the holds of every run, so that each hold is unique.
var holdIDs atomic.Int64

// LogRWOutcomes logs how the history's operations ended, to show the run contended.
func LogRWOutcomes(t *testing.T, history []porcupine.Operation) {
	t.Helper()
	type kind struct{ op, ok int }
	n := map[kind]int{}
	for _, op := range history {
		in, out := op.Input.(rwInput), op.Output.(lockOutput)
		k := kind{op: in.op}
		if out.ok || out.notOwner {
			k.ok = 1
		}
		if in.op == rwRead && in.wait > 0 {
			k.op = -1
		}
		n[k]++
	}
	t.Logf("TryRLock: %d won, %d not; with wait: %d won, %d not; TryLock: %d won, %d not; "+
		"with wait: %d won, %d not; re-entries: %d read, %d write; unlocks: %d read, %d write; "+
		"unlocks of released holds: %d read, %d write; downgrades: %d",
		n[kind{rwRead, 1}], n[kind{rwRead, 0}], n[kind{-1, 1}], n[kind{-1, 0}],
		n[kind{rwWrite, 1}], n[kind{rwWrite, 0}], n[kind{rwWriteEnd, 1}], n[kind{rwWriteEnd, 0}],
		n[kind{rwReadReenter, 1}], n[kind{rwWriteReenter, 1}], n[kind{rwReadUnlock, 0}], n[kind{rwWriteUnlock, 0}],
		n[kind{rwReadStale, 1}], n[kind{rwWriteStale, 1}], n[kind{rwDowngrade, 1}])
}
