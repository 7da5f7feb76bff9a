package multilock_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/layout"
	"github.com/redaqs/aqs/internal/scripts"
	"github.com/redaqs/aqs/internal/testkit/lintest"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/model"
)

// The model-versus-Redis state machine of the scripts, one step below the API's
// (model_test.go): requests of multi-locks (multi_*.lua) and of fair locks (lock_*.lua) on a
// pool of names, each operation a script run exactly as model.Multi has one method for it
// (first and later attempts, with and without joining, heartbeats, releases, give-ups,
// renewals), and a holder's lease running out (the "expire" action). Every reply is compared
// with the model's, and the owner and live queue of every name after each step, hold id for
// hold id.
//
// Leases are an hour and the waiter timeout ten, so that time passes only through "expire",
// which ends the claims on the names the model says end first (a value with a recorded lease
// end gets that end moved to the server's now; any other key expires) and moves the model's
// clock to that instant; at most four expiries a run keep every waiter alive.
//
// Two cases are left out. A heartbeat of a multi-lock's request that holds its names: the
// script shortens the hold, which heartbeat_test.go shows. And a later attempt of a
// multi-lock's request that is neither waiting nor holding (it gave up, was dropped, or lost
// its hold), when every one of its names is free with nobody queued: the model takes them, as
// a first attempt would and as the fair lock's script does; multi_acquire.lua takes them too
// on its uncontended path, when no key of the names exists, but reports Dropped when a lock
// key is still there (a hold's lease end passed while the key lives on for the queue). The
// engine sends such an attempt only for a waiter that died, and joins again on Dropped.

const (
	scLease   = int64(time.Hour / time.Millisecond)
	scTimeout = 10 * scLease
)

type scriptReq struct {
	hold      string
	names     []string
	fair      bool
	attempted bool // its first attempt ran
}

type scriptMachine struct {
	rdb      redis.UniversalClient
	pub      string
	pool     []string
	keys     map[string][]string
	clients  [2]string
	seq      int
	m        *model.Multi
	now      model.Time
	reqs     []*scriptReq
	expiries int
	checks   *int
}

func (s *scriptMachine) keysOf(r *scriptReq) []string {
	var k []string
	for _, n := range r.names {
		k = append(k, s.keys[n]...)
	}
	return k
}

func (s *scriptMachine) run(t *rapid.T, sc *scripts.Script, keys []string, args ...any) any {
	v, err := sc.Run(context.Background(), s.rdb, keys, args...).Result()
	if err != nil {
		t.Fatalf("%s: %v", sc.Name(), err)
	}
	return v
}

func (s *scriptMachine) pick(t *rapid.T) *scriptReq {
	if len(s.reqs) == 0 {
		t.Skip("no request yet")
	}
	return rapid.SampledFrom(s.reqs[max(0, len(s.reqs)-8):]).Draw(t, "request")
}

// what describes a request for messages: its kind, a short hold id (Client 0 or 1 and its
// sequence number) and its names' last letters.
func (s *scriptMachine) what(r *scriptReq) string {
	kind := "multi"
	if r.fair {
		kind = "fair"
	}
	var ns []string
	for _, n := range r.names {
		ns = append(ns, n[len(n)-1:])
	}
	return fmt.Sprintf("%s %s %v", kind, s.short(r.hold), ns)
}

func (s *scriptMachine) short(hold string) string {
	c := "0"
	if strings.HasPrefix(hold, s.clients[1]) {
		c = "1"
	}
	return c + hold[36:]
}

// attempt runs a request's attempt: its first for a new request, a later one otherwise.
func (s *scriptMachine) attempt(t *rapid.T, r *scriptReq, enqueue bool) {
	first := !r.attempted
	var v any
	if r.fair {
		v = s.run(t, scripts.LockAcquire, s.keysOf(r), r.hold, scLease, scTimeout, flag(enqueue), "0", flag(first), "0", s.pub)
	} else {
		v = s.run(t, scripts.MultiAcquire, s.keysOf(r), r.hold, scLease, scTimeout, flag(enqueue), flag(first), s.pub)
	}
	got, err := scripts.DecodeAttempt(v)
	if err != nil {
		t.Fatal(err)
	}
	var want model.MultiResult
	if first {
		want = s.m.Attempt(s.now, model.MultiRequest{Hold: r.hold, Names: r.names, Lease: scLease, Fair: r.fair}, enqueue)
	} else {
		want = s.m.AttemptAgain(s.now, r.hold, enqueue)
	}
	r.attempted = true
	t.Logf("attempt by %s (first %v, enqueue %v): redis %v, model %v", s.what(r), first, enqueue, got.Status, want.Status)
	if uint8(got.Status) != uint8(want.Status) {
		t.Fatalf("attempt by %s (first %v, enqueue %v): redis %v, model %+v", s.what(r), first, enqueue, got.Status, want)
	}
}

func (s *scriptMachine) arrive(t *rapid.T) {
	s.seq++
	r := &scriptReq{hold: fmt.Sprintf("%s:%d", s.clients[s.seq%2], s.seq)}
	if rapid.IntRange(0, 2).Draw(t, "fair") == 0 {
		r.fair, r.names = true, []string{rapid.SampledFrom(s.pool).Draw(t, "name")}
	} else {
		r.names = rapid.SliceOfNDistinct(rapid.SampledFrom(s.pool), 1, len(s.pool), rapid.ID[string]).Draw(t, "names")
		slices.Sort(r.names)
	}
	s.reqs = append(s.reqs, r)
	s.attempt(t, r, rapid.IntRange(0, 3).Draw(t, "enqueue") > 0)
}

func (s *scriptMachine) again(t *rapid.T) {
	r := s.pick(t)
	if !r.fair && !s.m.Waiting(s.now, r.hold) && !s.m.Holds(s.now, r.hold) && s.vacant(r) {
		t.Skip("a later attempt of a multi-lock's request that is not waiting, on names all free: see the doc above")
	}
	s.attempt(t, r, rapid.IntRange(0, 3).Draw(t, "enqueue") > 0)
}

// vacant reports whether every name of r is free with nobody queued, in the model.
func (s *scriptMachine) vacant(r *scriptReq) bool {
	for _, n := range r.names {
		if s.m.Owner(s.now, n) != "" || s.m.Queue(s.now, n) != nil {
			return false
		}
	}
	return true
}

func (s *scriptMachine) heartbeat(t *rapid.T) {
	r := s.pick(t)
	if !r.fair && s.m.Holds(s.now, r.hold) && !s.m.Waiting(s.now, r.hold) {
		t.Skip("a heartbeat of a multi-lock's holder: see heartbeat_test.go")
	}
	var v any
	if r.fair {
		v = s.run(t, scripts.LockHeartbeat, s.keysOf(r), r.hold, scLease, scTimeout)
	} else {
		v = s.run(t, scripts.MultiHeartbeat, s.keysOf(r), r.hold, scTimeout, s.pub)
	}
	got, err := scripts.DecodeBeat(v)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := s.m.Heartbeat(s.now, r.hold)
	t.Logf("heartbeat of %s: redis %v, model %v", s.what(r), got, want)
	if uint8(got) != uint8(want) {
		t.Fatalf("heartbeat of %s: redis %v, model %v", s.what(r), got, want)
	}
}

func (s *scriptMachine) release(t *rapid.T) {
	r := s.pick(t)
	if s.m.Waiting(s.now, r.hold) {
		t.Skip("the real lock releases only a hold it has")
	}
	_, merr := s.m.Release(s.now, r.hold)
	var released bool
	if r.fair {
		got, err := scripts.DecodeRelease(s.run(t, scripts.LockRelease, s.keysOf(r), r.hold, "1", s.pub, scTimeout, "", "0"))
		if err != nil {
			t.Fatal(err)
		}
		released = got.Kind != scripts.NotHeld
	} else {
		got, err := scripts.DecodeRelease(s.run(t, scripts.MultiRelease, s.keysOf(r), r.hold, s.pub))
		if err != nil {
			t.Fatal(err)
		}
		released = got.Kind != scripts.NotHeld
	}
	t.Logf("release by %s: redis released %v, model %v", s.what(r), released, merr)
	if released != (merr == nil) {
		t.Fatalf("release by %s: redis released %v, model %v", s.what(r), released, merr)
	}
}

func (s *scriptMachine) giveUp(t *rapid.T) {
	r := s.pick(t)
	var v any
	if r.fair {
		v = s.run(t, scripts.LockGiveUp, s.keysOf(r), r.hold, scLease, s.pub)
	} else {
		v = s.run(t, scripts.MultiGiveUp, s.keysOf(r), r.hold, scTimeout, s.pub)
	}
	got, err := scripts.DecodeGiveUp(v)
	if err != nil {
		t.Fatal(err)
	}
	want := s.m.GiveUp(s.now, r.hold)
	t.Logf("give-up by %s: redis %v, model %v", s.what(r), got, want.Status)
	if uint8(got) != uint8(want.Status) {
		t.Fatalf("give-up by %s: redis %v, model %+v", s.what(r), got, want)
	}
}

func (s *scriptMachine) renew(t *rapid.T) {
	r := s.pick(t)
	lease := rapid.SampledFrom([]int64{0, scLease}).Draw(t, "lease")
	var got int64
	var err error
	if r.fair {
		got, err = scripts.LockRenew.RunInt(context.Background(), s.rdb, s.keys[r.names[0]][:1], r.hold, lease)
	} else {
		keys := []string{s.keys[r.names[0]][0] + ":m:test"}
		for _, n := range r.names {
			keys = append(keys, s.keys[n][0])
		}
		got, err = scripts.MultiRenew.RunInt(context.Background(), s.rdb, keys, r.hold, lease)
	}
	if err != nil {
		t.Fatal(err)
	}
	want := s.m.Renew(s.now, r.hold, lease)
	t.Logf("renewal by %s (lease %d): redis %d, model %v", s.what(r), lease, got, want)
	if (got == 1) != want {
		t.Fatalf("renewal by %s (lease %d): redis %d, model %v", s.what(r), lease, got, want)
	}
}

// expire ends, in Redis and in the model, the holds on the names that end first. A name
// reserved for a waiter is its until the waiter dies, which this machine leaves out.
func (s *scriptMachine) expire(t *rapid.T) {
	var ends []int64
	for _, n := range s.pool {
		if ms, ok := s.m.RemainingLease(s.now, n); ok && ms <= scLease && !s.m.Waiting(s.now, s.m.Owner(s.now, n)) {
			ends = append(ends, ms)
		}
	}
	if len(ends) == 0 || s.expiries == 4 {
		t.Skip("nothing to expire")
	}
	s.expiries++
	dt := slices.Min(ends)
	ctx := context.Background()
	for _, n := range s.pool {
		ms, ok := s.m.RemainingLease(s.now, n)
		if !ok || ms > dt || s.m.Waiting(s.now, s.m.Owner(s.now, n)) {
			continue
		}
		key := s.keys[n][0]
		v, err := s.rdb.Get(ctx, key).Result()
		if err != nil {
			t.Fatalf("%q is owned in the model, its key: %v", n, err)
		}
		lv, err := layout.ParseLockValue(v)
		if err != nil {
			t.Fatal(err)
		}
		if lv.LeaseEnd == 0 {
			if err := s.rdb.PExpire(ctx, key, time.Millisecond).Err(); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(5 * time.Second); s.rdb.Exists(ctx, key).Val() != 0; {
				if time.Now().After(deadline) {
					t.Fatal("lock key did not expire")
				}
				time.Sleep(time.Millisecond) // the key's TTL is 1ms: the wait for it to pass
			}
			continue
		}
		now, err := s.rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		ended := v[:strings.LastIndex(v, " e")] + fmt.Sprintf(" e%d", now.UnixMilli())
		if err := s.rdb.SetArgs(ctx, key, ended, redis.SetArgs{KeepTTL: true}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	s.now += model.Time(dt)
	t.Logf("expire: the claims that end first end, at %d", s.now)
}

// check compares every name's owner and live queue.
func (s *scriptMachine) check(t *rapid.T) {
	*s.checks++
	ctx := context.Background()
	tm, err := s.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	now := tm.UnixMilli()
	for _, n := range s.pool {
		k := s.keys[n]
		owner := ""
		if v, err := s.rdb.Get(ctx, k[0]).Result(); err == nil {
			lv, err := layout.ParseLockValue(v)
			if err != nil {
				t.Fatal(err)
			}
			if lv.LeaseEnd == 0 || lv.LeaseEnd > now {
				owner = lv.Hold
			}
		}
		members, err := s.rdb.LRange(ctx, k[1], 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		var queue []string
		for _, m := range members {
			if sc, err := s.rdb.ZScore(ctx, k[2], m).Result(); err == nil && int64(sc) > now {
				hold, _, _ := strings.Cut(m, " ")
				queue = append(queue, hold)
			}
		}
		if want := s.m.Owner(s.now, n); owner != want {
			t.Fatalf("owner of %q: redis %q, model %q", n, owner, want)
		}
		if want := s.m.Queue(s.now, n); !slices.Equal(queue, want) {
			t.Fatalf("queue of %q: redis %v, model %v", n, queue, want)
		}
	}
}

func runScriptMachine(t *testing.T, rdb redis.UniversalClient) {
	c := newClient(t, rdb)
	pub := "PUBLISH"
	if _, ok := rdb.(*redis.ClusterClient); ok {
		pub = "SPUBLISH"
	}
	checks, runs := 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		runs++
		tag := fmt.Sprintf("%s-%d", redistest.Name(t), runs)
		s := &scriptMachine{rdb: rdb, pub: pub, keys: map[string][]string{}, clients: [2]string{uuid.NewString(), uuid.NewString()},
			m: model.NewMulti(scTimeout), checks: &checks}
		var all []string
		for i := range apiPool {
			n := fmt.Sprintf("{%s}:%c", tag, 'a'+i)
			l, err := fair.New(c, n)
			if err != nil {
				rt.Fatal(err)
			}
			s.pool = append(s.pool, n)
			s.keys[n] = l.Keys()
			all = append(all, l.Keys()...)
		}
		defer rdb.Del(context.Background(), all...)
		rt.Repeat(map[string]func(*rapid.T){
			"arrive":    s.arrive,
			"again":     s.again,
			"heartbeat": s.heartbeat,
			"release":   s.release,
			"giveUp":    s.giveUp,
			"renew":     s.renew,
			"expire":    s.expire,
			"":          s.check,
		})
		redistest.AssertNoKeyWithoutTTL(lintest.InRapid(t, rt), rdb, tag, s.keys[s.pool[0]][0])
	})
	t.Logf("%d runs, %d state checks", runs, checks)
}

func TestMultiAndFairScriptsAgreeWithModel(t *testing.T) {
	topologies(t, runScriptMachine)
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
