package model

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// The property tests below drive a Fair model with random operations by
// several holds at random logical times, and check each reply against a
// shadow kept in a different shape: the live waiters as a map from hold to
// arrival number, deadline and lease, so the queue order is recomputed by
// sorting arrival numbers rather than kept as a list. Every action asserts
// the property its reply proves (the failure message starts with the
// property's name); the "" check compares every query with the shadow after
// each step.
//
// Each TestFair… runs the same machine with the subset of actions that
// exercises its property most densely, so a failure names the property it
// broke.

const (
	fairWaiterTimeout = 50  // ms a waiter stays live after its latest attempt or heartbeat
	fairMaxLease      = 100 // ms; leases are drawn from [1, fairMaxLease]
	fairMaxAdvance    = 40  // ms; a time step is drawn from [0, fairMaxAdvance]
)

var fairHolds = []string{"h1", "h2", "h3", "h4", "h5"}

// fairShadowWaiter is the shadow of one live waiter.
type fairShadowWaiter struct {
	arrival  int // order of the first enqueueing attempt since the hold last queued
	lease    int64
	deadline Time
}

// fairMachine is one rapid run: the model under test and its shadow.
type fairMachine struct {
	m   *Fair
	now Time

	// Shadow of the lock at time now; holder is "" when free.
	holder    string
	count     int
	expiresAt Time

	waiters  map[string]*fairShadowWaiter // live waiters
	arrivals int                          // arrival numbers handed out

	// dead holds the holds whose waiter died (deadline passed) and that
	// have not attempted with enqueue or acquired since: they must never
	// be granted the lock.
	dead map[string]bool
}

func newFairMachine() *fairMachine {
	return &fairMachine{
		m:       NewFair(fairWaiterTimeout),
		waiters: map[string]*fairShadowWaiter{},
		dead:    map[string]bool{},
	}
}

// settle applies expiry to the shadow: a hold is gone at now >= expiresAt
// and a waiter is dead at now >= its deadline.
func (s *fairMachine) settle() {
	if s.holder != "" && s.now >= s.expiresAt {
		s.holder, s.count, s.expiresAt = "", 0, 0
	}
	for h, w := range s.waiters {
		if s.now >= w.deadline {
			delete(s.waiters, h)
			s.dead[h] = true
		}
	}
}

// order returns the live waiters by arrival.
func (s *fairMachine) order() []string {
	var holds []string
	for h := range s.waiters {
		holds = append(holds, h)
	}
	sort.Slice(holds, func(i, j int) bool { return s.waiters[holds[i]].arrival < s.waiters[holds[j]].arrival })
	return holds
}

// head returns the first live waiter by arrival, "" if none.
func (s *fairMachine) head() string {
	if o := s.order(); len(o) > 0 {
		return o[0]
	}
	return ""
}

// take makes hold the holder of a new hold expiring at expiresAt, checking
// that the grant is fair. It runs after the model's call, so it also checks
// the model's expiry of the new hold.
func (s *fairMachine) take(t *rapid.T, how, hold string, expiresAt Time) {
	t.Helper()
	if s.dead[hold] && how != "attempt" {
		t.Fatalf("dead waiters are skipped: %s granted to %s, whose waiter died", how, hold)
	}
	if head := s.head(); head != "" && head != hold {
		t.Fatalf("FIFO: %s granted the lock to %s at %d while %s is the first live waiter (queue %v)",
			how, hold, s.now, head, s.order())
	}
	delete(s.waiters, hold)
	delete(s.dead, hold)
	s.holder, s.count, s.expiresAt = hold, 1, expiresAt
	if ms, ok := s.m.RemainingLease(s.now); !ok || Time(ms) != expiresAt-s.now {
		t.Fatalf("grant lease: %s granted %s the lock at %d: RemainingLease = (%d, %v), want hold until %d",
			how, hold, s.now, ms, ok, expiresAt)
	}
}

// grant gives the lock to the first live waiter, hold, as a handoff or a
// heartbeat does: its lease is the one it asked for, counted from now, but
// runs out at its liveness deadline if that comes first.
func (s *fairMachine) grant(t *rapid.T, how, hold string) {
	t.Helper()
	w := s.waiters[hold]
	at := s.now + Time(w.lease)
	if w.deadline < at {
		at = w.deadline // the grant lease is capped by the liveness deadline
	}
	s.take(t, how, hold, at)
}

// handoff ends the shadow's hold and grants the lock to the first live
// waiter, returning it ("" if none).
func (s *fairMachine) handoff(t *rapid.T) string {
	t.Helper()
	s.holder, s.count, s.expiresAt = "", 0, 0
	head := s.head()
	if head != "" {
		s.grant(t, "handoff", head)
	}
	return head
}

// drawHold returns the holder, a live waiter or any hold, so that holder and
// waiter operations are not rare.
func (s *fairMachine) drawHold(t *rapid.T) string {
	switch rapid.IntRange(0, 2).Draw(t, "who") {
	case 0:
		if s.holder != "" {
			return s.holder
		}
	case 1:
		if o := s.order(); len(o) > 0 {
			return rapid.SampledFrom(o).Draw(t, "waiter")
		}
	}
	return rapid.SampledFrom(fairHolds).Draw(t, "hold")
}

// state is the model's whole state at now, deadlines included, for
// operations that must change nothing.
func (s *fairMachine) state() Fair {
	s.m.IsLocked(s.now) // apply expiry at now, as the operation will
	c := *s.m
	c.queue = slices.Clone(c.queue)
	return c
}

func (s *fairMachine) unchanged(t *rapid.T, property string, before Fair) {
	t.Helper()
	if after := s.state(); !reflect.DeepEqual(after, before) {
		t.Fatalf("%s: state changed from %+v to %+v", property, before, after)
	}
}

func (s *fairMachine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"advance":           s.advance,
		"advanceToDeadline": s.advanceToDeadline,
		"attempt":           s.attempt,
		"heartbeat":         s.heartbeat,
		"reenter":           s.reenter,
		"renew":             s.renew,
		"release":           s.release,
		"releaseTo":         s.releaseTo,
		"giveUp":            s.giveUp,
		"forceRelease":      s.forceRelease,
		"":                  s.check,
	}
}

func (s *fairMachine) advance(t *rapid.T) {
	s.now += Time(rapid.Int64Range(0, fairMaxAdvance).Draw(t, "dt"))
	s.settle()
}

// advanceToDeadline jumps to just before, exactly at, or just after the
// holder's expiry or a waiter's deadline, where off-by-one errors in the
// expiry and liveness rules would show.
func (s *fairMachine) advanceToDeadline(t *rapid.T) {
	var at []Time
	if s.holder != "" {
		at = append(at, s.expiresAt)
	}
	for _, h := range s.order() {
		at = append(at, s.waiters[h].deadline)
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

// attempt makes a first attempt (Attempt) of a hold that is not a live
// waiter, or a later one (AttemptAgain) of any hold: a live waiter keeps its
// place with it, any other is Dropped when it must wait.
func (s *fairMachine) attempt(t *rapid.T) {
	hold := s.drawHold(t)
	w, queued := s.waiters[hold]
	again := queued || rapid.IntRange(0, 3).Draw(t, "again") == 0
	lease := rapid.Int64Range(1, fairMaxLease).Draw(t, "lease")
	if queued {
		lease = w.lease // a hold asks for one lease in all its attempts
	}
	enqueue := rapid.IntRange(0, 3).Draw(t, "enqueue") > 0 // mostly Lock, sometimes TryLock
	newcomer := !queued && s.holder != hold
	liveWaiters := s.order()
	before := s.state()
	var got FairResult
	if again {
		got = s.m.AttemptAgain(s.now, hold, lease, enqueue)
	} else {
		got = s.m.Attempt(s.now, hold, lease, enqueue)
	}

	if got.Acquired && newcomer && len(liveWaiters) > 0 {
		t.Fatalf("no barging: newcomer %s acquired at %d while live waiters %v are queued", hold, s.now, liveWaiters)
	}
	if got.Acquired && s.holder != "" && s.holder != hold {
		t.Fatalf("mutual exclusion: %s acquired at %d while %s holds until %d", hold, s.now, s.holder, s.expiresAt)
	}

	switch {
	case s.holder == hold:
		// Adoption: the hold is reported as it is.
		if want := (FairResult{Acquired: true, Count: s.count}); got != want {
			t.Fatalf("adoption: %s attempts while holding: got %+v, want %+v", hold, got, want)
		}
		s.unchanged(t, "adoption changes nothing", before)
		return
	case s.holder == "" && (len(liveWaiters) == 0 || liveWaiters[0] == hold):
		if want := (FairResult{Acquired: true, Count: 1}); got != want {
			t.Fatalf("FIFO: %s is first in line for a free lock at %d (queue %v): got %+v, want %+v",
				hold, s.now, liveWaiters, got, want)
		}
		s.take(t, "attempt", hold, s.now+Time(lease)) // the caller is alive: no cap
		return
	}
	var granted string
	if s.holder == "" {
		// Free and kept for the live head, another hold: the attempt hands it over, whatever
		// it does next.
		granted = s.handoff(t)
		before = s.state()
	}
	if got.Granted != granted {
		t.Fatalf("attempt by %s at %d (queue %v): granted %q, want %q", hold, s.now, liveWaiters, got.Granted, granted)
	}
	switch {
	case again && enqueue && !queued:
		// A later attempt that is to keep a place it no longer has starts
		// over under a new id: this one is never queued again.
		if want := (FairResult{Dropped: true, Granted: granted}); got != want {
			t.Fatalf("dropped: later attempt by %s at %d, which is not a live waiter: got %+v, want %+v",
				hold, s.now, got, want)
		}
		s.unchanged(t, "a dropped attempt changes nothing but its hand-off", before)
	default:
		want := FairResult{Queued: queued || enqueue, Granted: granted, Remaining: int64(s.expiresAt - s.now)}
		if got != want {
			t.Fatalf("failed attempt by %s at %d (holder %q, queue %v, enqueue %v, again %v): got %+v, want %+v",
				hold, s.now, s.holder, liveWaiters, enqueue, again, got, want)
		}
		if want.Remaining < 1 {
			t.Fatalf("failed attempt: fallback wait %d ms is not positive", want.Remaining)
		}
		if !enqueue {
			s.unchanged(t, "a failed attempt without enqueue changes nothing", before)
			return
		}
		if w == nil {
			s.arrivals++
			w = &fairShadowWaiter{arrival: s.arrivals, lease: lease}
			s.waiters[hold] = w
			delete(s.dead, hold)
		}
		w.deadline = s.now + fairWaiterTimeout
	}
}

func (s *fairMachine) heartbeat(t *rapid.T) {
	hold := s.drawHold(t)
	before := s.state()
	w, live := s.waiters[hold]
	takes := live && s.holder == "" && s.head() == hold
	got := s.m.Heartbeat(s.now, hold)
	switch {
	case takes:
		// The live head of a free lock: the heartbeat refreshes its
		// deadline, then grants it the lock as a handoff would.
		if got {
			t.Fatalf("heartbeat of the head of a free lock: %s at %d reported still queued, want the lock granted", hold, s.now)
		}
		w.deadline = s.now + fairWaiterTimeout
		s.grant(t, "heartbeat", hold)
		if h, n, _ := s.m.Holder(s.now); h != hold || n != 1 {
			t.Fatalf("heartbeat of the head of a free lock: holder after %s's heartbeat at %d is (%q, %d), want (%s, 1)",
				hold, s.now, h, n, hold)
		}
	case live && !got:
		t.Fatalf("no live waiter lost: heartbeat of live waiter %s at %d (deadline %d) refused", hold, s.now, w.deadline)
	case !live && got:
		if s.dead[hold] {
			t.Fatalf("dead waiters are skipped: heartbeat revived %s at %d", hold, s.now)
		}
		t.Fatalf("heartbeat by %s, which is not waiting, reported queued", hold)
	case live:
		w.deadline = s.now + fairWaiterTimeout
	default:
		s.unchanged(t, "a refused heartbeat changes nothing", before)
	}
}

func (s *fairMachine) reenter(t *rapid.T) {
	hold := s.drawHold(t)
	lease := rapid.Int64Range(0, fairMaxLease).Draw(t, "lease")
	before := s.state()
	ok := s.m.Reenter(s.now, hold, lease)
	if ok != (hold == s.holder) {
		t.Fatalf("hold count: Reenter by %s (holder %q) = %v", hold, s.holder, ok)
	}
	if !ok {
		s.unchanged(t, "a refused re-entry changes nothing", before)
		return
	}
	s.count++
	if at := s.now + Time(lease); lease > 0 && at > s.expiresAt {
		s.expiresAt = at // a re-entry only ever extends
	}
}

func (s *fairMachine) renew(t *rapid.T) {
	hold := s.drawHold(t)
	lease := rapid.Int64Range(0, fairMaxLease).Draw(t, "lease")
	before := s.state()
	ok := s.m.Renew(s.now, hold, lease)
	if ok != (hold == s.holder) {
		t.Fatalf("renew by %s (holder %q) = %v", hold, s.holder, ok)
	}
	if !ok || lease == 0 {
		s.unchanged(t, "a refused or check-only renewal changes nothing", before)
		return
	}
	s.expiresAt = s.now + Time(lease)
}

func (s *fairMachine) release(t *rapid.T) {
	hold := s.drawHold(t)
	end := rapid.IntRange(0, 3).Draw(t, "end") == 0
	before := s.state()
	got, err := s.m.Release(s.now, hold, end)

	if hold != s.holder {
		if !errors.Is(err, ErrNotOwner) || got != (ReleaseResult{}) {
			t.Fatalf("release by a non-holder: %s (holder %q): got (%+v, %v), want ErrNotOwner", hold, s.holder, got, err)
		}
		s.unchanged(t, "release by a non-holder changes nothing", before)
		return
	}
	if err != nil {
		t.Fatalf("release by holder %s: %v", hold, err)
	}
	if !end {
		// Counted down, never below one: only a release with end ends the hold.
		if want := (ReleaseResult{Count: max(s.count-1, 1)}); got != want {
			t.Fatalf("hold count: release at count %d: got %+v, want %+v", s.count, got, want)
		}
		s.count = max(s.count-1, 1)
		return
	}
	want := ReleaseResult{Granted: s.handoff(t)}
	if got != want {
		t.Fatalf("handoff: release by %s at %d ended the hold: got %+v, want %+v (the first live waiter)", hold, s.now, got, want)
	}
}

// releaseTo ends a hold with the reentrant lock's local hand-off: a pick (a
// live waiter, with the lease it queued with; a rider, as the real lock's
// boarded pick rides too; or a hold that is neither), the over flag, and
// riders, holds that are not queued.
func (s *fairMachine) releaseTo(t *rapid.T) {
	hold := s.drawHold(t)
	var fresh []string // neither queued nor holding: may ride
	for _, h := range fairHolds {
		if _, queued := s.waiters[h]; !queued && h != hold && h != s.holder {
			fresh = append(fresh, h)
		}
	}
	fresh = rapid.Permutation(fresh).Draw(t, "fresh")
	var riders []FairRider
	for _, h := range fresh[:rapid.IntRange(0, min(2, len(fresh))).Draw(t, "riders")] {
		riders = append(riders, FairRider{Hold: h, Lease: rapid.Int64Range(1, fairMaxLease).Draw(t, "rider lease")})
	}
	pick, lease := "", int64(0)
	switch rapid.IntRange(0, 3).Draw(t, "pick") {
	case 1:
		if o := slices.DeleteFunc(s.order(), func(h string) bool { return h == hold }); len(o) > 0 {
			pick = rapid.SampledFrom(o).Draw(t, "queued pick")
			lease = s.waiters[pick].lease
		}
	case 2:
		if len(riders) > 0 {
			pick, lease = riders[0].Hold, riders[0].Lease
		}
	case 3:
		if len(fresh) > len(riders) {
			pick, lease = fresh[len(riders)], rapid.Int64Range(1, fairMaxLease).Draw(t, "pick lease")
		}
	}
	over := rapid.Bool().Draw(t, "over")
	liveWaiters := s.order()
	before := s.state()
	got, err := s.m.ReleaseTo(s.now, hold, pick, lease, over, riders...)

	if hold != s.holder {
		if !errors.Is(err, ErrNotOwner) || got != (ReleaseResult{}) {
			t.Fatalf("release by a non-holder: %s (holder %q): got (%+v, %v), want ErrNotOwner", hold, s.holder, got, err)
		}
		s.unchanged(t, "release by a non-holder changes nothing, and carries no rider", before)
		return
	}
	if err != nil {
		t.Fatalf("release by holder %s: %v", hold, err)
	}
	var want ReleaseResult
	if pick != "" && (!over || len(liveWaiters) == 0) {
		// The local hand-off passes the queue, while the streak lasts; the
		// riders wait for the next release.
		delete(s.waiters, pick)
		delete(s.dead, pick)
		s.holder, s.count, s.expiresAt = pick, 1, s.now+Time(lease)
		if ms, ok := s.m.RemainingLease(s.now); !ok || ms != lease {
			t.Fatalf("local hand-off lease: %s handed %s the lock at %d: RemainingLease = (%d, %v), want its whole %d ms",
				hold, pick, s.now, ms, ok, lease)
		}
		want = ReleaseResult{Granted: pick}
	} else {
		// Over, or no pick: the riders join the tail, and the queue is
		// served in order (take checks that no live waiter is passed).
		for _, r := range riders {
			s.arrivals++
			s.waiters[r.Hold] = &fairShadowWaiter{arrival: s.arrivals, lease: r.Lease, deadline: s.now + fairWaiterTimeout}
			delete(s.dead, r.Hold)
		}
		want = ReleaseResult{Granted: s.handoff(t)}
	}
	if got != want {
		t.Fatalf("local hand-off: release by %s at %d to %q (lease %d, over %v, riders %v, queue %v): got %+v, want %+v",
			hold, s.now, pick, lease, over, riders, liveWaiters, got, want)
	}
}

func (s *fairMachine) giveUp(t *rapid.T) {
	hold := s.drawHold(t)
	before := s.state()
	got := s.m.GiveUp(s.now, hold)

	var want GiveUpResult
	switch _, queued := s.waiters[hold]; {
	case hold == s.holder:
		want = GiveUpResult{WasHolder: true, Granted: s.handoff(t)}
	case queued:
		wasHead := s.head() == hold
		delete(s.waiters, hold)
		want = GiveUpResult{WasQueued: true}
		if wasHead && s.holder == "" {
			want.Granted = s.handoff(t)
		}
	}
	if got != want {
		t.Fatalf("give-up leaves no residue: GiveUp by %s at %d: got %+v, want %+v", hold, s.now, got, want)
	}
	if want == (GiveUpResult{}) {
		s.unchanged(t, "a give-up by a hold that is not waiting changes nothing", before)
	}
	if p := s.m.Position(s.now, hold); p != -1 {
		t.Fatalf("give-up leaves no residue: %s still at position %d", hold, p)
	}
	if h, _, _ := s.m.Holder(s.now); h == hold {
		t.Fatalf("give-up leaves no residue: %s still holds the lock", hold)
	} else if h != s.holder {
		t.Fatalf("give-up leaves no residue: after %s gave up the holder is %q, want %q", hold, h, s.holder)
	}
}

func (s *fairMachine) forceRelease(t *rapid.T) {
	if s.holder == "" {
		before := s.state()
		if held, granted := s.m.ForceRelease(s.now); held || granted != "" {
			t.Fatalf("force release of a free lock at %d: got (%v, %q)", s.now, held, granted)
		}
		s.unchanged(t, "force release of a free lock changes nothing", before)
		return
	}
	held, granted := s.m.ForceRelease(s.now)
	if want := s.handoff(t); !held || granted != want {
		t.Fatalf("handoff: force release at %d: got (%v, %q), want (true, %q)", s.now, held, granted, want)
	}
}

// check compares every query with the shadow, after every step.
func (s *fairMachine) check(t *rapid.T) {
	// Mutual exclusion: at most one hold has a positive hold count, and it
	// is the one Holder names.
	var holders []string
	for _, h := range fairHolds {
		if s.m.HoldCount(s.now, h) > 0 {
			holders = append(holders, h)
		}
	}
	if len(holders) > 1 {
		t.Fatalf("mutual exclusion: %d holds hold the lock: %v", len(holders), holders)
	}
	holder, count, ok := s.m.Holder(s.now)
	if ok != (len(holders) == 1) || (ok && holder != holders[0]) {
		t.Fatalf("mutual exclusion: Holder says (%q, %v) but holds with a count are %v", holder, ok, holders)
	}
	if holder != s.holder || count != s.count {
		t.Fatalf("holder at %d: model says (%q, %d), want (%q, %d)", s.now, holder, count, s.holder, s.count)
	}
	if s.m.IsLocked(s.now) != ok {
		t.Fatalf("IsLocked disagrees with Holder ok %v", ok)
	}
	ms, rok := s.m.RemainingLease(s.now)
	if rok != ok || (ok && ms != int64(s.expiresAt-s.now)) || (ok && ms < 1) || (!ok && ms != 0) {
		t.Fatalf("lease expiry: RemainingLease = (%d, %v) at %d, want hold until %d (held %v)", ms, rok, s.now, s.expiresAt, ok)
	}

	// FIFO: the queue is the live waiters in arrival order, and the holder
	// is never in it.
	queue, order := s.m.Queue(s.now), s.order()
	if !slices.Equal(queue, order) {
		t.Fatalf("FIFO: queue at %d is %v, want %v", s.now, queue, order)
	}
	for _, h := range fairHolds {
		if p, want := s.m.Position(s.now, h), slices.Index(order, h); p != want {
			t.Fatalf("FIFO: position of %s at %d is %d, want %d", h, s.now, p, want)
		}
	}
	if ok && slices.Contains(queue, holder) {
		t.Fatalf("holder %s is also queued: %v", holder, queue)
	}
	for h := range s.dead {
		if slices.Contains(queue, h) {
			t.Fatalf("dead waiters are skipped: %s is queued after its deadline", h)
		}
	}
}

// fairMachineWith returns a rapid property that runs the state machine with
// only the named actions (and the invariant check).
func fairMachineWith(names ...string) func(*rapid.T) {
	return func(t *rapid.T) {
		s := newFairMachine()
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

func TestFairAgreesWithShadowUnderAllOperations(t *testing.T) {
	rapid.Check(t, fairMachineWith("advance", "advanceToDeadline", "attempt", "heartbeat",
		"reenter", "renew", "release", "releaseTo", "giveUp", "forceRelease"))
}

func TestFairMutualExclusionNeverTwoHolders(t *testing.T) {
	rapid.Check(t, fairMachineWith("advance", "attempt", "heartbeat", "reenter", "release", "releaseTo", "giveUp"))
}

// The reentrant lock's release hands the lock to a waiter of its own Client
// past the queue only while its streak is not over; over, it serves the queue
// in order with its riders at the tail.
func TestFairLocalHandOffPassesTheQueueOnlyUntilOver(t *testing.T) {
	rapid.Check(t, fairMachineWith("advance", "advanceToDeadline", "attempt", "heartbeat", "releaseTo", "giveUp"))
}

func TestFairGrantsFollowEnqueueOrder(t *testing.T) {
	rapid.Check(t, fairMachineWith("advance", "advanceToDeadline", "attempt", "heartbeat", "release", "giveUp"))
}

func TestFairNewcomerNeverBargesPastLiveWaiter(t *testing.T) {
	rapid.Check(t, fairMachineWith("advance", "advanceToDeadline", "attempt", "heartbeat", "release", "forceRelease"))
}

// Without heartbeats every waiter dies at its last attempt plus the waiter
// timeout, so drops and skipped handoffs are frequent.
func TestFairDeadWaitersAreSkipped(t *testing.T) {
	rapid.Check(t, fairMachineWith("advance", "advanceToDeadline", "attempt", "release", "giveUp", "forceRelease"))
}

func TestFairGiveUpLeavesNoResidue(t *testing.T) {
	rapid.Check(t, fairMachineWith("advance", "advanceToDeadline", "attempt", "heartbeat", "release", "giveUp"))
}

func TestFairReentryCounts(t *testing.T) {
	rapid.Check(t, fairMachineWith("advance", "attempt", "reenter", "renew", "release"))
}

// TestFairHeartbeatingWaiterIsNeverLostAndAcquiresInTurn queues a waiter w
// behind a holder and some others, keeps w heartbeating while other holds
// come, queue, give up, stop heartbeating and re-enter, and makes the lock
// change hands at the end of every round (a release with handoff, or, after
// a lease ran out, an attempt by the head; a heartbeat of the head of a free
// lock also takes it). It proves that w's heartbeat is
// never refused and that w is overtaken by at most the waiters that were
// ahead of it when it queued, so it holds the lock within that many rounds
// plus one.
func TestFairHeartbeatingWaiterIsNeverLostAndAcquiresInTurn(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const w = "w"
		others := []string{"o1", "o2", "o3", "o4", "o5", "o6"}
		lease := func() int64 { return rapid.Int64Range(1, fairMaxLease).Draw(t, "lease") }
		m := NewFair(fairWaiterTimeout)
		now := Time(0)
		// attempt makes hold's first attempt, or, when it is a live waiter,
		// a later one with the lease it queued with.
		leases := map[string]int64{}
		attempt := func(hold string) FairResult {
			if slices.Contains(m.Queue(now), hold) {
				return m.AttemptAgain(now, hold, leases[hold], true)
			}
			leases[hold] = lease()
			return m.Attempt(now, hold, leases[hold], true)
		}

		if r := m.Attempt(now, "o0", lease(), true); !r.Acquired {
			t.Fatalf("first attempt on a free lock failed: %+v", r)
		}
		for _, o := range others {
			if rapid.Bool().Draw(t, "queue "+o) {
				attempt(o)
			}
		}
		if r := m.Attempt(now, w, lease(), true); !r.Queued {
			t.Fatalf("w did not queue: %+v", r)
		}
		ahead := m.Position(now, w)

		overtaken := 0 // grants to others since w queued
		granted := func(hold string) {
			if hold != "" && hold != w {
				overtaken++
			}
			if overtaken > ahead {
				t.Fatalf("no live waiter lost: %s was granted the lock, the %dth grant past w, which had %d waiters ahead",
					hold, overtaken, ahead)
			}
		}
		holds := func() bool { h, _, _ := m.Holder(now); return h == w }

		for round := 0; round <= ahead; round++ {
			for range rapid.IntRange(0, 6).Draw(t, "steps") {
				now += Time(rapid.Int64Range(0, fairWaiterTimeout-1).Draw(t, "dt"))
				if !m.Heartbeat(now, w) {
					if holds() {
						return
					}
					t.Fatalf("no live waiter lost: heartbeat of w refused at %d (queue %v)", now, m.Queue(now))
				}
				o := rapid.SampledFrom(others).Draw(t, "other")
				switch rapid.IntRange(0, 3).Draw(t, "activity") {
				case 0: // comes or retries; may take a free lock it is first in line for
					before, _, _ := m.Holder(now)
					if r := attempt(o); r.Acquired && before != o {
						granted(o)
					}
				case 1: // the head of a free lock takes it with its heartbeat
					before, _, _ := m.Holder(now)
					if !m.Heartbeat(now, o) {
						if h, _, _ := m.Holder(now); h == o && before != o {
							granted(o)
						}
					}
				case 2:
					granted(m.GiveUp(now, o).Granted)
				case 3:
					if h, _, ok := m.Holder(now); ok {
						m.Reenter(now, h, 0)
					}
				}
				if holds() {
					return
				}
			}
			// The lock changes hands.
			if h, _, ok := m.Holder(now); ok {
				r, err := m.Release(now, h, true)
				if err != nil {
					t.Fatalf("release by holder %s: %v", h, err)
				}
				granted(r.Granted)
			} else {
				head := m.Queue(now)[0] // w at least is queued
				if r := attempt(head); !r.Acquired {
					t.Fatalf("FIFO: head %s could not take the free lock at %d: %+v", head, now, r)
				}
				granted(head)
			}
			if holds() {
				return
			}
		}
		t.Fatalf("no live waiter lost: w not holding after %d rounds with %d waiters ahead (queue %v)",
			ahead+1, ahead, m.Queue(now))
	})
}

// Example-based tests of the edges.

func TestFairWaiterIsDeadExactlyAtDeadline(t *testing.T) {
	m := NewFair(50)
	m.Attempt(0, "a", 100, true)
	if r := m.Attempt(0, "b", 10, true); r != (FairResult{Queued: true, Remaining: 100}) {
		t.Fatalf("b queues behind a: %+v", r)
	}
	if p := m.Position(49, "b"); p != 0 {
		t.Fatalf("one ms before its deadline b is at position %d, want 0", p)
	}
	if p := m.Position(50, "b"); p != -1 {
		t.Fatalf("at its deadline b is at position %d, want -1 (dead)", p)
	}
	if m.Heartbeat(50, "b") {
		t.Fatal("a heartbeat at the deadline revived a dead waiter")
	}
	if r, err := m.Release(50, "a", true); err != nil || r != (ReleaseResult{}) {
		t.Fatalf("release with only a dead waiter = (%+v, %v), want no handoff", r, err)
	}
}

func TestFairHeartbeatOneMillisecondBeforeDeadlineKeepsWaiter(t *testing.T) {
	m := NewFair(50)
	m.Attempt(0, "a", 1000, true)
	m.Attempt(0, "b", 10, true)
	if !m.Heartbeat(49, "b") {
		t.Fatal("heartbeat before the deadline refused")
	}
	if p := m.Position(98, "b"); p != 0 {
		t.Fatalf("after a heartbeat at 49 b must live until 99: position %d at 98", p)
	}
	if p := m.Position(99, "b"); p != -1 {
		t.Fatalf("b alive at its new deadline: position %d", p)
	}
}

func TestFairHandoffSkipsWaiterWhoseDeadlinePassesAtReleaseInstant(t *testing.T) {
	m := NewFair(50)
	m.Attempt(0, "a", 1000, true)
	m.Attempt(0, "b", 10, true)  // dead at 50
	m.Attempt(10, "c", 20, true) // dead at 60
	r, err := m.Release(50, "a", true)
	if err != nil || r != (ReleaseResult{Granted: "c"}) {
		t.Fatalf("release at b's deadline = (%+v, %v), want a handoff to c", r, err)
	}
	if h, n, _ := m.Holder(50); h != "c" || n != 1 {
		t.Fatalf("holder after handoff = (%q, %d), want (c, 1)", h, n)
	}
	if ms, _ := m.RemainingLease(50); ms != 10 {
		t.Fatalf("c's lease after handoff = %d, want 10: the 20 ms it asked for, cut at its liveness deadline 60", ms)
	}
	if r := m.AttemptAgain(51, "b", 10, true); r != (FairResult{Dropped: true}) {
		t.Fatalf("dead b attempts again: %+v, want it dropped (it starts over under a new id)", r)
	}
	if r := m.Attempt(51, "b2", 10, true); r != (FairResult{Queued: true, Remaining: 9}) {
		t.Fatalf("b starts over as b2: %+v, want a new arrival behind c's hold", r)
	}
}

// A waiter's lease is part of its queue entry: fixed by the attempt that
// queued it, kept by its later attempts, and the one a handoff grants.
func TestFairHandoffUsesTheLeaseTheWaiterQueuedWith(t *testing.T) {
	m := NewFair(50)
	m.Attempt(0, "a", 1000, true)
	m.Attempt(0, "b", 30, true)
	if r := m.AttemptAgain(5, "b", 30, true); !r.Queued {
		t.Fatalf("later attempt of b: %+v", r)
	}
	m.Release(6, "a", true)
	if ms, _ := m.RemainingLease(6); ms != 30 {
		t.Fatalf("lease of the handed-off hold = %d, want 30 (its queue entry's)", ms)
	}
}

// A later attempt that is to keep a place its hold no longer has is Dropped,
// whatever took the place (death, a give-up, a grant whose lease ran out, no
// join at all), and changes nothing: the caller starts over under a new id.
// It still takes a lock that nobody is ahead of, and a later TryLock is
// refused as any TryLock is.
func TestFairLaterAttemptOfAHoldWithoutAPlaceIsDropped(t *testing.T) {
	m := NewFair(50)
	m.Attempt(0, "a", 1000, true)
	m.Attempt(0, "dies", 10, true) // dead at 50
	m.Attempt(0, "leaves", 10, true)
	m.Attempt(0, "w", 10, true)
	m.Heartbeat(40, "w")
	m.GiveUp(40, "leaves")
	if r := m.Attempt(40, "busy", 10, false); r.Queued || r.Acquired {
		t.Fatalf("TryLock of busy: %+v", r)
	}
	for _, h := range []string{"dies", "leaves", "busy", "never"} {
		if r := m.AttemptAgain(60, h, 10, true); r != (FairResult{Dropped: true}) {
			t.Fatalf("later attempt of %s at 60: %+v, want Dropped", h, r)
		}
		if r := m.AttemptAgain(60, h, 10, false); r != (FairResult{Remaining: 940}) {
			t.Fatalf("later TryLock of %s at 60: %+v, want a plain refusal", h, r)
		}
	}
	if q := m.Queue(60); !slices.Equal(q, []string{"w"}) {
		t.Fatalf("queue = %v, want [w]: a dropped hold is not queued again", q)
	}
	// w is granted the lock, and loses it (its lease runs out) before it
	// knew: its later attempt finds another waiter ahead, and is dropped.
	m.Release(61, "a", true) // w holds until 71
	m.Attempt(62, "x", 10, true)
	if r := m.AttemptAgain(71, "w", 10, true); r != (FairResult{Dropped: true, Granted: "x"}) {
		t.Fatalf("later attempt of w after its grant ran out: %+v, want Dropped, after handing the free lock to x", r)
	}
	if h, _, _ := m.Holder(71); h != "x" {
		t.Fatalf("holder = %q, want x", h)
	}
	m.Release(71, "x", true)
	// With nobody ahead, a later attempt takes the free lock.
	if r := m.AttemptAgain(72, "dies", 10, true); r != (FairResult{Acquired: true, Count: 1}) {
		t.Fatalf("later attempt of dies on a free lock nobody waits for: %+v, want Acquired", r)
	}
}

// A grant runs out at the granted waiter's liveness deadline when that comes
// before the end of the lease it asked for, whichever way the lock is handed
// on; an Attempt that acquires gets its whole lease.
func TestFairGrantLeaseIsCappedByLivenessDeadline(t *testing.T) {
	m := NewFair(50)
	if r := m.Attempt(0, "a", 1000, true); r != (FairResult{Acquired: true, Count: 1}) {
		t.Fatalf("a on a free lock: %+v", r)
	}
	if ms, _ := m.RemainingLease(0); ms != 1000 {
		t.Fatalf("lease of an acquiring attempt = %d, want the whole 1000 ms: its caller is alive", ms)
	}
	m.Attempt(0, "b", 100, true) // dead at 50
	m.Attempt(0, "c", 100, true)
	m.Attempt(0, "d", 10, true)
	m.Heartbeat(10, "c") // dead at 60
	m.Heartbeat(10, "d") // dead at 60

	// Release: b asked for 100 ms but is live only until 50.
	if r, err := m.Release(20, "a", true); err != nil || r != (ReleaseResult{Granted: "b"}) {
		t.Fatalf("release = (%+v, %v), want a handoff to b", r, err)
	}
	if ms, _ := m.RemainingLease(20); ms != 30 {
		t.Fatalf("b's lease after a release = %d, want 30 (to its deadline 50, not 100)", ms)
	}
	// GiveUp of a holder: c asked for 100 ms, is live until 60.
	if g := m.GiveUp(20, "b"); g != (GiveUpResult{WasHolder: true, Granted: "c"}) {
		t.Fatalf("b gives up its grant: %+v, want the lock passed to c", g)
	}
	if ms, _ := m.RemainingLease(20); ms != 40 {
		t.Fatalf("c's lease after a give-up = %d, want 40 (to its deadline 60, not 100)", ms)
	}
	// ForceRelease: d asked for 10 ms, which ends before its deadline 60.
	if held, granted := m.ForceRelease(30); !held || granted != "d" {
		t.Fatalf("ForceRelease = (%v, %q), want (true, d)", held, granted)
	}
	if ms, _ := m.RemainingLease(30); ms != 10 {
		t.Fatalf("d's lease after a force release = %d, want the 10 ms it asked for (its deadline is later)", ms)
	}
	// GiveUp of the head of a free lock: f asked for 100 ms, is live until 82.
	m.Attempt(31, "e", 100, true) // dead at 81
	m.Attempt(32, "f", 100, true) // dead at 82
	if m.IsLocked(40) {
		t.Fatal("d's hold outlived its lease")
	}
	if g := m.GiveUp(45, "e"); g != (GiveUpResult{WasQueued: true, Granted: "f"}) {
		t.Fatalf("head of a free lock gives up: %+v, want the lock handed to f", g)
	}
	if ms, _ := m.RemainingLease(45); ms != 37 {
		t.Fatalf("f's lease after the head gave up = %d, want 37 (to its deadline 82, not 145)", ms)
	}
	// f never renews (it died just before its turn): the lock is stalled no
	// longer than its waiter would have stalled the queue.
	if h, _, _ := m.Holder(81); h != "f" {
		t.Fatalf("holder at 81 = %q, want f", h)
	}
	if h, _, ok := m.Holder(82); ok {
		t.Fatalf("f's grant outlived its liveness deadline: %s holds at 82", h)
	}
	// A live grantee renews its lease to its own length.
	m.Attempt(83, "g", 10, true)
	m.Attempt(83, "h", 100, true) // dead at 133
	m.Release(84, "g", true)
	if ms, _ := m.RemainingLease(84); ms != 49 {
		t.Fatalf("h's lease after handoff = %d, want 49 (to its deadline 133)", ms)
	}
	if !m.Renew(85, "h", 100) {
		t.Fatal("renewal of a capped grant refused")
	}
	if ms, _ := m.RemainingLease(132); ms != 53 {
		t.Fatalf("h's renewed lease at 132 = %d, want 53 (until 185)", ms)
	}
}

// A heartbeat of the live head of a free lock takes the lock, as a release
// would have handed it over; any other heartbeat only keeps its waiter alive.
func TestFairHeartbeatOfHeadTakesAFreeLock(t *testing.T) {
	m := NewFair(50)
	m.Attempt(0, "a", 10, true) // holds until 10
	m.Attempt(0, "b", 100, true)
	m.Attempt(0, "c", 20, true)
	if !m.Heartbeat(5, "b") || !m.Heartbeat(5, "c") { // live until 55
		t.Fatal("heartbeat of a waiter on a held lock refused")
	}
	if h, _, _ := m.Holder(5); h != "a" {
		t.Fatalf("a heartbeat took a held lock: holder %q", h)
	}
	// a's lease ran out at 10: the lock is free and reserved for b.
	if !m.Heartbeat(12, "c") { // c is not the head: live until 62, nothing else
		t.Fatal("heartbeat of the second waiter of a free lock refused")
	}
	if m.IsLocked(12) || !slices.Equal(m.Queue(12), []string{"b", "c"}) {
		t.Fatalf("heartbeat of a waiter behind the head changed the lock: locked %v, queue %v", m.IsLocked(12), m.Queue(12))
	}
	if m.Heartbeat(15, "b") {
		t.Fatal("heartbeat of the head of a free lock reported it still queued")
	}
	if h, n, ok := m.Holder(15); h != "b" || n != 1 || !ok {
		t.Fatalf("holder after b's heartbeat = (%q, %d, %v), want (b, 1, true)", h, n, ok)
	}
	if q := m.Queue(15); !slices.Equal(q, []string{"c"}) {
		t.Fatalf("queue after b took the lock = %v, want [c]", q)
	}
	if ms, _ := m.RemainingLease(15); ms != 50 {
		t.Fatalf("b's lease = %d, want 50 (to its refreshed deadline 65, not 115)", ms)
	}
	if r := m.AttemptAgain(16, "b", 100, true); r != (FairResult{Acquired: true, Count: 1}) {
		t.Fatalf("b adopts the hold its heartbeat took: %+v", r)
	}
	if m.Heartbeat(16, "b") {
		t.Fatal("heartbeat of the holder reported it queued")
	}
	if ms, _ := m.RemainingLease(16); ms != 49 {
		t.Fatalf("adoption or a heartbeat by the holder changed its lease: remaining %d, want 49", ms)
	}
	if r, err := m.Release(20, "b", true); err != nil || r != (ReleaseResult{Granted: "c"}) {
		t.Fatalf("release = (%+v, %v), want a handoff to c", r, err)
	}

	// A dead head's heartbeat takes nothing; the live head's next one does.
	m.Attempt(21, "d", 30, true) // never heartbeats: dead at 71
	m.Attempt(22, "e", 30, true)
	if !m.Heartbeat(45, "e") { // live until 95; c's lease ended at 40
		t.Fatal("heartbeat of e refused")
	}
	if m.IsLocked(45) {
		t.Fatal("heartbeat of a waiter behind the head took the free lock")
	}
	if m.Heartbeat(71, "d") || m.IsLocked(71) {
		t.Fatal("heartbeat of a dead head revived it or took the lock")
	}
	if m.Heartbeat(72, "e") {
		t.Fatal("heartbeat of the new head of a free lock reported it still queued")
	}
	if h, _, _ := m.Holder(72); h != "e" {
		t.Fatalf("holder after e's heartbeat = %q, want e", h)
	}
	if ms, _ := m.RemainingLease(72); ms != 30 {
		t.Fatalf("e's lease = %d, want the 30 ms it asked for (its deadline 122 is later)", ms)
	}
	if q := m.Queue(72); len(q) != 0 {
		t.Fatalf("queue = %v, want empty", q)
	}
}

func TestFairExpiredHoldGrantsNobodyButReservesLockForHead(t *testing.T) {
	m := NewFair(50)
	m.Attempt(0, "a", 10, true)
	m.Attempt(0, "b", 10, true) // dead at 50
	if h, _, ok := m.Holder(10); ok {
		t.Fatalf("expired hold still held by %s", h)
	}
	if q := m.Queue(10); !slices.Equal(q, []string{"b"}) {
		t.Fatalf("queue after expiry = %v: nobody is granted automatically", q)
	}
	if _, err := m.Release(10, "a", false); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("release of an expired hold: %v, want ErrNotOwner", err)
	}
	if m.IsLocked(10) {
		t.Fatal("release of an expired hold handed the lock off")
	}
	if r := m.AttemptAgain(20, "b", 10, true); r != (FairResult{Acquired: true, Count: 1}) {
		t.Fatalf("head takes the free lock: %+v", r)
	}
	if q := m.Queue(20); len(q) != 0 {
		t.Fatalf("b still queued after acquiring: %v", q)
	}
}

// A newcomer's attempt on a free lock kept for the live head hands it to the head, as a
// release would have, and is refused: it never takes the lock past the head, and the head,
// whose Client no longer waits for it (a failover brought it back), can pass it on at once.
func TestFairAttemptOnALockKeptForTheHeadHandsItOver(t *testing.T) {
	m := NewFair(50)
	m.Attempt(0, "a", 10, true)
	m.Attempt(0, "b", 30, true) // dead at 50
	if r := m.Attempt(10, "c", 10, false); r != (FairResult{Remaining: 30, Granted: "b"}) {
		t.Fatalf("newcomer on a free lock reserved for b: %+v, want a refusal after handing the lock to b", r)
	}
	if h, _, _ := m.Holder(10); h != "b" {
		t.Fatalf("holder = %q, want b", h)
	}
	if r := m.Attempt(11, "d", 10, true); r != (FairResult{Queued: true, Remaining: 29}) {
		t.Fatalf("the next newcomer: %+v, want it queued behind b's hold", r)
	}
	// A head whose grant would outlive its liveness deadline holds only until that deadline.
	m = NewFair(50)
	m.Attempt(0, "a", 10, true)
	m.Attempt(0, "b", 100, true) // dead at 50
	if r := m.Attempt(20, "c", 10, true); r != (FairResult{Queued: true, Remaining: 30, Granted: "b"}) {
		t.Fatalf("newcomer on a free lock reserved for b: %+v, want b granted until its deadline", r)
	}
}

func TestFairDeadHeadLetsNewcomerIn(t *testing.T) {
	m := NewFair(50)
	m.Attempt(0, "a", 10, true)
	m.Attempt(0, "b", 10, true)
	if r := m.Attempt(50, "c", 10, false); r != (FairResult{Acquired: true, Count: 1}) {
		t.Fatalf("newcomer after the only waiter died: %+v", r)
	}
}

func TestFairAttemptAdoptsHandoffWithoutChangingIt(t *testing.T) {
	m := NewFair(50)
	m.Attempt(0, "a", 100, true)
	m.Attempt(0, "b", 30, true)
	m.Release(10, "a", true) // b holds until 40
	if m.Heartbeat(15, "b") {
		t.Fatal("heartbeat of a granted waiter reported it queued")
	}
	if r := m.AttemptAgain(20, "b", 100, true); r != (FairResult{Acquired: true, Count: 1}) {
		t.Fatalf("adoption: %+v", r)
	}
	if ms, _ := m.RemainingLease(20); ms != 20 {
		t.Fatalf("adoption changed the lease: remaining %d, want 20", ms)
	}
}

func TestFairQueuedWaiterKeepsPlaceAndTryLockChangesNothing(t *testing.T) {
	m := NewFair(50)
	m.Attempt(0, "a", 1000, true)
	m.Attempt(0, "b", 10, true)
	m.Attempt(10, "c", 10, true)
	if r := m.AttemptAgain(20, "b", 10, true); r != (FairResult{Queued: true, Remaining: 980}) || m.Position(20, "b") != 0 {
		t.Fatalf("re-attempt by a queued waiter must keep its place: %+v at position %d", r, m.Position(20, "b"))
	}
	// b lives until 70 now. A TryLock by b does not refresh that.
	if r := m.AttemptAgain(60, "b", 10, false); r != (FairResult{Queued: true, Remaining: 940}) {
		t.Fatalf("TryLock by a queued waiter: %+v", r)
	}
	if p := m.Position(70, "b"); p != -1 {
		t.Fatalf("TryLock refreshed b's deadline: position %d at 70", p)
	}
	if r := m.Attempt(70, "d", 10, false); r != (FairResult{Remaining: 930}) || m.Position(70, "d") != -1 {
		t.Fatalf("failed TryLock by a newcomer queued it: %+v", r)
	}
}

func TestFairDeadWaiterStartsOverAtTheTail(t *testing.T) {
	m := NewFair(50)
	m.Attempt(0, "a", 1000, true)
	m.Attempt(0, "b", 10, true)  // dead at 50
	m.Attempt(10, "c", 10, true) // heartbeats below
	m.Heartbeat(45, "c")
	if r := m.AttemptAgain(55, "b", 10, true); r != (FairResult{Dropped: true}) {
		t.Fatalf("dead b re-attempts: %+v, want Dropped", r)
	}
	if r := m.Attempt(55, "b2", 10, true); !r.Queued {
		t.Fatalf("b starts over as b2: %+v", r)
	}
	if q := m.Queue(55); !slices.Equal(q, []string{"c", "b2"}) {
		t.Fatalf("queue = %v, want [c b2]: a dead waiter loses its place", q)
	}
}

// The Redis queue drops dead entries only when they reach the head; a dead
// waiter behind a live head must still count as gone.
func TestFairDeadWaiterBehindLiveHeadIsGoneAtOnce(t *testing.T) {
	m := NewFair(50)
	m.Attempt(0, "a", 1000, true)
	m.Attempt(0, "b", 10, true) // heartbeats below: stays the head
	m.Attempt(0, "c", 10, true) // dead at 50, behind b
	m.Heartbeat(40, "b")
	if q := m.Queue(50); !slices.Equal(q, []string{"b"}) {
		t.Fatalf("queue at c's deadline = %v, want [b]", q)
	}
	if m.Heartbeat(50, "c") {
		t.Fatal("a heartbeat revived a dead waiter behind a live head")
	}
	if g := m.GiveUp(50, "c"); g != (GiveUpResult{}) {
		t.Fatalf("give-up by a dead waiter = %+v, want nothing", g)
	}
	m.Attempt(55, "d", 10, true)
	if r := m.AttemptAgain(56, "c", 10, true); r != (FairResult{Dropped: true}) {
		t.Fatalf("later attempt of dead c: %+v, want Dropped", r)
	}
	m.Attempt(56, "c2", 10, true)
	if q := m.Queue(56); !slices.Equal(q, []string{"b", "d", "c2"}) {
		t.Fatalf("queue = %v, want [b d c2]: c starts over as a new arrival", q)
	}
}

func TestFairGiveUpAfterHandoffPassesLockOn(t *testing.T) {
	m := NewFair(50)
	m.Attempt(0, "a", 100, true)
	m.Attempt(0, "b", 10, true)
	m.Attempt(0, "c", 20, true)
	if r, _ := m.Release(5, "a", true); r.Granted != "b" {
		t.Fatalf("handoff to b: %+v", r)
	}
	if g := m.GiveUp(5, "b"); g != (GiveUpResult{WasHolder: true, Granted: "c"}) {
		t.Fatalf("b gives up in the instant it was granted: %+v, want the lock passed to c", g)
	}
	if h, n, _ := m.Holder(5); h != "c" || n != 1 {
		t.Fatalf("holder = (%q, %d), want (c, 1)", h, n)
	}
	if g := m.GiveUp(6, "c"); g != (GiveUpResult{WasHolder: true}) {
		t.Fatalf("last holder gives up: %+v, want a free lock", g)
	}
	if m.IsLocked(6) || len(m.Queue(6)) != 0 {
		t.Fatal("residue after everyone gave up")
	}
	if g := m.GiveUp(7, "c"); g != (GiveUpResult{}) {
		t.Fatalf("give-up by a hold that is not waiting: %+v", g)
	}
}

func TestFairGiveUpFromMiddleKeepsOrder(t *testing.T) {
	m := NewFair(50)
	m.Attempt(0, "a", 100, true)
	for _, h := range []string{"b", "c", "d"} {
		m.Attempt(0, h, 10, true)
	}
	if g := m.GiveUp(1, "c"); g != (GiveUpResult{WasQueued: true}) {
		t.Fatalf("give-up from the middle: %+v", g)
	}
	if q := m.Queue(1); !slices.Equal(q, []string{"b", "d"}) {
		t.Fatalf("queue = %v, want [b d]", q)
	}
	if g := m.GiveUp(1, "b"); g != (GiveUpResult{WasQueued: true}) {
		t.Fatalf("head gives up while the lock is held: %+v, want no handoff", g)
	}
}

func TestFairHeadGivingUpOnFreeLockPassesReservation(t *testing.T) {
	m := NewFair(50)
	m.Attempt(0, "a", 10, true)
	m.Attempt(0, "b", 10, true)
	m.Attempt(0, "c", 20, true)
	// a's lease ends at 10: the lock is free and reserved for b.
	if g := m.GiveUp(15, "b"); g != (GiveUpResult{WasQueued: true, Granted: "c"}) {
		t.Fatalf("head gives up on a free lock: %+v, want the lock handed to c", g)
	}
	if ms, _ := m.RemainingLease(15); ms != 20 {
		t.Fatalf("c's lease = %d, want 20", ms)
	}
}

func TestFairReleaseCountsDownBeforeHandoff(t *testing.T) {
	m := NewFair(50)
	m.Attempt(0, "a", 100, true)
	m.Attempt(0, "b", 10, true)
	for range 2 { // the holder re-enters twice: a hold count of 3
		if !m.Reenter(1, "a", 0) {
			t.Fatal("re-entry: holder refused")
		}
	}
	if m.Reenter(1, "b", 0) {
		t.Fatal("re-entry: waiter accepted")
	}
	if n := m.HoldCount(1, "a"); n != 3 {
		t.Fatalf("HoldCount = %d, want 3", n)
	}
	if r, err := m.Release(2, "a", false); err != nil || r != (ReleaseResult{Count: 2}) {
		t.Fatalf("partial release = (%+v, %v)", r, err)
	}
	if q := m.Queue(2); !slices.Equal(q, []string{"b"}) {
		t.Fatalf("partial release handed off: queue %v", q)
	}
	if ms, _ := m.RemainingLease(2); ms != 98 {
		t.Fatalf("partial release changed the lease: %d", ms)
	}
	if r, err := m.Release(3, "a", true); err != nil || r != (ReleaseResult{Granted: "b"}) {
		t.Fatalf("release with end at count 2 = (%+v, %v), want a handoff to b", r, err)
	}
	if _, err := m.Release(3, "a", false); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("release after the hold ended: %v", err)
	}
}

// The reentrant lock's local hand-off: a release hands the lock to its pick
// past the live waiters, with the pick's whole lease, leaving the riders out;
// over, it passes nobody: the riders join the tail and the live head gets
// the lock, the pick in its turn if it is queued.
func TestFairReleaseToPicksPastTheQueueUntilOver(t *testing.T) {
	m := NewFair(50)
	m.Attempt(0, "a", 1000, true)
	m.Attempt(0, "b", 100, true) // another Client's waiter
	m.Attempt(0, "c", 100, true) // a waiter of a's Client, queued
	// Not over: a boarded waiter p (riding too) is picked past b and c.
	if r, err := m.ReleaseTo(10, "a", "p", 100, false, FairRider{"p", 100}, FairRider{"r", 100}); err != nil ||
		r != (ReleaseResult{Granted: "p"}) {
		t.Fatalf("release to p = (%+v, %v), want a hand-off to p", r, err)
	}
	if ms, _ := m.RemainingLease(10); ms != 100 {
		t.Fatalf("p's lease = %d, want its whole 100 ms (not cut at a liveness deadline)", ms)
	}
	if q := m.Queue(10); !slices.Equal(q, []string{"b", "c"}) {
		t.Fatalf("queue = %v, want [b c]: the riders wait for the next release", q)
	}
	// Not over: the queued c is picked past b and leaves the queue.
	if r, err := m.ReleaseTo(20, "p", "c", 100, false); err != nil || r != (ReleaseResult{Granted: "c"}) {
		t.Fatalf("release to c = (%+v, %v), want a hand-off to c", r, err)
	}
	if q := m.Queue(20); !slices.Equal(q, []string{"b"}) {
		t.Fatalf("queue = %v, want [b]", q)
	}
	// Over, with b queued: the riders join behind b, who gets the lock.
	if r, err := m.ReleaseTo(30, "c", "r", 100, true, FairRider{"r", 100}, FairRider{"s", 100}); err != nil ||
		r != (ReleaseResult{Granted: "b"}) {
		t.Fatalf("release over = (%+v, %v), want the lock to b", r, err)
	}
	if q := m.Queue(30); !slices.Equal(q, []string{"r", "s"}) {
		t.Fatalf("queue = %v, want [r s]: the riders joined at the tail", q)
	}
	// Over, with the pick queued at the head: served in its turn, as a grant.
	if r, err := m.ReleaseTo(40, "b", "r", 100, true); err != nil || r != (ReleaseResult{Granted: "r"}) {
		t.Fatalf("release over to the queued head = (%+v, %v), want the lock to r", r, err)
	}
	if ms, _ := m.RemainingLease(40); ms != 40 {
		t.Fatalf("r's lease = %d, want 40: a grant from the queue, cut at r's deadline 80", ms)
	}
	m.Renew(41, "r", 100) // r is alive: it renews its grant
	// Over, with nobody live queued (s died at 80): the pick is taken.
	if r, err := m.ReleaseTo(80, "r", "t", 100, true, FairRider{"t", 100}); err != nil || r != (ReleaseResult{Granted: "t"}) {
		t.Fatalf("release over with nobody queued = (%+v, %v), want the lock to t", r, err)
	}
	if q := m.Queue(80); len(q) != 0 {
		t.Fatalf("queue = %v, want empty", q)
	}
	// No pick: riders join and the head, the first rider, gets the lock.
	if r, err := m.ReleaseTo(90, "t", "", 0, false, FairRider{"u", 30}, FairRider{"v", 100}); err != nil ||
		r != (ReleaseResult{Granted: "u"}) {
		t.Fatalf("release with riders = (%+v, %v), want the lock to u", r, err)
	}
	if q := m.Queue(90); !slices.Equal(q, []string{"v"}) {
		t.Fatalf("queue = %v, want [v]", q)
	}
	// A release by a non-holder changes nothing; its riders do not join.
	if r, err := m.ReleaseTo(91, "t", "w", 100, false, FairRider{"w", 100}); !errors.Is(err, ErrNotOwner) || r != (ReleaseResult{}) {
		t.Fatalf("release by a non-holder = (%+v, %v), want ErrNotOwner", r, err)
	}
	if h, _, _ := m.Holder(91); h != "u" || !slices.Equal(m.Queue(91), []string{"v"}) {
		t.Fatalf("a refused release changed the lock: holder %q, queue %v", h, m.Queue(91))
	}
	// No pick, no riders: a plain release.
	if r, err := m.ReleaseTo(92, "u", "", 0, true); err != nil || r != (ReleaseResult{Granted: "v"}) {
		t.Fatalf("plain release = (%+v, %v), want the lock to v", r, err)
	}
}

func TestFairRenewExtendsOnlyTheHoldersLease(t *testing.T) {
	m := NewFair(50)
	m.Attempt(0, "a", 10, true)
	if m.Renew(5, "b", 100) {
		t.Fatal("renewal by a non-holder")
	}
	if !m.Renew(5, "a", 0) {
		t.Fatal("check-only renewal by the holder refused")
	}
	if !m.Renew(5, "a", 100) {
		t.Fatal("renewal by the holder refused")
	}
	if ms, _ := m.RemainingLease(50); ms != 55 {
		t.Fatalf("remaining after renewal = %d, want 55", ms)
	}
	if m.Renew(105, "a", 100) {
		t.Fatal("renewal revived an expired hold")
	}
}

func TestFairForceReleaseHandsOffToHead(t *testing.T) {
	m := NewFair(50)
	if held, granted := m.ForceRelease(0); held || granted != "" {
		t.Fatalf("ForceRelease of a free lock = (%v, %q)", held, granted)
	}
	m.Attempt(0, "a", 10, true)
	m.Reenter(0, "a", 0)
	m.Attempt(0, "b", 15, true)
	m.Attempt(0, "c", 25, true)
	if held, granted := m.ForceRelease(1); !held || granted != "b" {
		t.Fatalf("ForceRelease of a held lock = (%v, %q), want (true, b)", held, granted)
	}
	// b's lease ends at 16; the lock is free and reserved for c, and
	// forcing it changes nothing.
	if held, granted := m.ForceRelease(16); held || granted != "" {
		t.Fatalf("ForceRelease of a free lock reserved for c = (%v, %q), want (false, \"\")", held, granted)
	}
	if q := m.Queue(16); !slices.Equal(q, []string{"c"}) || m.IsLocked(16) {
		t.Fatalf("ForceRelease of a free lock changed it: queue %v, locked %v", q, m.IsLocked(16))
	}
}

func TestFairReentryExtendsButNeverShortensLease(t *testing.T) {
	m := NewFair(50)
	m.Attempt(0, "a", 100, true)
	if !m.Reenter(50, "a", 10) {
		t.Fatal("re-entry refused")
	}
	if ms, _ := m.RemainingLease(50); ms != 50 {
		t.Fatalf("a shorter re-entry lease shortened the hold: remaining %d, want 50", ms)
	}
	m.Reenter(60, "a", 100)
	if ms, _ := m.RemainingLease(60); ms != 100 {
		t.Fatalf("a longer re-entry lease did not extend the hold: remaining %d, want 100", ms)
	}
	m.Reenter(70, "a", 0)
	if n, ms := m.HoldCount(70, "a"), func() int64 { ms, _ := m.RemainingLease(70); return ms }(); n != 4 || ms != 90 {
		t.Fatalf("after re-entry with lease 0: count %d, remaining %d, want 4 and 90", n, ms)
	}
}

func TestFairQueriesOnFreeLock(t *testing.T) {
	m := NewFair(50)
	if h, n, ok := m.Holder(0); h != "" || n != 0 || ok {
		t.Fatalf("Holder = (%q, %d, %v)", h, n, ok)
	}
	if ms, ok := m.RemainingLease(0); ms != 0 || ok {
		t.Fatalf("RemainingLease = (%d, %v)", ms, ok)
	}
	if q := m.Queue(0); q != nil {
		t.Fatalf("Queue = %v", q)
	}
	if p := m.Position(0, "a"); p != -1 {
		t.Fatalf("Position = %d", p)
	}
	if m.HoldCount(0, "") != 0 || m.IsLocked(0) || m.waiterTimeout != 50 {
		t.Fatal("free lock reports a hold or the wrong waiter timeout")
	}
}

func TestFairMisusePanics(t *testing.T) {
	queued := func() *Fair {
		m := NewFair(50)
		m.Attempt(10, "a", 10, true)
		m.Attempt(10, "b", 10, true)
		return m
	}
	for _, tc := range []struct {
		name string
		want string
		call func(m *Fair)
	}{
		{"time goes backwards in an operation", "before the already observed time", func(m *Fair) { m.Heartbeat(9, "b") }},
		{"time goes backwards in a query", "before the already observed time", func(m *Fair) { m.Queue(9) }},
		{"empty hold", "empty owner", func(m *Fair) { m.Attempt(10, "", 10, true) }},
		{"empty hold in GiveUp", "empty owner", func(m *Fair) { m.GiveUp(10, "") }},
		{"zero lease", "non-positive lease", func(m *Fair) { m.Attempt(10, "c", 0, false) }},
		{"negative renew lease", "non-positive lease", func(m *Fair) { m.Renew(10, "a", -1) }},
		{"negative re-entry lease", "negative lease", func(m *Fair) { m.Reenter(10, "a", -1) }},
		{"lease overflows time", "overflows", func(m *Fair) { m.Attempt(10, "c", 1<<63-1, true) }},
		{"zero Fair", "not made by NewFair", func(m *Fair) { (&Fair{}).Attempt(10, "c", 10, true) }},
		{"zero Fair query", "not made by NewFair", func(m *Fair) { (&Fair{}).IsLocked(10) }},
		{"first attempt of a live waiter", "live waiter already", func(m *Fair) { m.Attempt(10, "b", 10, true) }},
		{"later attempt with another lease", "queued with 10 ms", func(m *Fair) { m.AttemptAgain(11, "b", 20, true) }},
		{"later attempt goes backwards", "before the already observed time", func(m *Fair) { m.AttemptAgain(9, "b", 20, true) }},
		{"pick with another lease", "queued with 10 ms", func(m *Fair) { m.ReleaseTo(10, "a", "b", 20, false) }},
		{"pick is the releaser", "to itself", func(m *Fair) { m.ReleaseTo(10, "a", "a", 10, false) }},
		{"zero pick lease", "non-positive lease", func(m *Fair) { m.ReleaseTo(10, "a", "c", 0, false) }},
		{"rider is a live waiter", "rider b", func(m *Fair) { m.ReleaseTo(10, "a", "", 0, false, FairRider{"b", 10}) }},
		{"rider is the releaser", "rider a", func(m *Fair) { m.ReleaseTo(10, "a", "", 0, false, FairRider{"a", 10}) }},
		{"rider twice", "rider c", func(m *Fair) { m.ReleaseTo(10, "a", "", 0, false, FairRider{"c", 10}, FairRider{"c", 10}) }},
		{"empty rider", "empty owner", func(m *Fair) { m.ReleaseTo(10, "a", "", 0, false, FairRider{"", 10}) }},
		{"zero rider lease", "non-positive lease", func(m *Fair) { m.ReleaseTo(10, "a", "", 0, false, FairRider{"c", 0}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := queued()
			before := *m
			before.queue = slices.Clone(m.queue)
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
			NewFair(timeout)
			return "no panic"
		}()
		if !strings.Contains(msg, "non-positive waiter timeout") {
			t.Fatalf("NewFair(%d): panic = %q", timeout, msg)
		}
	}
}
