package model

import (
	"fmt"
	"slices"
)

// Fair is the reference model of one FIFO fair lock (the fair/ package;
// Redisson's RedissonFairLock): a lock with a wait queue, whose free lock
// goes to the longest-waiting live waiter, and to a newcomer only when no
// live waiter is queued.
//
// # Holds
//
// Every operation names a hold: the id the real lock makes fresh for each
// Lock or TryLock call. One hold id is one attempt to lock and, once it
// succeeds, one hold; the holder re-enters with [Fair.Reenter], never with
// another [Fair.Attempt]. At any time the lock has at most one holder, with a
// hold count and an expiry. A hold lasts until it is released or its lease
// runs out: at now >= its expiry it is gone, as a Redis key whose PEXPIRE
// deadline has passed.
//
// # The wait queue
//
// A hold that fails an Attempt made with enqueue joins the queue at its tail,
// unless it is already queued, in which case it keeps its place: arrival
// order is the order of the first enqueueing attempt. Each waiter carries the
// lease it asked for in its latest Attempt and a liveness deadline, which
// every enqueueing Attempt and every [Fair.Heartbeat] resets to now plus the
// waiter timeout given to [NewFair]. The real Client heartbeats its waiters
// in batches while they wait (DESIGN.md, decision 6).
//
// A waiter is dead at now >= its deadline, and from that instant it is out
// of the queue, wherever it stood: it is never granted the lock, never
// counted by [Fair.Queue] or [Fair.Position], and never revived by a late
// Heartbeat. If its hold attempts again, that is a new arrival at the tail.
// The queue is therefore a function of the calls and their times alone.
//
// The Redis implementation may drop dead entries lazily, popping dead
// waiters off the head of its list before every operation that looks at the
// queue, so that each operation stays O(log N); a dead entry further back is
// dropped when it reaches the head. That is invisible here as long as the
// implementation treats a dead entry it has not yet dropped as absent: the
// head it grants is always the first live one (dead heads are popped first),
// a heartbeat does not refresh a dead entry, a dead hold that attempts again
// is removed from where it stands and appended at the tail (a rare O(N)
// LREM), and Position skips dead entries. This model drops every dead
// waiter at once, at the first call that observes its deadline, which gives
// the same replies.
//
// # Fairness
//
// A lock that is free goes only to the live head of the queue, or, when no
// live waiter is queued, to any hold that attempts. A newcomer never acquires
// while a live waiter is queued, even when the lock is free (no barging), so
// grants follow arrival order among the waiters that stay alive.
//
// # Handoff
//
// When the holder's count reaches zero (Release, a GiveUp by a hold that was
// granted the lock, ForceRelease), and when the head of the queue gives up
// while the lock is free and so reserved for it, the lock passes in the same
// step to the live head of the queue, if there is one: the head becomes the
// holder with count 1 and a lease of what it asked for, counted from now, and
// leaves the queue. The reply names the granted hold, so the real lock can
// notify that waiter alone. The granted waiter learns of its hold from that
// notification or, if the message is lost, from its next Attempt, which
// reports the hold without changing it (adoption).
//
// A hold whose lease runs out is not handed off: no operation runs on the
// server at that instant. The lock is then free but still reserved for the
// live head, which takes it at its next Attempt; the real waiter retries
// when its fallback timer, the Remaining of its last Attempt, fires. If the
// head never comes (its process died), it dies at its deadline and the next
// waiter, whose Remaining pointed at that deadline, takes its place.
//
// # Time and misuse
//
// Every method but WaiterTimeout takes the current logical time and panics
// if it is earlier than a time already passed to this model. Queries drop
// expired holds and dead waiters as every other call does; that never
// changes a later reply, since expiry and death depend on time alone. Misuse
// that only a buggy caller commits (an empty hold, a non-positive lease, a
// zero Fair not made by NewFair) panics.
type Fair struct {
	clock
	waiterTimeout int64 // ms a waiter stays live after its latest attempt or heartbeat

	holder    string // "" when free
	count     int    // hold count of holder, > 0 while held
	expiresAt Time   // the hold is gone at this time

	queue []fairWaiter // live waiters in arrival order, after every observe
}

// fairWaiter is one entry of the wait queue.
type fairWaiter struct {
	hold     string
	lease    int64 // ms of lease asked for in the latest Attempt
	deadline Time  // dead at now >= deadline
}

// NewFair returns a free fair lock with an empty queue whose waiters stay
// live for waiterTimeout milliseconds after their latest Attempt or
// Heartbeat. It panics if waiterTimeout is not positive.
func NewFair(waiterTimeout int64) *Fair {
	if waiterTimeout <= 0 {
		panic(fmt.Sprintf("model: NewFair with non-positive waiter timeout %d ms", waiterTimeout))
	}
	return &Fair{waiterTimeout: waiterTimeout}
}

// WaiterTimeout returns the waiter timeout given to NewFair, in milliseconds.
func (m *Fair) WaiterTimeout() int64 {
	return m.waiterTimeout
}

// FairResult is the reply of Attempt.
type FairResult struct {
	// Acquired reports whether the caller holds the lock after the call.
	Acquired bool
	// Count is the caller's hold count after the call when Acquired, else 0.
	// A new hold has count 1; an adopted handoff reports the hold as it is.
	Count int
	// Queued reports whether the caller is a live waiter after the call.
	// It is false when Acquired.
	Queued bool
	// Remaining is, when the attempt fails, the milliseconds (always >= 1)
	// until the lock can change hands without a handoff, and so the longest
	// a waiter that hears no notification should wait before it attempts
	// again: the holder's remaining lease if another hold holds the lock, or,
	// if the lock is free but reserved for a live waiter ahead of the caller,
	// the time until that head's liveness deadline. It is 0 when Acquired.
	Remaining int64
}

// ReleaseResult is the reply of a successful Release.
type ReleaseResult struct {
	// Count is the caller's hold count after the call; 0 means its hold
	// ended.
	Count int
	// Granted is, when the hold ended, the waiter the lock was handed to
	// (now its holder with count 1), or "" if no live waiter was queued and
	// the lock is free. It is "" while the caller still holds the lock.
	Granted string
}

// GiveUpResult is the reply of GiveUp. The zero value means the hold was
// neither queued nor holding: nothing changed.
type GiveUpResult struct {
	// WasQueued reports that the hold was a live waiter and left the queue.
	WasQueued bool
	// WasHolder reports that the hold held the lock, typically by a handoff
	// it had not yet adopted, and that its hold ended.
	WasHolder bool
	// Granted is the waiter the lock was handed to, when the lock passed on:
	// after WasHolder, or after WasQueued by the head of a free lock. It is
	// "" when nothing was handed off; the lock is then free if WasHolder.
	Granted string
}

// at moves the model to time now and applies expiry: a hold whose lease has
// run out is gone and every dead waiter leaves the queue. Called first by
// every method, so the fields describe the lock at the current time; lazy
// expiry gives the same replies as eager expiry because time never goes
// backwards.
func (m *Fair) at(op string, now Time) {
	m.made(op)
	m.observe(op, now)
	if m.holder != "" && now >= m.expiresAt {
		m.free()
	}
	m.queue = slices.DeleteFunc(m.queue, func(w fairWaiter) bool { return now >= w.deadline })
}

// made panics on a Fair not made by NewFair, whose waiters would die the
// instant they queued.
func (m *Fair) made(op string) {
	if m.waiterTimeout <= 0 {
		panic("model: " + op + " on a Fair not made by NewFair")
	}
}

func (m *Fair) free() {
	m.holder, m.count, m.expiresAt = "", 0, 0
}

// index returns the queue position of hold, -1 if it is not a live waiter.
func (m *Fair) index(hold string) int {
	return slices.IndexFunc(m.queue, func(w fairWaiter) bool { return w.hold == hold })
}

// remaining returns the holder's remaining lease, 0 when free.
func (m *Fair) remaining(now Time) int64 {
	if m.holder == "" {
		return 0
	}
	return int64(m.expiresAt - now)
}

// wait returns, for a failed attempt, how long until the lock can change
// hands without a handoff: the holder's remaining lease, or, when the lock
// is free and reserved for the live head, the head's remaining liveness.
func (m *Fair) wait(now Time) int64 {
	if m.holder != "" {
		return m.remaining(now)
	}
	return int64(m.queue[0].deadline - now)
}

// handoff ends the current hold and passes the lock to the live head of the
// queue, if any, returning the granted hold ("" when the lock is left free).
// The queue holds live waiters only (at has run), so the head is live.
func (m *Fair) handoff(op string, now Time) string {
	m.free()
	if len(m.queue) == 0 {
		return ""
	}
	return m.grant(op, now)
}

// grant gives the lock to the live head of the queue. Its lease runs, at first, only to the
// waiter's liveness deadline when that is sooner than the lease it asked for: a waiter that
// died just before its turn holds the lock no longer than it would have stalled the queue (a
// live one extends its lease with a renewal as soon as it has the grant).
func (m *Fair) grant(op string, now Time) string {
	head := m.queue[0]
	at := deadline(op, now, head.lease)
	if head.deadline < at {
		at = head.deadline
	}
	m.queue = slices.Delete(m.queue, 0, 1)
	m.holder, m.count, m.expiresAt = head.hold, 1, at
	return head.hold
}

// Attempt makes one attempt by hold to take the lock for lease milliseconds:
// what one run of the acquire script does on the server.
//
//   - If hold already holds the lock (it was handed the lock and has not
//     seen the notification, or it asks again), the reply reports its hold
//     and nothing changes: the count and the expiry stay as they are.
//     Attempt never re-enters; that is Reenter's job.
//   - If the lock is free (never held, released, forced open, or its lease
//     has run out) and the queue has no live waiter, or its live head is
//     hold, hold gets a new hold with count 1 and expiry now+lease, and
//     leaves the queue if it was in it.
//   - Otherwise the attempt fails. With enqueue, hold joins the tail of the
//     queue if it is not a live waiter already (an existing waiter keeps its
//     place), its liveness deadline becomes now plus the waiter timeout, and
//     the lease it asked for becomes lease. Without enqueue (TryLock with no
//     wait) nothing changes, not even the deadline of a hold that is queued.
//
// In particular a hold that is not the live head never acquires while a live
// waiter is queued, even when the lock is free.
//
// Attempt panics if hold is empty or lease is not positive.
func (m *Fair) Attempt(now Time, hold string, lease int64, enqueue bool) FairResult {
	const op = "Fair.Attempt"
	checkOwner(op, hold)
	m.made(op)
	at := deadline(op, now, lease)
	var waiterDeadline Time
	if enqueue {
		waiterDeadline = deadline(op, now, m.waiterTimeout)
	}
	m.at(op, now)

	if m.holder == hold {
		return FairResult{Acquired: true, Count: m.count}
	}
	i := m.index(hold)
	if m.holder == "" && (len(m.queue) == 0 || i == 0) {
		if i == 0 {
			m.queue = slices.Delete(m.queue, 0, 1)
		}
		m.holder, m.count, m.expiresAt = hold, 1, at
		return FairResult{Acquired: true, Count: 1}
	}
	if enqueue {
		if i < 0 {
			m.queue = append(m.queue, fairWaiter{hold: hold})
			i = len(m.queue) - 1
		}
		m.queue[i].lease, m.queue[i].deadline = lease, waiterDeadline
	}
	return FairResult{Queued: i >= 0, Remaining: m.wait(now)}
}

// Heartbeat keeps a waiter alive: if hold is a live waiter, its liveness
// deadline becomes now plus the waiter timeout and Heartbeat reports true;
// its place in the queue does not change.
//
// Otherwise Heartbeat reports false and changes nothing. False means hold is
// no longer waiting: it was granted the lock (it is the holder; its next
// Attempt adopts the hold), it gave up, it never queued, or its deadline
// passed (at now >= deadline a waiter is gone and a heartbeat does not
// revive it; its hold must attempt again and queue at the tail).
//
// When hold is the live head of a free lock (its holder's lease ran out, or the waiter it was
// handed to died), the heartbeat grants it the lock, as a release would have: Heartbeat then
// reports false, and Holder names hold.
//
// Heartbeat panics if hold is empty.
func (m *Fair) Heartbeat(now Time, hold string) bool {
	const op = "Fair.Heartbeat"
	checkOwner(op, hold)
	m.made(op)
	at := deadline(op, now, m.waiterTimeout)
	m.at(op, now)
	i := m.index(hold)
	if i < 0 {
		return false
	}
	m.queue[i].deadline = at
	if i == 0 && m.holder == "" {
		m.grant(op, now) // the live head of a free lock takes it (see Fair.Heartbeat)
		return false
	}
	return true
}

// Reenter re-enters the lock held by hold: the count goes up by one and the
// expiry becomes now+lease if that is later; a re-entry never shortens a
// lease, and lease 0 leaves the expiry alone (as lock_reenter.lua, shared
// with the reentrant lock). It reports false and changes nothing if hold does
// not hold the lock (free, expired, or held by another hold). Re-entry never
// looks at the queue: the holder is not a waiter.
//
// Reenter panics if hold is empty or lease is negative.
func (m *Fair) Reenter(now Time, hold string, lease int64) bool {
	const op = "Fair.Reenter"
	checkOwner(op, hold)
	if lease < 0 {
		panic(fmt.Sprintf("model: %s with negative lease %d ms", op, lease))
	}
	var at Time
	if lease > 0 {
		at = deadline(op, now, lease)
	}
	m.at(op, now)
	if m.holder != hold {
		return false
	}
	m.count++
	if at > m.expiresAt {
		m.expiresAt = at
	}
	return true
}

// Renew sets the expiry of hold's hold to now+lease and reports true, if hold
// holds the lock; the count does not change. A lease of 0 only checks. A
// renewal may shorten the lease; the latest lease asked for wins. If hold
// does not hold the lock Renew reports false and changes nothing: a lost hold
// is never revived. Renewing never hands the lock off.
//
// Renew panics if hold is empty or lease is negative.
func (m *Fair) Renew(now Time, hold string, lease int64) bool {
	const op = "Fair.Renew"
	checkOwner(op, hold)
	var at Time
	if lease != 0 {
		at = deadline(op, now, lease)
	}
	m.at(op, now)
	if m.holder != hold {
		return false
	}
	if lease != 0 {
		m.expiresAt = at
	}
	return true
}

// Release gives up one acquisition by hold, or, with end, the whole hold
// whatever its count. Without end it counts one down, but never below one:
// a hold with count 1 stays held (the caller's own count is the one that
// decides which release ends the hold, and it ends it with end). A release
// that leaves the hold held changes nothing else; the expiry stands.
//
// When the hold ends and the lock is handed off in
// the same step: the live head of the queue, if any, becomes the holder with
// count 1 and expiry now plus the lease it asked for, and leaves the queue;
// the reply names it in Granted. With no live waiter the lock is free.
//
// If hold does not hold the lock (free, its hold expired, or another hold
// holds it) Release returns ErrNotOwner and changes nothing; an expired hold
// in particular hands nothing off.
//
// Release panics if hold is empty.
func (m *Fair) Release(now Time, hold string, end bool) (ReleaseResult, error) {
	const op = "Fair.Release"
	checkOwner(op, hold)
	m.at(op, now)
	if m.holder != hold {
		return ReleaseResult{}, ErrNotOwner
	}
	if !end {
		m.count = max(m.count-1, 1)
		return ReleaseResult{Count: m.count}, nil
	}
	return ReleaseResult{Granted: m.handoff(op, now)}, nil
}

// GiveUp is a waiter's cleanup when it stops waiting (its context ended or
// its wait bound passed): it leaves nothing behind.
//
//   - If hold holds the lock, which for a waiter means the lock was handed
//     to it in the same instant and it has not adopted it, its hold ends
//     whatever its count, and the lock is handed off exactly as by a Release
//     with end.
//   - If hold is a live waiter, it leaves the queue, wherever it stands; the
//     waiters behind it move up and keep their order. If it was the head and
//     the lock is free, the lock was reserved for it, and that reservation
//     passes on: the new live head, if any, is handed the lock as by a
//     Release, so it need not wait for its fallback timer (as x/sync's
//     semaphore notifies the next waiter when the front one cancels).
//   - Otherwise (hold is not queued, or its waiter is dead, or its hold
//     expired) nothing changes.
//
// GiveUp panics if hold is empty.
func (m *Fair) GiveUp(now Time, hold string) GiveUpResult {
	const op = "Fair.GiveUp"
	checkOwner(op, hold)
	m.at(op, now)
	if m.holder == hold {
		return GiveUpResult{WasHolder: true, Granted: m.handoff(op, now)}
	}
	i := m.index(hold)
	if i < 0 {
		return GiveUpResult{}
	}
	m.queue = slices.Delete(m.queue, i, i+1)
	if i == 0 && m.holder == "" {
		return GiveUpResult{WasQueued: true, Granted: m.handoff(op, now)}
	}
	return GiveUpResult{WasQueued: true}
}

// ForceRelease ends the current hold, whoever has it and whatever its
// count, and hands the lock to the live head of the queue exactly as a
// Release with end does. It reports whether the lock was held (an expired
// hold does not count) and the granted hold, "" if the lock is left free.
//
// On a lock that is not held ForceRelease changes nothing and grants
// nobody, even if a live waiter is queued: the lock is then already free
// and reserved for that waiter, which takes it at its next Attempt, so
// there is nothing to force (and fair_force_release.lua need not look at
// the queue). The queue itself is never touched; waiters leave it only by
// being granted, giving up or dying.
func (m *Fair) ForceRelease(now Time) (held bool, granted string) {
	const op = "Fair.ForceRelease"
	m.at(op, now)
	if m.holder == "" {
		return false, ""
	}
	return true, m.handoff(op, now)
}

// Holder returns the current hold and its count; ok is false, with "" and 0,
// when the lock is free (even if it is reserved for the head of the queue).
func (m *Fair) Holder(now Time) (hold string, count int, ok bool) {
	m.at("Fair.Holder", now)
	return m.holder, m.count, m.holder != ""
}

// HoldCount returns hold's hold count: 0 if hold does not hold the lock.
func (m *Fair) HoldCount(now Time, hold string) int {
	m.at("Fair.HoldCount", now)
	if hold == "" || m.holder != hold {
		return 0
	}
	return m.count
}

// IsLocked reports whether any hold holds the lock.
func (m *Fair) IsLocked(now Time) bool {
	m.at("Fair.IsLocked", now)
	return m.holder != ""
}

// RemainingLease returns the milliseconds until the current hold expires
// (always >= 1); ok is false, with 0, when the lock is free.
func (m *Fair) RemainingLease(now Time) (ms int64, ok bool) {
	m.at("Fair.RemainingLease", now)
	return m.remaining(now), m.holder != ""
}

// Queue returns the live waiters in arrival order, head first; a new slice
// on every call, empty (nil) when nobody waits. The holder is never in it.
func (m *Fair) Queue(now Time) []string {
	m.at("Fair.Queue", now)
	var holds []string
	for _, w := range m.queue {
		holds = append(holds, w.hold)
	}
	return holds
}

// Position returns hold's place among the live waiters, 0 for the head, or
// -1 if hold is not a live waiter. Dead waiters ahead of it do not count.
func (m *Fair) Position(now Time, hold string) int {
	m.at("Fair.Position", now)
	return m.index(hold)
}
