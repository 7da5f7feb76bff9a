package model

import (
	"fmt"
	"math"
	"slices"
)

// Multi is the reference model of the multi-name lock (package multilock) over the
// exclusive locks of its names, together with the fair locks of those names (package fair),
// which are the same locks and share their queues.
//
// # Names and requests
//
// Each name is an exclusive lock with a wait queue, as [Fair] describes one lock. A request
// asks for a set of names: one name for a fair lock's request ([MultiRequest] with Fair), one
// or more for a multi-lock's. As with Fair, every operation names the request by its hold
// id, fresh for every Lock or TryLock call: its first attempt ([Multi.Attempt]) tells the
// model the request's names and lease; its later attempts ([Multi.AttemptAgain]), its
// heartbeats, its release and its give-up name the hold alone. A request holds when every one
// of its names is its own; it has all of them or none of them for the user.
//
// A name's owner is the request that holds it or that it is reserved for (see below); the
// owner's claim lasts until a given instant, its lease, and at now >= that instant the name
// is free, as a Redis key whose lease end has passed.
//
// # One arrival order
//
// A request's first attempt that cannot take every name at once and asks to wait joins, in
// that one step, the tail of the queue of every name it cannot have: so all the queues order
// the waiters by one global arrival order, the order of those first attempts. A name that
// is free with nobody queued is reserved for the request at once instead (a multi-lock's
// request; a fair request has one name and takes it when it is free with nobody queued).
// Requests that share a name are therefore served in arrival order, whatever their other
// names: a request only ever waits for requests that arrived before it, and no cycle of
// waits can form.
//
// # Reservations and grants
//
// A name released (or given up) while its queue has a live waiter is handed in the same step
// to the live head of its queue, whichever kind of request that is. For a fair request the
// hand-off is its hold, as [Fair] says: a lease of what it asked for, cut at its liveness
// deadline. For a multi-lock's request it is a reservation: the name is the request's, and
// nobody else's, until the request's liveness deadline (its queue member carries the waiter
// timeout where a fair waiter's carries its lease, so one rule makes both), while the request
// waits for its other names. A multi-lock's later attempt or heartbeat also reserves a name
// whose queue it heads while the name is free (its holder's lease ran out), and extends every
// name reserved for it to its new liveness deadline.
//
// A request is complete when every one of its names is its own: a hand-off that completes a
// waiter is reported (Granted in the replies), and the waiter learns of it from the grant
// message or its next attempt or heartbeat. A multi-lock's attempt that finds every name its
// own, or free with it at the head of the queue, or free with nobody queued, takes them all
// with its full lease (Acquired); a heartbeat that finds every name reserved for it extends
// them to its liveness deadline and reports BeatGranted, after which the request renews them
// to its lease ([Multi.Renew]) as any holder does.
//
// A name that is free while its queue has a live waiter (its holder's lease ran out, or the
// waiter it was reserved for died: no operation runs at that instant) is kept for the live
// head, as with Fair: the head takes or reserves it at its next attempt or heartbeat, and any
// other request's attempt that looks at the name hands it to the head first, as a release
// would. A newcomer never takes a name a live waiter is queued for.
//
// # Liveness
//
// A waiting request has one liveness deadline for all its names: now plus the waiter timeout
// given to [NewMulti] at its first attempt, renewed by every later attempt that waits and by
// every heartbeat. A waiter is dead at now >= its deadline, and from that instant it is out
// of every queue, and the names reserved for it (which run to that same deadline) are free
// and kept for the next live heads. A dead request is never revived: its later attempt or
// heartbeat gives up whatever it still had and reports Dropped, and the real caller starts
// over under a new hold id, at the tail of every queue. The Redis implementation drops dead
// waiters lazily, as [Fair] describes; this model drops them at the first call that observes
// their deadline, which gives the same replies.
//
// A request that holds is not a waiter: its heartbeats change nothing, and its hold lasts
// until it is released, given up, or its lease runs out (a renewal extends it). A release
// hands every name the request still has to the live head of its queue, in one step.
//
// # Time and misuse
//
// Every method takes the current logical time and panics if it is earlier than a time
// already passed to this model. Misuse that only a buggy caller commits panics, and a call
// that panics changes nothing: an empty hold or name, a request with no names, a fair
// request with more than one name, a non-positive lease, a first attempt under a hold id the
// model knows already (the real lock makes a fresh one for every call), any other call under
// a hold id whose first attempt the model was never told of, and a Multi not made by
// [NewMulti]. A fair lock's re-entry, its reentrant sibling's local hand-off and its forced
// release are [Fair]'s and not modelled here.
type Multi struct {
	clock
	waiterTimeout int64 // ms a waiter stays live after its latest attempt or heartbeat

	names    map[string]*multiName // every name a request asked for
	reqs     map[string]*multiReq  // every request the model was told of, by hold
	arrivals int                   // arrival numbers handed out

	handed []string // holds handed a name by the call in progress
}

// multiName is the state of one name: its owner and its queue.
type multiName struct {
	owner string   // the hold that holds the name or has it reserved; "" when free
	until Time     // the owner's claim ends at this time
	queue []string // live waiters' holds in arrival order, after every at
}

// multiReq is one request.
type multiReq struct {
	hold     string
	names    []string // sorted, without duplicates
	lease    int64
	fair     bool
	waiting  bool // a live waiter, after every at
	deadline Time // its liveness deadline while waiting
	arrival  int  // its arrival number once it queued, else 0
}

// MultiRequest is what a request's first attempt tells [Multi]: its hold id, the names it
// asks for (in any order; duplicates are one name), the lease in ms it will have once it
// holds them, and whether it is a fair lock's request (package fair: exactly one name, and
// the lock_* scripts) rather than a multi-lock's (the multi_* scripts).
type MultiRequest struct {
	Hold  string
	Names []string
	Lease int64
	Fair  bool
}

// MultiResult is the reply of an attempt.
type MultiResult struct {
	// Status is the outcome: Acquired (the request holds every name now), Granted (a fair
	// request that was handed its name earlier: nothing changed), Queued (it waits), Busy (it
	// did not ask to wait, and nothing is left of it) or Dropped (a later attempt of a
	// request that is no longer a live waiter: it gave up whatever it still had).
	Status Status
	// Remaining is, for Queued and Busy, the milliseconds (>= 1) until the shortest claim on
	// a name the request waits for ends: the longest it should wait before it attempts again
	// without a message. It is 0 otherwise.
	Remaining int64
	// Granted are the other requests that this call completed, in the order of the hand-offs
	// that completed them: a name it found free and kept for another head, or a name it gave
	// up, was handed to them, and they now have every name they asked for.
	Granted []string
}

// MultiReleaseResult is the reply of a release.
type MultiReleaseResult struct {
	// Released is how many of the request's names it still had and handed on or freed.
	Released int
	// Granted are the requests that the release completed (see MultiResult.Granted).
	Granted []string
}

// MultiGiveUpResult is the reply of a give-up.
type MultiGiveUpResult struct {
	// Status is PassedOn when the request had a name (held, or reserved for it), which passed
	// on; LeftQueue when it had none but was a live waiter, and left every queue;
	// GaveUpNothing otherwise.
	Status GiveUpStatus
	// Granted are the requests that the give-up completed (see MultiResult.Granted).
	Granted []string
}

// NewMulti returns a model with every name free and every queue empty, whose waiters stay
// live for waiterTimeout milliseconds after their latest attempt or heartbeat. It panics if
// waiterTimeout is not positive.
func NewMulti(waiterTimeout int64) *Multi {
	if waiterTimeout <= 0 {
		panic(fmt.Sprintf("model: NewMulti with non-positive waiter timeout %d ms", waiterTimeout))
	}
	return &Multi{waiterTimeout: waiterTimeout, names: map[string]*multiName{}, reqs: map[string]*multiReq{}}
}

// made panics on a Multi not made by NewMulti.
func (m *Multi) made(op string) {
	if m.waiterTimeout <= 0 {
		panic("model: " + op + " on a Multi not made by NewMulti")
	}
}

// at moves the model to time now and applies expiry: a claim on a name whose lease has
// ended is gone, and every dead waiter leaves every queue.
func (m *Multi) at(op string, now Time) {
	m.made(op)
	m.observe(op, now)
	for _, r := range m.reqs {
		if r.waiting && now >= r.deadline {
			m.leave(r)
		}
	}
	for _, n := range m.names {
		if n.owner != "" && now >= n.until {
			n.owner = ""
		}
	}
	m.handed = m.handed[:0]
}

// checkTime panics, changing nothing, if now is before the model's time: the preconditions
// of a call are checked before it changes anything.
func (m *Multi) checkTime(op string, now Time) {
	m.made(op)
	if m.started && now < m.now {
		m.observe(op, now) // panics
	}
}

// request returns the request of hold, panicking if the model was never told of it.
func (m *Multi) request(op string, now Time, hold string) *multiReq {
	checkOwner(op, hold)
	m.checkTime(op, now)
	r, ok := m.reqs[hold]
	if !ok {
		panic(fmt.Sprintf("model: %s of %s, whose first attempt the model was never told of", op, hold))
	}
	return r
}

// memberLease is the lease a request's queue member names: a fair waiter's own, a
// multi-lock waiter's the waiter timeout (so a name handed to it runs to its deadline).
func (m *Multi) memberLease(r *multiReq) int64 {
	if r.fair {
		return r.lease
	}
	return m.waiterTimeout
}

// handOff ends the claim on name and hands it to the live head of its queue, if any: a
// fair waiter holds it, a multi-lock's waiter has it reserved; either way until now plus
// the lease its member names, cut at its liveness deadline. It returns the granted hold, ""
// when the name is left free.
func (m *Multi) handOff(name string, now Time) string {
	n := m.names[name]
	n.owner = ""
	if len(n.queue) == 0 {
		return ""
	}
	head := m.reqs[n.queue[0]]
	n.queue = slices.Delete(n.queue, 0, 1)
	n.owner, n.until = head.hold, min(now+Time(m.memberLease(head)), head.deadline)
	if head.fair {
		head.waiting = false
	}
	m.handed = append(m.handed, head.hold)
	return head.hold
}

// owns reports whether every name of r is r's own.
func (m *Multi) owns(r *multiReq) bool {
	for _, name := range r.names {
		if m.names[name].owner != r.hold {
			return false
		}
	}
	return true
}

// granted returns the holds handed a name by the call in progress that are complete now,
// each once, but for the caller.
func (m *Multi) granted(caller string) []string {
	var out []string
	for _, h := range m.handed {
		if h != caller && !slices.Contains(out, h) && m.owns(m.reqs[h]) {
			out = append(out, h)
		}
	}
	return out
}

// leave takes r out of every queue.
func (m *Multi) leave(r *multiReq) {
	for _, name := range r.names {
		n := m.names[name]
		n.queue = slices.DeleteFunc(n.queue, func(h string) bool { return h == r.hold })
	}
	r.waiting = false
}

// Attempt makes the first attempt of a request, whose hold id the model does not know: what
// one run of multi_acquire.lua (or, for a fair request, lock_acquire.lua) with its "first"
// flag does on the server.
//
//   - If every name is free with nobody queued, the request takes them all, each until now
//     plus its lease: Acquired.
//   - Otherwise a free name kept for the live head of its queue, another request, is handed
//     to that head first (see the type's doc). Without enqueue the attempt then fails (Busy)
//     and nothing else changes: no name is reserved for it.
//   - With enqueue it waits (Queued), from now on a live waiter with a liveness deadline of
//     now plus the waiter timeout and the next arrival number: it joins the tail of the
//     queue of every name held by, or reserved for, another request, and each name that is
//     free with nobody queued is reserved for it until its deadline.
//
// Attempt panics on misuse (see the type's doc).
func (m *Multi) Attempt(now Time, r MultiRequest, enqueue bool) MultiResult {
	const op = "Multi.Attempt"
	checkOwner(op, r.Hold)
	m.checkTime(op, now)
	deadline(op, now, r.Lease)
	if _, ok := m.reqs[r.Hold]; ok {
		panic(fmt.Sprintf("model: %s of %s, a hold id the model knows already (the real lock makes a fresh one for every call)", op, r.Hold))
	}
	names := slices.Clone(r.Names)
	slices.Sort(names)
	names = slices.Compact(names)
	switch {
	case len(names) == 0:
		panic(fmt.Sprintf("model: %s of %s with no names", op, r.Hold))
	case names[0] == "":
		panic(fmt.Sprintf("model: %s of %s with an empty name", op, r.Hold))
	case r.Fair && len(names) != 1:
		panic(fmt.Sprintf("model: %s of %s, a fair request for %d names", op, r.Hold, len(names)))
	}
	if enqueue {
		deadline(op, now, m.waiterTimeout)
	}
	m.at(op, now)
	req := &multiReq{hold: r.Hold, names: names, lease: r.Lease, fair: r.Fair}
	m.reqs[r.Hold] = req
	for _, name := range names {
		if m.names[name] == nil {
			m.names[name] = &multiName{}
		}
	}
	return m.attempt(now, req, enqueue, true)
}

// AttemptAgain makes a later attempt of the request of hold: what one run of
// multi_acquire.lua (lock_acquire.lua) without its "first" flag does on the server, as the
// waiter's Client sends it when a grant message comes or its fallback timer fires. It is
// Attempt, but for what a request that cannot take every name does:
//
//   - A fair request that holds its name (it was handed it) reports Granted, and nothing
//     changes.
//   - A name free and kept for another live head is handed to it first, as by Attempt.
//   - If every name is free with nobody queued, or the request's own, or free with it at
//     the head of the queue, it takes them all with its lease: Acquired (a multi-lock's
//     request that had them all already renews them so).
//   - A request that is not a live waiter then gives up whatever it still had (its names
//     pass on to the next live heads) and is Dropped: the real caller starts over under a
//     new hold id. (A fair request's attempt without enqueue does not ask: it is Busy, and
//     nothing changes.)
//   - Without enqueue a live waiter changes nothing (Busy).
//   - With enqueue a live waiter keeps its place in every queue and its liveness deadline
//     becomes now plus the waiter timeout (Queued); a multi-lock's request also reserves each
//     free name whose queue it heads, and extends every name reserved for it to that
//     deadline.
//
// AttemptAgain panics on misuse (see the type's doc).
func (m *Multi) AttemptAgain(now Time, hold string, enqueue bool) MultiResult {
	const op = "Multi.AttemptAgain"
	r := m.request(op, now, hold)
	deadline(op, now, m.waiterTimeout)
	m.at(op, now)
	return m.attempt(now, r, enqueue, false)
}

// name states of one attempt or heartbeat (multi_state in _multi.lua).
const (
	stBlocked = iota // held by, or reserved for, another request
	stOwn            // the request's own
	stHead           // free, with the request the live head of its queue
	stFree           // free, with nobody queued
)

// states reads the request's names for an attempt or heartbeat, handing each free name kept
// for another live head to that head.
func (m *Multi) states(now Time, r *multiReq) (st []int, all, fresh bool) {
	all, fresh = true, true
	for _, name := range r.names {
		n := m.names[name]
		s := stBlocked
		switch {
		case n.owner == r.hold:
			s = stOwn
		case n.owner == "" && len(n.queue) == 0:
			s = stFree
		case n.owner == "" && n.queue[0] == r.hold:
			s = stHead
		case n.owner == "":
			m.handOff(name, now)
		}
		st = append(st, s)
		all = all && s != stBlocked
		fresh = fresh && s == stFree
	}
	return st, all, fresh
}

// remaining returns the milliseconds until the shortest claim on a name of r held by
// another request ends.
func (m *Multi) remaining(now Time, r *multiReq) int64 {
	wait := int64(math.MaxInt64)
	for _, name := range r.names {
		if n := m.names[name]; n.owner != "" && n.owner != r.hold {
			wait = min(wait, int64(n.until-now))
		}
	}
	return max(wait, 1)
}

// take makes r the holder of all its names, each until now plus its lease.
func (m *Multi) take(now Time, r *multiReq, st []int) {
	for i, name := range r.names {
		n := m.names[name]
		if st[i] == stHead {
			n.queue = slices.Delete(n.queue, 0, 1)
		}
		n.owner, n.until = r.hold, now+Time(r.lease)
	}
	r.waiting = false
}

// attempt is Attempt (first) or AttemptAgain, after at.
func (m *Multi) attempt(now Time, r *multiReq, enqueue, first bool) MultiResult {
	if r.fair && !first && m.names[r.names[0]].owner == r.hold {
		return MultiResult{Status: Granted}
	}
	st, all, fresh := m.states(now, r)
	switch {
	case fresh || (all && (first || r.waiting || m.owns(r))):
		m.take(now, r, st)
		return MultiResult{Status: Acquired, Granted: m.granted(r.hold)}
	case !first && !r.waiting && (enqueue || !r.fair):
		// Not a live waiter (a fair request's attempt without enqueue does not ask).
		m.giveUp(now, r)
		return MultiResult{Status: Dropped, Granted: m.granted(r.hold)}
	}
	res := MultiResult{Status: Busy, Remaining: m.remaining(now, r)}
	if !enqueue {
		res.Granted = m.granted(r.hold)
		return res
	}
	res.Status = Queued
	r.deadline = now + Time(m.waiterTimeout)
	for i, name := range r.names {
		n := m.names[name]
		switch {
		case first && st[i] == stFree:
			n.owner, n.until = r.hold, r.deadline
		case first:
			n.queue = append(n.queue, r.hold)
		case r.fair:
		case st[i] == stHead:
			n.queue = slices.Delete(n.queue, 0, 1)
			n.owner, n.until = r.hold, r.deadline
		case st[i] == stOwn:
			n.until = r.deadline
		}
	}
	if first {
		r.waiting = true
		m.arrivals++
		r.arrival = m.arrivals
	}
	res.Granted = m.granted(r.hold)
	return res
}

// Heartbeat keeps the waiter of hold alive, as the real Client does for its waiters in
// batches: what one run of multi_heartbeat.lua (lock_heartbeat.lua) does.
//
//   - A live waiter's liveness deadline becomes now plus the waiter timeout; it keeps its
//     place in every queue, and BeatQueued is the reply, unless the heartbeat completes it.
//     A fair waiter at the head of its free name takes it (BeatGranted, holding until its
//     lease or its new deadline, whichever comes first). A multi-lock's waiter reserves each
//     free name whose queue it heads (any other free name is handed to its own live head
//     first) and extends every name reserved for it to its new deadline; if every name is
//     then its own, it holds them all until that deadline and the reply is BeatGranted (its
//     Client renews them to its lease).
//   - A request that holds already (a multi-lock's that took its names, or a fair request
//     handed its name, which learns it now) gets BeatGranted, and nothing changes: a
//     heartbeat never shortens a hold.
//   - Any other request is not waiting (its deadline passed, it gave up or was dropped, or
//     it lost what it held): BeatDropped. A multi-lock's request gives up whatever it still
//     had then, as an attempt does.
//
// The holds listed after the status are the other requests the heartbeat completed (see
// MultiResult.Granted).
//
// Heartbeat panics on misuse (see the type's doc).
func (m *Multi) Heartbeat(now Time, hold string) (BeatStatus, []string) {
	const op = "Multi.Heartbeat"
	r := m.request(op, now, hold)
	m.at(op, now)
	if r.fair {
		n := m.names[r.names[0]]
		switch {
		case r.waiting && n.owner == "" && n.queue[0] == r.hold:
			r.deadline = now + Time(m.waiterTimeout)
			m.handOff(r.names[0], now)
			return BeatGranted, nil
		case r.waiting:
			r.deadline = now + Time(m.waiterTimeout)
			return BeatQueued, nil
		case n.owner == r.hold:
			return BeatGranted, nil
		}
		return BeatDropped, nil
	}
	if !r.waiting && m.owns(r) {
		return BeatGranted, nil
	}
	st, all, _ := m.states(now, r)
	if !r.waiting {
		m.giveUp(now, r)
		return BeatDropped, m.granted(r.hold)
	}
	r.deadline = now + Time(m.waiterTimeout)
	for i, name := range r.names {
		n := m.names[name]
		switch st[i] {
		case stHead:
			n.queue = slices.Delete(n.queue, 0, 1)
			n.owner, n.until = r.hold, r.deadline
		case stOwn:
			n.until = r.deadline
		}
	}
	if all {
		r.waiting = false
		return BeatGranted, m.granted(r.hold)
	}
	return BeatQueued, m.granted(r.hold)
}

// Renew sets the claim on every name of hold's request to end at now+lease and reports true,
// if every name is the request's own (it holds them, or they are reserved for it and it
// learnt so from a heartbeat); from then on it holds them, and is no longer a waiter. A lease
// of 0 only checks. If any name is not its own, Renew reports false and changes nothing: a
// lost hold is never revived.
//
// Renew panics on misuse (see the type's doc), or if lease is negative.
func (m *Multi) Renew(now Time, hold string, lease int64) bool {
	const op = "Multi.Renew"
	r := m.request(op, now, hold)
	if lease < 0 {
		panic(fmt.Sprintf("model: %s with negative lease %d ms", op, lease))
	}
	if lease > 0 {
		deadline(op, now, lease)
	}
	m.at(op, now)
	if !m.owns(r) {
		return false
	}
	if lease > 0 {
		for _, name := range r.names {
			m.names[name].until = now + Time(lease)
		}
		r.waiting = false
	}
	return true
}

// Release ends the hold of hold's request: each of its names that is still its own is handed
// in the same step to the live head of its queue (see the type's doc), or freed when nobody
// waits. If the request lacked a name (its lease ran out, or it never had it), Release
// returns ErrNotOwner; the names it still had are released all the same, and Released says
// how many.
//
// Release panics on misuse (see the type's doc), and if the request is a live waiter: the
// real lock releases only a hold it has (the script would hand on the names reserved for the
// waiter, and leave it in the other queues).
func (m *Multi) Release(now Time, hold string) (MultiReleaseResult, error) {
	const op = "Multi.Release"
	r := m.request(op, now, hold)
	if r.waiting && now < r.deadline {
		panic(fmt.Sprintf("model: %s of %s, a live waiter", op, hold))
	}
	m.at(op, now)
	var res MultiReleaseResult
	for _, name := range r.names {
		if m.names[name].owner == r.hold {
			m.handOff(name, now)
			res.Released++
		}
	}
	res.Granted = m.granted(r.hold)
	if res.Released < len(r.names) {
		return res, ErrNotOwner
	}
	return res, nil
}

// GiveUp is a request's clean-up when it stops waiting (its context ended or its wait bound
// passed), or when the outcome of its attempt is unknown: it leaves nothing behind. It leaves
// every queue it waits in; each name that is its own (held, or reserved for it), and each
// free name kept for it at the head of its queue, passes on to the live head of the queue
// at once, as by a release.
//
// GiveUp panics on misuse (see the type's doc).
func (m *Multi) GiveUp(now Time, hold string) MultiGiveUpResult {
	const op = "Multi.GiveUp"
	r := m.request(op, now, hold)
	m.at(op, now)
	st := m.giveUp(now, r)
	return MultiGiveUpResult{Status: st, Granted: m.granted(r.hold)}
}

// giveUp is GiveUp after at.
func (m *Multi) giveUp(now Time, r *multiReq) GiveUpStatus {
	had := GaveUpNothing
	for _, name := range r.names {
		n := m.names[name]
		switch i := slices.Index(n.queue, r.hold); {
		case i >= 0:
			n.queue = slices.Delete(n.queue, i, i+1)
			if i == 0 && n.owner == "" {
				m.handOff(name, now)
			}
			had = max(had, LeftQueue)
		case n.owner == r.hold:
			m.handOff(name, now)
			had = PassedOn
		}
	}
	r.waiting = false
	return had
}

// Owner returns the hold that holds name, or has it reserved: "" when the name is free (even
// if it is kept for the head of its queue).
func (m *Multi) Owner(now Time, name string) string {
	m.at("Multi.Owner", now)
	if n := m.names[name]; n != nil {
		return n.owner
	}
	return ""
}

// RemainingLease returns the milliseconds (>= 1) until the claim on name ends; ok is false,
// with 0, when the name is free.
func (m *Multi) RemainingLease(now Time, name string) (ms int64, ok bool) {
	m.at("Multi.RemainingLease", now)
	if n := m.names[name]; n != nil && n.owner != "" {
		return int64(n.until - now), true
	}
	return 0, false
}

// Queue returns the live waiters queued for name in arrival order, head first; a new slice
// on every call, nil when nobody waits. A waiter that has name reserved is not in it.
func (m *Multi) Queue(now Time, name string) []string {
	m.at("Multi.Queue", now)
	if n := m.names[name]; n != nil && len(n.queue) > 0 {
		return slices.Clone(n.queue)
	}
	return nil
}

// Waiting reports whether hold's request is a live waiter: queued, or holding reservations,
// or handed every name without having learnt it yet.
func (m *Multi) Waiting(now Time, hold string) bool {
	m.at("Multi.Waiting", now)
	r, ok := m.reqs[hold]
	return ok && r.waiting
}

// Holds reports whether every name of hold's request is its own (held, or reserved for it).
func (m *Multi) Holds(now Time, hold string) bool {
	m.at("Multi.Holds", now)
	r, ok := m.reqs[hold]
	return ok && m.owns(r)
}
