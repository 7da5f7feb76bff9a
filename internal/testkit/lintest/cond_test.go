package lintest

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// Hand-written histories of a lock with a condition, times in ns. Holds 1, 3, 5 are Locks; 2
// and 4 the new holds of Waits.

func condOp(call, ret int64, in condInput, out condOutput) porcupine.Operation {
	return porcupine.Operation{Input: in, Call: call, Output: out, Return: ret}
}

func cLock(call, ret int64, hold int) porcupine.Operation {
	return condOp(call, ret, condInput{op: condLock, hold: hold}, condOutput{})
}

func cUnlock(call, ret int64, hold int) porcupine.Operation {
	return condOp(call, ret, condInput{op: condUnlock, hold: hold}, condOutput{})
}

func cWait(call, ret int64, hold, next int) porcupine.Operation {
	return condOp(call, ret, condInput{op: condWait, hold: hold, next: next}, condOutput{})
}

func cSignal(call, ret int64, ok bool) porcupine.Operation {
	return condOp(call, ret, condInput{op: condSignal}, condOutput{ok: ok})
}

func cSignalAll(call, ret int64, n int) porcupine.Operation {
	return condOp(call, ret, condInput{op: condSignalAll}, condOutput{n: n})
}

func condLinearizable(history ...porcupine.Operation) bool {
	return porcupine.CheckOperations(CondModel, SplitConds(history))
}

// A lost signal: hold 3 got the lock, so the Wait of hold 1 had given it up and waits; a Signal
// made then that finds nobody is rejected. The same history with the Signal finding the
// waiter, which takes the lock back after hold 3's Unlock, is accepted.
func TestCondModelRejectsALostSignal(t *testing.T) {
	history := func(signalled bool) []porcupine.Operation {
		return []porcupine.Operation{
			cLock(0, 1, 1),
			cWait(2, 30, 1, 2),
			cLock(3, 4, 3),
			cSignal(5, 6, signalled),
			cUnlock(7, 8, 3),
			cUnlock(31, 32, 2),
		}
	}
	if !condLinearizable(history(true)...) {
		t.Fatal("a Signal that moved the waiter rejected")
	}
	if condLinearizable(history(false)...) {
		t.Fatal("a Signal that missed a known waiter accepted")
	}
}

// Signalling out of wait order: holds 1 and 3 wait in that order (each known to have given the
// lock up by the next Lock's return), a SignalAll moves both under hold 5; the later waiter
// taking the lock back first is rejected, the earlier one first accepted.
func TestCondModelRejectsSignallingOutOfWaitOrder(t *testing.T) {
	history := func(first, second int) []porcupine.Operation {
		h := []porcupine.Operation{
			cLock(0, 1, 1),
			cWait(2, 40, 1, 2),
			cLock(3, 4, 3),
			cWait(5, 40, 3, 4),
			cLock(6, 7, 5),
			cSignalAll(8, 9, 2),
			cUnlock(10, 11, 5),
		}
		// The first to return unlocks before the other returns.
		h[1].Return, h[3].Return = 60, 60
		for i, hold := range []int{first, second} {
			w := 1
			if hold == 4 {
				w = 3
			}
			at := int64(15 + 10*i)
			h[w].Return = at
			h = append(h, cUnlock(at+1, at+2, hold))
		}
		return h
	}
	if !condLinearizable(history(2, 4)...) {
		t.Fatal("waiters taking the lock back in wait order rejected")
	}
	if condLinearizable(history(4, 2)...) {
		t.Fatal("the later waiter taking the lock back first accepted")
	}
}

// A Wait that returns with nobody to signal it (a spurious wake-up) is rejected, and so is a
// SignalAll that counts a waiter too many.
func TestCondModelRejectsAWakeUpWithoutSignal(t *testing.T) {
	if condLinearizable(cLock(0, 1, 1), cWait(2, 10, 1, 2), cUnlock(11, 12, 2)) {
		t.Fatal("a Wait that returned without a Signal accepted")
	}
	if condLinearizable(cLock(0, 1, 1), cUnlock(2, 3, 1), cSignalAll(4, 5, 1)) {
		t.Fatal("a SignalAll moving a waiter that is not there accepted")
	}
}
