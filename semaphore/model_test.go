package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/scripts"
	"github.com/redaqs/aqs/internal/testkit/lintest"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/model"
	"github.com/redaqs/aqs/semaphore"
)

// The model-versus-Redis state machines of the two semaphores: the same operations go to the
// semaphore's scripts on Redis and to model.Sem or model.Leased, and every reply, every
// message published and the permits, queue and grants after each step are compared.
//
//   - Counting (model.Sem): TrySetPermits and AddPermits (sem_set), attempts with and without
//     joining the queue (sem_acquire, after sem_try on the uncontended path), the
//     waiters' heartbeats one by one or in a Client's batch (sem_heartbeat) and giving up
//     (sem_give_up), anonymous releases (sem_release), Drain (sem_drain), a waiter collecting
//     its grant from the message, and time passing.
//   - Leased (model.Leased): the same, with leased permits released in part or in full
//     (lsem_release) or by their id (lsem_release_id, each run twice: the second run answers
//     as the first and changes nothing), renewed or checked (lsem_renew, which tells a permit
//     released by its id from one that ran out), and counted (lsem_available).
//
// Each runs as a rapid state machine ("random"), and through a few fixed scenarios that a
// random run would hardly ever build (a waiter that died in the middle of the queue coming
// back, a head rejected when the total shrinks), with the same comparisons after every step.
//
// Holds come from two fake Clients, so that some grants go back to the caller in the script's
// reply (those of its own Client) and the others are published on the Clients' channels, all
// of which the machine subscribes to. A hold id is fresh for every acquisition: once it
// acquired, gave up, failed with an error or was dropped it is never used again, and a hold
// always asks for the same n (and lease), as the real Client's holds do. A hold's first
// attempt says so (the scripts' retry flag "0"), every later one says it attempted before
// ("1"). A later attempt that must wait, by a hold that is no longer a live waiter (its
// waiter died, it was never queued, or its grant is gone), is dropped (status 5): the slot
// then starts over under a new hold id, with the same n and lease, as the real Client does.
//
// Every reply is read through the decoders of internal/scripts (DecodeAttempt, DecodeSem,
// DecodeBeat) and compared, status for status, with the model's reply.
//
// # Time
//
// The model's clock starts at 0 and moves only when the machine lets time pass, by a whole
// number of units (smUnit, a minute). Redis cannot be told the time, so letting Δ pass moves
// Redis's view instead: every score kept in server time (the waiters' deadlines in d, the
// grant records in g, the leases in p) is lowered by Δ, which is exactly what Δ of server time
// passing does to the scripts, which only ever compare those scores with their own now.
// Leases and the waiter timeout are whole units too, so every deadline and expiry is, in the
// model, a whole number of units away from its now: either passed (0 or less), in both, or at
// least a unit ahead. In Redis the same distance is shorter by the real time since the score
// was written, which stays far below a unit (a run takes well under a second, and the
// invariant fails loudly past a quarter unit), so whatever is live in the model is live in
// Redis and whatever is dead in the model is dead in Redis. The leased semaphore's hints and
// its permits' expiries are compared within that real elapsed time.
//
// Everything about expiry is exercised this way: waiters dying in the queue (and their holds'
// later attempts dropped), grant records vanishing with their permits still taken,
// permits running out and coming back to waiters at the next attempt or heartbeat, grants
// whose lease is cut to the waiter's deadline. Key TTLs (q and d live twice the waiter
// timeout, g until its latest deadline) are in real time and never run out during a run.

const (
	smUnit    = int64(time.Minute / time.Millisecond) // every time is a whole number of these ms
	smTimeout = 3 * smUnit                            // the waiter timeout

	smGate = 1 << 50 // GATE in internal/scripts/_csem.lua
)

// smShift lowers every score of the zsets KEYS by ARGV[1] ms: time passes.
var smShift = redis.NewScript(`
for _, k in ipairs(KEYS) do
  local e = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES')
  for i = 1, #e, 2 do
    redis.call('ZADD', k, string.format('%d', tonumber(e[i + 1]) - tonumber(ARGV[1])), e[i])
  end
end
return 0
`)

// smSlot is one caller of the semaphore: a hold with its n (and lease), fresh after each
// acquisition.
type smSlot struct {
	hold    string
	n       int64
	lease   int64 // ms, leased only
	tried   bool  // the hold attempted: its next attempt passes retry "1"
	granted bool  // a dispatch granted it the permits and it did not act since
}

// smHarness is what both machines share: the Redis side, the two Clients, the clock and the
// slots.
type smHarness struct {
	rdb     redis.UniversalClient
	ps      *redis.PubSub
	pub     string
	clients [2]string
	chans   map[string]int // the Clients' channels: channel -> client index
	seq     int
	now     model.Time
	start   time.Time // real time at the start of the run
	timed   []string  // the zsets scored in server time
	slots   []*smSlot
	nOf     map[string]int64 // every hold's n
	checks  *int
	stats   map[string]int // how often each outcome was seen, logged to show what was covered
}

// setup subscribes to the Clients' channels of the semaphore at key, and makes slots slots,
// each given its hold by fresh.
func (h *smHarness) setup(t rapid.TB, rdb redis.UniversalClient, key string, timed []string, checks *int,
	stats map[string]int, slots int, fresh func(sl *smSlot)) {
	h.rdb, h.timed, h.checks, h.stats = rdb, timed, checks, stats
	h.clients = [2]string{uuid.NewString(), uuid.NewString()}
	h.chans = map[string]int{}
	var chans []string
	for i, c := range h.clients {
		ch := key + ":c:" + c
		h.chans[ch] = i
		chans = append(chans, ch)
	}
	ctx := context.Background()
	h.pub = "PUBLISH"
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		h.pub = "SPUBLISH"
		h.ps = cc.SSubscribe(ctx, chans...)
	} else {
		h.ps = rdb.Subscribe(ctx, chans...)
	}
	for range chans {
		if _, err := h.ps.ReceiveTimeout(ctx, 5*time.Second); err != nil { // the confirmations
			t.Fatal(err)
		}
	}
	h.nOf = map[string]int64{}
	for range slots {
		sl := &smSlot{}
		fresh(sl)
		h.slots = append(h.slots, sl)
	}
	h.start = time.Now()
}

// assign gives a slot a fresh hold asking for n permits for lease ms. Holds alternate
// between the two Clients.
func (h *smHarness) assign(sl *smSlot, n, lease int64) {
	h.seq++
	*sl = smSlot{hold: fmt.Sprintf("%s:%d", h.clients[h.seq%2], h.seq), n: n, lease: lease}
	h.nOf[sl.hold] = n
}

// restart gives a slot a fresh hold with the same n and lease: the caller of a hold that was
// dropped starts over.
func (h *smHarness) restart(sl *smSlot) {
	h.assign(sl, sl.n, sl.lease)
}

// renew gives a slot a fresh hold with a drawn n and lease.
func (h *smHarness) renew(t *rapid.T, sl *smSlot) {
	n := rapid.SampledFrom([]int64{2, 1, 2, 1, 3}).Draw(t, "n")
	h.assign(sl, n, rapid.SampledFrom([]int64{3, 4, 1, 2}).Draw(t, "lease units")*smUnit)
}

func (h *smHarness) slot(t *rapid.T) *smSlot {
	return h.slots[rapid.IntRange(0, len(h.slots)-1).Draw(t, "slot")]
}

// waiter draws a slot, mostly one that waits or was granted (queued is the model's queue),
// so that heartbeats and giving up mostly find something to do.
func (h *smHarness) waiter(t *rapid.T, queued []string) *smSlot {
	var waiting []*smSlot
	for _, sl := range h.slots {
		if sl.granted || slices.Contains(queued, sl.hold) {
			waiting = append(waiting, sl)
		}
	}
	if len(waiting) == 0 || rapid.IntRange(0, 3).Draw(t, "any slot") == 3 {
		return h.slot(t)
	}
	return waiting[rapid.IntRange(0, len(waiting)-1).Draw(t, "waiter")]
}

// beats draws the slots to heartbeat, in order: one slot, or, as a real Client does, every
// hold of one Client that attempted (queued is the model's queue).
func (h *smHarness) beats(t *rapid.T, queued []string) []*smSlot {
	if rapid.SampledFrom([]bool{true, false}).Draw(t, "batch") {
		i := rapid.IntRange(0, 1).Draw(t, "client")
		var batch []*smSlot
		for _, sl := range h.slots {
			if sl.tried && sl.hold[:36] == h.clients[i] {
				batch = append(batch, sl)
			}
		}
		if len(batch) > 0 {
			return batch
		}
	}
	return []*smSlot{h.waiter(t, queued)}
}

// caller draws the Client of a release or a change of permits.
func (h *smHarness) caller(t *rapid.T) string {
	return h.clients[rapid.IntRange(0, 1).Draw(t, "client")]
}

// advance lets a drawn number of units of time pass.
func (h *smHarness) advance(t *rapid.T) {
	h.pass(t, rapid.Int64Range(1, 3).Draw(t, "units")*smUnit)
}

// pass lets d ms (whole units) pass, in the model and in Redis.
func (h *smHarness) pass(t rapid.TB, d int64) {
	if err := smShift.Run(context.Background(), h.rdb, h.timed, d).Err(); err != nil {
		t.Fatal(err)
	}
	h.now += model.Time(d)
}

// run runs a script and returns its reply, failing on an error.
func (h *smHarness) run(t rapid.TB, sc *scripts.Script, keys []string, args ...any) any {
	v, err := sc.Run(context.Background(), h.rdb, keys, args...).Result()
	if err != nil {
		t.Fatalf("%s: %v", sc.Name(), err)
	}
	return v
}

// attemptReply runs an attempt script (sem_acquire, lsem_acquire) and decodes its reply.
func (h *smHarness) attemptReply(t rapid.TB, sc *scripts.Script, keys []string, args ...any) scripts.Attempt {
	a, err := scripts.DecodeAttempt(h.run(t, sc, keys, args...))
	if err != nil {
		t.Fatalf("%s: %v", sc.Name(), err)
	}
	return a
}

// semReply runs a semaphore script that is not an attempt and decodes its reply.
func (h *smHarness) semReply(t rapid.TB, sc *scripts.Script, keys []string, args ...any) scripts.Sem {
	r, err := scripts.DecodeSem(h.run(t, sc, keys, args...))
	if err != nil {
		t.Fatalf("%s: %v", sc.Name(), err)
	}
	return r
}

// beatReply runs a heartbeat script and decodes its reply.
func (h *smHarness) beatReply(t rapid.TB, sc *scripts.Script, keys []string, args ...any) scripts.BeatStatus {
	b, err := scripts.DecodeBeat(h.run(t, sc, keys, args...))
	if err != nil {
		t.Fatalf("%s: %v", sc.Name(), err)
	}
	return b
}

// int runs a script whose reply is one integer (sem_try, sem_drain, lsem_renew: none has a
// decoder, each its own meaning).
func (h *smHarness) int(t rapid.TB, sc *scripts.Script, keys []string, args ...any) int64 {
	r, err := sc.Run(context.Background(), h.rdb, keys, args...).Int64()
	if err != nil {
		t.Fatalf("%s: %v", sc.Name(), err)
	}
	return r
}

// smAttemptAgrees reports whether an attempt script's status is the model's reply: the
// statuses of both are numbered alike; NotSet and TooMany are the model's errors.
func smAttemptAgrees(st scripts.Status, a model.SemAttempt, err error) bool {
	switch st {
	case scripts.NotSet:
		return errors.Is(err, model.ErrNotSet)
	case scripts.TooMany:
		return errors.Is(err, model.ErrTooManyPermits)
	}
	return err == nil && model.Status(st) == a.Status
}

// smAddAgrees reports whether sem_set's "add" reply is the model's.
func smAddAgrees(r scripts.Sem, err error) bool {
	return r.Status == scripts.SemOK && r.Value == 1 && err == nil ||
		r.Status == scripts.SemInsufficient && errors.Is(err, model.ErrInsufficientPermits)
}

// smOutcome is what an attempt's reply means for its hold.
type smOutcome int

const (
	smGoesOn  smOutcome = iota // queued, or busy: the hold may attempt again
	smOver                     // it has its permits, or failed with an error
	smDropped                  // it starts over under a new hold id
)

func outcome(a model.SemAttempt, err error) smOutcome {
	switch {
	case err == nil && a.Status == model.Dropped:
		return smDropped
	case err != nil || a.Status == model.Acquired || a.Status == model.Granted:
		return smOver
	}
	return smGoesOn
}

// next gives a slot whose hold is over a fresh hold with a drawn n and lease, and one that was
// dropped a fresh hold with the same n and lease (its caller starts over).
func (h *smHarness) next(t *rapid.T, sl *smSlot, o smOutcome) {
	switch o {
	case smOver:
		h.renew(t, sl)
	case smDropped:
		h.restart(sl)
	}
}

func smFlag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// messages returns the messages published on the Clients' channels since the last call,
// "<client index>:<payload>" in order: the PING's reply comes after every message published
// before it reached Redis.
func (h *smHarness) messages(t rapid.TB) []string {
	ctx := context.Background()
	if err := h.ps.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for {
		msg, err := h.ps.ReceiveTimeout(ctx, 5*time.Second)
		if err != nil {
			t.Fatalf("waiting for the pong: %v", err)
		}
		switch m := msg.(type) {
		case *redis.Message:
			i, ok := h.chans[m.Channel]
			if !ok {
				t.Fatalf("message %q on unexpected channel %q", m.Payload, m.Channel)
			}
			msgs = append(msgs, fmt.Sprintf("%d:%s", i, m.Payload))
		case *redis.Pong:
			return msgs
		}
	}
}

func (h *smHarness) clientOf(t rapid.TB, hold string) int {
	i := slices.Index(h.clients[:], hold[:36])
	if i < 0 {
		t.Fatalf("hold %q of no Client", hold)
	}
	return i
}

// events compares what one step did with the model's events: the grants to holds of Client
// from (the caller's; "" for a heartbeat, which publishes all) must be the hold ids returned
// in the reply, in queue order, the other grants published, each on its Client's channel, in
// queue order, and each rejected head must have woken its Client with "*", in order. It then
// marks the slots granted.
func (h *smHarness) events(t rapid.TB, op string, ev model.SemEvents, from string, mine []string) {
	msgs := h.messages(t)
	var wantMine, wantGrants, gotGrants, wantWakes, gotWakes []string
	for _, hold := range ev.Granted {
		if from != "" && hold[:36] == from {
			wantMine = append(wantMine, hold)
		} else {
			wantGrants = append(wantGrants, fmt.Sprintf("%d:%s", h.clientOf(t, hold), hold))
		}
	}
	for _, hold := range ev.Rejected {
		wantWakes = append(wantWakes, fmt.Sprintf("%d:*", h.clientOf(t, hold)))
	}
	for _, m := range msgs {
		if strings.HasSuffix(m, ":*") {
			gotWakes = append(gotWakes, m)
		} else {
			gotGrants = append(gotGrants, m)
		}
	}
	if fmt.Sprint(mine) != fmt.Sprint(wantMine) || fmt.Sprint(gotGrants) != fmt.Sprint(wantGrants) ||
		fmt.Sprint(gotWakes) != fmt.Sprint(wantWakes) {
		t.Fatalf("%s (caller's Client %q): redis returned %v and published %v; model events %+v",
			op, from, mine, msgs, ev)
	}
	h.stats["grant returned"] += len(mine)
	h.stats["grant published"] += len(gotGrants)
	h.stats["rejected"] += len(gotWakes)
	for _, sl := range h.slots {
		if slices.Contains(ev.Granted, sl.hold) {
			sl.granted = true
		}
	}
}

// collect is a granted waiter taking its grant from the message: its hold is over (a counting
// semaphore's grant record stays until the waiter's deadline, as with the real Client).
func (h *smHarness) collect(t *rapid.T, took func(sl *smSlot)) {
	sl := h.slot(t)
	if !sl.granted {
		t.Skip("not granted")
	}
	took(sl)
	h.renew(t, sl)
}

// smSnapshot is what the invariant reads of Redis in one pipeline: its time in ms and the
// queue (list and deadlines).
type smSnapshot struct {
	now       int64
	members   []string
	deadlines []redis.Z
}

// read reads a snapshot, queueing more commands in the pipeline, and checks that the run is
// still short enough for the mapping of time (see the top of the file).
func (h *smHarness) read(t rapid.TB, q, d string, more func(p redis.Pipeliner)) smSnapshot {
	*h.checks++
	if el := time.Since(h.start); el.Milliseconds() > smUnit/4 {
		t.Fatalf("the run took %v: too long for the mapping of time", el)
	}
	ctx := context.Background()
	p := h.rdb.Pipeline()
	tm := p.Time(ctx)
	lr := p.LRange(ctx, q, 0, -1)
	zd := p.ZRangeWithScores(ctx, d, 0, -1)
	more(p)
	cmds, _ := p.Exec(ctx)
	for _, c := range cmds {
		if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("%v: %v", c.Args(), err)
		}
	}
	return smSnapshot{now: tm.Val().UnixMilli(), members: lr.Val(), deadlines: zd.Val()}
}

// near reports whether a remaining time read in Redis, got, is the model's, want, less the
// real time passed since it was set (at most since the start of the run).
func (h *smHarness) near(want, got int64) bool {
	if want <= 0 {
		return got == 0
	}
	return got <= want && got >= want-time.Since(h.start).Milliseconds()-200
}

// liveQueue returns the live waiters in Redis: list order, entries whose deadline is after
// now (dead entries and ghosts stay in the list until they reach the head). It also checks
// that the queue holds every live member once.
func (h *smHarness) liveQueue(t rapid.TB, r smSnapshot) []string {
	deadline := map[string]float64{}
	for _, z := range r.deadlines {
		deadline[z.Member.(string)] = z.Score
	}
	var live []string
	h.stats["queued"] += min(len(deadline), 1)
	for _, m := range r.members {
		if sc, ok := deadline[m]; ok && int64(sc) > r.now {
			if slices.Contains(live, smHoldOf(t, m)) {
				t.Fatalf("member %q twice in the queue %v", m, r.members)
			}
			live = append(live, smHoldOf(t, m))
		} else if ok {
			h.stats["dead waiter in list"]++
		}
	}
	for m, sc := range deadline {
		if int64(sc) > r.now && !slices.Contains(r.members, m) {
			t.Fatalf("live waiter %q not in the queue %v", m, r.members)
		}
	}
	return live
}

// smHoldOf returns the hold id of a queue or grant member "hold n [lease]".
func smHoldOf(t rapid.TB, m string) string {
	i := strings.IndexByte(m[min(37, len(m)):], ' ')
	if len(m) < 38 || i < 0 {
		t.Fatalf("malformed member %q", m)
	}
	return m[:37+i]
}

// smMachine is what runSmMachine needs of a semaphore's machine.
type smMachine interface {
	harness() *smHarness
	set(t rapid.TB, k int64, from string)
	check(t rapid.TB)
	cleanup()
	noKeyWithoutTTL(t testing.TB)
	// actions are the machine's steps for rt.Repeat: rapid draws them in the order of their
	// names, the first ones more often.
	actions() map[string]func(*rapid.T)
}

func (h *smHarness) harness() *smHarness { return h }

// newSmMachine makes a machine (newSemMachine, newLsemMachine).
type newSmMachine[M smMachine] func(t rapid.TB, c *aqs.Client, rdb redis.UniversalClient, name string,
	checks *int, stats map[string]int, slots int, fresh func(h *smHarness, sl *smSlot)) M

// runSmMachine runs a machine's random runs, then its fixed scenarios.
func runSmMachine[M smMachine](t *testing.T, rdb redis.UniversalClient, newM newSmMachine[M], scenarios []smScenario[M]) {
	c := newClient(t, rdb)
	name := redistest.Name(t)
	checks, runs, stats := 0, 0, map[string]int{}
	start := time.Now()
	t.Run("random", func(t *testing.T) {
		rapid.Check(t, func(rt *rapid.T) {
			runs++
			s := newM(rt, c, rdb, fmt.Sprintf("%s-%d", name, runs), &checks, stats, 6,
				func(h *smHarness, sl *smSlot) { h.renew(rt, sl) })
			defer s.cleanup()
			// Most runs start with permits set, so that most steps do more than fail.
			if k := rapid.SampledFrom([]int64{3, 2, 4, 1, 0, -1}).Draw(rt, "initial permits"); k >= 0 {
				s.set(rt, k, s.harness().clients[0])
			}
			rt.Repeat(s.actions())
			s.noKeyWithoutTTL(lintest.InRapid(t, rt))
		})
		if runs < 100 {
			t.Fatalf("only %d runs", runs)
		}
		t.Logf("%d runs, %d state checks in %v; outcomes %v", runs, checks, time.Since(start), stats)
	})
	for i, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			s := newM(t, c, rdb, fmt.Sprintf("%s-s%d", name, i), &checks, stats, len(sc.slots),
				func(h *smHarness, sl *smSlot) {
					v := sc.slots[len(h.slots)]
					h.assign(sl, v[0], v[1]*smUnit)
				})
			defer s.cleanup()
			s.check(t)
			for _, step := range sc.steps {
				step(t, s)
				s.check(t)
			}
			s.noKeyWithoutTTL(t)
		})
	}
}

// smScenario is a fixed sequence of steps on a machine; the machine's invariant runs after
// each. Its slots are made with the n and lease given.
type smScenario[M any] struct {
	name  string
	slots [][2]int64 // n, lease units
	steps []func(t rapid.TB, m M)
}

// dropped checks that a scenario's attempt by slot sl was dropped, and starts the slot over
// under a new hold id, as its caller would.
func (h *smHarness) dropped(t rapid.TB, sl *smSlot, o smOutcome) {
	if o != smDropped {
		t.Fatalf("scenario: the attempt of %s was not dropped", sl.hold)
	}
	h.restart(sl)
}

// queueIs checks that the model's queue is the holds of slots, in order: a scenario checks
// that it built what it means to test.
func (h *smHarness) queueIs(t rapid.TB, queue []string, slots ...int) {
	var want []string
	for _, i := range slots {
		want = append(want, h.slots[i].hold)
	}
	if fmt.Sprint(queue) != fmt.Sprint(want) {
		t.Fatalf("scenario: the model's queue is %v, not slots %v", queue, slots)
	}
}

// The counting semaphore.

type semMachine struct {
	smHarness
	keys []string // s, q, d, g
	m    *model.Sem
}

func newSemMachine(t rapid.TB, c *aqs.Client, rdb redis.UniversalClient, name string, checks *int,
	stats map[string]int, slots int, fresh func(h *smHarness, sl *smSlot)) *semMachine {
	sem, err := semaphore.New(c, name)
	if err != nil {
		t.Fatal(err)
	}
	keys := sem.Keys()
	s := &semMachine{keys: keys, m: model.NewSem(smTimeout)}
	s.setup(t, rdb, sem.Key(), []string{keys[2], keys[3]}, checks, stats, slots,
		func(sl *smSlot) { fresh(&s.smHarness, sl) })
	return s
}

func (s *semMachine) cleanup() {
	s.ps.Close()
	s.rdb.Del(context.Background(), s.keys...)
}

// noKeyWithoutTTL checks that the queue's keys (q, d) expire; s has no TTL by design (the
// permits are configuration), nor has g (grant records, which belong with s: see _csem.lua).
func (s *semMachine) noKeyWithoutTTL(t testing.TB) { queueKeysExpire(t, s.rdb, s.keys) }

func (s *semMachine) trySet(t *rapid.T) {
	s.set(t, rapid.Int64Range(0, 4).Draw(t, "k"), s.caller(t))
}

func (s *semMachine) set(t rapid.TB, k int64, from string) {
	r := s.semReply(t, scripts.SemSet, s.keys, "set", k, s.pub, from, "c")
	if want := s.m.TrySetPermits(s.now, k); r.Status != scripts.SemOK || (r.Value == 1) != want {
		t.Fatalf("TrySetPermits(%d): redis %+v, model %v", k, r, want)
	}
	s.events(t, "TrySetPermits", model.SemEvents{}, "", nil)
}

func (s *semMachine) add(t *rapid.T) {
	s.addPermits(t, rapid.SampledFrom([]int64{1, -1, 2, -2, 0, 3, -3}).Draw(t, "delta"), s.caller(t))
}

func (s *semMachine) addPermits(t rapid.TB, delta int64, from string) {
	r := s.semReply(t, scripts.SemSet, s.keys, "add", delta, s.pub, from, "c")
	ev, err := s.m.AddPermits(s.now, delta)
	op := fmt.Sprintf("AddPermits(%d)", delta)
	if !smAddAgrees(r, err) {
		t.Fatalf("%s: redis %+v, model %v", op, r, err)
	}
	s.stats[fmt.Sprintf("add %d", r.Status)]++
	s.events(t, op, ev, from, r.Mine)
}

func (s *semMachine) attempt(t *rapid.T) {
	sl := s.slot(t)
	enqueue := rapid.SampledFrom([]bool{true, true, false}).Draw(t, "enqueue")
	s.next(t, sl, s.try(t, sl, enqueue, !sl.tried && rapid.Bool().Draw(t, "quick")))
}

// try is one attempt by a slot's hold, and reports what that means for its hold (see
// outcome). A hold's first attempt may go, with quick, as the real Client's does when it has
// no waiters: sem_try first, which takes the permits or changes nothing, then sem_acquire when
// it did not take them.
func (s *semMachine) try(t rapid.TB, sl *smSlot, enqueue, quick bool) smOutcome {
	args := []any{sl.hold, sl.n, smTimeout, smFlag(enqueue), s.pub, smFlag(sl.tried)}
	r := scripts.Attempt{Status: scripts.Acquired}
	if !quick || s.int(t, scripts.SemTry, s.keys[:1], sl.n) == 0 {
		r = s.attemptReply(t, scripts.SemAcquire, s.keys, args...)
	}
	a, ev, err := s.m.Attempt(s.now, sl.hold, sl.n, !sl.tried, enqueue)
	op := fmt.Sprintf("attempt by %s of %d (enqueue %v, retry %v, quick %v)", sl.hold, sl.n, enqueue, sl.tried, quick)
	if !smAttemptAgrees(r.Status, a, err) || r.Wait != 0 || r.Token != 0 {
		t.Fatalf("%s: redis %+v, model %+v %v", op, r, a, err)
	}
	sl.tried, sl.granted = true, false
	s.stats["acquire "+r.Status.String()]++
	s.events(t, op, ev, sl.hold[:36], r.Mine)
	return outcome(a, err)
}

func (s *semMachine) heartbeat(t *rapid.T) {
	for _, sl := range s.beats(t, s.m.Queue(s.now)) {
		if s.beat(t, sl) {
			s.renew(t, sl)
		}
	}
}

// beat is one heartbeat of a slot's hold; it reports whether the hold is over (it found its
// grant).
func (s *semMachine) beat(t rapid.TB, sl *smSlot) bool {
	r := s.beatReply(t, scripts.SemHeartbeat, s.keys, sl.hold, sl.n, smTimeout, s.pub)
	want, ev := s.m.Heartbeat(s.now, sl.hold)
	op := fmt.Sprintf("heartbeat of %s", sl.hold)
	if model.BeatStatus(r) != want {
		t.Fatalf("%s: redis %d, model %v", op, r, want)
	}
	sl.granted = false
	s.stats["heartbeat "+want.String()]++
	s.events(t, op, ev, "", nil)
	return r == scripts.BeatGranted
}

func (s *semMachine) giveUp(t *rapid.T) {
	sl := s.waiter(t, s.m.Queue(s.now))
	s.leave(t, sl)
	s.renew(t, sl)
}

// leave is a slot's hold giving up; its hold is over.
func (s *semMachine) leave(t rapid.TB, sl *smSlot) {
	r := s.semReply(t, scripts.SemGiveUp, s.keys, sl.hold, sl.n, s.pub)
	back, ev := s.m.GiveUp(s.now, sl.hold)
	op := fmt.Sprintf("give up by %s of %d", sl.hold, sl.n)
	if r.Status != scripts.SemOK || r.Value != back {
		t.Fatalf("%s: redis %+v, model gave back %d", op, r, back)
	}
	sl.granted = false
	s.stats[fmt.Sprintf("give up back %v", back > 0)]++
	s.events(t, op, ev, sl.hold[:36], r.Mine)
}

// grantRecords returns the permits of the unexpired grant records.
func (s *semMachine) grantRecords() int64 {
	var n int64
	for _, h := range s.m.Granted(s.now) {
		n += s.nOf[h]
	}
	return n
}

func (s *semMachine) release(t *rapid.T) {
	total, _ := s.m.Total(s.now)
	out := total - s.m.Available(s.now) // permits taken: held, granted, or lost with a record
	n := rapid.Int64Range(1, out+1).Draw(t, "n")
	// A known divergence: the model's GiveUp caps the available permits at the total before
	// it dispatches; the scripts dispatch first and cap only what they store. The cap matters
	// only once an anonymous release has put back permits that an outstanding grant record
	// still counts as taken, after which giving up that grant would make more than the total
	// available. So releases never eat into the permits of the grant records (they may still
	// overflow the total: ErrOverRelease).
	if n <= out && n > out-s.grantRecords() {
		t.Skip("the release would put back permits of an outstanding grant")
	}
	s.put(t, n, s.caller(t))
}

// put is an anonymous release of n permits by a caller of Client from.
func (s *semMachine) put(t rapid.TB, n int64, from string) {
	r := s.semReply(t, scripts.SemRelease, s.keys, n, s.pub, from)
	ev, err := s.m.Release(s.now, n)
	op := fmt.Sprintf("release of %d", n)
	switch {
	case r.Status == scripts.SemOK && err == nil, r.Status == scripts.SemNotSet && errors.Is(err, model.ErrNotSet),
		r.Status == scripts.SemOverRelease && errors.Is(err, model.ErrOverRelease):
	default:
		t.Fatalf("%s: redis %+v, model %v", op, r, err)
	}
	s.stats[fmt.Sprintf("release %d", r.Status)]++
	s.events(t, op, ev, from, r.Mine)
}

func (s *semMachine) drain(t rapid.TB) {
	r := s.int(t, scripts.SemDrain, s.keys[:1])
	if want := s.m.Drain(s.now); r != want {
		t.Fatalf("drain: redis %d, model %d", r, want)
	}
	s.events(t, "drain", model.SemEvents{}, "", nil)
}

func (s *semMachine) check(t rapid.TB) {
	ctx := context.Background()
	var hv *redis.SliceCmd
	var zg *redis.ZSliceCmd
	r := s.read(t, s.keys[1], s.keys[2], func(p redis.Pipeliner) {
		hv = p.HMGet(ctx, s.keys[0], "t", "a", "q")
		zg = p.ZRangeWithScores(ctx, s.keys[3], 0, -1)
	})
	v := hv.Val()
	total, set := s.m.Total(s.now)
	if (v[0] != nil) != set || set && v[0] != fmt.Sprint(total) {
		t.Fatalf("total: redis %v, model %d (set %v)", v[0], total, set)
	}
	// a is kept smGate lower while the queue flag is set (see _csem.lua).
	raw, _ := v[1].(string)
	got, err := strconv.ParseInt(raw, 10, 64)
	if err != nil && v[1] != nil {
		t.Fatalf("available: redis %q", raw)
	}
	if v[2] != nil {
		got += smGate
	}
	avail := s.m.Available(s.now)
	if got != avail {
		t.Fatalf("available: redis %v (queue flag %v), model %d", v[1], v[2], avail)
	}
	queue := s.m.Queue(s.now)
	if live := s.liveQueue(t, r); fmt.Sprint(live) != fmt.Sprint(queue) {
		t.Fatalf("queue: redis %v, model %v", live, queue)
	}
	if len(queue) > 0 && v[2] == nil {
		t.Fatalf("queue %v but no queue flag", queue)
	}
	var granted []string
	for _, z := range zg.Val() {
		if int64(z.Score) > r.now {
			granted = append(granted, smHoldOf(t, z.Member.(string)))
		}
	}
	slices.Sort(granted)
	if fmt.Sprint(granted) != fmt.Sprint(s.m.Granted(s.now)) {
		t.Fatalf("grant records: redis %v, model %v", granted, s.m.Granted(s.now))
	}
	if g := s.grantRecords(); total-avail < g {
		t.Fatalf("grant records of %d permits, but only %d taken", g, total-avail)
	}
}

func (s *semMachine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"0 attempt":   s.attempt, // twice: attempts make the queue
		"1 attempt":   s.attempt,
		"2 heartbeat": s.heartbeat,
		"3 release":   s.release,
		"4 add":       s.add,
		"5 giveUp":    s.giveUp,
		"6 advance":   s.advance,
		"7 collect":   func(t *rapid.T) { s.collect(t, func(*smSlot) {}) },
		"8 drain":     func(t *rapid.T) { s.drain(t) },
		"9 trySet":    s.trySet,
		"":            func(t *rapid.T) { s.check(t) },
	}
}

func runSemMachine(t *testing.T, rdb redis.UniversalClient) {
	runSmMachine(t, rdb, newSemMachine, semScenarios)
}

// semScenarios are fixed runs of the counting semaphore's machine. Holds alternate between
// the Clients: slots 0, 2, 4 are one Client's, 1, 3, 5 the other's.
var semScenarios = []smScenario[*semMachine]{{
	// Waiters A, B, C (slots 1, 2, 3) queue behind a holder; A heartbeats, B does not and
	// dies while A and C live. B's entry is still in the list between them, dead: B's
	// heartbeat does not revive it, and B's next attempt is dropped, changing nothing. B
	// starts over under a new hold id, a new arrival at the tail, behind C, and is served
	// last.
	name:  "dead waiter in mid-queue is dropped and starts over at the tail",
	slots: [][2]int64{{2, 1}, {1, 1}, {1, 1}, {1, 1}},
	steps: []func(rapid.TB, *semMachine){
		func(t rapid.TB, s *semMachine) { s.set(t, 2, s.clients[0]) },
		func(t rapid.TB, s *semMachine) { s.try(t, s.slots[0], true, true) }, // the holder takes both
		func(t rapid.TB, s *semMachine) { s.try(t, s.slots[1], true, false) },
		func(t rapid.TB, s *semMachine) { s.try(t, s.slots[2], true, true) },
		func(t rapid.TB, s *semMachine) { s.pass(t, smUnit) },
		func(t rapid.TB, s *semMachine) { s.try(t, s.slots[3], true, false) },
		func(t rapid.TB, s *semMachine) { s.beat(t, s.slots[1]) },
		func(t rapid.TB, s *semMachine) { s.pass(t, 2*smUnit) },
		func(t rapid.TB, s *semMachine) { s.queueIs(t, s.m.Queue(s.now), 1, 3) }, // B is dead
		func(t rapid.TB, s *semMachine) { s.beat(t, s.slots[2]) },                // and not revived
		func(t rapid.TB, s *semMachine) { s.dropped(t, s.slots[2], s.try(t, s.slots[2], true, false)) },
		func(t rapid.TB, s *semMachine) { s.queueIs(t, s.m.Queue(s.now), 1, 3) },
		func(t rapid.TB, s *semMachine) { s.try(t, s.slots[2], true, false) }, // B anew
		func(t rapid.TB, s *semMachine) { s.queueIs(t, s.m.Queue(s.now), 1, 3, 2) },
		func(t rapid.TB, s *semMachine) { s.put(t, 2, s.clients[1]) }, // the holder's: to A and C
		func(t rapid.TB, s *semMachine) { s.queueIs(t, s.m.Queue(s.now), 2) },
		func(t rapid.TB, s *semMachine) { s.leave(t, s.slots[1]) }, // A's grant goes to B
		func(t rapid.TB, s *semMachine) { s.beat(t, s.slots[2]) },  // B finds its grant record
	},
}, {
	// A large waiter at the head (slot 1) blocks a small one behind it (slot 2); the total
	// shrinks below the large one's n, which rejects it (its Client is woken) and serves the
	// small one; the large one's next attempt fails with ErrTooManyPermits.
	name:  "head rejected when the total shrinks",
	slots: [][2]int64{{1, 1}, {3, 1}, {1, 1}},
	steps: []func(rapid.TB, *semMachine){
		func(t rapid.TB, s *semMachine) { s.set(t, 3, s.clients[0]) },
		func(t rapid.TB, s *semMachine) { s.try(t, s.slots[0], true, false) },
		func(t rapid.TB, s *semMachine) { s.try(t, s.slots[1], true, false) },
		func(t rapid.TB, s *semMachine) { s.try(t, s.slots[2], true, true) },
		func(t rapid.TB, s *semMachine) { s.queueIs(t, s.m.Queue(s.now), 1, 2) },
		func(t rapid.TB, s *semMachine) { s.addPermits(t, -1, s.clients[1]) },
		func(t rapid.TB, s *semMachine) { s.queueIs(t, s.m.Queue(s.now)) },
		func(t rapid.TB, s *semMachine) { s.try(t, s.slots[1], true, false) },
		func(t rapid.TB, s *semMachine) { s.beat(t, s.slots[2]) }, // the grant record
	},
}, {
	// Entries that are gone, not only dead, drop the later attempts of their holds: A (slot 1)
	// dies at the head and a release pops it while it grants B (slot 2); B's grant record then
	// runs out at B's deadline, its permit still taken. A's attempt, then B's, are dropped;
	// C (slot 3), which queued meanwhile, is not disturbed. A starts over, behind C.
	name:  "waiters whose entry is gone are dropped",
	slots: [][2]int64{{2, 1}, {1, 1}, {1, 1}, {1, 1}},
	steps: []func(rapid.TB, *semMachine){
		func(t rapid.TB, s *semMachine) { s.set(t, 2, s.clients[0]) },
		func(t rapid.TB, s *semMachine) { s.try(t, s.slots[0], true, true) }, // the holder takes both
		func(t rapid.TB, s *semMachine) { s.try(t, s.slots[1], true, false) },
		func(t rapid.TB, s *semMachine) { s.try(t, s.slots[2], true, false) },
		func(t rapid.TB, s *semMachine) { s.pass(t, smUnit) },
		func(t rapid.TB, s *semMachine) { s.beat(t, s.slots[2]) },
		func(t rapid.TB, s *semMachine) { s.pass(t, 2*smUnit) },       // A is dead
		func(t rapid.TB, s *semMachine) { s.put(t, 1, s.clients[0]) }, // pops A, grants B
		func(t rapid.TB, s *semMachine) { s.try(t, s.slots[3], true, false) },
		func(t rapid.TB, s *semMachine) { s.queueIs(t, s.m.Queue(s.now), 3) },
		func(t rapid.TB, s *semMachine) { s.dropped(t, s.slots[1], s.try(t, s.slots[1], true, false)) },
		func(t rapid.TB, s *semMachine) { s.beat(t, s.slots[3]) },
		func(t rapid.TB, s *semMachine) { s.pass(t, smUnit) }, // B's record runs out
		func(t rapid.TB, s *semMachine) { s.dropped(t, s.slots[2], s.try(t, s.slots[2], true, false)) },
		func(t rapid.TB, s *semMachine) { s.try(t, s.slots[1], true, false) }, // A anew
		func(t rapid.TB, s *semMachine) { s.queueIs(t, s.m.Queue(s.now), 3, 1) },
	},
}}

func TestSemaphoreMatchesModel(t *testing.T) {
	topologies(t, runSemMachine)
}

// The semaphore of leased permits.

type lsemMachine struct {
	smHarness
	keys    []string // s, q, d, p, pn
	pr      string   // the marks of the permits released by their id
	m       *model.Leased
	permits []string // ids of the permits acquired, live or not
	// marks: the permits released by their id, with the lease end each had (model time), until
	// which Redis keeps their mark.
	marks map[string]model.Time
	calls int // the releases by id so far: each has a key of its own
}

func newLsemMachine(t rapid.TB, c *aqs.Client, rdb redis.UniversalClient, name string, checks *int,
	stats map[string]int, slots int, fresh func(h *smHarness, sl *smSlot)) *lsemMachine {
	sem, err := semaphore.NewLeased(c, name)
	if err != nil {
		t.Fatal(err)
	}
	keys := sem.Keys()
	s := &lsemMachine{keys: keys[:5], pr: keys[5], m: model.NewLeased(smTimeout), marks: map[string]model.Time{}}
	s.setup(t, rdb, sem.Key(), []string{keys[2], keys[3], keys[5]}, checks, stats, slots,
		func(sl *smSlot) { fresh(&s.smHarness, sl) })
	return s
}

func (s *lsemMachine) cleanup() {
	s.ps.Close()
	s.rdb.Del(context.Background(), append(s.keys, s.pr)...)
}

// noKeyWithoutTTL checks that the queue's keys (q, d) and the permits' (p, pn, pr) expire; s has no
// TTL by design (the permits belong with the configuration). d as for the counting semaphore.
func (s *lsemMachine) noKeyWithoutTTL(t testing.TB) {
	queueKeysExpire(t, s.rdb, s.keys)
	for _, k := range append(s.keys[3:5:5], s.pr) {
		redistest.AssertNoKeyWithoutTTL(t, s.rdb, k, k)
	}
}

// queueKeysExpire checks that a semaphore's queue list q (keys[1]) and deadline zset d
// (keys[2]) have a TTL.
func queueKeysExpire(t testing.TB, rdb redis.UniversalClient, keys []string) {
	for _, k := range keys[1:3] {
		redistest.AssertNoKeyWithoutTTL(t, rdb, k, k)
	}
}

func (s *lsemMachine) hasPermit(id string) bool {
	_, ok := s.m.Permits(s.now)[id]
	return ok
}

func (s *lsemMachine) trySet(t *rapid.T) {
	s.set(t, rapid.Int64Range(0, 4).Draw(t, "k"), s.caller(t))
}

func (s *lsemMachine) set(t rapid.TB, k int64, from string) {
	r := s.semReply(t, scripts.SemSet, s.keys, "set", k, s.pub, from, "l")
	if want := s.m.TrySetPermits(s.now, k); r.Status != scripts.SemOK || (r.Value == 1) != want {
		t.Fatalf("TrySetPermits(%d): redis %+v, model %v", k, r, want)
	}
	s.events(t, "TrySetPermits", model.SemEvents{}, "", nil)
}

func (s *lsemMachine) add(t *rapid.T) {
	s.addPermits(t, rapid.SampledFrom([]int64{1, -1, 2, -2, 0, 3, -3}).Draw(t, "delta"), s.caller(t))
}

func (s *lsemMachine) addPermits(t rapid.TB, delta int64, from string) {
	r := s.semReply(t, scripts.SemSet, s.keys, "add", delta, s.pub, from, "l")
	ev, err := s.m.AddPermits(s.now, delta)
	op := fmt.Sprintf("AddPermits(%d)", delta)
	if !smAddAgrees(r, err) {
		t.Fatalf("%s: redis %+v, model %v", op, r, err)
	}
	s.stats[fmt.Sprintf("add %d", r.Status)]++
	s.events(t, op, ev, from, r.Mine)
}

func (s *lsemMachine) attempt(t *rapid.T) {
	sl := s.slot(t)
	s.next(t, sl, s.try(t, sl, rapid.SampledFrom([]bool{true, true, false}).Draw(t, "enqueue")))
}

// try is one attempt by a slot's hold, and reports what that means for its hold (see outcome).
func (s *lsemMachine) try(t rapid.TB, sl *smSlot, enqueue bool) smOutcome {
	r := s.attemptReply(t, scripts.LSemAcquire, s.keys, sl.hold, sl.n, sl.lease, smTimeout,
		smFlag(enqueue), s.pub, smFlag(sl.tried))
	a, ev, err := s.m.Attempt(s.now, sl.hold, sl.n, sl.lease, !sl.tried, enqueue)
	op := fmt.Sprintf("attempt by %s of %d for %d ms (enqueue %v, retry %v)", sl.hold, sl.n, sl.lease, enqueue, sl.tried)
	if !smAttemptAgrees(r.Status, a, err) || r.Token != 0 {
		t.Fatalf("%s: redis %+v, model %+v %v", op, r, a, err)
	}
	hint := r.Wait.Milliseconds()
	if hint > 0 {
		s.stats["hint"]++
	}
	if err == nil && !s.near(a.Hint, hint) {
		t.Fatalf("%s: redis hint %d ms, model %d ms", op, hint, a.Hint)
	}
	sl.tried, sl.granted = true, false
	s.stats["acquire "+r.Status.String()]++
	s.events(t, op, ev, sl.hold[:36], r.Mine)
	if err == nil && (a.Status == model.Acquired || a.Status == model.Granted) {
		s.permits = append(s.permits, sl.hold)
	}
	return outcome(a, err)
}

func (s *lsemMachine) heartbeat(t *rapid.T) {
	for _, sl := range s.beats(t, s.m.Queue(s.now)) {
		if s.beat(t, sl) {
			s.renew(t, sl)
		}
	}
}

// beat is one heartbeat of a slot's hold; it reports whether the hold is over (it found its
// permit).
func (s *lsemMachine) beat(t rapid.TB, sl *smSlot) bool {
	r := s.beatReply(t, scripts.LSemHeartbeat, s.keys, sl.hold, sl.n, sl.lease, smTimeout, s.pub)
	want, ev := s.m.Heartbeat(s.now, sl.hold)
	op := fmt.Sprintf("heartbeat of %s", sl.hold)
	if model.BeatStatus(r) != want {
		t.Fatalf("%s: redis %d, model %v", op, r, want)
	}
	sl.granted = false
	s.stats["heartbeat "+want.String()]++
	s.events(t, op, ev, "", nil)
	if r == scripts.BeatGranted {
		s.permits = append(s.permits, sl.hold)
	}
	return r == scripts.BeatGranted
}

func (s *lsemMachine) giveUp(t *rapid.T) {
	sl := s.waiter(t, s.m.Queue(s.now))
	s.leave(t, sl)
	s.renew(t, sl)
}

// leave is a slot's hold giving up; its hold is over.
func (s *lsemMachine) leave(t rapid.TB, sl *smSlot) {
	r := s.semReply(t, scripts.LSemGiveUp, s.keys, sl.hold, sl.n, sl.lease, s.pub)
	back, ev := s.m.GiveUp(s.now, sl.hold)
	op := fmt.Sprintf("give up by %s of %d", sl.hold, sl.n)
	if r.Status != scripts.SemOK || r.Value != back {
		t.Fatalf("%s: redis %+v, model gave back %d", op, r, back)
	}
	sl.granted = false
	s.stats[fmt.Sprintf("give up back %v", back > 0)]++
	s.events(t, op, ev, sl.hold[:36], r.Mine)
}

// permit draws a permit acquired during the run, mostly a live one.
func (s *lsemMachine) permit(t *rapid.T) string {
	if len(s.permits) == 0 {
		t.Skip("no permit yet")
	}
	var live []string
	for _, id := range s.permits {
		if s.hasPermit(id) {
			live = append(live, id)
		}
	}
	if len(live) == 0 || rapid.IntRange(0, 3).Draw(t, "any permit") == 3 {
		return rapid.SampledFrom(s.permits).Draw(t, "permit")
	}
	return rapid.SampledFrom(live).Draw(t, "live permit")
}

func (s *lsemMachine) release(t *rapid.T) {
	s.put(t, s.permit(t), rapid.Int64Range(1, 3).Draw(t, "k"), s.caller(t))
}

// put releases k permits of permit id, by a caller of Client from.
func (s *lsemMachine) put(t rapid.TB, id string, k int64, from string) {
	r := s.semReply(t, scripts.LSemRelease, s.keys, id, k, s.pub, from)
	ev, err := s.m.Release(s.now, id, k)
	op := fmt.Sprintf("release of %d of %s", k, id)
	switch {
	case r.Status == scripts.SemOK && err == nil && r.Value == s.m.Permits(s.now)[id],
		r.Status == scripts.SemOverRelease && errors.Is(err, model.ErrOverRelease),
		r.Status == scripts.SemExpired && errors.Is(err, model.ErrPermitExpired):
	default:
		t.Fatalf("%s: redis %+v, model %v (left %d)", op, r, err, s.m.Permits(s.now)[id])
	}
	s.stats[fmt.Sprintf("release %d", r.Status)]++
	s.events(t, op, ev, from, r.Mine)
}

// marked reports whether a release by its id ended permit id, and its mark still lives.
func (s *lsemMachine) marked(id string) bool {
	at, ok := s.marks[id]
	return ok && at > s.now
}

func (s *lsemMachine) releaseByID(t *rapid.T) {
	s.putByID(t, s.permit(t), rapid.Int64Range(0, 3).Draw(t, "k (0: all)"), s.caller(t))
}

// putByID releases k permits (0: all) of permit id by its id (lsem_release_id), by a caller of
// Client from, and runs the same call again: the second run must answer as the first did and
// change nothing.
func (s *lsemMachine) putByID(t rapid.TB, id string, k int64, from string) {
	s.calls++
	once := s.keys[0] + ":x:model-" + strconv.Itoa(s.calls)
	keys := append(append(s.keys[:5:5], s.pr), once)
	r := s.semReply(t, scripts.LSemReleaseID, keys, id, k, s.pub, from)
	n := s.m.Permits(s.now)[id]
	expiry, live := s.m.Expiry(s.now, id)
	kk := k
	if kk == 0 {
		kk = n
	}
	var ev model.SemEvents
	var err error
	if live {
		ev, err = s.m.Release(s.now, id, kk)
	}
	op := fmt.Sprintf("release by id of %d of %s", k, id)
	switch {
	case !live && s.marked(id):
		if r.Status != scripts.SemReleasedByID {
			t.Fatalf("%s: redis %+v, model: released by id already", op, r)
		}
	case !live:
		if r.Status != scripts.SemExpired {
			t.Fatalf("%s: redis %+v, model: no live permit", op, r)
		}
	case r.Status == scripts.SemOK && err == nil && r.Value == s.m.Permits(s.now)[id],
		r.Status == scripts.SemOverRelease && errors.Is(err, model.ErrOverRelease):
		if err == nil && kk == n {
			s.marks[id] = expiry
		}
	default:
		t.Fatalf("%s: redis %+v, model %v (left %d)", op, r, err, s.m.Permits(s.now)[id])
	}
	s.stats[fmt.Sprintf("release by id %d", r.Status)]++
	s.events(t, op, ev, from, r.Mine)
	if r.Status == scripts.SemOK {
		again := s.semReply(t, scripts.LSemReleaseID, keys, id, k, s.pub, from)
		if again.Status != r.Status || again.Value != r.Value {
			t.Fatalf("%s run again: redis %+v, first %+v", op, again, r)
		}
		s.events(t, op+" again", model.SemEvents{}, from, nil)
	}
}

func (s *lsemMachine) renewPermit(t *rapid.T) {
	s.extend(t, s.permit(t), rapid.Int64Range(0, 4).Draw(t, "lease units")*smUnit)
}

// extend renews permit id for lease ms, or with 0 only checks it.
func (s *lsemMachine) extend(t rapid.TB, id string, lease int64) {
	r := s.int(t, scripts.LSemRenew, []string{s.keys[3], s.keys[4], s.pr}, id, lease)
	var want bool
	if lease == 0 { // a check only
		want = s.hasPermit(id)
	} else {
		want = s.m.Renew(s.now, id, lease)
	}
	marked := !want && s.marked(id)
	if (r == 1) != want || (r == 2) != marked || r < 0 || r > 2 {
		t.Fatalf("renew %s for %d ms: redis %d, model %v (marked %v)", id, lease, r, want, marked)
	}
	s.stats[fmt.Sprintf("renew %v %d", lease > 0, r)]++
	s.events(t, "renew", model.SemEvents{}, "", nil)
}

func (s *lsemMachine) check(t rapid.TB) {
	ctx := context.Background()
	var (
		zp *redis.ZSliceCmd
		pn *redis.MapStringStringCmd
		hv *redis.SliceCmd
	)
	r := s.read(t, s.keys[1], s.keys[2], func(p redis.Pipeliner) {
		zp = p.ZRangeWithScores(ctx, s.keys[3], 0, -1)
		pn = p.HGetAll(ctx, s.keys[4])
		hv = p.HMGet(ctx, s.keys[0], "t", "u", "q")
	})
	// The permits in p, live or not yet dropped, and their count in s's u.
	permits, all := map[string]int64{}, int64(0)
	for _, z := range zp.Val() {
		id := z.Member.(string)
		n := int64(1)
		if v, ok := pn.Val()[id]; ok {
			var err error
			if n, err = strconv.ParseInt(v, 10, 64); err != nil || n < 2 {
				t.Fatalf("permit %s holds %q", id, v)
			}
		}
		all += n
		left := int64(z.Score) - r.now
		if left <= 0 {
			continue
		}
		permits[id] = n
		if at, ok := s.m.Expiry(s.now, id); !ok || !s.near(int64(at-s.now), left) {
			t.Fatalf("permit %s: redis lease left %d ms, model %d ms (live %v)", id, left, at-s.now, ok)
		}
	}
	if want := s.m.Permits(s.now); fmt.Sprint(permits) != fmt.Sprint(want) {
		t.Fatalf("permits: redis %v, model %v", permits, want)
	}
	v := hv.Val()
	total, set := s.m.Total(s.now)
	if u, _ := v[1].(string); (v[0] != nil) != set || set && v[0] != fmt.Sprint(total) ||
		!(u == fmt.Sprint(all) || u == "" && all == 0) {
		t.Fatalf("total and leased: redis %v %v, model %d (set %v), permits in p %d", v[0], v[1], total, set, all)
	}
	// lsem_available drops the permits that ran out, which a query may do: only every other
	// check, so that the other scripts meet permits that ran out but are still in p too.
	if *s.checks%2 == 0 {
		counts, err := scripts.LSemAvailable.Run(ctx, s.rdb, []string{s.keys[0], s.keys[3], s.keys[4]}).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		if !set {
			total = -1
		}
		if avail := s.m.Available(s.now); counts[0] != avail || counts[1] != total {
			t.Fatalf("available, total: redis %v, model %d %d", counts, avail, total)
		}
	}
	queue := s.m.Queue(s.now)
	if live := s.liveQueue(t, r); fmt.Sprint(live) != fmt.Sprint(queue) {
		t.Fatalf("queue: redis %v, model %v", live, queue)
	}
	if len(queue) > 0 && v[2] == nil {
		t.Fatalf("queue %v but no queue flag", queue)
	}
}

func (s *lsemMachine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"0 attempt":   s.attempt, // twice: attempts make the queue
		"1 attempt":   s.attempt,
		"2 heartbeat": s.heartbeat,
		"3 release":   s.release,
		"4 add":       s.add,
		"5 giveUp":    s.giveUp,
		"6 advance":   s.advance,
		"7 renew":     s.renewPermit,
		"8 collect":   func(t *rapid.T) { s.collect(t, func(sl *smSlot) { s.permits = append(s.permits, sl.hold) }) },
		"9 trySet":    s.trySet,
		"a releaseID": s.releaseByID,
		"":            func(t *rapid.T) { s.check(t) },
	}
}

func runLeasedMachine(t *testing.T, rdb redis.UniversalClient) {
	runSmMachine(t, rdb, newLsemMachine, lsemScenarios)
}

// lsemScenarios are fixed runs of the leased semaphore's machine. Holds alternate between the
// Clients: slots 0, 2, 4 are one Client's, 1, 3, 5 the other's.
var lsemScenarios = []smScenario[*lsemMachine]{{
	// As for the counting semaphore: B (slot 2) dies between live A and C (slots 1 and 3), is
	// dropped, and starts over at the tail. The holder's lease (4 units) outlives it all; when
	// it runs out, the next heartbeat serves A and C, and A's release then serves B.
	name:  "dead waiter in mid-queue is dropped and starts over at the tail",
	slots: [][2]int64{{2, 4}, {1, 2}, {1, 2}, {1, 2}},
	steps: []func(rapid.TB, *lsemMachine){
		func(t rapid.TB, s *lsemMachine) { s.set(t, 2, s.clients[0]) },
		func(t rapid.TB, s *lsemMachine) { s.try(t, s.slots[0], true) },
		func(t rapid.TB, s *lsemMachine) { s.try(t, s.slots[1], true) },
		func(t rapid.TB, s *lsemMachine) { s.try(t, s.slots[2], true) },
		func(t rapid.TB, s *lsemMachine) { s.pass(t, smUnit) },
		func(t rapid.TB, s *lsemMachine) { s.try(t, s.slots[3], true) },
		func(t rapid.TB, s *lsemMachine) { s.beat(t, s.slots[1]) },
		func(t rapid.TB, s *lsemMachine) { s.pass(t, 2*smUnit) },
		func(t rapid.TB, s *lsemMachine) { s.queueIs(t, s.m.Queue(s.now), 1, 3) }, // B is dead
		func(t rapid.TB, s *lsemMachine) { s.beat(t, s.slots[2]) },                // and not revived
		func(t rapid.TB, s *lsemMachine) { s.dropped(t, s.slots[2], s.try(t, s.slots[2], true)) },
		func(t rapid.TB, s *lsemMachine) { s.queueIs(t, s.m.Queue(s.now), 1, 3) },
		func(t rapid.TB, s *lsemMachine) { s.try(t, s.slots[2], true) }, // B anew
		func(t rapid.TB, s *lsemMachine) { s.queueIs(t, s.m.Queue(s.now), 1, 3, 2) },
		func(t rapid.TB, s *lsemMachine) { s.beat(t, s.slots[1]) },
		func(t rapid.TB, s *lsemMachine) { s.beat(t, s.slots[3]) },
		func(t rapid.TB, s *lsemMachine) { s.pass(t, smUnit) },     // the holder's lease ends
		func(t rapid.TB, s *lsemMachine) { s.beat(t, s.slots[3]) }, // serves A and C
		func(t rapid.TB, s *lsemMachine) { s.queueIs(t, s.m.Queue(s.now), 2) },
		func(t rapid.TB, s *lsemMachine) { s.put(t, s.slots[1].hold, 1, s.clients[1]) }, // to B
		func(t rapid.TB, s *lsemMachine) { s.queueIs(t, s.m.Queue(s.now)) },
	},
}, {
	// A large waiter at the head (slot 1) blocks a small one (slot 2); the total shrinks below
	// its n, which rejects it and serves the small one, for no longer than its liveness
	// deadline (sooner than its lease); the large one's next attempt fails with
	// ErrTooManyPermits.
	name:  "head rejected when the total shrinks",
	slots: [][2]int64{{1, 4}, {3, 4}, {1, 4}},
	steps: []func(rapid.TB, *lsemMachine){
		func(t rapid.TB, s *lsemMachine) { s.set(t, 3, s.clients[0]) },
		func(t rapid.TB, s *lsemMachine) { s.try(t, s.slots[0], true) },
		func(t rapid.TB, s *lsemMachine) { s.try(t, s.slots[1], true) },
		func(t rapid.TB, s *lsemMachine) { s.try(t, s.slots[2], true) },
		func(t rapid.TB, s *lsemMachine) { s.queueIs(t, s.m.Queue(s.now), 1, 2) },
		func(t rapid.TB, s *lsemMachine) { s.addPermits(t, -1, s.clients[1]) },
		func(t rapid.TB, s *lsemMachine) { s.queueIs(t, s.m.Queue(s.now)) },
		func(t rapid.TB, s *lsemMachine) { s.try(t, s.slots[1], true) },
		func(t rapid.TB, s *lsemMachine) { s.beat(t, s.slots[2]) },
	},
}, {
	// As for the counting semaphore, entries that are gone drop their holds' later attempts: A
	// (slot 1) dies at the head and the holder's release pops it while it grants B (slot 2) a
	// permit cut at B's deadline; C (slot 3) queues. A's attempt is dropped. B never learns
	// of its permit, which runs out at B's deadline and passes to C at B's next attempt,
	// which is dropped.
	name:  "waiters whose entry is gone are dropped",
	slots: [][2]int64{{1, 4}, {1, 2}, {1, 2}, {1, 2}},
	steps: []func(rapid.TB, *lsemMachine){
		func(t rapid.TB, s *lsemMachine) { s.set(t, 1, s.clients[0]) },
		func(t rapid.TB, s *lsemMachine) { s.try(t, s.slots[0], true) },
		func(t rapid.TB, s *lsemMachine) { s.try(t, s.slots[1], true) },
		func(t rapid.TB, s *lsemMachine) { s.try(t, s.slots[2], true) },
		func(t rapid.TB, s *lsemMachine) { s.pass(t, smUnit) },
		func(t rapid.TB, s *lsemMachine) { s.beat(t, s.slots[2]) },
		func(t rapid.TB, s *lsemMachine) { s.pass(t, 2*smUnit) },                        // A is dead
		func(t rapid.TB, s *lsemMachine) { s.put(t, s.slots[0].hold, 1, s.clients[0]) }, // to B
		func(t rapid.TB, s *lsemMachine) { s.try(t, s.slots[3], true) },
		func(t rapid.TB, s *lsemMachine) { s.queueIs(t, s.m.Queue(s.now), 3) },
		func(t rapid.TB, s *lsemMachine) { s.dropped(t, s.slots[1], s.try(t, s.slots[1], true)) },
		func(t rapid.TB, s *lsemMachine) { s.beat(t, s.slots[3]) },
		func(t rapid.TB, s *lsemMachine) { s.pass(t, smUnit) }, // B's permit runs out
		func(t rapid.TB, s *lsemMachine) { s.dropped(t, s.slots[2], s.try(t, s.slots[2], true)) },
		func(t rapid.TB, s *lsemMachine) { s.queueIs(t, s.m.Queue(s.now)) }, // C was served
	},
}}

func TestLeasedMatchesModel(t *testing.T) {
	topologies(t, runLeasedMachine)
}
