package lintest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/redaqs/aqs"
)

// How a call that may wait ends its wait, and what that tells the check.
//
// A call that waits is two steps of the model, its join and its end (see fair.go). Its end,
// when it failed, is the waiter leaving: that happens once the wait is over, never before, so
// the end's window in the history opens then (Wait.endAfter), not at the call:
//
//   - waitBound, TryLock or TryAcquire with aqs.WithWait(d): the bound's timer starts inside
//     the call, so the wait is over no earlier than d after the call;
//   - waitDeadline, a blocking call (Lock, RLock, Acquire) on a context with a deadline d away:
//     its context is done no earlier than d after it was made, just before the call;
//   - waitCancel, a blocking call on a context that another goroutine cancels d after it was
//     made: its context is done no earlier than the cancel, whose time that goroutine takes
//     just before it cancels.
//
// A wait that failed leaves nothing behind when its call returns, unless its clean-up did not
// fit in the engine's bounds (internal/acquire/call.go): once the wait is over, the engine waits
// a moment for the reply of a round trip on its way, and for leaving the queue or giving back
// what was granted, and leaves the rest to run after the call returned (in the background, or
// by a release on its way), so that the call returns near its deadline even when Redis stalls.
// Its Client counts every such call before it returns (core.Runtime.Deferred). So a failed wait
// during which its Client's count did not change is known to have left the queue before it
// returned; for one during which it changed (its own clean-up, or another worker's of the same
// Client), the end is left open (Return openEnd): it may come at any time after its window
// opens, and before the probes that end every run (settleAll) find the primitive free, which
// they must within a bound. Check logs how many ends were left open.
//
// The join of such a call is left open too when the call ended by its context: its context
// ended while its attempt was on its way, and the call stopped waiting for that reply (patience,
// in internal/acquire/call.go), so the attempt may reach Redis after the call returned (it
// waited for a connection, or ran again as EVAL after the script cache was flushed). It then
// takes the lock or queues as any join does, and the clean-up that follows it is the end. A
// call with only a wait bound never stops waiting for an attempt's reply (its context does not
// end), so its join stays within the call.
//
// A blocking call whose context ends may have taken what it asked for in that instant (its
// first attempt took a free lock as its context ended): it gives it back as it leaves and
// reports the context's error. So the models let the join of a call ended by its context
// take a free lock even though the call failed, as they let its end give a grant back;
// a call that never reached Redis (its context was done before it started) is that join and
// end back to back. A call with a wait bound has no such case: its context never ends, and a
// first attempt that takes the lock makes it succeed.
const (
	waitNone     = iota // one attempt, no wait
	waitBound           // a wait bound, aqs.WithWait
	waitDeadline        // a blocking call whose context has a deadline
	waitCancel          // a blocking call whose context is cancelled by another goroutine
)

// waitNames name the kinds of wait in descriptions and logs.
var waitNames = [...]string{"", "wait", "deadline", "cancel"}

// Wait is how one call of a history waits: its kind, how long, and, once the call returned,
// the earliest time its wait can have been over (ns since the run's start), and whether its
// Client left a clean-up to run after a call returned, during the call.
type Wait struct {
	how      int
	d        time.Duration
	endAfter int64
	deferred bool
}

func (w Wait) String() string {
	if w.how == waitNone {
		return "no wait"
	}
	return fmt.Sprintf("%s %v", waitNames[w.how], w.d)
}

// byContext reports whether the call's wait ends with its context: a call that may fail with
// its context's error, having taken what it asked for in that instant and given it back.
func (w Wait) byContext() bool { return w.how == waitDeadline || w.how == waitCancel }

// drawWait draws how a worker's next acquisition waits: half of the time not at all (when
// waits is false, always), otherwise a wait bound, a deadline or a cancellation, each of
// 1-10ms.
func drawWait(rng *rand.Rand, waits bool) Wait {
	if !waits || rng.IntN(2) == 0 {
		return Wait{}
	}
	return Wait{how: waitBound + rng.IntN(3), d: time.Duration(1+rng.IntN(10)) * time.Millisecond}
}

// waitCall is one call that waits as Wait says, in progress.
type waitCall struct {
	w        Wait
	ctx      context.Context
	cancel   context.CancelFunc
	timer    *time.Timer
	cancelAt atomic.Int64 // set by the canceller just before it cancels
	madeAt   int64        // when ctx was made, before its deadline was set
	deferred func() int64 // the Client's count of calls that left a clean-up behind
	before   int64        // that count before the call
}

// startWait returns the context for a call that waits as w says, made just before the call,
// by worker. The caller calls ended once the call returned, and cancel once it is done with
// the context (and the held context made from it).
func startWait(w Wait, worker *Worker) *waitCall {
	now := worker.Now
	c := &waitCall{w: w, madeAt: now(), deferred: worker.deferred}
	c.before = c.deferred()
	switch w.how {
	case waitDeadline:
		c.ctx, c.cancel = context.WithTimeout(context.Background(), w.d)
	case waitCancel:
		c.ctx, c.cancel = context.WithCancel(context.Background())
		c.timer = time.AfterFunc(w.d, func() {
			c.cancelAt.Store(now())
			c.cancel()
		})
	default:
		c.ctx, c.cancel = context.Background(), func() {}
	}
	return c
}

// ended stops the canceller, if it has not fired yet, and returns the call's Wait with the
// earliest time its wait can have been over, and whether the context (and a held context made
// from it) stays live until cancel: not after a deadline, nor once the canceller fired.
func (c *waitCall) ended(callAt int64) (Wait, bool) {
	w := c.w
	w.deferred = c.deferred() != c.before
	switch w.how {
	case waitBound:
		w.endAfter = callAt + w.d.Nanoseconds()
	case waitDeadline:
		w.endAfter = c.madeAt + w.d.Nanoseconds()
		return w, false
	case waitCancel:
		if c.timer.Stop() {
			return w, true // never cancelled: its call did not fail by it
		}
		// Set before the cancel that a call failed by returned on. (A call that succeeded
		// may return before the canceller, which fired, got that far.)
		w.endAfter = c.cancelAt.Load()
		return w, false
	}
	return w, true
}

// contextEnded reports whether err is the error of a call that failed because its context
// ended, as Wait w lets it: a deadline or a cancellation.
func contextEnded(w Wait, err error) bool {
	switch w.how {
	case waitDeadline:
		return errors.Is(err, context.DeadlineExceeded)
	case waitCancel:
		return errors.Is(err, context.Canceled)
	}
	return false
}

// openEnd is the Return of an end that may come after its call returned.
const openEnd = math.MaxInt64

// splitWait returns op, a call that waits as w says, as its two halves: its join over the call
// with input join, and its end with input end, over the call too for a success; for a
// failure, from the moment its wait was over, and up to the call's return unless its Client
// left a clean-up behind meanwhile (see above): then the end is open, and so is the join of a
// call that ended by its context.
func splitWait(op porcupine.Operation, w Wait, ok bool, join, end any) (porcupine.Operation, porcupine.Operation) {
	j, e := op, op
	j.Input, e.Input = join, end
	if !ok {
		e.Call = min(max(op.Call, w.endAfter), op.Return)
		if w.deferred {
			e.Return = openEnd
			if w.byContext() {
				j.Return = openEnd
			}
		}
	}
	return j, e
}

// take makes the acquisition that w describes of l, with the context wc made for it: a
// TryLock, a TryLock with a wait bound, or a Lock. A Lock whose context ended because its
// wait ran out did not get the lock, with no error.
func take(l Locker, wc *waitCall, w Wait) (held context.Context, ok bool, err error) {
	switch w.how {
	case waitNone:
		return l.TryLock(wc.ctx)
	case waitBound:
		return l.TryLock(wc.ctx, aqs.WithWait(w.d))
	}
	held, err = l.Lock(wc.ctx)
	ok = err == nil
	if contextEnded(w, err) {
		err = nil // its wait ran out
	}
	return held, ok, err
}
