package election_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/election"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/layout"
	"github.com/redaqs/aqs/internal/testkit/lintest"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/model"
)

// The model-versus-Redis state machine of the election through its public API: actors, each
// with an aqs Client of its own, campaign (in goroutines, since Campaign waits), proclaim,
// resign, cancel a waiting campaign, take the fair lock of the election's name with TryLock
// and unlock it, proclaim and resign with contexts that no longer lead, and read the leader.
// The same calls go to model.Election, and after every step the test waits until Redis agrees
// with the model: who holds the lock and who queues for it, in order (read from the keys),
// and who leads with which value and revision (Leader, and the leader record's revision), and
// until the campaigns the model says were handed the lock have returned leading; the model
// learns of a campaign's Lead when it returned, as the call made it. A campaign that returns
// while the model says it waits fails the test.
//
// Tokens are the server's time in microseconds, the model's 1, 2, 3...: each leader's token
// (aqs.FencingToken of its leading context, which Leader must report) must be greater than
// the previous leader's, as the model's is. An observer (Observe) runs through each run: what
// it receives must be a subsequence of the model's changes, and after each step its last
// reception the model's last change.
//
// The holds are the watchdog's and the waiters heartbeat (the default 5s waiter timeout), so
// nothing expires and nobody dies: the model's lease and waiter timeout are beyond the run.
// Expiry and deaths are the model's own tests' (model/election_test.go). Each actor has one
// call at a time, and its own Client, so that a queue member's Client id names the actor.

const (
	elmLease   = int64(time.Hour / time.Millisecond)
	elmTimeout = 10 * elmLease
	elmActors  = 4
	elmSettle  = 10 * time.Second // bound on Redis catching up with the model after a step
)

type elmState int

const (
	elmIdle      elmState = iota
	elmCampaigns          // a Campaign call in progress
	elmLeads              // its Campaign returned leading
	elmHoldsFair          // holds the fair lock of the election's name
)

// elmActor is one caller: its Client, its election and fair lock values, and its call in
// progress.
type elmActor struct {
	name string // "A", "B", ...
	c    *aqs.Client
	e    *election.Election
	f    *fair.Lock

	seq    int
	hold   string // the model's hold id of its current campaign or fair hold: "<name>:<seq>"
	value  string // the value it campaigned or last proclaimed with
	state  elmState
	lead   context.Context // the leading context, or the fair lock's held context
	cancel context.CancelFunc
	done   chan elmResult // the Campaign call's result
	queued bool           // the model queued the campaign
	stale  []context.Context
}

type elmResult struct {
	lead context.Context
	err  error
}

// elmObserver collects what one Observe receives.
type elmObserver struct {
	mu   sync.Mutex
	got  []election.Leadership
	stop context.CancelFunc
	ch   <-chan election.Leadership
	done chan struct{}
}

func (o *elmObserver) received() []election.Leadership {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.got)
}

type elmMachine struct {
	rdb    redis.UniversalClient
	actors []*elmActor
	byID   map[string]*elmActor
	keys   []string // the lock key, its queue list and deadlines, the leader record
	m      *model.Election
	now    model.Time
	tokens map[int64]int64 // the model's tokens to Redis's
	last   int64           // the latest leader's token in Redis
	obs    *elmObserver
	stats  *elmStats
}

type elmStats struct{ runs, steps, handed, leaders, proclaims, received int }

func (s *elmMachine) actor(t *rapid.T, st elmState) *elmActor {
	var c []*elmActor
	for _, a := range s.actors {
		if a.state == st {
			c = append(c, a)
		}
	}
	if len(c) == 0 {
		t.Skip("no actor in that state")
	}
	return rapid.SampledFrom(c).Draw(t, "actor")
}

func (s *elmMachine) tick() model.Time {
	s.now++
	s.stats.steps++
	return s.now
}

func (a *elmActor) newHold() {
	a.seq++
	a.hold = fmt.Sprintf("%s:%d", a.name, a.seq)
}

func drawValue(t *rapid.T, a *elmActor) string {
	return fmt.Sprintf("%s/%d", a.name, rapid.IntRange(0, 2).Draw(t, "value"))
}

// campaign starts a Campaign in a goroutine.
func (s *elmMachine) campaign(t *rapid.T) {
	a := s.actor(t, elmIdle)
	a.newHold()
	a.value = drawValue(t, a)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan elmResult, 1)
	go func(value string) {
		lead, err := a.e.Campaign(ctx, value)
		done <- elmResult{lead, err}
	}(a.value)
	a.state, a.cancel, a.done = elmCampaigns, cancel, done
	got := s.m.Attempt(s.tick(), a.hold, elmLease, true)
	if !got.Acquired && !got.Queued {
		t.Fatalf("%s campaigns: the model says %+v", a.name, got)
	}
	a.queued = got.Queued
	s.settle(t)
}

// cancel ends a waiting Campaign by its context: it fails and leaves nothing behind.
func (s *elmMachine) cancel(t *rapid.T) {
	a := s.actor(t, elmCampaigns)
	a.cancel()
	r := <-a.done
	if r.err == nil || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("%s: a Campaign cancelled while it waited returned %v", a.name, r.err)
	}
	if got := s.m.GiveUp(s.tick(), a.hold); !got.WasQueued {
		t.Fatalf("%s: the model had no waiter of the cancelled campaign: %+v", a.name, got)
	}
	a.state, a.cancel, a.done = elmIdle, nil, nil
	s.settle(t)
}

// proclaim changes a leader's value.
func (s *elmMachine) proclaim(t *rapid.T) {
	a := s.actor(t, elmLeads)
	a.value = drawValue(t, a)
	if err := a.e.Proclaim(a.lead, a.value); err != nil {
		t.Fatalf("%s proclaims %q: %v", a.name, a.value, err)
	}
	if s.m.Proclaim(s.tick(), a.hold, a.value) == 0 {
		t.Fatalf("%s proclaimed %q; the model says it does not lead", a.name, a.value)
	}
	s.stats.proclaims++
	s.settle(t)
}

// resign ends a leadership, which passes to the next candidate.
func (s *elmMachine) resign(t *rapid.T) {
	a := s.actor(t, elmLeads)
	if err := a.e.Resign(a.lead); err != nil {
		t.Fatalf("%s resigns: %v", a.name, err)
	}
	if !errors.Is(context.Cause(a.lead), aqs.ErrReleased) {
		t.Fatalf("%s resigned; its leading context's cause is %v", a.name, context.Cause(a.lead))
	}
	if _, err := s.m.Resign(s.tick(), a.hold); err != nil {
		t.Fatalf("%s resigned; the model refuses: %v", a.name, err)
	}
	a.cancel()
	a.stale = append(a.stale, a.lead)
	a.state, a.lead, a.cancel = elmIdle, nil, nil
	s.settle(t)
}

// tryFair takes the fair lock of the election's name without waiting: the same lock, which
// never leads.
func (s *elmMachine) tryFair(t *rapid.T) {
	a := s.actor(t, elmIdle)
	a.newHold()
	held, ok, err := a.f.TryLock(context.Background())
	if err != nil {
		t.Fatalf("%s: fair TryLock: %v", a.name, err)
	}
	if want := s.m.Attempt(s.tick(), a.hold, elmLease, false); ok != want.Acquired {
		t.Fatalf("%s: fair TryLock took the lock %v, the model says %+v", a.name, ok, want)
	}
	if ok {
		a.state, a.lead = elmHoldsFair, held
	}
	s.settle(t)
}

func (s *elmMachine) unlockFair(t *rapid.T) {
	a := s.actor(t, elmHoldsFair)
	if err := a.f.Unlock(a.lead); err != nil {
		t.Fatalf("%s: fair Unlock: %v", a.name, err)
	}
	if _, err := s.m.Resign(s.tick(), a.hold); err != nil {
		t.Fatalf("%s: the model refuses the fair lock's release: %v", a.name, err)
	}
	a.state, a.lead = elmIdle, nil
	s.settle(t)
}

// stale proclaims or resigns with a leading context that resigned: ErrNotOwner, and nothing
// changes.
func (s *elmMachine) stale(t *rapid.T) {
	var c []*elmActor
	for _, a := range s.actors {
		if len(a.stale) > 0 {
			c = append(c, a)
		}
	}
	if len(c) == 0 {
		t.Skip("no leading context resigned yet")
	}
	a := rapid.SampledFrom(c).Draw(t, "actor")
	lead := rapid.SampledFrom(a.stale).Draw(t, "stale")
	var err error
	if rapid.Bool().Draw(t, "proclaim") {
		err = a.e.Proclaim(lead, "stale")
	} else {
		err = a.e.Resign(lead)
	}
	if !errors.Is(err, aqs.ErrNotOwner) {
		t.Fatalf("%s: a resigned leading context proclaimed or resigned: %v", a.name, err)
	}
	s.settle(t)
}

// leader reads the leader through an actor's election; settle compares it with the model.
func (s *elmMachine) leader(t *rapid.T) {
	a := rapid.SampledFrom(s.actors).Draw(t, "actor")
	l, ok, err := a.e.Leader(context.Background())
	if err != nil {
		t.Fatalf("%s: Leader: %v", a.name, err)
	}
	if want := s.expectedLeader(s.m.Leader(s.tick())); want != s.describeLeader(l, ok, -1) {
		t.Fatalf("%s: Leader says %s, the model %s", a.name, s.describeLeader(l, ok, -1), want)
	}
}

// actorOf names the actor of a hold id or Client id.
func (s *elmMachine) actorOf(id string) string {
	if a := s.byID[layout.ClientOf(id)]; a != nil {
		return a.name
	}
	if a := s.byID[id]; a != nil {
		return a.name
	}
	return "?" + id
}

// expectedLeader describes the model's leader as Redis has it: its actor, value and token,
// without the revision.
func (s *elmMachine) expectedLeader(l model.Leadership, ok bool) string {
	if !ok {
		return "nobody"
	}
	name, _, _ := strings.Cut(l.Hold, ":")
	return fmt.Sprintf("%s %q token %d", name, l.Value, s.tokens[l.Token])
}

// describeLeader describes a leader Redis reported, with the record's revision rev unless
// it is negative.
func (s *elmMachine) describeLeader(l election.Leadership, ok bool, rev int64) string {
	if !ok {
		return "nobody"
	}
	d := fmt.Sprintf("%s %q token %d", s.actorOf(l.Client), l.Value, l.Token)
	if rev >= 0 {
		d += fmt.Sprintf(" revision %d", rev)
	}
	return d
}

// expected is the model's state: the lock's holder and queue, as actor names, and the leader.
func (s *elmMachine) expected() string {
	var b strings.Builder
	holder, _ := s.m.Holder(s.now)
	holder, _, _ = strings.Cut(holder, ":")
	var queue []string
	for _, h := range s.m.Queue(s.now) {
		a, _, _ := strings.Cut(h, ":")
		queue = append(queue, a)
	}
	fmt.Fprintf(&b, "holder %q queue %v\n", holder, queue)
	l, ok := s.m.Leader(s.now)
	b.WriteString("leader " + s.expectedLeader(l, ok))
	if ok {
		fmt.Fprintf(&b, " revision %d", l.Revision)
	}
	b.WriteString("\n")
	return b.String()
}

// actual reads the same from Redis: the lock value's hold (unless its recorded lease end has
// passed), the queue's members in list order that have a live deadline, Leader, and the
// leader record's revision.
func (s *elmMachine) actual(t *rapid.T) string {
	ctx := context.Background()
	tm, err := s.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	now := tm.UnixMilli()
	var get *redis.StringCmd
	var list *redis.StringSliceCmd
	var scores *redis.ZSliceCmd
	var rev *redis.StringCmd
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		get, list, scores = p.Get(ctx, s.keys[0]), p.LRange(ctx, s.keys[1], 0, -1), p.ZRangeWithScores(ctx, s.keys[2], 0, -1)
		rev = p.HGet(ctx, s.keys[3], "r")
		return nil
	}); err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	holder := ""
	if v, err := get.Result(); err == nil {
		lv, err := layout.ParseLockValue(v)
		if err != nil {
			t.Fatal(err)
		}
		if lv.LeaseEnd == 0 || lv.LeaseEnd > now {
			holder = s.actorOf(lv.Hold)
		}
	}
	live := map[string]bool{}
	for _, z := range scores.Val() {
		if int64(z.Score) > now {
			live[z.Member.(string)] = true
		}
	}
	var queue []string
	for _, m := range list.Val() {
		if live[m] {
			hold, _, _ := strings.Cut(m, " ")
			queue = append(queue, s.actorOf(hold))
		}
	}
	l, ok, err := s.actors[0].e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := rev.Int64()
	return fmt.Sprintf("holder %q queue %v\nleader %s\n", holder, queue, s.describeLeader(l, ok, r))
}

// led records that a's Campaign returned leading: the model learns it as the call did, from
// its attempt and its Lead; its token must be greater than the previous leader's.
func (s *elmMachine) led(t *rapid.T, a *elmActor, lead context.Context) {
	if got := s.m.AttemptAgain(s.now, a.hold, true); !got.Acquired {
		t.Fatalf("%s: Campaign returned leading; the model's attempt says %+v", a.name, got)
	}
	got := s.m.Lead(s.now, a.hold, a.value)
	if !got.Led || got.Revision != 1 {
		t.Fatalf("%s: Campaign returned leading; the model's Lead says %+v", a.name, got)
	}
	token, err := aqs.FencingToken(lead)
	if err != nil {
		t.Fatalf("%s: the leading context's fencing token: %v", a.name, err)
	}
	if token <= s.last {
		t.Fatalf("%s leads with token %d, not greater than the previous leader's %d", a.name, token, s.last)
	}
	s.tokens[got.Token], s.last = token, token
	a.state, a.lead = elmLeads, lead
	s.stats.leaders++
}

// settle waits until Redis agrees with the model, every Campaign the model says was handed
// the lock has returned leading, and the observer has received the latest change; then no
// other Campaign may have returned, and every leader's leading context is live.
func (s *elmMachine) settle(t *rapid.T) {
	deadline := time.Now().Add(elmSettle)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		pending := false
		for _, a := range s.actors {
			if h, _ := s.m.Holder(s.now); a.state != elmCampaigns || h != a.hold {
				continue
			}
			select {
			case r := <-a.done:
				if r.err != nil {
					t.Fatalf("%s: handed the lock by the model, its Campaign failed: %v", a.name, r.err)
				}
				if a.queued {
					s.stats.handed++
				}
				s.led(t, a, r.lead)
			default:
				pending = true
			}
		}
		want, got := s.expected(), s.actual(t)
		// A campaign handed the lock may have led, and published, before the model learns it.
		observed := !pending && s.observed(t)
		if !pending && got == want && observed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis did not come to the model's state within %v:\nmodel:\n%sredis:\n%s(a handed campaign still pending: %v; "+
				"the observer has the latest change: %v)", elmSettle, want, got, pending, observed)
		}
		<-tick.C
	}
	for _, a := range s.actors {
		if a.state == elmLeads && a.lead.Err() != nil {
			t.Fatalf("%s leads, as the model says; its leading context ended: %v", a.name, context.Cause(a.lead))
		}
		if a.state != elmCampaigns {
			continue
		}
		select {
		case r := <-a.done:
			t.Fatalf("%s: Campaign returned (%v) while the model says it waits:\n%s", a.name, r.err, s.expected())
		default:
		}
	}
}

// observed checks that what the observer received is a subsequence of the model's changes,
// never the same leader and value twice in a row, and reports whether its last reception is the last change (or nothing, before the first).
func (s *elmMachine) observed(t *rapid.T) bool {
	changes := s.m.Changes(s.now)
	got := s.obs.received()
	describe := func(l election.Leadership) string {
		return fmt.Sprintf("%s %q token %d", s.actorOf(l.Client), l.Value, l.Token)
	}
	var want []string
	for _, c := range changes {
		name, _, _ := strings.Cut(c.Hold, ":")
		want = append(want, fmt.Sprintf("%s %q token %d", name, c.Value, s.tokens[c.Token]))
	}
	at := 0
	for j, l := range got {
		if j > 0 && describe(got[j-1]) == describe(l) {
			t.Fatalf("the observer received %s twice in a row", describe(l))
		}
		i := slices.Index(want[at:], describe(l))
		if i < 0 {
			t.Fatalf("the observer received %s, not among the model's changes after its previous reception: %v", describe(l), want[at:])
		}
		at += i + 1
	}
	if len(changes) == 0 {
		return len(got) == 0
	}
	return len(got) > 0 && describe(got[len(got)-1]) == want[len(want)-1]
}

// teardown ends every call and hold, as the model does, and checks that nothing is left.
func (s *elmMachine) teardown(t *rapid.T) {
	for _, a := range s.actors {
		if a.state == elmCampaigns {
			if h, _ := s.m.Holder(s.now); h == a.hold {
				continue // settle made it lead
			}
			a.cancel()
			if r := <-a.done; r.err == nil {
				t.Fatalf("%s: cancelled at the end, Campaign returned leading", a.name)
			}
			s.m.GiveUp(s.tick(), a.hold)
			a.state, a.cancel, a.done = elmIdle, nil, nil
		}
	}
	s.settle(t)
	for _, a := range s.actors {
		switch a.state {
		case elmLeads:
			if err := a.e.Resign(a.lead); err != nil {
				t.Fatalf("%s resigns: %v", a.name, err)
			}
			s.m.Resign(s.tick(), a.hold)
			a.cancel()
		case elmHoldsFair:
			if err := a.f.Unlock(a.lead); err != nil {
				t.Fatalf("%s: fair Unlock: %v", a.name, err)
			}
			s.m.Resign(s.tick(), a.hold)
		}
		a.state, a.lead, a.cancel = elmIdle, nil, nil
	}
	s.settle(t)
	if h, ok := s.m.Holder(s.now); ok || len(s.m.Queue(s.now)) > 0 {
		t.Fatalf("after the teardown the model has holder %q, queue %v", h, s.m.Queue(s.now))
	}
}

// abandon ends whatever calls and holds a failed run left, and its observer.
func (s *elmMachine) abandon() {
	for _, a := range s.actors {
		if a.state == elmCampaigns {
			a.cancel()
			if r := <-a.done; r.err == nil {
				_ = a.e.Resign(r.lead)
			}
		}
		switch a.state {
		case elmLeads:
			_ = a.e.Resign(a.lead)
			a.cancel()
		case elmHoldsFair:
			_ = a.f.Unlock(a.lead)
		}
		a.state, a.lead, a.cancel, a.done, a.stale = elmIdle, nil, nil, nil, nil
	}
	s.obs.stop()
	for range s.obs.ch {
	}
	<-s.obs.done
}

func runElectionModel(t *testing.T, rdb redis.UniversalClient) {
	var actors []*elmActor
	byID := map[string]*elmActor{}
	for i := range elmActors {
		c := newClient(t, rdb)
		a := &elmActor{name: string(rune('A' + i)), c: c}
		actors = append(actors, a)
		byID[c.ID()] = a
	}
	stats := &elmStats{}
	rapid.Check(t, func(rt *rapid.T) {
		stats.runs++
		name := fmt.Sprintf("%s-%d", redistest.Name(t), stats.runs)
		for _, a := range actors {
			var err error
			if a.e, err = election.New(a.c, name); err != nil {
				rt.Fatal(err)
			}
			if a.f, err = fair.New(a.c, name); err != nil {
				rt.Fatal(err)
			}
		}
		s := &elmMachine{rdb: rdb, actors: actors, byID: byID, keys: actors[0].e.Keys(),
			m: model.NewElection(elmTimeout), tokens: map[int64]int64{}, stats: stats}
		ctx, stop := context.WithCancel(context.Background())
		s.obs = &elmObserver{stop: stop, ch: actors[0].e.Observe(ctx), done: make(chan struct{})}
		go func() {
			defer close(s.obs.done)
			for l := range s.obs.ch {
				s.obs.mu.Lock()
				s.obs.got = append(s.obs.got, l)
				s.obs.mu.Unlock()
			}
		}()
		defer s.abandon()
		rt.Repeat(map[string]func(*rapid.T){
			"campaign":   s.campaign,
			"cancel":     s.cancel,
			"proclaim":   s.proclaim,
			"resign":     s.resign,
			"tryFair":    s.tryFair,
			"unlockFair": s.unlockFair,
			"stale":      s.stale,
			"leader":     s.leader,
			"":           func(t *rapid.T) { s.settle(t) },
		})
		s.teardown(rt)
		stats.received += len(s.obs.received())
		redistest.AssertNoKeyWithoutTTL(lintest.InRapid(t, rt), rdb, name, s.keys[0])
	})
	t.Logf("%d runs, %d steps, %d leaders (%d of them queued first), %d proclaims, %d changes received by the observers",
		stats.runs, stats.steps, stats.leaders, stats.handed, stats.proclaims, stats.received)
}

func TestElectionAgreesWithModel(t *testing.T) {
	topologies(t, runElectionModel)
}
