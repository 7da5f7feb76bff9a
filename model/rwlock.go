package model

import (
	"fmt"
	"maps"
	"slices"
)

// RW is the reference model of one read-write lock (the rwlock/ package; the
// rw_*.lua scripts): any number of readers, or one writer, hold it at a time;
// the writer may also take read holds of its own (a downgrade; a read hold is
// never upgraded); and readers and writers that wait form one FIFO queue,
// served as Java's AbstractQueuedSynchronizer serves a
// ReentrantReadWriteLock. Every operation is one run of one script, with the
// same reply.
//
// # Holds
//
// Every operation names a hold: the id the real lock makes fresh for each
// Lock or RLock call (and again when a waiter is told it was dropped). One
// hold id is one attempt to lock, made of a first attempt ([RW.WriteAttempt],
// [RW.ReadAttempt]) and, while it waits, retries ([RW.WriteRetry],
// [RW.ReadRetry]): the scripts' final ARGV, "1" for the first and "0" for a
// retry. Once it succeeds it is one hold, re-entered with [RW.WriteReenter]
// or [RW.ReadReenter].
// The writer and the readers are separate tables, so the same string could
// name a write hold and a read hold without the two mixing; callers do not
// do that. The first 36 characters of a real hold id are its Client's id,
// which is how the real lock sorts grants by Client; the model never looks
// inside a hold id.
//
// The lock has at most one writer, with a hold count and an expiry, and any
// number of readers, each with its own hold count and expiry. A hold lasts
// until it is released or its lease runs out: at now >= its expiry it is
// gone everywhere, as a Redis key or a zset score whose deadline has passed.
//
// # Exclusion and downgrade
//
// A write hold is made (by an attempt or a grant) only when no live writer
// and no live reader holds. A read hold is made while a live writer holds
// only by a downgrade: a read attempt whose writerHold is that writer's
// hold. Such a read hold is taken at once, whatever waits; when the write
// hold ends (released, expired, given up or forced) it stays, as an ordinary
// reader, and keeps writers out until it ends too. So at every instant, if
// a writer is live, every live reader was taken under it.
//
// # The queue
//
// A failed first attempt that asks to wait joins the queue, which is the
// Redis list q and the zset d of _queue.lua, modelled as they are. A queue
// entry is a member: the hold, the lease it asked for and its mode
// ([Shared] for a reader, [Exclusive] for a writer), all three together (in
// Redis the member is the string "<hold> <lease> <s|x>"). The list holds
// entries in arrival order; the deadline table holds each entry's liveness
// deadline, now plus the waiter timeout given to [NewRW], set by the first
// attempt that joins and renewed by every failed retry that asks to wait and
// by every [RW.Heartbeat]. An entry in the list with no deadline is a ghost:
// the trace of a waiter that gave up, was told it was dropped, or took its
// hold by a retry (see the non-fair mode), away from the head.
//
// A waiter is live while now < its deadline and dead from then on. A dead
// waiter is never granted anything, never counted by [RW.Queue], and never
// renewed: a heartbeat or a retry that finds its deadline passed removes the
// deadline and replies [BeatDropped] or [Dropped], and the real caller
// starts over under a new hold id. Only the head is ever examined, so dead
// entries and ghosts leave the list when they reach its head (when the
// queue is served, or looked at by a fair read attempt).
//
// A failed retry that asks to wait never joins: it keeps its entry's place
// (renewing its deadline) only while the entry is live. A retry whose entry
// has no deadline (it passed the head as dead, it left, it was granted and
// that grant has ended since) or a passed one replies [Dropped], its
// deadline removed if it had one, and the real caller starts over under a
// new hold id: so no hold id is ever queued twice, and a late grant message
// of the old one grants nothing.
//
// A first attempt joins without looking whether its member is queued
// already (a real caller's never is: its hold id is fresh). Such a member
// then has two entries in the list and one deadline; it is served from its
// first entry, and the other is a ghost after that. So a first attempt by a
// hold whose entry stayed behind as a ghost (after a give-up or a Dropped
// reply) has its ghost back: it is served from the ghost's place.
//
// # Serving
//
// Serving the queue, when no live writer holds, grants the live head what it
// waits for while it can have it: a writer only when no live reader holds,
// and then nobody after it; a reader always, and then the next waiter. So
// the readers at the head up to the next writer are granted together, and a
// writer is granted alone, when the readers ahead of it have gone. A grant
// removes the entry and makes a hold with count 1 whose lease is the lease
// the waiter asked for, cut at the waiter's liveness deadline: max(1,
// min(lease, deadline - now)). A waiter that died just before its turn
// holds no longer than it would have stalled the queue; a live one renews
// its lease once it learns of the grant. A grant to a hold that is already
// a live reader only sets its expiry so: that takes a member that is queued
// and reads at once, which only a first attempt of a queued hold makes (the
// short path, below), and no real caller does.
//
// The queue is served by: a write attempt, and a read attempt that does not
// take the short path (below), when no writer holds, before they decide; the
// end of a write hold by [RW.WriteRelease] and of a read hold by
// [RW.ReadRelease]; [RW.Serve]; a [RW.Heartbeat] of a live waiter; every
// [RW.GiveUp]; and a [RW.ForceRelease] that released something. Nothing is
// served when a lease runs out: no script runs then. The next of those
// operations serves the queue, typically the head's heartbeat or its retry
// when its fallback timer (the Wait of its last attempt) fires.
//
// # Fair and non-fair
//
// The mode is fixed by NewRW. A write attempt, in either mode, takes the
// write side only when no writer holds, no reader's lease runs, and no live
// waiter is left once the queue has been served (so nobody is ahead).
//
// In the fair mode a read attempt takes a read hold only when no writer
// holds and no live waiter other than itself is left at the head once the
// queue has been served: a newcomer never passes a live waiter, and a
// reader waits at most for the writers queued ahead of it, a writer for the
// holds ahead of it.
//
// In the non-fair mode a read attempt takes a read hold whenever no writer
// holds, whatever waits: a first attempt without serving the queue (the
// short path, below), a retry once it has served it (which may grant a
// writer at the head, which then refuses the retry). A retry that takes its
// hold so leaves the queue, as a give-up does: its entry loses its deadline
// and leaves the list if it is the head, and elsewhere stays behind as a
// ghost; so a reader never holds and waits at once, and is never granted
// twice. The queue is still served in order by the other operations. A new
// reader may therefore pass a writer that waits at the head, and a stream
// of overlapping readers can keep that writer waiting for as long as it
// lasts.
//
// # The read attempt's short path
//
// rw_read_acquire.lua first tries a short path, for a first attempt only:
// when no writer holds, the attempt names no writerHold, and the lock is
// non-fair or the queue's list is empty (ghosts and dead entries included),
// it makes the read hold at once and replies [Acquired]. A retry never takes
// it (a retry may have been granted already, and must be told so). The short
// path looks at nothing else, so
//
//   - a first attempt by a hold that is already a live reader gets its
//     expiry set to now+lease (its count unchanged) and [Acquired], where
//     the full path replies [Granted] and changes nothing;
//   - a first attempt by a hold that is queued (in the non-fair mode) takes
//     its hold and keeps its entry, which is served in its turn like any
//     other (see Serving);
//   - in the non-fair mode the queue is not served; the full path, taken
//     when writerHold names a write hold that is no longer live, serves it
//     first and so may grant a writer at the head, which then refuses the
//     attempt.
//
// The first two are misuse no real caller commits (its first attempt is
// under a fresh hold id); the model follows both paths exactly.
//
// # Replies
//
// Every reply that may come with grants lists the holds granted by that
// call, in the order they were granted, the caller's own included (a write
// or read attempt whose own grant comes from its serve replies [Granted]).
// The real lock publishes each grant to the granted hold's Client, or, for
// the caller's own Client, returns it (the attempts, releases and rw_serve;
// the heartbeat, the give-up and the forced release publish every grant); a
// test splits the list by Client id. An attempt's own grant is neither: the
// script takes it out of the list, and its status, Granted, says it.
// The wait of a failed attempt, always >= 1, is how long the caller may
// wait at most before it tries again without a message: the writer's
// remaining lease when a writer holds, else the time until the nearest
// reader's lease ends (1 when, in the fair mode, nothing runs out).
//
// # What is not modelled
//
// The Redis keys other than the writer's (the readers' zset and re-entry
// hash, the queue's list and zset) carry TTLs that only clean up abandoned
// keys; the model takes them as never running out while they hold anything
// that matters. They do not: every script that makes or renews a read hold
// keeps the readers' zset alive for its lease, a re-entry and every
// renewal ([RW.ReadRenew], rw_read_renew.lua's KEYS[2]) keep the re-entry
// hash alive for the hold's lease, and every join and heartbeat keeps the
// queue's keys alive for twice the waiter timeout. A read hold whose lease
// ran out is gone at once here, whereas its zset entry stays until a script
// removes it or the key expires: the model ignores that entry, as the
// scripts do (they count a read hold only while its score is in the future;
// a forced release of it, too, reports nothing held). Likewise its
// re-entries stay in the hash until a release, a give-up or a forced
// release removes them: a hold id that is made a reader again after its
// lease ran out (a first attempt under it, which no real caller makes) has
// count 1 here, 1 plus those re-entries in Redis. The writer's fencing token
// is not modelled.
//
// # Time and misuse
//
// Every method takes the current logical time and panics if it is earlier
// than a time already passed to this model.
// Expired holds are dropped at the first call that observes them, queries
// included, which never changes a later reply since expiry depends on time
// alone. Misuse that only a buggy caller commits (an empty hold, a
// non-positive lease where a lease is asked for, a negative renewal lease,
// an unknown mode, an RW not made by NewRW) panics, and a call that panics
// changes nothing.
type RW struct {
	clock
	waiterTimeout int64 // ms a waiter stays live after its latest waiting attempt or heartbeat
	fair          bool

	writer   string // "" when no writer holds
	wcount   int    // hold count of writer, > 0 while held
	wExpires Time   // the write hold is gone at this time

	readers map[string]rwReader // live read holds, after every at

	queue     []rwMember        // the list q: entries in arrival order, live, dead and ghosts
	deadlines map[rwMember]Time // the zset d: the liveness deadline of every entry that is not a ghost
}

// Mode is what a waiter of a read-write lock waits for; its values are the
// letters of the queue members in Redis.
type Mode byte

// The modes.
const (
	Shared    Mode = 's' // a reader
	Exclusive Mode = 'x' // a writer
)

func (md Mode) String() string {
	switch md {
	case Shared:
		return "s"
	case Exclusive:
		return "x"
	}
	return fmt.Sprintf("mode(%d)", byte(md))
}

// rwMember is one queue entry: what identifies it in Redis.
type rwMember struct {
	hold  string
	lease int64 // ms asked for
	mode  Mode
}

// rwReader is one read hold.
type rwReader struct {
	count       int    // > 0
	expires     Time   // the read hold is gone at this time
	downgradeOf string // the live write hold it was taken under, else ""
}

// RWWaiter is one live waiter of the queue, as [RW.Queue] reports it.
type RWWaiter struct {
	Hold     string
	Mode     Mode
	Lease    int64 // ms asked for; a grant's lease is this, cut at Deadline
	Deadline Time  // the waiter is dead at now >= Deadline
}

// ErrNotHeld is returned by [RW.ReadRelease] and [RW.WriteRelease] when the
// hold is not a live reader, or not the live writer: it never acquired, it
// already ended, or its lease ran out. The model is left unchanged. It is
// the same error as [ErrNotOwner], under the name the read-write lock's
// contract uses, so errors.Is matches either.
var ErrNotHeld = ErrNotOwner

// RWAttempt is the reply of [RW.WriteAttempt] and [RW.ReadAttempt].
type RWAttempt struct {
	Status Status
	// Wait is, for Queued and Busy, the milliseconds (>= 1) the caller may
	// wait at most before it attempts again without a message; 0 otherwise.
	Wait int64
	// Grants are the holds the call granted by serving the queue, in order.
	Grants []string
}

// RWRelease is the reply of a successful [RW.WriteRelease] or
// [RW.ReadRelease].
type RWRelease struct {
	// Count is the hold's count after the call; 0 means the hold ended.
	Count int
	// Grants are the holds granted by serving the queue when the hold
	// ended, in order.
	Grants []string
}

// NewRW returns a free read-write lock with an empty queue whose waiters
// stay live for waiterTimeout milliseconds after their latest waiting
// attempt or heartbeat, in the fair mode if fair is set. It panics if
// waiterTimeout is not positive.
func NewRW(waiterTimeout int64, fair bool) *RW {
	if waiterTimeout <= 0 {
		panic(fmt.Sprintf("model: NewRW with non-positive waiter timeout %d ms", waiterTimeout))
	}
	return &RW{
		waiterTimeout: waiterTimeout,
		fair:          fair,
		readers:       map[string]rwReader{},
		deadlines:     map[rwMember]Time{},
	}
}

// made panics on an RW not made by NewRW, whose waiters would die the
// instant they queued.
func (m *RW) made(op string) {
	if m.waiterTimeout <= 0 {
		panic("model: " + op + " on an RW not made by NewRW")
	}
}

// at moves the model to time now and applies expiry: an expired write hold
// ends (its downgrades become ordinary readers) and expired read holds are
// gone. The queue is left as it is: its dead entries leave it as in Redis.
func (m *RW) at(op string, now Time) {
	m.made(op)
	m.observe(op, now)
	if m.writer != "" && now >= m.wExpires {
		m.endWrite()
	}
	maps.DeleteFunc(m.readers, func(_ string, r rwReader) bool { return now >= r.expires })
}

// endWrite ends the write hold; the read holds taken under it stay, as
// ordinary readers.
func (m *RW) endWrite() {
	for hold, r := range m.readers {
		if r.downgradeOf == m.writer {
			r.downgradeOf = ""
			m.readers[hold] = r
		}
	}
	m.writer, m.wcount, m.wExpires = "", 0, 0
}

// addReader sets hold's read hold to expire at expires (ZADD): a new hold
// has count 1, a live one keeps its count.
func (m *RW) addReader(hold string, expires Time, under string) {
	r, ok := m.readers[hold]
	if !ok {
		r.count = 1
	}
	r.expires, r.downgradeOf = expires, under
	m.readers[hold] = r
}

// firstReadExpiry returns the earliest expiry among the live readers, which
// must exist (live_first).
func (m *RW) firstReadExpiry() Time {
	first := Time(-1)
	for _, r := range m.readers {
		if first < 0 || r.expires < first {
			first = r.expires
		}
	}
	return first
}

// holdsIt reports whether hold has what mode waits for (holds_it).
func (m *RW) holdsIt(hold string, mode Mode) bool {
	if mode == Exclusive {
		return m.writer == hold
	}
	_, ok := m.readers[hold]
	return ok
}

// pop removes the head of the list.
func (m *RW) pop() {
	m.queue = slices.Delete(m.queue, 0, 1)
}

// liveHead drops dead entries and ghosts at the head of the list and
// returns the live head and its deadline, which stays queued (live_head).
func (m *RW) liveHead(now Time) (rwMember, Time, bool) {
	for len(m.queue) > 0 {
		x := m.queue[0]
		if d, ok := m.deadlines[x]; ok && d > now {
			return x, d, true
		}
		m.pop()
		delete(m.deadlines, x)
	}
	return rwMember{}, 0, false
}

// join, for a first attempt (fresh), puts x at the tail with deadline
// until, without looking whether x is queued already; for a retry it renews
// the deadline of a live x in its place, and reports false, removing x's
// deadline, when x has none or a passed one (join).
func (m *RW) join(x rwMember, now, until Time, fresh bool) bool {
	if !fresh {
		if d, ok := m.deadlines[x]; !ok || d <= now {
			delete(m.deadlines, x)
			return false
		}
		m.deadlines[x] = until
		return true
	}
	m.deadlines[x] = until
	m.queue = append(m.queue, x)
	return true
}

// leave removes x's deadline, and x's entry if it is the head, and reports
// whether x was a live waiter (leave).
func (m *RW) leave(x rwMember, now Time) bool {
	d, ok := m.deadlines[x]
	if !ok {
		return false
	}
	delete(m.deadlines, x)
	if len(m.queue) > 0 && m.queue[0] == x {
		m.pop()
	}
	return d > now
}

// serve grants the live head what it waits for while it can have it, and
// returns the holds granted in order (serve in _rw.lua; see the type's doc).
func (m *RW) serve(now Time) []string {
	if len(m.queue) == 0 || m.writer != "" {
		return nil
	}
	readers := len(m.readers) > 0
	var granted []string
	for {
		x, d, ok := m.liveHead(now)
		if !ok || (x.mode == Exclusive && readers) {
			return granted
		}
		m.pop()
		delete(m.deadlines, x)
		until := now + Time(max(1, min(x.lease, int64(d-now))))
		granted = append(granted, x.hold)
		if x.mode == Exclusive {
			m.writer, m.wcount, m.wExpires = x.hold, 1, until
			return granted
		}
		m.addReader(x.hold, until, "")
		readers = true
	}
}

// failed ends a failed attempt by x: Busy without join, else x joins (a
// first attempt) or renews its place (a retry) or, a retry whose entry is
// not live, is Dropped.
func (m *RW) failed(now Time, x rwMember, wait int64, join, first bool, grants []string) RWAttempt {
	switch {
	case !join:
		return RWAttempt{Status: Busy, Wait: max(wait, 1), Grants: grants}
	case !m.join(x, now, now+Time(m.waiterTimeout), first):
		return RWAttempt{Status: Dropped, Grants: grants}
	}
	return RWAttempt{Status: Queued, Wait: max(wait, 1), Grants: grants}
}

// WriteAttempt makes the first attempt of hold to take the write side for
// lease milliseconds, joining the queue on failure if join is set: one run
// of rw_write_acquire.lua with ARGV[7] "1". [RW.WriteRetry] is a later one.
//
//   - If hold is the live writer (granted while it waited, or this attempt
//     is a repeat), the reply is Granted and nothing changes: an attempt
//     never re-enters.
//   - Otherwise, when no writer holds, the queue is served first. If that
//     grants hold (it was the live head), the reply is Granted.
//   - Then the attempt fails if a writer holds (Wait is its remaining
//     lease) or a reader's lease runs (Wait is the time until the nearest
//     reader's lease ends). Otherwise nobody is ahead: hold becomes the
//     writer with count 1 and expiry now+lease, its own queue entry loses
//     its deadline if it had one, and the reply is Acquired.
//
// A failed attempt without join replies Busy and changes nothing more. With
// join, hold joins the tail of the queue as an Exclusive waiter with this
// lease (without looking whether it is queued already: see the type's doc),
// its deadline now plus the waiter timeout, and the reply is Queued.
//
// WriteAttempt panics if hold is empty or lease is not positive.
func (m *RW) WriteAttempt(now Time, hold string, lease int64, join bool) RWAttempt {
	return m.writeAttempt("RW.WriteAttempt", now, hold, lease, join, true)
}

// WriteRetry makes a later attempt of hold, a waiter, to take the write
// side: one run of rw_write_acquire.lua with ARGV[7] "0". It is
// [RW.WriteAttempt] but for a failure with join: if hold's Exclusive entry
// with this lease is live, its deadline becomes now plus the waiter timeout,
// in its place, and the reply is Queued; if it has no deadline or a passed
// one, the deadline is removed and the reply is Dropped (see the queue in
// the type's doc). A retry never joins.
//
// WriteRetry panics if hold is empty or lease is not positive.
func (m *RW) WriteRetry(now Time, hold string, lease int64, join bool) RWAttempt {
	return m.writeAttempt("RW.WriteRetry", now, hold, lease, join, false)
}

func (m *RW) writeAttempt(op string, now Time, hold string, lease int64, join, first bool) RWAttempt {
	checkOwner(op, hold)
	m.made(op)
	until := deadline(op, now, lease)
	if join {
		deadline(op, now, m.waiterTimeout) // the join's deadline must not overflow either
	}
	m.at(op, now)

	if m.writer == hold {
		return RWAttempt{Status: Granted}
	}
	var grants []string
	if m.writer == "" {
		grants = m.serve(now)
		if slices.Contains(grants, hold) {
			return RWAttempt{Status: Granted, Grants: grants}
		}
	}
	x := rwMember{hold, lease, Exclusive}
	switch {
	case m.writer != "":
		return m.failed(now, x, int64(m.wExpires-now), join, first, grants)
	case len(m.readers) > 0:
		return m.failed(now, x, int64(m.firstReadExpiry()-now), join, first, grants)
	}
	delete(m.deadlines, x)
	m.writer, m.wcount, m.wExpires = hold, 1, until
	return RWAttempt{Status: Acquired, Grants: grants}
}

// ReadAttempt makes the first attempt of hold to take a read hold for lease
// milliseconds, joining the queue on failure if join is set: one run of
// rw_read_acquire.lua with ARGV[8] "1". [RW.ReadRetry] is a later one.
// writerHold is the write hold of the caller's context (a downgrade), or "".
//
//   - The short path: if no writer holds, writerHold is "", and the lock is
//     non-fair or the queue's list is empty, hold's read hold is set to
//     expire at now+lease (a new one with count 1, a live one keeping its
//     count) and the reply is Acquired. See the type's doc.
//   - A downgrade: if writerHold is the live writer's hold, hold's read hold
//     is set so at once, whatever waits, and the reply is Acquired.
//   - If hold is a live reader, the reply is Granted and nothing changes.
//   - Otherwise, when no writer holds, the queue is served. If that grants
//     hold, the reply is Granted.
//   - Then the attempt fails if a writer holds (Wait is its remaining
//     lease). Otherwise, in the fair mode, it fails if the live head of the
//     queue (dead entries and ghosts before it leave the list) is another
//     entry than hold's with this lease: Wait is the time until the nearest
//     reader's lease ends, 1 if none. Otherwise hold's read hold is set to
//     expire at now+lease and the reply is Acquired; a first attempt's
//     entry, if it has one, stays queued (see the short path).
//
// A failed attempt ends as [RW.WriteAttempt]'s does: Busy without join;
// with join, Queued, joining the tail as a Shared waiter (as it does).
//
// ReadAttempt panics if hold is empty or lease is not positive.
func (m *RW) ReadAttempt(now Time, hold string, lease int64, writerHold string, join bool) RWAttempt {
	return m.readAttempt("RW.ReadAttempt", now, hold, lease, writerHold, join, true)
}

// ReadRetry makes a later attempt of hold, a waiter, to take a read hold:
// one run of rw_read_acquire.lua with ARGV[8] "0". It is [RW.ReadAttempt]
// but that
//
//   - it never takes the short path;
//   - when it takes its read hold (no writer holds and, in the fair mode,
//     no live waiter but its own entry is left at the head once the queue
//     has been served), it leaves the queue: its Shared entry with this
//     lease loses its deadline, and leaves the list if it is the head;
//   - a failure with join renews the deadline of its live entry, in its
//     place (Queued), or, if that entry has no deadline or a passed one,
//     removes the deadline and replies Dropped, as [RW.WriteRetry]'s does.
//
// ReadRetry panics if hold is empty or lease is not positive.
func (m *RW) ReadRetry(now Time, hold string, lease int64, writerHold string, join bool) RWAttempt {
	return m.readAttempt("RW.ReadRetry", now, hold, lease, writerHold, join, false)
}

func (m *RW) readAttempt(op string, now Time, hold string, lease int64, writerHold string, join, first bool) RWAttempt {
	checkOwner(op, hold)
	m.made(op)
	until := deadline(op, now, lease)
	if join {
		deadline(op, now, m.waiterTimeout) // the join's deadline must not overflow either
	}
	m.at(op, now)

	if m.writer == "" && writerHold == "" && first && (!m.fair || len(m.queue) == 0) {
		m.addReader(hold, until, "")
		return RWAttempt{Status: Acquired}
	}
	if m.writer != "" && m.writer == writerHold {
		m.addReader(hold, until, m.writer)
		return RWAttempt{Status: Acquired}
	}
	if _, ok := m.readers[hold]; ok {
		return RWAttempt{Status: Granted}
	}
	var grants []string
	if m.writer == "" {
		grants = m.serve(now)
		if slices.Contains(grants, hold) {
			return RWAttempt{Status: Granted, Grants: grants}
		}
	}
	x := rwMember{hold, lease, Shared}
	if m.writer != "" {
		return m.failed(now, x, int64(m.wExpires-now), join, first, grants)
	}
	var head rwMember
	var queued bool
	if m.fair {
		head, _, queued = m.liveHead(now)
	}
	if queued && head != x {
		wait := int64(1)
		if len(m.readers) > 0 {
			wait = int64(m.firstReadExpiry() - now)
		}
		return m.failed(now, x, wait, join, first, grants)
	}
	if !first {
		m.leave(x, now)
	}
	m.addReader(hold, until, "")
	return RWAttempt{Status: Acquired, Grants: grants}
}

// WriteRelease gives up one acquisition of hold's write hold, or, with end,
// the whole hold whatever its count: one run of rw_write_release.lua.
//
//   - Without end, a count above 1 goes down by one; at count 1 nothing
//     changes (only a release with end ends a hold). Count reports the
//     count left. The expiry never changes.
//   - With end, the write hold ends, read holds taken under it stay as
//     ordinary readers, and the queue is served: Count is 0 and Grants
//     lists the holds granted.
//
// If hold is not the live writer WriteRelease returns ErrNotHeld and changes
// nothing; in particular a lease that ran out grants nobody.
//
// WriteRelease panics if hold is empty.
func (m *RW) WriteRelease(now Time, hold string, end bool) (RWRelease, error) {
	const op = "RW.WriteRelease"
	checkOwner(op, hold)
	m.at(op, now)
	if m.writer != hold {
		return RWRelease{}, ErrNotHeld
	}
	if !end {
		if m.wcount > 1 {
			m.wcount--
		}
		return RWRelease{Count: m.wcount}, nil
	}
	m.endWrite()
	return RWRelease{Grants: m.serve(now)}, nil
}

// ReadRelease gives up one acquisition of hold's read hold, or, with end,
// the whole hold whatever its count: one run of rw_read_release.lua.
//
//   - Without end, a count above 1 goes down by one; at count 1 nothing
//     changes. Count reports the count left. The expiry never changes.
//   - With end, the read hold ends and the queue is served (ending the last
//     live read hold grants the writer at the head): Count is 0 and Grants
//     lists the holds granted.
//
// If hold is not a live reader ReadRelease returns ErrNotHeld and changes
// nothing.
//
// The script has a short path for a release with end whose caller knows
// the lease still runs (ARGV[5]); it gives this reply whenever that claim
// is true, and the model has no such flag.
//
// ReadRelease panics if hold is empty.
func (m *RW) ReadRelease(now Time, hold string, end bool) (RWRelease, error) {
	const op = "RW.ReadRelease"
	checkOwner(op, hold)
	m.at(op, now)
	r, ok := m.readers[hold]
	if !ok {
		return RWRelease{}, ErrNotHeld
	}
	if !end {
		if r.count > 1 {
			r.count--
			m.readers[hold] = r
		}
		return RWRelease{Count: r.count}, nil
	}
	delete(m.readers, hold)
	return RWRelease{Grants: m.serve(now)}, nil
}

// Serve serves the queue (see the type's doc) and returns the holds granted,
// in order: one run of rw_serve.lua, which the real reader's release sends
// when its plain commands found the queue not empty.
func (m *RW) Serve(now Time) []string {
	m.at("RW.Serve", now)
	return m.serve(now)
}

// Heartbeat keeps a waiter alive: one run of rw_heartbeat.lua for the entry
// of hold with this lease and mode.
//
//   - If that entry is dead, its deadline is removed and the reply is
//     BeatDropped, whatever hold has: a dead waiter is never revived.
//   - If it is live, its deadline becomes now plus the waiter timeout, in
//     its place, and the queue is served.
//   - Then the reply is BeatGranted if hold has what mode waits for (the
//     write side, or a live read hold), else BeatQueued if the entry was
//     live, else BeatDropped.
//
// Grants lists the holds granted by serving.
//
// Heartbeat panics if hold is empty, lease is not positive or mode is
// neither Shared nor Exclusive.
func (m *RW) Heartbeat(now Time, hold string, lease int64, mode Mode) (BeatStatus, []string) {
	const op = "RW.Heartbeat"
	checkOwner(op, hold)
	checkMember(op, lease, mode)
	m.made(op)
	until := deadline(op, now, m.waiterTimeout)
	m.at(op, now)

	x := rwMember{hold, lease, mode}
	d, queued := m.deadlines[x]
	var grants []string
	if queued {
		if d <= now {
			delete(m.deadlines, x)
			return BeatDropped, nil
		}
		m.deadlines[x] = until
		grants = m.serve(now)
	}
	switch {
	case m.holdsIt(hold, mode):
		return BeatGranted, grants
	case queued:
		return BeatQueued, grants
	}
	return BeatDropped, grants
}

// GiveUp is a waiter's clean-up when it stops waiting, or the undoing of an
// attempt whose reply was lost: one run of rw_give_up.lua for hold, with the
// lease and mode of its queue entry. It leaves nothing behind:
//
//   - hold's entry loses its deadline (and leaves the list if it is the
//     head; elsewhere it stays behind as a ghost);
//   - with Exclusive, if hold is the live writer, its write hold ends
//     whatever its count (read holds taken under it stay); with Shared, if
//     hold is a live reader, its read hold ends;
//   - the queue is served, since hold may have held back those behind it.
//
// The reply is PassedOn if hold had a hold, else LeftQueue if it was a live
// waiter, else GaveUpNothing; Grants lists the holds granted.
//
// GiveUp panics if hold is empty, lease is not positive or mode is neither
// Shared nor Exclusive.
func (m *RW) GiveUp(now Time, hold string, lease int64, mode Mode) (GiveUpStatus, []string) {
	const op = "RW.GiveUp"
	checkOwner(op, hold)
	checkMember(op, lease, mode)
	m.at(op, now)

	left := m.leave(rwMember{hold, lease, mode}, now)
	had := false
	switch {
	case mode == Exclusive && m.writer == hold:
		m.endWrite()
		had = true
	case mode == Shared:
		if _, ok := m.readers[hold]; ok {
			delete(m.readers, hold)
			had = true
		}
	}
	grants := m.serve(now)
	switch {
	case had:
		return PassedOn, grants
	case left:
		return LeftQueue, grants
	}
	return GaveUpNothing, grants
}

// ForceRelease frees the lock whoever holds it, with hold "", or only what
// hold has, and then, if something was released, serves the queue: one run
// of rw_force_release.lua.
//
//   - With hold "", the writer's hold and every read hold end, whatever
//     their counts; held reports whether any of them was live.
//   - Otherwise, if hold is the live writer, its write hold ends (read holds
//     taken under it stay); else, if hold is a live reader, its read hold
//     ends; held reports whether either was so.
//
// Grants lists the holds granted. The queue itself is never touched:
// waiters leave it only by being granted, giving up or dying.
//
// A read hold whose lease ran out is not held: its zset entry, if the
// script still finds one, is removed, and the reply is not held, with
// nothing served (rw_force_release.lua).
func (m *RW) ForceRelease(now Time, hold string) (held bool, grants []string) {
	m.at("RW.ForceRelease", now)
	switch {
	case hold == "":
		held = m.writer != "" || len(m.readers) > 0
		m.writer, m.wcount, m.wExpires = "", 0, 0
		clear(m.readers)
	case m.writer == hold:
		m.endWrite()
		held = true
	default:
		if _, ok := m.readers[hold]; ok {
			delete(m.readers, hold)
			held = true
		}
	}
	if !held {
		return false, nil
	}
	return true, m.serve(now)
}

// WriteReenter re-enters hold's write hold: one run of lock_reenter.lua on
// the write side. If hold is the live writer its count goes up by one, its
// expiry becomes now+lease if that is later (lease 0 leaves it alone; a
// re-entry never shortens a lease), and WriteReenter reports true.
// Otherwise it reports false and changes nothing. Re-entry never looks at
// the queue.
//
// WriteReenter panics if hold is empty or lease is negative.
func (m *RW) WriteReenter(now Time, hold string, lease int64) bool {
	const op = "RW.WriteReenter"
	checkOwner(op, hold)
	until := renewal(op, now, lease)
	m.at(op, now)
	if m.writer != hold {
		return false
	}
	m.wcount++
	if until > m.wExpires {
		m.wExpires = until
	}
	return true
}

// ReadReenter re-enters hold's read hold: one run of rw_read_reenter.lua. If
// hold is a live reader its count goes up by one, its expiry becomes
// now+lease if that is later (lease 0 leaves it alone), and ReadReenter
// reports true. Otherwise it reports false and changes nothing. Re-entry
// looks neither at the writer nor at the queue: a reader that holds may
// always re-enter, in the fair mode too.
//
// ReadReenter panics if hold is empty or lease is negative.
func (m *RW) ReadReenter(now Time, hold string, lease int64) bool {
	const op = "RW.ReadReenter"
	checkOwner(op, hold)
	until := renewal(op, now, lease)
	m.at(op, now)
	r, ok := m.readers[hold]
	if !ok {
		return false
	}
	r.count++
	if until > r.expires {
		r.expires = until
	}
	m.readers[hold] = r
	return true
}

// WriteRenew sets the expiry of hold's write hold to now+lease and reports
// true, if hold is the live writer: one run of lock_renew.lua on the write
// side. A lease of 0 only checks. A renewal may shorten the lease. The count
// does not change, nor do the read holds taken under it. If hold is not the
// live writer WriteRenew reports false and changes nothing: a lost hold is
// never revived.
//
// WriteRenew panics if hold is empty or lease is negative.
func (m *RW) WriteRenew(now Time, hold string, lease int64) bool {
	const op = "RW.WriteRenew"
	checkOwner(op, hold)
	until := renewal(op, now, lease)
	m.at(op, now)
	if m.writer != hold {
		return false
	}
	if lease > 0 {
		m.wExpires = until
	}
	return true
}

// ReadRenew sets the expiry of hold's read hold to now+lease and reports
// true, if hold is a live reader: one run of rw_read_renew.lua. A lease of
// 0 only checks. A renewal may shorten the lease; each reader's lease is its
// own. The count is kept with the hold, as the script keeps the re-entry
// counts' hash alive for the new lease (KEYS[2]). If hold is not a live
// reader ReadRenew reports false and changes nothing.
//
// ReadRenew panics if hold is empty or lease is negative.
func (m *RW) ReadRenew(now Time, hold string, lease int64) bool {
	const op = "RW.ReadRenew"
	checkOwner(op, hold)
	until := renewal(op, now, lease)
	m.at(op, now)
	r, ok := m.readers[hold]
	if !ok {
		return false
	}
	if lease > 0 {
		r.expires = until
		m.readers[hold] = r
	}
	return true
}

// Writer returns the live writer's hold and count; ok is false, with "" and
// 0, when no writer holds.
func (m *RW) Writer(now Time) (hold string, count int, ok bool) {
	m.at("RW.Writer", now)
	return m.writer, m.wcount, m.writer != ""
}

// RemainingWrite returns the milliseconds until the write hold expires
// (always >= 1); ok is false, with 0, when no writer holds.
func (m *RW) RemainingWrite(now Time) (ms int64, ok bool) {
	m.at("RW.RemainingWrite", now)
	if m.writer == "" {
		return 0, false
	}
	return int64(m.wExpires - now), true
}

// Readers returns the live read holds, downgrades included, sorted; a new
// slice on every call, empty (nil) when nobody reads.
func (m *RW) Readers(now Time) []string {
	m.at("RW.Readers", now)
	if len(m.readers) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(m.readers))
}

// ReaderCount returns hold's read hold count: 0 if hold is not a live
// reader.
func (m *RW) ReaderCount(now Time, hold string) int {
	m.at("RW.ReaderCount", now)
	return m.readers[hold].count
}

// RemainingRead returns the milliseconds until hold's read hold expires
// (always >= 1); ok is false, with 0, when hold is not a live reader.
func (m *RW) RemainingRead(now Time, hold string) (ms int64, ok bool) {
	m.at("RW.RemainingRead", now)
	r, ok := m.readers[hold]
	if !ok {
		return 0, false
	}
	return int64(r.expires - now), true
}

// Queue returns the live waiters in the order they are served, head first:
// each live entry once, at its first place in the list. A new slice on
// every call, empty (nil) when nobody waits.
func (m *RW) Queue(now Time) []RWWaiter {
	m.at("RW.Queue", now)
	var ws []RWWaiter
	seen := map[rwMember]bool{}
	for _, x := range m.queue {
		if d, ok := m.deadlines[x]; ok && d > now && !seen[x] {
			seen[x] = true
			ws = append(ws, RWWaiter{Hold: x.hold, Mode: x.mode, Lease: x.lease, Deadline: d})
		}
	}
	return ws
}

// checkMember panics on a queue member that no caller can have: a
// non-positive lease or an unknown mode.
func checkMember(op string, lease int64, mode Mode) {
	if lease <= 0 {
		panic(fmt.Sprintf("model: %s with non-positive lease %d ms", op, lease))
	}
	if mode != Shared && mode != Exclusive {
		panic(fmt.Sprintf("model: %s with unknown mode %v", op, mode))
	}
}

// renewal returns the expiry a renewal or re-entry with lease asks for, 0
// for lease 0, panicking on a negative lease or an overflow.
func renewal(op string, now Time, lease int64) Time {
	if lease < 0 {
		panic(fmt.Sprintf("model: %s with negative lease %d ms", op, lease))
	}
	if lease == 0 {
		return 0
	}
	return deadline(op, now, lease)
}
