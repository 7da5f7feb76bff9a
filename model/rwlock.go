package model

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// RW is the reference model of one read-write lock (Redisson's
// RReadWriteLock): any number of readers, or one writer, hold it at a time;
// the writer may also hold read holds of its own (a downgrade); writers that
// wait are remembered so that, in fair mode, new readers do not starve them;
// and every reply tells the caller whom the real lock must wake.
//
// # Holds
//
// Every operation names a hold: the id the real lock makes fresh for each
// Lock or RLock call. One hold id is one attempt to lock and, once it
// succeeds, one hold; the holder re-enters with [RW.ReadReenter] or
// [RW.WriteReenter], never with another attempt. A write hold and a read hold
// are distinct ids. The model keeps the two kinds apart (the writer and the
// readers are separate tables), so the same string could name both a write
// hold and a read hold without the two mixing; callers do not do that.
//
// At any time the lock has at most one writer, with a hold count and an
// expiry, and a set of readers, each with its own hold count and expiry. A
// hold lasts until it is released or its lease runs out: at now >= its expiry
// it is gone, as a Redis key or field whose deadline has passed.
//
// # Exclusion and downgrade
//
// A writer is admitted only when there is neither a live writer nor a live
// reader. A reader is admitted while a live writer holds only if it names
// that writer's hold as writerHold in [RW.ReadAttempt]: the writer's holder
// takes a read hold while keeping the write hold (a downgrade, as Redisson
// allows). Such a read hold records the write hold it was taken under; when
// the write hold ends (released, expired or forced open) it stays, as an
// ordinary reader, and keeps new writers out until it ends too. So at every
// instant, if the writer is live, every live reader is a downgrade of that
// writer's hold.
//
// # Waiting writers and fairness
//
// A writer whose attempt fails with wait is a waiting writer until its
// deadline, which that attempt and every [RW.WriterHeartbeat] set to now plus
// the writer timeout given to [NewRW]. A waiting writer is dead at now >= its
// deadline: from that instant it is absent everywhere and a late heartbeat
// does not revive it. Waiting writers form a set, not a queue: a free lock
// goes to whichever writer attempts first, waiting or not, and a writer that
// acquires stops waiting.
//
// In fair mode a reader that is not a downgrade is refused while any live
// writer waits, even when no writer holds the lock, so a steady stream of
// readers cannot starve a writer: once the readers that held when the writer
// began to wait have gone, the writer's next attempt succeeds (unless another
// writer got in first). In non-fair mode waiting writers never keep readers
// out; they only decide the wakes below.
//
// # Wakes
//
// The model does not notify anyone; instead the replies say whom the real
// lock publishes a wake to, so that its waiters need not poll:
//
//   - the waiting writers, when the last live reader leaves (or the writer
//     leaves with no live reader) while no writer holds and a live writer
//     waits (WakeWriter of [RW.ReadRelease] and [RW.WriteRelease]);
//   - the waiting readers, when the writer's hold ends, and when the last
//     live waiting writer gives up while no writer holds (WakeReaders of
//     [RW.WriteRelease] and [RW.WriterGiveUp]).
//
// Waiting readers are not tracked one by one: a reader attempt that fails
// with wait only sets a flag, readersWaiting ([RW.ReadersWaiting]), and a
// reported wake of the readers clears it. [RW.ForceRelease] clears it too,
// since the real lock always wakes both readers and writers there.
//
// # Time and misuse
//
// Every method but ReadersWaiting, Fair and WriterTimeout takes the current
// logical time and panics if it is earlier than a time already passed to
// this model. Expired holds and dead waiting writers behave as absent
// everywhere; the model drops them at the first call that observes them,
// queries included, which never changes a later reply since expiry and death
// depend on time alone. Misuse that only a buggy caller commits (an empty
// hold, a non-positive lease, a negative renewal lease, an RW not made by
// NewRW) panics, and a call that panics changes nothing.
type RW struct {
	clock
	writerTimeout int64 // ms a waiting writer stays live after its latest attempt or heartbeat
	fair          bool  // a waiting writer keeps new readers out

	writer   string // "" when no writer holds
	wcount   int    // hold count of writer, > 0 while held
	wExpires Time   // the write hold is gone at this time

	readers        map[string]rwReader // live read holds, after every observe
	waiting        map[string]Time     // live waiting writers and their deadlines, after every observe
	readersWaiting bool                // a reader attempt failed with wait since the last wake of the readers
}

// rwReader is one read hold.
type rwReader struct {
	count       int    // > 0
	expires     Time   // the read hold is gone at this time
	downgradeOf string // write hold under which it was taken while that writer is live, else ""
}

// ErrNotHeld is returned by [RW.ReadRelease] and [RW.WriteRelease] when the
// hold is not a live reader, or not the live writer: it never acquired, it
// already ended, or its lease ran out. The model is left unchanged. It is
// the same error as [ErrNotOwner], under the name the read-write lock's
// contract uses, so errors.Is matches either.
var ErrNotHeld = ErrNotOwner

// AttemptResult is the reply of WriteAttempt and ReadAttempt.
type AttemptResult struct {
	// Acquired reports whether the attempt created the caller's hold.
	Acquired bool
	// Remaining is, when the attempt fails, the milliseconds (always >= 1)
	// until the obstacle that refused it is due to go away without anyone
	// releasing: the writer's remaining lease, the earliest expiry among
	// the live readers (for a writer), or the latest deadline among the
	// live waiting writers (for a reader refused in fair mode). A waiter
	// that hears no wake should attempt again after at most that long. It
	// is 0 when Acquired.
	Remaining int64
}

// ReadReleaseResult is the reply of a successful ReadRelease.
type ReadReleaseResult struct {
	// Count is the read hold's count after the call; 0 means the hold
	// ended.
	Count int
	// WakeWriter reports that the real lock must wake the waiting writers:
	// the hold ended, it was the last live reader, no writer holds and a
	// live writer waits.
	WakeWriter bool
}

// WriteReleaseResult is the reply of a successful WriteRelease.
type WriteReleaseResult struct {
	// Count is the write hold's count after the call; 0 means the hold
	// ended.
	Count int
	// WakeReaders reports that the real lock must wake the waiting readers:
	// the hold ended and a reader attempt had failed with wait since the
	// last wake of the readers.
	WakeReaders bool
	// WakeWriter reports that the real lock must wake the waiting writers:
	// the hold ended, no live reader is left (no downgrade of it either)
	// and a live writer waits.
	WakeWriter bool
}

// NewRW returns a free read-write lock with no waiting writer, whose waiting
// writers stay live for writerTimeout milliseconds after their latest
// WriteAttempt with wait or WriterHeartbeat, and which keeps new readers out
// while a writer waits if fair is set. It panics if writerTimeout is not
// positive.
func NewRW(writerTimeout int64, fair bool) *RW {
	if writerTimeout <= 0 {
		panic(fmt.Sprintf("model: NewRW with non-positive writer timeout %d ms", writerTimeout))
	}
	return &RW{
		writerTimeout: writerTimeout,
		fair:          fair,
		readers:       map[string]rwReader{},
		waiting:       map[string]Time{},
	}
}

// WriterTimeout returns the writer timeout given to NewRW, in milliseconds.
func (m *RW) WriterTimeout() int64 {
	return m.writerTimeout
}

// Fair reports whether the lock was made fair by NewRW.
func (m *RW) Fair() bool {
	return m.fair
}

// made panics on an RW not made by NewRW, whose waiting writers would die
// the instant they began to wait.
func (m *RW) made(op string) {
	if m.writerTimeout <= 0 {
		panic("model: " + op + " on an RW not made by NewRW")
	}
}

// at moves the model to time now and applies expiry: an expired write hold
// ends (its downgrades become ordinary readers), expired read holds are gone
// and dead waiting writers stop waiting. Called first by every method that
// takes a time, so the fields describe the lock at the current time.
func (m *RW) at(op string, now Time) {
	m.made(op)
	m.observe(op, now)
	if m.writer != "" && now >= m.wExpires {
		m.endWrite()
	}
	maps.DeleteFunc(m.readers, func(_ string, r rwReader) bool { return now >= r.expires })
	maps.DeleteFunc(m.waiting, func(_ string, deadline Time) bool { return now >= deadline })
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

// remaining returns the milliseconds from now until at, at least 1: the
// Remaining of a failed attempt.
func remaining(now, at Time) int64 {
	return max(int64(at-now), 1)
}

// WriteAttempt makes one attempt by hold to take the write side for lease
// milliseconds: what one run of the write-acquire script does on the server.
//
//   - If a live writer holds the lock, whatever its hold (hold's own
//     included: an attempt never re-enters, that is WriteReenter's job), the
//     attempt fails with Remaining the writer's remaining lease.
//   - Otherwise, if any live reader holds, it fails with Remaining the time
//     until the earliest live read hold expires. Waiting writers, in either
//     mode, are no obstacle to a writer.
//   - Otherwise hold becomes the writer with count 1 and expiry now+lease,
//     and stops waiting if it was a waiting writer.
//
// A failed attempt with wait makes hold a waiting writer, or keeps it one,
// with its deadline now plus the writer timeout. A failed attempt without
// wait (TryLock) changes nothing, not even the deadline of a hold that
// waits.
//
// WriteAttempt panics if hold is empty or lease is not positive.
func (m *RW) WriteAttempt(now Time, hold string, lease int64, wait bool) AttemptResult {
	const op = "RW.WriteAttempt"
	checkOwner(op, hold)
	m.made(op)
	at := deadline(op, now, lease)
	var waitUntil Time
	if wait {
		waitUntil = deadline(op, now, m.writerTimeout)
	}
	m.at(op, now)

	var r AttemptResult
	switch {
	case m.writer != "":
		r.Remaining = remaining(now, m.wExpires)
	case len(m.readers) > 0:
		first := slices.MinFunc(slices.Collect(maps.Values(m.readers)), func(a, b rwReader) int { return cmp.Compare(a.expires, b.expires) })
		r.Remaining = remaining(now, first.expires)
	default:
		m.writer, m.wcount, m.wExpires = hold, 1, at
		delete(m.waiting, hold)
		return AttemptResult{Acquired: true}
	}
	if wait {
		m.waiting[hold] = waitUntil
	}
	return r
}

// ReadAttempt makes one attempt by hold to take a read hold for lease
// milliseconds: what one run of the read-acquire script does on the server.
// writerHold is the write hold the caller holds, if any (its context's), ""
// otherwise.
//
//   - If a live writer holds the lock and writerHold is not its hold (or is
//     ""), the attempt fails with Remaining the writer's remaining lease.
//   - If a live writer holds the lock and writerHold is its hold, hold gets a
//     read hold taken under that write hold (a downgrade). Fairness does not
//     apply: the writer's holder never waits for writers that wait for it.
//   - If no writer holds, the lock is fair and some live writer waits, the
//     attempt fails with Remaining the time until the latest deadline among
//     the live waiting writers (after which, if none of them heartbeats or
//     acquires, none waits any more).
//   - Otherwise hold gets an ordinary read hold. With no live writer,
//     writerHold is ignored: naming a write hold that ended or expired
//     neither bypasses fairness nor marks the hold as a downgrade.
//
// A new read hold has count 1 and expiry now+lease. An attempt never
// re-enters (that is ReadReenter's job): if hold already is a live reader,
// a successful attempt replaces its hold by the new one, count and expiry
// included. A failed attempt with wait sets the readers-waiting flag; one
// without wait (TryRLock) changes nothing. A successful attempt leaves the
// flag alone.
//
// ReadAttempt panics if hold is empty or lease is not positive.
func (m *RW) ReadAttempt(now Time, hold string, lease int64, writerHold string, wait bool) AttemptResult {
	const op = "RW.ReadAttempt"
	checkOwner(op, hold)
	m.made(op)
	at := deadline(op, now, lease)
	m.at(op, now)

	var r AttemptResult
	switch {
	case m.writer != "" && m.writer != writerHold:
		r.Remaining = remaining(now, m.wExpires)
	case m.writer != "":
		m.readers[hold] = rwReader{count: 1, expires: at, downgradeOf: m.writer}
		return AttemptResult{Acquired: true}
	case m.fair && len(m.waiting) > 0:
		r.Remaining = remaining(now, slices.Max(slices.Collect(maps.Values(m.waiting))))
	default:
		m.readers[hold] = rwReader{count: 1, expires: at}
		return AttemptResult{Acquired: true}
	}
	if wait {
		m.readersWaiting = true
	}
	return r
}

// ReadReenter re-enters hold's read hold: if hold is a live reader its count
// goes up by one and ReadReenter reports true; the expiry does not change
// (renewal is ReadRenew's job). Otherwise it reports false and changes
// nothing. Re-entry looks neither at the writer nor at waiting writers: a
// reader that holds may always re-enter, in fair mode too.
//
// ReadReenter panics if hold is empty.
func (m *RW) ReadReenter(now Time, hold string) bool {
	const op = "RW.ReadReenter"
	checkOwner(op, hold)
	m.at(op, now)
	r, ok := m.readers[hold]
	if !ok {
		return false
	}
	r.count++
	m.readers[hold] = r
	return true
}

// WriteReenter re-enters hold's write hold: if hold is the live writer its
// count goes up by one and WriteReenter reports true; the expiry does not
// change. Otherwise it reports false and changes nothing.
//
// WriteReenter panics if hold is empty.
func (m *RW) WriteReenter(now Time, hold string) bool {
	const op = "RW.WriteReenter"
	checkOwner(op, hold)
	m.at(op, now)
	if m.writer != hold {
		return false
	}
	m.wcount++
	return true
}

// ReadRelease gives up one acquisition of hold's read hold, or, with last,
// the whole hold whatever its count. The caller says last when its own
// bookkeeping says this is its last acquisition.
//
//   - Without last, a count above 1 goes down by one and Count reports it.
//     At count 1 nothing changes and Count is 1: only a release with last
//     ends a hold. The expiry never changes.
//   - With last, the hold ends and Count is 0. WakeWriter reports whether
//     the waiting writers must be woken: no live reader is left, no writer
//     holds (the hold was not a downgrade of a live writer) and a live
//     writer waits.
//
// If hold is not a live reader (it never acquired, it ended, or its lease
// ran out) ReadRelease returns ErrNotHeld and changes nothing; in particular
// an expiry wakes nobody.
//
// ReadRelease panics if hold is empty.
func (m *RW) ReadRelease(now Time, hold string, last bool) (ReadReleaseResult, error) {
	const op = "RW.ReadRelease"
	checkOwner(op, hold)
	m.at(op, now)
	r, ok := m.readers[hold]
	if !ok {
		return ReadReleaseResult{}, ErrNotHeld
	}
	if !last {
		if r.count > 1 {
			r.count--
			m.readers[hold] = r
		}
		return ReadReleaseResult{Count: r.count}, nil
	}
	delete(m.readers, hold)
	return ReadReleaseResult{WakeWriter: len(m.readers) == 0 && m.writer == "" && len(m.waiting) > 0}, nil
}

// WriteRelease gives up one acquisition of hold's write hold, or, with last,
// the whole hold whatever its count.
//
//   - Without last, a count above 1 goes down by one and Count reports it.
//     At count 1 nothing changes and Count is 1. The expiry never changes.
//   - With last, the write hold ends and Count is 0. Read holds taken under
//     it (downgrades) stay, as ordinary readers. WakeReaders reports the
//     readers-waiting flag, which is then cleared; WakeWriter reports
//     whether no live reader is left and a live writer waits.
//
// If hold is not the live writer WriteRelease returns ErrNotHeld and
// changes nothing.
//
// WriteRelease panics if hold is empty.
func (m *RW) WriteRelease(now Time, hold string, last bool) (WriteReleaseResult, error) {
	const op = "RW.WriteRelease"
	checkOwner(op, hold)
	m.at(op, now)
	if m.writer != hold {
		return WriteReleaseResult{}, ErrNotHeld
	}
	if !last {
		if m.wcount > 1 {
			m.wcount--
		}
		return WriteReleaseResult{Count: m.wcount}, nil
	}
	m.endWrite()
	r := WriteReleaseResult{
		WakeReaders: m.readersWaiting,
		WakeWriter:  len(m.readers) == 0 && len(m.waiting) > 0,
	}
	m.readersWaiting = false
	return r, nil
}

// WriterGiveUp is a waiting writer's cleanup when it stops waiting (its
// context ended or its wait bound passed): hold stops waiting, whether it
// was a live waiting writer or not. Nothing else about hold changes; a
// writer that holds the lock keeps it.
//
// It reports whether the waiting readers must be woken, which clears the
// readers-waiting flag: that is so when the flag is set, no writer holds and
// no live writer waits any more (in fair mode, the last writer that kept
// readers out has just left). The reply does not depend on whether hold
// itself was waiting.
//
// WriterGiveUp panics if hold is empty.
func (m *RW) WriterGiveUp(now Time, hold string) (wakeReaders bool) {
	const op = "RW.WriterGiveUp"
	checkOwner(op, hold)
	m.at(op, now)
	delete(m.waiting, hold)
	wakeReaders = m.readersWaiting && m.writer == "" && len(m.waiting) == 0
	if wakeReaders {
		m.readersWaiting = false
	}
	return wakeReaders
}

// WriterHeartbeat keeps a waiting writer alive: if hold is a live waiting
// writer, its deadline becomes now plus the writer timeout and
// WriterHeartbeat reports true. Otherwise it reports false and changes
// nothing: hold never waited, gave up, acquired, or its deadline passed (a
// dead waiting writer is not revived; its hold must attempt again).
//
// WriterHeartbeat panics if hold is empty.
func (m *RW) WriterHeartbeat(now Time, hold string) bool {
	const op = "RW.WriterHeartbeat"
	checkOwner(op, hold)
	m.made(op)
	at := deadline(op, now, m.writerTimeout)
	m.at(op, now)
	if _, ok := m.waiting[hold]; !ok {
		return false
	}
	m.waiting[hold] = at
	return true
}

// ReadRenew sets the expiry of hold's read hold to now+lease and reports
// true, if hold is a live reader; the count does not change. A lease of 0
// only checks. A renewal may shorten the lease; the latest lease asked for
// wins. If hold is not a live reader ReadRenew reports false and changes
// nothing: a lost hold is never revived.
//
// ReadRenew panics if hold is empty or lease is negative.
func (m *RW) ReadRenew(now Time, hold string, lease int64) bool {
	const op = "RW.ReadRenew"
	checkOwner(op, hold)
	var at Time
	if lease != 0 {
		at = deadline(op, now, lease)
	}
	m.at(op, now)
	r, ok := m.readers[hold]
	if !ok {
		return false
	}
	if lease != 0 {
		r.expires = at
		m.readers[hold] = r
	}
	return true
}

// WriteRenew sets the expiry of hold's write hold to now+lease and reports
// true, if hold is the live writer; the count does not change, nor do the
// expiries of read holds taken under it. A lease of 0 only checks. A renewal
// may shorten the lease. If hold is not the live writer WriteRenew reports
// false and changes nothing.
//
// WriteRenew panics if hold is empty or lease is negative.
func (m *RW) WriteRenew(now Time, hold string, lease int64) bool {
	const op = "RW.WriteRenew"
	checkOwner(op, hold)
	var at Time
	if lease != 0 {
		at = deadline(op, now, lease)
	}
	m.at(op, now)
	if m.writer != hold {
		return false
	}
	if lease != 0 {
		m.wExpires = at
	}
	return true
}

// ForceRelease ends every hold, the writer's and all readers', whatever
// their counts, and reports whether the lock was held by anyone (expired
// holds do not count). It clears the readers-waiting flag whether or not
// the lock was held, since the real lock always publishes a wake of the
// readers and of the writers here. Waiting writers keep waiting.
func (m *RW) ForceRelease(now Time) (held bool) {
	m.at("RW.ForceRelease", now)
	held = m.writer != "" || len(m.readers) > 0
	m.writer, m.wcount, m.wExpires = "", 0, 0
	clear(m.readers)
	m.readersWaiting = false
	return held
}

// Writer returns the live writer's hold and count; ok is false, with "" and
// 0, when no writer holds.
func (m *RW) Writer(now Time) (hold string, count int, ok bool) {
	m.at("RW.Writer", now)
	return m.writer, m.wcount, m.writer != ""
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

// WaitingWriters returns the live waiting writers, sorted; a new slice on
// every call, empty (nil) when no writer waits.
func (m *RW) WaitingWriters(now Time) []string {
	m.at("RW.WaitingWriters", now)
	if len(m.waiting) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(m.waiting))
}

// ReadersWaiting reports the readers-waiting flag: a reader attempt failed
// with wait since the readers were last woken. It does not depend on time.
func (m *RW) ReadersWaiting() bool {
	return m.readersWaiting
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
