package model

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// The property tests below drive an Election model with random candidates (Campaign's
// attempts, heartbeats, give-ups), fair lock requests on the same name that never lead, Lead,
// Proclaim, renewals, resignations and forced releases, at random logical times, with a few
// observers hearing the published changes, and keep a shadow built from the replies alone:
// who waits (with its liveness deadline and arrival order), who holds the lock until when,
// who led with which token, the leader record and the changes. Each action asserts what its
// reply proves; the "" check holds the shadow and the model's queries together after every
// step:
//
//   - at most one leader at any state, and Leader names it (or nobody);
//   - tokens strictly increase across leaders: a hold's first Lead gets a token greater than
//     every earlier leader's, and its later calls keep it;
//   - candidates lead in arrival order: when a candidate comes to hold the lock, and when it
//     leads, no live waiter that arrived before it still waits;
//   - Proclaim keeps the token: the leader's token is the same, its revision one more;
//   - the published changes are increasing in (token, revision), and what every observer sends
//     and its receiver takes is increasing too, a subsequence of the changes; the receiver
//     never takes the same token and value twice in a row, and once it took what the channel
//     holds it has the last change's token and value; after a catch-up the observer's last
//     change is the current leader.

const (
	electWaiterTimeout = 50  // ms
	electMaxLease      = 100 // ms; leases are drawn from [1, electMaxLease]
	electMaxAdvance    = 30  // ms; a time step is drawn from [0, electMaxAdvance]
	electObservers     = 3
	electRounds        = 4 // rapid.T.Repeat calls per run
)

// electCandidate is what the replies told of one candidate (or fair lock request).
type electCandidate struct {
	hold    string
	lease   int64
	fair    bool // a fair lock's request on the election's name: it never leads
	arrival int  // the order of its first attempt that queued; 0 if it never queued
	waiting bool // its replies said it waits (its deadline may have passed since)
	// deadline is its liveness deadline while waiting, from its last reply that renewed it.
	deadline Time
	holds    bool // it holds the lock, as replies and hand-offs tell
	until    Time // while it holds: when its lease ends
	grant    int  // the order in which it came to hold the lock, among all holds; 0 if it never did
	token    int64
	led      bool // a Lead reply said it leads (it may have ended since)
	ended    bool // its hold ended: resigned, gave up, forced out, or lost by expiry
}

// live reports whether the candidate is a live waiter.
func (c *electCandidate) live(now Time) bool { return c.waiting && now < c.deadline }

// holding reports whether the candidate holds the lock at now.
func (c *electCandidate) holding(now Time) bool { return c.holds && now < c.until }

// electObserver is one observer of the shadow: what it sent and what its receiver took.
type electObserver struct {
	o          ElectionObserver
	subscribed bool
	next       int  // the index in the changes of the next one it hears while subscribed
	catchUp    bool // its subscription was confirmed and it has not read the leader yet
	sent       []Leadership
	received   []Leadership
}

type electMachine struct {
	m   *Election
	now Time

	cands    []*electCandidate
	byHold   map[string]*electCandidate
	arrivals int

	rec     Leadership // the record as the replies wrote it; Hold "" when none
	recEnds Time
	changes []Leadership
	tokens  []int64 // the leaders' tokens, in the order they first led

	grants   int // holds that came to hold the lock
	ledGrant int // the grant of the latest candidate to begin to lead

	observers [electObservers]*electObserver
}

func newElectMachine() *electMachine {
	s := &electMachine{m: NewElection(electWaiterTimeout), byHold: map[string]*electCandidate{}}
	for i := range s.observers {
		s.observers[i] = &electObserver{}
	}
	return s
}

// holder returns the candidate that holds the lock, checking that there is at most one.
func (s *electMachine) holder(t *rapid.T) *electCandidate {
	t.Helper()
	var h *electCandidate
	for _, c := range s.cands {
		if c.holding(s.now) {
			if h != nil {
				t.Fatalf("mutual exclusion: %s and %s both hold the lock at %d", h.hold, c.hold, s.now)
			}
			h = c
		}
	}
	return h
}

// order returns the live waiters in arrival order.
func (s *electMachine) order() []string {
	var live []*electCandidate
	for _, c := range s.cands {
		if c.live(s.now) && !c.holds {
			live = append(live, c)
		}
	}
	slices.SortFunc(live, func(a, b *electCandidate) int { return a.arrival - b.arrival })
	var holds []string
	for _, c := range live {
		holds = append(holds, c.hold)
	}
	return holds
}

// noneAhead checks that no live waiter that arrived before c still waits: c came to hold, or
// to lead, in arrival order. A candidate that never queued arrived after every queued one.
func (s *electMachine) noneAhead(t *rapid.T, property, how string, c *electCandidate) {
	t.Helper()
	mine := c.arrival
	if mine == 0 {
		mine = int(^uint(0) >> 1)
	}
	for _, o := range s.cands {
		if o != c && o.live(s.now) && !o.holds && o.arrival < mine {
			t.Fatalf("%s: %s: %s (arrival %d) at %d while %s (arrival %d) waits", property, how, c.hold, c.arrival, s.now, o.hold, o.arrival)
		}
	}
}

// takes records that c holds the lock until until.
func (s *electMachine) takes(t *rapid.T, how string, c *electCandidate, until Time) {
	t.Helper()
	s.noneAhead(t, "arrival order", how+" gave the lock to", c)
	if h := s.holder(t); h != nil && h != c {
		t.Fatalf("mutual exclusion: %s gave the lock to %s at %d while %s holds it until %d", how, c.hold, s.now, h.hold, h.until)
	}
	if !c.holding(s.now) {
		s.grants++
		c.grant = s.grants
		c.token = 0 // a new hold: its token is yet to come
	}
	c.holds, c.until, c.waiting = true, until, false
}

// handed processes a hand-off the reply names: the live head holds until its lease or its
// deadline, whichever comes first.
func (s *electMachine) handed(t *rapid.T, how, granted string) {
	t.Helper()
	if granted == "" {
		return
	}
	c := s.byHold[granted]
	if !c.live(s.now) {
		t.Fatalf("dead waiters are skipped: %s handed the lock to %s, not a live waiter", how, granted)
	}
	s.takes(t, how, c, min(s.now+Time(c.lease), c.deadline))
}

// end records that c's hold ended.
func (c *electCandidate) end() { c.holds, c.waiting, c.ended = false, false, true }

func (s *electMachine) pick(t *rapid.T, want func(*electCandidate) bool) *electCandidate {
	var c []*electCandidate
	for _, r := range s.cands {
		if want(r) {
			c = append(c, r)
		}
	}
	if len(c) == 0 || rapid.IntRange(0, 4).Draw(t, "any") == 0 {
		if len(s.cands) == 0 {
			t.Skip("no candidate yet")
		}
		c = s.cands[max(0, len(s.cands)-8):]
	}
	return rapid.SampledFrom(c).Draw(t, "candidate")
}

func (s *electMachine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"advance":      s.advance,
		"campaign":     s.campaign,
		"again":        s.again,
		"heartbeat":    s.heartbeat,
		"giveUp":       s.giveUp,
		"lead":         s.lead,
		"proclaim":     s.proclaim,
		"renew":        s.renew,
		"resign":       s.resign,
		"forceRelease": s.forceRelease,
		"observe":      s.observe,
		"":             s.check,
	}
}

func (s *electMachine) advance(t *rapid.T) {
	s.now += Time(rapid.Int64Range(0, electMaxAdvance).Draw(t, "dt"))
}

// campaign makes a new candidate's first attempt, waiting; now and then a fair lock's TryLock
// on the name instead, which takes the lock or nothing and never leads.
func (s *electMachine) campaign(t *rapid.T) {
	c := &electCandidate{hold: fmt.Sprintf("c%d", len(s.cands)+1), lease: rapid.Int64Range(1, electMaxLease).Draw(t, "lease")}
	c.fair = rapid.IntRange(0, 4).Draw(t, "fair") == 0
	free := s.holder(t) == nil && len(s.order()) == 0
	s.cands = append(s.cands, c)
	s.byHold[c.hold] = c
	got := s.m.Attempt(s.now, c.hold, c.lease, !c.fair)
	s.handed(t, "attempt by "+c.hold, got.Granted)
	switch {
	case got.Acquired:
		if !free {
			t.Fatalf("no barging: %s took the lock at %d though it was held or %v wait", c.hold, s.now, s.order())
		}
		s.takes(t, "first attempt", c, s.now+Time(c.lease))
	case got.Queued:
		if c.fair {
			t.Fatalf("a TryLock of %s queued", c.hold)
		}
		s.arrivals++
		c.arrival, c.waiting, c.deadline = s.arrivals, true, s.now+electWaiterTimeout
	default:
		if free {
			t.Fatalf("a free lock with nobody queued refused %s at %d", c.hold, s.now)
		}
		if !c.fair {
			t.Fatalf("a waiting attempt of %s neither took the lock nor queued: %+v", c.hold, got)
		}
		c.ended = true
	}
}

// again makes a later attempt of a candidate: a live waiter keeps its place or takes the lock
// at its turn, one handed the lock adopts it, any other is dropped.
func (s *electMachine) again(t *rapid.T) {
	c := s.pick(t, func(c *electCandidate) bool { return !c.fair && !c.led && (c.live(s.now) || c.holding(s.now)) })
	if c.fair || c.led {
		t.Skip("a fair lock's TryLock makes no later attempt, nor a Campaign once it led")
	}
	wasLive, held := c.live(s.now), c.holding(s.now)
	order := s.order()
	// A free lock goes to its live head, or to anyone when nobody waits.
	takes := s.holder(t) == nil && (len(order) == 0 || order[0] == c.hold)
	got := s.m.AttemptAgain(s.now, c.hold, true)
	s.handed(t, "attempt by "+c.hold, got.Granted)
	switch {
	case got.Acquired:
		if !held {
			if !takes {
				t.Fatalf("arrival order: the later attempt of %s took the lock at %d; queue %v", c.hold, s.now, order)
			}
			s.takes(t, "later attempt", c, s.now+Time(c.lease))
		}
	case got.Queued:
		if !wasLive || held {
			t.Fatalf("a later attempt of %s (live %v, holding %v) queued", c.hold, wasLive, held)
		}
		c.deadline = s.now + electWaiterTimeout
	case got.Dropped:
		if wasLive || held {
			t.Fatalf("a heartbeating waiter is never lost: the later attempt of %s (live %v, holding %v) was dropped", c.hold, wasLive, held)
		}
		c.waiting = false
	default:
		t.Fatalf("a later attempt of %s with enqueue: %+v", c.hold, got)
	}
}

// heartbeat keeps a waiter alive, or grants it a free lock it heads.
func (s *electMachine) heartbeat(t *rapid.T) {
	c := s.pick(t, func(c *electCandidate) bool { return c.live(s.now) })
	wasLive := c.live(s.now)
	head := wasLive && s.holder(t) == nil && slices.Index(s.order(), c.hold) == 0
	if s.m.Heartbeat(s.now, c.hold) {
		if !wasLive || head {
			t.Fatalf("heartbeat of %s (live %v, head of a free lock %v) kept it waiting", c.hold, wasLive, head)
		}
		c.deadline = s.now + electWaiterTimeout
		return
	}
	if head {
		c.deadline = s.now + electWaiterTimeout
		s.takes(t, "heartbeat", c, min(s.now+Time(c.lease), c.deadline))
		return
	}
	if wasLive {
		t.Fatalf("a heartbeating waiter is never lost: heartbeat of %s, a live waiter, failed", c.hold)
	}
}

// giveUp ends a candidate's campaign: it leaves the queue, or passes on the lock it holds.
func (s *electMachine) giveUp(t *rapid.T) {
	c := s.pick(t, func(c *electCandidate) bool { return c.live(s.now) || c.holding(s.now) })
	wasLive, held := c.live(s.now), c.holding(s.now)
	got := s.m.GiveUp(s.now, c.hold)
	if got.WasHolder != held || got.WasQueued != (wasLive && !held) {
		t.Fatalf("give-up of %s (live %v, holding %v): %+v", c.hold, wasLive, held, got)
	}
	c.end()
	s.handed(t, "give-up by "+c.hold, got.Granted)
}

// lead makes a candidate's Lead, mostly the holder's (never a fair lock's request's: only
// Campaign leads).
func (s *electMachine) lead(t *rapid.T) {
	c := s.pick(t, func(c *electCandidate) bool { return c.holding(s.now) })
	if c.fair {
		t.Skip("a fair lock's request does not lead")
	}
	held := c.holding(s.now)
	value := fmt.Sprintf("%s-v%d", c.hold, rapid.IntRange(0, 1).Draw(t, "value"))
	before := s.m.Changes(s.now)
	got := s.m.Lead(s.now, c.hold, value)
	if got.Led != held {
		t.Fatalf("lead: Lead of %s (holding %v) led %v", c.hold, held, got.Led)
	}
	if !held {
		if after := s.m.Changes(s.now); len(after) != len(before) {
			t.Fatalf("lead: a Lead that failed published %v", after[len(before):])
		}
		return
	}
	if c.token == 0 {
		if n := len(s.tokens); n > 0 && got.Token <= s.tokens[n-1] {
			t.Fatalf("tokens strictly increase: %s led with token %d after a leader with %d", c.hold, got.Token, s.tokens[n-1])
		}
		c.token = got.Token
		s.tokens = append(s.tokens, got.Token)
	} else if got.Token != c.token {
		t.Fatalf("tokens: %s led again with token %d; it had %d", c.hold, got.Token, c.token)
	}
	if s.rec.Hold == c.hold && s.now < s.recEnds {
		if got.Revision != s.rec.Revision {
			t.Fatalf("lead: a second Lead of %s answered revision %d, the record has %d", c.hold, got.Revision, s.rec.Revision)
		}
		return
	}
	if !c.led {
		// The holder leads, and holds came in arrival order (see takes): so do leaders.
		if c.grant <= s.ledGrant {
			t.Fatalf("candidates lead in arrival order: %s (hold %d) began to lead after a later hold (%d) did", c.hold, c.grant, s.ledGrant)
		}
		s.ledGrant = c.grant
	}
	c.led = true
	if got.Revision != 1 {
		t.Fatalf("lead: %s began to lead with revision %d", c.hold, got.Revision)
	}
	s.rec, s.recEnds = Leadership{Hold: c.hold, Token: got.Token, Revision: 1, Value: value}, s.now+Time(c.lease)
	s.changes = append(s.changes, s.rec)
}

// leader returns the shadow's leader: the holder, when the record names it.
func (s *electMachine) leader(t *rapid.T) (Leadership, bool) {
	t.Helper()
	h := s.holder(t)
	if h == nil || s.rec.Hold != h.hold || s.now >= s.recEnds {
		return Leadership{}, false
	}
	return s.rec, true
}

// proclaim makes a candidate's Proclaim, mostly the leader's.
func (s *electMachine) proclaim(t *rapid.T) {
	l, leads := s.leader(t)
	c := s.pick(t, func(c *electCandidate) bool { return leads && c.hold == l.Hold })
	if c.fair {
		t.Skip("a fair lock's request does not proclaim")
	}
	value := fmt.Sprintf("%s-v%d", c.hold, rapid.IntRange(0, 1).Draw(t, "value"))
	rev := s.m.Proclaim(s.now, c.hold, value)
	if !leads || c.hold != l.Hold {
		if rev != 0 {
			t.Fatalf("proclaim: %s, which does not lead (leader %+v), proclaimed revision %d", c.hold, l, rev)
		}
		return
	}
	if rev != l.Revision+1 {
		t.Fatalf("proclaim: revision %d after %d", rev, l.Revision)
	}
	after, ok := s.m.Leader(s.now)
	if !ok || after.Token != l.Token || after.Hold != c.hold || after.Value != value || after.Revision != rev {
		t.Fatalf("Proclaim keeps the token: after %s proclaimed %q the leader is %+v (%v); it was %+v", c.hold, value, after, ok, l)
	}
	s.rec.Revision, s.rec.Value = rev, value
	s.changes = append(s.changes, s.rec)
}

// renew renews a holder's hold, and the record with it.
func (s *electMachine) renew(t *rapid.T) {
	c := s.pick(t, func(c *electCandidate) bool { return c.holding(s.now) })
	held := c.holding(s.now)
	if s.m.Renew(s.now, c.hold) != held {
		t.Fatalf("renew of %s (holding %v) answered %v", c.hold, held, !held)
	}
	if held {
		c.until = s.now + Time(c.lease)
		if s.rec.Hold != "" && s.now < s.recEnds {
			s.recEnds = c.until
		}
	}
}

// resign ends a leader's (or holder's) hold and hands the lock on.
func (s *electMachine) resign(t *rapid.T) {
	c := s.pick(t, func(c *electCandidate) bool { return c.holding(s.now) })
	held := c.holding(s.now)
	got, err := s.m.Resign(s.now, c.hold)
	if held != (err == nil) {
		t.Fatalf("resign of %s (holding %v): %v", c.hold, held, err)
	}
	if err != nil {
		if err != ErrNotOwner {
			t.Fatalf("resign of %s: %v", c.hold, err)
		}
		return
	}
	c.end()
	s.handed(t, "resignation of "+c.hold, got.Granted)
	if _, ok := s.m.Leader(s.now); ok && got.Granted == "" {
		t.Fatalf("leadership ends with the hold: after %s resigned a leader remains", c.hold)
	}
}

func (s *electMachine) forceRelease(t *rapid.T) {
	h := s.holder(t)
	held, granted := s.m.ForceRelease(s.now)
	if held != (h != nil) {
		t.Fatalf("force release at %d: held %v, the shadow's holder %v", s.now, held, h)
	}
	if h != nil {
		h.end()
		s.handed(t, "forced release", granted)
	}
}

// observe moves an observer: its receiver takes what the channel holds, or it hears the next
// change published, loses its subscription, subscribes again, or reads the leader once its
// subscription was confirmed.
func (s *electMachine) observe(t *rapid.T) {
	i := rapid.IntRange(0, electObservers-1).Draw(t, "observer")
	o := s.observers[i]
	hear := func(l Leadership) {
		if o.o.Hear(l) {
			o.sent = append(o.sent, l)
		}
	}
	if rapid.IntRange(0, 2).Draw(t, "receive") == 0 {
		l, ok := o.o.Receive()
		if ok {
			o.received = append(o.received, l)
		}
		// Once the receiver took what the channel holds, it has the last change's token and
		// value.
		if last, heard := o.o.Last(); heard {
			if n := len(o.received); n == 0 || o.received[n-1].Token != last.Token || o.received[n-1].Value != last.Value {
				t.Fatalf("observer %d heard %+v last, its receiver has %v", i, last, o.received)
			}
		} else if ok {
			t.Fatalf("observer %d's receiver took %+v before anything was heard", i, l)
		}
		return
	}
	switch {
	case !o.subscribed:
		o.subscribed, o.next, o.catchUp = true, len(s.changes), true
	case o.catchUp:
		o.catchUp = false
		if l, ok := s.m.Leader(s.now); ok {
			hear(l)
			// The leader is the latest change: the observer's last is it now.
			if last, _ := o.o.Last(); last != l {
				t.Fatalf("observer %d read the leader %+v at its catch-up; its last is %+v", i, l, last)
			}
		}
	case rapid.IntRange(0, 5).Draw(t, "lost") == 0:
		o.subscribed = false
	case o.next < len(s.changes):
		hear(s.changes[o.next])
		o.next++
	default:
		t.Skip("nothing to hear")
	}
}

// check holds the model's queries and the shadow together.
func (s *electMachine) check(t *rapid.T) {
	h := s.holder(t)
	got, ok := s.m.Holder(s.now)
	if want := h != nil; ok != want || want && got != h.hold {
		t.Fatalf("mutual exclusion: the model's holder at %d is %q (%v), the shadow's %+v", s.now, got, ok, h)
	}
	if q, want := s.m.Queue(s.now), s.order(); !slices.Equal(q, want) {
		t.Fatalf("arrival order: the queue at %d is %v, want %v", s.now, q, want)
	}
	// At most one leader: the holder, once it led, while the record names it.
	var leaders []string
	for _, c := range s.cands {
		if c.led && c.holding(s.now) && s.rec.Hold == c.hold && s.now < s.recEnds {
			leaders = append(leaders, c.hold)
		}
	}
	if len(leaders) > 1 {
		t.Fatalf("at most one leader: %v lead at %d", leaders, s.now)
	}
	l, lok := s.m.Leader(s.now)
	want, wok := s.leader(t)
	if l != want || lok != wok {
		t.Fatalf("at most one leader: Leader at %d is %+v (%v), want %+v (%v)", s.now, l, lok, want, wok)
	}
	if lok {
		if c := s.byHold[l.Hold]; c.fair || !c.led || c.token != l.Token {
			t.Fatalf("Leader at %d is %+v, which the replies do not make a leader (%+v)", s.now, l, *c)
		}
	}
	// The changes, in order.
	changes := s.m.Changes(s.now)
	if !slices.Equal(changes, s.changes) {
		t.Fatalf("changes: the model published %v, the replies %v", changes, s.changes)
	}
	for i := 1; i < len(changes); i++ {
		if !changes[i-1].Before(changes[i]) {
			t.Fatalf("changes are ordered by (token, revision): %+v then %+v", changes[i-1], changes[i])
		}
	}
	if lok && l != changes[len(changes)-1] {
		t.Fatalf("changes: the leader %+v is not the last change %+v", l, changes[len(changes)-1])
	}
	for i, o := range s.observers {
		subsequence(t, fmt.Sprintf("observer %d's sends", i), o.sent, changes)
		subsequence(t, fmt.Sprintf("observer %d's receiver", i), o.received, changes)
		for j := 1; j < len(o.received); j++ {
			if a, b := o.received[j-1], o.received[j]; a.Token == b.Token && a.Value == b.Value {
				t.Fatalf("observer %d's receiver took the same token and value twice in a row: %v", i, o.received)
			}
		}
	}
}

// subsequence checks that got is increasing in (token, revision) and a subsequence of
// changes.
func subsequence(t *rapid.T, what string, got, changes []Leadership) {
	t.Helper()
	at := 0
	for j, r := range got {
		if j > 0 && !got[j-1].Before(r) {
			t.Fatalf("%s: %+v after %+v", what, r, got[j-1])
		}
		k := slices.Index(changes[at:], r)
		if k < 0 {
			t.Fatalf("%s: %v is not a subsequence of the changes %v", what, got, changes)
		}
		at += k + 1
	}
}

// electMachineWith returns a rapid property that runs the state machine with the named
// actions (and the check).
func electMachineWith(names ...string) func(*rapid.T) {
	return func(t *rapid.T) {
		s := newElectMachine()
		all := s.actions()
		actions := map[string]func(*rapid.T){"": all[""]}
		for _, name := range names {
			a, ok := all[name]
			if !ok {
				panic("unknown action " + name)
			}
			actions[name] = a
		}
		// Several rounds of rapid's steps, so that a run has room for a few leaderships.
		for range electRounds {
			t.Repeat(actions)
		}
	}
}

func TestElectionAgreesWithShadowUnderAllOperations(t *testing.T) {
	rapid.Check(t, electMachineWith("advance", "campaign", "again", "heartbeat", "giveUp", "lead",
		"proclaim", "renew", "resign", "forceRelease", "observe"))
}

// Without time passing, nobody dies and no lease runs out: the properties under the calls a
// live election makes, densely.
func TestElectionAtMostOneLeaderAndTokensIncrease(t *testing.T) {
	rapid.Check(t, electMachineWith("campaign", "again", "lead", "proclaim", "resign", "giveUp"))
}

func TestElectionCandidatesLeadInArrivalOrder(t *testing.T) {
	rapid.Check(t, electMachineWith("advance", "campaign", "again", "heartbeat", "lead", "resign"))
}

func TestElectionObserversSeeChangesInOrder(t *testing.T) {
	rapid.Check(t, electMachineWith("campaign", "again", "lead", "proclaim", "resign", "observe"))
}

// A holder leads only from its Lead on: before it, Leader reports nobody, and Proclaim
// fails.
func TestElectionHolderLeadsOnlyOnceItLed(t *testing.T) {
	m := NewElection(50)
	if r := m.Attempt(0, "a", 100, true); !r.Acquired {
		t.Fatalf("attempt on a free lock: %+v", r)
	}
	if l, ok := m.Leader(1); ok {
		t.Fatalf("leader before the holder led: %+v", l)
	}
	if rev := m.Proclaim(1, "a", "x"); rev != 0 {
		t.Fatalf("proclaim before Lead: revision %d", rev)
	}
	got := m.Lead(2, "a", "one")
	if !got.Led || got.Token != 1 || got.Revision != 1 {
		t.Fatalf("lead: %+v", got)
	}
	if l, ok := m.Leader(2); !ok || l != (Leadership{Hold: "a", Token: 1, Revision: 1, Value: "one"}) {
		t.Fatalf("leader: %+v %v", l, ok)
	}
	// A second Lead (a lost reply's retry) answers the same and publishes nothing.
	if again := m.Lead(3, "a", "other"); again != got {
		t.Fatalf("second lead: %+v, want %+v", again, got)
	}
	if c := m.Changes(3); len(c) != 1 {
		t.Fatalf("changes after a second Lead: %v", c)
	}
}

// Resign hands the lock to the next candidate, which does not lead until its Lead; the
// resigned leader's record is stale, and its Proclaim fails. The next leader's token is
// greater.
func TestElectionResignHandsOnAndTheNextLeadsWithAGreaterToken(t *testing.T) {
	m := NewElection(50)
	m.Attempt(0, "a", 100, true)
	m.Lead(0, "a", "a0")
	m.Proclaim(1, "a", "a1")
	if r := m.Attempt(2, "b", 100, true); !r.Queued {
		t.Fatalf("b: %+v", r)
	}
	res, err := m.Resign(3, "a")
	if err != nil || res.Granted != "b" {
		t.Fatalf("resign: %+v %v", res, err)
	}
	if l, ok := m.Leader(3); ok {
		t.Fatalf("leader after the resignation, before b led: %+v", l)
	}
	if rev := m.Proclaim(3, "a", "a2"); rev != 0 {
		t.Fatalf("proclaim of the resigned leader: %d", rev)
	}
	if _, err := m.Resign(3, "a"); err != ErrNotOwner {
		t.Fatalf("second resign: %v", err)
	}
	if r := m.AttemptAgain(4, "b", true); !r.Acquired {
		t.Fatalf("b adopts: %+v", r)
	}
	got := m.Lead(4, "b", "b0")
	if !got.Led || got.Token != 2 || got.Revision != 1 {
		t.Fatalf("b leads: %+v", got)
	}
	want := []Leadership{{"a", 1, 1, "a0"}, {"a", 1, 2, "a1"}, {"b", 2, 1, "b0"}}
	if c := m.Changes(4); !slices.Equal(c, want) {
		t.Fatalf("changes %v, want %v", c, want)
	}
}

// The leader's lease runs out: nobody leads, the lock is kept for the head of the queue,
// whose heartbeat takes it; a renewal before that would have kept the leadership, record
// included.
func TestElectionLeaseExpiryEndsLeadershipAndRenewKeepsIt(t *testing.T) {
	m := NewElection(1000)
	m.Attempt(0, "a", 100, true)
	m.Lead(0, "a", "a0")
	m.Attempt(1, "b", 100, true)
	if !m.Renew(90, "a") {
		t.Fatal("renew of the holder failed")
	}
	if _, ok := m.Leader(150); !ok {
		t.Fatal("the renewed leader lost its record")
	}
	if _, ok := m.Leader(190); ok {
		t.Fatal("a leader after its lease ran out")
	}
	if h, ok := m.Holder(190); ok {
		t.Fatalf("holder %s after the lease ran out", h)
	}
	if m.Heartbeat(191, "b") {
		t.Fatal("the head's heartbeat on a free lock did not take it")
	}
	if h, _ := m.Holder(191); h != "b" {
		t.Fatalf("holder %q, want b", h)
	}
	if m.Renew(191, "a") || m.Proclaim(191, "a", "late") != 0 || m.Lead(191, "a", "late").Led {
		t.Fatal("the expired leader renewed, proclaimed or led again")
	}
}

// A fair lock's holder on the election's name holds the lock and never leads: candidates
// queue behind it, and Leader reports nobody.
func TestElectionFairLockHolderExcludesLeaders(t *testing.T) {
	m := NewElection(50)
	if r := m.Attempt(0, "fair", 100, false); !r.Acquired {
		t.Fatalf("fair TryLock: %+v", r)
	}
	if r := m.Attempt(1, "c", 100, true); !r.Queued {
		t.Fatalf("candidate: %+v", r)
	}
	if m.Lead(1, "c", "x").Led {
		t.Fatal("a queued candidate led")
	}
	if l, ok := m.Leader(1); ok {
		t.Fatalf("leader under a fair holder: %+v", l)
	}
	if r := m.Attempt(2, "fair2", 100, false); r.Acquired || r.Queued {
		t.Fatalf("second fair TryLock: %+v", r)
	}
}

// A candidate handed the lock that gives up passes it on; a candidate that gives up while
// queued leaves the queue; a forced release ends the leader's hold.
func TestElectionGiveUpAndForcedRelease(t *testing.T) {
	m := NewElection(50)
	m.Attempt(0, "a", 100, true)
	m.Lead(0, "a", "a0")
	m.Attempt(1, "b", 100, true)
	m.Attempt(2, "c", 100, true)
	m.Attempt(3, "d", 100, true)
	if r := m.GiveUp(4, "c"); !r.WasQueued || r.Granted != "" {
		t.Fatalf("give-up of c: %+v", r)
	}
	held, granted := m.ForceRelease(5)
	if !held || granted != "b" {
		t.Fatalf("forced release: %v %q", held, granted)
	}
	if r := m.GiveUp(6, "b"); !r.WasHolder || r.Granted != "d" {
		t.Fatalf("give-up of b, handed the lock: %+v", r)
	}
	if r := m.Lead(7, "d", "d0"); !r.Led || r.Token != 2 {
		t.Fatalf("d leads: %+v", r)
	}
}

// An observer that lost its subscription misses the changes meanwhile; its catch-up reads the
// current leader, and a change published before the read that it hears afterwards is not
// sent again.
func TestElectionObserverCatchesUpWithoutGoingBack(t *testing.T) {
	var o ElectionObserver
	a1 := Leadership{"a", 1, 1, "x"}
	a2 := Leadership{"a", 1, 2, "y"}
	a3 := Leadership{"a", 1, 3, "x"}
	b1 := Leadership{"b", 2, 1, "x"}
	if !o.Hear(a1) {
		t.Fatal("first change not sent")
	}
	// Subscription lost; a2 and b1 happen; the catch-up reads b1; a2, published after the
	// resubscription but before the read, arrives late.
	if !o.Hear(b1) || o.Hear(a2) || o.Hear(b1) {
		t.Fatal("a late or repeated change was sent")
	}
	if last, _ := o.Last(); last != b1 {
		t.Fatalf("last %+v", last)
	}
	if l, ok := o.Receive(); !ok || l != b1 {
		t.Fatalf("the receiver, behind, took %+v (%v); want the latest", l, ok)
	}
	// Same token and value after a revision in between that the observer missed: nothing new
	// to send, but the revision is remembered.
	var p ElectionObserver
	p.Hear(a1)
	if p.Hear(a3) {
		t.Fatal("sent the same token and value twice in a row")
	}
	if p.Hear(a2) {
		t.Fatal("sent a change older than the last heard")
	}
}

// An observer fed a random sequence of changes in order, with some missed, some heard again
// late, and a receiver that takes what the channel holds now and then: what it sends and what
// the receiver takes is increasing and a subsequence of the changes; the receiver never takes
// the same token and value twice in a row, and once it took what the channel holds it has the
// token and value of the last change heard.
func TestElectionObserverUnderRandomChanges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var changes []Leadership
		token, rev := int64(1), int64(0)
		for range rapid.IntRange(1, 30).Draw(t, "changes") {
			if rev > 0 && rapid.IntRange(0, 3).Draw(t, "new leader") == 0 {
				token, rev = token+rapid.Int64Range(1, 3).Draw(t, "token step"), 0
			}
			rev++
			value := rapid.SampledFrom([]string{"x", "y"}).Draw(t, "value")
			changes = append(changes, Leadership{Hold: fmt.Sprint(token), Token: token, Revision: rev, Value: value})
		}
		var o ElectionObserver
		var sent, received []Leadership
		next, heard := 0, -1 // the next change, the last one heard
		for next < len(changes) {
			switch rapid.IntRange(0, 3).Draw(t, "step") {
			case 0:
				if l, ok := o.Receive(); ok {
					received = append(received, l)
				}
				last, heardAny := o.Last()
				if n := len(received); heardAny && (n == 0 || received[n-1].Token != last.Token || received[n-1].Value != last.Value) {
					t.Fatalf("heard %+v last, the receiver has %v", last, received)
				}
			case 1: // missed
				next++
			case 2: // a change older than the last heard, heard late
				if heard >= 0 {
					if o.Hear(changes[rapid.IntRange(0, heard).Draw(t, "late")]) {
						t.Fatal("sent a change heard late")
					}
				}
			default:
				if o.Hear(changes[next]) {
					sent = append(sent, changes[next])
				}
				heard = next
				next++
			}
		}
		if l, ok := o.Receive(); ok {
			received = append(received, l)
		}
		subsequence(t, "sent", sent, changes)
		subsequence(t, "received", received, changes)
		for j := 1; j < len(received); j++ {
			if a, b := received[j-1], received[j]; a.Token == b.Token && a.Value == b.Value {
				t.Fatalf("the receiver took the same token and value twice in a row: %v", received)
			}
		}
	})
}

// A receiver that fell behind while the value went from x to y and back to x has x already:
// nothing is sent; one that took nothing yet takes the latest.
func TestElectionObserverNeverHandsTheReceiverTheSameValueTwiceInARow(t *testing.T) {
	x1, y2, x3, z4 := Leadership{"a", 1, 1, "x"}, Leadership{"a", 1, 2, "y"}, Leadership{"a", 1, 3, "x"}, Leadership{"a", 1, 4, "z"}
	var o ElectionObserver
	o.Hear(x1)
	if l, ok := o.Receive(); !ok || l != x1 {
		t.Fatalf("took %+v %v", l, ok)
	}
	if !o.Hear(y2) || o.Hear(x3) {
		t.Fatal("sent the value the receiver has")
	}
	if l, ok := o.Receive(); ok {
		t.Fatalf("the receiver, which has x, took %+v", l)
	}
	if !o.Hear(z4) {
		t.Fatal("z not sent")
	}
	if l, ok := o.Receive(); !ok || l != z4 {
		t.Fatalf("took %+v %v", l, ok)
	}
	var p ElectionObserver
	p.Hear(x1)
	p.Hear(y2)
	p.Hear(x3)
	if l, ok := p.Receive(); !ok || l != x3 {
		t.Fatalf("a receiver that took nothing took %+v %v; want the latest", l, ok)
	}
}

func TestElectionMisusePanics(t *testing.T) {
	queued := func() *Election {
		m := NewElection(50)
		m.Attempt(10, "a", 10, true)
		m.Lead(10, "a", "v")
		m.Attempt(10, "b", 10, true)
		return m
	}
	snapshot := func(m *Election) Election {
		c := *m
		l := *m.lock
		l.queue = slices.Clone(l.queue)
		c.lock, c.leases, c.led, c.changes = &l, maps.Clone(m.leases), maps.Clone(m.led), slices.Clone(m.changes)
		return c
	}
	for _, tc := range []struct {
		name string
		want string
		call func(m *Election)
	}{
		{"time goes backwards", "before the already observed time", func(m *Election) { m.Lead(9, "a", "v") }},
		{"time goes backwards in a query", "before the already observed time", func(m *Election) { m.Leader(9) }},
		{"empty hold", "empty owner", func(m *Election) { m.Attempt(10, "", 10, true) }},
		{"empty hold in Proclaim", "empty owner", func(m *Election) { m.Proclaim(10, "", "v") }},
		{"zero lease", "non-positive lease", func(m *Election) { m.Attempt(10, "c", 0, true) }},
		{"an unknown hold's renewal", "never told of", func(m *Election) { m.Renew(10, "z") }},
		{"a known hold's first attempt", "knows already", func(m *Election) { m.Attempt(11, "a", 10, true) }},
		{"an unknown hold's Lead", "never told of", func(m *Election) { m.Lead(11, "z", "v") }},
		{"an unknown hold's Resign", "never told of", func(m *Election) { m.Resign(11, "z") }},
		{"an unknown hold's later attempt", "never told of", func(m *Election) { m.AttemptAgain(11, "z", true) }},
		{"a later attempt of a hold that led", "which led", func(m *Election) { m.AttemptAgain(11, "a", true) }},
		{"zero Election", "not made by NewElection", func(m *Election) { (&Election{}).Attempt(10, "c", 10, true) }},
		{"zero Election query", "not made by NewElection", func(m *Election) { (&Election{}).Leader(10) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := queued()
			before := snapshot(m)
			msg := func() (msg string) {
				defer func() { msg = fmt.Sprint(recover()) }()
				tc.call(m)
				return "no panic"
			}()
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("panic = %q, want one containing %q", msg, tc.want)
			}
			if !reflect.DeepEqual(snapshot(m), before) {
				t.Fatalf("a rejected call changed the model: %+v, was %+v", snapshot(m), before)
			}
		})
	}
	for _, timeout := range []int64{0, -1} {
		msg := func() (msg string) {
			defer func() { msg = fmt.Sprint(recover()) }()
			NewElection(timeout)
			return "no panic"
		}()
		if !strings.Contains(msg, "non-positive waiter timeout") {
			t.Fatalf("NewElection(%d): panic = %q", timeout, msg)
		}
	}
}

// Candidates lead one at a time, in the order they campaigned; a leader's Proclaim keeps its
// token; a new leader's token is greater.
func ExampleElection() {
	m := NewElection(5000) // waiters stay live 5s after their last attempt or heartbeat

	m.Attempt(0, "alice", 30000, true) // Campaign: alice takes the free lock
	fmt.Println("alice leads:", m.Lead(0, "alice", "alice:8080"))
	m.Attempt(1, "bob", 30000, true) // bob queues
	m.Proclaim(2, "alice", "alice:9090")
	l, _ := m.Leader(2)
	fmt.Printf("leader: %s %q token %d revision %d\n", l.Hold, l.Value, l.Token, l.Revision)

	r, _ := m.Resign(3, "alice")
	fmt.Println("alice resigns, the lock goes to:", r.Granted)
	_, ok := m.Leader(3)
	fmt.Println("a leader before bob's Lead:", ok)
	fmt.Println("bob leads:", m.Lead(3, "bob", "bob:8080"))
	for _, c := range m.Changes(3) {
		fmt.Printf("change: %s %q token %d revision %d\n", c.Hold, c.Value, c.Token, c.Revision)
	}
	// Output:
	// alice leads: {true 1 1}
	// leader: alice "alice:9090" token 1 revision 2
	// alice resigns, the lock goes to: bob
	// a leader before bob's Lead: false
	// bob leads: {true 2 1}
	// change: alice "alice:8080" token 1 revision 1
	// change: alice "alice:9090" token 1 revision 2
	// change: bob "bob:8080" token 2 revision 1
}
