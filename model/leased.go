package model

import (
	"fmt"
	"maps"
)

// Leased is the reference model of one semaphore of leased permits (the
// semaphore/ package; Redisson's RPermitExpirableSemaphore) with a FIFO wait
// queue: whoever takes permits gets them as one permit, an id with a count n
// and a lease, and the permits come back when the permit is released or
// when its lease runs out, so a holder that crashes loses nothing for good.
//
// # Permits
//
// The semaphore has no permits until TrySetPermits or AddPermits sets a
// total; until then Attempt returns [ErrNotSet]. A permit is live while now
// < its expiry; at now >= its expiry it is gone, as a Redis key whose PEXPIRE
// deadline has passed, and its n permits are available again. Available is
// the total minus the n of every live permit; it is never negative, because
// AddPermits refuses a reduction below it.
//
// A permit's id is the hold id of the Attempt that took it. The holder
// extends it with Renew, and gives back some or all of its permits with
// Release; a release of a permit that is gone reports [ErrPermitExpired].
// Permits are owned, unlike [Sem]'s: only the id's own n can be released.
//
// # Waiting and grants
//
// Waiters queue and are served in order exactly as in [Sem] (see its
// section The wait queue), each waiter also carrying the lease it asked
// for, the same in every Attempt of its hold. A dispatch grants the head a
// permit whose id is its hold, with its n, expiring at now plus its lease or
// at its liveness deadline, whichever is sooner: a waiter that died a moment
// before its turn holds the permits no longer than it would have stalled the
// queue, and a live one learns of the grant (from the message, or its next
// Attempt or Heartbeat, which report the permit as Granted without changing
// it) and extends it with Renew. The granted permit is its own record of the
// grant; nothing else is kept.
//
// Leases run out without any operation on the server, so permits may become
// available while waiters are queued and nobody is granted them until the
// next Attempt or Heartbeat dispatches the queue. A waiter that fails an
// Attempt is told, in [SemAttempt.Hint], when the nearest live permit runs
// out, so that it attempts again then if no message comes first.
//
// # Time and misuse
//
// Every method takes the current logical time and panics if it is earlier
// than a time already passed to this model. Every method
// first drops dead waiters and expired permits, which depend on time alone,
// so queries may do it too without changing a later reply. Misuse that only
// a buggy caller commits (an empty hold or id, a non-positive n or lease, a
// first Attempt of a hold that is queued or holds a permit, a later one that
// asks for another n or lease than its queue entry holds, a negative
// TrySetPermits, a total or deadline that overflows, a Leased not made by
// NewLeased) panics, and a call that panics changes nothing.
type Leased struct {
	clock
	waiterTimeout int64 // ms a waiter stays live after its latest enqueueing attempt or heartbeat

	set   bool  // permits set by TrySetPermits or AddPermits
	total int64 // total permits, >= the n of all live permits

	permits map[string]leasedPermit // live permits by id, after every observe
	queue   semQueue                // live waiters in arrival order, after every observe
}

// leasedPermit is one permit: n permits held until expiry.
type leasedPermit struct {
	n      int64 // > 0
	expiry Time  // the permit is gone at now >= expiry
}

// NewLeased returns a semaphore of leased permits whose permits are not
// set, with no permit and an empty queue whose waiters stay live for
// waiterTimeout milliseconds after their latest enqueueing Attempt or
// Heartbeat. It panics if waiterTimeout is not positive.
func NewLeased(waiterTimeout int64) *Leased {
	if waiterTimeout <= 0 {
		panic(fmt.Sprintf("model: NewLeased with non-positive waiter timeout %d ms", waiterTimeout))
	}
	return &Leased{waiterTimeout: waiterTimeout, permits: map[string]leasedPermit{}}
}

// at moves the model to time now and applies expiry: dead waiters leave the
// queue and expired permits are gone, their permits available again.
func (m *Leased) at(op string, now Time) {
	m.made(op)
	m.observe(op, now)
	m.queue.expire(now)
	maps.DeleteFunc(m.permits, func(_ string, p leasedPermit) bool { return now >= p.expiry })
}

// made panics on a Leased not made by NewLeased.
func (m *Leased) made(op string) {
	if m.waiterTimeout <= 0 {
		panic("model: " + op + " on a Leased not made by NewLeased")
	}
}

// available returns the total minus the permits of the live permits; at
// must have run.
func (m *Leased) available() int64 {
	a := m.total
	for _, p := range m.permits {
		a -= p.n
	}
	return a
}

// hint returns the milliseconds until the nearest live permit runs out,
// 0 if none is live; at must have run.
func (m *Leased) hint(now Time) int64 {
	var h int64
	for _, p := range m.permits {
		if d := int64(p.expiry - now); h == 0 || d < h {
			h = d
		}
	}
	return h
}

// dispatch serves the queue; a grant creates the head's permit, expiring at
// now plus its lease or at its liveness deadline if that is sooner.
func (m *Leased) dispatch(now Time) SemEvents {
	return m.queue.dispatch(m.total, m.available, func(w semWaiter) {
		at := w.deadline
		if Time(w.lease) < w.deadline-now {
			at = now + Time(w.lease)
		}
		m.permits[w.hold] = leasedPermit{n: w.n, expiry: at}
	})
}

// TrySetPermits sets the total to k and reports true if the permits were
// never set; otherwise it reports false and changes nothing. It never
// dispatches: nobody can queue or hold a permit while the permits are not
// set.
//
// TrySetPermits panics if k is negative.
func (m *Leased) TrySetPermits(now Time, k int64) bool {
	const op = "Leased.TrySetPermits"
	if k < 0 {
		panic(fmt.Sprintf("model: %s with negative permits %d", op, k))
	}
	m.at(op, now)
	if m.set {
		return false
	}
	m.set, m.total = true, k
	return true
}

// AddPermits adds delta permits, which may be negative, to the total, and
// then dispatches the queue, as [Sem.AddPermits] does: a semaphore whose
// permits were never set counts as set with 0 permits, and a reduction
// larger than the available permits (counted after expiry) returns
// [ErrInsufficientPermits] and changes nothing: live permits are never taken
// back, so available never goes negative. Nothing is dispatched on error,
// even if expiry has just made permits available.
//
// AddPermits panics if the total would overflow.
func (m *Leased) AddPermits(now Time, delta int64) (SemEvents, error) {
	const op = "Leased.AddPermits"
	m.made(op)
	total := addPermits(op, m.total, delta)
	m.at(op, now)
	if m.available()+delta < 0 {
		return SemEvents{}, ErrInsufficientPermits
	}
	m.set, m.total = true, total
	return m.dispatch(now), nil
}

// Attempt makes one attempt by hold to take a permit of n permits for lease
// milliseconds: what one run of the acquire script does on the server.
// first says that it is the hold's first attempt, enqueue that it asks to
// wait, as for [Sem.Attempt]. In order:
//
//  1. Dead waiters leave the queue and expired permits are gone.
//  2. If the queue is not empty, it is dispatched; the events are returned
//     whatever the reply (they may name hold itself).
//  3. If a live permit has id hold (it was granted while hold waited and
//     the message was lost, possibly in step 2, or hold attempts again
//     after it took it), the reply is Granted and nothing changes: n, lease
//     and the permit's expiry are left as they are.
//  4. If the permits were never set: [ErrNotSet] (hold leaves the queue if
//     it was in it).
//  5. If n is above the total: [ErrTooManyPermits], and hold leaves the
//     queue if it was in it.
//  6. If no live waiter is queued and n permits are available, hold takes a
//     permit with id hold, n permits and expiry now+lease: Acquired.
//  7. Otherwise, as step 7 of [Sem.Attempt]: Busy without enqueue (a
//     queued hold keeping its place and its deadline); with enqueue, a
//     first attempt joins the tail, with n, lease and a liveness deadline
//     of now plus the waiter timeout, a later attempt of a live waiter
//     keeps its place and takes that deadline, Queued; a later attempt of
//     a hold that is not a live waiter is Dropped, and changes nothing.
//     Hint is, for Queued and Busy, the milliseconds until the nearest live
//     permit runs out (>= 1), 0 if no permit is live.
//
// In particular no hold takes permits while a live waiter is queued. On
// error the SemAttempt is zero.
//
// Attempt panics if hold is empty, n or lease is not positive, or now+lease
// overflows; if first is set while hold is a live waiter or has a live
// permit (a first attempt cannot find either: the scripts' answer to one
// run again by go-redis's retry is not modelled); or if hold is a live
// waiter for another n or lease than these.
func (m *Leased) Attempt(now Time, hold string, n, lease int64, first, enqueue bool) (SemAttempt, SemEvents, error) {
	const op = "Leased.Attempt"
	checkOwner(op, hold)
	checkPermits(op, n)
	m.made(op)
	expiry := deadline(op, now, lease)
	var waiterDeadline Time
	if enqueue {
		waiterDeadline = deadline(op, now, m.waiterTimeout)
	}
	m.queue.checkAttempt(op, now, semWaiter{hold: hold, n: n, lease: lease}, first)
	if p, ok := m.permits[hold]; ok && now < p.expiry && first {
		panic(fmt.Sprintf("model: %s: first attempt by %s, which has a permit", op, hold))
	}
	m.at(op, now)

	var ev SemEvents
	if len(m.queue) > 0 {
		ev = m.dispatch(now)
	}
	if _, ok := m.permits[hold]; ok {
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
	if len(m.queue) == 0 && m.available() >= n {
		m.permits[hold] = leasedPermit{n: n, expiry: expiry}
		return SemAttempt{Status: Acquired}, ev, nil
	}
	st := m.queue.wait(semWaiter{hold: hold, n: n, lease: lease, deadline: waiterDeadline}, first, enqueue)
	if st == Dropped {
		return SemAttempt{Status: st}, ev, nil
	}
	return SemAttempt{Status: st, Hint: m.hint(now)}, ev, nil
}

// Heartbeat keeps a waiter alive, after dispatching the queue if it is not
// empty (the events are returned). It replies
//
//   - [BeatGranted] if a live permit has id hold (granted while it waited,
//     possibly by this very dispatch): nothing changes, the permit is
//     reported as it is;
//   - [BeatQueued] if hold is a live waiter: its deadline becomes now plus
//     the waiter timeout, its place does not change;
//   - [BeatDropped] otherwise: hold never queued, gave up, was rejected, or
//     died (a heartbeat never revives a dead waiter); or its permit is
//     gone. The real caller starts over under a new hold id.
//
// Heartbeat panics if hold is empty.
func (m *Leased) Heartbeat(now Time, hold string) (BeatStatus, SemEvents) {
	const op = "Leased.Heartbeat"
	checkOwner(op, hold)
	m.made(op)
	at := deadline(op, now, m.waiterTimeout)
	m.at(op, now)
	var ev SemEvents
	if len(m.queue) > 0 {
		ev = m.dispatch(now)
	}
	if _, ok := m.permits[hold]; ok {
		return BeatGranted, ev
	}
	if i := m.queue.index(hold); i >= 0 {
		m.queue[i].deadline = at
		return BeatQueued, ev
	}
	return BeatDropped, ev
}

// GiveUp is a waiter's cleanup when it stops waiting: hold leaves the queue
// if it is a live waiter, and if a live permit has id hold (granted in the
// instant it gave up) the permit is deleted and its n permits are available
// again; returned is that n, 0 otherwise. Then the queue is dispatched,
// always, and the events are returned.
//
// GiveUp panics if hold is empty.
func (m *Leased) GiveUp(now Time, hold string) (returned int64, ev SemEvents) {
	const op = "Leased.GiveUp"
	checkOwner(op, hold)
	m.at(op, now)
	m.queue.remove(hold)
	if p, ok := m.permits[hold]; ok {
		delete(m.permits, hold)
		returned = p.n
	}
	return returned, m.dispatch(now)
}

// Release gives back k of the permits of permit id: all of them deletes the
// permit, fewer leave it with n-k and its expiry unchanged. Then the queue is
// dispatched and the events are returned.
//
// If no live permit has that id (its lease ran out, it was released in
// full, or it never existed) Release returns [ErrPermitExpired]; if k is
// more than the permit holds it returns [ErrOverRelease]. Either way nothing
// changes and nothing is dispatched, even though the expiry of this or
// another permit may just have made permits available: the next Attempt or
// Heartbeat serves the queue.
//
// Release panics if id is empty or k is not positive.
func (m *Leased) Release(now Time, id string, k int64) (SemEvents, error) {
	const op = "Leased.Release"
	checkOwner(op, id)
	checkPermits(op, k)
	m.at(op, now)
	p, ok := m.permits[id]
	switch {
	case !ok:
		return SemEvents{}, ErrPermitExpired
	case k > p.n:
		return SemEvents{}, ErrOverRelease
	case k == p.n:
		delete(m.permits, id)
	default:
		p.n -= k
		m.permits[id] = p
	}
	return m.dispatch(now), nil
}

// Renew sets the expiry of permit id to now+lease and reports true, if it
// is live; a renewal may shorten the lease, the latest one wins. Otherwise
// it reports false and changes nothing: a permit that is gone is never
// revived. Renew never dispatches (it frees nothing).
//
// Renew panics if id is empty, lease is not positive, or now+lease
// overflows.
func (m *Leased) Renew(now Time, id string, lease int64) bool {
	const op = "Leased.Renew"
	checkOwner(op, id)
	m.made(op)
	at := deadline(op, now, lease)
	m.at(op, now)
	p, ok := m.permits[id]
	if !ok {
		return false
	}
	p.expiry = at
	m.permits[id] = p
	return true
}

// Available returns the permits available now: the total minus the permits
// of the live permits, 0 if the permits were never set. Permits that a
// waiter ahead may be granted still count.
func (m *Leased) Available(now Time) int64 {
	m.at("Leased.Available", now)
	return m.available()
}

// Total returns the total permits; ok is false, with 0, if they were never
// set.
func (m *Leased) Total(now Time) (total int64, ok bool) {
	m.at("Leased.Total", now)
	return m.total, m.set
}

// Permits returns the live permits, id to n; a new map on every call, never
// nil.
func (m *Leased) Permits(now Time) map[string]int64 {
	m.at("Leased.Permits", now)
	ids := make(map[string]int64, len(m.permits))
	for id, p := range m.permits {
		ids[id] = p.n
	}
	return ids
}

// Expiry returns when permit id runs out; ok is false, with 0, if no live
// permit has that id.
func (m *Leased) Expiry(now Time, id string) (at Time, ok bool) {
	m.at("Leased.Expiry", now)
	p, ok := m.permits[id]
	return p.expiry, ok
}

// Queue returns the live waiters in arrival order, head first; a new slice
// on every call, nil when nobody waits.
func (m *Leased) Queue(now Time) []string {
	m.at("Leased.Queue", now)
	return m.queue.holds()
}
