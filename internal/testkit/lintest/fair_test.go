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

// tryWait is a TryLock with a wait bound, as RunLocks records it.
func tryWait(call, ret int64, hold int, wait time.Duration, ok bool) porcupine.Operation {
	w := Wait{how: waitBound, d: wait, endAfter: call + wait.Nanoseconds()}
	return op(call, ret, lockInput{op: linTry, hold: hold, wait: w}, lockOutput{ok: ok})
}

// lockUntil is a Lock whose context ends (its deadline, or a cancellation) at end, as RunLocks
// records it.
func lockUntil(call, ret, end int64, hold int, ok bool) porcupine.Operation {
	w := Wait{how: waitCancel, d: time.Duration(end - call), endAfter: end}
	return op(call, ret, lockInput{op: linTry, hold: hold, wait: w}, lockOutput{ok: ok})
}

// leftCleanUp is w, a call that waits, recorded as one during which its Client left a clean-up
// behind when deferred is set (see splitWait).
func leftCleanUp(w porcupine.Operation, deferred bool) porcupine.Operation {
	in := w.Input.(lockInput)
	in.wait.deferred = deferred
	w.Input = in
	return w
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

// A Lock whose context ended may have taken a free lock in that instant and given it back as
// it failed, or have done nothing (its context was done before it reached Redis): alone on a
// free lock it is legal. N1, refused at 20-30 while the Lock of H (context ended at 50) was
// on its way, shows the lock taken by it; that hold cannot end before its context did, so
// N2's success at 40-45 is illegal, and at 60-65 legal.
func TestFairLockModelLetsALockEndedByItsContextHoldUntilThen(t *testing.T) {
	if !fairLinearizable(lockUntil(0, 100, 50, 1, false)) {
		t.Fatal("rejected a Lock that failed by its context on a free lock")
	}
	history := func(n2 int64) []porcupine.Operation {
		return []porcupine.Operation{
			lockUntil(0, 100, 50, 1, false),
			try(20, 30, 4, false),
			try(n2, n2+5, 5, true),
			unlock(n2+6, n2+7, 5),
		}
	}
	if fairLinearizable(history(40)...) {
		t.Fatal("accepted a newcomer before the failed Lock's context ended")
	}
	if !fairLinearizable(history(60)...) {
		t.Fatal("rejected a newcomer after the failed Lock's context ended")
	}
}

// A Lock that failed by its context queued behind H like any waiter, and was handed the lock
// by H's release: N1's refusal at 5-6 shows it. It cannot leave before its context ended at
// 15, so N2 taking the lock at 7-8 passes it; with its context ended at 3, it may have left.
func TestFairLockModelRejectsANewcomerPassingALockUntilItsContextEnded(t *testing.T) {
	history := func(end int64) []porcupine.Operation {
		return []porcupine.Operation{
			try(0, 1, 1, true),
			lockUntil(2, 20, end, 2, false),
			unlock(3, 4, 1),
			try(5, 6, 4, false),
			try(7, 8, 5, true),
		}
	}
	if fairLinearizable(history(15)...) {
		t.Fatal("accepted a newcomer passing a waiter")
	}
	if !fairLinearizable(history(3)...) {
		t.Fatal("rejected a newcomer after a waiter that could have left")
	}
}

// A failed wait during which its Client left a clean-up to run after a call returned (see
// splitWait) may have left the queue after it returned: its end is left open, and a newcomer
// refused after it returned is legal; without such a clean-up, it is not.
func TestFairLockModelLeavesTheEndOfAFailedWaitWithACleanUpLeftOpen(t *testing.T) {
	history := func(deferred bool) []porcupine.Operation {
		w := leftCleanUp(lockUntil(2, 30, 10, 2, false), deferred)
		return []porcupine.Operation{try(0, 1, 1, true), w, unlock(3, 4, 1), try(31, 32, 4, false)}
	}
	if !fairLinearizable(history(true)...) {
		t.Fatal("rejected a newcomer refused after a failed wait whose clean-up was left behind")
	}
	if fairLinearizable(history(false)...) {
		t.Fatal("accepted a newcomer refused after a failed wait that left before it returned")
	}
}

// A Lock whose context ended while its attempt was on its way, and whose Client left a clean-up
// behind, may have its attempt reach Redis after it returned (see splitWait): that attempt
// takes the lock, freed meanwhile by another holder, and a newcomer refused after that is
// legal; without such a clean-up the join lands within the call, and the newcomer's refusal
// is not.
func TestFairLockModelLetsTheAttemptOfACallThatLeftACleanUpLandAfterItReturned(t *testing.T) {
	history := func(deferred bool) []porcupine.Operation {
		w := leftCleanUp(lockUntil(2, 5, 3, 2, false), deferred)
		return []porcupine.Operation{w, try(6, 7, 3, true), unlock(8, 9, 3), try(10, 11, 4, false)}
	}
	if !fairLinearizable(history(true)...) {
		t.Fatal("rejected a newcomer refused by the late attempt of a call that left a clean-up behind")
	}
	if fairLinearizable(history(false)...) {
		t.Fatal("accepted a newcomer refused on a free lock after every call had returned")
	}
}
