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

// The property tests below drive an RW model with random operations by
// several read and write holds at random logical times, in fair and
// non-fair mode, and check each reply against a shadow that applies the
// rules of the contract (the reply, then the state change) with its own
// code. Every action asserts the property its reply proves (the failure
// message starts with the property's name); the "" check compares every
// query, and the model's hidden state, with the shadow after each step, and
// checks exclusion on the model's own state.
//
// Each TestRW… machine test runs the same machine with the subset of actions
// that exercises its property most densely; the properties that need a
// scenario (hold counts, downgrade, no writer starvation) have their own
// rapid tests, and the edges have example-based tests at the end.

const (
	rwWriterTimeout = 50  // ms a waiting writer stays live after its latest attempt or heartbeat
	rwMaxLease      = 100 // ms; leases are drawn from [1, rwMaxLease]
	rwMaxAdvance    = 40  // ms; a time step is drawn from [0, rwMaxAdvance]
)

// Read and write holds are distinct ids, as the contract requires.
var (
	rwReadHolds  = []string{"r1", "r2", "r3", "r4"}
	rwWriteHolds = []string{"w1", "w2", "w3"}
)

// rwShadowRead is the shadow of one live read hold.
type rwShadowRead struct {
	count   int
	expires Time
	under   string // the live write hold it was taken under, "" for an ordinary reader
}

// rwMachine is one rapid run: the model under test and its shadow.
type rwMachine struct {
	m    *RW
	now  Time
	fair bool

	// Shadow of the lock at time now; writer is "" when no writer holds.
	writer   string
	wcount   int
	wExpires Time

	readers        map[string]*rwShadowRead // live read holds
	waiting        map[string]Time          // live waiting writers and their deadlines
	readersWaiting bool
}

func newRWMachine(fair bool) *rwMachine {
	return &rwMachine{
		m:       NewRW(rwWriterTimeout, fair),
		fair:    fair,
		readers: map[string]*rwShadowRead{},
		waiting: map[string]Time{},
	}
}

// settle applies expiry to the shadow: a hold is gone at now >= its expiry
// and a waiting writer is dead at now >= its deadline.
func (s *rwMachine) settle() {
	if s.writer != "" && s.now >= s.wExpires {
		s.endWrite()
	}
	for h, r := range s.readers {
		if s.now >= r.expires {
			delete(s.readers, h)
		}
	}
	for h, d := range s.waiting {
		if s.now >= d {
			delete(s.waiting, h)
		}
	}
}

// endWrite ends the shadow's write hold; its downgrades become ordinary.
func (s *rwMachine) endWrite() {
	for _, r := range s.readers {
		if r.under == s.writer {
			r.under = ""
		}
	}
	s.writer, s.wcount, s.wExpires = "", 0, 0
}

// firstReadExpiry returns the earliest expiry among the live read holds.
func (s *rwMachine) firstReadExpiry() Time {
	first := Time(-1)
	for _, r := range s.readers {
		if first < 0 || r.expires < first {
			first = r.expires
		}
	}
	return first
}

// lastWaitingDeadline returns the latest deadline among the live waiting
// writers.
func (s *rwMachine) lastWaitingDeadline() Time {
	last := Time(-1)
	for _, d := range s.waiting {
		last = max(last, d)
	}
	return last
}

// drawRead returns a live reader or any read hold.
func (s *rwMachine) drawRead(t *rapid.T) string {
	if len(s.readers) > 0 && rapid.Bool().Draw(t, "asReader") {
		return rapid.SampledFrom(slices.Sorted(maps.Keys(s.readers))).Draw(t, "reader")
	}
	return rapid.SampledFrom(rwReadHolds).Draw(t, "readHold")
}

// drawWrite returns the writer, a waiting writer or any write hold, so that
// writer and waiter operations are not rare.
func (s *rwMachine) drawWrite(t *rapid.T) string {
	switch rapid.IntRange(0, 2).Draw(t, "who") {
	case 0:
		if s.writer != "" {
			return s.writer
		}
	case 1:
		if len(s.waiting) > 0 {
			return rapid.SampledFrom(slices.Sorted(maps.Keys(s.waiting))).Draw(t, "waiter")
		}
	}
	return rapid.SampledFrom(rwWriteHolds).Draw(t, "writeHold")
}

// state is the model's whole state at now, for operations that must change
// nothing.
func (s *rwMachine) state() RW {
	s.m.Writer(s.now) // apply expiry at now, as the operation will
	c := *s.m
	c.readers = maps.Clone(c.readers)
	c.waiting = maps.Clone(c.waiting)
	return c
}

func (s *rwMachine) unchanged(t *rapid.T, property string, before RW) {
	t.Helper()
	if after := s.state(); !reflect.DeepEqual(after, before) {
		t.Fatalf("%s: state changed from %+v to %+v", property, before, after)
	}
}

func (s *rwMachine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"advance":           s.advance,
		"advanceToDeadline": s.advanceToDeadline,
		"writeAttempt":      s.writeAttempt,
		"readAttempt":       s.readAttempt,
		"readReenter":       s.readReenter,
		"writeReenter":      s.writeReenter,
		"readRelease":       s.readRelease,
		"writeRelease":      s.writeRelease,
		"writerGiveUp":      s.writerGiveUp,
		"writerHeartbeat":   s.writerHeartbeat,
		"readRenew":         s.readRenew,
		"writeRenew":        s.writeRenew,
		"forceRelease":      s.forceRelease,
		"":                  s.check,
	}
}

func (s *rwMachine) advance(t *rapid.T) {
	s.now += Time(rapid.Int64Range(0, rwMaxAdvance).Draw(t, "dt"))
	s.settle()
}

// advanceToDeadline jumps to just before, exactly at, or just after an
// expiry or a waiting writer's deadline, where off-by-one errors in the
// expiry and liveness rules would show.
func (s *rwMachine) advanceToDeadline(t *rapid.T) {
	var at []Time
	if s.writer != "" {
		at = append(at, s.wExpires)
	}
	for _, h := range slices.Sorted(maps.Keys(s.readers)) {
		at = append(at, s.readers[h].expires)
	}
	for _, h := range slices.Sorted(maps.Keys(s.waiting)) {
		at = append(at, s.waiting[h])
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

func (s *rwMachine) writeAttempt(t *rapid.T) {
	hold := s.drawWrite(t)
	lease := rapid.Int64Range(1, rwMaxLease).Draw(t, "lease")
	wait := rapid.IntRange(0, 3).Draw(t, "wait") > 0 // mostly Lock, sometimes TryLock
	before := s.state()
	got := s.m.WriteAttempt(s.now, hold, lease, wait)

	if got.Acquired && len(s.readers) > 0 {
		t.Fatalf("exclusion: writer %s admitted at %d while readers %v live", hold, s.now, slices.Sorted(maps.Keys(s.readers)))
	}
	if got.Acquired && s.writer != "" {
		t.Fatalf("exclusion: writer %s admitted at %d while %s writes until %d", hold, s.now, s.writer, s.wExpires)
	}
	var want AttemptResult
	switch {
	case s.writer != "":
		want.Remaining = int64(s.wExpires - s.now)
	case len(s.readers) > 0:
		want.Remaining = int64(s.firstReadExpiry() - s.now)
	default:
		want.Acquired = true
	}
	if got != want {
		t.Fatalf("write attempt by %s at %d (writer %q, readers %v, waiting %v, fair %v): got %+v, want %+v",
			hold, s.now, s.writer, slices.Sorted(maps.Keys(s.readers)), s.waiting, s.fair, got, want)
	}
	if want.Acquired {
		s.writer, s.wcount, s.wExpires = hold, 1, s.now+Time(lease)
		delete(s.waiting, hold)
		if ms, ok := s.m.RemainingWrite(s.now); !ok || ms != lease {
			t.Fatalf("write lease: %s acquired at %d for %d ms: RemainingWrite = (%d, %v)", hold, s.now, lease, ms, ok)
		}
		return
	}
	if want.Remaining < 1 {
		t.Fatalf("failed write attempt: fallback wait %d ms is not positive", want.Remaining)
	}
	if !wait {
		s.unchanged(t, "a failed write attempt without wait changes nothing", before)
		return
	}
	s.waiting[hold] = s.now + rwWriterTimeout
}

func (s *rwMachine) readAttempt(t *rapid.T) {
	hold := s.drawRead(t)
	lease := rapid.Int64Range(1, rwMaxLease).Draw(t, "lease")
	var writerHold string
	switch rapid.IntRange(0, 3).Draw(t, "writerHold") {
	case 2:
		writerHold = s.writer // a downgrade when a writer holds
	case 3:
		writerHold = rapid.SampledFrom(rwWriteHolds).Draw(t, "claimedWriter")
	}
	wait := rapid.IntRange(0, 3).Draw(t, "wait") > 0
	before := s.state()
	got := s.m.ReadAttempt(s.now, hold, lease, writerHold, wait)

	downgrade := s.writer != "" && writerHold == s.writer
	if got.Acquired && s.writer != "" && !downgrade {
		t.Fatalf("exclusion: reader %s (writerHold %q) admitted at %d while %s writes", hold, writerHold, s.now, s.writer)
	}
	if got.Acquired && s.fair && writerHold == "" && len(s.waiting) > 0 {
		t.Fatalf("no writer starvation: reader %s admitted at %d while writers %v wait", hold, s.now, s.waiting)
	}
	var want AttemptResult
	switch {
	case s.writer != "" && !downgrade:
		want.Remaining = int64(s.wExpires - s.now)
	case s.writer != "":
		want.Acquired = true
	case s.fair && len(s.waiting) > 0:
		want.Remaining = int64(s.lastWaitingDeadline() - s.now)
	default:
		want.Acquired = true
	}
	if got != want {
		t.Fatalf("read attempt by %s (writerHold %q) at %d (writer %q, waiting %v, fair %v): got %+v, want %+v",
			hold, writerHold, s.now, s.writer, s.waiting, s.fair, got, want)
	}
	if want.Acquired {
		r := &rwShadowRead{count: 1, expires: s.now + Time(lease)}
		if downgrade {
			r.under = s.writer
		}
		s.readers[hold] = r
		return
	}
	if want.Remaining < 1 {
		t.Fatalf("failed read attempt: fallback wait %d ms is not positive", want.Remaining)
	}
	if !wait {
		s.unchanged(t, "a failed read attempt without wait changes nothing", before)
		return
	}
	s.readersWaiting = true
}

func (s *rwMachine) readReenter(t *rapid.T) {
	hold := s.drawRead(t)
	before := s.state()
	r := s.readers[hold]
	if ok := s.m.ReadReenter(s.now, hold); ok != (r != nil) {
		t.Fatalf("hold counts: ReadReenter by %s at %d = %v, live reader %v", hold, s.now, ok, r != nil)
	}
	if r == nil {
		s.unchanged(t, "a refused read re-entry changes nothing", before)
		return
	}
	r.count++
}

func (s *rwMachine) writeReenter(t *rapid.T) {
	hold := s.drawWrite(t)
	before := s.state()
	if ok := s.m.WriteReenter(s.now, hold); ok != (hold == s.writer) {
		t.Fatalf("hold counts: WriteReenter by %s at %d (writer %q) = %v", hold, s.now, s.writer, ok)
	}
	if hold != s.writer {
		s.unchanged(t, "a refused write re-entry changes nothing", before)
		return
	}
	s.wcount++
}

// drawLast mostly says last exactly when the caller's count is 1, as the
// real lock does, and sometimes says anything.
func drawLast(t *rapid.T, count int) bool {
	if rapid.IntRange(0, 3).Draw(t, "anyLast") == 0 {
		return rapid.Bool().Draw(t, "last")
	}
	return count == 1
}

func (s *rwMachine) readRelease(t *rapid.T) {
	hold := s.drawRead(t)
	r := s.readers[hold]
	var count int
	if r != nil {
		count = r.count
	}
	last := drawLast(t, count)
	before := s.state()
	got, err := s.m.ReadRelease(s.now, hold, last)

	if r == nil {
		if !errors.Is(err, ErrNotHeld) || got != (ReadReleaseResult{}) {
			t.Fatalf("release by a non-reader: %s at %d: got (%+v, %v), want ErrNotHeld", hold, s.now, got, err)
		}
		s.unchanged(t, "a release by a non-reader changes nothing", before)
		return
	}
	if err != nil {
		t.Fatalf("release by reader %s: %v", hold, err)
	}
	var want ReadReleaseResult
	if !last {
		if r.count > 1 {
			r.count--
		}
		want.Count = r.count
	} else {
		delete(s.readers, hold)
		want.WakeWriter = len(s.readers) == 0 && s.writer == "" && len(s.waiting) > 0
	}
	if got != want {
		t.Fatalf("hold counts and wakes: ReadRelease(%s, last %v) at count %d at %d (readers left %v, writer %q, waiting %v): got %+v, want %+v",
			hold, last, count, s.now, slices.Sorted(maps.Keys(s.readers)), s.writer, s.waiting, got, want)
	}
	if !last && count == 1 {
		s.unchanged(t, "a release without last at count 1 changes nothing", before)
	}
}

func (s *rwMachine) writeRelease(t *rapid.T) {
	hold := s.drawWrite(t)
	last := drawLast(t, s.wcount)
	before := s.state()
	got, err := s.m.WriteRelease(s.now, hold, last)

	if hold != s.writer {
		if !errors.Is(err, ErrNotHeld) || got != (WriteReleaseResult{}) {
			t.Fatalf("release by a non-writer: %s at %d (writer %q): got (%+v, %v), want ErrNotHeld", hold, s.now, s.writer, got, err)
		}
		s.unchanged(t, "a release by a non-writer changes nothing", before)
		return
	}
	if err != nil {
		t.Fatalf("release by writer %s: %v", hold, err)
	}
	count := s.wcount
	var want WriteReleaseResult
	if !last {
		if s.wcount > 1 {
			s.wcount--
		}
		want.Count = s.wcount
	} else {
		s.endWrite()
		want.WakeReaders = s.readersWaiting
		want.WakeWriter = len(s.readers) == 0 && len(s.waiting) > 0
		s.readersWaiting = false
	}
	if got != want {
		t.Fatalf("hold counts and wakes: WriteRelease(%s, last %v) at count %d at %d (readers %v, waiting %v): got %+v, want %+v",
			hold, last, count, s.now, slices.Sorted(maps.Keys(s.readers)), s.waiting, got, want)
	}
	if !last && count == 1 {
		s.unchanged(t, "a release without last at count 1 changes nothing", before)
	}
}

func (s *rwMachine) writerGiveUp(t *rapid.T) {
	hold := s.drawWrite(t)
	got := s.m.WriterGiveUp(s.now, hold)
	delete(s.waiting, hold)
	want := s.readersWaiting && s.writer == "" && len(s.waiting) == 0
	if want {
		s.readersWaiting = false
	}
	if got != want {
		t.Fatalf("wakes: WriterGiveUp by %s at %d (writer %q, still waiting %v): got %v, want %v",
			hold, s.now, s.writer, s.waiting, got, want)
	}
	if slices.Contains(s.m.WaitingWriters(s.now), hold) {
		t.Fatalf("give-up leaves no residue: %s still waits", hold)
	}
}

func (s *rwMachine) writerHeartbeat(t *rapid.T) {
	hold := s.drawWrite(t)
	before := s.state()
	_, live := s.waiting[hold]
	if got := s.m.WriterHeartbeat(s.now, hold); got != live {
		t.Fatalf("waiting writers: heartbeat of %s at %d = %v, live waiting writer %v", hold, s.now, got, live)
	}
	if !live {
		s.unchanged(t, "a refused heartbeat changes nothing", before)
		return
	}
	s.waiting[hold] = s.now + rwWriterTimeout
}

func (s *rwMachine) readRenew(t *rapid.T) {
	hold := s.drawRead(t)
	lease := rapid.Int64Range(0, rwMaxLease).Draw(t, "lease")
	before := s.state()
	r := s.readers[hold]
	if ok := s.m.ReadRenew(s.now, hold, lease); ok != (r != nil) {
		t.Fatalf("renew: ReadRenew by %s at %d = %v, live reader %v", hold, s.now, ok, r != nil)
	}
	if r == nil || lease == 0 {
		s.unchanged(t, "a refused or check-only read renewal changes nothing", before)
		return
	}
	r.expires = s.now + Time(lease)
}

func (s *rwMachine) writeRenew(t *rapid.T) {
	hold := s.drawWrite(t)
	lease := rapid.Int64Range(0, rwMaxLease).Draw(t, "lease")
	before := s.state()
	if ok := s.m.WriteRenew(s.now, hold, lease); ok != (hold == s.writer) {
		t.Fatalf("renew: WriteRenew by %s at %d (writer %q) = %v", hold, s.now, s.writer, ok)
	}
	if hold != s.writer || lease == 0 {
		s.unchanged(t, "a refused or check-only write renewal changes nothing", before)
		return
	}
	s.wExpires = s.now + Time(lease)
}

func (s *rwMachine) forceRelease(t *rapid.T) {
	want := s.writer != "" || len(s.readers) > 0
	if got := s.m.ForceRelease(s.now); got != want {
		t.Fatalf("force release at %d (writer %q, readers %v): got %v, want %v",
			s.now, s.writer, slices.Sorted(maps.Keys(s.readers)), got, want)
	}
	s.writer, s.wcount, s.wExpires = "", 0, 0
	clear(s.readers)
	s.readersWaiting = false
}

// check compares every query and the model's hidden state with the shadow,
// after every step, and checks exclusion on the model's own state.
func (s *rwMachine) check(t *rapid.T) {
	writer, wcount, ok := s.m.Writer(s.now) // applies expiry at now

	// Exclusion: while a writer is live every live reader is a downgrade
	// of its hold; with no writer, no reader is marked as a downgrade.
	for h, r := range s.m.readers {
		if r.downgradeOf != writer {
			t.Fatalf("exclusion: at %d reader %s is a downgrade of %q while the writer is %q", s.now, h, r.downgradeOf, writer)
		}
	}

	if writer != s.writer || wcount != s.wcount || ok != (s.writer != "") {
		t.Fatalf("writer at %d: model says (%q, %d, %v), want (%q, %d)", s.now, writer, wcount, ok, s.writer, s.wcount)
	}
	ms, rok := s.m.RemainingWrite(s.now)
	if rok != ok || (ok && (ms != int64(s.wExpires-s.now) || ms < 1)) || (!ok && ms != 0) {
		t.Fatalf("write lease: RemainingWrite = (%d, %v) at %d, want hold until %d (held %v)", ms, rok, s.now, s.wExpires, ok)
	}
	var readers []string
	if len(s.readers) > 0 {
		readers = slices.Sorted(maps.Keys(s.readers))
	}
	if got := s.m.Readers(s.now); !slices.Equal(got, readers) {
		t.Fatalf("readers at %d: model says %v, want %v", s.now, got, readers)
	}
	for _, h := range rwReadHolds {
		want := 0
		if r := s.readers[h]; r != nil {
			want = r.count
		}
		if got := s.m.ReaderCount(s.now, h); got != want {
			t.Fatalf("hold counts: ReaderCount(%s) at %d = %d, want %d", h, s.now, got, want)
		}
	}
	var waiting []string
	if len(s.waiting) > 0 {
		waiting = slices.Sorted(maps.Keys(s.waiting))
	}
	if got := s.m.WaitingWriters(s.now); !slices.Equal(got, waiting) {
		t.Fatalf("waiting writers at %d: model says %v, want %v", s.now, got, waiting)
	}
	if got := s.m.ReadersWaiting(); got != s.readersWaiting {
		t.Fatalf("wakes: readers-waiting flag at %d is %v, want %v", s.now, got, s.readersWaiting)
	}

	// Hidden state: expiries, deadlines and downgrade marks, which later
	// replies depend on.
	wantReaders := map[string]rwReader{}
	for h, r := range s.readers {
		wantReaders[h] = rwReader{count: r.count, expires: r.expires, downgradeOf: r.under}
	}
	if !maps.Equal(s.m.readers, wantReaders) {
		t.Fatalf("read holds at %d: model has %+v, want %+v", s.now, s.m.readers, wantReaders)
	}
	if !maps.Equal(s.m.waiting, s.waiting) {
		t.Fatalf("waiting writers at %d: model has %v, want %v", s.now, s.m.waiting, s.waiting)
	}
	if ok && s.m.wExpires != s.wExpires {
		t.Fatalf("write lease at %d: model expires at %d, want %d", s.now, s.m.wExpires, s.wExpires)
	}
}

// rwMode chooses the fairness of the lock in a machine run.
type rwMode int

const (
	rwEitherMode rwMode = iota // drawn per run
	rwFairMode
	rwNonFairMode
)

// rwMachineWith returns a rapid property that runs the state machine with
// only the named actions (and the invariant check).
func rwMachineWith(mode rwMode, names ...string) func(*rapid.T) {
	return func(t *rapid.T) {
		fair := mode == rwFairMode
		if mode == rwEitherMode {
			fair = rapid.Bool().Draw(t, "fair")
		}
		s := newRWMachine(fair)
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

func TestRWAgreesWithShadowUnderAllOperations(t *testing.T) {
	rapid.Check(t, rwMachineWith(rwEitherMode, "advance", "advanceToDeadline", "writeAttempt", "readAttempt",
		"readReenter", "writeReenter", "readRelease", "writeRelease", "writerGiveUp", "writerHeartbeat",
		"readRenew", "writeRenew", "forceRelease"))
}

// TestRWExclusion: a writer is admitted only with no live reader and no
// live writer, a reader that is not a downgrade only with no live writer,
// and at every step the live readers beside a live writer are its own
// downgrades.
func TestRWExclusion(t *testing.T) {
	rapid.Check(t, rwMachineWith(rwEitherMode, "advance", "advanceToDeadline", "writeAttempt", "readAttempt",
		"readRelease", "writeRelease", "readRenew", "writeRenew"))
}

// TestRWFairReadersNeverPassALiveWaitingWriter: in fair mode no reader that
// is not a downgrade is admitted while a live writer waits, whatever the
// waiting writers do (heartbeat, give up, die, acquire).
func TestRWFairReadersNeverPassALiveWaitingWriter(t *testing.T) {
	rapid.Check(t, rwMachineWith(rwFairMode, "advance", "advanceToDeadline", "writeAttempt", "readAttempt",
		"readRelease", "writeRelease", "writerGiveUp", "writerHeartbeat"))
}

// TestRWWakes: every wake in a reply is exactly the contract's, and the
// readers-waiting flag is set and cleared as it says.
func TestRWWakes(t *testing.T) {
	rapid.Check(t, rwMachineWith(rwEitherMode, "advance", "advanceToDeadline", "writeAttempt", "readAttempt",
		"readRelease", "writeRelease", "writerGiveUp", "writerHeartbeat", "forceRelease"))
}

// TestRWHoldCountsAreAcquisitionsMinusReleases re-enters and releases one
// read or write hold at random, saying last exactly when its own count of
// acquisitions minus releases is 1, and sometimes releasing without last at
// count 1 (which must change nothing). The model's count is always
// acquisitions minus releases, and the hold ends exactly at the last
// release.
func TestRWHoldCountsAreAcquisitionsMinusReleases(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const lease = 1 << 40 // nothing expires during a run
		m := NewRW(rwWriterTimeout, rapid.Bool().Draw(t, "fair"))
		now := Time(0)
		write := rapid.Bool().Draw(t, "write")
		hold := "r"
		if write {
			hold = "w"
		}
		count := func() int {
			if write {
				if h, n, _ := m.Writer(now); h == hold {
					return n
				}
				return 0
			}
			return m.ReaderCount(now, hold)
		}
		reenter := func() bool {
			if write {
				return m.WriteReenter(now, hold)
			}
			return m.ReadReenter(now, hold)
		}
		release := func(last bool) (int, error) {
			if write {
				r, err := m.WriteRelease(now, hold, last)
				return r.Count, err
			}
			r, err := m.ReadRelease(now, hold, last)
			return r.Count, err
		}

		var acquired bool
		if write {
			acquired = m.WriteAttempt(now, hold, lease, false).Acquired
		} else {
			acquired = m.ReadAttempt(now, hold, lease, "", false).Acquired
		}
		if !acquired {
			t.Fatal("first attempt on a free lock failed")
		}
		acquisitions, releases := 1, 0
		steps := rapid.IntRange(0, 40).Draw(t, "steps")
		for i := 0; acquisitions > releases; i++ {
			now += Time(rapid.Int64Range(0, 10).Draw(t, "dt"))
			held := acquisitions - releases
			op := 1 // after the drawn steps, only releases: the run ends
			if i < steps {
				op = rapid.IntRange(0, 2).Draw(t, "op")
			}
			switch op {
			case 0:
				if !reenter() {
					t.Fatalf("re-entry of a live hold at count %d refused", held)
				}
				acquisitions++
			case 1:
				n, err := release(held == 1)
				if err != nil {
					t.Fatalf("release at count %d: %v", held, err)
				}
				releases++
				if n != held-1 {
					t.Fatalf("release at count %d reported count %d, want %d", held, n, held-1)
				}
			case 2:
				if held > 1 {
					continue // an ordinary release; case 1 covers it
				}
				if n, err := release(false); err != nil || n != 1 {
					t.Fatalf("release without last at count 1 = (%d, %v), want (1, nil)", n, err)
				}
			}
			if got, want := count(), acquisitions-releases; got != want {
				t.Fatalf("count after %d acquisitions and %d releases is %d, want %d", acquisitions, releases, got, want)
			}
		}
		// The last release ended the hold: it is gone from every query and
		// refuses further releases and re-entries.
		if w, _, ok := m.Writer(now); ok {
			t.Fatalf("writer %s still holds after the last release", w)
		}
		if r := m.Readers(now); r != nil {
			t.Fatalf("readers %v still hold after the last release", r)
		}
		if _, err := release(true); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("release after the last one: %v, want ErrNotHeld", err)
		}
		if reenter() {
			t.Fatal("re-entry after the last release accepted")
		}
	})
}

// TestRWDowngradeOutlivesTheWriteHold: writer w takes read hold r under its
// write hold, in either mode and whoever waits; after w's last release r is
// a live ordinary reader, another writer's attempt fails while r lives, the
// release reports the readers-waiting flag, and r's own last release wakes a
// waiting writer.
func TestRWDowngradeOutlivesTheWriteHold(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		fair := rapid.Bool().Draw(t, "fair")
		m := NewRW(rwWriterTimeout, fair)
		now := Time(0)
		const w, r, q, w2 = "w", "r", "q", "w2"
		lease := func() int64 { return rapid.Int64Range(1, rwMaxLease).Draw(t, "lease") }

		if !m.WriteAttempt(now, w, 1000, false).Acquired {
			t.Fatal("w could not take a free lock")
		}
		reentries := rapid.IntRange(0, 3).Draw(t, "reentries")
		for range reentries {
			if !m.WriteReenter(now, w) {
				t.Fatal("w could not re-enter")
			}
		}
		readerWaits := rapid.Bool().Draw(t, "readerWaits")
		if readerWaits {
			if got := m.ReadAttempt(now, q, lease(), "", true); got != (AttemptResult{Remaining: 1000}) {
				t.Fatalf("exclusion: q's read attempt while w writes = %+v, want refused for 1000 ms", got)
			}
		}
		writerWaits := rapid.Bool().Draw(t, "writerWaits")
		if writerWaits {
			if m.WriteAttempt(now, w2, lease(), true).Acquired {
				t.Fatal("exclusion: w2 admitted while w writes")
			}
		}

		rLease := lease()
		if got := m.ReadAttempt(now, r, rLease, w, false); got != (AttemptResult{Acquired: true}) {
			t.Fatalf("downgrade: w's holder taking read hold r = %+v (fair %v, writer waits %v)", got, fair, writerWaits)
		}
		rExpires := now + Time(rLease)
		if m.readers[r].downgradeOf != w {
			t.Fatalf("downgrade: r is marked as a downgrade of %q, want %q", m.readers[r].downgradeOf, w)
		}
		if m.ReadAttempt(now, "x", lease(), w2, false).Acquired {
			t.Fatal("exclusion: a reader naming another writer hold admitted while w writes")
		}

		now += Time(rapid.Int64Range(0, min(rLease, rwWriterTimeout)-1).Draw(t, "dt")) // r and w2 still live
		for i := range reentries {
			if got, err := m.WriteRelease(now, w, false); err != nil || got.Count != reentries-i {
				t.Fatalf("w's release %d = (%+v, %v), want count %d", i, got, err, reentries-i)
			}
		}
		got, err := m.WriteRelease(now, w, true)
		if want := (WriteReleaseResult{WakeReaders: readerWaits}); err != nil || got != want {
			t.Fatalf("downgrade: w's last release = (%+v, %v), want %+v (r still reads, so no writer wake)", got, err, want)
		}
		if m.ReadersWaiting() {
			t.Fatal("wakes: the readers-waiting flag outlived the wake of the readers")
		}

		if rd := m.Readers(now); !slices.Equal(rd, []string{r}) || m.ReaderCount(now, r) != 1 {
			t.Fatalf("downgrade: after w's release readers are %v (r count %d), want [r] with count 1", rd, m.ReaderCount(now, r))
		}
		if m.readers[r].downgradeOf != "" {
			t.Fatalf("downgrade: r still marked as a downgrade of %q after w's release", m.readers[r].downgradeOf)
		}
		if got := m.WriteAttempt(now, "w3", lease(), false); got != (AttemptResult{Remaining: int64(rExpires - now)}) {
			t.Fatalf("exclusion: another writer's attempt while r reads = %+v, want refused for %d ms", got, rExpires-now)
		}

		// A new reader joins r in non-fair mode, and in fair mode unless w2
		// waits; if it joins, it leaves before r.
		joined := m.ReadAttempt(now, q, lease(), "", false).Acquired
		if want := !fair || !writerWaits; joined != want {
			t.Fatalf("fairness: q's read attempt beside the former downgrade = %v, want %v (fair %v, writer waits %v)",
				joined, want, fair, writerWaits)
		}
		if joined {
			if got, err := m.ReadRelease(now, q, true); err != nil || got != (ReadReleaseResult{}) {
				t.Fatalf("wakes: q leaving before r = (%+v, %v), want no wake", got, err)
			}
		}
		if got, err := m.ReadRelease(now, r, true); err != nil || got != (ReadReleaseResult{WakeWriter: writerWaits}) {
			t.Fatalf("wakes: r, the last reader, leaving = (%+v, %v), want WakeWriter %v", got, err, writerWaits)
		}
	})
}

// TestRWFairWaitingWriterGetsInOnceEarlierReadersLeave: in fair mode, a
// writer w that waits (and heartbeats) while readers hold sees no new
// reader admitted, whatever newcomers, the earlier readers and another
// writer do, and its next attempt succeeds as soon as the readers that held
// when it began to wait have released or expired, unless another writer got
// in first, whose release then wakes w.
func TestRWFairWaitingWriterGetsInOnceEarlierReadersLeave(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := NewRW(rwWriterTimeout, true)
		now := Time(0)
		const w, w2 = "w", "w2"
		newcomers := []string{"n1", "n2"}
		lease := func() int64 { return rapid.Int64Range(1, 3*rwMaxLease).Draw(t, "lease") } // may outlast several writer timeouts

		holding := map[string]Time{} // the earlier readers still live, and their expiries
		readersWait := false         // a newcomer's attempt with wait set the flag
		for _, r := range rwReadHolds[:rapid.IntRange(1, len(rwReadHolds)).Draw(t, "readers")] {
			l := lease()
			if !m.ReadAttempt(now, r, l, "", false).Acquired {
				t.Fatalf("reader %s refused on a lock with no writer", r)
			}
			holding[r] = now + Time(l)
		}
		if m.WriteAttempt(now, w, rwMaxLease, true).Acquired {
			t.Fatal("exclusion: w admitted while readers hold")
		}

		steps := rapid.IntRange(0, 40).Draw(t, "steps")
		for i := 0; ; i++ {
			now += Time(rapid.Int64Range(0, rwWriterTimeout-1).Draw(t, "dt"))
			maps.DeleteFunc(holding, func(_ string, expires Time) bool { return now >= expires })
			if !m.WriterHeartbeat(now, w) {
				t.Fatalf("waiting writers: w's heartbeat at %d refused", now)
			}
			var want []string
			if len(holding) > 0 {
				want = slices.Sorted(maps.Keys(holding))
			}
			if got := m.Readers(now); !slices.Equal(got, want) {
				t.Fatalf("no writer starvation: readers at %d are %v, want only the earlier ones still live, %v", now, got, want)
			}
			if len(holding) == 0 {
				break
			}
			if i >= steps { // the earlier readers release
				r := slices.Sorted(maps.Keys(holding))[0]
				delete(holding, r)
				if got, err := m.ReadRelease(now, r, true); err != nil || got.WakeWriter != (len(holding) == 0) {
					t.Fatalf("wakes: release by %s at %d = (%+v, %v), want WakeWriter %v", r, now, got, err, len(holding) == 0)
				}
				continue
			}
			earlier := rapid.SampledFrom(slices.Sorted(maps.Keys(holding))).Draw(t, "earlier")
			switch rapid.IntRange(0, 4).Draw(t, "activity") {
			case 0:
				n := rapid.SampledFrom(newcomers).Draw(t, "newcomer")
				wait := rapid.Bool().Draw(t, "wait")
				if got := m.ReadAttempt(now, n, lease(), "", wait); got.Acquired {
					t.Fatalf("no writer starvation: newcomer %s admitted at %d while w waits", n, now)
				}
				readersWait = readersWait || wait
			case 1:
				delete(holding, earlier)
				if got, err := m.ReadRelease(now, earlier, true); err != nil || got.WakeWriter != (len(holding) == 0) {
					t.Fatalf("wakes: release by %s at %d = (%+v, %v), want WakeWriter %v", earlier, now, got, err, len(holding) == 0)
				}
			case 2:
				if !m.ReadReenter(now, earlier) {
					t.Fatalf("a reader that holds could not re-enter at %d while w waits", now)
				}
			case 3:
				l := lease()
				if !m.ReadRenew(now, earlier, l) {
					t.Fatalf("a reader that holds could not renew at %d", now)
				}
				holding[earlier] = now + Time(l)
			case 4:
				if m.WriteAttempt(now, w2, lease(), false).Acquired {
					t.Fatalf("exclusion: w2 admitted at %d while readers hold", now)
				}
			}
		}

		// The earlier readers are gone. Another writer may get in first.
		if rapid.Bool().Draw(t, "w2First") {
			if !m.WriteAttempt(now, w2, rwMaxLease, false).Acquired {
				t.Fatalf("w2 refused at %d on a lock with no reader and no writer", now)
			}
			if got := m.WriteAttempt(now, w, rwMaxLease, true); got != (AttemptResult{Remaining: rwMaxLease}) {
				t.Fatalf("exclusion: w's attempt while w2 writes = %+v", got)
			}
			now += Time(rapid.Int64Range(0, rwWriterTimeout-1).Draw(t, "dt"))
			want := WriteReleaseResult{WakeReaders: readersWait, WakeWriter: true}
			if got, err := m.WriteRelease(now, w2, true); err != nil || got != want {
				t.Fatalf("wakes: w2's release while w waits = (%+v, %v), want %+v", got, err, want)
			}
		}
		if got := m.WriteAttempt(now, w, rwMaxLease, true); !got.Acquired {
			t.Fatalf("no writer starvation: w refused at %d once the earlier readers left: %+v", now, got)
		}
		if ww := m.WaitingWriters(now); ww != nil {
			t.Fatalf("w still waits after acquiring: %v", ww)
		}
	})
}

// Example-based tests of the edges.

func TestRWHoldsAndWaitersEndExactlyAtTheirDeadline(t *testing.T) {
	m := NewRW(50, false)
	m.ReadAttempt(0, "r", 100, "", false)
	if got := m.WriteAttempt(10, "w", 100, true); got != (AttemptResult{Remaining: 90}) {
		t.Fatalf("w behind r = %+v, want refused for 90 ms", got)
	}
	if got := m.WaitingWriters(59); !slices.Equal(got, []string{"w"}) {
		t.Fatalf("one ms before its deadline the waiting writers are %v", got)
	}
	if got := m.WaitingWriters(60); got != nil {
		t.Fatalf("at its deadline the waiting writers are %v, want none", got)
	}
	if m.WriterHeartbeat(60, "w") {
		t.Fatal("a heartbeat at the deadline revived a dead waiting writer")
	}
	if n := m.ReaderCount(99, "r"); n != 1 {
		t.Fatalf("one ms before its expiry r has count %d", n)
	}
	if got, err := m.ReadRelease(100, "r", true); !errors.Is(err, ErrNotHeld) || got != (ReadReleaseResult{}) {
		t.Fatalf("release of an expired read hold = (%+v, %v), want ErrNotHeld", got, err)
	}
	if !m.WriteAttempt(100, "w", 30, false).Acquired {
		t.Fatal("w refused once r expired")
	}
	if ms, ok := m.RemainingWrite(129); ms != 1 || !ok {
		t.Fatalf("RemainingWrite one ms before expiry = (%d, %v)", ms, ok)
	}
	if h, n, ok := m.Writer(130); h != "" || n != 0 || ok {
		t.Fatalf("Writer at its expiry = (%q, %d, %v)", h, n, ok)
	}
	if _, err := m.WriteRelease(130, "w", true); !errors.Is(err, ErrNotHeld) || !errors.Is(err, ErrNotOwner) {
		t.Fatalf("release of an expired write hold: %v, want ErrNotHeld (which is ErrNotOwner)", err)
	}
}

func TestRWFailedAttemptsReportRemaining(t *testing.T) {
	m := NewRW(50, true)
	m.ReadAttempt(0, "r1", 80, "", false)
	m.ReadAttempt(0, "r2", 30, "", false)
	if got := m.WriteAttempt(10, "w1", 100, true); got != (AttemptResult{Remaining: 20}) {
		t.Fatalf("writer behind readers = %+v, want the earliest read expiry, 20 ms", got)
	}
	if got := m.WriteAttempt(20, "w2", 100, true); got != (AttemptResult{Remaining: 10}) {
		t.Fatalf("second writer behind readers = %+v, want 10 ms", got)
	}
	// Fair: a reader waits for the waiting writers, until the latest
	// deadline among them (w2's, at 70).
	if got := m.ReadAttempt(25, "r3", 100, "", true); got != (AttemptResult{Remaining: 45}) {
		t.Fatalf("reader behind waiting writers = %+v, want 45 ms", got)
	}
	if !m.ReadersWaiting() {
		t.Fatal("a failed reader attempt with wait did not set the flag")
	}
	// The readers go; w1 takes the lock; readers now wait for its lease.
	if !m.WriteAttempt(80, "w1", 100, false).Acquired {
		t.Fatal("w1 refused once the readers expired")
	}
	if got := m.WaitingWriters(80); !slices.Equal(got, nil) {
		t.Fatalf("waiting writers at 80 = %v: w1 acquired and w2 died at 70", got)
	}
	if got := m.ReadAttempt(90, "r3", 100, "", false); got != (AttemptResult{Remaining: 90}) {
		t.Fatalf("reader behind the writer = %+v, want 90 ms", got)
	}
}

func TestRWNonFairReadersPassAWaitingWriter(t *testing.T) {
	for _, fair := range []bool{false, true} {
		m := NewRW(50, fair)
		m.ReadAttempt(0, "r1", 100, "", false)
		if m.WriteAttempt(0, "w", 100, true).Acquired {
			t.Fatal("w admitted beside a reader")
		}
		joined := m.ReadAttempt(10, "r2", 100, "", false).Acquired
		if joined == fair {
			t.Fatalf("fair %v: r2 admitted while w waits = %v", fair, joined)
		}
		if !fair {
			// r1 leaves, r2 still reads: no wake; r2 leaves: w is woken.
			if got, _ := m.ReadRelease(20, "r1", true); got.WakeWriter {
				t.Fatal("non-fair: writer woken while r2 still reads")
			}
			if got, _ := m.ReadRelease(30, "r2", true); !got.WakeWriter {
				t.Fatal("non-fair: last reader left without waking the waiting writer")
			}
		} else if got, _ := m.ReadRelease(30, "r1", true); !got.WakeWriter {
			t.Fatal("fair: last reader left without waking the waiting writer")
		}
		if !m.WriteAttempt(30, "w", 100, true).Acquired {
			t.Fatalf("fair %v: w refused once the readers left", fair)
		}
	}
}

func TestRWAttemptNeverReenters(t *testing.T) {
	m := NewRW(50, false)
	m.WriteAttempt(0, "w", 100, false)
	if got := m.WriteAttempt(10, "w", 100, true); got != (AttemptResult{Remaining: 90}) {
		t.Fatalf("the writer's own second attempt = %+v, want refused like any other", got)
	}
	if _, n, _ := m.Writer(10); n != 1 {
		t.Fatalf("the writer's failed attempt changed its count to %d", n)
	}
	if got := m.WaitingWriters(10); !slices.Equal(got, []string{"w"}) {
		t.Fatalf("the writer's failed attempt with wait: waiting writers %v, want [w]", got)
	}
	m.WriteRelease(10, "w", true)

	// A read attempt by a live reader replaces its hold: count 1, new lease.
	m.ReadAttempt(20, "r", 100, "", false)
	m.ReadReenter(20, "r")
	if !m.ReadAttempt(30, "r", 10, "", false).Acquired {
		t.Fatal("second read attempt by r refused")
	}
	if n := m.ReaderCount(30, "r"); n != 1 {
		t.Fatalf("after a second attempt r has count %d, want 1 (a fresh hold)", n)
	}
	if n := m.ReaderCount(40, "r"); n != 0 {
		t.Fatalf("r's fresh hold of 10 ms still holds at 40 with count %d", n)
	}
}

func TestRWReleaseWithoutLastAtCountOneKeepsHold(t *testing.T) {
	m := NewRW(50, false)
	m.ReadAttempt(0, "r", 100, "", false)
	if got, err := m.ReadRelease(0, "r", false); err != nil || got != (ReadReleaseResult{Count: 1}) {
		t.Fatalf("read release without last at count 1 = (%+v, %v)", got, err)
	}
	if n := m.ReaderCount(0, "r"); n != 1 {
		t.Fatalf("read hold count %d after a release without last at count 1", n)
	}
	m.ReadReenter(0, "r")
	m.ReadReenter(0, "r")
	if got, err := m.ReadRelease(0, "r", true); err != nil || got != (ReadReleaseResult{}) {
		t.Fatalf("last read release at count 3 = (%+v, %v), want the hold ended", got, err)
	}

	m.WriteAttempt(0, "w", 100, false)
	if got, err := m.WriteRelease(0, "w", false); err != nil || got != (WriteReleaseResult{Count: 1}) {
		t.Fatalf("write release without last at count 1 = (%+v, %v)", got, err)
	}
	m.WriteReenter(0, "w")
	if got, err := m.WriteRelease(0, "w", false); err != nil || got != (WriteReleaseResult{Count: 1}) {
		t.Fatalf("write release without last at count 2 = (%+v, %v)", got, err)
	}
	if got, err := m.WriteRelease(0, "w", true); err != nil || got != (WriteReleaseResult{}) {
		t.Fatalf("last write release = (%+v, %v)", got, err)
	}
}

func TestRWWriterGiveUpWakesReadersWhenTheLastWaitingWriterLeaves(t *testing.T) {
	m := NewRW(50, true)
	m.ReadAttempt(0, "r1", 1000, "", false)
	m.WriteAttempt(0, "w1", 100, true)
	m.WriteAttempt(0, "w2", 100, true)
	if m.ReadAttempt(0, "r2", 100, "", true).Acquired {
		t.Fatal("fair: r2 admitted while writers wait")
	}
	if m.WriterGiveUp(10, "w1") {
		t.Fatal("readers woken while w2 still waits")
	}
	if !m.WriterGiveUp(10, "w2") {
		t.Fatal("readers not woken when the last waiting writer gave up")
	}
	if m.ReadersWaiting() {
		t.Fatal("the flag outlived the wake")
	}
	if m.WriterGiveUp(10, "w2") {
		t.Fatal("a second give-up woke readers again")
	}
	if !m.ReadAttempt(10, "r2", 100, "", false).Acquired {
		t.Fatal("r2 refused once no writer waits")
	}

	// While a writer holds, a give-up wakes nobody: the readers wait for
	// its release, which wakes them.
	m = NewRW(50, true)
	m.WriteAttempt(0, "w1", 100, false)
	m.WriteAttempt(0, "w2", 100, true)
	m.ReadAttempt(0, "r", 100, "", true)
	if m.WriterGiveUp(10, "w2") {
		t.Fatal("readers woken while w1 writes")
	}
	if got, _ := m.WriteRelease(20, "w1", true); got != (WriteReleaseResult{WakeReaders: true}) {
		t.Fatalf("w1's release = %+v, want only the readers woken", got)
	}
}

func TestRWDeadWaitingWriterNoLongerKeepsReadersOut(t *testing.T) {
	m := NewRW(50, true)
	m.ReadAttempt(0, "r1", 1000, "", false)
	m.WriteAttempt(0, "w", 100, true)
	if m.ReadAttempt(49, "r2", 100, "", false).Acquired {
		t.Fatal("fair: r2 admitted while w is live")
	}
	if !m.ReadAttempt(50, "r2", 100, "", false).Acquired {
		t.Fatal("fair: r2 refused after w died")
	}
	if got, _ := m.ReadRelease(60, "r2", true); got.WakeWriter {
		t.Fatal("a writer woken while r1 still reads")
	}
	if got, err := m.ReadRelease(60, "r1", true); err != nil || got.WakeWriter {
		t.Fatalf("the last reader's release = (%+v, %v): a dead waiting writer was woken", got, err)
	}
}

func TestRWDowngradeBecomesOrdinaryWhenTheWriteHoldExpires(t *testing.T) {
	m := NewRW(50, false)
	m.WriteAttempt(0, "w", 10, false)
	if !m.ReadAttempt(0, "r", 100, "w", false).Acquired {
		t.Fatal("downgrade refused")
	}
	m.WriteRenew(5, "w", 20) // the write lease moves; the read lease does not
	if got := m.Readers(25); !slices.Equal(got, []string{"r"}) || m.readers["r"].downgradeOf != "" {
		t.Fatalf("after w expired: readers %v, r marked %+v", got, m.readers["r"])
	}
	if got := m.WriteAttempt(25, "w", 10, false); got != (AttemptResult{Remaining: 75}) {
		t.Fatalf("w's new attempt beside its former downgrade = %+v, want refused for 75 ms", got)
	}
	if !m.ReadAttempt(25, "r2", 10, "w", false).Acquired {
		t.Fatal("naming an expired writer hold keeps an ordinary reader out")
	}
	if m.readers["r2"].downgradeOf != "" {
		t.Fatal("a reader naming an expired writer hold was marked as a downgrade")
	}
}

func TestRWForceRelease(t *testing.T) {
	m := NewRW(50, true)
	m.WriteAttempt(0, "w", 100, false)
	m.ReadAttempt(0, "d", 100, "w", false)
	m.WriteAttempt(0, "w2", 100, true)
	m.ReadAttempt(0, "r", 100, "", true)
	if !m.ForceRelease(10) {
		t.Fatal("force release of a held lock reported not held")
	}
	if h, _, ok := m.Writer(10); ok || m.Readers(10) != nil || m.ReadersWaiting() {
		t.Fatalf("after a force release: writer %q, readers %v, flag %v", h, m.Readers(10), m.ReadersWaiting())
	}
	if got := m.WaitingWriters(10); !slices.Equal(got, []string{"w2"}) {
		t.Fatalf("force release touched the waiting writers: %v", got)
	}
	// Not held, but the flag is still cleared.
	m.ReadAttempt(10, "r", 100, "", true) // fair: w2 waits
	if m.ForceRelease(20) {
		t.Fatal("force release of a free lock reported held")
	}
	if m.ReadersWaiting() {
		t.Fatal("force release of a free lock left the flag set")
	}
}

func TestRWQueriesOnFreeLock(t *testing.T) {
	m := NewRW(50, true)
	if h, n, ok := m.Writer(0); h != "" || n != 0 || ok {
		t.Fatalf("Writer = (%q, %d, %v)", h, n, ok)
	}
	if ms, ok := m.RemainingWrite(0); ms != 0 || ok {
		t.Fatalf("RemainingWrite = (%d, %v)", ms, ok)
	}
	if r, w := m.Readers(0), m.WaitingWriters(0); r != nil || w != nil {
		t.Fatalf("Readers = %v, WaitingWriters = %v", r, w)
	}
	if m.ReaderCount(0, "r") != 0 || m.ReaderCount(0, "") != 0 || m.ReadersWaiting() {
		t.Fatal("free lock reports a reader or waiting readers")
	}
	if !m.Fair() || m.WriterTimeout() != 50 || NewRW(7, false).Fair() {
		t.Fatal("Fair or WriterTimeout do not report what NewRW was given")
	}
	if m.ReadReenter(0, "r") || m.WriteReenter(0, "w") || m.ReadRenew(0, "r", 10) || m.WriteRenew(0, "w", 10) ||
		m.WriterHeartbeat(0, "w") || m.WriterGiveUp(0, "w") || m.ForceRelease(0) {
		t.Fatal("an operation on a free lock reported a hold")
	}
}

func TestRWMisusePanics(t *testing.T) {
	held := func() *RW {
		m := NewRW(50, true)
		m.WriteAttempt(10, "w", 10, false)
		m.ReadAttempt(10, "d", 10, "w", false)
		m.WriteAttempt(10, "w2", 10, true)
		return m
	}
	for _, tc := range []struct {
		name string
		want string
		call func(m *RW)
	}{
		{"time goes backwards in an operation", "before the already observed time", func(m *RW) { m.WriterHeartbeat(9, "w2") }},
		{"time goes backwards in a query", "before the already observed time", func(m *RW) { m.Readers(9) }},
		{"empty write hold", "empty owner", func(m *RW) { m.WriteAttempt(10, "", 10, true) }},
		{"empty read hold", "empty owner", func(m *RW) { m.ReadAttempt(10, "", 10, "w", false) }},
		{"empty hold in ReadRelease", "empty owner", func(m *RW) { m.ReadRelease(10, "", true) }},
		{"empty hold in WriteRelease", "empty owner", func(m *RW) { m.WriteRelease(10, "", true) }},
		{"empty hold in ReadReenter", "empty owner", func(m *RW) { m.ReadReenter(10, "") }},
		{"empty hold in WriteReenter", "empty owner", func(m *RW) { m.WriteReenter(10, "") }},
		{"empty hold in WriterGiveUp", "empty owner", func(m *RW) { m.WriterGiveUp(10, "") }},
		{"empty hold in WriterHeartbeat", "empty owner", func(m *RW) { m.WriterHeartbeat(10, "") }},
		{"empty hold in ReadRenew", "empty owner", func(m *RW) { m.ReadRenew(10, "", 10) }},
		{"empty hold in WriteRenew", "empty owner", func(m *RW) { m.WriteRenew(10, "", 10) }},
		{"zero write lease", "non-positive lease", func(m *RW) { m.WriteAttempt(10, "w3", 0, false) }},
		{"zero read lease", "non-positive lease", func(m *RW) { m.ReadAttempt(10, "r", 0, "", false) }},
		{"negative read renew lease", "non-positive lease", func(m *RW) { m.ReadRenew(10, "d", -1) }},
		{"negative write renew lease", "non-positive lease", func(m *RW) { m.WriteRenew(10, "w", -1) }},
		{"lease overflows time", "overflows", func(m *RW) { m.ReadAttempt(10, "r", 1<<63-1, "w", false) }},
		{"zero RW", "not made by NewRW", func(m *RW) { (&RW{}).WriteAttempt(10, "w3", 10, true) }},
		{"zero RW query", "not made by NewRW", func(m *RW) { (&RW{}).Writer(10) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := held()
			before := *m
			before.readers, before.waiting = maps.Clone(m.readers), maps.Clone(m.waiting)
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
			NewRW(timeout, false)
			return "no panic"
		}()
		if !strings.Contains(msg, "non-positive writer timeout") {
			t.Fatalf("NewRW(%d): panic = %q", timeout, msg)
		}
	}
}
