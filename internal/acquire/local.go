package acquire

import (
	"context"
	"runtime"
	"slices"
	"time"

	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/scripts"
)

// Hand-offs within a Client.
//
// While a hold of a Queue is held by this Client, the next thing the lock does in Redis is
// that hold's release, a script this Client sends anyway. So a goroutine of the same Client
// that asks for the lock meanwhile sends nothing: it boards, and waits for that release,
// which either
//
//   - hands it the lock straight away (a lock whose rules allow a streak of local hand-offs:
//     the reentrant lock), with no message published and no attempt of its own: a hand-off
//     within a process costs the release alone; or
//   - carries its join: the boarded waiters join the queue's tail, in the order they came,
//     before the lock is handed to the live head, which is one of them when nobody else
//     waits (the fair lock always, the reentrant lock once its streak is over). One round
//     trip per hand-off instead of two, and the join reaches Redis at most Board after the
//     call (had it sent its own, the network would have delayed it too).
//
// A release may also hand the lock to a waiter of this Client that is queued in Redis (it
// joined on its own earlier, or a release carried it), taking it out of the queue: the
// reentrant lock's streak picks the longest-waiting local waiter, boarded or queued. After
// Streak local hand-offs in a row that passed a waiter of another Client, the next release
// serves the queue, so a waiter in another process waits at most Streak+1 holds for each
// Client ahead of it.
//
// A goroutine also boards when an attempt of this Queue's that may take the lock is on its
// way, and when its own first attempt finds the lock held by another hold of this Client
// (HeldLocally: the reentrant lock's attempt says so instead of queueing it): on a busy lock
// a goroutine that released a moment ago asks again while the next holder's hand-off or
// attempt is still on its way, and boarding then keeps the hand-offs within the Client.
//
// A boarded waiter attempts on its own when no release comes within Board (with Stay: once
// no hold of this Queue is held with its lease trusted; a hold lost and never released), when
// the attempt it boarded on failed, when the release did not carry it (it failed, or it was
// sent before the waiter boarded and did not hand the lock to this Client), and when the
// release's outcome is unknown (its reply was lost: the waiter's own attempt finds out what
// it did, since attempts of a hold are idempotent). A waiter the release carries or picks
// cannot leave until it knows the release's outcome: it may hold the lock, or be queued,
// and must give that up.

type wstate uint8

const (
	wAttempting wstate = iota // makes attempts of its own
	wBoarded                  // waits for a release of this Client
	wCarried                  // a release on its way carries it
	wQueued                   // queued in Redis: a release may pick it
	wPicked                   // a release on its way may hand it the lock
	wGone                     // left
)

type okind uint8

const (
	oHanded    okind = iota + 1 // a release handed it the lock
	oJoined                     // a release joined it to the queue
	oStill                      // a release that picked it handed the lock elsewhere: as before
	oDismissed                  // no release carried it: it attempts on its own
	oUnknown                    // the release's outcome is unknown: it attempts to find out
)

// outcome is what a release did with a local waiter.
type outcome struct {
	kind  okind
	since time.Time     // when the release was sent: a lease it gave started after it
	lease time.Duration // oHanded: the lease the release gave it
	free  bool          // oDismissed: a release of this Client freed the lock (nobody queued)
}

// waiter is a local waiter that may take a hand-off.
type waiter struct {
	hold   string
	member string
	rules  Rules
	state  wstate       // under Queue.mu
	orphan bool         // left while a release was deciding about it: that release cleans up
	won    bool         // won by an attempt of its own while a release was deciding about it
	awaits bool         // its call waits for the outcome of the release deciding about it
	out    chan outcome // the latest outcome not yet read
}

// tell gives w the outcome o, replacing one it has not read. With q.mu held.
func (w *waiter) tell(o outcome) {
	select {
	case <-w.out:
	default:
	}
	w.out <- o
}

// boardable reports, with q.mu held, whether a waiter could board now: a hold of this Queue
// is held or being released (see holding), or, for a call that blocks (block), a first
// attempt that may take one is on its way (see attempting). A call with a wait bound does not
// board on an attempt: it could reach its bound boarded, without an attempt of its own, while
// the lock was free, and report that it could not have it.
func (q *Queue) boardable(block bool) bool {
	return block && q.attempts > 0 || q.holding()
}

// holding reports, with q.mu held, whether a hold of this Queue is held (its lease trusted,
// or a hand-off being taken for a moment) or a release of one is on its way (also between
// its local end and the round trip).
func (q *Queue) holding() bool {
	return q.inflight > 0 || q.held != "" && (q.heldHold != nil && (q.heldHold.LeaseTrusted() ||
		q.heldHold.Releasing()) || q.heldHold == nil && time.Since(q.heldAt) < q.cfg.Board)
}

// stillHeld reports whether a boarded waiter (of a call that blocks: block) may stay (see
// Config.Stay): as boardable.
func (q *Queue) stillHeld(block bool) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.boardable(block)
}

// maxLocals bounds the HeldLocally replies a call takes without a hand-off before it joins
// the queue as any waiter.
const maxLocals = 4

// attempting counts a first attempt of a call that may take a local hand-off (counted) until
// the function it returns is called with its outcome (hold: its hold id when it took the
// lock, "" when it did not). Only with a Streak (the reentrant lock; a fair lock's waiter
// must join in its turn): waiters board on such an attempt, since on a busy lock a goroutine
// that released a moment ago asks again while another one's attempt is on its way, and
// waiting for that attempt's hold is what keeps the hand-offs within the Client. An attempt
// that fails sends the boarded waiters to attempt on their own at once, unless a hold of
// this Queue is held or being released: a waiter never waits, unseen by Redis, for more
// than a round trip while the lock may be free.
func (q *Queue) attempting(counted bool) bool {
	if !counted || q.cfg.Streak <= 0 {
		return false
	}
	q.mu.Lock()
	q.attempts++
	q.mu.Unlock()
	return true
}

// attempted ends an attempt that attempting counted (counted: what it returned), which took
// hold, or nothing ("").
func (q *Queue) attempted(counted bool, hold string) {
	if !counted {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.attempts--
	switch {
	case hold != "":
		if q.held == "" {
			q.held, q.heldHold, q.heldAt = hold, nil, time.Now() // until won records it
		}
	case !q.holding():
		q.dismissBoarded(false)
	}
}

// board makes w, a waiter of a call that blocks or not (block), a boarded waiter if it can
// board now (see boardable), and reports whether it did.
func (q *Queue) board(w *waiter, block bool) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.boardable(block) {
		return false
	}
	w.state = wBoarded
	q.waiters = append(q.waiters, w)
	return true
}

// queued records that w is queued in Redis, where a release may pick it.
func (q *Queue) queued(w *waiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch w.state {
	case wQueued, wCarried, wPicked, wGone:
		return
	case wAttempting:
		q.waiters = append(q.waiters, w)
	}
	w.state = wQueued
}

// unboard takes w, a boarded waiter, off the local waiters to attempt on its own, and reports
// whether it did: not when a release on its way decides about it, or has decided (its
// outcome is then on its way to w.out).
func (q *Queue) unboard(w *waiter) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if w.state != wBoarded {
		w.awaits = w.state == wCarried || w.state == wPicked
		return false
	}
	q.remove(w)
	w.state = wAttempting
	return true
}

// alight takes w off the local waiters, unless a release on its way decides about it; it
// reports whether it did.
func (q *Queue) alight(w *waiter) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.drop(w)
}

// drop takes w off the local waiters, with q.mu held, unless a release on its way decides
// about it.
func (q *Queue) drop(w *waiter) bool {
	switch w.state {
	case wCarried, wPicked:
		w.awaits = true
		return false
	case wGone, wAttempting:
		w.state = wAttempting
		return true
	}
	q.remove(w)
	w.state = wAttempting
	return true
}

func (q *Queue) remove(w *waiter) {
	for i, x := range q.waiters {
		if x == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			return
		}
	}
}

// orphan marks w, which leaves while a release decides about it, so that the release gives
// up what it gave w. It reports false when the release has decided meanwhile (w can read
// the outcome).
func (q *Queue) orphan(w *waiter) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if w.state != wCarried && w.state != wPicked {
		return false
	}
	w.orphan = true
	q.rt.Defer() // the release gives it up after the waiter's call returned
	return true
}

// finish takes w, whose call won, off the local waiters; a release on its way that decides
// about it drops it then.
func (q *Queue) finish(w *waiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.drop(w) {
		w.won = true
	}
}

// heldBy records that hold, a hold of this Queue, holds the lock, with its record h.
func (q *Queue) heldBy(hold string, h *core.Hold) {
	q.mu.Lock()
	q.held, q.heldHold = hold, h
	q.mu.Unlock()
}

// Lost records that hold ended without a release of its own handing anything on (it was
// lost): the waiters boarded on it attempt on their own.
func (q *Queue) Lost(hold string) {
	q.mu.Lock()
	if q.held != hold {
		q.mu.Unlock()
		return
	}
	q.held, q.heldHold = "", nil
	q.dismissBoarded(false)
	q.mu.Unlock()
}

// dismissBoarded sends the boarded waiters to attempt on their own, with q.mu held; free
// says that a release of this Client freed the lock, with nobody queued.
func (q *Queue) dismissBoarded(free bool) {
	kept := q.waiters[:0]
	for _, w := range q.waiters {
		if w.state == wBoarded {
			w.state = wAttempting
			w.tell(outcome{kind: oDismissed, free: free})
			continue
		}
		kept = append(kept, w)
	}
	clear(q.waiters[len(kept):])
	q.waiters = kept
}

// ReleaseFunc runs a release script for the hold with the local hand-off's arguments: pick is
// the queue member of a waiter of this Client to hand the lock to ("" for none), over says
// that the release may pass other Clients' waiters only when none is queued, and riders are
// the queue members of waiters of this Client that join the queue with the release.
type ReleaseFunc func(ctx context.Context, pick string, over bool, riders []string) (scripts.Release, error)

// Release releases a hold of this Queue's through run: counted down, or, when last, ended
// with the hand-off within the Client described above. It tells the local waiters what the
// release did with them. The round trip does not use ctx's cancellation.
func (q *Queue) Release(ctx context.Context, hold string, last bool, run ReleaseFunc) (scripts.Release, error) {
	ctx = detached(ctx)
	if !last {
		return run(ctx, "", false, nil)
	}
	q.mu.Lock()
	if q.held == hold {
		q.held, q.heldHold = "", nil
	}
	q.inflight++
	var pick *waiter
	if q.cfg.Streak > 0 {
		for _, w := range q.waiters {
			if w.state == wBoarded || w.state == wQueued {
				pick = w
				break
			}
		}
	}
	over := q.streak >= q.cfg.Streak
	// The riders ride only a release that may not hand the lock to its pick: one that may
	// (its Client's streak not over) hands it over whenever the hold is still held, and never
	// joins them, so they stay boarded for the new holder's release, untold. A boarded pick
	// is carried all the same (it may not leave while the release decides about it), without
	// riding.
	var riders []*waiter
	var members []string
	for _, w := range q.waiters {
		switch {
		case w.state != wBoarded:
		case pick == nil || over:
			w.state = wCarried
			riders = append(riders, w)
			members = append(members, w.member)
		case w == pick:
			w.state = wCarried
			riders = append(riders, w)
		}
	}
	pickMember := ""
	if pick != nil {
		pickMember = pick.member
		if pick.state == wQueued {
			pick.state = wPicked
		}
	}
	q.mu.Unlock()

	sentAt := time.Now()
	r, err := run(ctx, pickMember, over, members)
	if q.settle(sentAt, r, err, pick, riders) {
		// The lock went to a waiter of this Queue while others still wait here: the caller
		// yields, so that the new holder runs at once, on this thread, rather than after the
		// caller's return, or on another thread woken for it. With nobody else waiting here
		// the caller goes on at once instead: its next Lock, typically, boards on the new
		// holder in time for that holder's release, which yielding would let go out first,
		// and the hand-offs would leave the Client.
		runtime.Gosched()
	}
	return r, err
}

// settle tells the local waiters the outcome of a release sent at sentAt (err: unknown) that
// may have picked pick and carried riders. It reports whether the release handed the lock to
// a waiter of this Queue while others still wait here.
func (q *Queue) settle(sentAt time.Time, r scripts.Release, err error, pick *waiter, riders []*waiter) (busy bool) {
	s := &settlement{q: q, sentAt: sentAt, known: err == nil}
	if s.known && r.Kind == scripts.HandedLocal {
		s.handedTo = r.Hold
	}
	// The riders joined the queue unless the release handed the lock straight to its pick
	// (which it may also hand the lock to as the queue's head, after they joined).
	s.joined = s.known && (r.Kind == scripts.Freed || r.Kind == scripts.HandedRemote ||
		r.Kind == scripts.HandedLocal && r.Joined)
	s.pickTaken = pick != nil && s.handedTo == pick.hold
	s.handed = outcome{kind: oHanded, since: sentAt, lease: r.Lease}

	q.mu.Lock()
	q.inflight--
	s.riders(riders, pick)
	if pick != nil && !slices.Contains(riders, pick) {
		s.pick(pick)
	}
	// The streak counts the hand-offs that passed another Client's waiter: one that passed
	// nobody (nobody else waits) does not bring the turn of the others nearer.
	if s.pickTaken && r.Passed {
		q.streak++
	} else {
		q.streak = 0
	}
	deliver := s.handedTo != "" && !s.ours && !s.queuedHolder()
	if s.ours {
		q.held, q.heldHold, q.heldAt = s.handedTo, nil, time.Now()
		busy = len(q.waiters) > 0
	} else if q.inflight == 0 && q.held == "" {
		// Not handed to a waiter of this Queue: the waiters that boarded while the release
		// was on its way attempt on their own (the lock may be free, or another Client's).
		q.dismissBoarded(s.known && r.Kind == scripts.Freed)
	}
	q.mu.Unlock()
	if deliver {
		// The new holder is no waiter of this Queue's: it hears through the hub.
		q.rt.Hub.Deliver(q.cfg.Grants, s.handedTo)
	}
	for _, w := range s.orphans {
		clearLater(q.rt, w.rules, w.hold, nil)
	}
	return busy
}

// settlement is a release's outcome as settle tells it to the local waiters, with q.mu held.
type settlement struct {
	q         *Queue
	sentAt    time.Time
	known     bool    // the release's outcome is known
	handedTo  string  // the hold of this Client that it handed the lock to, if any
	joined    bool    // its riders joined the queue
	pickTaken bool    // it handed the lock straight to its pick
	handed    outcome // what the new holder is told
	ours      bool    // the new holder is a waiter of this Queue's
	orphans   []*waiter
}

// decide tells w the outcome o and puts it in state next, unless w left meanwhile: a waiter
// that won on its own goes; one that left with something to give up is an orphan that settle
// cleans up.
func (s *settlement) decide(w *waiter, o outcome, next wstate) {
	q := s.q
	if w.won {
		q.remove(w)
		w.state = wGone
		return
	}
	if w.orphan {
		w.orphan = false
		if o.kind == oHanded || o.kind == oJoined || o.kind == oUnknown ||
			o.kind == oStill && next == wQueued {
			s.orphans = append(s.orphans, w)
		}
		q.remove(w)
		w.state = wGone
		return
	}
	if next == wGone || next == wAttempting {
		q.remove(w)
	}
	w.state = next
	if o.kind == oStill && !w.awaits {
		return // nothing changed for it, and its call does not wait to hear so
	}
	if o.kind != 0 {
		w.awaits = false
		w.tell(o)
	}
}

// riders tells the waiters that the release carried what became of them (pick among them,
// when the release handed it the lock, is told by pick).
func (s *settlement) riders(riders []*waiter, pick *waiter) {
	for _, w := range riders {
		switch {
		case w == pick && s.pickTaken:
			s.ours = true
			s.decide(w, s.handed, wGone)
		case !s.known:
			s.decide(w, outcome{kind: oUnknown, since: s.sentAt}, wAttempting)
		case s.joined && w.hold == s.handedTo:
			s.ours = true
			s.decide(w, s.handed, wGone)
		case s.joined:
			s.decide(w, outcome{kind: oJoined, since: s.sentAt}, wQueued)
		case s.pickTaken:
			// Boarded still: the new holder's release carries it (told, so that a rider whose
			// window or context ended meanwhile goes its own way).
			s.decide(w, outcome{kind: oStill}, wBoarded)
		default:
			s.decide(w, outcome{kind: oDismissed}, wAttempting)
		}
	}
}

// pick tells the release's pick, a waiter queued in Redis that it did not carry, what became
// of it.
func (s *settlement) pick(pick *waiter) {
	switch {
	case s.pickTaken:
		s.ours = true
		s.decide(pick, s.handed, wGone)
	case !s.known:
		s.decide(pick, outcome{kind: oUnknown, since: s.sentAt}, wAttempting)
	case pick.state == wPicked:
		if pick.hold == s.handedTo {
			s.ours = true
			s.decide(pick, s.handed, wGone)
		} else {
			s.decide(pick, outcome{kind: oStill}, wQueued)
		}
	}
}

// queuedHolder finds the new holder among this Queue's waiters queued in Redis (the release
// handed the lock to the head of the queue, which was one of them) and tells it; false when
// it is none of them (it is a waiter of another Queue of the same name, a value's with other
// options).
func (s *settlement) queuedHolder() bool {
	for _, w := range s.q.waiters {
		if w.hold == s.handedTo && w.state == wQueued {
			s.ours = true
			s.decide(w, s.handed, wGone)
			return true
		}
	}
	return false
}

// Boarded reports how many local waiters wait for a release of this Client without an attempt
// of their own (for tests).
func (q *Queue) Boarded() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, w := range q.waiters {
		if w.state == wBoarded || w.state == wCarried {
			n++
		}
	}
	return n
}

// QueuedLocally reports how many local waiters are queued in Redis where a release of this
// Client may pick them (for tests).
func (q *Queue) QueuedLocally() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, w := range q.waiters {
		if w.state == wQueued {
			n++
		}
	}
	return n
}
