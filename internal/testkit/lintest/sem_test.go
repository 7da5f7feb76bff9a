package lintest

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Hand-written histories of one semaphore of 3 permits, times in ns. Holds number the
// acquisitions.

func semOp(call, ret int64, in semInput, out semOutput) porcupine.Operation {
	return porcupine.Operation{Input: in, Call: call, Output: out, Return: ret}
}

func semTryOp(call, ret int64, hold, n int, ok bool) porcupine.Operation {
	return semOp(call, ret, semInput{op: semTry, hold: hold, n: n}, semOutput{ok: ok})
}

// semWait is a TryAcquire with a wait bound of 15, as RunCounting and RunLeased record it.
func semWait(call, ret int64, hold, n int, ok bool) []porcupine.Operation {
	return semWaitAs(Wait{how: waitBound, d: 15, endAfter: call + 15}, call, ret, hold, n, ok)
}

// semAcquireUntil is an Acquire whose context ended at end.
func semAcquireUntil(call, ret, end int64, hold, n int, ok bool) []porcupine.Operation {
	return semWaitAs(Wait{how: waitDeadline, d: time.Duration(end - call), endAfter: end}, call, ret, hold, n, ok)
}

func semWaitAs(w Wait, call, ret int64, hold, n int, ok bool) []porcupine.Operation {
	in := semInput{hold: hold, n: n, wait: w}
	join, end := in, in
	join.op, end.op = semJoin, semEnd
	j, e := splitWait(porcupine.Operation{Call: call, Return: ret}, w, ok, join, end)
	j.Output, e.Output = semOutput{ok: ok}, semOutput{ok: ok}
	return []porcupine.Operation{j, e}
}

func semReleaseOp(call, ret int64, hold, n int, over bool) porcupine.Operation {
	return semOp(call, ret, semInput{op: semRelease, hold: hold, n: n}, semOutput{overRelease: over})
}

func semAvail(call, ret int64, n int) porcupine.Operation {
	return semOp(call, ret, semInput{op: semAvailable}, semOutput{value: n})
}

func semDrained(call, ret int64, n int) porcupine.Operation {
	return semOp(call, ret, semInput{op: semDrain}, semOutput{value: n})
}

func cat(parts ...[]porcupine.Operation) []porcupine.Operation {
	var h []porcupine.Operation
	for _, p := range parts {
		h = append(h, p...)
	}
	return h
}

func ops(o ...porcupine.Operation) []porcupine.Operation { return o }

// The model is not vacuous: each broken history is rejected, each sound one accepted.
func TestSemModelRejectsBrokenHistories(t *testing.T) {
	for _, c := range []struct {
		name  string
		legal bool
		h     []porcupine.Operation
	}{
		{"more permits than the total", false, ops(semTryOp(0, 1, 1, 2, true), semTryOp(2, 3, 2, 2, true))},
		{"a refusal with permits free", false, ops(semTryOp(0, 1, 1, 2, true), semTryOp(2, 3, 2, 1, false))},
		{"a wrong count", false, ops(semTryOp(0, 1, 1, 2, true), semAvail(2, 3, 2))},
		{"a release beyond the total", false, ops(semReleaseOp(0, 1, 1, 1, false))},
		{"a release beyond the total refused", true, ops(semReleaseOp(0, 1, 1, 1, true))},
		{"a release within the total refused", false, ops(semTryOp(0, 1, 1, 1, true), semReleaseOp(2, 3, 1, 1, true))},
		{"permits back after a release", true, ops(semTryOp(0, 1, 1, 3, true), semReleaseOp(2, 3, 1, 3, false), semTryOp(4, 5, 2, 3, true))},
		{"a drain of what is available", true, ops(semTryOp(0, 1, 1, 1, true), semDrained(2, 3, 2), semAvail(4, 5, 0))},
		{"a drain of too many", false, ops(semTryOp(0, 1, 1, 1, true), semDrained(2, 3, 3))},
		// A waiter for 2 that gave up may have been granted them in the instant it left:
		// meanwhile a newcomer for 1 is refused though 2 are free of every reported holder.
		{"the permits of a waiter that gave up", true, cat(
			ops(semTryOp(0, 1, 1, 3, true), semReleaseOp(3, 4, 1, 3, false), semTryOp(5, 6, 3, 2, false)),
			semWait(2, 20, 2, 2, false))},
		// Waiter 2 (for 3) is known to wait by 6: the newcomer for 1 at 5-6 is refused with 1
		// free, which only a waiter at the head explains. A newcomer for 1 passing it at 8-9
		// is illegal, and so is waiter 4 (for 1), which arrived after, being served first.
		{"a newcomer passing a waiter", false, cat(
			ops(semTryOp(0, 1, 1, 2, true), semTryOp(5, 6, 3, 1, false), semTryOp(8, 9, 5, 1, true)),
			semWait(2, 20, 2, 3, false))},
		{"a later waiter passing an earlier one", false, cat(
			ops(semTryOp(0, 1, 1, 2, true), semTryOp(5, 6, 3, 1, false)),
			semWait(2, 20, 2, 3, false), semWait(7, 9, 4, 1, true))},
		{"a waiter served without the permits", false, cat(
			ops(semTryOp(0, 1, 1, 3, true), semReleaseOp(30, 31, 1, 3, false)), semWait(2, 10, 2, 1, true))},
		// A drain takes the permits whoever waits; the waiter for 1 is served by the release
		// that follows, not by the drain.
		{"a drain past a waiter", true, cat(
			ops(semTryOp(0, 1, 1, 3, true), semReleaseOp(3, 4, 1, 1, false), semDrained(5, 6, 0)),
			semWait(2, 20, 2, 1, true))},
		// An Acquire whose context ended (at 50) may have taken free permits in that instant
		// and given them back as it failed: a newcomer refused meanwhile is legal; one that
		// takes all 3 before that end is not, and after it, is.
		{"the permits of an Acquire ended by its context", true, cat(
			ops(semTryOp(20, 30, 2, 3, false)), semAcquireUntil(0, 100, 50, 1, 2, false))},
		{"a newcomer before the end of a failed Acquire that held", false, cat(
			ops(semTryOp(20, 30, 2, 3, false), semTryOp(40, 45, 3, 3, true)), semAcquireUntil(0, 100, 50, 1, 2, false))},
		{"a newcomer after the end of a failed Acquire that held", true, cat(
			ops(semTryOp(20, 30, 2, 3, false), semTryOp(60, 65, 3, 3, true)), semAcquireUntil(0, 100, 50, 1, 2, false))},
	} {
		if got := porcupine.CheckOperations(SemModel(3), c.h); got != c.legal {
			t.Errorf("%s: linearizable %v, want %v", c.name, got, c.legal)
		}
	}
}
