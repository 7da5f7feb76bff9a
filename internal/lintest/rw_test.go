package lintest

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Hand-written histories of one read-write lock, times in ns.

func rwOp(call, ret int64, op, hold int, out lockOutput) porcupine.Operation {
	return porcupine.Operation{Input: rwInput{op: op, hold: hold}, Call: call, Output: out, Return: ret}
}

// rwWriteWait is a TryLock with a wait as RunRW records it: its join and its end.
func rwWriteWait(call, ret int64, hold int, wait time.Duration, ok bool) []porcupine.Operation {
	in := rwInput{op: rwWriteJoin, hold: hold, wait: wait}
	join := porcupine.Operation{Input: in, Call: call, Output: lockOutput{ok: ok}, Return: ret}
	in.op = rwWriteEnd
	end := join
	end.Input = in
	if !ok {
		end.Call = min(call+wait.Nanoseconds(), ret)
	}
	return []porcupine.Operation{join, end}
}

func rwLinearizable(nonFair bool, ops ...porcupine.Operation) bool {
	for i := range ops {
		in := ops[i].Input.(rwInput)
		in.nonFair = nonFair
		ops[i].Input = in
	}
	return porcupine.CheckOperations(RWModel, ops)
}

// won and refused are outcomes of a TryLock or TryRLock, unlocked of an unlock.
var won, refused, unlocked = lockOutput{ok: true}, lockOutput{}, lockOutput{}

func TestRWModelRejectsAReaderWithAWriter(t *testing.T) {
	if rwLinearizable(false, rwOp(0, 1, rwWrite, 1, won), rwOp(2, 3, rwRead, 2, won)) {
		t.Fatal("accepted a reader under a writer")
	}
	if rwLinearizable(false, rwOp(0, 1, rwRead, 1, won), rwOp(2, 3, rwWrite, 2, won)) {
		t.Fatal("accepted a writer under a reader")
	}
	if rwLinearizable(false, rwOp(0, 1, rwWrite, 1, won), rwOp(2, 3, rwWrite, 2, won)) {
		t.Fatal("accepted two writers")
	}
	if !rwLinearizable(false, rwOp(0, 1, rwRead, 1, won), rwOp(2, 3, rwRead, 2, won), rwOp(4, 5, rwWrite, 3, refused)) {
		t.Fatal("rejected two readers")
	}
}

// A writer waits behind reader 1 (its wait of 15 fails at 20, so it waited until 17 at
// least). In the fair mode a new reader may be refused meanwhile, and the non-fair mode has no
// reason to refuse one.
func TestRWModelFairModeRefusesReadersWhileAWriterWaits(t *testing.T) {
	h := func() []porcupine.Operation {
		return append(rwWriteWait(2, 20, 2, 15, false),
			rwOp(0, 1, rwRead, 1, won), rwOp(18, 19, rwRead, 3, refused), rwOp(30, 31, rwReadUnlock, 1, unlocked))
	}
	if !rwLinearizable(false, h()...) {
		t.Fatal("the fair mode rejected a reader refused while a writer waits")
	}
	if rwLinearizable(true, h()...) {
		t.Fatal("the non-fair mode accepted a reader refused under readers only")
	}
}

// Reader 3's refusal at 5-6 shows that the writer waits by then (only reader 1 holds), and it
// waits until 17 at least: reader 4 cannot enter at 8-9 in the fair mode. Re-entry of a reader
// that holds is fine.
func TestRWModelFairModeRejectsANewReaderPassingAWaitingWriter(t *testing.T) {
	base := func(extra ...porcupine.Operation) []porcupine.Operation {
		h := append(rwWriteWait(2, 20, 2, 15, false),
			rwOp(0, 1, rwRead, 1, won), rwOp(5, 6, rwRead, 3, refused), rwOp(30, 31, rwReadUnlock, 1, unlocked))
		return append(h, extra...)
	}
	if rwLinearizable(false, base(rwOp(8, 9, rwRead, 4, won))...) {
		t.Fatal("accepted a new reader passing a waiting writer")
	}
	if !rwLinearizable(false, base(rwOp(8, 9, rwReadReenter, 1, won))...) {
		t.Fatal("rejected a re-entry of a reader while a writer waits")
	}
}

// A waiting writer's first attempt takes a free lock, and its success needs a free lock.
func TestRWModelRejectsWaitsThatDisagreeWithTheLock(t *testing.T) {
	if rwLinearizable(false, rwWriteWait(0, 20, 1, 15, false)...) {
		t.Fatal("accepted a wait failing on a free lock")
	}
	if rwLinearizable(false, append(rwWriteWait(2, 10, 2, 5, true), rwOp(0, 1, rwRead, 1, won), rwOp(50, 51, rwReadUnlock, 1, unlocked))...) {
		t.Fatal("accepted a writer's success under a reader")
	}
	if !rwLinearizable(false, append(rwWriteWait(2, 10, 2, 5, true), rwOp(0, 1, rwRead, 1, won), rwOp(3, 4, rwReadUnlock, 1, unlocked))...) {
		t.Fatal("rejected a writer's success after the reader left")
	}
}

// A downgrade is a new read hold taken through the write hold: it needs that hold, and it
// outlives the write side's release, so a writer is refused after it.
func TestRWModelDowngrade(t *testing.T) {
	downgrade := func(call, ret int64, hold, writer int) porcupine.Operation {
		return porcupine.Operation{Input: rwInput{op: rwDowngrade, hold: hold, writer: writer}, Call: call,
			Output: won, Return: ret}
	}
	if !rwLinearizable(false, rwOp(0, 1, rwWrite, 1, won), downgrade(2, 3, 2, 1), rwOp(4, 5, rwWriteUnlock, 1, unlocked),
		rwOp(6, 7, rwRead, 3, won), rwOp(8, 9, rwWrite, 4, refused)) {
		t.Fatal("rejected a downgrade")
	}
	if rwLinearizable(false, rwOp(0, 1, rwWrite, 1, won), downgrade(2, 3, 2, 1), rwOp(4, 5, rwWriteUnlock, 1, unlocked),
		rwOp(6, 7, rwWrite, 4, won)) {
		t.Fatal("accepted a writer while the downgraded reader holds")
	}
	if rwLinearizable(false, rwOp(0, 1, rwWrite, 1, won), rwOp(2, 3, rwWriteUnlock, 1, unlocked), downgrade(4, 5, 2, 1)) {
		t.Fatal("accepted a downgrade through a released write hold")
	}
}
