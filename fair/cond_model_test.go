package fair_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/scripts"
	"github.com/redaqs/aqs/internal/testkit/lintest"
	"github.com/redaqs/aqs/model"
)

// The model-versus-Redis state machine of a Condition's scripts: the lock's operations of
// model_test.go's machine (attempts, heartbeats, re-entry, releases, giving up, the lease
// running out) mixed with the condition's (cond_wait.lua, a Wait by the holder or by anyone
// else, and the holder's with the reentrant lock's local hand-off; cond_signal.lua, Signal and SignalAll from either Client, with the lock held or free;
// cond_poll.lua, cond_beat.lua, cond_leave.lua), on Redis and on model.Cond over the same
// model.Fair; every reply is compared, and after each step the holder, the lock's live queue
// and the condition's live queue in order.
//
// Leases and timeouts as in model_test.go: time passes only through "expire".

type condModelMachine struct {
	*fairMachine
	c     *model.Cond
	ckeys []string // the lock's three keys, then the condition's list and deadlines
	moved *int     // waiters moved by signals, over all runs
	// waiting are the slots whose holds wait on the condition: out of s.slots until a Signal
	// moves them, since a waiter makes no attempt on the lock until then (cond_poll.lua first).
	waiting []*fairSlot
}

// waited moves sl, whose Wait queued next on the condition, from the lock's callers to the
// condition's waiters, and adds a new caller in its place.
func (s *condModelMachine) waited(sl *fairSlot, next string) {
	s.slots = slices.DeleteFunc(s.slots, func(x *fairSlot) bool { return x == sl })
	sl.hold, sl.attempted = next, true
	s.waiting = append(s.waiting, sl)
	s.slots = append(s.slots, &fairSlot{hold: s.newHold()})
}

// anySlot draws a caller or a waiter on the condition.
func (s *condModelMachine) anySlot(t *rapid.T) *fairSlot {
	return rapid.SampledFrom(append(slices.Clone(s.slots), s.waiting...)).Draw(t, "any slot")
}

func (s *condModelMachine) member(hold string) string { return fmt.Sprintf("%s %d", hold, smLease) }

// known returns whether a slot has hold.
func (s *condModelMachine) known(hold string) bool {
	return slices.ContainsFunc(s.slots, func(x *fairSlot) bool { return x.hold == hold })
}

// wait is a slot's Wait: the holder's, or anyone's, which changes nothing.
func (s *condModelMachine) wait(t *rapid.T) { s.waitBy(t, s.slot(t)) }

// waitHolder is the holder's Wait.
func (s *condModelMachine) waitHolder(t *rapid.T) {
	holder, _, _ := s.m.Holder(s.now)
	i := slices.IndexFunc(s.slots, func(x *fairSlot) bool { return x.hold == holder })
	if i < 0 {
		t.Skip("no slot holds")
	}
	s.waitBy(t, s.slots[i])
}

func (s *condModelMachine) waitBy(t *rapid.T, sl *fairSlot) {
	next := s.newHoldOf(sl.hold)
	args := []any{sl.hold, "1", s.pub, smTimeout, "", "0", s.member(next)}
	r, err := scripts.CondWait.Run(context.Background(), s.rdb, s.ckeys, args...).Result()
	want, merr := s.c.Wait(s.now, sl.hold, next, smLease)
	s.checkRelease(t, sl.hold, true, r, err, want, merr)
	if merr == nil {
		s.waited(sl, next)
	}
}

// waitPicking is the holder's Wait with the reentrant lock's local hand-off (cond_wait.lua's
// ARGV[5], ARGV[6] and riders), drawn as releasePicking draws them.
func (s *condModelMachine) waitPicking(t *rapid.T) {
	holder, _, _ := s.m.Holder(s.now)
	i := slices.IndexFunc(s.slots, func(x *fairSlot) bool { return x.hold == holder })
	if i < 0 {
		t.Skip("no slot holds")
	}
	sl := s.slots[i]
	next := s.newHoldOf(sl.hold)
	riders := s.riders(sl.hold, rapid.IntRange(0, 2).Draw(t, "riders"))
	var queued []string
	for _, h := range s.m.Queue(s.now) {
		if h[:36] == sl.hold[:36] {
			queued = append(queued, h)
		}
	}
	var pick string
	switch rapid.IntRange(0, 3).Draw(t, "pick") {
	case 0:
		if len(queued) == 0 {
			t.Skip("no queued waiter of the holder's Client")
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
	args := []any{sl.hold, "1", s.pub, smTimeout, "", flag(over), s.member(next)}
	if pick != "" {
		args[4] = s.member(pick)
	}
	var mr []model.FairRider
	for _, h := range riders {
		args = append(args, s.member(h))
		mr = append(mr, model.FairRider{Hold: h, Lease: smLease})
	}
	r, err := scripts.CondWait.Run(context.Background(), s.rdb, s.ckeys, args...).Result()
	want, merr := s.c.WaitTo(s.now, sl.hold, next, smLease, pick, smLease, over, mr...)
	s.checkRelease(t, sl.hold, true, r, err, want, merr)
	s.waited(sl, next)
	// Riders and a pick that was not queued become callers of their own (see releaseTo).
	reached := func(h string) bool { return s.m.Position(s.now, h) >= 0 || s.m.HoldCount(s.now, h) > 0 }
	for _, h := range riders {
		if !s.known(h) {
			s.slots = append(s.slots, &fairSlot{hold: h, attempted: reached(h)})
		}
	}
	if pick != "" && reached(pick) && !s.known(pick) {
		s.slots = append(s.slots, &fairSlot{hold: pick, attempted: true})
	}
}

// signal is a Signal or SignalAll from either Client.
func (s *condModelMachine) signal(t *rapid.T) {
	all := rapid.Bool().Draw(t, "all")
	from := rapid.SampledFrom(s.clients[:]).Draw(t, "from")
	one := "1"
	if all {
		one = "0"
	}
	v, err := scripts.CondSignal.Run(context.Background(), s.rdb, s.ckeys, one, smTimeout, s.pub, from).Slice()
	if err != nil {
		t.Fatalf("%s: %v", scripts.CondSignal.Name(), err)
	}
	want := s.c.Signal(s.now, all)
	local := ""
	if want.Granted != "" && want.Granted[:36] == from {
		local = want.Granted
	}
	if v[0] != int64(len(want.Moved)) || v[1] != local {
		t.Fatalf("signal (all %v) from %s: redis %v, model %+v", all, from, v, want)
	}
	*s.moved += len(want.Moved)
	// The moved waiters are the lock's callers again.
	for _, h := range want.Moved {
		i := slices.IndexFunc(s.waiting, func(x *fairSlot) bool { return x.hold == h })
		if i < 0 {
			t.Fatalf("signal moved %s, which no slot waits with", h)
		}
		s.slots = append(s.slots, s.waiting[i])
		s.waiting = slices.Delete(s.waiting, i, i+1)
	}
}

func (s *condModelMachine) poll(t *rapid.T) {
	sl := s.anySlot(t)
	v, err := scripts.CondPoll.Run(context.Background(), s.rdb, s.ckeys[3:], s.member(sl.hold), smTimeout).Slice()
	if err != nil {
		t.Fatal(err)
	}
	if want := s.c.Poll(s.now, sl.hold); (v[0] == int64(3)) != want || (!want && v[0] != int64(0)) {
		t.Fatalf("poll of %s: redis %v, model %v", sl.hold, v, want)
	}
}

func (s *condModelMachine) beat(t *rapid.T) {
	sl := s.anySlot(t)
	v, err := scripts.CondBeat.Run(context.Background(), s.rdb, s.ckeys, sl.hold, smLease, smTimeout).Result()
	if err != nil {
		t.Fatal(err)
	}
	r, err := scripts.DecodeBeat(v)
	if err != nil {
		t.Fatal(err)
	}
	want := s.c.Beat(s.now, sl.hold)
	if int(r) != want {
		t.Fatalf("cond beat of %s: redis %d, model %d", sl.hold, r, want)
	}
}

func (s *condModelMachine) leave(t *rapid.T) {
	sl := s.anySlot(t)
	r, err := scripts.CondLeave.Run(context.Background(), s.rdb, s.ckeys[3:], s.member(sl.hold)).Int64()
	if err != nil {
		t.Fatal(err)
	}
	want := s.c.Leave(s.now, sl.hold)
	if (r == 1) != want {
		t.Fatalf("leave of %s: redis %d, model %v", sl.hold, r, want)
	}
	if want {
		s.waiting = slices.DeleteFunc(s.waiting, func(x *fairSlot) bool { return x == sl }) // it gave up
	}
}

func (s *condModelMachine) check(t *rapid.T) {
	s.fairMachine.check(t)
	ctx := context.Background()
	members, err := s.rdb.LRange(ctx, s.ckeys[3], 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, m := range members {
		if s.rdb.ZScore(ctx, s.ckeys[4], m).Err() == nil {
			live = append(live, m[:len(m)-len(fmt.Sprint(smLease))-1])
		}
	}
	if want := s.c.Waiting(s.now); fmt.Sprint(live) != fmt.Sprint(want) {
		t.Fatalf("condition: redis %v, model %v", live, want)
	}
}

func runCondMachine(t *testing.T, rdb redis.UniversalClient) {
	c := newClient(t, rdb)
	pub := "PUBLISH"
	if _, ok := rdb.(*redis.ClusterClient); ok {
		pub = "SPUBLISH"
	}
	checks, runs, signals, moved := 0, 0, 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		runs++
		l, err := fair.New(c, fmt.Sprintf("%s-%d", t.Name(), runs))
		if err != nil {
			rt.Fatal(err)
		}
		cond, err := l.NewCondition("c")
		if err != nil {
			rt.Fatal(err)
		}
		keys := []string{l.Key(), l.Key() + ":q", l.Key() + ":d"}
		f := &fairMachine{clients: [2]string{uuid.NewString(), uuid.NewString()}, rdb: rdb, keys: keys, pub: pub,
			m: model.NewFair(smTimeout), checks: &checks}
		for range 4 {
			f.slots = append(f.slots, &fairSlot{hold: f.newHold()})
		}
		s := &condModelMachine{fairMachine: f, c: model.NewCond(f.m), ckeys: append(slices.Clone(keys), cond.Keys()...), moved: &moved}
		defer rdb.Del(context.Background(), s.ckeys...)
		signal := func(t *rapid.T) { signals++; s.signal(t) }
		rt.Repeat(map[string]func(*rapid.T){
			"attempt":   s.attempt,
			"heartbeat": s.heartbeat,
			"reenter":   s.reenter,
			"release":   s.release,
			"giveUp":    s.giveUp,
			"expire":    s.expire,
			"wait":      s.wait,
			"waitHold":  s.waitHolder,
			"waitPick":  s.waitPicking,
			"signal":    signal,
			"signal2":   signal, // twice as likely
			"poll":      s.poll,
			"beat":      s.beat,
			"leave":     s.leave,
			"":          s.check,
		})
		s.noKeyWithoutTTL(lintest.InRapid(t, rt), l)
	})
	if runs < 100 || moved == 0 {
		t.Fatalf("only %d runs, %d waiters moved", runs, moved)
	}
	t.Logf("%d runs, %d signals moved %d waiters, %d state checks", runs, signals, moved, checks)
}

// The Condition's scripts agree with model.Cond, single node and cluster.
func TestConditionAgreesWithModel(t *testing.T) {
	topologies(t, runCondMachine)
}
