package model

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// The property tests below drive a Reentrant model with random operations by
// several owners at random logical times, and check each reply against a
// shadow: a few fields that record, from the calls alone, who should hold the
// lock, how often, under which token and until when. Every action asserts the
// property its reply proves; the "" check compares every query with the
// shadow after each step.
//
// Each Test… runs the same machine with the subset of actions that exercises
// its property most densely, so a failure names the property it broke.

const (
	maxLease   = 100 // ms; leases are drawn from [1, maxLease]
	maxAdvance = 60  // ms; a time step is drawn from [0, maxAdvance]
)

var testOwners = []string{"alice", "bob", "carol"}

// reentrantMachine is one rapid run: the model under test and its shadow.
type reentrantMachine struct {
	m   Reentrant
	now Time

	// Shadow of the lock at time now; holder is "" when free.
	holder    string
	count     int // acquisitions minus releases since holder's hold began
	token     int64
	expiresAt Time
	issued    []int64 // every token handed out, in order
}

// settle applies lease expiry to the shadow: a hold is gone at now >= expiresAt.
func (s *reentrantMachine) settle() {
	if s.holder != "" && s.now >= s.expiresAt {
		s.free()
	}
}

func (s *reentrantMachine) free() {
	s.holder, s.count, s.token, s.expiresAt = "", 0, 0, 0
}

func (s *reentrantMachine) lastIssued() int64 {
	if len(s.issued) == 0 {
		return 0
	}
	return s.issued[len(s.issued)-1]
}

// drawOwner returns the current holder about half the time when the lock is
// held, so holder operations (re-entry, release, renew) are not rare, and any
// owner otherwise.
func (s *reentrantMachine) drawOwner(t *rapid.T) string {
	if s.holder != "" && rapid.Bool().Draw(t, "asHolder") {
		return s.holder
	}
	return rapid.SampledFrom(testOwners).Draw(t, "owner")
}

// drawToken returns the current hold's token about half the time when the
// lock is held, and otherwise any token from 0 to one past the last issued,
// so stale, current and never-issued tokens all occur.
func (s *reentrantMachine) drawToken(t *rapid.T) int64 {
	if s.holder != "" && rapid.Bool().Draw(t, "heldToken") {
		return s.token
	}
	return rapid.Int64Range(0, s.lastIssued()+1).Draw(t, "token")
}

// snapshot is everything a caller can observe about the lock at one time.
type snapshot struct {
	Holder    string
	Count     int
	Locked    bool
	Token     int64
	Remaining int64
	LastToken int64
}

func (s *reentrantMachine) snapshot() snapshot {
	holder, count, _ := s.m.Holder(s.now)
	token, _ := s.m.Token(s.now)
	remaining, _ := s.m.RemainingLease(s.now)
	return snapshot{holder, count, s.m.IsLocked(s.now), token, remaining, s.m.lastToken}
}

// unchanged fails the run if the observable state differs from before, for
// an operation that must change nothing.
func (s *reentrantMachine) unchanged(t *rapid.T, property string, before snapshot) {
	t.Helper()
	if after := s.snapshot(); after != before {
		t.Fatalf("%s: state changed from %+v to %+v", property, before, after)
	}
}

func (s *reentrantMachine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"advance":         s.advance,
		"advanceToExpiry": s.advanceToExpiry,
		"acquire":         s.acquire,
		"acquireExpect":   s.acquireExpect,
		"release":         s.release,
		"releaseAll":      s.releaseAll,
		"forceRelease":    s.forceRelease,
		"renew":           s.renew,
		"":                s.check,
	}
}

func (s *reentrantMachine) advance(t *rapid.T) {
	s.now += Time(rapid.Int64Range(0, maxAdvance).Draw(t, "dt"))
	s.settle()
}

// advanceToExpiry jumps to just before, exactly at, or just after the current
// hold's expiry, where off-by-one errors in the expiry rule would show.
func (s *reentrantMachine) advanceToExpiry(t *rapid.T) {
	if s.holder == "" {
		t.Skip("lock is free")
	}
	to := s.expiresAt + Time(rapid.IntRange(-1, 1).Draw(t, "offset"))
	if to > s.now {
		s.now = to
	}
	s.settle()
}

func (s *reentrantMachine) acquire(t *rapid.T) {
	owner := s.drawOwner(t)
	lease := rapid.Int64Range(1, maxLease).Draw(t, "lease")
	before := s.snapshot()
	got := s.m.Acquire(s.now, owner, lease)

	switch s.holder {
	case "":
		// Free, released, forced open or expired: anyone gets a new hold.
		if !got.Acquired {
			t.Fatalf("lease expiry: %s could not acquire a free lock at %d: %+v", owner, s.now, got)
		}
		if got.Token <= s.lastIssued() {
			t.Fatalf("fencing tokens increase: new hold got token %d, not above earlier token %d", got.Token, s.lastIssued())
		}
		want := AcquireResult{Acquired: true, Token: s.lastIssued() + 1, Count: 1}
		if got != want {
			t.Fatalf("acquire of a free lock: got %+v, want %+v", got, want)
		}
		s.holder, s.count, s.token = owner, 1, got.Token
		s.issued = append(s.issued, got.Token)
	case owner:
		if got.Token != s.token {
			t.Fatalf("re-entry keeps the token: got %d, want %d", got.Token, s.token)
		}
		want := AcquireResult{Acquired: true, Token: s.token, Count: s.count + 1}
		if got != want {
			t.Fatalf("hold count: re-entry got %+v, want %+v", got, want)
		}
		s.count++
	default:
		// Held by someone else and, after settle, not yet expired.
		want := AcquireResult{Remaining: int64(s.expiresAt - s.now)}
		if got != want {
			t.Fatalf("mutual exclusion: %s acquired while %s holds until %d (now %d): got %+v, want %+v",
				owner, s.holder, s.expiresAt, s.now, got, want)
		}
		s.unchanged(t, "mutual exclusion: a failed acquire changes nothing", before)
		return
	}
	// A new hold expires at now+lease; a re-entry only ever extends.
	if s.count == 1 || s.now+Time(lease) > s.expiresAt {
		s.expiresAt = s.now + Time(lease)
	}
}

func (s *reentrantMachine) acquireExpect(t *rapid.T) {
	owner := s.drawOwner(t)
	token := s.drawToken(t)
	lease := rapid.Int64Range(1, maxLease).Draw(t, "lease")
	before := s.snapshot()
	got := s.m.AcquireExpect(s.now, owner, lease, token)

	if s.holder != owner || s.token != token {
		if got != (AcquireResult{Lost: true}) {
			t.Fatalf("expected re-entry by %s with token %d (holder %q, token %d): got %+v, want Lost",
				owner, token, s.holder, s.token, got)
		}
		s.unchanged(t, "a lost expected re-entry changes nothing", before)
		return
	}
	want := AcquireResult{Acquired: true, Token: s.token, Count: s.count + 1}
	if got != want {
		t.Fatalf("re-entry keeps the token and counts: got %+v, want %+v", got, want)
	}
	s.count++
	if s.now+Time(lease) > s.expiresAt {
		s.expiresAt = s.now + Time(lease)
	}
}

func (s *reentrantMachine) release(t *rapid.T) {
	owner := s.drawOwner(t)
	before := s.snapshot()
	left, err := s.m.Release(s.now, owner)

	if s.holder != owner {
		if !errors.Is(err, ErrNotOwner) || left != 0 {
			t.Fatalf("release by a non-holder changes nothing: %s is not the holder %q: got (%d, %v), want (0, ErrNotOwner)", owner, s.holder, left, err)
		}
		s.unchanged(t, "release by a non-holder changes nothing", before)
		return
	}
	if err != nil || left != s.count-1 {
		t.Fatalf("hold count: release by %s at count %d: got (%d, %v), want (%d, nil)", owner, s.count, left, err, s.count-1)
	}
	s.count--
	if s.count == 0 {
		s.free()
	}
}

func (s *reentrantMachine) releaseAll(t *rapid.T) {
	owner := s.drawOwner(t)
	before := s.snapshot()
	dropped, err := s.m.ReleaseAll(s.now, owner)

	if s.holder != owner {
		if !errors.Is(err, ErrNotOwner) || dropped != 0 {
			t.Fatalf("release by a non-holder changes nothing: ReleaseAll by %s, not the holder %q: got (%d, %v), want (0, ErrNotOwner)", owner, s.holder, dropped, err)
		}
		s.unchanged(t, "release-all by a non-holder changes nothing", before)
		return
	}
	if err != nil || dropped != s.count {
		t.Fatalf("release-all frees regardless of count: %s at count %d: got (%d, %v), want (%d, nil)", owner, s.count, dropped, err, s.count)
	}
	if s.m.IsLocked(s.now) || s.m.HoldCount(s.now, owner) != 0 {
		t.Fatalf("release-all frees regardless of count: still locked after dropping count %d", dropped)
	}
	s.free()
}

func (s *reentrantMachine) forceRelease(t *rapid.T) {
	wasHeld := s.m.ForceRelease(s.now)
	if wasHeld != (s.holder != "") {
		t.Fatalf("force release: reported held=%v, but holder is %q", wasHeld, s.holder)
	}
	if s.m.IsLocked(s.now) {
		t.Fatalf("force release: lock still held")
	}
	s.free()
}

func (s *reentrantMachine) renew(t *rapid.T) {
	owner := s.drawOwner(t)
	token := s.drawToken(t)
	lease := rapid.Int64Range(0, maxLease).Draw(t, "lease")
	before := s.snapshot()
	ok := s.m.Renew(s.now, owner, token, lease)

	if s.holder != owner || s.token != token {
		if ok {
			t.Fatalf("renew with the wrong owner or token: %s/%d renewed the hold of %q/%d", owner, token, s.holder, s.token)
		}
		s.unchanged(t, "renew with the wrong owner or token changes nothing", before)
		return
	}
	if !ok {
		t.Fatalf("renew by holder %s with its token %d refused", owner, token)
	}
	if lease == 0 {
		s.unchanged(t, "renew with lease 0 only checks", before)
		return
	}
	s.expiresAt = s.now + Time(lease)
}

// check compares every query with the shadow, after every step.
func (s *reentrantMachine) check(t *rapid.T) {
	// Mutual exclusion: at most one owner has a positive hold count, and it
	// is the one Holder names.
	var holders []string
	for _, o := range testOwners {
		if s.m.HoldCount(s.now, o) > 0 {
			holders = append(holders, o)
		}
	}
	if len(holders) > 1 {
		t.Fatalf("mutual exclusion: %d owners hold the lock: %v", len(holders), holders)
	}
	holder, count, ok := s.m.Holder(s.now)
	if ok != (len(holders) == 1) || (ok && holder != holders[0]) {
		t.Fatalf("mutual exclusion: Holder says (%q, %v) but owners with a hold count are %v", holder, ok, holders)
	}
	if holder != s.holder {
		t.Fatalf("holder at %d: model says %q, want %q", s.now, holder, s.holder)
	}
	if locked := s.m.IsLocked(s.now); locked != ok {
		t.Fatalf("IsLocked %v disagrees with Holder ok %v", locked, ok)
	}

	// Hold count: acquisitions minus releases of the current hold.
	if count != s.count || s.m.HoldCount(s.now, s.holder) != s.count {
		t.Fatalf("hold count of %q: Holder says %d, HoldCount says %d, want %d",
			s.holder, count, s.m.HoldCount(s.now, s.holder), s.count)
	}

	// Lease: held exactly while now < expiresAt.
	remaining, rok := s.m.RemainingLease(s.now)
	switch {
	case rok != ok:
		t.Fatalf("lease expiry: RemainingLease ok=%v but locked=%v", rok, ok)
	case ok && remaining != int64(s.expiresAt-s.now):
		t.Fatalf("lease expiry: remaining lease %d ms at %d, want %d", remaining, s.now, s.expiresAt-s.now)
	case ok && remaining < 1:
		t.Fatalf("lease expiry: held with remaining lease %d ms", remaining)
	case !ok && remaining != 0:
		t.Fatalf("lease expiry: free lock reports remaining lease %d", remaining)
	}

	// Fencing token of the current hold; tokens issued in strictly
	// increasing order.
	token, tok := s.m.Token(s.now)
	if tok != ok || token != s.token {
		t.Fatalf("token: got (%d, %v), want (%d, %v)", token, tok, s.token, ok)
	}
	if last := s.m.lastToken; last != s.lastIssued() {
		t.Fatalf("fencing tokens: LastToken %d, want %d", last, s.lastIssued())
	}
	for i := 1; i < len(s.issued); i++ {
		if s.issued[i] <= s.issued[i-1] {
			t.Fatalf("fencing tokens strictly increase: issued %v", s.issued)
		}
	}
}

// machine returns a rapid property that runs the state machine with only the
// named actions (and the invariant check).
func machine(names ...string) func(*rapid.T) {
	return func(t *rapid.T) {
		s := &reentrantMachine{}
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

func TestReentrantAgreesWithShadowUnderAllOperations(t *testing.T) {
	rapid.Check(t, machine("advance", "advanceToExpiry", "acquire", "acquireExpect",
		"release", "releaseAll", "forceRelease", "renew"))
}

func TestMutualExclusionNeverTwoHolders(t *testing.T) {
	rapid.Check(t, machine("advance", "acquire", "acquireExpect", "release"))
}

func TestHoldCountIsAcquisitionsMinusReleases(t *testing.T) {
	rapid.Check(t, machine("advance", "acquire", "acquireExpect", "release"))
}

func TestLeaseExpiryFreesLockAtDeadlineNotBefore(t *testing.T) {
	rapid.Check(t, machine("advance", "advanceToExpiry", "acquire", "renew"))
}

func TestFencingTokensIncreaseAcrossHoldsAndReentryKeepsToken(t *testing.T) {
	rapid.Check(t, machine("advance", "advanceToExpiry", "acquire", "acquireExpect",
		"release", "releaseAll", "forceRelease"))
}

func TestReleaseByNonHolderChangesNothing(t *testing.T) {
	rapid.Check(t, machine("advance", "advanceToExpiry", "acquire", "release", "releaseAll"))
}

func TestReleaseAllFreesRegardlessOfCount(t *testing.T) {
	rapid.Check(t, machine("advance", "acquire", "release", "releaseAll"))
}

func TestRenewWithWrongTokenChangesNothing(t *testing.T) {
	rapid.Check(t, machine("advance", "advanceToExpiry", "acquire", "renew", "releaseAll", "forceRelease"))
}

// Example-based tests of the edges.

func TestExpiryIsExactlyAtDeadline(t *testing.T) {
	var m Reentrant
	if r := m.Acquire(0, "a", 100); !r.Acquired || r.Token != 1 {
		t.Fatalf("first acquire: %+v", r)
	}
	if r := m.Acquire(99, "b", 10); r != (AcquireResult{Remaining: 1}) {
		t.Fatalf("one ms before expiry another owner must fail with 1 ms remaining: %+v", r)
	}
	if ms, ok := m.RemainingLease(99); !ok || ms != 1 {
		t.Fatalf("RemainingLease at 99 = (%d, %v), want (1, true)", ms, ok)
	}
	if m.IsLocked(100) {
		t.Fatal("lock still held at now == expiresAt")
	}
	if ms, ok := m.RemainingLease(100); ok || ms != 0 {
		t.Fatalf("RemainingLease at expiry = (%d, %v), want (0, false)", ms, ok)
	}
	if r := m.Acquire(100, "b", 10); r != (AcquireResult{Acquired: true, Token: 2, Count: 1}) {
		t.Fatalf("acquire at now == expiresAt: %+v", r)
	}
}

func TestExpiredHolderStartsNewHoldWithNewToken(t *testing.T) {
	var m Reentrant
	m.Acquire(0, "a", 10)
	m.Acquire(5, "a", 10) // count 2 until 15
	if r := m.Acquire(15, "a", 10); r != (AcquireResult{Acquired: true, Token: 2, Count: 1}) {
		t.Fatalf("re-acquire after own expiry must be a new hold: %+v", r)
	}
	if r := m.AcquireExpect(16, "a", 10, 1); r != (AcquireResult{Lost: true}) {
		t.Fatalf("expected re-entry with the expired hold's token: %+v", r)
	}
	if r := m.AcquireExpect(16, "a", 10, 2); r != (AcquireResult{Acquired: true, Token: 2, Count: 2}) {
		t.Fatalf("expected re-entry with the current token: %+v", r)
	}
}

func TestAcquireExpectNeverStartsANewHold(t *testing.T) {
	var m Reentrant
	if r := m.AcquireExpect(0, "a", 10, 0); r != (AcquireResult{Lost: true}) {
		t.Fatalf("expected re-entry on a free lock: %+v", r)
	}
	if m.IsLocked(0) || m.lastToken != 0 {
		t.Fatal("a lost expected re-entry took the lock or issued a token")
	}
}

func TestReentryNeverShortensLeaseAndKeepsToken(t *testing.T) {
	var m Reentrant
	m.Acquire(0, "a", 100)
	if r := m.Acquire(50, "a", 10); r != (AcquireResult{Acquired: true, Token: 1, Count: 2}) {
		t.Fatalf("re-entry: %+v", r)
	}
	if ms, _ := m.RemainingLease(50); ms != 50 {
		t.Fatalf("a shorter re-entry lease shortened the hold: remaining %d, want 50", ms)
	}
	m.Acquire(60, "a", 100)
	if ms, _ := m.RemainingLease(60); ms != 100 {
		t.Fatalf("a longer re-entry lease did not extend the hold: remaining %d, want 100", ms)
	}
	m.AcquireLease(70, "a", 5, 0)
	if ms, _ := m.RemainingLease(70); ms != 90 {
		t.Fatalf("re-entry lease 0 moved the expiry: remaining %d, want 90", ms)
	}
}

func TestPartialReleaseKeepsLease(t *testing.T) {
	var m Reentrant
	m.Acquire(0, "a", 100)
	m.Acquire(0, "a", 100)
	if left, err := m.Release(40, "a"); left != 1 || err != nil {
		t.Fatalf("Release = (%d, %v), want (1, nil)", left, err)
	}
	if ms, _ := m.RemainingLease(40); ms != 60 {
		t.Fatalf("remaining after partial release = %d, want 60 (unchanged expiry)", ms)
	}
	if left, err := m.Release(41, "a"); left != 0 || err != nil {
		t.Fatalf("last Release = (%d, %v), want (0, nil)", left, err)
	}
	if m.IsLocked(41) {
		t.Fatal("lock held after the last release")
	}
}

func TestReleaseOfExpiredHoldIsNotOwner(t *testing.T) {
	var m Reentrant
	m.Acquire(0, "a", 10)
	if _, err := m.Release(10, "a"); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("Release at expiry: err = %v, want ErrNotOwner", err)
	}
	if _, err := m.ReleaseAll(10, "a"); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("ReleaseAll at expiry: err = %v, want ErrNotOwner", err)
	}
}

func TestReleaseAllReturnsDroppedCount(t *testing.T) {
	var m Reentrant
	for range 3 {
		m.Acquire(0, "a", 10)
	}
	if _, err := m.ReleaseAll(1, "b"); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("ReleaseAll by another owner: err = %v", err)
	}
	if n, err := m.ReleaseAll(1, "a"); n != 3 || err != nil {
		t.Fatalf("ReleaseAll = (%d, %v), want (3, nil)", n, err)
	}
	if m.IsLocked(1) {
		t.Fatal("locked after ReleaseAll")
	}
}

func TestRenewChecksOwnerAndToken(t *testing.T) {
	var m Reentrant
	m.Acquire(0, "a", 10)
	if m.Renew(5, "a", 2, 100) || m.Renew(5, "b", 1, 100) {
		t.Fatal("renew with a wrong token or owner succeeded")
	}
	if !m.Renew(5, "a", 1, 0) {
		t.Fatal("check-only renew by the holder failed")
	}
	if ms, _ := m.RemainingLease(5); ms != 5 {
		t.Fatalf("check-only renew changed the lease: remaining %d, want 5", ms)
	}
	if !m.Renew(5, "a", 1, 100) {
		t.Fatal("renew by the holder failed")
	}
	if ms, _ := m.RemainingLease(5); ms != 100 {
		t.Fatalf("remaining after renew = %d, want 100", ms)
	}
	if m.Renew(105, "a", 1, 100) || m.Renew(105, "a", 1, 0) {
		t.Fatal("renew at expiry revived a lost hold")
	}
}

func TestForceReleaseFencesOffOldHolder(t *testing.T) {
	var m Reentrant
	if m.ForceRelease(0) {
		t.Fatal("ForceRelease of a free lock reported a hold")
	}
	m.Acquire(0, "a", 10)
	m.Acquire(0, "a", 10)
	if !m.ForceRelease(1) {
		t.Fatal("ForceRelease of a held lock reported no hold")
	}
	if m.Renew(1, "a", 1, 10) {
		t.Fatal("old holder renewed after a force release")
	}
	if r := m.Acquire(2, "a", 10); r.Token != 2 || r.Count != 1 {
		t.Fatalf("acquire after force release: %+v, want new hold with token 2", r)
	}
	if m.ForceRelease(12) {
		t.Fatal("ForceRelease of an expired hold reported a hold")
	}
}

func TestFailedOperationsIssueNoToken(t *testing.T) {
	var m Reentrant
	m.Acquire(0, "a", 10)
	m.Acquire(1, "b", 10)
	m.AcquireExpect(1, "b", 10, 1)
	m.Release(1, "b")
	m.Renew(1, "b", 1, 10)
	if got := m.lastToken; got != 1 {
		t.Fatalf("LastToken = %d after failed operations, want 1", got)
	}
}

func TestQueriesOnFreeLock(t *testing.T) {
	var m Reentrant
	if o, c, ok := m.Holder(0); o != "" || c != 0 || ok {
		t.Fatalf("Holder = (%q, %d, %v)", o, c, ok)
	}
	if tok, ok := m.Token(0); tok != 0 || ok {
		t.Fatalf("Token = (%d, %v)", tok, ok)
	}
	if n := m.HoldCount(0, "a"); n != 0 {
		t.Fatalf("HoldCount = %d", n)
	}
	m.Acquire(0, "a", 10)
	if n := m.HoldCount(0, "b"); n != 0 {
		t.Fatalf("HoldCount of a non-holder = %d", n)
	}
}

func TestSameInstantIsAllowed(t *testing.T) {
	var m Reentrant
	m.Acquire(7, "a", 10)
	if left, err := m.Release(7, "a"); left != 0 || err != nil {
		t.Fatalf("Release at the same time = (%d, %v)", left, err)
	}
}

func TestMisusePanics(t *testing.T) {
	held := func() *Reentrant {
		var m Reentrant
		m.Acquire(10, "a", 10)
		return &m
	}
	for _, tc := range []struct {
		name string
		want string
		call func(m *Reentrant)
	}{
		{"time goes backwards in an operation", "before the already observed time", func(m *Reentrant) { m.Release(9, "a") }},
		{"time goes backwards in a query", "before the already observed time", func(m *Reentrant) { m.IsLocked(9) }},
		{"empty owner", "empty owner", func(m *Reentrant) { m.Acquire(10, "", 10) }},
		{"zero lease", "non-positive lease", func(m *Reentrant) { m.Acquire(10, "a", 0) }},
		{"negative lease in AcquireExpect", "negative lease", func(m *Reentrant) { m.AcquireExpect(10, "a", -1, 1) }},
		{"negative renew lease", "non-positive lease", func(m *Reentrant) { m.Renew(10, "a", 1, -5) }},
		{"lease overflows time", "overflows", func(m *Reentrant) { m.Acquire(10, "a", 1<<63-1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := held()
			before := *m
			msg := func() (msg string) {
				defer func() { msg = fmt.Sprint(recover()) }()
				tc.call(m)
				return "no panic"
			}()
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("panic = %q, want one containing %q", msg, tc.want)
			}
			if *m != before {
				t.Fatalf("a rejected call changed the model: %+v, was %+v", *m, before)
			}
		})
	}
}
