package lintest

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Hand-written histories of the multi-name lock over names a (bit 0) and b (bit 1), times in
// ns.

const (
	nameA uint8 = 1 << iota
	nameB
)

func mop(call, ret int64, in multiInput, ok, notOwner bool) porcupine.Operation {
	return porcupine.Operation{Input: in, Call: call, Output: lockOutput{ok: ok, notOwner: notOwner}, Return: ret}
}

// mTry is a TryLock without wait on names, a fair lock's when names is one name.
func mTry(call, ret int64, hold int, names uint8, ok bool) porcupine.Operation {
	return mop(call, ret, multiInput{op: linTry, hold: hold, names: names, fair: names != nameA|nameB}, ok, false)
}

// mWait is a TryLock with a wait bound on names, as RunMultiLocks records it.
func mWait(call, ret int64, hold int, names uint8, wait time.Duration, ok bool) porcupine.Operation {
	w := Wait{how: waitBound, d: wait, endAfter: call + wait.Nanoseconds()}
	return mop(call, ret, multiInput{op: linTry, hold: hold, names: names, wait: w}, ok, false)
}

func mUnlock(call, ret int64, hold int, names uint8) porcupine.Operation {
	return mop(call, ret, multiInput{op: linUnlock, hold: hold, names: names}, false, false)
}

func multiLinearizable(history ...porcupine.Operation) bool {
	return porcupine.CheckOperations(MultiLockModel, SplitMultiWaits(history))
}

// A request for {a, b} waiting for a reserves b at its join: a newcomer's TryLock of b fails
// though nobody reported holds it; the release of a completes the request.
func TestMultiLockModelAcceptsAReservationAndItsGrant(t *testing.T) {
	if !multiLinearizable(
		mTry(0, 1, 1, nameA, true),
		mWait(2, 20, 2, nameA|nameB, 50, true),
		mTry(5, 6, 3, nameB, false),
		mUnlock(7, 8, 1, nameA),
		mTry(21, 22, 4, nameA, false), // the request holds both until its unlock
		mUnlock(23, 24, 2, nameA|nameB),
		mTry(25, 26, 5, nameB, true),
	) {
		t.Fatal("rejected")
	}
}

// A later request for b alone does not pass the request for {a, b}, which reserved b before
// it came (the newcomer's failure on b shows that): it cannot have b while {a, b} waits and
// then holds.
func TestMultiLockModelRejectsALaterRequestPassingAnOverlappingOne(t *testing.T) {
	if multiLinearizable(
		mTry(0, 1, 1, nameA, true),
		mWait(2, 40, 2, nameA|nameB, 50, true),
		mTry(5, 6, 3, nameB, false),
		mWait(7, 20, 4, nameB, 50, true),
		mUnlock(25, 26, 1, nameA),
		mUnlock(30, 31, 4, nameB),
	) {
		t.Fatal("accepted a request for b that passed the older request for {a, b}")
	}
}

// A waiter that gives up passes its reservation on; a name it kept reserved after its end
// would be refused to everyone.
func TestMultiLockModelPassesTheReservationOfAWaiterThatGaveUp(t *testing.T) {
	h := []porcupine.Operation{
		mTry(0, 1, 1, nameA, true),
		mWait(2, 20, 2, nameA|nameB, 15, false),
		mTry(5, 6, 3, nameB, false),
	}
	if !multiLinearizable(append(h, mTry(21, 22, 4, nameB, true))...) {
		t.Fatal("rejected b taken after the waiter that reserved it gave up")
	}
	if multiLinearizable(append(h, mTry(21, 22, 4, nameB, false), mUnlock(23, 24, 1, nameA), mTry(25, 26, 5, nameB, false))...) {
		t.Fatal("accepted b refused with nobody holding, queued or waiting")
	}
}

// Two requests that own one name at once are rejected, whatever their kinds.
func TestMultiLockModelRejectsTwoHoldersOfOneName(t *testing.T) {
	if multiLinearizable(
		mTry(0, 1, 1, nameA|nameB, true),
		mTry(2, 3, 2, nameB, true),
	) {
		t.Fatal("accepted two holders of b")
	}
}
