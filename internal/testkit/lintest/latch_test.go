package lintest

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Hand-written histories of one latch, times in ns.

func latchOp(call, ret int64, in latchInput, out latchOutput) porcupine.Operation {
	return porcupine.Operation{Input: in, Call: call, Output: out, Return: ret}
}

func latchSetOp(call, ret int64, n int, ok bool) porcupine.Operation {
	return latchOp(call, ret, latchInput{op: latchSet, n: n}, latchOutput{ok: ok})
}

func latchDown(call, ret int64) porcupine.Operation {
	return latchOp(call, ret, latchInput{op: latchCountDown}, latchOutput{})
}

func latchDownNotSet(call, ret int64) porcupine.Operation {
	return latchOp(call, ret, latchInput{op: latchCountDown}, latchOutput{notSet: true})
}

func latchCountOp(call, ret int64, n int) porcupine.Operation {
	return latchOp(call, ret, latchInput{op: latchCount}, latchOutput{value: n})
}

func latchTry(call, ret int64, ok bool) porcupine.Operation {
	return latchOp(call, ret, latchInput{op: latchTryAwait}, latchOutput{ok: ok})
}

func latchDel(call, ret int64) porcupine.Operation {
	return latchOp(call, ret, latchInput{op: latchDelete}, latchOutput{})
}

// latchAwaitOp is an Await with a deadline 15 away: ok, ErrNotSet (notSet), or ended by its
// context (cut).
func latchAwaitOp(call, ret int64, out latchOutput) porcupine.Operation {
	w := Wait{how: waitDeadline, d: 15 * time.Nanosecond}
	return latchOp(call, ret, latchInput{op: latchAwait, wait: w}, out)
}

var (
	awaitOK     = latchOutput{ok: true}
	awaitNotSet = latchOutput{notSet: true}
	awaitCut    = latchOutput{cut: true}
)

// The model is not vacuous: each forged history is rejected, each sound one accepted.
func TestLatchModelRejectsForgedHistories(t *testing.T) {
	for _, c := range []struct {
		name  string
		legal bool
		h     []porcupine.Operation
	}{
		{"a set, two count-downs, a waiter at 0", true, ops(
			latchSetOp(0, 1, 2, true), latchDown(2, 3), latchDown(4, 5), latchAwaitOp(6, 7, awaitOK))},
		{"a waiter returning above 0", false, ops(
			latchSetOp(0, 1, 2, true), latchDown(2, 3), latchAwaitOp(4, 5, awaitOK))},
		// The waiter called before the last CountDown and returned after it: it saw 0 then.
		{"a waiter woken by the last count-down", true, ops(
			latchSetOp(0, 1, 2, true), latchDown(2, 3), latchAwaitOp(4, 20, awaitOK), latchDown(10, 11))},
		{"a waiter returning before the last count-down began", false, ops(
			latchSetOp(0, 1, 2, true), latchDown(2, 3), latchAwaitOp(4, 9, awaitOK), latchDown(10, 11))},
		// The count was 0 only between the CountDown (2-3) and the new count (4-5).
		{"a waiter at 0 after the count was set again", false, ops(
			latchSetOp(0, 1, 1, true), latchDown(2, 3), latchSetOp(4, 5, 1, true), latchAwaitOp(6, 10, awaitOK))},
		{"a waiter at 0 before the count was set again", true, ops(
			latchSetOp(0, 1, 1, true), latchDown(2, 3), latchSetOp(4, 5, 1, true), latchAwaitOp(1, 10, awaitOK))},
		{"two counts set at once", false, ops(latchSetOp(0, 1, 2, true), latchSetOp(2, 3, 1, true))},
		{"a set refused on a latch not set", false, ops(latchSetOp(0, 1, 2, false))},
		{"a set refused at 0", false, ops(latchSetOp(0, 1, 1, true), latchDown(2, 3), latchSetOp(4, 5, 1, false))},
		{"a set again at 0", true, ops(latchSetOp(0, 1, 1, true), latchDown(2, 3), latchSetOp(4, 5, 3, true),
			latchCountOp(6, 7, 3))},
		{"a count-down lost", false, ops(latchSetOp(0, 1, 3, true), latchDown(2, 3), latchCountOp(4, 5, 3))},
		{"a count-down counted twice", false, ops(latchSetOp(0, 1, 3, true), latchDown(2, 3), latchCountOp(4, 5, 1))},
		{"a count-down at 0 changes nothing", true, ops(latchSetOp(0, 1, 1, true), latchDown(2, 3), latchDown(4, 5),
			latchCountOp(6, 7, 0), latchTry(8, 9, true))},
		{"ErrNotSet from a count-down of a set latch", false, ops(latchSetOp(0, 1, 1, true), latchDownNotSet(2, 3))},
		{"ErrNotSet from a count-down of a latch never set", true, ops(latchDownNotSet(0, 1))},
		{"ErrNotSet from a waiter of a set latch", false, ops(latchSetOp(0, 1, 1, true), latchAwaitOp(2, 3, awaitNotSet))},
		{"ErrNotSet from a waiter of a deleted latch", true, ops(
			latchSetOp(0, 1, 1, true), latchDel(2, 3), latchAwaitOp(4, 5, awaitNotSet), latchCountOp(6, 7, 0))},
		{"a count-down of a deleted latch", false, ops(latchSetOp(0, 1, 2, true), latchDel(2, 3), latchDown(4, 5))},
		{"a waiter at 0 on a latch never set", false, ops(latchAwaitOp(0, 1, awaitOK))},
		{"TryAwait false at 0", false, ops(latchSetOp(0, 1, 1, true), latchDown(2, 3), latchTry(4, 5, false))},
		{"TryAwait false on a latch not set", false, ops(latchTry(0, 1, false))},
		{"TryAwait false above 0", true, ops(latchSetOp(0, 1, 1, true), latchTry(2, 3, false))},
		// An Await ended by its context reports nothing: legal in any state.
		{"waiters ended by their context", true, ops(
			latchAwaitOp(0, 20, awaitCut), latchSetOp(1, 2, 1, true), latchAwaitOp(3, 4, awaitCut), latchDown(5, 6),
			latchAwaitOp(7, 8, awaitCut))},
	} {
		if got := porcupine.CheckOperations(LatchModel, c.h); got != c.legal {
			t.Errorf("%s: linearizable %v, want %v", c.name, got, c.legal)
		}
	}
}
