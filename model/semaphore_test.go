package model

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// The property tests below drive a Sem model with random operations by a
// few holds at random logical times, and check each reply against a shadow
// kept in a different shape: the live waiters as a map from hold to arrival
// number, n and deadline (the queue order is recomputed by sorting arrival
// numbers), the grant records as a map, and the permits held out as a map
// from hold to the permits it took and has not released, so that the
// available count is checked against a bookkeeping of its own:
// available + held out == total. Every action asserts the property its
// reply proves (the failure message starts with the property's name); the
// "" check compares every query with the shadow after each step.

const (
	semWaiterTimeout = 50 // ms a waiter stays live after its latest enqueueing attempt or heartbeat
	semMaxAdvance    = 40 // ms; a time step is drawn from [0, semMaxAdvance]
	semMaxTotal      = 8  // permits; totals are drawn from [0, semMaxTotal]
)

var semHolds = []string{"s1", "s2", "s3", "s4", "s5"}

// semSize is the n each hold usually asks for; now and then it asks for
// another (see drawN).
var semSize = map[string]int64{"s1": 1, "s2": 2, "s3": 3, "s4": 5, "s5": 1}

// semDrainer is the hold the shadow books drained permits to.
const semDrainer = "drain"

// semShadowWaiter is the shadow of one live waiter.
type semShadowWaiter struct {
	arrival  int // order of the first enqueueing attempt since the hold last queued
	n        int64
	deadline Time
}

// semShadowGrant is the shadow of one grant record.
type semShadowGrant struct {
	n     int64
	until Time
}

// semMachine is one rapid run: the model under test and its shadow.
type semMachine struct {
	m   *Sem
	now Time

	set          bool
	total, avail int64

	waiters  map[string]*semShadowWaiter // live waiters
	arrivals int                         // arrival numbers handed out
	grants   map[string]semShadowGrant   // unexpired grant records

	// held maps each hold to the permits it took (directly, by consuming
	// a grant record, or because its record expired while it may have
	// been using them) and has not released.
	held map[string]int64

	// dead holds the holds whose waiter died and that have not queued or
	// acquired since: they must never be granted.
	dead map[string]bool
}

func newSemMachine() *semMachine {
	return &semMachine{
		m:       NewSem(semWaiterTimeout),
		waiters: map[string]*semShadowWaiter{},
		grants:  map[string]semShadowGrant{},
		held:    map[string]int64{},
		dead:    map[string]bool{},
	}
}

// settle applies expiry to the shadow: a waiter is dead at now >= its
// deadline, and a grant record vanishes at now >= until, its permits still
// taken (booked to the hold, which may be using them).
func (s *semMachine) settle() {
	for h, w := range s.waiters {
		if s.now >= w.deadline {
			delete(s.waiters, h)
			s.dead[h] = true
		}
	}
	for h, g := range s.grants {
		if s.now >= g.until {
			delete(s.grants, h)
			s.held[h] += g.n
		}
	}
}

// order returns the live waiters by arrival.
func (s *semMachine) order() []string {
	return semOrder(s.waiters, func(w *semShadowWaiter) int { return w.arrival })
}

// semOrder sorts the keys of waiters by their arrival numbers.
func semOrder[W any](waiters map[string]W, arrival func(W) int) []string {
	holds := slices.Collect(maps.Keys(waiters))
	sort.Slice(holds, func(i, j int) bool { return arrival(waiters[holds[i]]) < arrival(waiters[holds[j]]) })
	return holds
}

// join queues hold with n, or refreshes it if it is queued.
func (s *semMachine) join(hold string, n int64) {
	w := s.waiters[hold]
	if w == nil {
		s.arrivals++
		w = &semShadowWaiter{arrival: s.arrivals}
		s.waiters[hold] = w
		delete(s.dead, hold)
	}
	w.n, w.deadline = n, s.now+semWaiterTimeout
}

// dispatch serves the shadow's queue by arrival: rejects heads above the
// total, grants heads that fit, stops at the first that must wait or when no
// permit is left.
func (s *semMachine) dispatch() SemEvents {
	var ev SemEvents
	for {
		o := s.order()
		if len(o) == 0 || s.avail == 0 {
			return ev
		}
		h := o[0]
		w := s.waiters[h]
		switch {
		case w.n > s.total:
			ev.Rejected = append(ev.Rejected, h)
		case s.avail >= w.n:
			s.avail -= w.n
			s.grants[h] = semShadowGrant{n: w.n, until: w.deadline}
			ev.Granted = append(ev.Granted, h)
		default:
			return ev
		}
		delete(s.waiters, h)
	}
}

// events checks the events of a model call against the shadow's dispatch.
func (s *semMachine) events(t *rapid.T, how string, got, want SemEvents) {
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

// noHerd checks that a dispatch served exactly the satisfiable prefix of the
// queue: the queue is empty or its live head asks for more than available.
func (s *semMachine) noHerd(t *rapid.T, how string) {
	t.Helper()
	q, avail := s.m.Queue(s.now), s.m.Available(s.now)
	if len(q) > 0 {
		if w := s.waiters[q[0]]; w != nil && w.n <= avail {
			t.Fatalf("no herd: after %s at %d the head %s asks for %d of %d available and was not granted (queue %v)",
				how, s.now, q[0], w.n, avail, q)
		}
	}
}

// drawHold returns a live waiter, a hold with a grant record or any hold,
// so that waiter and grant operations are not rare.
func (s *semMachine) drawHold(t *rapid.T) string {
	switch rapid.IntRange(0, 2).Draw(t, "who") {
	case 0:
		if o := s.order(); len(o) > 0 {
			return rapid.SampledFrom(o).Draw(t, "waiter")
		}
	case 1:
		if len(s.grants) > 0 {
			return rapid.SampledFrom(slices.Sorted(maps.Keys(s.grants))).Draw(t, "granted")
		}
	}
	return rapid.SampledFrom(semHolds).Draw(t, "hold")
}

// drawN returns the n hold usually asks for, or now and then another
// (possibly above the total).
func drawN(t *rapid.T, hold string) int64 {
	if rapid.IntRange(0, 4).Draw(t, "odd n") == 0 {
		return rapid.Int64Range(1, semMaxTotal+1).Draw(t, "n")
	}
	return semSize[hold]
}

// state is the model's whole state at now, for operations that must change
// nothing.
func (s *semMachine) state() Sem {
	s.m.Available(s.now) // apply expiry at now, as the operation will
	c := *s.m
	c.queue = slices.Clone(c.queue)
	c.grants = maps.Clone(c.grants)
	return c
}

func (s *semMachine) unchanged(t *rapid.T, property string, before Sem) {
	t.Helper()
	if after := s.state(); !reflect.DeepEqual(after, before) {
		t.Fatalf("%s: state changed from %+v to %+v", property, before, after)
	}
}

func (s *semMachine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"advance":           s.advance,
		"advanceToDeadline": s.advanceToDeadline,
		"setPermits":        s.setPermits,
		"addPermits":        s.addPermits,
		"attempt":           s.attempt,
		"heartbeat":         s.heartbeat,
		"giveUp":            s.giveUp,
		"release":           s.release,
		"drain":             s.drain,
		"":                  s.check,
	}
}

func (s *semMachine) advance(t *rapid.T) {
	s.now += Time(rapid.Int64Range(0, semMaxAdvance).Draw(t, "dt"))
	s.settle()
}

// advanceToDeadline jumps to just before, exactly at, or just after a
// waiter's deadline or a grant record's end.
func (s *semMachine) advanceToDeadline(t *rapid.T) {
	var at []Time
	for _, h := range s.order() {
		at = append(at, s.waiters[h].deadline)
	}
	for _, h := range slices.Sorted(maps.Keys(s.grants)) {
		at = append(at, s.grants[h].until)
	}
	if len(at) == 0 {
		t.Skip("no deadline ahead")
	}
	to := rapid.SampledFrom(at).Draw(t, "deadline") + Time(rapid.IntRange(-1, 1).Draw(t, "offset"))
	if to > s.now {
		s.now = to
	}
	s.settle()
}

func (s *semMachine) setPermits(t *rapid.T) {
	k := rapid.Int64Range(0, semMaxTotal).Draw(t, "k")
	before := s.state()
	if got := s.m.TrySetPermits(s.now, k); got != !s.set {
		t.Fatalf("set once: TrySetPermits(%d) = %v with permits set %v", k, got, s.set)
	}
	if s.set {
		s.unchanged(t, "TrySetPermits on set permits changes nothing", before)
		return
	}
	s.set, s.total, s.avail = true, k, k
}

func (s *semMachine) addPermits(t *rapid.T) {
	delta := rapid.Int64Range(-4, 4).Draw(t, "delta")
	before := s.state()
	ev, err := s.m.AddPermits(s.now, delta)
	if delta < 0 && s.avail < -delta {
		if !errors.Is(err, ErrInsufficientPermits) || !reflect.DeepEqual(ev, SemEvents{}) {
			t.Fatalf("reduction below available: AddPermits(%d) with %d available = (%+v, %v), want ErrInsufficientPermits",
				delta, s.avail, ev, err)
		}
		s.unchanged(t, "a refused reduction changes nothing", before)
		return
	}
	if err != nil {
		t.Fatalf("AddPermits(%d) with %d available: %v", delta, s.avail, err)
	}
	s.set, s.total, s.avail = true, s.total+delta, s.avail+delta
	s.events(t, fmt.Sprintf("AddPermits(%d)", delta), ev, s.dispatch())
	s.noHerd(t, "AddPermits")
}

func (s *semMachine) attempt(t *rapid.T) {
	hold := s.drawHold(t)
	w, queued := s.waiters[hold]
	g, granted := s.grants[hold]
	// A hold that is queued or granted attempts again (a first attempt
	// cannot find either), with the n it asked for; any other may attempt
	// as a new call's first attempt, or again, which must wait only to be
	// told it was dropped.
	first := !queued && !granted && rapid.Bool().Draw(t, "first")
	var n int64
	switch {
	case queued:
		n = w.n
	case granted:
		n = g.n
	default:
		n = drawN(t, hold)
	}
	enqueue := rapid.IntRange(0, 3).Draw(t, "enqueue") > 0 // mostly Acquire, sometimes TryAcquire
	before := s.state()
	got, ev, err := s.m.Attempt(s.now, hold, n, first, enqueue)

	var wantEv SemEvents
	if len(s.waiters) > 0 {
		wantEv = s.dispatch()
	}
	s.events(t, "attempt", ev, wantEv)
	if got.Status == Acquired && len(s.waiters) > 0 {
		t.Fatalf("no barging: %s acquired at %d while live waiters %v are queued", hold, s.now, s.order())
	}

	var want SemAttempt
	var wantErr error
	property := "attempt"
	if g, ok := s.grants[hold]; ok {
		delete(s.grants, hold)
		s.held[hold] += g.n
		want.Status = Granted
	} else if !s.set {
		delete(s.waiters, hold)
		wantErr = ErrNotSet
	} else if n > s.total {
		delete(s.waiters, hold)
		wantErr = ErrTooManyPermits
	} else if len(s.waiters) == 0 && s.avail >= n {
		s.avail -= n
		s.held[hold] += n
		delete(s.dead, hold)
		want.Status = Acquired
	} else if !enqueue {
		want.Status = Busy
	} else if first {
		s.join(hold, n)
		want.Status = Queued
	} else if w := s.waiters[hold]; w != nil {
		w.deadline = s.now + semWaiterTimeout
		want.Status = Queued
	} else {
		want.Status = Dropped
		property = "a later attempt of a hold that is not a live waiter is dropped"
	}
	if got != want || !errors.Is(err, wantErr) || (wantErr == nil && err != nil) {
		t.Fatalf("%s: attempt by %s for %d at %d (first %v, enqueue %v, total %d, available %d, queue %v, dead %v): got (%+v, %v), want (%+v, %v)",
			property, hold, n, s.now, first, enqueue, s.total, s.avail, s.order(), s.dead[hold], got, err, want, wantErr)
	}
	if (got.Status == Busy || got.Status == Dropped) && wantEv.Granted == nil && wantEv.Rejected == nil {
		s.unchanged(t, "a failed attempt without enqueue, or a dropped one, changes nothing", before)
	}
	s.noHerd(t, "attempt")
}

func (s *semMachine) heartbeat(t *rapid.T) {
	hold := s.drawHold(t)
	before := s.state()
	got, ev := s.m.Heartbeat(s.now, hold)
	var wantEv SemEvents
	if len(s.waiters) > 0 {
		wantEv = s.dispatch()
	}
	s.events(t, "heartbeat", ev, wantEv)
	want := BeatDropped
	if g, ok := s.grants[hold]; ok {
		delete(s.grants, hold)
		s.held[hold] += g.n
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
	if want == BeatDropped && wantEv.Granted == nil && wantEv.Rejected == nil {
		s.unchanged(t, "a heartbeat of a hold that is not waiting changes nothing", before)
	}
	s.noHerd(t, "heartbeat")
}

func (s *semMachine) giveUp(t *rapid.T) {
	hold := s.drawHold(t)
	got, ev := s.m.GiveUp(s.now, hold)
	delete(s.waiters, hold)
	var want int64
	if g, ok := s.grants[hold]; ok {
		delete(s.grants, hold)
		s.avail += g.n
		want = g.n
	}
	if got != want {
		t.Fatalf("give-up returns the grant: GiveUp by %s at %d returned %d, want %d", hold, s.now, got, want)
	}
	s.events(t, "giveUp", ev, s.dispatch())
	if slices.Contains(s.m.Queue(s.now), hold) || slices.Contains(s.m.Granted(s.now), hold) {
		t.Fatalf("give-up leaves no residue: %s still queued or granted at %d", hold, s.now)
	}
	s.noHerd(t, "giveUp")
}

func (s *semMachine) release(t *rapid.T) {
	holders := slices.Sorted(maps.Keys(s.held))
	if rapid.IntRange(0, 3).Draw(t, "rogue") == 0 || len(holders) == 0 {
		// More than is held out: refused.
		k := s.total - s.avail + rapid.Int64Range(1, 3).Draw(t, "excess")
		before := s.state()
		ev, err := s.m.Release(s.now, k)
		wantErr := ErrOverRelease
		if !s.set {
			wantErr = ErrNotSet
		}
		if !errors.Is(err, wantErr) || !reflect.DeepEqual(ev, SemEvents{}) {
			t.Fatalf("over-release: Release(%d) with %d of %d available (set %v) = (%+v, %v), want %v",
				k, s.avail, s.total, s.set, ev, err, wantErr)
		}
		s.unchanged(t, "a refused release changes nothing", before)
		return
	}
	h := rapid.SampledFrom(holders).Draw(t, "holder")
	k := rapid.Int64Range(1, s.held[h]).Draw(t, "k")
	ev, err := s.m.Release(s.now, k)
	if err != nil {
		t.Fatalf("release of %d permits held by %s (available %d of %d): %v", k, h, s.avail, s.total, err)
	}
	if s.held[h] -= k; s.held[h] == 0 {
		delete(s.held, h)
	}
	s.avail += k
	s.events(t, fmt.Sprintf("Release(%d)", k), ev, s.dispatch())
	s.noHerd(t, "release")
}

func (s *semMachine) drain(t *rapid.T) {
	if got := s.m.Drain(s.now); got != s.avail {
		t.Fatalf("Drain at %d = %d, want %d", s.now, got, s.avail)
	}
	if s.avail > 0 {
		s.held[semDrainer] += s.avail
	}
	s.avail = 0
}

// check compares every query with the shadow, after every step.
func (s *semMachine) check(t *rapid.T) {
	avail := s.m.Available(s.now)
	total, set := s.m.Total(s.now)
	if avail != s.avail || total != s.total || set != s.set {
		t.Fatalf("permits at %d: available %d, total (%d, %v), want %d, (%d, %v)",
			s.now, avail, total, set, s.avail, s.total, s.set)
	}
	if avail < 0 || avail > total {
		t.Fatalf("0 <= available <= total: %d available of %d", avail, total)
	}
	var out int64
	for _, n := range s.held {
		out += n
	}
	for _, g := range s.grants {
		out += g.n
	}
	if avail+out != total {
		t.Fatalf("permits are conserved: %d available + %d held out (%v, grants %v) != total %d",
			avail, out, s.held, s.grants, total)
	}
	if q, want := s.m.Queue(s.now), s.order(); !slices.Equal(q, want) {
		t.Fatalf("FIFO: queue at %d is %v, want %v", s.now, q, want)
	}
	var granted []string
	if len(s.grants) > 0 {
		granted = slices.Sorted(maps.Keys(s.grants))
	}
	if g := s.m.Granted(s.now); !slices.Equal(g, granted) || (g == nil) != (granted == nil) {
		t.Fatalf("grant records at %d: %v, want %v", s.now, g, granted)
	}
	if !set && (len(s.m.Queue(s.now)) > 0 || avail != 0) {
		t.Fatalf("unset permits: queue %v, available %d", s.m.Queue(s.now), avail)
	}
}

// semMachineWith returns a rapid property that runs the state machine with
// only the named actions (and the invariant check).
func semMachineWith(names ...string) func(*rapid.T) {
	return func(t *rapid.T) {
		s := newSemMachine()
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

func TestSemAgreesWithShadowUnderAllOperations(t *testing.T) {
	rapid.Check(t, semMachineWith("advance", "advanceToDeadline", "setPermits", "addPermits",
		"attempt", "heartbeat", "giveUp", "release", "drain"))
}

// Available stays within [0, total] and equals the total minus the permits
// held out, through acquisitions, grants, expired records, give-backs,
// releases, drains and changes of the total.
func TestSemPermitsAreConserved(t *testing.T) {
	rapid.Check(t, semMachineWith("advance", "setPermits", "addPermits", "attempt", "giveUp", "release", "drain"))
}

func TestSemReleaseGrantsExactlyTheSatisfiablePrefix(t *testing.T) {
	rapid.Check(t, semMachineWith("advance", "setPermits", "attempt", "heartbeat", "release"))
}

func TestSemDeadWaitersAndGrantRecordsExpire(t *testing.T) {
	rapid.Check(t, semMachineWith("advance", "advanceToDeadline", "setPermits", "attempt", "release", "giveUp"))
}

func TestSemGiveUpReturnsExactlyTheGrant(t *testing.T) {
	rapid.Check(t, semMachineWith("advance", "setPermits", "attempt", "heartbeat", "giveUp", "release"))
}

func TestSemRefusedReductionChangesNothing(t *testing.T) {
	rapid.Check(t, semMachineWith("setPermits", "addPermits", "attempt", "release", "drain"))
}

// semUnderTest is what the FIFO test needs of either semaphore model.
type semUnderTest interface {
	// attempt is a fresh hold's first attempt, which asks to wait.
	attempt(now Time, hold string, n int64) (SemAttempt, SemEvents, error)
	heartbeat(now Time, hold string) (BeatStatus, SemEvents)
	release(now Time, hold string, n int64) (SemEvents, error)
	addPermits(now Time, delta int64) (SemEvents, error)
	available(now Time) int64
	queue(now Time) []string
}

type semAdapter struct{ m *Sem }

func (a semAdapter) attempt(now Time, hold string, n int64) (SemAttempt, SemEvents, error) {
	return a.m.Attempt(now, hold, n, true, true)
}
func (a semAdapter) heartbeat(now Time, hold string) (BeatStatus, SemEvents) {
	return a.m.Heartbeat(now, hold)
}
func (a semAdapter) release(now Time, _ string, n int64) (SemEvents, error) {
	return a.m.Release(now, n)
}
func (a semAdapter) addPermits(now Time, d int64) (SemEvents, error) { return a.m.AddPermits(now, d) }
func (a semAdapter) available(now Time) int64                        { return a.m.Available(now) }
func (a semAdapter) queue(now Time) []string                         { return a.m.Queue(now) }

// leasedAdapter takes leases of up to 200 ms, so permits also come back by
// running out.
type leasedAdapter struct {
	m     *Leased
	lease func() int64
}

func (a leasedAdapter) attempt(now Time, hold string, n int64) (SemAttempt, SemEvents, error) {
	return a.m.Attempt(now, hold, n, a.lease(), true, true)
}
func (a leasedAdapter) heartbeat(now Time, hold string) (BeatStatus, SemEvents) {
	return a.m.Heartbeat(now, hold)
}
func (a leasedAdapter) release(now Time, hold string, n int64) (SemEvents, error) {
	return a.m.Release(now, hold, n)
}
func (a leasedAdapter) addPermits(now Time, d int64) (SemEvents, error) {
	return a.m.AddPermits(now, d)
}
func (a leasedAdapter) available(now Time) int64 { return a.m.Available(now) }
func (a leasedAdapter) queue(now Time) []string  { return a.m.Queue(now) }

// semServesInArrivalOrder is the FIFO property for either model: fresh
// holds arrive one at a time asking for random n, every waiter heartbeats
// at every step (so none dies), holders release at random, the total
// changes now and then; the holds served (acquiring directly or granted)
// must be exactly the arrivals in order, less the rejected ones, and no
// release or change of the total may leave a head that fits ungranted.
func semServesInArrivalOrder(t *rapid.T, m semUnderTest) {
	now := Time(0)
	var arrivals, served []string
	rejected := map[string]bool{}
	held := map[string]int64{} // holds served and their n, until they release
	wasServed := map[string]bool{}
	asks := map[string]int64{}
	var waiting []string // queued holds, to heartbeat

	record := func(how string, ev SemEvents) {
		for _, h := range ev.Granted {
			served = append(served, h)
			held[h] = asks[h]
			wasServed[h] = true
		}
		for _, h := range ev.Rejected {
			rejected[h] = true
		}
		if len(served) > 0 {
			var expect []string
			for _, h := range arrivals {
				if !rejected[h] {
					expect = append(expect, h)
				}
			}
			if len(served) > len(expect) || !slices.Equal(served, expect[:len(served)]) {
				t.Fatalf("FIFO: after %s at %d the holds served are %v, want a prefix of the arrivals %v (rejected %v)",
					how, now, served, expect, rejected)
			}
		}
	}
	noHerd := func(how string) {
		if q := m.queue(now); len(q) > 0 && asks[q[0]] <= m.available(now) {
			t.Fatalf("no herd: after %s at %d the head %s asks for %d of %d available", how, now, q[0], asks[q[0]], m.available(now))
		}
	}

	if _, err := m.addPermits(now, rapid.Int64Range(1, semMaxTotal).Draw(t, "total")); err != nil {
		t.Fatalf("AddPermits: %v", err)
	}
	for i := range rapid.IntRange(1, 40).Draw(t, "steps") {
		now += Time(rapid.Int64Range(0, semWaiterTimeout-1).Draw(t, "dt"))
		for _, h := range slices.Clone(waiting) {
			reply, ev := m.heartbeat(now, h)
			record("heartbeat", ev)
			if reply == 0 && !rejected[h] && !wasServed[h] { // a granted permit may run out first
				t.Fatalf("no live waiter lost: heartbeat of %s at %d = 0", h, now)
			}
			if reply != 1 {
				waiting = slices.DeleteFunc(waiting, func(w string) bool { return w == h })
			}
		}
		switch rapid.IntRange(0, 3).Draw(t, "op") {
		case 0, 1: // a new hold arrives
			h := fmt.Sprintf("w%d", i)
			n := rapid.Int64Range(1, semMaxTotal).Draw(t, "n")
			asks[h] = n
			r, ev, err := m.attempt(now, h, n)
			record("attempt", ev)
			if err != nil { // ErrTooManyPermits: never an arrival
				if !errors.Is(err, ErrTooManyPermits) {
					t.Fatalf("attempt by %s: %v", h, err)
				}
				continue
			}
			arrivals = append(arrivals, h)
			if r.Status == Acquired { // past nobody: record checks it
				record("acquisition", SemEvents{Granted: []string{h}})
			} else {
				waiting = append(waiting, h)
			}
		case 2: // a holder releases
			if len(held) == 0 {
				continue
			}
			h := rapid.SampledFrom(slices.Sorted(maps.Keys(held))).Draw(t, "holder")
			ev, err := m.release(now, h, held[h])
			delete(held, h)
			if errors.Is(err, ErrPermitExpired) {
				continue // its lease ran out: the permits came back already
			}
			if err != nil {
				t.Fatalf("release by %s: %v", h, err)
			}
			record("release", ev)
			noHerd("release")
		case 3: // the total changes
			ev, err := m.addPermits(now, rapid.Int64Range(-3, 3).Draw(t, "delta"))
			if err != nil {
				continue // a reduction below available: nothing changed
			}
			record("AddPermits", ev)
			noHerd("AddPermits")
		}
	}
}

// Releases are honest: each served hold gives back what it asked for, once.
func TestSemServesLiveWaitersInArrivalOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		semServesInArrivalOrder(t, semAdapter{NewSem(semWaiterTimeout)})
	})
}

func TestLeasedServesLiveWaitersInArrivalOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		semServesInArrivalOrder(t, leasedAdapter{NewLeased(semWaiterTimeout), func() int64 {
			return rapid.Int64Range(1, 200).Draw(t, "lease")
		}})
	})
}

// Example-based tests of the edges.

// semMust returns a function that fails the test on an Attempt's error and
// returns its reply and events: semMust(t)(m.Attempt(...)).
func semMust(t *testing.T) func(SemAttempt, SemEvents, error) (SemAttempt, SemEvents) {
	return func(r SemAttempt, ev SemEvents, err error) (SemAttempt, SemEvents) {
		t.Helper()
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return r, ev
	}
}

// x/sync's TestLargeAcquireDoesntStarve: a large request at the head is not
// passed by later small ones, even while permits are available for them,
// and a release grants only what it can.
func TestSemLargeHeadRequestIsNotPassedBySmallerLaterOnes(t *testing.T) {
	m := NewSem(1000)
	m.TrySetPermits(0, 5)
	if r, _ := semMust(t)(m.Attempt(0, "a", 4, true, true)); r.Status != Acquired {
		t.Fatalf("a on a free semaphore: %+v", r)
	}
	if r, _ := semMust(t)(m.Attempt(1, "big", 3, true, true)); r != (SemAttempt{Status: Queued}) {
		t.Fatalf("big queues behind a: %+v", r)
	}
	for _, h := range []string{"small1", "small2"} {
		if r, _ := semMust(t)(m.Attempt(2, h, 1, true, true)); r != (SemAttempt{Status: Queued}) {
			t.Fatalf("%s barged past big with 1 permit available: %+v", h, r)
		}
	}
	if r, _ := semMust(t)(m.Attempt(2, "try", 1, true, false)); r != (SemAttempt{Status: Busy}) || m.Available(2) != 1 {
		t.Fatalf("a TryAcquire barged past big: %+v, available %d", r, m.Available(2))
	}
	if ev, err := m.Release(3, 1); err != nil || !reflect.DeepEqual(ev, SemEvents{}) {
		t.Fatalf("release of 1 with big (3) at the head = (%+v, %v), want nobody granted", ev, err)
	}
	ev, err := m.Release(4, 2)
	if err != nil || !reflect.DeepEqual(ev, SemEvents{Granted: []string{"big", "small1"}}) {
		t.Fatalf("release of 2 (4 available) = (%+v, %v), want big and small1 granted", ev, err)
	}
	if q, a := m.Queue(4), m.Available(4); !slices.Equal(q, []string{"small2"}) || a != 0 {
		t.Fatalf("after the grants: queue %v, available %d, want [small2] and 0", q, a)
	}
	if r, ev := semMust(t)(m.Attempt(5, "big", 3, false, true)); r != (SemAttempt{Status: Granted}) || !reflect.DeepEqual(ev, SemEvents{}) {
		t.Fatalf("big learns of its grant from its attempt: %+v %+v", r, ev)
	}
	if got, _ := m.Heartbeat(5, "small1"); got != BeatGranted {
		t.Fatalf("small1 learns of its grant from its heartbeat: %v, want granted", got)
	}
	if got := m.Granted(5); got != nil {
		t.Fatalf("grant records left after both were consumed: %v", got)
	}
}

func TestSemReductionOfTotalRejectsHeadAskingForMore(t *testing.T) {
	m := NewSem(1000)
	m.TrySetPermits(0, 6)
	semMust(t)(m.Attempt(0, "a", 3, true, true))
	semMust(t)(m.Attempt(0, "b", 5, true, true)) // queued: 3 available
	semMust(t)(m.Attempt(0, "c", 2, true, true)) // queued behind b
	if q := m.Queue(0); !slices.Equal(q, []string{"b", "c"}) {
		t.Fatalf("queue = %v, want [b c]", q)
	}
	if ev, err := m.AddPermits(1, -4); !errors.Is(err, ErrInsufficientPermits) || !reflect.DeepEqual(ev, SemEvents{}) {
		t.Fatalf("reduction by 4 with 3 available = (%+v, %v), want ErrInsufficientPermits", ev, err)
	}
	ev, err := m.AddPermits(1, -2)
	if err != nil || !reflect.DeepEqual(ev, SemEvents{Rejected: []string{"b"}}) {
		t.Fatalf("reduction to 4 = (%+v, %v), want b rejected", ev, err)
	}
	if total, _ := m.Total(1); total != 4 || m.Available(1) != 1 || !slices.Equal(m.Queue(1), []string{"c"}) {
		t.Fatalf("after the reduction: total %d, available %d, queue %v", total, m.Available(1), m.Queue(1))
	}
	if got, _ := m.Heartbeat(2, "b"); got != BeatDropped {
		t.Fatalf("heartbeat of rejected b = %v, want dropped", got)
	}
	if _, _, err := m.Attempt(2, "b", 5, false, true); !errors.Is(err, ErrTooManyPermits) {
		t.Fatalf("rejected b attempts again: %v, want ErrTooManyPermits", err)
	}
	if ev, err := m.Release(3, 1); err != nil || !reflect.DeepEqual(ev, SemEvents{Granted: []string{"c"}}) {
		t.Fatalf("release of 1 = (%+v, %v), want c granted", ev, err)
	}
}

// With no permit available, dispatch looks at no head: one that asks for
// more than the total is rejected by the next dispatch that has permits.
func TestSemRejectionWaitsForAPermit(t *testing.T) {
	m := NewSem(1000)
	m.TrySetPermits(0, 5)
	semMust(t)(m.Attempt(0, "a", 4, true, true))
	semMust(t)(m.Attempt(0, "b", 5, true, true)) // queued: 1 available
	ev, err := m.AddPermits(1, -1)               // total 4, none available: b is not looked at
	if err != nil || !reflect.DeepEqual(ev, SemEvents{}) {
		t.Fatalf("reduction to 4 = (%+v, %v), want no event", ev, err)
	}
	if !slices.Equal(m.Queue(1), []string{"b"}) {
		t.Fatalf("queue = %v, want [b]", m.Queue(1))
	}
	ev, err = m.Release(2, 1)
	if err != nil || !reflect.DeepEqual(ev, SemEvents{Rejected: []string{"b"}}) {
		t.Fatalf("release of 1 = (%+v, %v), want b rejected", ev, err)
	}
}

// A grant record lasts until the waiter's liveness deadline at the grant,
// and its permits stay taken when it vanishes.
func TestSemGrantRecordExpiresAtWaiterDeadlineKeepingPermitsTaken(t *testing.T) {
	m := NewSem(50)
	m.TrySetPermits(0, 2)
	semMust(t)(m.Attempt(0, "a", 2, true, true))
	semMust(t)(m.Attempt(0, "b", 2, true, true)) // live until 50
	if got, _ := m.Heartbeat(30, "b"); got != BeatQueued {
		t.Fatalf("heartbeat of b = %v, want queued", got)
	}
	if ev, _ := m.Release(40, 2); !reflect.DeepEqual(ev, SemEvents{Granted: []string{"b"}}) {
		t.Fatalf("release = %+v, want b granted", ev)
	}
	if g := m.Granted(79); !slices.Equal(g, []string{"b"}) || m.Available(79) != 0 {
		t.Fatalf("at 79: grant records %v, available %d, want [b] and 0", g, m.Available(79))
	}
	if g := m.Granted(80); g != nil || m.Available(80) != 0 {
		t.Fatalf("at 80 (b's deadline): grant records %v, available %d, want none and 0: the permits stay taken", g, m.Available(80))
	}
	if got, _ := m.Heartbeat(80, "b"); got != BeatDropped {
		t.Fatalf("heartbeat after the record expired = %v, want dropped", got)
	}
	if r, _ := semMust(t)(m.Attempt(80, "b", 2, false, true)); r != (SemAttempt{Status: Dropped}) || m.Queue(80) != nil {
		t.Fatalf("b attempts after its record expired: %+v, queue %v, want dropped and nobody queued", r, m.Queue(80))
	}
	if r, _ := semMust(t)(m.Attempt(80, "b2", 2, true, true)); r != (SemAttempt{Status: Queued}) {
		t.Fatalf("b starts over as b2: %+v, want a new arrival", r)
	}
	if n, ev := m.GiveUp(81, "b2"); n != 0 || !reflect.DeepEqual(ev, SemEvents{}) {
		t.Fatalf("give-up of a queued hold = (%d, %+v), want (0, nothing)", n, ev)
	}
}

// A later attempt that asks to wait, by a hold that is not a live waiter,
// is dropped and changes nothing, whatever took the hold out of the queue:
// its death (in Redis its entry is still in the list), its give-up, or never
// having queued (a grant record that expired: see above). The caller starts
// over under a new hold id, at the tail; a later attempt that can take its
// permits at once takes them.
func TestSemLaterAttemptOfAHoldNotQueuedIsDropped(t *testing.T) {
	for _, tc := range []struct {
		name string
		out  func(t *testing.T, m *Sem) // leaves b, asking for 2, no live waiter at 60
	}{
		{"dead", func(t *testing.T, m *Sem) {
			semMust(t)(m.Attempt(0, "b", 2, true, true)) // dead at 50
		}},
		{"gave up", func(t *testing.T, m *Sem) {
			semMust(t)(m.Attempt(0, "b", 2, true, true))
			m.GiveUp(10, "b")
		}},
		{"never queued", func(t *testing.T, m *Sem) {
			if r, _ := semMust(t)(m.Attempt(0, "b", 2, true, false)); r.Status != Busy {
				t.Fatalf("b's TryAcquire: %+v, want busy", r)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewSem(50)
			m.TrySetPermits(0, 3)
			semMust(t)(m.Attempt(0, "a", 3, true, true))
			tc.out(t, m)
			semMust(t)(m.Attempt(40, "c", 1, true, true)) // live until 90
			m.Queue(60)                                   // b is dead by now, if it was queued
			before := *m
			before.queue, before.grants = slices.Clone(m.queue), maps.Clone(m.grants)
			r, ev := semMust(t)(m.Attempt(60, "b", 2, false, true))
			if r != (SemAttempt{Status: Dropped}) || !reflect.DeepEqual(ev, SemEvents{}) {
				t.Fatalf("b attempts again at 60: %+v %+v, want dropped", r, ev)
			}
			if !reflect.DeepEqual(*m, before) {
				t.Fatalf("the dropped attempt changed the model: %+v, was %+v", *m, before)
			}
			if got, _ := m.Heartbeat(60, "b"); got != BeatDropped {
				t.Fatalf("heartbeat of b = %v, want dropped", got)
			}
			if r, _ := semMust(t)(m.Attempt(60, "b2", 2, true, true)); r.Status != Queued ||
				!slices.Equal(m.Queue(60), []string{"c", "b2"}) {
				t.Fatalf("b starts over as b2: %+v, queue %v, want it queued behind c", r, m.Queue(60))
			}
			m.GiveUp(61, "b2")
			if ev, err := m.Release(61, 3); err != nil || !reflect.DeepEqual(ev, SemEvents{Granted: []string{"c"}}) {
				t.Fatalf("a's release = (%+v, %v), want c granted", ev, err)
			}
			if r, _ := semMust(t)(m.Attempt(61, "b", 2, false, true)); r.Status != Acquired {
				t.Fatalf("b attempts again with 2 permits free and nobody queued: %+v, want acquired", r)
			}
		})
	}
}

// A dead head stops blocking at its deadline; the next Attempt or Heartbeat
// dispatches, and may be granted by its own dispatch.
func TestSemDeadHeadIsSkippedByTheNextAttempt(t *testing.T) {
	m := NewSem(50)
	m.TrySetPermits(0, 3)
	semMust(t)(m.Attempt(0, "a", 2, true, true))
	semMust(t)(m.Attempt(0, "big", 3, true, true)) // never heartbeats: dead at 50
	semMust(t)(m.Attempt(10, "b", 1, true, true))  // live until 60
	if r, ev := semMust(t)(m.Attempt(49, "b", 1, false, true)); r != (SemAttempt{Status: Queued}) || !reflect.DeepEqual(ev, SemEvents{}) {
		t.Fatalf("b before big's deadline: %+v %+v", r, ev)
	}
	r, ev := semMust(t)(m.Attempt(50, "b", 1, false, true))
	if r != (SemAttempt{Status: Granted}) || !reflect.DeepEqual(ev, SemEvents{Granted: []string{"b"}}) {
		t.Fatalf("b at big's deadline: %+v %+v, want granted by its own dispatch", r, ev)
	}
	if m.Granted(50) != nil || m.Available(50) != 0 {
		t.Fatalf("grant records %v, available %d", m.Granted(50), m.Available(50))
	}
}

func TestSemPermitsMustBeSet(t *testing.T) {
	m := NewSem(50)
	if _, _, err := m.Attempt(0, "a", 1, true, true); !errors.Is(err, ErrNotSet) {
		t.Fatalf("attempt on unset permits: %v", err)
	}
	if _, err := m.Release(0, 1); !errors.Is(err, ErrNotSet) {
		t.Fatalf("release on unset permits: %v", err)
	}
	if _, err := m.AddPermits(0, -1); !errors.Is(err, ErrInsufficientPermits) {
		t.Fatalf("reduction of unset permits: %v", err)
	}
	if total, ok := m.Total(0); ok || total != 0 || m.Drain(0) != 0 || m.Queue(0) != nil {
		t.Fatal("unset permits are not empty")
	}
	if _, err := m.AddPermits(0, 0); err != nil {
		t.Fatalf("AddPermits(0): %v", err)
	}
	if total, ok := m.Total(0); !ok || total != 0 {
		t.Fatalf("AddPermits(0) sets the permits to 0: (%d, %v)", total, ok)
	}
	if m.TrySetPermits(1, 5) {
		t.Fatal("TrySetPermits after AddPermits set them")
	}
	if _, _, err := m.Attempt(1, "a", 1, true, true); !errors.Is(err, ErrTooManyPermits) {
		t.Fatalf("attempt for 1 of 0: %v", err)
	}
	m2 := NewSem(50)
	if !m2.TrySetPermits(0, 2) || m2.TrySetPermits(0, 3) {
		t.Fatal("TrySetPermits sets once")
	}
	if r, _ := semMust(t)(m2.Attempt(0, "a", 2, true, false)); r.Status != Acquired {
		t.Fatalf("acquire 2 of 2: %+v", r)
	}
	if m2.Drain(1) != 0 {
		t.Fatal("drain of none")
	}
	m2.Release(2, 2)
	if m2.Drain(3) != 2 || m2.Available(3) != 0 {
		t.Fatal("drain takes all")
	}
}

// A release of permits nobody held can leave a give-back without room: the
// available count stops at the total.
func TestSemGiveBackNeverExceedsTotal(t *testing.T) {
	m := NewSem(50)
	m.TrySetPermits(0, 2)
	semMust(t)(m.Attempt(0, "a", 2, true, true))
	semMust(t)(m.Attempt(0, "b", 2, true, true))
	m.Release(1, 2) // granted to b
	m.Release(1, 2) // nobody held these
	if n, _ := m.GiveUp(1, "b"); n != 2 || m.Available(1) != 2 {
		t.Fatalf("give-back = %d, available %d, want 2 and 2", n, m.Available(1))
	}
}

func TestSemMisusePanics(t *testing.T) {
	// a holds 1 permit, b was granted 2 (its record is live until 60), c
	// waits for 1.
	queued := func() *Sem {
		m := NewSem(50)
		m.TrySetPermits(10, 2)
		m.Attempt(10, "a", 1, true, true)
		m.Attempt(10, "b", 2, true, true)
		m.Attempt(10, "c", 1, true, true)
		m.Release(10, 1)
		return m
	}
	for _, tc := range []struct {
		name string
		want string
		call func(m *Sem)
	}{
		{"time goes backwards", "before the already observed time", func(m *Sem) { m.Heartbeat(9, "b") }},
		{"time goes backwards in a query", "before the already observed time", func(m *Sem) { m.Queue(9) }},
		{"empty hold", "empty owner", func(m *Sem) { m.Attempt(10, "", 1, true, true) }},
		{"first attempt of a queued hold", "which is queued", func(m *Sem) { m.Attempt(10, "c", 1, true, true) }},
		{"first attempt of a granted hold", "which has a grant record", func(m *Sem) { m.Attempt(10, "b", 2, true, true) }},
		{"other n than queued", "which is queued for 1 permits", func(m *Sem) { m.Attempt(10, "c", 2, false, true) }},
		{"other n than granted", "which has a grant record of 2", func(m *Sem) { m.Attempt(10, "b", 1, false, false) }},
		{"empty hold in GiveUp", "empty owner", func(m *Sem) { m.GiveUp(10, "") }},
		{"zero n", "non-positive permit count", func(m *Sem) { m.Attempt(10, "d", 0, true, true) }},
		{"zero release", "non-positive permit count", func(m *Sem) { m.Release(10, 0) }},
		{"negative set", "negative permits", func(m *Sem) { m.TrySetPermits(10, -1) }},
		{"total overflows", "overflows", func(m *Sem) { m.AddPermits(10, 1<<63-1) }},
		{"deadline overflows", "overflows", func(m *Sem) { m.Attempt(1<<63-10, "d", 2, true, true) }},
		{"zero Sem", "not made by NewSem", func(m *Sem) { (&Sem{}).Attempt(10, "c", 1, true, true) }},
		{"zero Sem query", "not made by NewSem", func(m *Sem) { (&Sem{}).Available(10) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := queued()
			before := *m
			before.queue, before.grants = slices.Clone(m.queue), maps.Clone(m.grants)
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
			NewSem(timeout)
			return "no panic"
		}()
		if !strings.Contains(msg, "non-positive waiter timeout") {
			t.Fatalf("NewSem(%d): panic = %q", timeout, msg)
		}
	}
}
