package lintest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/latch"
)

// The count-down latch's specification.
//
// The latch is its count and nothing else (see package latch's doc): not set, or set to a
// count that only goes down, and stays 0 once there. TrySetCount(n) sets it when it is not
// set or 0, and only then reports true; CountDown lowers a count above 0 by one, changes
// nothing at 0, and fails with ErrNotSet, changing nothing, when it is not set; Count reports
// the count (0 when not set). The latch's key deleted (what its expiry does) makes it not set.
//
// An Await, or a TryAwait, has no effect: it is a read that happens at one instant of its
// call. An Await that returned nil saw the count 0 at that instant (its attempt, after a
// message or not, or its heartbeat), one that failed with ErrNotSet saw no count, and a
// TryAwait that returned false saw a count above 0 (its first attempt; a TryAwait with a wait
// bound looks again until the bound, and false says none of its looks saw 0). So a waiter
// woken by the CountDown that made the count 0 is linearized at the look that found it 0,
// after that CountDown and before the next TrySetCount, which the check enforces.
//
// An Await whose context ended (its deadline, or a cancellation) saw nothing it reports: it
// is in the history, but as an operation legal in every state, so the check may place it
// anywhere (the semaphore's failed waits need their end placed, since a grant may come with
// it; a waiter of the latch takes nothing and leaves nothing behind). That it was not left
// waiting after the count reached 0 is a matter of progress, not of linearizability: the fault
// tests of package chaos check it.

// Operations of a latch's history.
const (
	latchSet       = iota // TrySetCount(n)
	latchCountDown        // CountDown()
	latchCount            // Count()
	latchTryAwait         // TryAwait(), without wait or with a wait bound
	latchAwait            // Await(ctx) until ctx's deadline or its cancellation
	latchDelete           // DEL of the latch's key: what its expiry does
)

// latchInput is an operation on latch key: its kind, n for TrySetCount, and how a TryAwait or
// an Await waits.
type latchInput struct {
	key  int
	op   int
	n    int
	wait Wait
}

// latchOutput is an operation's result: ok for TrySetCount, TryAwait and Await; notSet for a
// CountDown, TryAwait or Await that failed with ErrNotSet; cut for an Await whose context ended;
// value for Count (any other error fails the test before the check).
type latchOutput struct {
	ok     bool
	notSet bool
	cut    bool
	value  int
}

// latchState is a latch's sequential state: whether it is set, and its count.
type latchState struct {
	set   bool
	count int
}

// LatchModel is the sequential specification of the count-down latch (see above), for
// histories made by RunLatches.
var LatchModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		return partitionBy(history, func(in any) int { return in.(latchInput).key })
	},
	Init: func() any { return latchState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(latchState), input.(latchInput), output.(latchOutput)
		open := s.set && s.count == 0
		switch in.op {
		case latchSet:
			if !s.set || s.count == 0 {
				return out.ok, latchState{set: true, count: in.n}
			}
			return !out.ok, s
		case latchCountDown:
			if !s.set {
				return out.notSet, s
			}
			if s.count > 0 {
				s.count--
			}
			return !out.notSet, s
		case latchCount:
			return out.value == s.count, s
		case latchDelete:
			return true, latchState{}
		default: // latchTryAwait, latchAwait
			switch {
			case out.cut:
				return in.op == latchAwait, s // saw nothing it reports
			case out.notSet:
				return !s.set, s
			case out.ok:
				return open, s
			}
			return in.op == latchTryAwait && s.set && s.count > 0, s
		}
	},
	Equal: func(a, b any) bool { return a.(latchState) == b.(latchState) },
	Hash: func(state any) uint64 {
		s := state.(latchState)
		if !s.set {
			return 0
		}
		return 1 + uint64(s.count)
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(latchInput), output.(latchOutput)
		res := func() string {
			switch {
			case out.cut:
				return "context ended"
			case out.notSet:
				return "ErrNotSet"
			}
			return fmt.Sprint(out.ok)
		}
		switch in.op {
		case latchSet:
			return fmt.Sprintf("latch%d TrySetCount(%d) -> %v", in.key, in.n, out.ok)
		case latchCountDown:
			return fmt.Sprintf("latch%d CountDown -> %s", in.key, res())
		case latchCount:
			return fmt.Sprintf("latch%d Count -> %d", in.key, out.value)
		case latchDelete:
			return fmt.Sprintf("latch%d deleted", in.key)
		case latchTryAwait:
			return fmt.Sprintf("latch%d TryAwait(%v) -> %s", in.key, in.wait, res())
		default:
			return fmt.Sprintf("latch%d Await(%v) -> %s", in.key, in.wait, res())
		}
	},
	DescribeState: func(state any) string {
		s := state.(latchState)
		if !s.set {
			return "not set"
		}
		return fmt.Sprintf("count %d", s.count)
	},
}

// RunLatches runs Workers goroutines on each of clients and returns the history they
// recorded: TrySetCount of 1-3, CountDown (a third of the operations, so that counts reach 0
// often), Count, TryAwait without wait and with a wait bound of 1-20ms, Await whose context
// reaches its deadline or is cancelled by another goroutine after 1-20ms, and now and then the
// latch's key deleted (through the worker's Client's go-redis client), as its expiry would,
// so that ErrNotSet stays in play. latches[c][k] is latch k of Client c, clients[c]; their
// expiry must outlast the run.
func RunLatches(t *testing.T, clients []*aqs.Client, latches [][]*latch.Latch) []porcupine.Operation {
	return Work(clients, func(w *Worker) {
		mine := latches[w.Client]
		rdb := core.RuntimeOf(clients[w.Client]).Redis
		rng := w.Rand
		background := context.Background()
		for w.More() {
			in := latchInput{key: rng.IntN(len(mine))}
			l := mine[in.key]
			var call func() (latchOutput, error)
			r := rng.IntN(100)
			switch {
			case r < 12:
				in.op, in.n = latchSet, 1+rng.IntN(3)
				call = func() (latchOutput, error) {
					ok, err := l.TrySetCount(background, in.n)
					return latchOutput{ok: ok}, err
				}
			case r < 45:
				in.op = latchCountDown
				call = func() (latchOutput, error) { return notSet(l.CountDown(background)) }
			case r < 53:
				in.op = latchCount
				call = func() (latchOutput, error) {
					n, err := l.Count(background)
					return latchOutput{value: n}, err
				}
			case r < 73:
				in.op = latchTryAwait
				if r%2 == 0 {
					in.wait = Wait{how: waitBound, d: time.Duration(1+rng.IntN(20)) * time.Millisecond}
				}
				call = func() (latchOutput, error) {
					var opts []aqs.WaitOption
					if in.wait.how == waitBound {
						opts = append(opts, aqs.WithWait(in.wait.d))
					}
					ok, err := l.TryAwait(background, opts...)
					out, err := notSet(err)
					out.ok = ok
					return out, err
				}
			case r < 98:
				in.op = latchAwait
				in.wait = Wait{how: waitDeadline + rng.IntN(2), d: time.Duration(1+rng.IntN(20)) * time.Millisecond}
				if !awaitLatch(t, w, l, in) {
					return
				}
				continue
			default:
				in.op = latchDelete
				call = func() (latchOutput, error) { return latchOutput{}, rdb.Del(background, l.Key()).Err() }
			}
			if !record(t, w, in, call) {
				return
			}
		}
	}, func(*Worker) {}) // nothing to settle: no call leaves anything behind
}

// notSet returns err's output: notSet for ErrNotSet, which is a result, not a failure.
func notSet(err error) (latchOutput, error) {
	if errors.Is(err, latch.ErrNotSet) {
		return latchOutput{notSet: true}, nil
	}
	return latchOutput{}, err
}

// awaitLatch runs l.Await on a context that ends as in.wait says, and records it, unless it
// failed otherwise (the test fails then).
func awaitLatch(t *testing.T, w *Worker, l *latch.Latch, in latchInput) bool {
	wc := startWait(in.wait, w)
	defer wc.cancel()
	callAt := w.Now()
	err := l.Await(wc.ctx)
	retAt := w.Now()
	wc.ended(callAt) // stops the canceller
	out, err := notSet(err)
	if contextEnded(in.wait, err) {
		out.cut, err = true, nil
	}
	if err != nil {
		t.Errorf("worker %d: %+v: %v", w.ID, in, err)
		return false
	}
	out.ok = !out.notSet && !out.cut
	w.Record(in, out, callAt, retAt)
	return true
}

// LogLatchOutcomes logs how the history's operations ended, to show that the counts reached 0
// and were set again, and that waiters saw the count at 0, above it and not set.
func LogLatchOutcomes(t *testing.T, history []porcupine.Operation) {
	t.Helper()
	type kind struct {
		op  int
		res string
	}
	n := map[kind]int{}
	waited := 0 // Awaits that returned nil 1ms or more after their call
	for _, op := range history {
		in, out := op.Input.(latchInput), op.Output.(latchOutput)
		res := "false"
		switch {
		case out.cut:
			res = "cut"
		case out.notSet:
			res = "notSet"
		case out.ok || in.op == latchCountDown:
			res = "true"
		}
		if in.op == latchAwait && out.ok && op.Return-op.Call >= time.Millisecond.Nanoseconds() {
			waited++
		}
		n[kind{in.op, res}]++
	}
	t.Logf("TrySetCount: %d set, %d refused; CountDown: %d, %d ErrNotSet; Count: %d; "+
		"TryAwait: %d at 0, %d above, %d ErrNotSet; Await: %d at 0 (%d of them 1ms or more after the call), "+
		"%d ErrNotSet, %d ended by their context; keys deleted: %d",
		n[kind{latchSet, "true"}], n[kind{latchSet, "false"}], n[kind{latchCountDown, "true"}],
		n[kind{latchCountDown, "notSet"}], n[kind{latchCount, "false"}],
		n[kind{latchTryAwait, "true"}], n[kind{latchTryAwait, "false"}], n[kind{latchTryAwait, "notSet"}],
		n[kind{latchAwait, "true"}], waited, n[kind{latchAwait, "notSet"}], n[kind{latchAwait, "cut"}],
		n[kind{latchDelete, "false"}])
}
