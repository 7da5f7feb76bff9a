package rwlock_test

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

	"github.com/redaqs/aqs/internal/layout"
	"github.com/redaqs/aqs/internal/scripts"
	"github.com/redaqs/aqs/internal/testkit/lintest"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/model"
	"github.com/redaqs/aqs/rwlock"
)

// The model-versus-Redis state machine of the read-write lock: the same operations go to the
// lock's scripts on Redis and to model.RW, in the fair and the non-fair mode, and every reply
// (decoded by internal/scripts' typed decoders), every grant (returned to the caller's Client
// or published on the grant channel of another's) and the writer, the readers, their counts
// and leases and the live queue, in order, with its deadlines, are compared after each step.
//
// The operations are those a Client sends, in the order a Client sends them for each of its
// calls (a slot below is one call at a time): a first attempt (joining or not; a writer asking
// for its fencing token or not; a reader plain, as a downgrade through the live writer, or
// through a write hold that has ended), then while it waits retries, heartbeats, the grant
// message, or giving up; holding, re-entries, renewals and releases (the read side's release
// by its script, trusted or not, or by its two plain commands and rw_serve); and a forced
// release of everything or of one hold. Holds come from two Clients, so that some grants are
// returned and others published.
//
// Time. Leases are 1h or 3h and the waiter timeout 2h, so every deadline the model computes
// is a whole number of hours and two deadlines are equal or an hour apart. The model's clock
// moves only by "jump", to one of its own next deadlines (a lease's end, a waiter's
// deadline); Redis is moved by the same amount by rewriting its absolute times (the scores of
// the readers and of the queue's deadlines) and its TTLs (the write side's and every key's).
// Redis's clock also runs for real meanwhile, by less than a run lasts (well under an hour),
// so the two agree about everything that is dead or alive, and Redis's remaining leases and
// waits are the model's, less at most the run's real time.

const (
	hour      = int64(time.Hour / time.Millisecond)
	smTimeout = 2 * hour
)

var smLeases = []int64{hour, 3 * hour}

type smPhase int

const (
	smIdle    smPhase = iota // its next attempt is a first one, under a fresh hold id
	smWaiting                // queued, as far as its Client knows (its hold may have been granted)
	smHolding                // its Client knows it holds (the hold may be lost since)
)

// smSlot is one call of a Client after another: one hold id at a time.
type smSlot struct {
	mode       model.Mode
	hold       string
	lease      int64
	phase      smPhase
	join       bool   // the call waits (Lock, or TryLock with a wait): its attempts join the queue
	token      bool   // a writer that asks for its fencing token at acquisition
	writerHold string // a reader's context's write hold ("" for none)
	reentered  bool   // a reader whose hold was re-entered (rw_read_release's ARGV[4])
}

type smMachine struct {
	rdb      redis.UniversalClient
	ps       *redis.PubSub
	keys     []string // w, r, rn, q, d
	pub      string
	fair     bool
	m        *model.RW
	now      model.Time
	start    time.Time // the run's start: Redis's clock ran this long beside the model's
	clients  [2]string
	seq      int
	slots    []*smSlot
	oldWrite []string // write holds that were taken once: a reader's context may still name one
	checks   *int
	seen     map[string]int // how often each kind of step was seen, over every run
}

// snapshotScript reads the readers (hold, remaining ms, re-entries) and the live queue
// (member, remaining ms until its deadline; each member once, at its first place in the list),
// and the PTTL of every key. KEYS: w, r, rn, q, d.
var snapshotScript = redis.NewScript(`
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local readers = {}
local e = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #e, 2 do
  readers[#readers + 1] = e[i]
  readers[#readers + 1] = tonumber(e[i + 1]) - now
  readers[#readers + 1] = tonumber(redis.call('HGET', KEYS[3], e[i]) or '0')
end
local queue, seen = {}, {}
for _, m in ipairs(redis.call('LRANGE', KEYS[4], 0, -1)) do
  local s = redis.call('ZSCORE', KEYS[5], m)
  if s and tonumber(s) > now and not seen[m] then
    seen[m] = true
    queue[#queue + 1] = m
    queue[#queue + 1] = tonumber(s) - now
  end
end
local ttls = {}
for i = 1, 5 do
  ttls[i] = redis.call('PTTL', KEYS[i])
end
return {readers, queue, ttls}
`)

// jumpScript moves the lock's time forward by ARGV[1] ms: every absolute time it stores (the
// readers' lease ends, the waiters' deadlines) and every TTL goes down by that much, and a key
// whose TTL runs out is deleted. KEYS: w, r, rn, q, d.
var jumpScript = redis.NewScript(`
local j = tonumber(ARGV[1])
for _, z in ipairs({KEYS[2], KEYS[5]}) do
  local e = redis.call('ZRANGE', z, 0, -1, 'WITHSCORES')
  for i = 1, #e, 2 do
    redis.call('ZADD', z, string.format('%d', tonumber(e[i + 1]) - j), e[i])
  end
end
for _, k in ipairs(KEYS) do
  local t = redis.call('PTTL', k)
  if t > 0 then
    if t <= j then
      redis.call('DEL', k)
    else
      redis.call('PEXPIRE', k, t - j)
    end
  end
end
return 1
`)

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// slack is how far Redis's remaining times may fall short of the model's: the run's real
// time so far, and a little for the clocks' granularity.
func (s *smMachine) slack() int64 { return time.Since(s.start).Milliseconds() + 50 }

// near reports whether a time Redis reports (ms) is the model's, up to the run's real time.
func (s *smMachine) near(redisMs, modelMs int64) bool {
	return redisMs <= modelMs+5 && redisMs >= modelMs-s.slack()
}

func (s *smMachine) fresh(sl *smSlot) {
	s.seq++
	sl.hold = fmt.Sprintf("%s:%d", s.clients[s.seq%2], s.seq)
	sl.phase, sl.join, sl.token, sl.writerHold, sl.reentered = smIdle, false, false, "", false
}

func (s *smMachine) pick(t *rapid.T, ok func(*smSlot) bool) *smSlot {
	var c []*smSlot
	for _, sl := range s.slots {
		if ok(sl) {
			c = append(c, sl)
		}
	}
	if len(c) == 0 {
		t.Skip("no slot for this")
	}
	return rapid.SampledFrom(c).Draw(t, "slot")
}

func (s *smMachine) run(t *rapid.T, sc *scripts.Script, keys []string, args ...any) any {
	v, err := sc.Run(context.Background(), s.rdb, keys, args...).Result()
	if err != nil {
		t.Fatalf("%s: %v", sc.Name(), err)
	}
	return v
}

// holds reports whether sl's hold has, in the model, what its mode asks for.
func (s *smMachine) holds(sl *smSlot) bool {
	if sl.mode == model.Exclusive {
		w, _, ok := s.m.Writer(s.now)
		return ok && w == sl.hold
	}
	return s.m.ReaderCount(s.now, sl.hold) > 0
}

// published returns the messages published on the grant channels since the last call, in
// order, as "channel message": the PING's reply comes after every message published before
// it reached Redis.
func (s *smMachine) published(t *rapid.T) []string {
	ctx := context.Background()
	if err := s.ps.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		msg, err := s.ps.ReceiveTimeout(ctx, 5*time.Second)
		if err != nil {
			t.Fatalf("waiting for the pong: %v", err)
		}
		switch m := msg.(type) {
		case *redis.Message:
			got = append(got, m.Channel+" "+m.Payload)
		case *redis.Pong:
			return got
		}
	}
}

// grants checks the grants of one script run: want are the model's, in order; mine are those
// the script returned, for the Client from ("" when it returns none); the others must have
// been published, one message per Client in the order of its first grant, the Client's hold
// ids in order separated by spaces.
func (s *smMachine) grants(t *rapid.T, op, from string, want, mine []string) {
	var wantMine, order []string
	by := map[string][]string{}
	for _, g := range want {
		c := g[:36]
		if c == from {
			wantMine = append(wantMine, g)
			continue
		}
		if by[c] == nil {
			order = append(order, c)
		}
		by[c] = append(by[c], g)
	}
	var wantPub []string
	for _, c := range order {
		wantPub = append(wantPub, layout.GrantChannel(s.keys[0], c)+" "+strings.Join(by[c], " "))
	}
	got := s.published(t)
	s.seen["grants returned"] += len(mine)
	s.seen["grant messages"] += len(got)
	if !slices.Equal(mine, wantMine) || !slices.Equal(got, wantPub) {
		t.Fatalf("%s at %dh: grants returned %v and published %q; model granted %v (returned %v, published %q)",
			op, s.now/model.Time(hour), mine, got, want, wantMine, wantPub)
	}
}

// attempt is the first attempt of a new call.
func (s *smMachine) attempt(t *rapid.T) {
	s.try(t, s.pick(t, func(sl *smSlot) bool { return sl.phase == smIdle }))
}

// retry is a waiting call's next attempt (its fallback timer, or a wakeup).
func (s *smMachine) retry(t *rapid.T) {
	s.try(t, s.pick(t, func(sl *smSlot) bool { return sl.phase == smWaiting }))
}

// try makes sl's next attempt and compares the replies.
func (s *smMachine) try(t *rapid.T, sl *smSlot) {
	first := sl.phase == smIdle
	if first {
		sl.lease = rapid.SampledFrom(smLeases).Draw(t, "lease")
		sl.join = rapid.Bool().Draw(t, "join")
		if sl.mode == model.Exclusive {
			sl.token = rapid.Bool().Draw(t, "token")
		} else {
			switch rapid.IntRange(0, 3).Draw(t, "context") {
			case 0: // the caller holds the write side: a downgrade
				if w, _, ok := s.m.Writer(s.now); ok {
					sl.writerHold = w
				}
			case 1: // the caller's context carries a write hold of the past
				if len(s.oldWrite) > 0 {
					sl.writerHold = rapid.SampledFrom(s.oldWrite).Draw(t, "oldWriter")
				}
			}
		}
	}
	var v any
	var want model.RWAttempt
	if sl.mode == model.Exclusive {
		v = s.run(t, scripts.RWWriteAcquire, s.keys, sl.hold, sl.lease, smTimeout, flag(sl.join), flag(sl.token),
			s.pub, flag(first))
		if first {
			want = s.m.WriteAttempt(s.now, sl.hold, sl.lease, sl.join)
		} else {
			want = s.m.WriteRetry(s.now, sl.hold, sl.lease, sl.join)
		}
	} else {
		v = s.run(t, scripts.RWReadAcquire, s.keys, sl.hold, sl.lease, sl.writerHold, flag(s.fair), smTimeout,
			flag(sl.join), s.pub, flag(first))
		if first {
			want = s.m.ReadAttempt(s.now, sl.hold, sl.lease, sl.writerHold, sl.join)
		} else {
			want = s.m.ReadRetry(s.now, sl.hold, sl.lease, sl.writerHold, sl.join)
		}
	}
	a, err := scripts.DecodeAttempt(v)
	if err != nil {
		t.Fatal(err)
	}
	op := fmt.Sprintf("%v attempt by %s (first %v, join %v, writer %q)", sl.mode, sl.hold, first, sl.join, sl.writerHold)
	if uint8(a.Status) != uint8(want.Status) || !s.near(a.Wait.Milliseconds(), want.Wait) {
		t.Fatalf("%s at %dh: redis %+v, model %+v", op, s.now/model.Time(hour), a, want)
	}
	if tokened := a.Status == scripts.Acquired && sl.mode == model.Exclusive && sl.token; tokened != (a.Token > 0) {
		t.Fatalf("%s: token %d (asked %v)", op, a.Token, sl.token)
	}
	// The script takes the caller's own grant out of the list: its status says it.
	s.grants(t, op, sl.hold[:36], slices.DeleteFunc(slices.Clone(want.Grants), func(g string) bool { return g == sl.hold }), a.Mine)
	s.seen[fmt.Sprintf("%v %v", sl.mode, want.Status)]++
	if !first && !s.fair && sl.mode == model.Shared && want.Status == model.Acquired {
		s.seen["non-fair retry took its read hold"]++
	}
	switch want.Status {
	case model.Acquired, model.Granted:
		sl.phase = smHolding
	case model.Queued:
		sl.phase = smWaiting
	default: // Busy, Dropped: the call returns, or starts over under a new hold id
		s.fresh(sl)
	}
}

// deliver is the grant message reaching a waiting slot whose hold was granted.
func (s *smMachine) deliver(t *rapid.T) {
	sl := s.pick(t, func(sl *smSlot) bool { return sl.phase == smWaiting && s.holds(sl) })
	sl.phase = smHolding
}

func (s *smMachine) heartbeat(t *rapid.T) {
	sl := s.pick(t, func(sl *smSlot) bool { return sl.phase == smWaiting })
	b, err := scripts.DecodeBeat(s.run(t, scripts.RWHeartbeat, s.keys, sl.hold, sl.lease, string(sl.mode), smTimeout, s.pub))
	if err != nil {
		t.Fatal(err)
	}
	want, grants := s.m.Heartbeat(s.now, sl.hold, sl.lease, sl.mode)
	op := fmt.Sprintf("heartbeat of %v %s", sl.mode, sl.hold)
	if uint8(b) != uint8(want) {
		t.Fatalf("%s at %dh: redis %d, model %v", op, s.now/model.Time(hour), b, want)
	}
	s.grants(t, op, "", grants, nil)
	s.seen[fmt.Sprintf("heartbeat %v", want)]++
	switch want {
	case model.BeatGranted:
		sl.phase = smHolding
	case model.BeatDropped:
		s.fresh(sl)
	}
}

// giveUp is a waiting call that ends (its context, its wait bound), or the settling of a
// holding one whose round trip's outcome was unknown.
func (s *smMachine) giveUp(t *rapid.T) {
	sl := s.pick(t, func(sl *smSlot) bool { return sl.phase != smIdle })
	g, err := scripts.DecodeGiveUp(s.run(t, scripts.RWGiveUp, s.keys, sl.hold, sl.lease, string(sl.mode), s.pub))
	if err != nil {
		t.Fatal(err)
	}
	want, grants := s.m.GiveUp(s.now, sl.hold, sl.lease, sl.mode)
	op := fmt.Sprintf("give-up of %v %s", sl.mode, sl.hold)
	if uint8(g) != uint8(want) {
		t.Fatalf("%s at %dh: redis %d, model %v", op, s.now/model.Time(hour), g, want)
	}
	s.grants(t, op, "", grants, nil)
	s.fresh(sl)
}

func (s *smMachine) release(t *rapid.T) {
	sl := s.pick(t, func(sl *smSlot) bool { return sl.phase == smHolding })
	end := rapid.Bool().Draw(t, "end")
	from := sl.hold[:36]
	var r scripts.Release
	var want model.RWRelease
	var merr error
	op := fmt.Sprintf("%v release of %s (end %v)", sl.mode, sl.hold, end)
	switch {
	case sl.mode == model.Exclusive:
		v := s.run(t, scripts.RWWriteRelease, s.keys, sl.hold, flag(end), s.pub)
		var err error
		if r, err = scripts.DecodeRelease(v); err != nil {
			t.Fatal(err)
		}
		want, merr = s.m.WriteRelease(s.now, sl.hold, end)
	case end && s.holds(sl) && !sl.reentered && rapid.Bool().Draw(t, "plain"):
		// The read side's common release: ZREM and LINDEX, and rw_serve when the queue's list is
		// not empty (rwlock's releaseRead).
		ctx := context.Background()
		n, err := s.rdb.ZRem(ctx, s.keys[1], sl.hold).Result()
		if err != nil {
			t.Fatal(err)
		}
		r = scripts.Release{Kind: scripts.NotHeld}
		if n == 1 {
			r = scripts.Release{Kind: scripts.Freed}
			if err := s.rdb.LIndex(ctx, s.keys[3], 0).Err(); err == nil {
				if r, err = scripts.DecodeRelease(s.run(t, scripts.RWServe, s.serveKeys(), s.pub, from)); err != nil {
					t.Fatal(err)
				}
			} else if err != redis.Nil {
				t.Fatal(err)
			}
		}
		op += " by plain commands"
		want, merr = s.m.ReadRelease(s.now, sl.hold, end)
	default:
		// Trusted only while the lease runs: a real caller's local deadline ends before it.
		trusted := s.holds(sl) && rapid.Bool().Draw(t, "trusted")
		v := s.run(t, scripts.RWReadRelease, s.keys, sl.hold, flag(end), s.pub, flag(sl.reentered), flag(trusted))
		var err error
		if r, err = scripts.DecodeRelease(v); err != nil {
			t.Fatal(err)
		}
		op += fmt.Sprintf(" (re-entered %v, trusted %v)", sl.reentered, trusted)
		want, merr = s.m.ReadRelease(s.now, sl.hold, end)
	}
	var wantKind scripts.ReleaseKind
	switch {
	case merr != nil:
		wantKind = scripts.NotHeld
	case want.Count > 0:
		wantKind = scripts.Counted
	default:
		wantKind = scripts.Freed
	}
	if r.Kind != wantKind || (wantKind == scripts.Counted && r.Left != want.Count) {
		t.Fatalf("%s at %dh: redis %+v, model %+v, %v", op, s.now/model.Time(hour), r, want, merr)
	}
	s.grants(t, op, from, want.Grants, r.Mine)
	if wantKind != scripts.Counted {
		s.fresh(sl)
	}
}

func (s *smMachine) reenter(t *rapid.T) {
	sl, want := s.extend(t, "re-entry", scripts.LockReenter, scripts.RWReadReenter, s.m.WriteReenter, s.m.ReadReenter)
	switch {
	case !want:
		s.fresh(sl) // lost: its Client knows now
	case sl.mode == model.Shared:
		sl.reentered = true
	}
}

func (s *smMachine) renew(t *rapid.T) {
	sl, want := s.extend(t, "renewal", scripts.LockRenew, scripts.RWReadRenew, s.m.WriteRenew, s.m.ReadRenew)
	if !want {
		s.fresh(sl)
	}
}

// extend runs op (a re-entry or a renewal) on a holding slot, with a lease drawn too (0:
// none): script w and model call mw on the write side, r and mr on the read side. Redis's
// answer must be the model's, which it returns with the slot.
func (s *smMachine) extend(t *rapid.T, op string, w, r *scripts.Script,
	mw, mr func(now model.Time, hold string, lease int64) bool) (*smSlot, bool) {
	sl := s.pick(t, func(sl *smSlot) bool { return sl.phase == smHolding })
	lease := int64(0)
	if rapid.Bool().Draw(t, "extend") {
		lease = rapid.SampledFrom(smLeases).Draw(t, "lease")
	}
	script, keys, m := w, s.keys[:1], mw
	if sl.mode != model.Exclusive {
		script, keys, m = r, s.keys[1:3], mr
	}
	got, err := script.Run(context.Background(), s.rdb, keys, sl.hold, lease).Int64()
	if err != nil {
		t.Fatal(err)
	}
	want := m(s.now, sl.hold, lease)
	if (got == 1) != want {
		t.Fatalf("%v %s of %s (lease %d) at %dh: redis %d, model %v", sl.mode, op, sl.hold, lease, s.now/model.Time(hour), got, want)
	}
	return sl, want
}

// serveKeys are rw_serve.lua's keys: w, r, q, d.
func (s *smMachine) serveKeys() []string { return []string{s.keys[0], s.keys[1], s.keys[3], s.keys[4]} }

func (s *smMachine) serve(t *rapid.T) {
	from := rapid.SampledFrom(s.clients[:]).Draw(t, "client")
	r, err := scripts.DecodeRelease(s.run(t, scripts.RWServe, s.serveKeys(), s.pub, from))
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != scripts.Freed {
		t.Fatalf("serve: %+v", r)
	}
	s.grants(t, "serve", from, s.m.Serve(s.now), r.Mine)
}

// force is ForceUnlock (every holder), or the release of one hold's whatever it has.
func (s *smMachine) force(t *rapid.T) {
	hold := ""
	if rapid.Bool().Draw(t, "one") {
		hold = s.pick(t, func(sl *smSlot) bool { return sl.phase != smIdle }).hold
	}
	// A read hold whose lease ran out, whose entry is still in the readers' zset.
	expired := hold != "" && s.m.ReaderCount(s.now, hold) == 0 &&
		s.rdb.ZScore(context.Background(), s.keys[1], hold).Err() == nil
	n, _ := s.run(t, scripts.RWForceRelease, s.keys, s.pub, hold).(int64)
	held, grants := s.m.ForceRelease(s.now, hold)
	op := fmt.Sprintf("forced release of %q", hold)
	if (n == 1) != held {
		t.Fatalf("%s at %dh: redis %d, model held %v", op, s.now/model.Time(hour), n, held)
	}
	if expired {
		s.seen["forced release of an expired read hold"]++
	}
	s.grants(t, op, "", grants, nil)
}

// jump moves time to one of the model's next deadlines.
func (s *smMachine) jump(t *rapid.T) {
	var at []model.Time
	if ms, ok := s.m.RemainingWrite(s.now); ok {
		at = append(at, s.now+model.Time(ms))
	}
	for _, h := range s.m.Readers(s.now) {
		ms, _ := s.m.RemainingRead(s.now, h)
		at = append(at, s.now+model.Time(ms))
	}
	for _, w := range s.m.Queue(s.now) {
		at = append(at, w.Deadline)
	}
	if len(at) == 0 {
		t.Skip("nothing runs out")
	}
	to := rapid.SampledFrom(at).Draw(t, "deadline")
	if err := jumpScript.Run(context.Background(), s.rdb, s.keys, int64(to-s.now)).Err(); err != nil {
		t.Fatal(err)
	}
	s.now = to
	s.seen["jumps"]++
}

func (s *smMachine) check(t *rapid.T) {
	*s.checks++
	ctx := context.Background()
	at := fmt.Sprintf("at %dh", s.now/model.Time(hour))

	in, err := scripts.RWInfo.Run(ctx, s.rdb, []string{s.keys[0], s.keys[1], s.keys[4]}).Slice()
	if err != nil {
		t.Fatal(err)
	}
	holder, _ := in[0].(string)
	want, count, held := s.m.Writer(s.now)
	if holder != want || (held && in[1] != int64(count)) {
		t.Fatalf("writer %s: redis %q ×%v, model %q ×%d", at, holder, in[1], want, count)
	}
	if held && !slices.Contains(s.oldWrite, want) {
		s.oldWrite = append(s.oldWrite, want) // for a reader's context to name once it has ended
	}
	if ms, _ := s.m.RemainingWrite(s.now); held && !s.near(in[3].(int64), ms) {
		t.Fatalf("writer %s: redis's lease %d ms, model's %d", at, in[3], ms)
	}
	if in[4] != int64(len(s.m.Readers(s.now))) || in[5] != int64(len(s.m.Queue(s.now))) {
		t.Fatalf("Info %s: %d readers and %d waiters, model %v and %v", at, in[4], in[5], s.m.Readers(s.now), s.m.Queue(s.now))
	}

	snap, err := snapshotScript.Run(ctx, s.rdb, s.keys).Slice()
	if err != nil {
		t.Fatal(err)
	}
	rs, qs, ttls := snap[0].([]any), snap[1].([]any), snap[2].([]any)
	ttl := func(i int) int64 { return ttls[i].(int64) }
	var readers []string
	for i := 0; i < len(rs); i += 3 {
		h, left, extra := rs[i].(string), rs[i+1].(int64), rs[i+2].(int64)
		readers = append(readers, h)
		ms, _ := s.m.RemainingRead(s.now, h)
		if c := s.m.ReaderCount(s.now, h); int64(c) != extra+1 || !s.near(left, ms) {
			t.Fatalf("reader %s %s: redis ×%d for %d ms, model ×%d for %d ms", h, at, extra+1, left, c, ms)
		}
		// Every key lives at least as long as what it holds (rw_read_renew keeps the re-entry
		// counts alive with the hold).
		if ttl(1) < left-2 || (extra > 0 && ttl(2) < left-2) {
			t.Fatalf("reader %s %s: lease %d ms, but the readers' key lives %d ms and the counts' %d", h, at, left, ttl(1), ttl(2))
		}
	}
	slices.Sort(readers)
	if !slices.Equal(readers, s.m.Readers(s.now)) {
		t.Fatalf("readers %s: redis %v, model %v", at, readers, s.m.Readers(s.now))
	}
	var queue, wantQueue []string
	for i := 0; i < len(qs); i += 2 {
		m, left := qs[i].(string), qs[i+1].(int64)
		queue = append(queue, m)
		w := s.m.Queue(s.now)
		if k := len(queue) - 1; k < len(w) && !s.near(left, int64(w[k].Deadline-s.now)) {
			t.Fatalf("waiter %s %s: live %d ms more, model %d", m, at, left, w[k].Deadline-s.now)
		}
		if ttl(3) < left-2 || ttl(4) < left-2 {
			t.Fatalf("waiter %s %s: live %d ms more, but the queue's keys live %d and %d ms", m, at, left, ttl(3), ttl(4))
		}
	}
	for _, w := range s.m.Queue(s.now) {
		wantQueue = append(wantQueue, fmt.Sprintf("%s %d %v", w.Hold, w.Lease, w.Mode))
	}
	if !slices.Equal(queue, wantQueue) {
		t.Fatalf("queue %s: redis %v, model %v", at, queue, wantQueue)
	}
}

func runRWMachine(t *testing.T, rdb redis.UniversalClient) {
	c := newClient(t, rdb)
	_, cluster := rdb.(*redis.ClusterClient)
	pub := "PUBLISH"
	if cluster {
		pub = "SPUBLISH"
	}
	checks, runs := 0, 0
	seen := map[string]int{}
	rapid.Check(t, func(rt *rapid.T) {
		runs++
		fair := rapid.Bool().Draw(rt, "fair")
		var opts []rwlock.Option
		if !fair {
			opts = append(opts, rwlock.WithNonFair())
		}
		l, err := rwlock.New(c, fmt.Sprintf("%s-%d", t.Name(), runs), opts...)
		if err != nil {
			rt.Fatal(err)
		}
		ctx := context.Background()
		s := &smMachine{rdb: rdb, keys: l.Keys(), pub: pub, fair: fair, m: model.NewRW(smTimeout, fair),
			clients: [2]string{uuid.NewString(), uuid.NewString()}, checks: &checks, seen: seen}
		channels := []string{layout.GrantChannel(l.Key(), s.clients[0]), layout.GrantChannel(l.Key(), s.clients[1])}
		if cluster {
			s.ps = rdb.(*redis.ClusterClient).SSubscribe(ctx, channels...)
		} else {
			s.ps = rdb.Subscribe(ctx, channels...)
		}
		defer s.ps.Close()
		for range channels {
			if _, err := s.ps.ReceiveTimeout(ctx, 5*time.Second); err != nil { // the confirmations
				rt.Fatal(err)
			}
		}
		for _, mode := range []model.Mode{model.Exclusive, model.Exclusive, model.Exclusive, model.Shared, model.Shared, model.Shared} {
			sl := &smSlot{mode: mode}
			s.fresh(sl)
			s.slots = append(s.slots, sl)
		}
		defer rdb.Del(ctx, s.keys...)
		s.start = time.Now()
		actions := map[string]func(*rapid.T){
			"attempt":   s.attempt,
			"retry":     s.retry,
			"deliver":   s.deliver,
			"heartbeat": s.heartbeat,
			"giveUp":    s.giveUp,
			"release":   s.release,
			"reenter":   s.reenter,
			"renew":     s.renew,
			"serve":     s.serve,
			"force":     s.force,
			"jump":      s.jump,
			"":          s.check,
		}
		// Three rounds of about rapid.steps steps each: deep enough for a queue of readers and
		// writers behind a writer and its downgrade.
		for range 3 {
			rt.Repeat(actions)
		}
		redistest.AssertNoKeyWithoutTTL(lintest.InRapid(t, rt), rdb, l.Name(), l.Key())
	})
	if runs < 100 {
		t.Fatalf("only %d runs", runs)
	}
	t.Logf("%d runs, %d state checks; seen: %v", runs, checks, seen)
}

func TestRWLockAgreesWithModel(t *testing.T) {
	topologies(t, runRWMachine)
}
