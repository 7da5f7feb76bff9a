package fair_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/scripts"
	"github.com/redaqs/aqs/internal/testkit/lintest"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/model"
)

// The model-versus-Redis state machine of the exclusive lock's scripts, which the fair and the
// reentrant lock share: the same operations (first and later attempts, with and without
// joining the queue, heartbeats, re-entry, release with hand-off, with riders, and with the
// reentrant lock's pick, giving up, forced release, the holder's lease running out) go to the
// scripts on Redis and to model.Fair, and every reply and the holder and queue after each step
// are compared.
//
// Leases are an hour and the waiter timeout ten, so that time passes only through the
// "expire" action, which ends the hold in Redis (PEXPIRE 1) and moves the model's clock to
// the hold's expiry; at most four expiries a run keep every queued waiter alive in the model
// as it is in Redis. Dead waiters are covered by fair/lock_test.go and model/fair_test.go.

const (
	smLease   = int64(time.Hour / time.Millisecond)
	smTimeout = 10 * smLease
)

// fairSlot is one caller: its current hold id, and whether that hold reached Redis before (an
// attempt, or a release that carried it as a rider), so that its next attempt is a later one
// (lock_acquire.lua's ARGV[6] "0").
type fairSlot struct {
	hold      string
	attempted bool
}

type fairMachine struct {
	clients  [2]string // holds come from two Clients, so that some hand-offs stay local
	seq      int
	rdb      redis.UniversalClient
	keys     []string
	pub      string
	m        *model.Fair
	now      model.Time
	slots    []*fairSlot
	expiries int
	checks   *int
}

func (s *fairMachine) slot(t *rapid.T) *fairSlot { return rapid.SampledFrom(s.slots).Draw(t, "slot") }

// newHold returns a fresh hold id of one of the two Clients.
func (s *fairMachine) newHold() string {
	s.seq++
	return fmt.Sprintf("%s:%d", s.clients[s.seq%2], s.seq)
}

// renew gives a slot a fresh hold id once its hold is over (ids are never reused).
func (s *fairMachine) renew(sl *fairSlot) {
	if s.m.Position(s.now, sl.hold) < 0 && s.m.HoldCount(s.now, sl.hold) == 0 {
		sl.hold, sl.attempted = s.newHold(), false
	}
}

// newHoldOf returns a fresh hold id of the Client of hold.
func (s *fairMachine) newHoldOf(hold string) string {
	s.seq++
	return fmt.Sprintf("%s:%d", hold[:36], s.seq)
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func (s *fairMachine) run(t *rapid.T, sc *scripts.Script, args ...any) any {
	r, err := sc.Run(context.Background(), s.rdb, s.keys, args...).Result()
	if err != nil {
		t.Fatalf("%s: %v", sc.Name(), err)
	}
	return r
}

// attempt makes the slot's hold's first attempt, or a later one once it reached Redis; a hold
// that is dropped starts over under a new id, as the engine does.
func (s *fairMachine) attempt(t *rapid.T) {
	sl := s.slot(t)
	enqueue := rapid.Bool().Draw(t, "enqueue")
	first := !sl.attempted
	r, err := scripts.DecodeAttempt(s.run(t, scripts.LockAcquire, sl.hold, smLease, smTimeout, flag(enqueue), "0", flag(first)))
	if err != nil {
		t.Fatal(err)
	}
	holder, _, _ := s.m.Holder(s.now)
	var want model.FairResult
	if first {
		want = s.m.Attempt(s.now, sl.hold, smLease, enqueue)
	} else {
		want = s.m.AttemptAgain(s.now, sl.hold, smLease, enqueue)
	}
	var status scripts.Status
	switch {
	case want.Acquired && holder == sl.hold:
		status = scripts.Granted // it held the lock already: handed over, its message missed
	case want.Acquired:
		status = scripts.Acquired
	case want.Dropped:
		status = scripts.Dropped
	case enqueue:
		status = scripts.Queued
	default:
		status = scripts.Busy
	}
	if r.Status != status {
		t.Fatalf("attempt by %s (enqueue %v, first %v): redis %+v, model %+v", sl.hold, enqueue, first, r, want)
	}
	sl.attempted = true
	if want.Dropped {
		sl.hold, sl.attempted = s.newHold(), false
	}
}

func (s *fairMachine) heartbeat(t *rapid.T) {
	sl := s.slot(t)
	r, err := scripts.DecodeBeat(s.run(t, scripts.LockHeartbeat, sl.hold, smLease, smTimeout))
	if err != nil {
		t.Fatal(err)
	}
	queued := s.m.Heartbeat(s.now, sl.hold)
	holder, _, held := s.m.Holder(s.now)
	switch {
	case queued && r != 1, !queued && held && holder == sl.hold && r != 2,
		!queued && !(held && holder == sl.hold) && r != 0:
		t.Fatalf("heartbeat of %s: redis %d, model queued %v holder %q", sl.hold, r, queued, holder)
	}
}

func (s *fairMachine) reenter(t *rapid.T) {
	sl := s.slot(t)
	r, err := scripts.LockReenter.Run(context.Background(), s.rdb, s.keys[:1], sl.hold, 0).Int64()
	if err != nil {
		t.Fatal(err)
	}
	if want := s.m.Reenter(s.now, sl.hold, 0); (r == 1) != want {
		t.Fatalf("re-entry by %s: redis %d, model %v", sl.hold, r, want)
	}
}

func (s *fairMachine) release(t *rapid.T) {
	sl := s.slot(t)
	end := rapid.Bool().Draw(t, "end")
	e := "0"
	if end {
		e = "1"
	}
	r, err := scripts.LockRelease.Run(context.Background(), s.rdb, s.keys, sl.hold, e, s.pub, smTimeout, "", "0").Result()
	want, merr := s.m.Release(s.now, sl.hold, end)
	s.checkRelease(t, sl.hold, end, r, err, want, merr)
	s.renew(sl)
}

// checkRelease compares a reply of lock_release.lua with the model's release.
func (s *fairMachine) checkRelease(t *rapid.T, hold string, end bool, v any, err error, want model.ReleaseResult, merr error) {
	if err != nil {
		t.Fatalf("%s: %v", scripts.LockRelease.Name(), err)
	}
	r, err := scripts.DecodeRelease(v)
	if err != nil {
		t.Fatal(err)
	}
	// A hand-off to a waiter of the releaser's own Client is reported with the waiter's hold
	// id (the caller tells it); any other outcome with its kind.
	var expect scripts.Release
	switch {
	case want.Count > 0:
		expect = scripts.Release{Kind: scripts.Counted, Left: want.Count}
	case want.Granted == "":
		expect = scripts.Release{Kind: scripts.Freed}
	case want.Granted[:36] == hold[:36]:
		expect = scripts.Release{Kind: scripts.HandedLocal, Hold: want.Granted}
	default:
		expect = scripts.Release{Kind: scripts.HandedRemote}
	}
	r.Lease, r.Mine, r.Joined, r.Passed = 0, nil, false, false
	switch {
	case merr != nil:
		if r.Kind != scripts.NotHeld {
			t.Fatalf("release by non-holder %s: redis %+v", hold, r)
		}
	case fmt.Sprint(r) != fmt.Sprint(expect):
		t.Fatalf("release by %s (end %v): redis %+v, model %+v", hold, end, r, want)
	}
}

// releaseRiding ends a hold with riders (see internal/acquire/local.go): new waiters of the
// releaser's Client that join the queue's tail with the release, in order, before the lock is
// handed to the live head.
func (s *fairMachine) releaseRiding(t *rapid.T) {
	sl := s.slot(t)
	s.releaseTo(t, sl, "", false, s.riders(sl.hold, rapid.IntRange(1, 3).Draw(t, "riders")))
}

// riders returns n new waiters of the Client of hold.
func (s *fairMachine) riders(hold string, n int) []string {
	var riders []string
	for ; n > 0; n-- {
		riders = append(riders, s.newHoldOf(hold))
	}
	return riders
}

// releasePicking ends a hold with the reentrant lock's local hand-off (internal/acquire/local.go):
// a pick, a waiter of the releaser's Client to hand the lock to straight away (one that is
// queued; the first rider, as the engine's boarded pick rides too; or one that is neither),
// the over flag that ends a streak, and riders.
func (s *fairMachine) releasePicking(t *rapid.T) {
	sl := s.slot(t)
	riders := s.riders(sl.hold, rapid.IntRange(0, 2).Draw(t, "riders"))
	var queued []string
	for _, h := range s.m.Queue(s.now) {
		if h[:36] == sl.hold[:36] && h != sl.hold {
			queued = append(queued, h)
		}
	}
	var pick string
	switch rapid.IntRange(0, 2).Draw(t, "pick") {
	case 0:
		if len(queued) == 0 {
			t.Skip("no queued waiter of the releaser's Client")
		}
		pick = rapid.SampledFrom(queued).Draw(t, "queued pick")
	case 1:
		if len(riders) == 0 {
			t.Skip("no rider")
		}
		pick = riders[0]
	case 2:
		pick = s.newHoldOf(sl.hold)
	}
	over := rapid.Bool().Draw(t, "over")
	s.releaseTo(t, sl, pick, over, riders)
}

// releaseTo ends the hold of sl with pick, over and riders (lock_release.lua's ARGV[5..]).
func (s *fairMachine) releaseTo(t *rapid.T, sl *fairSlot, pick string, over bool, riders []string) {
	member := func(h string) string { return fmt.Sprintf("%s %d", h, smLease) }
	args := []any{sl.hold, "1", s.pub, smTimeout, "", flag(over)}
	if pick != "" {
		args[4] = member(pick)
	}
	var mr []model.FairRider
	for _, h := range riders {
		args = append(args, member(h))
		mr = append(mr, model.FairRider{Hold: h, Lease: smLease})
	}
	r, err := scripts.LockRelease.Run(context.Background(), s.rdb, s.keys, args...).Result()
	want, merr := s.m.ReleaseTo(s.now, sl.hold, pick, smLease, over, mr...)
	s.checkRelease(t, sl.hold, true, r, err, want, merr)
	// Riders and a pick that was not queued become callers of their own. Those that joined the
	// queue or hold the lock reached Redis: their next attempts are later ones. A rider that
	// did not join (the pick was taken) waits for the next release in the engine; here it is a
	// caller whose first attempt is still to come.
	reached := func(h string) bool { return s.m.Position(s.now, h) >= 0 || s.m.HoldCount(s.now, h) > 0 }
	known := func(h string) bool {
		return slices.ContainsFunc(s.slots, func(x *fairSlot) bool { return x.hold == h })
	}
	for _, h := range riders {
		if !known(h) {
			s.slots = append(s.slots, &fairSlot{hold: h, attempted: reached(h)})
		}
	}
	if pick != "" && reached(pick) && !known(pick) {
		s.slots = append(s.slots, &fairSlot{hold: pick, attempted: true})
	}
	s.renew(sl)
}

func (s *fairMachine) giveUp(t *rapid.T) {
	sl := s.slot(t)
	r, err := scripts.DecodeGiveUp(s.run(t, scripts.LockGiveUp, sl.hold, smLease, s.pub))
	if err != nil {
		t.Fatal(err)
	}
	want := s.m.GiveUp(s.now, sl.hold)
	switch {
	case want.WasHolder && r != 2, want.WasQueued && r != 1, !want.WasHolder && !want.WasQueued && r != 0:
		t.Fatalf("give up by %s: redis %d, model %+v", sl.hold, r, want)
	}
	s.renew(sl)
}

func (s *fairMachine) force(t *rapid.T) {
	r := s.run(t, scripts.LockForceRelease, s.pub, "")
	held, _ := s.m.ForceRelease(s.now)
	if (r == int64(1)) != held {
		t.Fatalf("force release: redis %d, model held %v", r, held)
	}
	for _, sl := range s.slots {
		s.renew(sl)
	}
}

func (s *fairMachine) expire(t *rapid.T) {
	ms, ok := s.m.RemainingLease(s.now)
	if !ok || s.expiries == 4 {
		t.Skip("nothing to expire")
	}
	s.expiries++
	ctx := context.Background()
	if err := s.rdb.PExpire(ctx, s.keys[0], time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); s.rdb.Exists(ctx, s.keys[0]).Val() != 0; {
		if time.Now().After(deadline) {
			t.Fatal("lock key did not expire")
		}
		time.Sleep(time.Millisecond)
	}
	s.now += model.Time(ms)
	for _, sl := range s.slots {
		s.renew(sl)
	}
}

// noKeyWithoutTTL checks that the lock's keys expire.
func (s *fairMachine) noKeyWithoutTTL(t testing.TB, l *fair.Lock) {
	redistest.AssertNoKeyWithoutTTL(t, s.rdb, l.Name(), l.Key())
}

func (s *fairMachine) check(t *rapid.T) {
	*s.checks++
	ctx := context.Background()
	res, err := scripts.LockInfo.Run(ctx, s.rdb, s.keys[:1]).Slice()
	if err != nil {
		t.Fatal(err)
	}
	holder, _ := res[0].(string)
	want, count, held := s.m.Holder(s.now)
	if holder != want || (held && res[1].(int64) != int64(count)) {
		t.Fatalf("holder: redis %q %v, model %q %d", holder, res[1], want, count)
	}
	// The live queue in Redis: list order, entries with a score (ghosts have none).
	members, err := s.rdb.LRange(ctx, s.keys[1], 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, m := range members {
		if s.rdb.ZScore(ctx, s.keys[2], m).Err() == nil {
			live = append(live, m[:len(m)-len(fmt.Sprint(smLease))-1])
		}
	}
	if fmt.Sprint(live) != fmt.Sprint(s.m.Queue(s.now)) {
		t.Fatalf("queue: redis %v, model %v", live, s.m.Queue(s.now))
	}
}

func runFairMachine(t *testing.T, rdb redis.UniversalClient) {
	c := newClient(t, rdb)
	pub := "PUBLISH"
	if _, ok := rdb.(*redis.ClusterClient); ok {
		pub = "SPUBLISH"
	}
	checks, runs := 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		runs++
		l, err := fair.New(c, fmt.Sprintf("%s-%d", t.Name(), runs))
		if err != nil {
			rt.Fatal(err)
		}
		s := &fairMachine{clients: [2]string{uuid.NewString(), uuid.NewString()}, rdb: rdb, keys: []string{l.Key(), l.Key() + ":q", l.Key() + ":d"}, pub: pub,
			m: model.NewFair(smTimeout), checks: &checks}
		for i := 0; i < 4; i++ {
			s.slots = append(s.slots, &fairSlot{hold: s.newHold()})
		}
		defer rdb.Del(context.Background(), s.keys...)
		rt.Repeat(map[string]func(*rapid.T){
			"attempt":   s.attempt,
			"heartbeat": s.heartbeat,
			"reenter":   s.reenter,
			"release":   s.release,
			"riding":    s.releaseRiding,
			"picking":   s.releasePicking,
			"giveUp":    s.giveUp,
			"force":     s.force,
			"expire":    s.expire,
			"":          s.check,
		})
		s.noKeyWithoutTTL(lintest.InRapid(t, rt), l)
	})
	if runs < 100 {
		t.Fatalf("only %d runs", runs)
	}
	t.Logf("%d runs, %d state checks", runs, checks)
}

func TestFairLockAgreesWithModel(t *testing.T) {
	topologies(t, runFairMachine)
}
