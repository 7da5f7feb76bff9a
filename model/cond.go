package model

import (
	"fmt"
	"slices"
)

// Cond is the reference model of a condition of an exclusive lock (fair.Condition,
// reentrant.Condition; Java's AbstractQueuedSynchronizer.ConditionObject): a second FIFO queue
// beside the lock's, of waiters that gave the lock up until a Signal.
//
// The lock is a [Fair], shared: the lock's own operations go to it directly, and the
// condition's operations below change it and the condition's queue in one step each, as one
// script does on the server.
//
//   - Wait ends the hold of its holder, whatever its count, as a Release with end does (the
//     lock passes to the live head of its queue), and puts a new hold at the tail of the
//     condition's queue, in the same step: there is no instant at which the waiter neither
//     holds nor waits, so no Signal can come between the two. A Wait by a hold that does not
//     hold changes nothing and fails with [ErrNotOwner].
//   - Signal takes the longest waiting live waiter off the condition's queue and puts it at the
//     tail of the lock's queue, as a fresh waiter (its liveness deadline starts over at now);
//     SignalAll moves every live waiter, in order. When the lock is free, it then goes to the
//     live head of its queue at once (which need not be a moved waiter: one already queued
//     for a lock whose lease ran out comes first).
//   - Poll is a later attempt of a waiter on the condition: it renews its deadline and
//     reports true while it is there, false once a Signal moved it (or it died);
//     Beat is its heartbeat, on either queue; Leave takes it off the condition.
//
// A waiter on the condition is live until its deadline, as on the lock's queue: a dead one is
// out at once, never moved by a Signal and never revived. The condition's queue holds hold ids
// that are on no other queue and hold nothing.
type Cond struct {
	lock    *Fair
	waiters []fairWaiter // live waiters in the order they waited
}

// NewCond returns a condition of lock with nobody waiting. Its waiters live for the lock's
// waiter timeout after their latest Wait, Poll or Beat.
func NewCond(lock *Fair) *Cond {
	lock.made("NewCond")
	return &Cond{lock: lock}
}

// at observes now on the lock and drops the condition's dead waiters.
func (c *Cond) at(op string, now Time) {
	c.lock.at(op, now)
	c.waiters = slices.DeleteFunc(c.waiters, func(w fairWaiter) bool { return now >= w.deadline })
}

func (c *Cond) index(hold string) int {
	return slices.IndexFunc(c.waiters, func(w fairWaiter) bool { return w.hold == hold })
}

// Wait ends the hold of hold and queues next, asking for lease ms once it has the lock back,
// on the condition, in one step. The result is the release's: the waiter of the lock's queue
// the lock went to, if any. If hold does not hold the lock, Wait changes nothing and returns
// ErrNotOwner.
func (c *Cond) Wait(now Time, hold, next string, lease int64) (ReleaseResult, error) {
	const op = "Cond.Wait"
	checkOwner(op, hold)
	checkOwner(op, next)
	deadline(op, now, lease)
	at := deadline(op, now, c.lock.waiterTimeout)
	c.at(op, now)
	if c.lock.holder != hold {
		return ReleaseResult{}, ErrNotOwner
	}
	if next == hold || c.index(next) >= 0 || c.lock.index(next) >= 0 {
		panic(fmt.Sprintf("model: %s with new hold %s, which is queued already or the holder", op, next))
	}
	c.waiters = append(c.waiters, fairWaiter{hold: next, lease: lease, deadline: at})
	return ReleaseResult{Granted: c.lock.handoff(op, now)}, nil
}

// WaitTo is Wait with the reentrant lock's local hand-off (see [Fair.ReleaseTo]): the hold
// ends as ReleaseTo ends it, handing the lock to pick, or letting the riders join the lock's
// queue first, and next joins the condition in the same step.
func (c *Cond) WaitTo(now Time, hold, next string, lease int64, pick string, pickLease int64, over bool,
	riders ...FairRider) (ReleaseResult, error) {
	const op = "Cond.WaitTo"
	checkOwner(op, hold)
	checkOwner(op, next)
	deadline(op, now, lease)
	at := deadline(op, now, c.lock.waiterTimeout)
	c.at(op, now)
	if c.lock.holder != hold {
		return ReleaseResult{}, ErrNotOwner
	}
	if next == hold || next == pick || c.index(next) >= 0 || c.lock.index(next) >= 0 {
		panic(fmt.Sprintf("model: %s with new hold %s, which is queued already, the holder or the pick", op, next))
	}
	r, err := c.lock.ReleaseTo(now, hold, pick, pickLease, over, riders...)
	if err != nil {
		panic(fmt.Sprintf("model: %s: the holder's release failed: %v", op, err))
	}
	c.waiters = append(c.waiters, fairWaiter{hold: next, lease: lease, deadline: at})
	return r, nil
}

// SignalResult is what a Signal or SignalAll did: the waiters it moved onto the lock's queue,
// in order, and the hold the free lock went to then ("" when it was held, or no live waiter
// was queued).
type SignalResult struct {
	Moved   []string
	Granted string
}

// Signal moves the longest waiting live waiter of the condition, if any, onto the tail of the
// lock's queue; SignalAll (all) moves every one, in order.
func (c *Cond) Signal(now Time, all bool) SignalResult {
	const op = "Cond.Signal"
	at := deadline(op, now, c.lock.waiterTimeout)
	c.at(op, now)
	n := min(1, len(c.waiters))
	if all {
		n = len(c.waiters)
	}
	var r SignalResult
	for _, w := range c.waiters[:n] {
		w.deadline = at
		c.lock.queue = append(c.lock.queue, w)
		r.Moved = append(r.Moved, w.hold)
	}
	c.waiters = slices.Delete(c.waiters, 0, n)
	if n > 0 && c.lock.holder == "" && len(c.lock.queue) > 0 {
		r.Granted = c.lock.grant(op, now)
	}
	return r
}

// Poll is a later attempt of hold, a waiter on the condition: while it waits there, its
// deadline starts over and Poll reports true; otherwise (moved by a Signal, dead, or never
// there) it changes nothing and reports false.
func (c *Cond) Poll(now Time, hold string) bool {
	const op = "Cond.Poll"
	checkOwner(op, hold)
	at := deadline(op, now, c.lock.waiterTimeout)
	c.at(op, now)
	i := c.index(hold)
	if i < 0 {
		return false
	}
	c.waiters[i].deadline = at
	return true
}

// Beat results: the waiter is gone (from both queues, and holds nothing), waits (on the
// condition or the lock's queue), or holds the lock.
const (
	BeatGone = iota
	BeatWaiting
	BeatHolds
)

// Beat is the heartbeat of hold, a waiter of a Wait: on the condition it renews its deadline;
// on the lock's queue it is the lock's [Fair.Heartbeat] (the live head of a free lock takes
// it). It returns BeatWaiting, BeatHolds or BeatGone.
func (c *Cond) Beat(now Time, hold string) int {
	const op = "Cond.Beat"
	if c.Poll(now, hold) {
		return BeatWaiting
	}
	c.at(op, now)
	if c.lock.Heartbeat(now, hold) {
		return BeatWaiting
	}
	if c.lock.holder == hold {
		return BeatHolds
	}
	return BeatGone
}

// Leave takes hold off the condition and reports whether it waited there.
func (c *Cond) Leave(now Time, hold string) bool {
	const op = "Cond.Leave"
	checkOwner(op, hold)
	c.at(op, now)
	i := c.index(hold)
	if i < 0 {
		return false
	}
	c.waiters = slices.Delete(c.waiters, i, i+1)
	return true
}

// Waiting returns the live waiters of the condition, longest waiting first.
func (c *Cond) Waiting(now Time) []string {
	c.at("Cond.Waiting", now)
	var holds []string
	for _, w := range c.waiters {
		holds = append(holds, w.hold)
	}
	return holds
}
