package model

import (
	"errors"
	"testing"

	"pgregory.net/rapid"
)

// The property tests below drive a Latch model with random operations at random logical
// times, with simulated waiters that do what the engine does for an Await: attempt, wait,
// attempt again when woken by the message of the CountDown that opened the latch, when their
// fallback timer (the hint) runs out, or when a heartbeat finds the latch open. A shadow keeps
// the count in a different shape (the count set, minus the CountDowns since, floored at 0,
// with its own expiry), and every action asserts the property its reply proves.

const (
	latchExpiry     = 100 // ms the count lives after it was set or changed
	latchMaxAdvance = 60  // ms; a time step is drawn from [0, latchMaxAdvance]
	latchWaiters    = 4
)

// latchWaiter is one simulated Await.
type latchWaiter struct {
	waiting  bool  // queued: waits for a wake, its timer or its heartbeat
	woken    bool  // the message of an opening CountDown reached it
	wokenGen int   // the shadow's setGen when it was woken
	timerAt  Time  // when its fallback timer runs out
	returned bool  // Await returned nil
	failed   error // Await failed
}

type latchMachine struct {
	m   *Latch
	now Time

	// The shadow.
	set       int64 // the count last set, 0 when never
	downs     int64 // CountDowns that lowered it since
	expire    Time
	live      bool
	openedGen int // incremented when a CountDown opens the latch
	setGen    int // incremented when the count is set again or expires

	ws []*latchWaiter
}

func (s *latchMachine) shadowLive() bool {
	if s.live && s.now >= s.expire {
		s.live = false
		s.setGen++
	}
	return s.live
}

func (s *latchMachine) shadowCount() int64 {
	if !s.shadowLive() {
		return 0
	}
	return max(s.set-s.downs, 0)
}

func (s *latchMachine) advance(t *rapid.T) {
	s.now += Time(rapid.Int64Range(0, latchMaxAdvance).Draw(t, "advance"))
	s.shadowLive()
}

func (s *latchMachine) trySet(t *rapid.T) {
	n := rapid.Int64Range(-1, 4).Draw(t, "n")
	ok, err := s.m.TrySetCount(s.now, n, latchExpiry)
	switch {
	case n < 1:
		if !errors.Is(err, ErrLatchCount) || ok {
			t.Fatalf("invalid count: TrySetCount(%d) = %v, %v", n, ok, err)
		}
	case s.shadowCount() > 0:
		if ok || err != nil {
			t.Fatalf("set only at 0: TrySetCount(%d) at count %d = %v, %v", n, s.shadowCount(), ok, err)
		}
	default:
		if !ok || err != nil {
			t.Fatalf("set when not set or 0: TrySetCount(%d) = %v, %v", n, ok, err)
		}
		s.set, s.downs, s.expire, s.live = n, 0, s.now+latchExpiry, true
		s.setGen++
	}
}

func (s *latchMachine) countDown(t *rapid.T) {
	before, live := s.shadowCount(), s.shadowLive()
	n, opened, err := s.m.CountDown(s.now, latchExpiry)
	switch {
	case !live:
		if !errors.Is(err, ErrLatchNotSet) {
			t.Fatalf("not set: CountDown = %d, %v, %v", n, opened, err)
		}
		return
	case err != nil:
		t.Fatalf("CountDown of a set latch failed: %v", err)
	case before == 0:
		if n != 0 || opened {
			t.Fatalf("never below zero: CountDown at 0 = %d, opened %v", n, opened)
		}
		return
	}
	s.downs++
	s.expire = s.now + latchExpiry
	if n != before-1 || opened != (n == 0) {
		t.Fatalf("one down: CountDown at %d = %d, opened %v", before, n, opened)
	}
	if opened {
		s.openedGen++
		for _, w := range s.ws {
			if w.waiting {
				w.woken, w.wokenGen = true, s.setGen // one message wakes every waiter
			}
		}
	}
}

// attempt is one attempt of waiter w, as the engine makes it.
func (s *latchMachine) attempt(t *rapid.T, w *latchWaiter, why string) {
	count, live := s.shadowCount(), s.shadowLive()
	st, hint, err := s.m.Await(s.now, true)
	switch {
	case !live:
		if !errors.Is(err, ErrLatchNotSet) {
			t.Fatalf("not set: %s attempt = %v, %v", why, st, err)
		}
		w.waiting, w.failed = false, err
	case err != nil:
		t.Fatalf("%s attempt of a set latch failed: %v", why, err)
	case st == Acquired:
		if count != 0 {
			t.Fatalf("await returns only at zero: %s attempt acquired at count %d", why, count)
		}
		w.waiting, w.returned = false, true
	case st == Queued:
		if count == 0 {
			t.Fatalf("await returns at zero: %s attempt queued at count 0", why)
		}
		if hint < 1 || Time(hint) != s.expire-s.now {
			t.Fatalf("hint: %s attempt's hint %d, the count has %d ms left", why, hint, s.expire-s.now)
		}
		w.waiting, w.timerAt = true, s.now+Time(hint)
	default:
		t.Fatalf("%s attempt replied %v", why, st)
	}
	w.woken = false
}

func (s *latchMachine) idle(t *rapid.T) *latchWaiter {
	var idle []*latchWaiter
	for _, w := range s.ws {
		if !w.waiting {
			idle = append(idle, w)
		}
	}
	if len(idle) == 0 {
		t.Skip("every waiter waits")
	}
	return idle[rapid.IntRange(0, len(idle)-1).Draw(t, "idle waiter")]
}

func (s *latchMachine) waiting(t *rapid.T, ok func(*latchWaiter) bool) *latchWaiter {
	var ws []*latchWaiter
	for _, w := range s.ws {
		if w.waiting && ok(w) {
			ws = append(ws, w)
		}
	}
	if len(ws) == 0 {
		t.Skip("no such waiter")
	}
	return ws[rapid.IntRange(0, len(ws)-1).Draw(t, "waiter")]
}

func (s *latchMachine) await(t *rapid.T) {
	w := s.idle(t)
	*w = latchWaiter{}
	s.attempt(t, w, "first")
}

// wake: a waiter woken by the message attempts again. Unless the latch was set again or
// expired since it opened (see Latch.TrySetCount's doc in package latch), it returns: one
// message is enough.
func (s *latchMachine) wake(t *rapid.T) {
	w := s.waiting(t, func(w *latchWaiter) bool { return w.woken })
	s.shadowLive()
	same := w.wokenGen == s.setGen
	s.attempt(t, w, "woken")
	if same && !w.returned {
		t.Fatalf("one message wakes every waiter: a woken waiter did not return")
	}
}

func (s *latchMachine) timer(t *rapid.T) {
	w := s.waiting(t, func(w *latchWaiter) bool { return s.now >= w.timerAt })
	s.attempt(t, w, "timer")
}

func (s *latchMachine) beat(t *rapid.T) {
	w := s.waiting(t, func(*latchWaiter) bool { return true })
	count, live := s.shadowCount(), s.shadowLive()
	switch b := s.m.Beat(s.now); {
	case !live:
		if b != BeatDropped {
			t.Fatalf("not set: Beat = %v", b)
		}
		s.attempt(t, w, "dropped") // the engine attempts again, and fails
	case count == 0:
		if b != BeatGranted {
			t.Fatalf("open: Beat = %v", b)
		}
		w.waiting, w.returned = false, true
	default:
		if b != BeatQueued {
			t.Fatalf("counting: Beat = %v", b)
		}
	}
}

func (s *latchMachine) check(t *rapid.T) {
	n := s.m.Count(s.now)
	if n < 0 {
		t.Fatalf("never below zero: count %d", n)
	}
	if n != s.shadowCount() {
		t.Fatalf("count %d, shadow %d", n, s.shadowCount())
	}
	if n > s.set {
		t.Fatalf("count %d above the count set %d", n, s.set)
	}
	st, _, err := s.m.Await(s.now, false)
	if (err == nil && st == Acquired) != (s.shadowLive() && n == 0) {
		t.Fatalf("await returns exactly at zero: Await = %v, %v at count %d", st, err, n)
	}
}

func TestLatchProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := &latchMachine{m: NewLatch()}
		for i := 0; i < latchWaiters; i++ {
			s.ws = append(s.ws, &latchWaiter{})
		}
		t.Repeat(map[string]func(*rapid.T){
			"advance":   s.advance,
			"set":       s.trySet,
			"countDown": s.countDown,
			"await":     s.await,
			"wake":      s.wake,
			"timer":     s.timer,
			"beat":      s.beat,
			"":          s.check,
		})
	})
}

func TestLatchExpiresAsAKeyWithPExpire(t *testing.T) {
	l := NewLatch()
	ok, err := l.TrySetCount(0, 2, 10)
	if !ok || err != nil {
		t.Fatalf("TrySetCount = %v, %v", ok, err)
	}
	if n, _, err := l.CountDown(9, 10); n != 1 || err != nil {
		t.Fatalf("CountDown at 9 = %d, %v", n, err)
	}
	if n := l.Count(18); n != 1 {
		t.Fatalf("the CountDown at 9 starts the expiry over: count %d at 18", n)
	}
	if _, _, err := l.Await(19, true); !errors.Is(err, ErrLatchNotSet) {
		t.Fatalf("expired at 9+10: Await = %v", err)
	}
}
