package lintest

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Hand-written histories of one fair lock, times in ns. Holds: 1 is H, a holder; 2, 3 waiters
// W1, W2 (TryLock with a wait); 4, 5 newcomers N1, N2 (TryLock without wait).

func op(call, ret int64, in lockInput, out lockOutput) porcupine.Operation {
	return porcupine.Operation{Input: in, Call: call, Output: out, Return: ret}
}

func try(call, ret int64, hold int, ok bool) porcupine.Operation {
	return op(call, ret, lockInput{op: linTry, hold: hold}, lockOutput{ok: ok})
}

func tryWait(call, ret int64, hold int, wait time.Duration, ok bool) porcupine.Operation {
	return op(call, ret, lockInput{op: linTry, hold: hold, wait: wait}, lockOutput{ok: ok})
}

func unlock(call, ret int64, hold int) porcupine.Operation {
	return op(call, ret, lockInput{op: linUnlock, hold: hold}, lockOutput{})
}

func fairLinearizable(history ...porcupine.Operation) bool {
	return porcupine.CheckOperations(FairLockModel, SplitWaits(history))
}

// The case that the plain lock specification cannot explain, and the fair one does: H
// releases while W1 waits, so W1 is handed the lock; N1's TryLock fails on it; W1's wait runs
// out and it passes the lock on as it leaves, reporting failure.
func TestFairLockModelAllowsTheHoldOfAWaiterThatGaveUp(t *testing.T) {
	h := []porcupine.Operation{
		try(0, 1, 1, true),
		tryWait(2, 20, 2, 15, false),
		unlock(3, 4, 1),
		try(5, 6, 4, false),
	}
	if porcupine.CheckOperations(LockModel, h) {
		t.Fatal("the plain lock model accepted a TryLock refused with no holder")
	}
	if !fairLinearizable(h...) {
		t.Fatal("the fair model rejected the hold of a waiter that gave up")
	}
}

// An ordinary run is accepted: a hand-off to a waiter, its release, a newcomer after it.
func TestFairLockModelAcceptsAHandOff(t *testing.T) {
	if !fairLinearizable(
		try(0, 1, 1, true),
		tryWait(2, 10, 2, 15, true),
		try(3, 4, 4, false),
		unlock(5, 6, 1),
		unlock(11, 12, 2),
		try(13, 14, 5, true),
	) {
		t.Fatal("rejected")
	}
}

// Two holders at once, with waits: W1 is known to have the lock from N1's failure (nothing
// else can explain it, since H released before), W2 arrives after that and gets the lock before
// W1 returns.
func TestFairLockModelRejectsALaterWaiterPassingAnEarlierOne(t *testing.T) {
	if fairLinearizable(
		try(0, 1, 1, true),
		tryWait(2, 30, 2, 50, true),
		unlock(3, 4, 1),
		try(5, 6, 4, false),
		tryWait(7, 9, 3, 50, true),
		unlock(10, 11, 3),
		unlock(31, 32, 2),
	) {
		t.Fatal("accepted two holders")
	}
}

// A newcomer passing a waiter known to wait: N1's failure shows that W1 had joined (and been
// handed the lock) by 6, and W1 cannot leave before its wait of 15 ran out, at 17; N2 takes the
// lock at 7-8. With a wait of 1 W1 may have left at 3 already, and the same history is fine.
func TestFairLockModelRejectsANewcomerPassingAWaiter(t *testing.T) {
	history := func(wait time.Duration) []porcupine.Operation {
		return []porcupine.Operation{
			try(0, 1, 1, true),
			tryWait(2, 20, 2, wait, false),
			unlock(3, 4, 1),
			try(5, 6, 4, false),
			try(7, 8, 5, true),
		}
	}
	if fairLinearizable(history(15)...) {
		t.Fatal("accepted a newcomer passing a waiter")
	}
	if !fairLinearizable(history(1)...) {
		t.Fatal("rejected a newcomer after a waiter that could have left")
	}
}

// A waiter's first attempt takes a free lock, so a wait alone on a free lock cannot fail.
func TestFairLockModelRejectsAWaitFailingOnAFreeLock(t *testing.T) {
	if fairLinearizable(tryWait(0, 20, 2, 15, false)) {
		t.Fatal("accepted")
	}
}

// A waiter cannot succeed while the lock is held throughout its call, nor can a newcomer.
func TestFairLockModelRejectsASuccessUnderAHolder(t *testing.T) {
	if fairLinearizable(try(0, 1, 1, true), tryWait(2, 10, 2, 5, true), unlock(50, 51, 1)) {
		t.Fatal("accepted a waiter's success")
	}
	if fairLinearizable(try(0, 1, 1, true), try(2, 3, 4, true)) {
		t.Fatal("accepted a newcomer's success")
	}
}

// A newcomer cannot take the lock while W1 is known to queue: W1 joined behind H (N1's failure
// happens after H's release and before anything else could hold); N2's success at 12-13, before
// W1 returned with the lock and released it, would be a second holder.
func TestFairLockModelRejectsANewcomerPassingAGrantedWaiter(t *testing.T) {
	if fairLinearizable(
		try(0, 1, 1, true),
		tryWait(2, 20, 2, 50, true),
		unlock(3, 4, 1),
		try(5, 6, 4, false),
		try(12, 13, 5, true),
		unlock(21, 22, 2),
	) {
		t.Fatal("accepted")
	}
}
