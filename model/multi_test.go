package model

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// The property tests below drive a Multi model with random requests, fair and multi-name,
// over a few names, at random logical times, and keep a shadow built from the replies alone:
// which requests wait (and their liveness deadlines, as their replies renewed them), their
// arrival order, and which requests believe they hold their names, until when. Each action
// asserts what its reply proves; the "" check holds the shadow and the model's queries
// together after every step:
//
//   - mutual exclusion per name: no two requests believe they hold one name at once, and the
//     model names a believer the owner of each of its names, with the lease it believes in;
//   - arrival order among overlapping requests: when a request comes to hold all its names,
//     no live waiter that arrived before it and shares a name with it is still waiting;
//   - the queues are the live waiters in arrival order, and a live waiter is queued for, or
//     owns, every one of its names; a waiter that keeps attempting or heartbeating in time
//     is never dropped;
//   - no deadlock (TestMultiNoDeadlockWhenHoldersRelease): from any state reached, if the
//     holders release and the waiters go on attempting, with nobody new arriving, every
//     waiter comes to hold its names, one at least per round.

const (
	multiWaiterTimeout = 50  // ms
	multiMaxLease      = 100 // ms; leases are drawn from [1, multiMaxLease]
	multiMaxAdvance    = 30  // ms; a time step is drawn from [0, multiMaxAdvance]
)

var multiNames = []string{"a", "b", "c", "d"}

// multiShadow is what the replies told of one request.
type multiShadow struct {
	hold     string
	names    []string
	lease    int64
	fair     bool
	arrival  int  // the order of its first attempt that queued; 0 if it never queued
	waiting  bool // its replies said it waits (its deadline may have passed since)
	deadline Time // while waiting: its liveness deadline, from its last reply that renewed it
	complete bool // a reply said it had every name (at some time)
	believes bool // it holds, as far as its own replies tell it
	until    Time // while it believes: when its lease ends
}

// live reports whether the request is a live waiter that has not come to hold its names.
func (r *multiShadow) live(now Time) bool { return r.waiting && now < r.deadline }

type multiMachine struct {
	m   *Multi
	now Time

	reqs     []*multiShadow
	byHold   map[string]*multiShadow
	arrivals int
	grants   int // completions seen

	// idle are the names that the last check found free with live waiters queued (kept for
	// the head, which has not come for them), at time checkedAt.
	idle      map[string]bool
	checkedAt Time
}

func newMultiMachine() *multiMachine {
	return &multiMachine{m: NewMulti(multiWaiterTimeout), byHold: map[string]*multiShadow{}}
}

func overlap(a, b []string) bool {
	for _, n := range a {
		if slices.Contains(b, n) {
			return true
		}
	}
	return false
}

// completed records that r came to hold every name (as a reply said), checking arrival
// order: no live waiter that arrived before it and shares a name with it may still wait. A
// request that never queued arrived after every queued one.
func (s *multiMachine) completed(t *rapid.T, how string, r *multiShadow) {
	t.Helper()
	if r.complete {
		return
	}
	mine := r.arrival
	if mine == 0 {
		mine = math.MaxInt
	}
	for _, o := range s.reqs {
		if o != r && o.live(s.now) && !o.complete && o.arrival < mine && overlap(o.names, r.names) {
			t.Fatalf("arrival order: %s gave %s (arrival %d, %v) every name at %d while %s (arrival %d, %v) waits",
				how, r.hold, r.arrival, r.names, s.now, o.hold, o.arrival, o.names)
		}
	}
	r.complete = true
	s.grants++
}

// believe records that r learnt from a reply that it holds, until until.
func (s *multiShadow) believe(until Time) {
	s.believes, s.until, s.waiting = true, until, false
}

// stop records that r's reply said it holds nothing and waits for nothing.
func (s *multiShadow) stop() { s.believes, s.waiting = false, false }

// handed processes the Granted list of a reply: each request named has every name now. A
// fair waiter holds its name from that hand-off, until its lease or its deadline; a
// multi-lock's waiter learns of it from its next attempt or heartbeat.
func (s *multiMachine) handed(t *rapid.T, how string, granted []string) {
	t.Helper()
	for _, h := range granted {
		r := s.byHold[h]
		if !r.live(s.now) {
			t.Fatalf("dead waiters are skipped: %s completed %s, which is not a live waiter", how, h)
		}
		s.completed(t, how, r)
		if r.fair {
			r.believe(min(s.now+Time(r.lease), r.deadline))
		}
	}
}

func (s *multiMachine) pick(t *rapid.T, want func(*multiShadow) bool) *multiShadow {
	var c []*multiShadow
	for _, r := range s.reqs {
		if want(r) {
			c = append(c, r)
		}
	}
	if len(c) == 0 || rapid.IntRange(0, 4).Draw(t, "any") == 0 {
		if len(s.reqs) == 0 {
			t.Skip("no request yet")
		}
		c = s.reqs[max(0, len(s.reqs)-8):]
	}
	return rapid.SampledFrom(c).Draw(t, "request")
}

func (s *multiMachine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"advance":   s.advance,
		"arrive":    s.arrive,
		"again":     s.again,
		"heartbeat": s.heartbeat,
		"renew":     s.renew,
		"release":   s.release,
		"giveUp":    s.giveUp,
		"":          s.check,
	}
}

func (s *multiMachine) advance(t *rapid.T) {
	s.now += Time(rapid.Int64Range(0, multiMaxAdvance).Draw(t, "dt"))
}

// arrive makes a new request's first attempt: a fair request for one name, or a multi-lock's
// for one to four.
func (s *multiMachine) arrive(t *rapid.T) {
	r := &multiShadow{hold: fmt.Sprintf("r%d", len(s.reqs)+1), lease: rapid.Int64Range(1, multiMaxLease).Draw(t, "lease")}
	r.fair = rapid.IntRange(0, 3).Draw(t, "fair") == 0
	if r.fair {
		r.names = []string{rapid.SampledFrom(multiNames).Draw(t, "name")}
	} else {
		r.names = rapid.SliceOfNDistinct(rapid.SampledFrom(multiNames), 1, len(multiNames), rapid.ID[string]).Draw(t, "names")
		slices.Sort(r.names)
	}
	enqueue := rapid.IntRange(0, 3).Draw(t, "enqueue") > 0
	var vacant []string // free with nobody queued
	for _, n := range r.names {
		if s.m.Owner(s.now, n) == "" && len(s.m.Queue(s.now, n)) == 0 {
			vacant = append(vacant, n)
		}
	}
	s.reqs = append(s.reqs, r)
	s.byHold[r.hold] = r
	got := s.m.Attempt(s.now, MultiRequest{Hold: r.hold, Names: r.names, Lease: r.lease, Fair: r.fair}, enqueue)
	s.handed(t, "attempt by "+r.hold, got.Granted)
	switch got.Status {
	case Acquired:
		s.completed(t, "first attempt", r)
		r.believe(s.now + Time(r.lease))
	case Queued:
		if !enqueue {
			t.Fatalf("first attempt of %s without enqueue queued", r.hold)
		}
		s.arrivals++
		r.arrival, r.waiting, r.deadline = s.arrivals, true, s.now+multiWaiterTimeout
		for _, n := range vacant {
			if o := s.m.Owner(s.now, n); o != r.hold {
				t.Fatalf("reservation: %s joined while %q was free with nobody queued; its owner is %q", r.hold, n, o)
			}
		}
	case Busy:
		if enqueue {
			t.Fatalf("first attempt of %s with enqueue: busy", r.hold)
		}
	default:
		t.Fatalf("first attempt of %s: status %v", r.hold, got.Status)
	}
	s.checkRemaining(t, r, got)
}

// checkRemaining checks the fallback wait of a failed attempt.
func (s *multiMachine) checkRemaining(t *rapid.T, r *multiShadow, got MultiResult) {
	t.Helper()
	failed := got.Status == Queued || got.Status == Busy
	if failed != (got.Remaining > 0) {
		t.Fatalf("attempt by %s: status %v with remaining %d ms", r.hold, got.Status, got.Remaining)
	}
}

// again makes a later attempt, mostly of a waiter.
func (s *multiMachine) again(t *rapid.T) {
	r := s.pick(t, func(r *multiShadow) bool { return r.waiting })
	enqueue := rapid.IntRange(0, 3).Draw(t, "enqueue") > 0
	wasLive, believed := r.live(s.now), r.believes && s.now < r.until
	got := s.m.AttemptAgain(s.now, r.hold, enqueue)
	if got.Status == Dropped {
		r.stop() // it gave up what it had: that came first
	}
	s.handed(t, "later attempt by "+r.hold, got.Granted)
	switch got.Status {
	case Acquired:
		s.completed(t, "later attempt", r)
		r.believe(s.now + Time(r.lease))
	case Granted:
		if !r.fair || !believed {
			t.Fatalf("adoption: later attempt by %s, which was not handed its name: granted", r.hold)
		}
	case Queued:
		if !wasLive || !enqueue {
			t.Fatalf("later attempt by %s (live waiter %v, enqueue %v): queued", r.hold, wasLive, enqueue)
		}
		r.deadline = s.now + multiWaiterTimeout
	case Busy:
		// A multi-lock's request that is not a live waiter is dropped even when it does not
		// ask to wait (its attempt finds it gone before it looks at the enqueue flag).
		if enqueue || !r.fair && !wasLive && !believed {
			t.Fatalf("later attempt by %s (live waiter %v, holder %v, enqueue %v): busy", r.hold, wasLive, believed, enqueue)
		}
	case Dropped:
		if wasLive {
			t.Fatalf("a live waiter is never dropped: later attempt by %s at %d, live until %d", r.hold, s.now, r.deadline)
		}
	default:
		t.Fatalf("later attempt by %s: status %v", r.hold, got.Status)
	}
	s.checkRemaining(t, r, got)
}

func (s *multiMachine) heartbeat(t *rapid.T) {
	r := s.pick(t, func(r *multiShadow) bool { return r.waiting })
	wasLive, believed := r.live(s.now), r.believes && s.now < r.until
	got, granted := s.m.Heartbeat(s.now, r.hold)
	if got == BeatDropped {
		r.stop() // it gave up what it had: that came first
	}
	s.handed(t, "heartbeat of "+r.hold, granted)
	switch got {
	case BeatQueued:
		if !wasLive {
			t.Fatalf("heartbeat of %s, not a live waiter: queued", r.hold)
		}
		r.deadline = s.now + multiWaiterTimeout
	case BeatGranted:
		switch {
		case believed:
		case !wasLive:
			t.Fatalf("heartbeat of %s, neither a live waiter nor a holder: granted", r.hold)
		case r.fair:
			s.completed(t, "heartbeat", r)
			r.believe(min(s.now+Time(r.lease), s.now+multiWaiterTimeout))
		default:
			s.completed(t, "heartbeat", r)
			r.believe(s.now + multiWaiterTimeout)
		}
	case BeatDropped:
		if wasLive || believed {
			t.Fatalf("heartbeat of %s (live waiter %v, holder %v): dropped", r.hold, wasLive, believed)
		}
	}
}

// renew extends a believer's lease.
func (s *multiMachine) renew(t *rapid.T) {
	r := s.pick(t, func(r *multiShadow) bool { return r.believes && s.now < r.until })
	if r.waiting {
		t.Skip("the real lock never renews a waiter")
	}
	lease := rapid.Int64Range(0, multiMaxLease).Draw(t, "lease")
	believed := r.believes && s.now < r.until
	got := s.m.Renew(s.now, r.hold, lease)
	if believed && !got {
		t.Fatalf("renewal by %s, which holds until %d, refused at %d", r.hold, r.until, s.now)
	}
	if got && believed && lease > 0 {
		r.until = s.now + Time(lease)
	}
}

func (s *multiMachine) release(t *rapid.T) {
	r := s.pick(t, func(r *multiShadow) bool { return r.believes && s.now < r.until })
	if r.waiting {
		t.Skip("the real lock never releases a waiter")
	}
	believed := r.believes && s.now < r.until
	got, err := s.m.Release(s.now, r.hold)
	r.stop()
	s.handed(t, "release by "+r.hold, got.Granted)
	switch {
	case believed && (err != nil || got.Released != len(r.names)):
		t.Fatalf("release by %s, which holds until %d, at %d: %+v, %v", r.hold, r.until, s.now, got, err)
	case !believed && err == nil:
		t.Fatalf("release by %s, which holds nothing: %+v", r.hold, got)
	case err != nil && !errors.Is(err, ErrNotOwner):
		t.Fatalf("release by %s: %v", r.hold, err)
	}
}

func (s *multiMachine) giveUp(t *rapid.T) {
	r := s.pick(t, func(r *multiShadow) bool { return r.waiting })
	wasLive := r.live(s.now)
	got := s.m.GiveUp(s.now, r.hold)
	r.stop()
	s.handed(t, "give-up by "+r.hold, got.Granted)
	if wasLive && !r.complete && got.Status == GaveUpNothing {
		t.Fatalf("give-up by %s, a live waiter: nothing to give up", r.hold)
	}
}

// check holds the model's queries and the shadow together.
func (s *multiMachine) check(t *rapid.T) {
	// Mutual exclusion per name.
	owner := map[string]*multiShadow{}
	for _, r := range s.reqs {
		if !r.believes || s.now >= r.until {
			continue
		}
		for _, n := range r.names {
			if o := owner[n]; o != nil {
				t.Fatalf("mutual exclusion: %s and %s both hold %q at %d", o.hold, r.hold, n, s.now)
			}
			owner[n] = r
			if got := s.m.Owner(s.now, n); got != r.hold {
				t.Fatalf("mutual exclusion: %s holds %q until %d, the model's owner at %d is %q", r.hold, n, r.until, s.now, got)
			}
			if ms, ok := s.m.RemainingLease(s.now, n); !ok || Time(ms) != r.until-s.now {
				t.Fatalf("lease: %s holds %q until %d; at %d the model's claim has %d ms left (%v)", r.hold, n, r.until, s.now, ms, ok)
			}
		}
	}
	// The queues: live waiters, in arrival order, each queued for or owning every name.
	for _, n := range multiNames {
		q := s.m.Queue(s.now, n)
		o := s.m.Owner(s.now, n)
		if o != "" && !slices.Contains(s.byHold[o].names, n) {
			t.Fatalf("owner %s of %q did not ask for it", o, n)
		}
		for i, h := range q {
			r := s.byHold[h]
			if !r.live(s.now) || !slices.Contains(r.names, n) || h == o {
				t.Fatalf("queue of %q at %d is %v: %s is not a live waiter for it (owner %q)", n, s.now, q, h, o)
			}
			if i > 0 && s.byHold[q[i-1]].arrival >= r.arrival {
				t.Fatalf("arrival order: queue of %q is %v, arrivals %d then %d", n, q, s.byHold[q[i-1]].arrival, r.arrival)
			}
		}
	}
	// No operation leaves a name idle, free while a live waiter queues for it: a release or a
	// give-up hands it on at once. Only time does (a lease ran out, a waiter it was reserved
	// for died), until an operation looks at the name.
	idle := map[string]bool{}
	for _, n := range multiNames {
		if s.m.Owner(s.now, n) == "" && len(s.m.Queue(s.now, n)) > 0 {
			idle[n] = true
			if s.now == s.checkedAt && s.idle != nil && !s.idle[n] {
				t.Fatalf("hand-off: at %d %q became free while %v queue for it", s.now, n, s.m.Queue(s.now, n))
			}
		}
	}
	s.idle, s.checkedAt = idle, s.now
	for _, r := range s.reqs {
		if got, want := s.m.Waiting(s.now, r.hold), r.live(s.now); got != want {
			t.Fatalf("waiting: model says %s waits %v at %d, its replies say %v (deadline %d)", r.hold, got, s.now, want, r.deadline)
		}
		if !r.live(s.now) || r.complete {
			continue
		}
		for _, n := range r.names {
			if s.m.Owner(s.now, n) != r.hold {
				if !slices.Contains(s.m.Queue(s.now, n), r.hold) {
					t.Fatalf("live waiter %s neither owns nor queues for %q at %d", r.hold, n, s.now)
				}
				continue
			}
			// A name reserved for a waiter is its own for as long as the waiter is live.
			if ms, _ := s.m.RemainingLease(s.now, n); !r.fair && Time(ms) != r.deadline-s.now {
				t.Fatalf("reservation: %q is reserved for %s, live until %d, for %d ms at %d", n, r.hold, r.deadline, ms, s.now)
			}
		}
	}
}

// drain lets the holders release and the waiters attempt, round after round, with nobody new
// arriving and little time passing: every live waiter must come to hold its names, at least
// one per round.
func (s *multiMachine) drain(t *rapid.T) {
	var waiters []*multiShadow
	for _, r := range s.reqs {
		if r.live(s.now) {
			waiters = append(waiters, r)
		}
	}
	slices.SortFunc(waiters, func(a, b *multiShadow) int { return a.arrival - b.arrival })
	for round := 0; ; round++ {
		var left []*multiShadow
		for _, r := range waiters {
			if r.live(s.now) {
				left = append(left, r)
			}
		}
		if len(left) == 0 {
			break
		}
		if round > len(waiters) {
			t.Fatalf("deadlock: after %d rounds of releases and attempts %d waiters still wait", round, len(left))
		}
		for _, r := range s.reqs {
			if !r.waiting && s.m.Holds(s.now, r.hold) {
				s.releaseHolder(t, r)
			}
		}
		s.check(t)
		for _, r := range left {
			if !r.live(s.now) {
				continue // completed by a release of this round
			}
			got := s.m.AttemptAgain(s.now, r.hold, true)
			s.handed(t, "later attempt by "+r.hold, got.Granted)
			switch got.Status {
			case Acquired:
				s.completed(t, "later attempt", r)
				r.believe(s.now + Time(r.lease))
			case Queued:
				r.deadline = s.now + multiWaiterTimeout
			default:
				t.Fatalf("drain: later attempt by live waiter %s: %v", r.hold, got.Status)
			}
		}
		s.check(t)
		s.now++
	}
	for _, r := range waiters {
		if !r.complete {
			t.Fatalf("no deadlock: %s (%v) waited and never held its names", r.hold, r.names)
		}
	}
}

func (s *multiMachine) releaseHolder(t *rapid.T, r *multiShadow) {
	got, err := s.m.Release(s.now, r.hold)
	if err != nil {
		t.Fatalf("release by %s, which has every name: %v", r.hold, err)
	}
	r.stop()
	s.handed(t, "release by "+r.hold, got.Granted)
}

// multiMachineWith returns a rapid property that runs the state machine with the named
// actions (and the check), and drains it at the end when drain is set.
func multiMachineWith(drain bool, names ...string) func(*rapid.T) {
	return func(t *rapid.T) {
		s := newMultiMachine()
		all := s.actions()
		actions := map[string]func(*rapid.T){"": all[""]}
		for _, name := range names {
			a, ok := all[name]
			if !ok {
				panic("unknown action " + name)
			}
			actions[name] = a
		}
		t.Repeat(actions)
		if drain {
			s.drain(t)
		}
	}
}

func TestMultiMutualExclusionPerName(t *testing.T) {
	rapid.Check(t, multiMachineWith(false, "advance", "arrive", "again", "heartbeat", "renew", "release", "giveUp"))
}

// Arrival order among overlapping requests, where waiters stay live: time moves only by
// small steps, and every waiter attempts or heartbeats often.
func TestMultiOverlappingRequestsAreServedInArrivalOrder(t *testing.T) {
	rapid.Check(t, multiMachineWith(false, "arrive", "again", "heartbeat", "release", "giveUp"))
}

func TestMultiNoDeadlockWhenHoldersRelease(t *testing.T) {
	rapid.Check(t, multiMachineWith(true, "advance", "arrive", "again", "heartbeat", "renew", "release", "giveUp"))
}

// Without deaths or give-ups: every request that queued holds its names in the end.
func TestMultiNoDeadlockAmongLiveWaiters(t *testing.T) {
	rapid.Check(t, multiMachineWith(true, "arrive", "again", "heartbeat", "release"))
}

// A multi-lock's request reserves the free names it finds at its arrival, so a later request
// for one of them waits behind it; a release hands the last name it waits for to it, which
// completes it; and its release then hands the names on.
func TestMultiReservationAtArrivalKeepsANameFromLaterRequests(t *testing.T) {
	m := NewMulti(50)
	if got := m.Attempt(0, MultiRequest{Hold: "h", Names: []string{"a"}, Lease: 100, Fair: true}, true); got.Status != Acquired {
		t.Fatalf("h on a free name: %+v", got)
	}
	if got := m.Attempt(1, MultiRequest{Hold: "r", Names: []string{"b", "a"}, Lease: 100}, true); got.Status != Queued || got.Remaining != 99 {
		t.Fatalf("r behind h: %+v, want queued for 99 ms", got)
	}
	if o := m.Owner(1, "b"); o != "r" {
		t.Fatalf("b, free with nobody queued, is not reserved for r at its arrival: owner %q", o)
	}
	if got := m.Attempt(2, MultiRequest{Hold: "f", Names: []string{"b"}, Lease: 100, Fair: true}, false); got.Status != Busy {
		t.Fatalf("a later fair TryLock of b took it from r: %+v", got)
	}
	m.Attempt(3, MultiRequest{Hold: "g", Names: []string{"b"}, Lease: 100, Fair: true}, true)
	res, err := m.Release(10, "h")
	if err != nil || !slices.Equal(res.Granted, []string{"r"}) {
		t.Fatalf("h releases a, the name r waits for: %+v, %v; want r completed", res, err)
	}
	if got := m.AttemptAgain(11, "r", true); got.Status != Acquired {
		t.Fatalf("r, handed a with b reserved: %+v", got)
	}
	if ms, _ := m.RemainingLease(11, "b"); ms != 100 {
		t.Fatalf("r's attempt took b for %d ms, want its lease", ms)
	}
	res, err = m.Release(20, "r")
	if err != nil || !slices.Equal(res.Granted, []string{"g"}) || m.Owner(20, "a") != "" {
		t.Fatalf("r releases: %+v, %v, owner of a %q; want b handed to g, a freed", res, err, m.Owner(20, "a"))
	}
}

// A waiter that stops heartbeating is out of every queue at its deadline, and the names
// reserved for it are free then, kept for the next live head, which takes them; its own
// later attempt is dropped.
func TestMultiDeadWaiterPassesItsReservationsOn(t *testing.T) {
	m := NewMulti(50)
	m.Attempt(0, MultiRequest{Hold: "h", Names: []string{"a"}, Lease: 1000}, true)
	m.Attempt(0, MultiRequest{Hold: "r", Names: []string{"a", "b"}, Lease: 100}, true) // reserves b
	m.Attempt(1, MultiRequest{Hold: "w", Names: []string{"b"}, Lease: 100, Fair: true}, true)
	if got, _ := m.Heartbeat(40, "w"); got != BeatQueued {
		t.Fatalf("w behind r's reservation: %v", got)
	}
	if o := m.Owner(49, "b"); o != "r" {
		t.Fatalf("b before r's deadline: owner %q", o)
	}
	if o, q := m.Owner(50, "b"), m.Queue(50, "a"); o != "" || q != nil {
		t.Fatalf("at r's deadline: owner of b %q, queue of a %v; want b free, r out of a's queue", o, q)
	}
	if got, _ := m.Heartbeat(60, "w"); got != BeatGranted || m.Owner(60, "b") != "w" {
		t.Fatalf("w, live head of the free b: %v, owner %q", got, m.Owner(60, "b"))
	}
	if got := m.AttemptAgain(61, "r", true); got.Status != Dropped {
		t.Fatalf("r after its deadline: %+v, want dropped", got)
	}
}

// The head of a free name that gives up passes the name on to the next live head at once.
func TestMultiGiveUpOfTheHeadOfAFreeNameHandsItOn(t *testing.T) {
	m := NewMulti(50)
	m.Attempt(0, MultiRequest{Hold: "h", Names: []string{"a"}, Lease: 10}, true)
	m.Attempt(1, MultiRequest{Hold: "r", Names: []string{"a", "b"}, Lease: 100}, true)
	m.Attempt(2, MultiRequest{Hold: "f", Names: []string{"a"}, Lease: 100, Fair: true}, true)
	if o := m.Owner(10, "a"); o != "" {
		t.Fatalf("h's lease ran out at 10: owner %q", o) // a is free, kept for r
	}
	got := m.GiveUp(11, "r")
	if got.Status != PassedOn || !slices.Equal(got.Granted, []string{"f"}) || m.Owner(11, "a") != "f" {
		t.Fatalf("r, head of the free a and holding b, gives up: %+v, owner of a %q", got, m.Owner(11, "a"))
	}
	if o := m.Owner(11, "b"); o != "" {
		t.Fatalf("b, reserved for r, is %q's after r gave up", o)
	}
}

// A heartbeat of a request that holds its names (one that was in flight when its attempt
// took them) changes nothing: it never shortens the hold to the waiter timeout.
func TestMultiHeartbeatOfAHolderChangesNothing(t *testing.T) {
	m := NewMulti(50)
	m.Attempt(0, MultiRequest{Hold: "x", Names: []string{"a"}, Lease: 100}, true)
	m.Attempt(1, MultiRequest{Hold: "r", Names: []string{"a", "b"}, Lease: 1000}, true)
	m.Release(2, "x")
	if got := m.AttemptAgain(3, "r", true); got.Status != Acquired {
		t.Fatalf("r: %+v", got)
	}
	if got, _ := m.Heartbeat(4, "r"); got != BeatGranted {
		t.Fatalf("heartbeat of the holder r: %v", got)
	}
	for _, n := range []string{"a", "b"} {
		if ms, _ := m.RemainingLease(4, n); ms != 999 {
			t.Fatalf("after a heartbeat of its holder, %q has %d ms left, want 999", n, ms)
		}
	}
}

func TestMultiMisusePanics(t *testing.T) {
	cases := map[string]func(m *Multi){
		"zero Multi": func(*Multi) { new(Multi).Attempt(0, MultiRequest{Hold: "h", Names: []string{"a"}, Lease: 1}, true) },
		"empty hold": func(m *Multi) { m.Attempt(0, MultiRequest{Names: []string{"a"}, Lease: 1}, true) },
		"no names":   func(m *Multi) { m.Attempt(0, MultiRequest{Hold: "h", Lease: 1}, true) },
		"empty name": func(m *Multi) { m.Attempt(0, MultiRequest{Hold: "h", Names: []string{"a", ""}, Lease: 1}, true) },
		"fair for two names": func(m *Multi) {
			m.Attempt(0, MultiRequest{Hold: "h", Names: []string{"a", "b"}, Lease: 1, Fair: true}, true)
		},
		"zero lease": func(m *Multi) { m.Attempt(0, MultiRequest{Hold: "h", Names: []string{"a"}}, true) },
		"hold id reused": func(m *Multi) {
			m.Attempt(0, MultiRequest{Hold: "h", Names: []string{"a"}, Lease: 1}, true)
			m.Attempt(0, MultiRequest{Hold: "h", Names: []string{"a"}, Lease: 1}, true)
		},
		"unknown hold":      func(m *Multi) { m.AttemptAgain(0, "h", true) },
		"unknown release":   func(m *Multi) { m.Release(0, "h") },
		"unknown heartbeat": func(m *Multi) { m.Heartbeat(0, "h") },
		"unknown give-up":   func(m *Multi) { m.GiveUp(0, "h") },
		"unknown renewal":   func(m *Multi) { m.Renew(0, "h", 1) },
		"negative renewal": func(m *Multi) {
			m.Attempt(0, MultiRequest{Hold: "h", Names: []string{"a"}, Lease: 1}, true)
			m.Renew(0, "h", -1)
		},
		"release by a waiter": func(m *Multi) {
			m.Attempt(0, MultiRequest{Hold: "h", Names: []string{"a"}, Lease: 1}, true)
			m.Attempt(0, MultiRequest{Hold: "w", Names: []string{"a", "b"}, Lease: 1}, true)
			m.Release(0, "w")
		},
		"time going back":      func(m *Multi) { m.Owner(5, "a"); m.Owner(4, "a") },
		"non-positive timeout": func(*Multi) { NewMulti(0) },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			m := NewMulti(50)
			defer func() {
				if recover() == nil {
					t.Fatalf("%s did not panic", name)
				}
			}()
			f(m)
		})
	}
	// A call that panics changes nothing.
	m := NewMulti(50)
	m.Attempt(10, MultiRequest{Hold: "h", Names: []string{"a"}, Lease: 100}, true)
	func() {
		defer func() { _ = recover() }()
		m.Attempt(5, MultiRequest{Hold: "g", Names: []string{"a"}, Lease: 100}, true)
	}()
	if got := m.Attempt(10, MultiRequest{Hold: "g", Names: []string{"a"}, Lease: 100}, true); got.Status != Queued {
		t.Fatalf("after a call that panicked, g's first attempt: %+v", got)
	}
}
