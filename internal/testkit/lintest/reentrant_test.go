package lintest

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

func handOffLinearizable(history ...porcupine.Operation) bool {
	return porcupine.CheckOperations(HandOffLockModel, SplitWaits(history))
}

// onClient returns op as made by a worker of client c.
func onClient(c int, op porcupine.Operation) porcupine.Operation {
	in := op.Input.(lockInput)
	in.client = c
	op.Input = in
	return op
}

// H releases while W waits; N's TryLock fails after that, and W's wait fails. A local hand-off
// explains it when H and W are of one Client (H handed the lock to W, which gave it back as it
// left), and a reservation when they are of two (H kept the lock for W's Client, and N, a
// newcomer, found it held).
func TestHandOffLockModelAllowsAHandOffOrAReservation(t *testing.T) {
	history := func(wClient int) []porcupine.Operation {
		return []porcupine.Operation{
			onClient(0, try(0, 1, 1, true)),
			onClient(wClient, tryWait(2, 20, 2, 15, false)),
			onClient(0, unlock(3, 4, 1)),
			onClient(2, try(5, 6, 4, false)),
		}
	}
	if !handOffLinearizable(history(0)...) {
		t.Fatal("rejected a hand-off to a waiter of the releaser's Client")
	}
	// With a waiter of another Client, the same history is a reservation: the release kept
	// the lock for that waiter, and the newcomer's TryLock found it held.
	if !handOffLinearizable(history(1)...) {
		t.Fatal("rejected a release reserving the lock for a waiter of another Client")
	}
}

// The lock has no order: a newcomer may take a free lock while others wait. But never two
// holders, nor a waiter's success under a holder.
func TestHandOffLockModelRejectsTwoHolders(t *testing.T) {
	if !handOffLinearizable(
		try(0, 1, 1, true),
		tryWait(2, 20, 2, 50, true),
		unlock(3, 4, 1),
		onClient(1, try(5, 6, 4, true)),
		onClient(1, unlock(7, 8, 4)),
		unlock(21, 22, 2),
	) {
		t.Fatal("rejected a newcomer passing a waiter")
	}
	if handOffLinearizable(try(0, 1, 1, true), onClient(1, try(2, 3, 4, true))) {
		t.Fatal("accepted two holders")
	}
	if handOffLinearizable(try(0, 1, 1, true), tryWait(2, 10, 2, 5, true), unlock(50, 51, 1)) {
		t.Fatal("accepted a waiter's success under a holder")
	}
	if handOffLinearizable(tryWait(0, 20, 2, 15, false)) {
		t.Fatal("accepted a wait failing on a free lock")
	}
}

// A Lock whose context ended may have taken the free lock in that instant, and given it back:
// a newcomer refused meanwhile is legal, one that succeeds while the failed Lock held is not.
// (A newcomer refused after the Lock returned is legal too: the give-back may have reserved
// the lock, see reentrant.go.)
func TestHandOffLockModelLetsALockEndedByItsContextHoldUntilThen(t *testing.T) {
	if !handOffLinearizable(lockUntil(0, 100, 50, 1, false), try(20, 30, 4, false)) {
		t.Fatal("rejected a newcomer refused while a failing Lock held")
	}
	if handOffLinearizable(lockUntil(0, 100, 50, 1, false), try(20, 30, 4, false), try(40, 45, 5, true)) {
		t.Fatal("accepted a newcomer before the failed Lock's context ended")
	}
}
