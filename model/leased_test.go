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

// The property tests below drive a Leased model with random operations by a
// few holds at random logical times, and check each reply against a shadow
// kept in a different shape: the live waiters as a map from hold to arrival
// number (the queue order is recomputed by sorting), and the live permits
// as a map from id to n and expiry, from which the available count is
// recomputed. Every action asserts the property its reply proves; the ""
// check compares every query with the shadow after each step.

const leasedMaxLease = 100 // ms; leases are drawn from [1, leasedMaxLease]

// leasedShadowWaiter is the shadow of one live waiter.
type leasedShadowWaiter struct {
	arrival  int
	n, lease int64
	deadline Time
}

// leasedShadowPermit is the shadow of one live permit.
type leasedShadowPermit struct {
	n      int64
	expiry Time
}

// leasedMachine is one rapid run: the model under test and its shadow.
type leasedMachine struct {
	m   *Leased
	now Time

	set   bool
	total int64

	permits  map[string]leasedShadowPermit // live permits
	waiters  map[string]*leasedShadowWaiter
	arrivals int

	// dead holds the holds whose waiter died and that have not queued or
	// acquired since: they must never be granted.
	dead map[string]bool
}

func newLeasedMachine() *leasedMachine {
	return &leasedMachine{
		m:       NewLeased(semWaiterTimeout),
		permits: map[string]leasedShadowPermit{},
		waiters: map[string]*leasedShadowWaiter{},
		dead:    map[string]bool{},
	}
}

// settle applies expiry: waiters die at their deadline, permits end at
// their expiry.
func (s *leasedMachine) settle() {
	for h, w := range s.waiters {
		if s.now >= w.deadline {
			delete(s.waiters, h)
			s.dead[h] = true
		}
	}
	for id, p := range s.permits {
		if s.now >= p.expiry {
			delete(s.permits, id)
		}
	}
}

func (s *leasedMachine) available() int64 {
	a := s.total
	for _, p := range s.permits {
		a -= p.n
	}
	return a
}

// hint is the expected Hint of a failed attempt: ms to the nearest expiry.
func (s *leasedMachine) hint() int64 {
	var at []Time
	for _, p := range s.permits {
		at = append(at, p.expiry)
	}
	if len(at) == 0 {
		return 0
	}
	return int64(slices.Min(at) - s.now)
}

func (s *leasedMachine) order() []string {
	return semOrder(s.waiters, func(w *leasedShadowWaiter) int { return w.arrival })
}

// dispatch serves the shadow's queue by arrival, stopping when no permit is
// left; a grant's permit ends at now+lease or at the waiter's deadline,
// whichever is sooner.
func (s *leasedMachine) dispatch() SemEvents {
	var ev SemEvents
	for o := s.order(); len(o) > 0 && s.available() > 0; o = o[1:] {
		h := o[0]
		w := s.waiters[h]
		switch {
		case w.n > s.total:
			ev.Rejected = append(ev.Rejected, h)
		case s.available() >= w.n:
			s.permits[h] = leasedShadowPermit{n: w.n, expiry: min(s.now+Time(w.lease), w.deadline)}
			ev.Granted = append(ev.Granted, h)
		default:
			return ev
		}
		delete(s.waiters, h)
	}
	return ev
}

func (s *leasedMachine) events(t *rapid.T, how string, got, want SemEvents) {
	t.Helper()
	for _, h := range got.Granted {
		if s.dead[h] {
			t.Fatalf("dead waiters are skipped: %s granted %s at %d, whose waiter died", how, h, s.now)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("FIFO dispatch: %s at %d: events %+v, want %+v", how, s.now, got, want)
	}
}

func (s *leasedMachine) noHerd(t *rapid.T, how string) {
	t.Helper()
	q, avail := s.m.Queue(s.now), s.m.Available(s.now)
	if len(q) > 0 {
		if w := s.waiters[q[0]]; w != nil && w.n <= avail {
			t.Fatalf("no herd: after %s at %d the head %s asks for %d of %d available and was not granted (queue %v)",
				how, s.now, q[0], w.n, avail, q)
		}
	}
}

// drawHold returns a live waiter, a permit's id or any hold.
func (s *leasedMachine) drawHold(t *rapid.T) string {
	switch rapid.IntRange(0, 2).Draw(t, "who") {
	case 0:
		if o := s.order(); len(o) > 0 {
			return rapid.SampledFrom(o).Draw(t, "waiter")
		}
	case 1:
		if len(s.permits) > 0 {
			return rapid.SampledFrom(slices.Sorted(maps.Keys(s.permits))).Draw(t, "permit")
		}
	}
	return rapid.SampledFrom(semHolds).Draw(t, "hold")
}

func (s *leasedMachine) state() Leased {
	s.m.Available(s.now)
	c := *s.m
	c.queue = slices.Clone(c.queue)
	c.permits = maps.Clone(c.permits)
	return c
}

func (s *leasedMachine) unchanged(t *rapid.T, property string, before Leased) {
	t.Helper()
	if after := s.state(); !reflect.DeepEqual(after, before) {
		t.Fatalf("%s: state changed from %+v to %+v", property, before, after)
	}
}

func (s *leasedMachine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"advance":           s.advance,
		"advanceToDeadline": s.advanceToDeadline,
		"setPermits":        s.setPermits,
		"addPermits":        s.addPermits,
		"attempt":           s.attempt,
		"heartbeat":         s.heartbeat,
		"giveUp":            s.giveUp,
		"release":           s.release,
		"renew":             s.renew,
		"":                  s.check,
	}
}

// moveTo moves time to to (if later) and checks that the permits whose
// lease ran out came back without any release, and no others.
func (s *leasedMachine) moveTo(t *rapid.T, to Time) {
	if to <= s.now {
		return
	}
	before := s.m.Available(s.now)
	var back int64
	for _, p := range s.permits {
		if p.expiry <= to {
			back += p.n
		}
	}
	s.now = to
	s.settle()
	if after := s.m.Available(s.now); after != before+back {
		t.Fatalf("permits come back at lease end: available went from %d to %d at %d, want %d more",
			before, after, s.now, back)
	}
}

func (s *leasedMachine) advance(t *rapid.T) {
	s.moveTo(t, s.now+Time(rapid.Int64Range(0, semMaxAdvance).Draw(t, "dt")))
}

// advanceToDeadline jumps to just before, exactly at, or just after a
// waiter's deadline or a permit's expiry.
func (s *leasedMachine) advanceToDeadline(t *rapid.T) {
	var at []Time
	for _, h := range s.order() {
		at = append(at, s.waiters[h].deadline)
	}
	for _, id := range slices.Sorted(maps.Keys(s.permits)) {
		at = append(at, s.permits[id].expiry)
	}
	if len(at) == 0 {
		t.Skip("no deadline ahead")
	}
	s.moveTo(t, rapid.SampledFrom(at).Draw(t, "deadline")+Time(rapid.IntRange(-1, 1).Draw(t, "offset")))
}

func (s *leasedMachine) setPermits(t *rapid.T) {
	k := rapid.Int64Range(0, semMaxTotal).Draw(t, "k")
	before := s.state()
	if got := s.m.TrySetPermits(s.now, k); got != !s.set {
		t.Fatalf("set once: TrySetPermits(%d) = %v with permits set %v", k, got, s.set)
	}
	if s.set {
		s.unchanged(t, "TrySetPermits on set permits changes nothing", before)
		return
	}
	s.set, s.total = true, k
}

func (s *leasedMachine) addPermits(t *rapid.T) {
	delta := rapid.Int64Range(-4, 4).Draw(t, "delta")
	before := s.state()
	ev, err := s.m.AddPermits(s.now, delta)
	if avail := s.available(); avail+delta < 0 {
		if !errors.Is(err, ErrInsufficientPermits) || !reflect.DeepEqual(ev, SemEvents{}) {
			t.Fatalf("reduction below available: AddPermits(%d) with %d available = (%+v, %v), want ErrInsufficientPermits",
				delta, avail, ev, err)
		}
		s.unchanged(t, "a refused reduction changes nothing", before)
		return
	}
	if err != nil {
		t.Fatalf("AddPermits(%d) with %d available: %v", delta, s.available(), err)
	}
	s.set, s.total = true, s.total+delta
	s.events(t, fmt.Sprintf("AddPermits(%d)", delta), ev, s.dispatch())
	s.noHerd(t, "AddPermits")
}

func (s *leasedMachine) attempt(t *rapid.T) {
	hold := s.drawHold(t)
	w, queued := s.waiters[hold]
	_, hasPermit := s.permits[hold]
	// As for the counting semaphore: a hold that is queued or holds a permit
	// attempts again (with the n and lease it is queued for); any other may
	// make a first attempt, or attempt again.
	first := !queued && !hasPermit && rapid.Bool().Draw(t, "first")
	var n, lease int64
	if queued {
		n, lease = w.n, w.lease
	} else {
		n, lease = drawN(t, hold), rapid.Int64Range(1, leasedMaxLease).Draw(t, "lease")
	}
	enqueue := rapid.IntRange(0, 3).Draw(t, "enqueue") > 0
	before := s.state()
	got, ev, err := s.m.Attempt(s.now, hold, n, lease, first, enqueue)

	var wantEv SemEvents
	if len(s.waiters) > 0 {
		wantEv = s.dispatch()
	}
	s.events(t, "attempt", ev, wantEv)
	_, hasPermit = s.permits[hold]
	if got.Status == Acquired && len(s.waiters) > 0 {
		t.Fatalf("no barging: %s acquired at %d while live waiters %v are queued", hold, s.now, s.order())
	}

	var want SemAttempt
	var wantErr error
	property := "attempt"
	switch {
	case hasPermit:
		want.Status = Granted // reported as it is: lease and n ignored
	case !s.set:
		delete(s.waiters, hold)
		wantErr = ErrNotSet
	case n > s.total:
		delete(s.waiters, hold)
		wantErr = ErrTooManyPermits
	case len(s.waiters) == 0 && s.available() >= n:
		s.permits[hold] = leasedShadowPermit{n: n, expiry: s.now + Time(lease)}
		delete(s.dead, hold)
		want.Status = Acquired
	case !enqueue:
		want.Status, want.Hint = Busy, s.hint()
	case first:
		s.arrivals++
		s.waiters[hold] = &leasedShadowWaiter{arrival: s.arrivals, n: n, lease: lease, deadline: s.now + semWaiterTimeout}
		delete(s.dead, hold)
		want.Status, want.Hint = Queued, s.hint()
	case s.waiters[hold] != nil:
		s.waiters[hold].deadline = s.now + semWaiterTimeout
		want.Status, want.Hint = Queued, s.hint()
	default:
		want.Status = Dropped
		property = "a later attempt of a hold that is not a live waiter is dropped"
	}
	if got != want || !errors.Is(err, wantErr) || (wantErr == nil && err != nil) {
		t.Fatalf("%s: attempt by %s for %d (lease %d) at %d (first %v, enqueue %v, total %d, available %d, queue %v, permits %v, dead %v): got (%+v, %v), want (%+v, %v)",
			property, hold, n, lease, s.now, first, enqueue, s.total, s.available(), s.order(), s.permits, s.dead[hold],
			got, err, want, wantErr)
	}
	if failed := got.Status == Queued || got.Status == Busy; failed && (got.Hint >= 1) != (len(s.permits) > 0) {
		t.Fatalf("hint: a failed attempt at %d got a hint of %d ms with live permits %v", s.now, got.Hint, s.permits)
	}
	if (got.Status == Granted || got.Status == Busy || got.Status == Dropped) && wantEv.Granted == nil && wantEv.Rejected == nil {
		s.unchanged(t, "adoption, a failed attempt without enqueue, or a dropped one, changes nothing", before)
	}
	s.noHerd(t, "attempt")
}

func (s *leasedMachine) heartbeat(t *rapid.T) {
	hold := s.drawHold(t)
	before := s.state()
	got, ev := s.m.Heartbeat(s.now, hold)
	var wantEv SemEvents
	if len(s.waiters) > 0 {
		wantEv = s.dispatch()
	}
	s.events(t, "heartbeat", ev, wantEv)
	want := BeatDropped
	if _, ok := s.permits[hold]; ok {
		want = BeatGranted
	} else if w := s.waiters[hold]; w != nil {
		w.deadline = s.now + semWaiterTimeout
		want = BeatQueued
	}
	if got != want {
		if s.dead[hold] {
			t.Fatalf("dead waiters are skipped: heartbeat of dead %s at %d = %v", hold, s.now, got)
		}
		t.Fatalf("heartbeat of %s at %d = %v, want %v", hold, s.now, got, want)
	}
	if want != BeatQueued && wantEv.Granted == nil && wantEv.Rejected == nil {
		s.unchanged(t, "a heartbeat of a hold that is not waiting changes nothing", before)
	}
	s.noHerd(t, "heartbeat")
}

func (s *leasedMachine) giveUp(t *rapid.T) {
	hold := s.drawHold(t)
	got, ev := s.m.GiveUp(s.now, hold)
	delete(s.waiters, hold)
	var want int64
	if p, ok := s.permits[hold]; ok {
		delete(s.permits, hold)
		want = p.n
	}
	if got != want {
		t.Fatalf("give-up returns the grant: GiveUp by %s at %d returned %d, want %d", hold, s.now, got, want)
	}
	s.events(t, "giveUp", ev, s.dispatch())
	if _, ok := s.m.Permits(s.now)[hold]; ok || slices.Contains(s.m.Queue(s.now), hold) {
		t.Fatalf("give-up leaves no residue: %s still queued or holding at %d", hold, s.now)
	}
	s.noHerd(t, "giveUp")
}

func (s *leasedMachine) release(t *rapid.T) {
	id := s.drawHold(t)
	p, ok := s.permits[id]
	k := rapid.Int64Range(1, p.n+1).Draw(t, "k")
	before := s.state()
	ev, err := s.m.Release(s.now, id, k)
	switch {
	case !ok:
		if !errors.Is(err, ErrPermitExpired) || !reflect.DeepEqual(ev, SemEvents{}) {
			t.Fatalf("release of %s, which has no live permit, at %d = (%+v, %v), want ErrPermitExpired", id, s.now, ev, err)
		}
		s.unchanged(t, "a release of a permit that is gone changes nothing", before)
		return
	case k > p.n:
		if !errors.Is(err, ErrOverRelease) || !reflect.DeepEqual(ev, SemEvents{}) {
			t.Fatalf("over-release: Release(%s, %d) of a permit of %d = (%+v, %v), want ErrOverRelease", id, k, p.n, ev, err)
		}
		s.unchanged(t, "an over-release changes nothing", before)
		return
	case k == p.n:
		delete(s.permits, id)
	default:
		p.n -= k
		s.permits[id] = p
	}
	if err != nil {
		t.Fatalf("Release(%s, %d) of a permit of %d: %v", id, k, p.n, err)
	}
	s.events(t, fmt.Sprintf("Release(%s, %d)", id, k), ev, s.dispatch())
	s.noHerd(t, "release")
}

func (s *leasedMachine) renew(t *rapid.T) {
	id := s.drawHold(t)
	lease := rapid.Int64Range(1, leasedMaxLease).Draw(t, "lease")
	before := s.state()
	p, ok := s.permits[id]
	if got := s.m.Renew(s.now, id, lease); got != ok {
		t.Fatalf("renew of %s at %d = %v, want %v", id, s.now, got, ok)
	}
	if !ok {
		s.unchanged(t, "a renewal of a permit that is gone changes nothing", before)
		return
	}
	p.expiry = s.now + Time(lease)
	s.permits[id] = p
	if at, ok := s.m.Expiry(s.now, id); !ok || at != p.expiry {
		t.Fatalf("renew extends: Expiry(%s) after Renew(%d) at %d = (%d, %v), want %d", id, lease, s.now, at, ok, p.expiry)
	}
}

func (s *leasedMachine) check(t *rapid.T) {
	avail := s.m.Available(s.now)
	total, set := s.m.Total(s.now)
	if avail != s.available() || total != s.total || set != s.set {
		t.Fatalf("permits at %d: available %d, total (%d, %v), want %d, (%d, %v)",
			s.now, avail, total, set, s.available(), s.total, s.set)
	}
	if avail < 0 || avail > total {
		t.Fatalf("0 <= available <= total: %d available of %d", avail, total)
	}
	want := map[string]int64{}
	for id, p := range s.permits {
		want[id] = p.n
	}
	if got := s.m.Permits(s.now); !reflect.DeepEqual(got, want) {
		t.Fatalf("permits at %d: %v, want %v", s.now, got, want)
	}
	for _, h := range semHolds {
		at, ok := s.m.Expiry(s.now, h)
		if p, live := s.permits[h]; ok != live || at != p.expiry {
			t.Fatalf("expiry of %s at %d: (%d, %v), want (%d, %v)", h, s.now, at, ok, p.expiry, live)
		}
	}
	if q, want := s.m.Queue(s.now), s.order(); !slices.Equal(q, want) {
		t.Fatalf("FIFO: queue at %d is %v, want %v", s.now, q, want)
	}
	for h := range s.permits {
		if slices.Contains(s.order(), h) {
			t.Fatalf("a hold with a permit is queued: %s", h)
		}
	}
}

func leasedMachineWith(names ...string) func(*rapid.T) {
	return func(t *rapid.T) {
		s := newLeasedMachine()
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

func TestLeasedAgreesWithShadowUnderAllOperations(t *testing.T) {
	rapid.Check(t, leasedMachineWith("advance", "advanceToDeadline", "setPermits", "addPermits",
		"attempt", "heartbeat", "giveUp", "release", "renew"))
}

// Without releases, permits come back only by their leases running out.
func TestLeasedPermitsComeBackAtLeaseEnd(t *testing.T) {
	rapid.Check(t, leasedMachineWith("advance", "advanceToDeadline", "setPermits", "attempt", "heartbeat", "renew"))
}

func TestLeasedReleaseGrantsExactlyTheSatisfiablePrefix(t *testing.T) {
	rapid.Check(t, leasedMachineWith("advance", "setPermits", "attempt", "heartbeat", "release"))
}

func TestLeasedGiveUpReturnsExactlyThePermit(t *testing.T) {
	rapid.Check(t, leasedMachineWith("advance", "setPermits", "attempt", "heartbeat", "giveUp", "release"))
}

func TestLeasedRefusedReductionChangesNothing(t *testing.T) {
	rapid.Check(t, leasedMachineWith("advance", "setPermits", "addPermits", "attempt", "release"))
}

// Example-based tests of the edges.

func TestLeasedPermitComesBackAtLeaseEndAndWaiterLearnsWhen(t *testing.T) {
	m := NewLeased(1000)
	m.TrySetPermits(0, 3)
	if r, _ := semMust(t)(m.Attempt(0, "a", 2, 100, true, true)); r != (SemAttempt{Status: Acquired}) {
		t.Fatalf("a takes 2 of 3: %+v", r)
	}
	if r, _ := semMust(t)(m.Attempt(10, "b", 2, 30, true, true)); r != (SemAttempt{Status: Queued, Hint: 90}) {
		t.Fatalf("b queues: %+v, want a hint at a's expiry 90 ms away", r)
	}
	if r, _ := semMust(t)(m.Attempt(20, "c", 1, 30, true, false)); r != (SemAttempt{Status: Busy, Hint: 80}) {
		t.Fatalf("c's TryAcquire past b: %+v, want refused with a hint", r)
	}
	if a := m.Available(99); a != 1 {
		t.Fatalf("available at 99 = %d, want 1", a)
	}
	if a := m.Available(100); a != 3 || !slices.Equal(m.Queue(100), []string{"b"}) {
		t.Fatalf("at a's expiry: available %d, queue %v, want 3 and [b] (nobody ran to grant it)", a, m.Queue(100))
	}
	if got, ev := m.Heartbeat(100, "b"); got != BeatGranted || !reflect.DeepEqual(ev, SemEvents{Granted: []string{"b"}}) {
		t.Fatalf("b's heartbeat at 100 = (%v, %+v), want its own dispatch to grant it", got, ev)
	}
	if at, ok := m.Expiry(100, "b"); !ok || at != 130 {
		t.Fatalf("b's permit ends at (%d, %v), want 130", at, ok)
	}
	if r, _ := semMust(t)(m.Attempt(101, "b", 2, 500, false, true)); r != (SemAttempt{Status: Granted}) {
		t.Fatalf("b adopts its grant: %+v", r)
	}
	if at, _ := m.Expiry(101, "b"); at != 130 {
		t.Fatalf("adoption changed the expiry to %d", at)
	}
	if !m.Renew(110, "b", 100) {
		t.Fatal("renewal of b refused")
	}
	if a := m.Available(200); a != 1 {
		t.Fatalf("available at 200 = %d, want 1: b's permit was renewed until 210", a)
	}
	if a := m.Available(210); a != 3 {
		t.Fatalf("available at 210 = %d, want 3", a)
	}
	if m.Renew(210, "b", 100) {
		t.Fatal("renewal revived an expired permit")
	}
}

func TestLeasedGrantIsCappedByWaiterDeadline(t *testing.T) {
	m := NewLeased(50)
	m.TrySetPermits(0, 1)
	semMust(t)(m.Attempt(0, "a", 1, 1000, true, true))
	semMust(t)(m.Attempt(0, "b", 1, 100, true, true)) // live until 50
	if ev, err := m.Release(20, "a", 1); err != nil || !reflect.DeepEqual(ev, SemEvents{Granted: []string{"b"}}) {
		t.Fatalf("a releases = (%+v, %v), want b granted", ev, err)
	}
	if at, _ := m.Expiry(20, "b"); at != 50 {
		t.Fatalf("b's permit ends at %d, want 50 (its deadline, not 120)", at)
	}
	if a := m.Available(50); a != 1 {
		t.Fatalf("b never renewed: available at 50 = %d, want 1", a)
	}
}

func TestLeasedReleaseOfExpiredPermitDispatchesNothing(t *testing.T) {
	m := NewLeased(1000)
	m.TrySetPermits(0, 2)
	semMust(t)(m.Attempt(0, "a", 2, 10, true, true))
	semMust(t)(m.Attempt(0, "b", 2, 10, true, true))
	if ev, err := m.Release(10, "a", 2); !errors.Is(err, ErrPermitExpired) || !reflect.DeepEqual(ev, SemEvents{}) {
		t.Fatalf("release of an expired permit = (%+v, %v), want ErrPermitExpired", ev, err)
	}
	if q := m.Queue(10); !slices.Equal(q, []string{"b"}) || m.Available(10) != 2 {
		t.Fatalf("queue %v, available %d: the failed release granted nobody", q, m.Available(10))
	}
	if r, ev := semMust(t)(m.Attempt(11, "b", 2, 10, false, true)); r != (SemAttempt{Status: Granted}) || !reflect.DeepEqual(ev, SemEvents{Granted: []string{"b"}}) {
		t.Fatalf("b's next attempt = %+v %+v, want granted by its own dispatch", r, ev)
	}
	if at, _ := m.Expiry(11, "b"); at != 21 {
		t.Fatalf("b's permit ends at %d, want 21", at)
	}
}

func TestLeasedPartialReleaseServesQueueInOrder(t *testing.T) {
	m := NewLeased(1000)
	m.TrySetPermits(0, 3)
	semMust(t)(m.Attempt(0, "a", 3, 100, true, true))
	semMust(t)(m.Attempt(0, "b", 1, 100, true, true))
	semMust(t)(m.Attempt(0, "c", 2, 100, true, true))
	if _, err := m.Release(1, "a", 4); !errors.Is(err, ErrOverRelease) {
		t.Fatalf("release of 4 of a's 3: %v", err)
	}
	if ev, err := m.Release(1, "a", 1); err != nil || !reflect.DeepEqual(ev, SemEvents{Granted: []string{"b"}}) {
		t.Fatalf("release of 1 = (%+v, %v), want b granted", ev, err)
	}
	if p := m.Permits(1); !reflect.DeepEqual(p, map[string]int64{"a": 2, "b": 1}) {
		t.Fatalf("permits = %v", p)
	}
	if at, _ := m.Expiry(1, "a"); at != 100 {
		t.Fatalf("a partial release changed a's expiry to %d", at)
	}
	if ev, err := m.Release(2, "a", 2); err != nil || !reflect.DeepEqual(ev, SemEvents{Granted: []string{"c"}}) {
		t.Fatalf("release of a's last 2 = (%+v, %v), want c granted", ev, err)
	}
	if _, err := m.Release(3, "a", 1); !errors.Is(err, ErrPermitExpired) {
		t.Fatalf("release after a's permit ended: %v", err)
	}
}

func TestLeasedGiveUpOfGrantedWaiterReturnsItsPermit(t *testing.T) {
	m := NewLeased(1000)
	m.TrySetPermits(0, 2)
	semMust(t)(m.Attempt(0, "a", 2, 100, true, true))
	semMust(t)(m.Attempt(0, "b", 2, 100, true, true))
	semMust(t)(m.Attempt(0, "c", 1, 100, true, true))
	if ev, _ := m.Release(5, "a", 2); !reflect.DeepEqual(ev, SemEvents{Granted: []string{"b"}}) {
		t.Fatalf("release = %+v, want b granted", ev)
	}
	if n, ev := m.GiveUp(5, "b"); n != 2 || !reflect.DeepEqual(ev, SemEvents{Granted: []string{"c"}}) {
		t.Fatalf("b gives up its grant = (%d, %+v), want 2 back and c granted", n, ev)
	}
	if p := m.Permits(5); !reflect.DeepEqual(p, map[string]int64{"c": 1}) {
		t.Fatalf("permits = %v, want only c's", p)
	}
}

func TestLeasedReductionCountsOnlyLivePermitsAndRejectsHead(t *testing.T) {
	m := NewLeased(1000)
	if _, err := m.AddPermits(0, -1); !errors.Is(err, ErrInsufficientPermits) {
		t.Fatalf("reduction of unset permits: %v", err)
	}
	if _, _, err := m.Attempt(0, "a", 1, 10, true, true); !errors.Is(err, ErrNotSet) {
		t.Fatalf("attempt on unset permits: %v", err)
	}
	if _, err := m.AddPermits(0, 4); err != nil {
		t.Fatal(err)
	}
	semMust(t)(m.Attempt(0, "a", 3, 10, true, true))
	semMust(t)(m.Attempt(0, "b", 4, 100, true, true))
	if _, err := m.AddPermits(5, -2); !errors.Is(err, ErrInsufficientPermits) {
		t.Fatalf("reduction by 2 with 1 available: %v", err)
	}
	ev, err := m.AddPermits(10, -2) // a's permit ended at 10: 4 available
	if err != nil || !reflect.DeepEqual(ev, SemEvents{Rejected: []string{"b"}}) {
		t.Fatalf("reduction to 2 = (%+v, %v), want b rejected", ev, err)
	}
	if total, ok := m.Total(10); total != 2 || !ok || m.Available(10) != 2 || m.Queue(10) != nil {
		t.Fatalf("after the reduction: total (%d, %v), available %d, queue %v", total, ok, m.Available(10), m.Queue(10))
	}
	if _, _, err := m.Attempt(11, "b", 4, 100, false, true); !errors.Is(err, ErrTooManyPermits) {
		t.Fatalf("rejected b attempts again: %v", err)
	}
	if m.TrySetPermits(11, 10) {
		t.Fatal("TrySetPermits after AddPermits set them")
	}
}

// As in the counting semaphore: a later attempt that asks to wait, by a hold
// that is not a live waiter, is dropped and changes nothing, with no hint;
// the caller starts over under a new hold id, at the tail. A granted permit
// whose lease ran out before its waiter learned of it (cut at the waiter's
// deadline) is gone with its grant.
func TestLeasedLaterAttemptOfAHoldNotQueuedIsDropped(t *testing.T) {
	m := NewLeased(50)
	m.TrySetPermits(0, 2)
	semMust(t)(m.Attempt(0, "a", 2, 1000, true, true))
	semMust(t)(m.Attempt(0, "dead", 1, 100, true, true)) // dead at 50
	semMust(t)(m.Attempt(40, "c", 2, 100, true, true))   // live until 90
	if q := m.Queue(50); !slices.Equal(q, []string{"c"}) {
		t.Fatalf("queue at 50 = %v, want [c]", q)
	}
	before := *m
	before.queue, before.permits = slices.Clone(m.queue), maps.Clone(m.permits)
	if r, ev := semMust(t)(m.Attempt(50, "dead", 1, 100, false, true)); r != (SemAttempt{Status: Dropped}) || !reflect.DeepEqual(ev, SemEvents{}) {
		t.Fatalf("the dead waiter attempts again: %+v %+v, want dropped with no hint", r, ev)
	}
	if !reflect.DeepEqual(*m, before) {
		t.Fatalf("the dropped attempt changed the model: %+v, was %+v", *m, before)
	}
	if r, _ := semMust(t)(m.Attempt(50, "dead2", 1, 100, true, true)); r != (SemAttempt{Status: Queued, Hint: 950}) {
		t.Fatalf("it starts over as dead2: %+v, want queued", r)
	}
	// "late" is granted at 45, its permit cut at its deadline, 50: an attempt at 49 finds
	// it, one at 50 (had it stalled) does not, and is dropped.
	m2 := NewLeased(50)
	m2.TrySetPermits(0, 1)
	semMust(t)(m2.Attempt(0, "a", 1, 1000, true, true))
	semMust(t)(m2.Attempt(0, "late", 1, 100, true, true))
	if ev, err := m2.Release(45, "a", 1); err != nil || !reflect.DeepEqual(ev, SemEvents{Granted: []string{"late"}}) {
		t.Fatalf("a's release = (%+v, %v), want late granted", ev, err)
	}
	if r, _ := semMust(t)(m2.Attempt(49, "late", 1, 100, false, true)); r != (SemAttempt{Status: Granted}) {
		t.Fatalf("late at 49: %+v, want granted", r)
	}
	m3 := NewLeased(50)
	m3.TrySetPermits(0, 1)
	semMust(t)(m3.Attempt(0, "a", 1, 1000, true, true))
	semMust(t)(m3.Attempt(0, "late", 1, 100, true, true))
	semMust(t)(m3.Attempt(10, "c", 1, 100, true, true)) // live until 60
	m3.Release(45, "a", 1)                              // to late, until 50; c waits
	if r, _ := semMust(t)(m3.Attempt(50, "late", 1, 100, false, true)); r != (SemAttempt{Status: Dropped}) {
		t.Fatalf("late at 50, its permit gone: %+v, want dropped", r)
	}
	if got, _ := m3.Heartbeat(50, "c"); got != BeatGranted {
		t.Fatalf("c's heartbeat at 50 = %v, want the permit that came back", got)
	}
}

func TestLeasedMisusePanics(t *testing.T) {
	queued := func() *Leased {
		m := NewLeased(50)
		m.TrySetPermits(10, 1)
		m.Attempt(10, "a", 1, 100, true, true)
		m.Attempt(10, "b", 1, 100, true, true)
		return m
	}
	for _, tc := range []struct {
		name string
		want string
		call func(m *Leased)
	}{
		{"time goes backwards", "before the already observed time", func(m *Leased) { m.Heartbeat(9, "b") }},
		{"time goes backwards in a query", "before the already observed time", func(m *Leased) { m.Permits(9) }},
		{"empty hold", "empty owner", func(m *Leased) { m.Attempt(10, "", 1, 10, true, true) }},
		{"first attempt of a queued hold", "which is queued", func(m *Leased) { m.Attempt(10, "b", 1, 100, true, true) }},
		{"first attempt of a holder", "which has a permit", func(m *Leased) { m.Attempt(10, "a", 1, 100, true, true) }},
		{"other n than queued", "which is queued for 1 permits", func(m *Leased) { m.Attempt(10, "b", 2, 100, false, true) }},
		{"other lease than queued", "for 100 ms", func(m *Leased) { m.Attempt(10, "b", 1, 90, false, false) }},
		{"empty id", "empty owner", func(m *Leased) { m.Release(10, "", 1) }},
		{"zero n", "non-positive permit count", func(m *Leased) { m.Attempt(10, "c", 0, 10, true, true) }},
		{"zero lease", "non-positive lease", func(m *Leased) { m.Attempt(10, "c", 1, 0, true, true) }},
		{"zero renewal", "non-positive lease", func(m *Leased) { m.Renew(10, "a", 0) }},
		{"zero release", "non-positive permit count", func(m *Leased) { m.Release(10, "a", 0) }},
		{"negative set", "negative permits", func(m *Leased) { m.TrySetPermits(10, -1) }},
		{"total overflows", "overflows", func(m *Leased) { m.AddPermits(10, 1<<63-1) }},
		{"lease overflows", "overflows", func(m *Leased) { m.Attempt(10, "c", 1, 1<<63-1, true, false) }},
		{"zero Leased", "not made by NewLeased", func(m *Leased) { (&Leased{}).Attempt(10, "c", 1, 10, true, true) }},
		{"zero Leased query", "not made by NewLeased", func(m *Leased) { (&Leased{}).Available(10) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := queued()
			before := *m
			before.queue, before.permits = slices.Clone(m.queue), maps.Clone(m.permits)
			msg := func() (msg string) {
				defer func() { msg = fmt.Sprint(recover()) }()
				tc.call(m)
				return "no panic"
			}()
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("panic = %q, want one containing %q", msg, tc.want)
			}
			if !reflect.DeepEqual(*m, before) {
				t.Fatalf("a rejected call changed the model: %+v, was %+v", *m, before)
			}
		})
	}
	for _, timeout := range []int64{0, -1} {
		msg := func() (msg string) {
			defer func() { msg = fmt.Sprint(recover()) }()
			NewLeased(timeout)
			return "no panic"
		}()
		if !strings.Contains(msg, "non-positive waiter timeout") {
			t.Fatalf("NewLeased(%d): panic = %q", timeout, msg)
		}
	}
}
