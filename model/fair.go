package model

import (
	"fmt"
	"slices"
	"strings"
)

// Fair is the reference model of one FIFO fair lock (the fair/ package;
// Redisson's RedissonFairLock): a lock with a wait queue, whose free lock
// goes to the longest-waiting live waiter, and to a newcomer only when no
// live waiter is queued.
//
// # Holds
//
// Every operation names a hold: the id the real lock makes fresh for each
// Lock or TryLock call. One hold id is one call's attempts to lock (its
// first, [Fair.Attempt], then [Fair.AttemptAgain] while it waits) and, once
// it succeeds, one hold; the holder re-enters with [Fair.Reenter], never with
// another attempt. At any time the lock has at most one holder, with a
// hold count and an expiry. A hold lasts until it is released or its lease
// runs out: at now >= its expiry it is gone, as a Redis key whose PEXPIRE
// deadline has passed.
//
// # The wait queue
//
// A hold's first Attempt that fails with enqueue joins the queue at its
// tail; arrival order is the order of those first attempts. A queue entry is
// the hold and the lease it asked for, together (the real queue's member is
// the string "<hold> <lease>"), and a liveness deadline, which every later
// enqueueing attempt ([Fair.AttemptAgain]) and every [Fair.Heartbeat] resets
// to now plus the waiter timeout given to [NewFair]; the entry keeps its
// place. The real Client heartbeats its waiters in batches while they wait
// (DESIGN.md, decision 6).
//
// A waiter is dead at now >= its deadline, and from that instant it is out
// of the queue, wherever it stood: it is never granted the lock, never
// counted by [Fair.Queue] or [Fair.Position], and never revived, neither by
// a late Heartbeat nor by a later attempt. A later attempt of a hold that is
// not a live waiter (it died, gave up, never queued, or was granted the lock
// and lost it since) is Dropped: it changes nothing, and the real caller
// starts over under a new hold id, which is a new arrival at the tail. So no
// hold id is ever queued twice, and the queue is a function of the calls and
// their times alone.
//
// The Redis implementation drops dead entries lazily, popping dead waiters
// and the entries of waiters that left (ghosts) off the head of its list
// before every operation that looks at the queue, so that each operation
// stays O(log N); a dead entry further back is dropped when it reaches the
// head. That is invisible here as long as the implementation treats an entry
// it has not yet dropped as absent: the head it grants is always the first
// live one, a heartbeat or a later attempt does not refresh a dead entry,
// and Position skips dead entries. This model drops every dead waiter at
// once, at the first call that observes its deadline, which gives the same
// replies.
//
// # Fairness
//
// A lock that is free goes only to the live head of the queue, or, when no
// live waiter is queued, to any hold that attempts. A newcomer never acquires
// while a live waiter is queued, even when the lock is free (no barging), so
// grants follow arrival order among the waiters that stay alive, but for the
// reentrant lock's local hand-off (below).
//
// # Handoff
//
// When the hold ends (a Release with end, a ReleaseTo that does not hand the
// lock to its pick, a GiveUp by a hold that was granted the lock,
// ForceRelease), and when the head of the queue
// gives up while the lock is free and so reserved for it, the lock passes in
// the same step to the live head of the queue, if there is one: the head
// becomes the holder with count 1 and a lease of what it asked for, counted
// from now (cut at its liveness deadline), and leaves the queue. The reply names the granted hold, so the real lock can
// notify that waiter alone. The granted waiter learns of its hold from that
// notification or, if the message is lost, from its next attempt
// ([Fair.AttemptAgain]), which reports the hold without changing it
// (adoption).
//
// A hold whose lease runs out is not handed off: no operation runs on the
// server at that instant. The lock is then free but still reserved for the
// live head, which takes it at its next attempt or heartbeat, or is handed
// it by the next attempt of any other hold, as by a release; the real
// waiters attempt when their fallback timer, the Remaining of their last
// Attempt, fires. A head that never comes (its process died) holds the
// handed lock until its liveness deadline, where its grant's lease ends.
//
// # The local hand-off
//
// The reentrant lock shares this lock's scripts and queue, and adds one
// thing, in its release: [Fair.ReleaseTo] may hand the lock straight to a
// waiter of the releaser's own Client (the pick), queued or not, passing the
// queue, unless the releaser's Client had its streak of such hand-offs
// (over) and a live waiter of another Client is at the queue's head. The fair lock never picks, but both
// locks' releases carry riders: new waiters of the releaser's Client that
// join the queue's tail with the release, as their first attempts would
// have, before the lock is handed to the live head. So the pick is the only
// way past a live waiter; an attempt never barges.
//
// # Time and misuse
//
// Every method takes the current logical time and panics if it is earlier
// than a time already passed to this model. Queries drop
// expired holds and dead waiters as every other call does; that never
// changes a later reply, since expiry and death depend on time alone. Misuse
// that only a buggy caller commits panics, and a call that panics changes
// nothing: an empty hold, a non-positive lease, a zero Fair not made by
// NewFair, and what the real lock never sends because its hold ids are fresh
// for every call: a first Attempt (or a rider) of a hold that is a live
// waiter already, which the script would queue twice, and a later attempt
// or a pick that names a live waiter with another lease than the one it
// queued with, which the script would not find.
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
	// Dropped reports that a later attempt ([Fair.AttemptAgain]) that was to
	// keep its place found none: hold is not a live waiter (it died, left,
	// never queued, or was granted the lock and lost it since). Nothing
	// changed, and the real caller starts over under a new hold id.
	// Remaining is 0 then.
	Dropped bool
	// Remaining is, when the attempt fails, the milliseconds (always >= 1)
	// until the lock can change hands without a handoff, and so the longest
	// a waiter that hears no notification should wait before it attempts
	// again: the holder's remaining lease (the lock is held: a lock the
	// attempt found free and kept for a live waiter ahead of the caller was
	// handed to that waiter, see Granted). It is 0 when Acquired.
	Remaining int64
	// Granted is the live head of the queue that the attempt handed the lock
	// to, as a release would have: the attempt found the lock free (its
	// holder's lease ran out) and kept for that waiter. "" otherwise.
	Granted string
}

// ReleaseResult is the reply of a successful Release.
type ReleaseResult struct {
	// Count is the caller's hold count after the call; 0 means its hold
	// ended.
	Count int
	// Granted is, when the hold ended, the hold the lock was handed to (now
	// its holder with count 1): the live head of the queue, or the pick of
	// ReleaseTo. It is "" if the lock is free, and while the caller still
	// holds it.
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

// Attempt makes the first attempt of hold, a hold id the lock has not
// queued, to take the lock for lease milliseconds: what one run of the
// acquire script with its "first" flag set does on the server.
//
//   - If hold already holds the lock, the reply reports its hold and nothing
//     changes: the count and the expiry stay as they are. Attempt never
//     re-enters; that is Reenter's job.
//   - If the lock is free (never held, released, forced open, or its lease
//     has run out) and the queue has no live waiter, hold gets a new hold
//     with count 1 and expiry now+lease.
//   - Otherwise the attempt fails. With enqueue, hold joins the tail of the
//     queue with this lease and a liveness deadline of now plus the waiter
//     timeout. Without enqueue (TryLock with no wait) nothing changes.
//
// In particular a newcomer never acquires while a live waiter is queued, even
// when the lock is free.
//
// Attempt panics if hold is empty, lease is not positive, or hold is a live
// waiter already: its attempts after the first are [Fair.AttemptAgain]'s.
func (m *Fair) Attempt(now Time, hold string, lease int64, enqueue bool) FairResult {
	const op = "Fair.Attempt"
	return m.attempt(op, now, hold, lease, enqueue, true)
}

// AttemptAgain makes a later attempt of hold, whose first was [Fair.Attempt]
// (or the release that carried it as a rider): what one run of the acquire
// script without its "first" flag does on the server. It is Attempt, but for
// where a failed attempt with enqueue stands in the queue:
//
//   - If hold holds the lock (it was handed the lock and has not seen the
//     notification), the reply reports its hold and nothing changes.
//   - If the lock is free and the queue has no live waiter, or its live head
//     is hold, hold gets a new hold with count 1 and expiry now+lease, and
//     leaves the queue if it was in it.
//   - Otherwise the attempt fails. With enqueue, a live waiter keeps its
//     place, and its liveness deadline becomes now plus the waiter timeout;
//     any other hold is Dropped, and nothing changes (it is never queued
//     again under this id: see the type's doc). Without enqueue nothing
//     changes, not even the deadline of a hold that is queued.
//
// AttemptAgain panics if hold is empty, lease is not positive, or hold is a
// live waiter that queued with another lease.
func (m *Fair) AttemptAgain(now Time, hold string, lease int64, enqueue bool) FairResult {
	const op = "Fair.AttemptAgain"
	return m.attempt(op, now, hold, lease, enqueue, false)
}

// attempt is Attempt (first) or AttemptAgain.
func (m *Fair) attempt(op string, now Time, hold string, lease int64, enqueue, first bool) FairResult {
	checkOwner(op, hold)
	m.made(op)
	at := deadline(op, now, lease)
	var waiterDeadline Time
	if enqueue {
		waiterDeadline = deadline(op, now, m.waiterTimeout)
	}
	if w, ok := m.liveEntry(op, now, hold); ok {
		if first {
			panic(fmt.Sprintf("model: %s of %s, which is a live waiter already (the script would queue it twice)", op, hold))
		}
		if w.lease != lease {
			panic(fmt.Sprintf("model: %s of %s with lease %d ms; it queued with %d ms (the script would not find it)",
				op, hold, lease, w.lease))
		}
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
	var granted string
	if m.holder == "" {
		// Free and kept for the live head, another hold: handed to it now (see Handoff in
		// the type's doc).
		granted = m.grant(op, now)
		i = m.index(hold)
	}
	if enqueue {
		switch {
		case i >= 0:
			m.queue[i].deadline = waiterDeadline
		case first:
			m.queue = append(m.queue, fairWaiter{hold: hold, lease: lease, deadline: waiterDeadline})
			i = len(m.queue) - 1
		default:
			return FairResult{Dropped: true, Granted: granted}
		}
	}
	return FairResult{Queued: i >= 0, Remaining: m.remaining(now), Granted: granted}
}

// liveEntry returns hold's queue entry when hold is a live waiter at now,
// changing nothing: the preconditions of a call are checked with it before
// the call changes anything. It panics, as every call does, if now is before
// the model's time.
func (m *Fair) liveEntry(op string, now Time, hold string) (fairWaiter, bool) {
	if m.started && now < m.now {
		m.observe(op, now) // panics: time went backwards
	}
	for _, w := range m.queue {
		if w.hold == hold && now < w.deadline {
			return w, true
		}
	}
	return fairWaiter{}, false
}

// Heartbeat keeps a waiter alive: if hold is a live waiter, its liveness
// deadline becomes now plus the waiter timeout and Heartbeat reports true;
// its place in the queue does not change.
//
// Otherwise Heartbeat reports false and changes nothing. False means hold is
// no longer waiting: it was granted the lock (it is the holder; its next
// attempt adopts the hold), it gave up, it never queued, or its deadline
// passed (at now >= deadline a waiter is gone and a heartbeat does not
// revive it; its next attempt is Dropped, and the real caller starts over
// under a new hold id, at the tail).
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
// When the hold ends the lock is handed off in the same step: the live head
// of the queue, if any, becomes the holder with count 1 and expiry now plus
// the lease it asked for (cut at its liveness deadline), and leaves the
// queue; the reply names it in Granted. With no live waiter the lock is
// free.
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

// FairRider is a new waiter that joins the queue with a release (see
// [Fair.ReleaseTo]): its hold and the lease it asks for, its queue member.
type FairRider struct {
	Hold  string
	Lease int64
}

// ReleaseTo ends hold's hold whatever its count, as Release with end does,
// with the hand-off within the releaser's Client (see the type's doc): what
// one run of the release script with its pick, over flag and riders does.
//
//   - If pick is not "" and either over is false or the queue's live head,
//     if any, is a waiter of the releaser's Client, the lock goes to pick: it becomes the holder with count 1 and
//     expiry now plus lease (the lease its queue member names, not cut at a
//     liveness deadline: its Client is alive, releasing), and leaves the
//     queue if it was a live waiter. It passes every waiter ahead of it. The
//     riders do not join: they wait for the next release.
//   - Otherwise the riders join the tail of the queue in their order, each
//     as its first attempt would have (a liveness deadline of now plus the
//     waiter timeout), and the lock is handed off as by Release: to the
//     live head, which may be a rider (or pick, queued or riding), or
//     nobody.
//
// The reply names the new holder in Granted ("" when the lock is free). If
// hold does not hold the lock, ReleaseTo returns ErrNotOwner and changes
// nothing: the riders do not join either.
//
// The real lock's pick and riders are waiters of the releaser's Client:
// the pick is its longest-waiting local waiter, queued or boarded, and a
// boarded pick rides too. ReleaseTo panics if hold or a rider's hold is
// empty, a lease is not positive, pick is hold, pick is a live waiter that
// queued with another lease, or a rider is hold, a live waiter, or named
// twice.
func (m *Fair) ReleaseTo(now Time, hold, pick string, lease int64, over bool, riders ...FairRider) (ReleaseResult, error) {
	const op = "Fair.ReleaseTo"
	checkOwner(op, hold)
	m.made(op)
	if pick != "" {
		deadline(op, now, lease)
		if pick == hold {
			panic(fmt.Sprintf("model: %s of %s to itself", op, hold))
		}
		if w, ok := m.liveEntry(op, now, pick); ok && w.lease != lease {
			panic(fmt.Sprintf("model: %s to %s with lease %d ms; it queued with %d ms (the script would not find it)",
				op, pick, lease, w.lease))
		}
	}
	var riderDeadline Time
	if len(riders) > 0 {
		riderDeadline = deadline(op, now, m.waiterTimeout)
	}
	named := map[string]bool{}
	for _, r := range riders {
		checkOwner(op, r.Hold)
		deadline(op, now, r.Lease)
		if _, queued := m.liveEntry(op, now, r.Hold); queued || r.Hold == hold || named[r.Hold] {
			panic(fmt.Sprintf("model: %s with rider %s, which is the releaser, a live waiter or another rider already", op, r.Hold))
		}
		named[r.Hold] = true
	}
	m.at(op, now)
	if m.holder != hold {
		return ReleaseResult{}, ErrNotOwner
	}
	if pick != "" && (!over || len(m.queue) == 0 || clientOf(m.queue[0].hold) == clientOf(hold)) {
		if i := m.index(pick); i >= 0 {
			m.queue = slices.Delete(m.queue, i, i+1)
		}
		m.holder, m.count, m.expiresAt = pick, 1, now+Time(lease)
		return ReleaseResult{Granted: pick}, nil
	}
	for _, r := range riders {
		m.queue = append(m.queue, fairWaiter{hold: r.Hold, lease: r.Lease, deadline: riderDeadline})
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
// and reserved for that waiter, which takes it at its next attempt, so
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

// clientOf returns the Client id of a hold id: what comes before its last colon (the scripts
// take the first 36 bytes, a UUID; the model's hold ids may be shorter).
func clientOf(hold string) string {
	if i := strings.LastIndexByte(hold, ':'); i >= 0 {
		return hold[:i]
	}
	return hold
}
