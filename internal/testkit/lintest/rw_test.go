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
	return rwWait(true, call, ret, hold, wait, ok)
}

// rwWait is a TryLock (write) or TryRLock with a wait as RunRW records it: its join and its
// end.
func rwWait(write bool, call, ret int64, hold int, wait time.Duration, ok bool) []porcupine.Operation {
	w := Wait{how: waitBound, d: wait, endAfter: call + wait.Nanoseconds()}
	return rwSplit(write, call, ret, hold, w, ok)
}

// rwLockUntil is a Lock (write) or RLock whose context ends at end, as RunRW records it.
func rwLockUntil(write bool, call, ret, end int64, hold int, ok bool) []porcupine.Operation {
	w := Wait{how: waitCancel, d: time.Duration(end - call), endAfter: end}
	return rwSplit(write, call, ret, hold, w, ok)
}

func rwSplit(write bool, call, ret int64, hold int, w Wait, ok bool) []porcupine.Operation {
	join := rwInput{op: rwReadJoin, hold: hold, wait: w}
	if write {
		join.op = rwWriteJoin
	}
	end := join
	end.op++ // its end
	j, e := splitWait(porcupine.Operation{Call: call, Return: ret}, w, ok, join, end)
	j.Output, e.Output = lockOutput{ok: ok}, lockOutput{ok: ok}
	return []porcupine.Operation{j, e}
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

// A waiter, reader or writer, granted by a release in the instant its wait ran out held the
// lock until it left, giving it up: a newcomer refused meanwhile, when no reported holder had
// the lock, is legal (a specification without the queue, in which a failed wait never held,
// rejected it). Once the waiter's call has returned, the lock is free, and such a refusal is
// not legal.
func TestRWModelAWaiterGrantedAsItsWaitRanOutHeldTheLockUntilItLeft(t *testing.T) {
	for _, write := range []bool{true, false} {
		h := func(ret int64) []porcupine.Operation {
			return append(rwWait(write, 2, ret, 2, 10, false), // its wait runs out at 12
				rwOp(0, 1, rwWrite, 1, won), rwOp(10, 11, rwWriteUnlock, 1, unlocked), // grants it
				rwOp(14, 15, rwWrite, 3, refused))
		}
		for _, nonFair := range []bool{false, true} {
			if !rwLinearizable(nonFair, h(30)...) {
				t.Errorf("rejected a newcomer refused while a waiter (write %v, non-fair %v) gave up its grant", write, nonFair)
			}
			if rwLinearizable(nonFair, h(13)...) {
				t.Errorf("accepted a newcomer refused after the waiter (write %v, non-fair %v) left", write, nonFair)
			}
		}
	}
}

// The readers queued behind a writer are granted by its release, together, and keep writers
// out until they leave; a reader's wait cannot succeed before the writer has left.
func TestRWModelReadersQueuedBehindAWriterAreGrantedByItsRelease(t *testing.T) {
	base := func(extra ...porcupine.Operation) []porcupine.Operation {
		h := []porcupine.Operation{rwOp(0, 1, rwWrite, 1, won), rwOp(10, 11, rwWriteUnlock, 1, unlocked),
			rwOp(30, 31, rwReadUnlock, 2, unlocked), rwOp(32, 33, rwReadUnlock, 3, unlocked)}
		h = append(h, rwWait(false, 2, 20, 2, 15, true)...)
		h = append(h, rwWait(false, 3, 20, 3, 15, true)...)
		return append(h, extra...)
	}
	if !rwLinearizable(false, base(rwOp(21, 22, rwWrite, 4, refused), rwOp(40, 41, rwWrite, 5, won))...) {
		t.Fatal("rejected two readers granted by the writer's release, holding until they unlock")
	}
	if rwLinearizable(false, base(rwOp(21, 22, rwWrite, 4, won))...) {
		t.Fatal("accepted a writer while the granted readers hold")
	}
	if rwLinearizable(false, append(rwWait(false, 2, 9, 2, 15, true), rwOp(0, 1, rwWrite, 1, won),
		rwOp(10, 11, rwWriteUnlock, 1, unlocked))...) {
		t.Fatal("accepted a reader's wait that succeeded while the writer held")
	}
}

// A Lock whose context ended may have taken the free lock in that instant and given it back
// as it failed: a reader refused meanwhile is legal, a writer that gets in before the failed
// Lock's context ended is not.
func TestRWModelLetsALockEndedByItsContextHoldUntilThen(t *testing.T) {
	failed := rwLockUntil(true, 0, 100, 50, 1, false)
	if !rwLinearizable(false, append(failed, rwOp(20, 30, rwRead, 2, refused))...) {
		t.Fatal("rejected a reader refused while a failing Lock held")
	}
	if rwLinearizable(false, append(failed, rwOp(20, 30, rwRead, 2, refused), rwOp(40, 45, rwWrite, 3, won))...) {
		t.Fatal("accepted a writer before the failed Lock's context ended")
	}
}
