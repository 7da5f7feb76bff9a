package model

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// ErrNotSet is returned by the semaphores when their permits were never set
// by TrySetPermits or AddPermits. The model is left unchanged.
var ErrNotSet = errors.New("model: semaphore permits not set")

// ErrTooManyPermits is returned by Attempt when the caller asks for more
// permits than the semaphore has in total: it could never be served. The
// caller leaves the queue if it was in it.
var ErrTooManyPermits = errors.New("model: more permits asked than the semaphore has")

// ErrInsufficientPermits is returned by AddPermits when a reduction is
// larger than the permits available now: permits held out are never taken
// back. The model is left unchanged.
var ErrInsufficientPermits = errors.New("model: reduction larger than the available permits")

// ErrOverRelease is returned by [Sem.Release] when the release would make
// more permits available than the total, and by [Leased.Release] when it
// releases more permits than the permit holds. The model is left unchanged.
var ErrOverRelease = errors.New("model: release of more permits than are held")

// ErrPermitExpired is returned by [Leased.Release] when no live permit has
// that id: its lease ran out, it was released in full, or it never existed.
// The model is left unchanged (apart from expiry, which depends on time
// alone).
var ErrPermitExpired = errors.New("model: no live permit with this id")

// SemEvents is what one dispatch of a semaphore's queue did, in order: the
// real script publishes a grant to each Granted hold's Client and wakes each
// Rejected hold's Client. A slice is nil when empty, so the zero SemEvents
// means nothing happened.
type SemEvents struct {
	// Granted are the waiters granted their permits, in queue order.
	Granted []string
	// Rejected are the waiters dropped because they asked for more
	// permits than the total, in queue order. Each learns
	// ErrTooManyPermits at its next Attempt.
	Rejected []string
}

// SemAttempt is the reply of a semaphore's Attempt that returns no error.
type SemAttempt struct {
	// Status is the attempt's outcome, as the acquire scripts reply it:
	//
	//   - [Acquired]: the attempt took its permits now;
	//   - [Granted]: hold had its permits already, granted while it waited
	//     (its message was lost, or this attempt's own dispatch granted
	//     them);
	//   - [Queued]: hold is a live waiter after the call;
	//   - [Busy]: not acquired, and the attempt did not ask to wait;
	//   - [Dropped]: a later attempt that asked to wait, by a hold that is
	//     not a live waiter: nothing changed, and the caller starts over
	//     under a new hold id.
	Status Status
	// Hint is, for Queued and Busy, the milliseconds (always >= 1) until
	// the nearest live permit's lease runs out in [Leased], when permits
	// come back without any message and the waiter should attempt again; 0
	// when no permit is live, and always 0 in [Sem] and for the other
	// statuses.
	Hint int64
}

// Sem is the reference model of one counting semaphore (the semaphore/
// package; Redisson's RSemaphore) with a FIFO wait queue: a number of
// permits, of which any caller takes n when n are available and nobody waits
// ahead of it, and gives n back with an anonymous Release.
//
// # Permits
//
// The semaphore has no permits until TrySetPermits or AddPermits sets them;
// until then Attempt and Release return [ErrNotSet]. Once set it has a total
// and an available count, 0 <= available <= total. Permits are not owned:
// Release puts back n permits whoever took them, refusing only a release
// that would make more than the total available ([ErrOverRelease]).
// AddPermits changes the total and the available count together and never
// takes back permits held out, and Drain takes every available permit.
//
// # The wait queue
//
// Both semaphore models, Sem and [Leased], serve the callers that cannot
// have their permits at once through a FIFO wait queue with the same rules.
//
// A hold's first Attempt that fails and asks to wait (enqueue) joins the
// queue at its tail with the permits n it asked for (and, in Leased, the
// lease it wants). A later Attempt of a live waiter that asks to wait keeps
// its place. Every such Attempt and every Heartbeat of a live waiter sets
// its liveness deadline to now plus the waiter timeout given to the
// constructor. A waiter is dead at now >= its deadline, and from that
// instant it is out of the queue wherever it stood: never granted, never
// revived by a heartbeat, never renewed by an attempt.
//
// A hold is one call of the real Client: its id is fresh for the call, its
// first Attempt says so (first), and every Attempt of the hold asks for the
// same n (and lease): the queue entry in Redis is named by them. So a later
// Attempt that asks to wait and cannot have its permits, by a hold that is
// not a live waiter (it died, it was rejected, it gave up, it never queued,
// or it was granted and its grant is gone), is [Dropped]: it changes
// nothing, and the real caller starts over under a new hold id, at the
// tail. No hold id is ever queued twice, and a late grant message of the
// old one grants nothing.
//
// Dispatch serves the queue from its live head, in order, as far as it can,
// and stops at once when no permit is available (a head is not even looked
// at then, so one that asks for more than the total is rejected by a later
// dispatch that has permits to give: the real script saves the lookups on
// its busiest path, a release that hands its permits to the head):
//
//   - a head asking for more permits than the semaphore has in total can
//     never be served: it leaves the queue and is reported in
//     [SemEvents.Rejected] (its Client wakes it, and its next Attempt
//     returns [ErrTooManyPermits]);
//   - a head whose permits are available is granted them, leaves the queue
//     and is reported in [SemEvents.Granted] (its Client is notified);
//   - a head that must wait stops the loop.
//
// So a large request at the head is never passed by later small ones, and a
// release wakes exactly the waiters it can satisfy, in order: no thundering
// herd, no barging inside the queue (x/sync's semaphore,
// TestLargeAcquireDoesntStarve). A newcomer never takes permits while a live
// waiter is queued, even when they are available.
//
// Dispatch runs in every operation that may have made permits available
// (Release, AddPermits, GiveUp) and, when the queue is not empty, at the
// start of every Attempt and Heartbeat, which is how a waiter is served when
// permits came back without an operation on the server (a dead head, or in
// Leased a lease that ran out). Each of these operations returns the events
// of its dispatch, which the real script publishes. An operation that fails
// with an error dispatches nothing, unless the error comes from Attempt
// after its dispatch (step 2 of [Sem.Attempt]).
//
// # Grant records
//
// A waiter granted its permits by a dispatch is out of the queue and its
// permits are taken (available has dropped by n); the real script notifies
// it. In case that message is lost, the grant also leaves a grant record,
// which the hold's next Attempt or Heartbeat consumes and reports. The
// record lasts until the waiter's liveness deadline at the grant: at now >=
// that deadline it vanishes, and its permits stay taken, as if the waiter
// took them and died. They are never given back by expiry, because the
// waiter may have had the message and be using them. A waiter that gives up
// in the instant it was granted gives its permits back through GiveUp.
//
// # Time and misuse
//
// Every method takes the current logical time and panics if it is earlier
// than a time already passed to this model. Every method
// first drops dead waiters and expired grant records, which depend on time
// alone, so queries may do it too without changing a later reply. Misuse
// that only a buggy caller commits (an empty hold, a non-positive n, a
// first Attempt of a hold that is queued or granted, a later one that asks
// for another n than its queue entry or grant record holds, a negative
// TrySetPermits, a total that overflows, a Sem not made by NewSem) panics,
// and a call that panics changes nothing.
type Sem struct {
	clock
	waiterTimeout int64 // ms a waiter stays live after its latest enqueueing attempt or heartbeat

	set   bool  // permits set by TrySetPermits or AddPermits
	total int64 // total permits, >= 0
	avail int64 // available permits, 0 <= avail <= total

	queue  semQueue            // live waiters in arrival order, after every observe
	grants map[string]semGrant // unexpired grant records by hold, after every observe
}

// semGrant is the record of permits granted to a waiter by a dispatch, kept
// until the waiter consumes it or its deadline passes.
type semGrant struct {
	n     int64
	until Time // the record is gone at now >= until
}

// NewSem returns a counting semaphore whose permits are not set, with an
// empty queue whose waiters stay live for waiterTimeout milliseconds after
// their latest enqueueing Attempt or Heartbeat. It panics if waiterTimeout is
// not positive.
func NewSem(waiterTimeout int64) *Sem {
	if waiterTimeout <= 0 {
		panic(fmt.Sprintf("model: NewSem with non-positive waiter timeout %d ms", waiterTimeout))
	}
	return &Sem{waiterTimeout: waiterTimeout, grants: map[string]semGrant{}}
}

// at moves the model to time now and applies expiry: dead waiters leave the
// queue and expired grant records vanish (their permits stay taken).
func (m *Sem) at(op string, now Time) {
	m.made(op)
	m.observe(op, now)
	m.queue.expire(now)
	maps.DeleteFunc(m.grants, func(_ string, g semGrant) bool { return now >= g.until })
}

// made panics on a Sem not made by NewSem.
func (m *Sem) made(op string) {
	if m.waiterTimeout <= 0 {
		panic("model: " + op + " on a Sem not made by NewSem")
	}
}

// dispatch serves the queue; a grant takes the head's permits and leaves a
// grant record until the head's liveness deadline.
func (m *Sem) dispatch() SemEvents {
	return m.queue.dispatch(m.total, func() int64 { return m.avail }, func(w semWaiter) {
		m.avail -= w.n
		m.grants[w.hold] = semGrant{n: w.n, until: w.deadline}
	})
}

// TrySetPermits sets the permits to k, total and available, and reports
// true, if they were never set; otherwise it reports false and changes
// nothing. It never dispatches: the queue is empty while the permits are not
// set, since nobody can queue then.
//
// TrySetPermits panics if k is negative.
func (m *Sem) TrySetPermits(now Time, k int64) bool {
	const op = "Sem.TrySetPermits"
	if k < 0 {
		panic(fmt.Sprintf("model: %s with negative permits %d", op, k))
	}
	m.at(op, now)
	if m.set {
		return false
	}
	m.set, m.total, m.avail = true, k, k
	return true
}

// AddPermits adds delta permits, which may be negative, to the total and to
// the available permits, and then dispatches the queue: more permits may
// serve waiters, and a smaller total rejects heads that ask for more than
// it. A semaphore whose permits were never set counts as set with 0 permits,
// so AddPermits sets it (delta 0 sets it with no permits).
//
// A reduction larger than the available permits returns
// [ErrInsufficientPermits] and changes nothing (an unset semaphore stays
// unset): permits held out are never taken back, so available never goes
// negative.
//
// AddPermits panics if the total would overflow.
func (m *Sem) AddPermits(now Time, delta int64) (SemEvents, error) {
	const op = "Sem.AddPermits"
	m.made(op)
	total, avail := addPermits(op, m.total, delta), addPermits(op, m.avail, delta)
	m.at(op, now)
	if avail < 0 {
		return SemEvents{}, ErrInsufficientPermits
	}
	m.set, m.total, m.avail = true, total, avail
	return m.dispatch(), nil
}

// Attempt makes one attempt by hold to take n permits: what one run of the
// acquire script does on the server. first says that it is the hold's first
// attempt (the real Client's call has just made the hold id), enqueue that
// it asks to wait. In order:
//
//  1. Dead waiters leave the queue and expired grant records vanish.
//  2. If the queue is not empty, it is dispatched; the events are returned
//     whatever the reply (they may name hold itself).
//  3. If hold has a grant record (it was granted while it waited and missed
//     the message, possibly in step 2), the record is consumed and the
//     reply is Granted; its permits were taken at the grant. A first
//     attempt has none.
//  4. If the permits were never set: [ErrNotSet].
//  5. If n is above the total: [ErrTooManyPermits], and hold leaves the
//     queue if it was in it.
//  6. If no live waiter is queued and n permits are available, hold takes
//     them: Acquired.
//  7. Otherwise, without enqueue (a TryAcquire), the reply is Busy and
//     nothing else changes, not even the deadline of a queued hold (which
//     keeps its place). With enqueue, a first attempt joins the tail of the
//     queue, and a later one of a live waiter keeps its place; either way
//     hold's liveness deadline becomes now plus the waiter timeout, and the
//     reply is Queued. A later attempt of a hold that is not a live waiter
//     is Dropped, and changes nothing.
//
// In particular no hold takes permits while a live waiter is queued, not
// even a queued hold that is not at the head; the head itself is served by
// step 2. Hint is always 0. On error the SemAttempt is zero.
//
// Attempt panics if hold is empty or n is not positive; if first is set
// while hold is a live waiter or has a grant record (a first attempt cannot
// find either); or if hold is a live waiter, or has a grant record, for
// another n than this one.
func (m *Sem) Attempt(now Time, hold string, n int64, first, enqueue bool) (SemAttempt, SemEvents, error) {
	const op = "Sem.Attempt"
	checkOwner(op, hold)
	checkPermits(op, n)
	m.made(op)
	var waiterDeadline Time
	if enqueue {
		waiterDeadline = deadline(op, now, m.waiterTimeout)
	}
	m.queue.checkAttempt(op, now, semWaiter{hold: hold, n: n}, first)
	if g, ok := m.grants[hold]; ok && now < g.until && (first || g.n != n) {
		panic(fmt.Sprintf("model: %s of %d permits by %s (first %v), which has a grant record of %d",
			op, n, hold, first, g.n))
	}
	m.at(op, now)

	var ev SemEvents
	if len(m.queue) > 0 {
		ev = m.dispatch()
	}
	if _, ok := m.grants[hold]; ok {
		delete(m.grants, hold)
		return SemAttempt{Status: Granted}, ev, nil
	}
	if !m.set {
		m.queue.remove(hold)
		return SemAttempt{}, ev, ErrNotSet
	}
	if n > m.total {
		m.queue.remove(hold)
		return SemAttempt{}, ev, ErrTooManyPermits
	}
	if len(m.queue) == 0 && m.avail >= n {
		m.avail -= n
		return SemAttempt{Status: Acquired}, ev, nil
	}
	return SemAttempt{Status: m.queue.wait(semWaiter{hold: hold, n: n, deadline: waiterDeadline}, first, enqueue)}, ev, nil
}

// Heartbeat keeps a waiter alive, after dispatching the queue if it is not
// empty (the events are returned). It replies
//
//   - [BeatGranted] if hold has a grant record (granted while it waited,
//     possibly by this very dispatch): the record is consumed, and hold has
//     its permits;
//   - [BeatQueued] if hold is a live waiter: its deadline becomes now plus
//     the waiter timeout, its place does not change;
//   - [BeatDropped] otherwise: hold never queued, gave up, was rejected, or
//     died (a heartbeat never revives a dead waiter); or its grant record
//     expired or was already consumed. The real caller starts over under a
//     new hold id.
//
// Heartbeat panics if hold is empty.
func (m *Sem) Heartbeat(now Time, hold string) (BeatStatus, SemEvents) {
	const op = "Sem.Heartbeat"
	checkOwner(op, hold)
	m.made(op)
	at := deadline(op, now, m.waiterTimeout)
	m.at(op, now)
	var ev SemEvents
	if len(m.queue) > 0 {
		ev = m.dispatch()
	}
	if _, ok := m.grants[hold]; ok {
		delete(m.grants, hold)
		return BeatGranted, ev
	}
	if i := m.queue.index(hold); i >= 0 {
		m.queue[i].deadline = at
		return BeatQueued, ev
	}
	return BeatDropped, ev
}

// GiveUp is a waiter's cleanup when it stops waiting: hold leaves the queue
// if it is a live waiter, and if it has a grant record (it was granted in
// the instant it gave up and has not taken the permits) the record is
// consumed and its n permits become available again; returned is that n, 0
// otherwise. Then the queue is dispatched, always, since the head or the
// available permits may have changed, and the events are returned.
//
// A give-back never makes more than the total available: available becomes
// at most the total. That bound is reached only after a Release of permits
// that nobody held; returned is n all the same.
//
// GiveUp panics if hold is empty.
func (m *Sem) GiveUp(now Time, hold string) (returned int64, ev SemEvents) {
	const op = "Sem.GiveUp"
	checkOwner(op, hold)
	m.at(op, now)
	m.queue.remove(hold)
	if g, ok := m.grants[hold]; ok {
		delete(m.grants, hold)
		returned = g.n
		m.avail = min(m.avail+g.n, m.total)
	}
	return returned, m.dispatch()
}

// Release puts n permits back and dispatches the queue, returning its
// events. Permits are anonymous: any caller may release.
//
// If the permits were never set it returns [ErrNotSet]; if the release would
// make more than the total available it returns [ErrOverRelease]. Either
// way nothing changes and nothing is dispatched.
//
// Release panics if n is not positive.
func (m *Sem) Release(now Time, n int64) (SemEvents, error) {
	const op = "Sem.Release"
	checkPermits(op, n)
	m.at(op, now)
	if !m.set {
		return SemEvents{}, ErrNotSet
	}
	if n > m.total-m.avail {
		return SemEvents{}, ErrOverRelease
	}
	m.avail += n
	return m.dispatch(), nil
}

// Drain takes every available permit and returns how many it took (0 if
// the permits were never set, which it leaves unset). It does not look at
// the queue: taking permits serves nobody.
func (m *Sem) Drain(now Time) int64 {
	m.at("Sem.Drain", now)
	r := m.avail
	m.avail = 0
	return r
}

// Available returns the permits available now, 0 if they were never set.
// Permits that a waiter ahead may be granted still count.
func (m *Sem) Available(now Time) int64 {
	m.at("Sem.Available", now)
	return m.avail
}

// Total returns the total permits; ok is false, with 0, if they were never
// set.
func (m *Sem) Total(now Time) (total int64, ok bool) {
	m.at("Sem.Total", now)
	return m.total, m.set
}

// Queue returns the live waiters in arrival order, head first; a new slice
// on every call, nil when nobody waits.
func (m *Sem) Queue(now Time) []string {
	m.at("Sem.Queue", now)
	return m.queue.holds()
}

// Granted returns the holds with an unexpired grant record (granted by a
// dispatch, not yet consumed by their Attempt, Heartbeat or GiveUp), sorted;
// nil when there are none.
func (m *Sem) Granted(now Time) []string {
	m.at("Sem.Granted", now)
	if len(m.grants) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(m.grants))
}

// semWaiter is one entry of a semaphore's wait queue.
type semWaiter struct {
	hold     string
	n        int64 // permits asked for in the latest Attempt
	lease    int64 // ms of lease asked for in the latest Attempt (Leased only)
	deadline Time  // dead at now >= deadline
}

// semQueue is a semaphore's wait queue: live waiters in arrival order after
// every expire.
type semQueue []semWaiter

// expire drops every dead waiter.
func (q *semQueue) expire(now Time) {
	*q = slices.DeleteFunc(*q, func(w semWaiter) bool { return now >= w.deadline })
}

// index returns hold's position, -1 if it is not a live waiter.
func (q semQueue) index(hold string) int {
	return slices.IndexFunc(q, func(w semWaiter) bool { return w.hold == hold })
}

// remove takes hold out of the queue if it is there.
func (q *semQueue) remove(hold string) {
	if i := q.index(hold); i >= 0 {
		*q = slices.Delete(*q, i, i+1)
	}
}

// checkAttempt panics on an attempt by w.hold for w.n permits and w.lease
// that only a buggy caller makes, as the queue is at now (it applies no
// expiry): a first attempt of a live waiter, which cannot be queued yet, or
// a later one of a live waiter queued for another n or lease, whose queue
// entry in Redis would be another.
func (q semQueue) checkAttempt(op string, now Time, w semWaiter, first bool) {
	i := q.index(w.hold)
	if i < 0 || now >= q[i].deadline {
		return
	}
	if first {
		panic(fmt.Sprintf("model: %s: first attempt by %s, which is queued", op, w.hold))
	}
	if q[i].n != w.n || q[i].lease != w.lease {
		panic(fmt.Sprintf("model: %s by %s of %d permits for %d ms, which is queued for %d permits for %d ms",
			op, w.hold, w.n, w.lease, q[i].n, q[i].lease))
	}
}

// wait ends an attempt by w.hold that cannot have its permits now (step 7
// of [Sem.Attempt]): Busy without enqueue; with it, w joins the tail on a
// first attempt, a live waiter keeps its place and takes w's deadline, and
// any other hold is Dropped, changing nothing.
func (q *semQueue) wait(w semWaiter, first, enqueue bool) Status {
	i := q.index(w.hold)
	switch {
	case !enqueue:
		return Busy
	case first:
		*q = append(*q, w)
	case i < 0:
		return Dropped
	default:
		(*q)[i].deadline = w.deadline
	}
	return Queued
}

// holds returns the holds in queue order, nil when empty.
func (q semQueue) holds() []string {
	var holds []string
	for _, w := range q {
		holds = append(holds, w.hold)
	}
	return holds
}

// dispatch serves the queue from its head (see the essay above): heads
// asking for more than total are rejected, heads whose n is at most
// available() are passed to grant (which takes their permits), and the
// first head that must wait stops the loop, as does having no permit left.
// The queue must hold live waiters only.
func (q *semQueue) dispatch(total int64, available func() int64, grant func(semWaiter)) SemEvents {
	var ev SemEvents
	for len(*q) > 0 && available() > 0 {
		head := (*q)[0]
		switch {
		case head.n > total:
			ev.Rejected = append(ev.Rejected, head.hold)
		case available() >= head.n:
			grant(head)
			ev.Granted = append(ev.Granted, head.hold)
		default:
			return ev
		}
		*q = slices.Delete(*q, 0, 1)
	}
	return ev
}

// checkPermits panics on a non-positive permit count.
func checkPermits(op string, n int64) {
	if n <= 0 {
		panic(fmt.Sprintf("model: %s with non-positive permit count %d", op, n))
	}
}

// addPermits returns total+delta, panicking if the sum overflows.
func addPermits(op string, total, delta int64) int64 {
	sum := total + delta
	if (delta > 0 && sum < total) || (delta < 0 && sum > total) {
		panic(fmt.Sprintf("model: %s: %d permits %+d overflows", op, total, delta))
	}
	return sum
}
