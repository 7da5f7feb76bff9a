package model

import (
	"fmt"
	"slices"
)

// Election is the reference model of one leader election (package election): candidates
// queue on the fair lock of the election's name, modelled by a [Fair], and the holder of that
// lock leads from the moment the leader record names it.
//
// # Candidates
//
// A candidate is one Campaign call, named by its hold id as every request of the fair lock
// is. Its first attempt ([Election.Attempt]) tells the model the lease its hold will have,
// the lock's lease of the candidate's Client (its watchdog timeout); its later attempts,
// heartbeats and give-up are the fair lock's ([Fair.AttemptAgain], [Fair.Heartbeat],
// [Fair.GiveUp]), so candidates hold the lock one at a time, in the order their first
// attempts came (their arrival order), each until it resigns, gives up, or its lease runs out,
// and a waiter whose liveness deadline passed is out of the queue. A fair lock's request on
// the same name is a candidate that never leads: the election and the fair lock are one lock.
//
// # Leading
//
// Holding the lock is not leading yet. The holder leads once [Election.Lead] (one run of
// elect_lead.lua, which Campaign makes once its hold was granted) wrote the leader record:
// the holder's hold id, its fencing token, a revision of 1, and its value. The token is the
// hold's, kept in the lock's value: assigned at its first Lead, strictly greater than every
// token the model assigned before, the same for every later call while the hold lasts, and
// gone with it. [Election.Proclaim] replaces the
// value and adds one to the revision, keeping the token. The record expires as the hold does:
// at Lead it lasts the hold's lease from then, and each renewal of the hold
// ([Election.Renew]) extends it with the lock, whichever hold it names. So the record lasts at
// least as long as the hold that it names.
//
// [Election.Leader] reports the record while it names the lock's current holder; when the
// lock is free, or held by a hold that has not led (yet), or the record expired, nobody leads.
// So leadership ends exactly when the hold does: at [Election.Resign], which hands the lock
// to the next live candidate in the same step as [Fair.Release] with end does, at a give-up
// or forced release, or when the lease runs out. The record of a former leader is left in
// place, stale, until the next leader's Lead replaces it or it expires.
//
// # Changes
//
// Each Lead that writes the record and each Proclaim publishes one change, the record as it
// became ([Election.Changes]), on the election's channel. Their order is the order of the
// calls, and so increasing in (token, revision): tokens grow from one leader to the next, and
// revisions within one leadership. [ElectionObserver] is what one Observe makes of them.
//
// # Time and misuse
//
// Every method takes the current logical time and panics if it is earlier than a time already
// passed to this model. Misuse that only a buggy caller commits panics, and a call that
// panics changes nothing: an empty hold, a non-positive lease, a first attempt under a hold id
// the model knows already (the real election makes a fresh one for every Campaign), a later
// call under a hold id whose first attempt the model was never told of, a later attempt of a
// hold that led, and an Election not made by [NewElection].
type Election struct {
	clock
	lock   *Fair
	leases map[string]int64 // each candidate's lease, by hold, from its first attempt
	led    map[string]bool  // the holds that led

	tokenHold string // the hold whose fencing token token is, while it holds the lock ("" when none has one)
	token     int64
	lastToken int64 // the greatest token assigned, 0 before the first

	rec     Leadership // the leader record; Hold is "" when there is none
	recEnds Time       // the record is gone at this time

	changes []Leadership // every change published, in order
}

// Leadership is the leader record of an election, and a change published on its channel:
// the leading hold, its fencing token, the record's revision (1 when the hold began to lead,
// one more for each Proclaim) and its value.
type Leadership struct {
	Hold     string
	Token    int64
	Revision int64
	Value    string
}

// Before reports whether l comes before o in the order of changes: by token, then by
// revision.
func (l Leadership) Before(o Leadership) bool {
	return l.Token < o.Token || l.Token == o.Token && l.Revision < o.Revision
}

// LeadResult is the reply of [Election.Lead].
type LeadResult struct {
	// Led reports that the hold leads: the record names it. It is false when the hold does not
	// hold the lock (any more), and nothing changed then.
	Led bool
	// Token and Revision are the hold's fencing token and the record's revision when Led.
	Token    int64
	Revision int64
}

// NewElection returns an election whose lock is free, with nobody queued and no leader
// record, and whose waiters stay live for waiterTimeout milliseconds after their latest
// attempt or heartbeat. It panics if waiterTimeout is not positive.
func NewElection(waiterTimeout int64) *Election {
	if waiterTimeout <= 0 {
		panic(fmt.Sprintf("model: NewElection with non-positive waiter timeout %d ms", waiterTimeout))
	}
	return &Election{lock: NewFair(waiterTimeout), leases: map[string]int64{}, led: map[string]bool{}}
}

// made panics on an Election not made by NewElection.
func (m *Election) made(op string) {
	if m.lock == nil {
		panic("model: " + op + " on an Election not made by NewElection")
	}
}

// checkTime panics, changing nothing, if now is before the model's time.
func (m *Election) checkTime(op string, now Time) {
	m.made(op)
	if m.started && now < m.now {
		m.observe(op, now) // panics
	}
}

// candidate returns the lease of hold's candidate, panicking if the model was never told of
// its first attempt.
func (m *Election) candidate(op string, now Time, hold string) int64 {
	checkOwner(op, hold)
	m.checkTime(op, now)
	lease, ok := m.leases[hold]
	if !ok {
		panic(fmt.Sprintf("model: %s of %s, whose first attempt the model was never told of", op, hold))
	}
	return lease
}

// at moves the model to time now: the record expires, and the lock's holds and waiters as
// [Fair] says; a token goes with the hold whose lease ran out (it was in the lock's value).
func (m *Election) at(op string, now Time) {
	m.made(op)
	m.observe(op, now)
	if m.rec.Hold != "" && now >= m.recEnds {
		m.rec = Leadership{}
	}
	if m.tokenHold != "" && m.holder(now) != m.tokenHold {
		m.tokenHold, m.token = "", 0
	}
}

// holder returns the lock's holder at now ("" when free).
func (m *Election) holder(now Time) string {
	h, _, _ := m.lock.Holder(now)
	return h
}

// Attempt makes the first attempt of a candidate whose hold id the model does not know, to
// hold the lock for lease milliseconds: [Fair.Attempt], with the lease remembered for the
// candidate's later calls. Campaign always waits (enqueue); a fair lock's TryLock on the
// election's name does not.
func (m *Election) Attempt(now Time, hold string, lease int64, enqueue bool) FairResult {
	const op = "Election.Attempt"
	checkOwner(op, hold)
	m.checkTime(op, now)
	deadline(op, now, lease)
	if _, ok := m.leases[hold]; ok {
		panic(fmt.Sprintf("model: %s of %s, a hold id the model knows already (the real election makes a fresh one for every Campaign)", op, hold))
	}
	m.at(op, now)
	m.leases[hold] = lease
	return m.lock.Attempt(now, hold, lease, enqueue)
}

// AttemptAgain makes a later attempt of the candidate of hold, with its lease:
// [Fair.AttemptAgain]. A candidate that was handed the lock learns it so (Acquired, with its
// hold as it is), and leads only once it made its Lead. It panics for a hold that led: a
// Campaign's attempts all come before its Lead.
func (m *Election) AttemptAgain(now Time, hold string, enqueue bool) FairResult {
	const op = "Election.AttemptAgain"
	lease := m.candidate(op, now, hold)
	if m.led[hold] {
		panic(fmt.Sprintf("model: %s of %s, which led (a Campaign's attempts all come before its Lead)", op, hold))
	}
	m.at(op, now)
	return m.lock.AttemptAgain(now, hold, lease, enqueue)
}

// Heartbeat keeps the waiting candidate of hold alive: [Fair.Heartbeat].
func (m *Election) Heartbeat(now Time, hold string) bool {
	const op = "Election.Heartbeat"
	m.candidate(op, now, hold)
	m.at(op, now)
	return m.lock.Heartbeat(now, hold)
}

// GiveUp is a candidate's clean-up when its Campaign stops waiting: [Fair.GiveUp]. A
// candidate that was handed the lock passes it on, and so ends its leadership if it had led
// already (a Campaign that failed after its Lead gives its hold back with
// [Election.Resign]).
func (m *Election) GiveUp(now Time, hold string) GiveUpResult {
	const op = "Election.GiveUp"
	m.candidate(op, now, hold)
	m.at(op, now)
	return m.lock.GiveUp(now, hold)
}

// Lead makes the holder of the lock the leader: what one run of elect_lead.lua does.
//
//   - If hold does not hold the lock (it was never handed it, resigned, or its lease ran
//     out), Led is false and nothing changes.
//   - Otherwise the hold gets its fencing token, if it has none yet: one more than the
//     greatest the model assigned.
//   - If the record names hold already (a second run, after a lost reply), the reply is its
//     token and revision, and nothing else changes.
//   - Otherwise the record is written anew: hold, its token, revision 1 and value, expiring
//     the hold's lease from now. The change is published ([Election.Changes]).
//
// Lead panics on misuse (see the type's doc).
func (m *Election) Lead(now Time, hold, value string) LeadResult {
	const op = "Election.Lead"
	lease := m.candidate(op, now, hold)
	ends := deadline(op, now, lease)
	m.at(op, now)
	if m.holder(now) != hold {
		return LeadResult{}
	}
	if m.tokenHold != hold {
		m.lastToken++
		m.tokenHold, m.token = hold, m.lastToken
	}
	if m.rec.Hold == hold {
		return LeadResult{Led: true, Token: m.token, Revision: m.rec.Revision}
	}
	m.led[hold] = true
	m.rec = Leadership{Hold: hold, Token: m.token, Revision: 1, Value: value}
	m.recEnds = ends
	m.changes = append(m.changes, m.rec)
	return LeadResult{Led: true, Token: m.token, Revision: 1}
}

// Proclaim replaces the leader's value: what one run of elect_proclaim.lua does. If hold
// holds the lock and the record names it, the revision goes up by one, the token stays, the
// change is published and Proclaim returns the new revision; the record's expiry does not
// change. Otherwise (hold does not lead: it never did, resigned, or its hold ended) it
// returns 0 and nothing changes.
//
// Proclaim panics on misuse (see the type's doc).
func (m *Election) Proclaim(now Time, hold, value string) int64 {
	const op = "Election.Proclaim"
	m.candidate(op, now, hold)
	m.at(op, now)
	if m.holder(now) != hold || m.rec.Hold != hold {
		return 0
	}
	m.rec.Revision++
	m.rec.Value = value
	m.changes = append(m.changes, m.rec)
	return m.rec.Revision
}

// Renew renews hold's hold of the lock to now plus its lease, as [Fair.Renew] does, and, when
// it did, the leader record with it, whichever hold the record names: what one run of
// lock_renew.lua with the record beside the lock does for the Client's watchdog, which renews
// every hold with the lease it began with. A hold that no longer holds the lock is not renewed
// (Renew reports false), nor is the record.
//
// Renew panics on misuse (see the type's doc).
func (m *Election) Renew(now Time, hold string) bool {
	const op = "Election.Renew"
	lease := m.candidate(op, now, hold)
	ends := deadline(op, now, lease)
	m.at(op, now)
	if !m.lock.Renew(now, hold, lease) {
		return false
	}
	if m.rec.Hold != "" {
		m.recEnds = ends
	}
	return true
}

// Resign ends hold's hold, and so its leadership, and hands the lock to the live head of the
// queue in the same step: [Fair.Release] with end. It returns ErrNotOwner, changing nothing,
// if hold does not hold the lock. The record is left as it is: it names a hold that no
// longer holds, which is no leader.
//
// Resign panics on misuse (see the type's doc).
func (m *Election) Resign(now Time, hold string) (ReleaseResult, error) {
	const op = "Election.Resign"
	m.candidate(op, now, hold)
	m.at(op, now)
	return m.lock.Release(now, hold, true)
}

// ForceRelease ends the current hold, whoever has it, and hands the lock on:
// [Fair.ForceRelease], as aqs unlock --force does.
func (m *Election) ForceRelease(now Time) (held bool, granted string) {
	const op = "Election.ForceRelease"
	m.checkTime(op, now)
	m.at(op, now)
	return m.lock.ForceRelease(now)
}

// Leader returns the leader: the record, while it names the lock's holder. ok is false, with
// the zero Leadership, when nobody leads: the lock is free, its holder has not led, or the
// record expired.
func (m *Election) Leader(now Time) (Leadership, bool) {
	const op = "Election.Leader"
	m.checkTime(op, now)
	m.at(op, now)
	if h := m.holder(now); h == "" || m.rec.Hold != h {
		return Leadership{}, false
	}
	return m.rec, true
}

// Holder returns the hold that holds the election's lock, leading or not; ok is false, with
// "", when the lock is free (even if it is kept for the head of the queue).
func (m *Election) Holder(now Time) (hold string, ok bool) {
	const op = "Election.Holder"
	m.checkTime(op, now)
	m.at(op, now)
	h := m.holder(now)
	return h, h != ""
}

// Queue returns the live waiting candidates in arrival order, head first: [Fair.Queue].
func (m *Election) Queue(now Time) []string {
	const op = "Election.Queue"
	m.checkTime(op, now)
	m.at(op, now)
	return m.lock.Queue(now)
}

// Changes returns every change published so far, in the order it was published: a new slice
// on every call, nil before the first Lead.
func (m *Election) Changes(now Time) []Leadership {
	const op = "Election.Changes"
	m.checkTime(op, now)
	m.at(op, now)
	return slices.Clone(m.changes)
}

// ElectionObserver is the reference model of one Observe of an election: of the changes it
// hears, which it reports, and what its receiver takes from its channel. It hears the changes
// published on the election's channel while it is subscribed, in their order, and, each time
// its subscription is confirmed (at first, and again after a broken one), the leader read
// then ([Election.Leader]), so a change it missed while it was not subscribed is replaced by
// the current leader, if any.
//
// It reports a change it hears only when the change comes after the last one it heard in the
// order of changes ([Leadership.Before]), and not even then when that change has the same
// token and value as the last one it heard: its reports are increasing in (token, revision).
// Its channel holds one report: a report the receiver has not taken ([ElectionObserver.Receive])
// is replaced by the next, and a report that would bring back the token and value the
// receiver took last is not sent at all. So the receiver finds the latest change, never the
// same token and value twice in a row, and once it took what its channel holds it has the
// token and value of the last change heard.
//
// The zero ElectionObserver has heard nothing.
type ElectionObserver struct {
	last Leadership // the last change heard
	seen bool

	slot Leadership // the report in the channel, while full
	full bool
	took Leadership // the last report the receiver took
	tkn  bool
}

// Hear gives the observer a change, published or read; it reports whether the observer
// sends it on its channel.
func (o *ElectionObserver) Hear(l Leadership) bool {
	if o.seen && !o.last.Before(l) {
		return false
	}
	same := o.seen && l.Token == o.last.Token && l.Value == o.last.Value
	o.last, o.seen = l, true
	if same {
		return false
	}
	o.full = false // a report not taken is replaced
	if o.tkn && l.Token == o.took.Token && l.Value == o.took.Value {
		return false
	}
	o.slot, o.full = l, true
	return true
}

// Receive takes the report the observer's channel holds; ok is false when it holds none.
func (o *ElectionObserver) Receive() (l Leadership, ok bool) {
	if !o.full {
		return Leadership{}, false
	}
	o.full, o.took, o.tkn = false, o.slot, true
	return o.slot, true
}

// Last returns the last change the observer heard and kept (whether it reported it or not);
// ok is false when it has heard none.
func (o *ElectionObserver) Last() (Leadership, bool) { return o.last, o.seen }
