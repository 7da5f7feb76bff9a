package model

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// The property tests below drive an RW model the way real callers do: every
// call makes a fresh hold, a waiting call retries and heartbeats until it
// learns of its grant (from the grant message, which may be late or lost, or
// from a retry or a heartbeat), a holder re-enters, renews and releases, and
// time moves at random. Beside the model each run keeps a shadow of what the
// replies told (who waits, in which order, until when; who was granted what),
// and every action asserts the properties its reply proves, the failure
// message starting with the property's name; the "" check asserts the
// invariants after each step.
//
// The shadow does not re-implement the scripts: it checks what a user relies
// on. Exclusion; FIFO (each call's grants are the head of the queue, in
// order, and nobody else acquires ahead of a live waiter, except a new reader
// in the non-fair mode and the writer's own downgrade); leases of grants;
// liveness deadlines; wait hints; and that a grant is never lost by its
// waiter. TestRWEveryWaiterIsEventuallyGranted proves the absence of
// starvation under schedules that keep their obligations.

const (
	rwTimeout    = 50  // ms a waiter stays live after its latest waiting attempt or heartbeat
	rwMaxLease   = 100 // ms; leases are drawn from [1, rwMaxLease]
	rwMaxAdvance = 40  // ms; a time step is drawn from [0, rwMaxAdvance]
)

// rwPhase is where a call stands, as its client sees it.
type rwPhase int

const (
	rwWaiting rwPhase = iota // queued, or about to retry; its hold may have been granted already
	rwHolding                // the client knows it holds
	rwDone                   // the call ended: released, gave up, busy, dropped or lost
)

// rwCall is one call of a client, under one hold id.
type rwCall struct {
	hold       string
	mode       Mode
	lease      int64
	writerHold string // a reader's context write hold ("" for none)
	phase      rwPhase
	attempts   int // attempts made: the first is an Attempt, the others Retries

	granted     bool // some reply made it a holder (it may have expired or been forced since)
	knew        bool // its client learned that it held
	downgrade   bool // its read hold was taken under a write hold
	queuedUntil Time // the deadline of its queue entry as the replies set it; 0 when not queued
}

// rwMachine is one rapid run.
type rwMachine struct {
	m    *RW
	now  Time
	fair bool
	seq  int

	calls map[string]*rwCall
	order []string // the holds of queued calls, in arrival order, live or not
}

func newRWMachine(fair bool) *rwMachine {
	return &rwMachine{m: NewRW(rwTimeout, fair), fair: fair, calls: map[string]*rwCall{}}
}

// queue returns the shadow's live waiters in order.
func (s *rwMachine) queue() []string {
	var q []string
	for _, h := range s.order {
		if s.calls[h].queuedUntil > s.now {
			q = append(q, h)
		}
	}
	return q
}

func (s *rwMachine) unqueue(c *rwCall) {
	c.queuedUntil = 0
	s.order = slices.DeleteFunc(s.order, func(h string) bool { return h == c.hold })
}

// holds reports whether c's hold has what it asked for in the model.
func (s *rwMachine) holds(c *rwCall) bool {
	if c.mode == Exclusive {
		w, _, _ := s.m.Writer(s.now)
		return w == c.hold
	}
	return s.m.ReaderCount(s.now, c.hold) > 0
}

// remaining returns c's hold's remaining lease in the model, 0 if it holds nothing.
func (s *rwMachine) remaining(c *rwCall) int64 {
	if c.mode == Exclusive {
		if w, _, _ := s.m.Writer(s.now); w != c.hold {
			return 0
		}
		ms, _ := s.m.RemainingWrite(s.now)
		return ms
	}
	ms, _ := s.m.RemainingRead(s.now, c.hold)
	return ms
}

// pick draws a call in one of phases, or nil when there is none.
func (s *rwMachine) pick(t *rapid.T, label string, ok func(*rwCall) bool) *rwCall {
	var hs []string
	for _, h := range slices.Sorted(maps.Keys(s.calls)) {
		if ok(s.calls[h]) {
			hs = append(hs, h)
		}
	}
	if len(hs) == 0 {
		return nil
	}
	return s.calls[rapid.SampledFrom(hs).Draw(t, label)]
}

func (s *rwMachine) waiting(c *rwCall) bool { return c.phase == rwWaiting }

// learn records that c's client knows it holds.
func (s *rwMachine) learn(c *rwCall)        { c.phase, c.knew = rwHolding, true }
func (s *rwMachine) holding(c *rwCall) bool { return c.phase == rwHolding }

// served checks the grants of one call that served the queue: they are the
// head of the live queue before the call (after the caller left it, for a
// give-up), in order; either readers only or one writer; each hold's lease
// is the one it asked for cut at its deadline; and they leave the queue.
// want is the queue the grants must be a prefix of; didServe says the call
// served the queue (not every attempt does).
func (s *rwMachine) served(t *rapid.T, op string, want []string, grants []string, didServe bool) {
	t.Helper()
	if len(grants) > len(want) || !slices.Equal(grants, want[:len(grants)]) {
		t.Fatalf("FIFO: %s at %d granted %v, but the live queue was %v", op, s.now, grants, want)
	}
	for i, g := range grants {
		c := s.calls[g]
		if c.mode == Exclusive && (i > 0 || len(grants) > 1) {
			t.Fatalf("exclusion: %s granted a writer with others: %v", op, grants)
		}
		if c.mode == Exclusive && len(s.m.Readers(s.now)) > 0 {
			t.Fatalf("exclusion: %s granted writer %s while readers %v hold", op, g, s.m.Readers(s.now))
		}
		if got, want := s.remaining(c), max(1, min(c.lease, int64(c.queuedUntil-s.now))); got != want {
			t.Fatalf("grant lease: %s granted %s (lease %d, deadline %d) at %d a lease of %d ms, want %d",
				op, g, c.lease, c.queuedUntil, s.now, got, want)
		}
		c.granted = true
		s.unqueue(c)
	}
	if didServe {
		s.isServed(t, op)
	}
}

// isServed checks that after a call that served, the queue is served: a
// writer holds, or nobody waits, or a writer waits at the head for live
// readers.
func (s *rwMachine) isServed(t *rapid.T, op string) {
	t.Helper()
	q := s.m.Queue(s.now)
	if _, _, w := s.m.Writer(s.now); w || len(q) == 0 {
		return
	}
	if q[0].Mode != Exclusive || len(s.m.Readers(s.now)) == 0 {
		t.Fatalf("serving: after %s at %d the live head %+v could be granted (readers %v)", op, s.now, q[0], s.m.Readers(s.now))
	}
}

// acquiredAhead checks that a hold that acquired without a grant passed no
// live waiter: every live waiter that was ahead of it (all of them, for a
// hold that was not queued) was granted in the same call.
func (s *rwMachine) acquiredAhead(t *rapid.T, c *rwCall, before, grants []string) {
	t.Helper()
	ahead := before
	if i := slices.Index(before, c.hold); i >= 0 {
		ahead = before[:i]
	}
	for _, h := range ahead {
		if !slices.Contains(grants, h) {
			t.Fatalf("FIFO: %s acquired at %d while %s waited ahead of it (queue %v, grants %v)", c.hold, s.now, h, before, grants)
		}
	}
}

func (s *rwMachine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"advance":           s.advance,
		"advanceToDeadline": s.advanceToDeadline,
		"newWriter":         func(t *rapid.T) { s.newCall(t, Exclusive) },
		"newReader":         func(t *rapid.T) { s.newCall(t, Shared) },
		"retry":             s.retry,
		"deliver":           s.deliver,
		"heartbeat":         s.heartbeat,
		"giveUp":            s.giveUp,
		"release":           s.release,
		"reenter":           s.reenter,
		"renew":             s.renew,
		"serve":             s.serve,
		"forceRelease":      s.forceRelease,
		"":                  s.check,
	}
}

func (s *rwMachine) advance(t *rapid.T) {
	s.now += Time(rapid.Int64Range(0, rwMaxAdvance).Draw(t, "dt"))
}

// advanceToDeadline jumps to just before, exactly at, or just after a
// lease's end or a waiter's deadline, where off-by-one errors would show.
func (s *rwMachine) advanceToDeadline(t *rapid.T) {
	var at []Time
	if ms, ok := s.m.RemainingWrite(s.now); ok {
		at = append(at, s.now+Time(ms))
	}
	for _, h := range s.m.Readers(s.now) {
		ms, _ := s.m.RemainingRead(s.now, h)
		at = append(at, s.now+Time(ms))
	}
	for _, w := range s.m.Queue(s.now) {
		at = append(at, w.Deadline)
	}
	if len(at) == 0 {
		t.Skip("nothing runs out")
	}
	to := rapid.SampledFrom(at).Draw(t, "deadline") + Time(rapid.IntRange(-1, 1).Draw(t, "off"))
	if to < s.now {
		t.Skip("already passed")
	}
	s.now = to
}

// newCall starts a call: a fresh hold that makes its first attempt.
func (s *rwMachine) newCall(t *rapid.T, mode Mode) {
	s.seq++
	c := &rwCall{hold: fmt.Sprintf("%c%d", map[Mode]byte{Shared: 'r', Exclusive: 'w'}[mode], s.seq), mode: mode,
		lease: rapid.Int64Range(1, rwMaxLease).Draw(t, "lease")}
	if mode == Shared {
		switch rapid.IntRange(0, 3).Draw(t, "context") {
		case 0: // the caller holds the write lock: a downgrade
			if w, _, ok := s.m.Writer(s.now); ok {
				c.writerHold = w
			}
		case 1: // the caller's context carries a write hold that ended, for good
			if old := s.pick(t, "oldWriter", func(o *rwCall) bool {
				return o.mode == Exclusive && o.knew && o.phase == rwDone && !s.holds(o) && o.queuedUntil <= s.now
			}); old != nil {
				c.writerHold = old.hold
			}
		}
	}
	s.calls[c.hold] = c
	s.attempt(t, c, rapid.Bool().Draw(t, "join"))
}

// retry is a waiting call's next attempt (its fallback timer, or a wakeup):
// it always asks to wait.
func (s *rwMachine) retry(t *rapid.T) {
	c := s.pick(t, "waiter", s.waiting)
	if c == nil {
		t.Skip("nobody waits")
	}
	s.attempt(t, c, true)
}

// attempt makes one attempt by c, its first or a retry, and checks its
// reply.
func (s *rwMachine) attempt(t *rapid.T, c *rwCall, join bool) {
	before := s.queue()
	first := c.attempts == 0
	c.attempts++
	wasQueued := c.queuedUntil > s.now
	writer, _, _ := s.m.Writer(s.now)
	downgrade := c.mode == Shared && c.writerHold != "" && c.writerHold == writer
	heldBefore := s.holds(c) && c.granted
	shortPath := c.mode == Shared && writer == "" && c.writerHold == "" && first && (!s.fair || len(s.m.queue) == 0)
	didServe := writer == "" && !shortPath && !(c.mode == Shared && s.holds(c))

	var r RWAttempt
	switch {
	case c.mode == Exclusive && first:
		r = s.m.WriteAttempt(s.now, c.hold, c.lease, join)
	case c.mode == Exclusive:
		r = s.m.WriteRetry(s.now, c.hold, c.lease, join)
	case first:
		r = s.m.ReadAttempt(s.now, c.hold, c.lease, c.writerHold, join)
	default:
		r = s.m.ReadRetry(s.now, c.hold, c.lease, c.writerHold, join)
	}
	name := fmt.Sprintf("%v attempt %d by %s (join %v)", c.mode, c.attempts, c.hold, join)

	// Wait hints.
	if failed := r.Status == Queued || r.Status == Busy; failed != (r.Wait >= 1) || (!failed && r.Wait != 0) {
		t.Fatalf("wait hint: %s at %d replied %+v", name, s.now, r)
	}
	if r.Status == Queued || r.Status == Busy {
		s.checkWait(t, name, c, r.Wait)
	}
	s.served(t, name, before, r.Grants, didServe)

	switch r.Status {
	case Acquired:
		if got := s.remaining(c); got != c.lease {
			t.Fatalf("acquire: %s at %d holds for %d ms, want its lease %d", name, s.now, got, c.lease)
		}
		// FIFO: nobody passes a live waiter, but the writer's own downgrade
		// and, in the non-fair mode, a reader.
		if !downgrade && (c.mode == Exclusive || s.fair) {
			s.acquiredAhead(t, c, before, r.Grants)
		}
		// Whoever takes its hold by an attempt leaves the queue (a queued
		// reader in the non-fair mode too): nobody holds and waits.
		s.unqueue(c)
		c.granted, c.downgrade = true, downgrade
		s.learn(c)
	case Granted:
		if !s.holds(c) || !(heldBefore || slices.Contains(r.Grants, c.hold)) {
			t.Fatalf("grant: %s at %d replied Granted, but it held nothing granted to it", name, s.now)
		}
		s.learn(c)
	case Queued:
		if !join {
			t.Fatalf("join: %s at %d queued without asking to", name, s.now)
		}
		q := s.m.Queue(s.now)
		i := slices.IndexFunc(q, func(w RWWaiter) bool { return w.Hold == c.hold })
		if i < 0 || q[i].Deadline != s.now+rwTimeout {
			t.Fatalf("join: %s at %d replied Queued, but the queue is %+v", name, s.now, q)
		}
		if !first && !wasQueued {
			t.Fatalf("liveness deadline: %s at %d was queued again, though its entry was not live (until %d, granted %v)",
				name, s.now, c.queuedUntil, c.granted)
		}
		if !wasQueued {
			if i != len(q)-1 {
				t.Fatalf("FIFO: %s joined at %d at place %d of %+v, not at the tail", name, s.now, i, q)
			}
			s.unqueue(c)
			s.order = append(s.order, c.hold)
		}
		c.queuedUntil = s.now + rwTimeout
	case Busy:
		if join {
			t.Fatalf("join: %s at %d asked to wait and replied Busy", name, s.now)
		}
		c.phase = rwDone
	case Dropped:
		// Only a retry whose entry is not live: dead, or granted a hold that
		// has ended since.
		if !join || first || wasQueued {
			t.Fatalf("liveness deadline: %s at %d replied Dropped, but it was a first attempt, or its entry was live (until %d)",
				name, s.now, c.queuedUntil)
		}
		s.unqueue(c)
		c.phase = rwDone // the client starts over under a new hold id
	}
	if wasQueued && r.Status == Dropped {
		t.Fatalf("liveness deadline: %s at %d was dropped while live until %d", name, s.now, c.queuedUntil)
	}
}

// checkWait checks a failed attempt's wait hint: the writer's remaining
// lease, or else the nearest reader's, or else 1.
func (s *rwMachine) checkWait(t *rapid.T, name string, c *rwCall, wait int64) {
	t.Helper()
	want := int64(1)
	if ms, ok := s.m.RemainingWrite(s.now); ok {
		want = ms
	} else if rs := s.m.Readers(s.now); len(rs) > 0 {
		want = -1
		for _, h := range rs {
			ms, _ := s.m.RemainingRead(s.now, h)
			if want < 0 || ms < want {
				want = ms
			}
		}
	} else if c.mode == Exclusive {
		t.Fatalf("wait hint: %s at %d failed with no holder", name, s.now)
	}
	if wait != want {
		t.Fatalf("wait hint: %s at %d replied wait %d, want %d", name, s.now, wait, want)
	}
}

// deliver is the grant message reaching a waiting call.
func (s *rwMachine) deliver(t *rapid.T) {
	c := s.pick(t, "granted", func(c *rwCall) bool { return c.phase == rwWaiting && c.granted })
	if c == nil {
		t.Skip("no grant on its way")
	}
	s.learn(c)
}

func (s *rwMachine) heartbeat(t *rapid.T) {
	c := s.pick(t, "waiter", s.waiting)
	if c == nil {
		t.Skip("nobody waits")
	}
	before := s.queue()
	live, dead := c.queuedUntil > s.now, c.queuedUntil != 0 && c.queuedUntil <= s.now
	b, grants := s.m.Heartbeat(s.now, c.hold, c.lease, c.mode)
	name := fmt.Sprintf("heartbeat of %s", c.hold)
	if live {
		c.queuedUntil = s.now + rwTimeout // renewed before serving: a grant's lease runs to it
	}
	s.served(t, name, before, grants, live)
	switch {
	case dead && (b != BeatDropped || grants != nil):
		t.Fatalf("liveness deadline: %s dead since %d replied %v at %d, granting %v", name, c.queuedUntil, b, s.now, grants)
	case live && b == BeatDropped:
		t.Fatalf("liveness deadline: %s live until %d was dropped at %d", name, c.queuedUntil, s.now)
	case b == BeatGranted && !s.holds(c):
		t.Fatalf("grant: %s replied granted at %d, but it holds nothing", name, s.now)
	case b != BeatGranted && s.holds(c):
		t.Fatalf("grant: %s holds, yet its heartbeat replied %v at %d", name, b, s.now)
	case b == BeatQueued && !live:
		t.Fatalf("liveness deadline: %s replied queued at %d, but it was not a live waiter", name, s.now)
	}
	switch b {
	case BeatGranted:
		s.learn(c)
	case BeatDropped:
		s.unqueue(c)
		c.phase = rwDone // the client starts over under a new hold id
	}
}

func (s *rwMachine) giveUp(t *rapid.T) {
	c := s.pick(t, "quitter", func(c *rwCall) bool { return c.phase != rwDone })
	if c == nil {
		t.Skip("nobody to give up")
	}
	had, live := s.holds(c), c.queuedUntil > s.now
	before := slices.DeleteFunc(s.queue(), func(h string) bool { return h == c.hold })
	st, grants := s.m.GiveUp(s.now, c.hold, c.lease, c.mode)
	name := fmt.Sprintf("give-up of %s", c.hold)
	want := GaveUpNothing
	switch {
	case had:
		want = PassedOn
	case live:
		want = LeftQueue
	}
	if st != want {
		t.Fatalf("give-up: %s at %d replied %v, want %v (held %v, queued %v)", name, s.now, st, want, had, live)
	}
	s.unqueue(c)
	s.served(t, name, before, grants, true)
	if s.holds(c) || slices.ContainsFunc(s.m.Queue(s.now), func(w RWWaiter) bool { return w.Hold == c.hold }) {
		t.Fatalf("give-up leaves nothing behind: %s still holds or waits at %d", name, s.now)
	}
	c.phase = rwDone
}

func (s *rwMachine) release(t *rapid.T) {
	c := s.pick(t, "holder", s.holding)
	if c == nil {
		t.Skip("nobody holds")
	}
	end := rapid.Bool().Draw(t, "end")
	held := s.holds(c)
	var count int
	if c.mode == Exclusive {
		_, count, _ = s.m.Writer(s.now)
	} else {
		count = s.m.ReaderCount(s.now, c.hold)
	}
	before := s.queue()
	var r RWRelease
	var err error
	if c.mode == Exclusive {
		r, err = s.m.WriteRelease(s.now, c.hold, end)
	} else {
		r, err = s.m.ReadRelease(s.now, c.hold, end)
	}
	name := fmt.Sprintf("%v release of %s (end %v)", c.mode, c.hold, end)
	switch {
	case !held:
		if !errors.Is(err, ErrNotHeld) || r.Count != 0 || r.Grants != nil {
			t.Fatalf("release: %s at %d of a hold that is gone replied %+v, %v", name, s.now, r, err)
		}
		c.phase = rwDone
		return
	case err != nil:
		t.Fatalf("release: %s at %d failed: %v", name, s.now, err)
	case !end:
		if want := max(count-1, 1); r.Count != want || r.Grants != nil {
			t.Fatalf("hold count: %s at %d replied %+v, want count %d", name, s.now, r, want)
		}
		return
	}
	// A release with end lets the hold go: nothing of it is queued to be
	// granted again.
	if r.Count != 0 || s.holds(c) || slices.Contains(r.Grants, c.hold) {
		t.Fatalf("release: %s at %d replied %+v and holds: %v", name, s.now, r, s.holds(c))
	}
	s.served(t, name, before, r.Grants, true)
	c.phase = rwDone
}

func (s *rwMachine) reenter(t *rapid.T) {
	c := s.pick(t, "holder", s.holding)
	if c == nil {
		t.Skip("nobody holds")
	}
	lease := rapid.Int64Range(0, rwMaxLease).Draw(t, "lease")
	held, rem := s.holds(c), s.remaining(c)
	var count int
	var ok bool
	if c.mode == Exclusive {
		_, count, _ = s.m.Writer(s.now)
		ok = s.m.WriteReenter(s.now, c.hold, lease)
	} else {
		count = s.m.ReaderCount(s.now, c.hold)
		ok = s.m.ReadReenter(s.now, c.hold, lease)
	}
	if ok != held {
		t.Fatalf("re-entry: %v re-entry of %s at %d replied %v, held %v", c.mode, c.hold, s.now, ok, held)
	}
	if !ok {
		return
	}
	got := s.m.ReaderCount(s.now, c.hold)
	if c.mode == Exclusive {
		_, got, _ = s.m.Writer(s.now)
	}
	if got != count+1 || s.remaining(c) != max(rem, lease) {
		t.Fatalf("re-entry: %v re-entry of %s at %d: count %d -> %d, lease %d -> %d (asked %d)",
			c.mode, c.hold, s.now, count, got, rem, s.remaining(c), lease)
	}
}

func (s *rwMachine) renew(t *rapid.T) {
	c := s.pick(t, "holder", s.holding)
	if c == nil {
		t.Skip("nobody holds")
	}
	lease := rapid.Int64Range(0, rwMaxLease).Draw(t, "lease")
	held, rem := s.holds(c), s.remaining(c)
	var ok bool
	if c.mode == Exclusive {
		ok = s.m.WriteRenew(s.now, c.hold, lease)
	} else {
		ok = s.m.ReadRenew(s.now, c.hold, lease)
	}
	want := rem
	if lease > 0 {
		want = lease
	}
	if ok != held || (ok && s.remaining(c) != want) {
		t.Fatalf("renewal: %v renewal of %s by %d at %d replied %v (held %v), lease %d -> %d",
			c.mode, c.hold, lease, s.now, ok, held, rem, s.remaining(c))
	}
}

func (s *rwMachine) serve(t *rapid.T) {
	before := s.queue()
	grants := s.m.Serve(s.now)
	s.served(t, "serve", before, grants, true)
	if again := s.m.Serve(s.now); again != nil {
		t.Fatalf("serving: a second serve at %d granted %v", s.now, again)
	}
}

func (s *rwMachine) forceRelease(t *rapid.T) {
	hold := ""
	if c := s.pick(t, "victim", func(c *rwCall) bool { return c.granted }); c != nil && rapid.Bool().Draw(t, "one") {
		hold = c.hold
	}
	w, _, wok := s.m.Writer(s.now)
	want := wok || len(s.m.Readers(s.now)) > 0
	if hold != "" {
		want = w == hold || s.m.ReaderCount(s.now, hold) > 0
	}
	before := s.queue()
	held, grants := s.m.ForceRelease(s.now, hold)
	if held != want {
		t.Fatalf("forced release of %q at %d replied %v, want %v", hold, s.now, held, want)
	}
	if !held && grants != nil {
		t.Fatalf("forced release of %q at %d released nothing but granted %v", hold, s.now, grants)
	}
	// What is left holding was granted by this very call.
	if w2, _, ok := s.m.Writer(s.now); ok && (hold == "" || w2 == hold) && !slices.Contains(grants, w2) {
		t.Fatalf("forced release of %q at %d left writer %s", hold, s.now, w2)
	}
	for _, r := range s.m.Readers(s.now) {
		if (hold == "" || r == hold) && !slices.Contains(grants, r) {
			t.Fatalf("forced release of %q at %d left reader %s", hold, s.now, r)
		}
	}
	s.served(t, fmt.Sprintf("forced release of %q", hold), before, grants, held)
}

// check asserts the invariants after every step.
func (s *rwMachine) check(t *rapid.T) {
	w, wcount, wok := s.m.Writer(s.now)
	readers := s.m.Readers(s.now)

	// Exclusion: while a writer holds, every reader is a downgrade taken
	// under it; a hold holds only what some reply gave it.
	if wok {
		if c := s.calls[w]; c == nil || !c.granted || c.mode != Exclusive || wcount < 1 {
			t.Fatalf("exclusion: writer %s (count %d) at %d was never given the write side", w, wcount, s.now)
		}
		for _, r := range readers {
			if c := s.calls[r]; !c.downgrade || c.writerHold != w || s.m.readers[r].downgradeOf != w {
				t.Fatalf("exclusion: reader %s holds at %d with writer %s, and is not its downgrade", r, s.now, w)
			}
		}
		if ms, _ := s.m.RemainingWrite(s.now); ms < 1 {
			t.Fatalf("lease: the writer's remaining lease is %d at %d", ms, s.now)
		}
	}
	for _, r := range readers {
		if c := s.calls[r]; c == nil || !c.granted || c.mode != Shared || s.m.ReaderCount(s.now, r) < 1 {
			t.Fatalf("exclusion: reader %s at %d was never given the read side", r, s.now)
		}
		if ms, _ := s.m.RemainingRead(s.now, r); ms < 1 {
			t.Fatalf("lease: reader %s's remaining lease is %d at %d", r, ms, s.now)
		}
	}

	// FIFO and liveness deadlines: the queue is the live waiters, in arrival
	// order, with the deadlines the replies set.
	var got []string
	for _, q := range s.m.Queue(s.now) {
		c := s.calls[q.Hold]
		if c == nil || c.queuedUntil != q.Deadline || q.Deadline <= s.now || q.Mode != c.mode || q.Lease != c.lease {
			t.Fatalf("queue: waiter %+v at %d, shadow %+v", q, s.now, c)
		}
		got = append(got, q.Hold)
	}
	if want := s.queue(); !slices.Equal(got, want) {
		t.Fatalf("FIFO: the queue at %d is %v, want %v", s.now, got, want)
	}

	// A grant is never lost by its waiter: a waiting call whose hold was
	// granted and still holds is told so by its next retry or heartbeat (the
	// actions check that); and nobody both holds and waits, in either mode.
	for _, h := range got {
		if s.holds(s.calls[h]) {
			t.Fatalf("queue: %s waits at %d for what it holds", h, s.now)
		}
	}
}

// rwMachineWith returns a rapid property that runs the state machine with
// only the named actions (and the invariant check), in the fair mode, the
// non-fair mode, or either.
func rwMachineWith(fair *bool, names ...string) func(*rapid.T) {
	return func(t *rapid.T) {
		f := rapid.Bool().Draw(t, "fair")
		if fair != nil {
			f = *fair
		}
		s := newRWMachine(f)
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
	}
}

var (
	rwFair    = func() *bool { b := true; return &b }()
	rwNonFair = func() *bool { b := false; return &b }()
)

var rwAllActions = []string{"advance", "advanceToDeadline", "newWriter", "newReader", "retry", "deliver",
	"heartbeat", "giveUp", "release", "reenter", "renew", "serve", "forceRelease"}

func TestRWPropertiesHoldUnderAllOperations(t *testing.T) {
	rapid.Check(t, rwMachineWith(nil, rwAllActions...))
}

func TestRWFairNewcomerNeverPassesALiveWaiter(t *testing.T) {
	rapid.Check(t, rwMachineWith(rwFair, "advance", "advanceToDeadline", "newWriter", "newReader", "retry",
		"heartbeat", "release", "deliver"))
}

func TestRWNonFairGrantsStillFollowTheQueue(t *testing.T) {
	rapid.Check(t, rwMachineWith(rwNonFair, "advance", "advanceToDeadline", "newWriter", "newReader", "retry",
		"heartbeat", "release", "deliver", "serve"))
}

// Without heartbeats waiters die at their last attempt plus the timeout, so
// dead entries at the head, Dropped replies and skipped grants are frequent.
func TestRWDeadWaitersAreSkippedAndNeverRevived(t *testing.T) {
	rapid.Check(t, rwMachineWith(nil, "advance", "advanceToDeadline", "newWriter", "newReader", "retry",
		"release", "giveUp", "serve", "deliver"))
}

func TestRWGiveUpLeavesNothingBehind(t *testing.T) {
	rapid.Check(t, rwMachineWith(nil, "advance", "newWriter", "newReader", "retry", "heartbeat", "giveUp",
		"release", "deliver"))
}

func TestRWCountsAndLeasesOfHolders(t *testing.T) {
	rapid.Check(t, rwMachineWith(nil, "advance", "newWriter", "newReader", "retry", "deliver", "reenter",
		"renew", "release", "forceRelease"))
}

// TestRWEveryWaiterIsEventuallyGranted proves that nobody starves under any
// schedule that keeps its obligations: every holder releases within a bound
// of learning of its hold, every waiter heartbeats at least every half
// waiter timeout and retries when its wait hint runs out, and grant messages
// arrive late or never (the heartbeat then tells the waiter). Calls arrive
// at random times; the adversary chooses everything else. Every call is
// granted, and no call is passed: in the fair mode nobody acquires ahead of
// a live waiter unless it was queued ahead of it; in the non-fair mode only
// new readers do, so a reader queued behind k writers is granted after at
// most k write holds.
func TestRWEveryWaiterIsEventuallyGranted(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const timeout = 30
		fair := rapid.Bool().Draw(t, "fair")
		m := NewRW(timeout, fair)
		now := Time(0)

		type call struct {
			hold       string
			mode       Mode
			lease      int64 // >= timeout: a grant outlives the next heartbeat
			arrive     Time
			holdFor    Time // how long it holds once it knows
			deliverIn  Time // when its grant message arrives; -1 never
			joined     bool
			grantedAt  Time
			granted    bool // the model made it a holder
			knows      bool
			releaseAt  Time
			released   bool
			lastBeat   Time
			retryAt    Time
			ahead      map[string]bool // holds queued ahead of it when it joined
			writesSeen int             // write holds granted to others while it waited
			writersAt  int             // writers queued ahead of it when it joined
			tried      bool            // its first attempt was made: the next ones are retries
		}
		n := rapid.IntRange(2, 8).Draw(t, "calls")
		calls := make([]*call, n)
		byHold := map[string]*call{}
		for i := range calls {
			mode := Shared
			if rapid.Bool().Draw(t, "writer") {
				mode = Exclusive
			}
			c := &call{hold: fmt.Sprintf("c%d", i), mode: mode,
				lease:     rapid.Int64Range(timeout, 2*timeout).Draw(t, "lease"),
				arrive:    Time(rapid.Int64Range(0, 100).Draw(t, "arrive")),
				holdFor:   Time(rapid.Int64Range(0, 20).Draw(t, "holdFor")),
				deliverIn: Time(rapid.Int64Range(-1, 10).Draw(t, "deliverIn"))}
			calls[i], byHold[c.hold] = c, c
		}
		// acquired records that c got its hold at now, and checks that it
		// passed no live waiter.
		acquired := func(c *call, how string, newReader bool) {
			c.granted, c.grantedAt = true, now
			for _, o := range calls {
				if o == c || !o.joined || o.granted {
					continue // o does not wait
				}
				if c.mode == Exclusive {
					o.writesSeen++
				}
				if !o.ahead[c.hold] && !(newReader && !fair) {
					t.Fatalf("FIFO: %s %s at %d although %s waited and it was not queued ahead of it", c.hold, how, now, o.hold)
				}
			}
		}
		learn := func(c *call) {
			c.knows, c.releaseAt = true, now+c.holdFor
			if c.mode == Exclusive {
				m.WriteRenew(now, c.hold, c.lease)
			} else {
				m.ReadRenew(now, c.hold, c.lease)
			}
		}
		grant := func(gs []string) {
			for _, g := range gs {
				acquired(byHold[g], "granted", false)
			}
		}
		attempt := func(c *call) {
			var r RWAttempt
			switch {
			case c.mode == Exclusive && !c.tried:
				r = m.WriteAttempt(now, c.hold, c.lease, true)
			case c.mode == Exclusive:
				r = m.WriteRetry(now, c.hold, c.lease, true)
			case !c.tried:
				r = m.ReadAttempt(now, c.hold, c.lease, "", true)
			default:
				r = m.ReadRetry(now, c.hold, c.lease, "", true)
			}
			c.tried = true
			grant(r.Grants)
			switch r.Status {
			case Acquired:
				acquired(c, "acquired", c.mode == Shared)
				c.knows, c.releaseAt = true, now+c.holdFor
			case Granted:
				learn(c)
			case Queued:
				if !c.joined {
					c.joined, c.lastBeat, c.ahead = true, now, map[string]bool{}
					for _, w := range m.Queue(now) {
						if w.Hold == c.hold {
							break
						}
						c.ahead[w.Hold] = true
						if w.Mode == Exclusive {
							c.writersAt++
						}
					}
				}
				c.lastBeat, c.retryAt = now, now+Time(r.Wait)
			default:
				t.Fatalf("liveness: %s's attempt at %d replied %v", c.hold, now, r.Status)
			}
		}

		for step := 0; ; step++ {
			if step > 5000 || now > 2000 {
				t.Fatalf("starvation: not every call was granted by %d", now)
			}
			pending := false
			for _, c := range calls {
				if !c.released {
					pending = true
				}
			}
			if !pending {
				break
			}
			// Obligations due now, in an order the adversary picks.
			var due []func()
			for _, c := range calls {
				switch {
				case c.released:
				case !c.joined && !c.granted && now >= c.arrive:
					due = append(due, func() { attempt(c) })
				case c.knows && now >= c.releaseAt:
					due = append(due, func() {
						var err error
						var r RWRelease
						if c.mode == Exclusive {
							r, err = m.WriteRelease(now, c.hold, true)
						} else {
							r, err = m.ReadRelease(now, c.hold, true)
						}
						if err != nil {
							t.Fatalf("liveness: %s lost its hold before releasing at %d", c.hold, now)
						}
						grant(r.Grants)
						c.released = true
					})
				case c.granted && !c.knows && c.deliverIn >= 0 && now >= c.grantedAt+c.deliverIn:
					due = append(due, func() { learn(c) })
				case c.joined && !c.knows && now >= c.lastBeat+timeout/2:
					due = append(due, func() {
						b, gs := m.Heartbeat(now, c.hold, c.lease, c.mode)
						grant(gs)
						switch b {
						case BeatQueued:
							c.lastBeat = now
						case BeatGranted:
							learn(c)
						default:
							t.Fatalf("liveness deadline: %s heartbeating in time was dropped at %d", c.hold, now)
						}
					})
				case c.joined && !c.knows && now >= c.retryAt:
					due = append(due, func() { attempt(c) })
				}
			}
			if len(due) == 0 {
				now += Time(rapid.Int64Range(1, 5).Draw(t, "dt"))
				continue
			}
			due[rapid.IntRange(0, len(due)-1).Draw(t, "which")]()
		}
		for _, c := range calls {
			if c.mode == Shared && c.joined && c.writesSeen > c.writersAt {
				t.Fatalf("bounded wait: reader %s queued behind %d writers saw %d write holds before its grant",
					c.hold, c.writersAt, c.writesSeen)
			}
		}
	})
}

// mustAttempt fails t unless r has status want.
func mustAttempt(t *testing.T, what string, r RWAttempt, want Status) RWAttempt {
	t.Helper()
	if r.Status != want {
		t.Fatalf("%s: %+v, want %v", what, r, want)
	}
	return r
}

func mustRelease(t *testing.T, what string, r RWRelease, err error, grants ...string) {
	t.Helper()
	if err != nil || r.Count != 0 || !slices.Equal(r.Grants, grants) {
		t.Fatalf("%s: %+v, %v; want the hold ended and grants %v", what, r, err, grants)
	}
}

func queueHolds(m *RW, now Time) []string {
	var hs []string
	for _, w := range m.Queue(now) {
		hs = append(hs, w.Hold)
	}
	return hs
}

// The readers at the head are granted together, up to the next writer; a
// writer is granted alone, once the readers ahead of it are gone; and a
// reader queued behind a writer waits for it.
func TestRWReadersAtTheHeadAreGrantedTogetherAndAWriterAlone(t *testing.T) {
	for _, fair := range []bool{true, false} {
		m := NewRW(1000, fair)
		mustAttempt(t, "w1", m.WriteAttempt(0, "w1", 100, true), Acquired)
		mustAttempt(t, "r1", m.ReadAttempt(1, "r1", 100, "", true), Queued)
		mustAttempt(t, "r2", m.ReadAttempt(2, "r2", 100, "", true), Queued)
		mustAttempt(t, "w2", m.WriteAttempt(3, "w2", 100, true), Queued)
		mustAttempt(t, "r3", m.ReadAttempt(4, "r3", 100, "", true), Queued)

		r, err := m.WriteRelease(10, "w1", true)
		mustRelease(t, "w1's release", r, err, "r1", "r2")
		r, err = m.ReadRelease(11, "r1", true)
		mustRelease(t, "r1's release", r, err)
		r, err = m.ReadRelease(12, "r2", true)
		mustRelease(t, "the last reader's release", r, err, "w2")
		r, err = m.WriteRelease(13, "w2", true)
		mustRelease(t, "w2's release", r, err, "r3")
	}
}

// In the fair mode a new reader queues behind a waiting writer even while
// only readers hold; in the non-fair mode it enters, and so can keep the
// writer waiting as long as readers overlap.
func TestRWNewReaderAndAWaitingWriterByMode(t *testing.T) {
	for _, fair := range []bool{true, false} {
		m := NewRW(1000, fair)
		mustAttempt(t, "r0", m.ReadAttempt(0, "r0", 100, "", false), Acquired)
		w := mustAttempt(t, "w", m.WriteAttempt(1, "w", 100, true), Queued)
		if w.Wait != 99 {
			t.Fatalf("a writer waiting for a reader is told the reader's remaining lease: %+v", w)
		}
		want := Queued
		if !fair {
			want = Acquired
		}
		mustAttempt(t, fmt.Sprintf("a new reader in the fair=%v mode", fair), m.ReadAttempt(2, "r1", 100, "", true), want)
	}
}

// A grant's lease is the one asked for, cut at the waiter's liveness
// deadline; the waiter renews it once it hears of the grant.
func TestRWGrantLeaseIsCutAtTheWaitersDeadline(t *testing.T) {
	m := NewRW(50, true)
	mustAttempt(t, "w1", m.WriteAttempt(0, "w1", 100, false), Acquired)
	mustAttempt(t, "w2", m.WriteAttempt(0, "w2", 100, true), Queued) // live until 50
	r, err := m.WriteRelease(30, "w1", true)
	mustRelease(t, "w1's release", r, err, "w2")
	if ms, _ := m.RemainingWrite(30); ms != 20 {
		t.Fatalf("w2's grant runs %d ms, want 20 (to its deadline)", ms)
	}
	if !m.WriteRenew(31, "w2", 100) {
		t.Fatal("the granted waiter cannot renew")
	}
}

// A waiter that misses its deadline is never granted and never revived: its
// heartbeat or its retry tells it it was dropped, also once a serve has
// passed its entry at the head; only a first attempt joins, at the tail.
func TestRWDeadWaiterIsSkippedAndNotRevived(t *testing.T) {
	m := NewRW(50, true)
	mustAttempt(t, "w1", m.WriteAttempt(0, "w1", 200, false), Acquired)
	mustAttempt(t, "a", m.WriteAttempt(0, "a", 100, true), Queued) // dies at 50
	mustAttempt(t, "b", m.WriteAttempt(0, "b", 100, true), Queued) // dies at 50
	mustAttempt(t, "c", m.WriteAttempt(40, "c", 100, true), Queued)
	if b, _ := m.Heartbeat(50, "a", 100, Exclusive); b != BeatDropped {
		t.Fatalf("a's heartbeat at its deadline: %v", b)
	}
	if b, _ := m.Heartbeat(51, "a", 100, Exclusive); b != BeatDropped {
		t.Fatalf("a's heartbeat after it was dropped: %v", b)
	}
	mustAttempt(t, "b's retry after its deadline", m.WriteRetry(55, "b", 100, true), Dropped)
	mustAttempt(t, "b's retry once dropped", m.WriteRetry(56, "b", 100, true), Dropped)
	if q := queueHolds(m, 56); !slices.Equal(q, []string{"c"}) {
		t.Fatalf("queue %v, want [c]", q)
	}
	r, err := m.WriteRelease(60, "w1", true)
	mustRelease(t, "w1's release skips the dead", r, err, "c")

	m = NewRW(50, true)
	mustAttempt(t, "w1", m.WriteAttempt(0, "w1", 200, false), Acquired)
	mustAttempt(t, "d", m.WriteAttempt(0, "d", 100, true), Queued) // dies at 50
	mustAttempt(t, "e", m.WriteAttempt(30, "e", 100, true), Queued)
	r, err = m.WriteRelease(60, "w1", true) // passes d's dead entry at the head
	mustRelease(t, "w1's release", r, err, "e")
	mustAttempt(t, "d's retry after its entry was passed", m.WriteRetry(61, "d", 100, true), Dropped)
	if q := queueHolds(m, 61); q != nil {
		t.Fatalf("queue %v, want it empty: a retry never joins", q)
	}
	mustAttempt(t, "d starting over under a new hold id", m.WriteAttempt(62, "d2", 100, true), Queued)
	if q := queueHolds(m, 62); !slices.Equal(q, []string{"d2"}) {
		t.Fatalf("queue %v, want [d2] as a new arrival", q)
	}
}

// A waiter granted a hold whose lease runs out before it learns of it (its
// grant's lease is cut at its liveness deadline) is dropped by its retry:
// it starts over under a new hold id rather than queue again under the old.
// The retry serves the queue first, which grants the writer behind it.
func TestRWRetryOfAGrantThatEndedIsDropped(t *testing.T) {
	for _, mode := range []Mode{Exclusive, Shared} {
		m := NewRW(50, true)
		mustAttempt(t, "w1", m.WriteAttempt(0, "w1", 200, false), Acquired)
		retry := func(now Time) RWAttempt { return m.WriteRetry(now, "x", 100, true) }
		if mode == Shared {
			mustAttempt(t, "x", m.ReadAttempt(0, "x", 100, "", true), Queued) // live until 50
			retry = func(now Time) RWAttempt { return m.ReadRetry(now, "x", 100, "", true) }
		} else {
			mustAttempt(t, "x", m.WriteAttempt(0, "x", 100, true), Queued)
		}
		mustAttempt(t, "w2", m.WriteAttempt(1, "w2", 100, true), Queued) // live until 51
		r, err := m.WriteRelease(40, "w1", true)
		mustRelease(t, "w1's release", r, err, "x") // a lease of 10 ms, to x's deadline
		a := mustAttempt(t, fmt.Sprintf("the %v retry of x after its grant ran out", mode), retry(50), Dropped)
		if w, _, _ := m.Writer(50); w != "w2" || !slices.Equal(a.Grants, []string{"w2"}) || queueHolds(m, 50) != nil {
			t.Fatalf("after x's retry: grants %v, writer %q, queue %v; want w2 granted", a.Grants, w, queueHolds(m, 50))
		}
	}
}

// The writer takes read holds of its own at once, whatever waits, and they
// keep writers out after its write hold ends.
func TestRWDowngradeIsTakenAtOnceAndOutlivesTheWriteHold(t *testing.T) {
	m := NewRW(1000, true)
	mustAttempt(t, "w", m.WriteAttempt(0, "w", 100, false), Acquired)
	mustAttempt(t, "w2", m.WriteAttempt(1, "w2", 100, true), Queued)
	mustAttempt(t, "r by another", m.ReadAttempt(2, "r", 100, "", false), Busy)
	mustAttempt(t, "the downgrade", m.ReadAttempt(3, "d", 100, "w", false), Acquired)
	r, err := m.WriteRelease(4, "w", true)
	mustRelease(t, "w's release", r, err) // w2 waits for the downgrade
	r, err = m.ReadRelease(5, "d", true)
	mustRelease(t, "the downgrade's release", r, err, "w2")
}

// rw_read_acquire.lua's short path is a first attempt's only. A reader
// whose grant message was lost learns of its grant from its retry, which
// replies Granted and changes nothing, whether or not the queue's list is
// empty. A first attempt under the id of a live reader (which no real
// caller makes) takes the short path while the list is empty: it is told
// Acquired and has its lease set anew; with a list that is not empty (in
// the fair mode) the full path tells it Granted.
func TestRWShortPathIsAFirstAttemptsOnly(t *testing.T) {
	m := NewRW(1000, true)
	mustAttempt(t, "w", m.WriteAttempt(0, "w", 100, false), Acquired)
	mustAttempt(t, "r", m.ReadAttempt(0, "r", 300, "", true), Queued)
	r, err := m.WriteRelease(10, "w", true)
	mustRelease(t, "w's release", r, err, "r")
	mustAttempt(t, "r's retry, empty list", m.ReadRetry(20, "r", 300, "", true), Granted)
	if ms, _ := m.RemainingRead(20, "r"); ms != 290 {
		t.Fatalf("r's lease after its retry: %d ms, want 290 (the grant's)", ms)
	}
	mustAttempt(t, "a first attempt as r, empty list", m.ReadAttempt(30, "r", 300, "", true), Acquired)
	if ms, _ := m.RemainingRead(30, "r"); ms != 300 {
		t.Fatalf("r's lease after the short path: %d ms, want 300", ms)
	}

	mustAttempt(t, "w2", m.WriteAttempt(40, "w2", 100, true), Queued)
	mustAttempt(t, "a first attempt as r, w2 queued", m.ReadAttempt(50, "r", 300, "", true), Granted)
	if ms, _ := m.RemainingRead(50, "r"); ms != 280 {
		t.Fatalf("r's lease after the full path: %d ms, want 280", ms)
	}
}

// In the non-fair mode a queued reader's retry takes its hold whenever no
// writer holds. At the head its own serve grants it (Granted); behind a
// writer that waits at the head for the readers it takes its hold as a
// newcomer would (Acquired) and leaves the queue: its entry stays behind as
// a ghost, which is never granted. Its release grants nothing of its own.
func TestRWNonFairQueuedReaderThatTakesItsHoldLeavesTheQueue(t *testing.T) {
	m := NewRW(1000, false)
	mustAttempt(t, "w", m.WriteAttempt(0, "w", 10, false), Acquired)
	mustAttempt(t, "r", m.ReadAttempt(1, "r", 100, "", true), Queued)
	// w's lease runs out at 10; nothing serves the queue until r's retry.
	a := mustAttempt(t, "r's retry", m.ReadRetry(20, "r", 100, "", true), Granted)
	if !slices.Equal(a.Grants, []string{"r"}) || queueHolds(m, 20) != nil {
		t.Fatalf("r's retry granted %v, queue %v; want r granted and out of the queue", a.Grants, queueHolds(m, 20))
	}

	m = NewRW(1000, false)
	mustAttempt(t, "w", m.WriteAttempt(0, "w", 100, false), Acquired)
	mustAttempt(t, "d", m.ReadAttempt(0, "d", 500, "w", false), Acquired) // w's downgrade
	mustAttempt(t, "w2", m.WriteAttempt(1, "w2", 100, true), Queued)
	mustAttempt(t, "r", m.ReadAttempt(2, "r", 100, "", true), Queued)
	r, err := m.WriteRelease(10, "w", true)
	mustRelease(t, "w's release", r, err) // w2 waits at the head for d
	mustAttempt(t, "r's retry behind w2", m.ReadRetry(11, "r", 100, "", true), Acquired)
	if q := queueHolds(m, 11); !slices.Equal(q, []string{"w2"}) {
		t.Fatalf("queue %v, want [w2]", q)
	}
	r, err = m.ReadRelease(12, "d", true)
	mustRelease(t, "d's release", r, err)
	r, err = m.ReadRelease(13, "r", true)
	mustRelease(t, "the last reader's release", r, err, "w2")
	r, err = m.WriteRelease(14, "w2", true)
	mustRelease(t, "w2's release passes r's ghost", r, err)
	if m.ReaderCount(14, "r") != 0 {
		t.Fatal("r's ghost was granted")
	}
}

// A hold that joins again under the same hold id, lease and mode after its
// entry lost its deadline away from the head (a give-up, a Dropped reply)
// is served from the old entry's place if it joins by a first attempt (the
// real client never makes one: its ids are fresh); a retry is Dropped.
func TestRWSameMemberRejoiningTakesItsGhostsPlace(t *testing.T) {
	m := NewRW(1000, true)
	mustAttempt(t, "w", m.WriteAttempt(0, "w", 100, false), Acquired)
	mustAttempt(t, "a", m.WriteAttempt(1, "a", 100, true), Queued)
	mustAttempt(t, "b", m.WriteAttempt(2, "b", 100, true), Queued)
	mustAttempt(t, "c", m.WriteAttempt(3, "c", 100, true), Queued)
	if st, _ := m.GiveUp(4, "b", 100, Exclusive); st != LeftQueue {
		t.Fatalf("b's give-up: %v", st)
	}
	mustAttempt(t, "b's retry", m.WriteRetry(5, "b", 100, true), Dropped)
	mustAttempt(t, "b's first attempt again", m.WriteAttempt(6, "b", 100, true), Queued)
	if q := queueHolds(m, 6); !slices.Equal(q, []string{"a", "b", "c"}) {
		t.Fatalf("queue %v, want [a b c]", q)
	}
}

// A forced release of a read hold whose lease ran out releases nothing and
// serves nobody (rw_force_release.lua counts a read hold only while its
// lease runs).
func TestRWForcedReleaseOfAnExpiredReadHoldReleasesNothing(t *testing.T) {
	m := NewRW(1000, true)
	mustAttempt(t, "r", m.ReadAttempt(0, "r", 10, "", false), Acquired)
	mustAttempt(t, "w", m.WriteAttempt(1, "w", 100, true), Queued)
	if held, grants := m.ForceRelease(10, "r"); held || grants != nil {
		t.Fatalf("forced release of r at its lease's end: held %v, grants %v", held, grants)
	}
	if q := queueHolds(m, 10); !slices.Equal(q, []string{"w"}) {
		t.Fatalf("queue %v, want [w]: nothing served it", q)
	}
}

func TestRWMisusePanicsAndChangesNothing(t *testing.T) {
	m := NewRW(50, true)
	m.WriteAttempt(10, "w", 100, false)
	m.ReadAttempt(10, "r", 100, "", true)
	before := *m
	before.readers, before.deadlines, before.queue = maps.Clone(m.readers), maps.Clone(m.deadlines), slices.Clone(m.queue)
	for name, f := range map[string]func(){
		"empty hold":           func() { m.WriteAttempt(10, "", 100, true) },
		"empty retrying hold":  func() { m.ReadRetry(10, "", 100, "", true) },
		"zero lease":           func() { m.ReadAttempt(10, "x", 0, "", true) },
		"zero retry lease":     func() { m.WriteRetry(10, "x", 0, true) },
		"time going back":      func() { m.Serve(9) },
		"negative renewal":     func() { m.ReadRenew(10, "r", -1) },
		"negative re-entry":    func() { m.WriteReenter(10, "w", -1) },
		"unknown mode":         func() { m.Heartbeat(10, "r", 100, 'z') },
		"zero member lease":    func() { m.GiveUp(10, "r", 0, Shared) },
		"overflowing lease":    func() { m.WriteAttempt(10, "x", 1<<63-1, false) },
		"RW not made by NewRW": func() { new(RW).Serve(0) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
		if !reflect.DeepEqual(*m, before) {
			t.Fatalf("%s changed the model: %+v, was %+v", name, *m, before)
		}
	}
	if strings.Contains(fmt.Sprint(Shared, Exclusive), "mode(") {
		t.Fatal("modes print as their letters")
	}
}
