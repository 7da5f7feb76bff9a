package lintest

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// The check is not vacuous: a history where a second holder wins a held lock, or where a
// free lock is refused, is rejected.
func TestLockModelRejectsTwoHolders(t *testing.T) {
	op := func(call, ret int64, in lockInput, out lockOutput) porcupine.Operation {
		return porcupine.Operation{Input: in, Call: call, Output: out, Return: ret}
	}
	twoHolders := []porcupine.Operation{
		op(0, 1, lockInput{op: linTry, hold: 1}, lockOutput{ok: true}),
		op(2, 3, lockInput{op: linTry, hold: 2}, lockOutput{ok: true}),
	}
	if porcupine.CheckOperations(LockModel, twoHolders) {
		t.Fatal("model accepted two holders")
	}
	refusedFree := []porcupine.Operation{
		op(0, 1, lockInput{op: linTry, hold: 1}, lockOutput{ok: true}),
		op(2, 3, lockInput{op: linUnlock, hold: 1}, lockOutput{}),
		op(4, 5, lockInput{op: linTry, hold: 2}, lockOutput{ok: false}),
	}
	if porcupine.CheckOperations(LockModel, refusedFree) {
		t.Fatal("model accepted a free lock refused")
	}
}
