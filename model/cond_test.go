package model

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// The property tests of Cond drive the model with callers that lock, unlock, wait on the
// condition, poll while they wait, give up, and signal, at random logical times. A shadow
// keeps every caller's place in its own shape (holding, queued on the lock with an arrival
// number, waiting on the condition with a wait number, each with its liveness deadline), and
// every step compares the model with it:
//
//   - no lost signal and FIFO signalling: a Signal moves exactly the live waiter with the
//     smallest wait number, a SignalAll every live one in wait-number order, and a Signal that
//     moves nobody finds no live waiter;
//   - the lock's queue stays FIFO for the moved waiters: a release hands the lock to the live
//     waiter with the smallest arrival number;
//   - mutual exclusion: at most one caller holds, and nobody both holds and waits;
//   - a Wait is atomic: after it, the caller's new hold waits on the condition and its old
//     hold is over, and at no state the caller is in neither place (the invariant compares
//     every caller's place after every step).
//
// Leases are far longer than any run, and a granted waiter renews its lease at once, so a hold
// ends only by its release; waiters die when time passes their deadline.

const (
	condTimeout    = 100 // ms a waiter stays live after its latest Wait, attempt or Poll
	condLease      = 1 << 40
	condMaxAdvance = 40
	condCallers    = 5
)

type condPlace int

const (
	condIdle condPlace = iota
	condHolding
	condQueued  // on the lock's queue
	condWaiting // on the condition
)

type condCaller struct {
	hold     string
	place    condPlace
	order    int // arrival number on the lock's queue, or wait number on the condition
	deadline Time
}

type condMachine struct {
	c     *Cond
	now   Time
	seq   int // hold ids and order numbers
	calls []*condCaller
	moved int // waiters moved by signals, over the run
}

func (s *condMachine) fresh() string {
	s.seq++
	return fmt.Sprintf("client:%d", s.seq)
}

// shadowAt kills the callers whose wait passed its deadline.
func (s *condMachine) shadowAt() {
	for _, c := range s.calls {
		if (c.place == condQueued || c.place == condWaiting) && s.now >= c.deadline {
			c.place, c.hold = condIdle, ""
		}
	}
}

func (s *condMachine) in(place condPlace) []*condCaller {
	s.shadowAt()
	var out []*condCaller
	for _, c := range s.calls {
		if c.place == place {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *condCaller) int { return a.order - b.order })
	return out
}

func (s *condMachine) caller(t *rapid.T, place condPlace) *condCaller {
	cs := s.in(place)
	if len(cs) == 0 {
		t.Skip("no such caller")
	}
	return rapid.SampledFrom(cs).Draw(t, "caller")
}

func (s *condMachine) byHold(hold string) *condCaller {
	for _, c := range s.calls {
		if c.hold == hold && hold != "" {
			return c
		}
	}
	return nil
}

// granted records the hand-off the model reported, after checking that it went to the live
// head of the lock's queue in arrival order.
func (s *condMachine) granted(t *rapid.T, how, hold string, head *condCaller) {
	switch {
	case head == nil && hold != "":
		t.Fatalf("%s handed the lock to %s with nobody queued", how, hold)
	case head != nil && hold != head.hold:
		t.Fatalf("%s handed the lock to %q; the live head in arrival order is %s", how, hold, head.hold)
	case head != nil:
		// The grant's lease runs only to the waiter's liveness deadline until the waiter,
		// told of it, renews it to its own, as the real one does at once.
		head.place = condHolding
		if !s.c.lock.Renew(s.now, hold, condLease) {
			t.Fatalf("%s, granted, cannot renew", hold)
		}
	}
}

func (s *condMachine) head() *condCaller {
	if q := s.in(condQueued); len(q) > 0 {
		return q[0]
	}
	return nil
}

func (s *condMachine) advance(t *rapid.T) {
	s.now += Time(rapid.Int64Range(0, condMaxAdvance).Draw(t, "dt"))
}

func (s *condMachine) lock(t *rapid.T) {
	c := s.caller(t, condIdle)
	c.hold = s.fresh()
	r := s.c.lock.Attempt(s.now, c.hold, condLease, true)
	busy := len(s.in(condHolding)) > 0 || len(s.in(condQueued)) > 0
	switch {
	case r.Acquired && busy:
		t.Fatalf("%s took a lock that is held or has waiters", c.hold)
	case r.Acquired:
		c.place = condHolding
	case !busy:
		t.Fatalf("%s queued on a free lock: %+v", c.hold, r)
	default:
		s.seq++
		c.place, c.order, c.deadline = condQueued, s.seq, s.now+condTimeout
	}
}

func (s *condMachine) again(t *rapid.T) {
	c := s.caller(t, condQueued)
	r := s.c.lock.AttemptAgain(s.now, c.hold, condLease, true)
	if r.Acquired || r.Dropped || !r.Queued {
		t.Fatalf("later attempt of %s, queued behind a holder: %+v", c.hold, r)
	}
	c.deadline = s.now + condTimeout
}

func (s *condMachine) unlock(t *rapid.T) {
	c := s.caller(t, condHolding)
	r, err := s.c.lock.Release(s.now, c.hold, true)
	if err != nil {
		t.Fatalf("release by the holder %s: %v", c.hold, err)
	}
	c.place, c.hold = condIdle, ""
	s.granted(t, "release", r.Granted, s.head())
}

func (s *condMachine) wait(t *rapid.T) {
	c := s.caller(t, condHolding)
	old, next := c.hold, s.fresh()
	r, err := s.c.Wait(s.now, old, next, condLease)
	if err != nil {
		t.Fatalf("wait by the holder %s: %v", old, err)
	}
	s.seq++
	c.hold, c.place, c.order, c.deadline = next, condWaiting, s.seq, s.now+condTimeout
	s.granted(t, "wait", r.Granted, s.head())
	if w := s.c.Waiting(s.now); len(w) == 0 || w[len(w)-1] != next {
		t.Fatalf("after its wait, %s is not the condition's last waiter: %v", next, w)
	}
	if h, _, _ := s.c.lock.Holder(s.now); h == old {
		t.Fatalf("%s still holds after its wait", old)
	}
}

// waitByOther is a Wait by a hold that does not hold the lock: nothing changes.
func (s *condMachine) waitByOther(t *rapid.T) {
	c := s.caller(t, rapid.SampledFrom([]condPlace{condIdle, condQueued, condWaiting}).Draw(t, "place"))
	hold := c.hold
	if hold == "" {
		hold = s.fresh()
	}
	if _, err := s.c.Wait(s.now, hold, s.fresh(), condLease); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("wait by %s, which does not hold: %v", hold, err)
	}
}

func (s *condMachine) signal(t *rapid.T) {
	all := rapid.Bool().Draw(t, "all")
	want := s.in(condWaiting)
	if !all && len(want) > 1 {
		want = want[:1]
	}
	free := len(s.in(condHolding)) == 0
	r := s.c.Signal(s.now, all)
	var wantHolds []string
	for _, c := range want {
		wantHolds = append(wantHolds, c.hold)
	}
	if !slices.Equal(r.Moved, wantHolds) {
		t.Fatalf("signal (all %v) moved %v; the live waiters in wait order are %v", all, r.Moved, wantHolds)
	}
	s.moved += len(want)
	for _, c := range want {
		s.seq++
		c.place, c.order, c.deadline = condQueued, s.seq, s.now+condTimeout
	}
	var head *condCaller
	if free {
		head = s.head()
	}
	s.granted(t, "signal", r.Granted, head)
}

func (s *condMachine) poll(t *rapid.T) {
	c := s.caller(t, rapid.SampledFrom([]condPlace{condQueued, condWaiting}).Draw(t, "place"))
	on := s.c.Poll(s.now, c.hold)
	if on != (c.place == condWaiting) {
		t.Fatalf("poll of %s (place %d): %v", c.hold, c.place, on)
	}
	if on {
		c.deadline = s.now + condTimeout
	}
}

func (s *condMachine) giveUp(t *rapid.T) {
	c := s.caller(t, rapid.SampledFrom([]condPlace{condQueued, condWaiting}).Draw(t, "place"))
	if c.place == condWaiting {
		if !s.c.Leave(s.now, c.hold) {
			t.Fatalf("%s was not on the condition", c.hold)
		}
	} else if r := s.c.lock.GiveUp(s.now, c.hold); !r.WasQueued || r.Granted != "" {
		t.Fatalf("give up of %s, queued behind a holder: %+v", c.hold, r)
	}
	c.place, c.hold = condIdle, ""
}

// check compares every caller's place with the model.
func (s *condMachine) check(t *rapid.T) {
	holders := s.in(condHolding)
	if len(holders) > 1 {
		t.Fatalf("%d holders", len(holders))
	}
	holder, _, held := s.c.lock.Holder(s.now)
	switch {
	case len(holders) == 1 && holder != holders[0].hold, len(holders) == 0 && held:
		t.Fatalf("holder: model %q, shadow %v", holder, holders)
	}
	holds := func(cs []*condCaller) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.hold)
		}
		return out
	}
	q, w := s.c.lock.Queue(s.now), s.c.Waiting(s.now)
	if want := holds(s.in(condQueued)); !slices.Equal(q, want) {
		t.Fatalf("lock's queue: model %v, shadow %v", q, want)
	}
	if want := holds(s.in(condWaiting)); !slices.Equal(w, want) {
		t.Fatalf("condition: model %v, shadow %v", w, want)
	}
	for _, h := range w {
		if slices.Contains(q, h) || h == holder {
			t.Fatalf("%s waits on the condition and holds or queues on the lock", h)
		}
	}
}

func TestCondSignalsEveryLiveWaiterInWaitOrder(t *testing.T) {
	moved := 0
	rapid.Check(t, func(t *rapid.T) {
		s := &condMachine{c: NewCond(NewFair(condTimeout))}
		for range condCallers {
			s.calls = append(s.calls, &condCaller{})
		}
		t.Repeat(map[string]func(*rapid.T){
			"advance":     s.advance,
			"lock":        s.lock,
			"again":       s.again,
			"unlock":      s.unlock,
			"wait":        s.wait,
			"waitByOther": s.waitByOther,
			"signal":      s.signal,
			"poll":        s.poll,
			"giveUp":      s.giveUp,
			"":            s.check,
		})
		moved += s.moved
	})
	if moved == 0 {
		t.Fatal("no signal moved a waiter")
	}
}

// A Signal made while the lock is held queues the moved waiter behind the waiters already
// queued; a SignalAll on a free lock hands it to the longest waiter.
func TestCondSignalQueuesAtTheLockQueueTail(t *testing.T) {
	m := NewFair(condTimeout)
	c := NewCond(m)
	if r := m.Attempt(0, "a:1", condLease, true); !r.Acquired {
		t.Fatal(r)
	}
	if _, err := c.Wait(1, "a:1", "a:2", condLease); err != nil {
		t.Fatal(err)
	}
	m.Attempt(2, "b:1", condLease, true) // takes the free lock
	m.Attempt(3, "c:1", condLease, true) // queues
	if r := c.Signal(4, false); !slices.Equal(r.Moved, []string{"a:2"}) || r.Granted != "" {
		t.Fatalf("signal: %+v", r)
	}
	if q := m.Queue(4); !slices.Equal(q, []string{"c:1", "a:2"}) {
		t.Fatalf("queue %v", q)
	}
	r, _ := m.Release(5, "b:1", true)
	if r.Granted != "c:1" {
		t.Fatalf("release granted %q", r.Granted)
	}
	if _, err := c.Wait(6, "c:1", "c:2", condLease); err != nil {
		t.Fatal(err)
	}
	if h, _, _ := m.Holder(6); h != "a:2" {
		t.Fatalf("holder %q after c's wait", h)
	}
	if _, err := c.Wait(7, "a:2", "a:3", condLease); err != nil {
		t.Fatal(err)
	}
	if r := c.Signal(8, true); !slices.Equal(r.Moved, []string{"c:2", "a:3"}) || r.Granted != "c:2" {
		t.Fatalf("signal all on a free lock: %+v", r)
	}
	// A waiter that died on the condition is skipped.
	if _, err := c.Wait(9, "c:2", "c:3", condLease); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(10, "a:3", "a:4", condLease); err != nil {
		t.Fatal(err)
	}
	c.Poll(100, "a:4")
	if r := c.Signal(109, false); !slices.Equal(r.Moved, []string{"a:4"}) || r.Granted != "a:4" {
		t.Fatalf("signal past a dead waiter: %+v", r)
	}
}
