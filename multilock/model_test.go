package multilock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/layout"
	"github.com/redaqs/aqs/internal/testkit/lintest"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/model"
	"github.com/redaqs/aqs/multilock"
)

// The model-versus-Redis state machine of the multi-name lock through its public API: actors,
// each with an aqs Client of its own, make random requests over a small pool of names that
// share a hash tag, with multi-locks (one to four names) and fair locks (one name): TryLock
// without wait, Lock and TryLock with a wait bound in goroutines, Unlock, and cancellation of
// a waiting call. The same requests go to model.Multi, and after every step the test waits
// until Redis agrees with the model on who owns each name (holds it, or has it reserved) and
// who is queued for it, in order, and until the calls the model says are granted have
// returned holding; a call that returns while the model says it waits fails the test.
//
// The holds are the watchdog's and the waiters heartbeat (the default 5s waiter timeout), so
// nothing expires and nobody dies: the model's lease and waiter timeout are beyond the run,
// and its clock moves by one millisecond a step. Deaths and expiry are the model's own tests'
// (model/multi_test.go). Each actor has one call at a time, and its own Client, so that a
// queue member's Client id names the actor that queued it.

const (
	apiLease   = int64(time.Hour / time.Millisecond)
	apiTimeout = 10 * apiLease
	apiActors  = 5
	apiPool    = 4                // names per run
	apiSettle  = 10 * time.Second // bound on Redis catching up with the model after a step
)

// apiActor is one caller: its Client and its call in progress.
type apiActor struct {
	name string // "A", "B", ...
	c    *aqs.Client
	id   string // its Client id

	seq    int
	hold   string // the model's hold id of its current request: "<name>:<seq>"
	what   string // the request, for messages
	unlock func(context.Context) error
	state  actorState
	held   context.Context
	cancel context.CancelFunc
	done   chan lockResult // the waiting call's result
}

type actorState int

const (
	idle actorState = iota
	waiting
	holding
)

type lockResult struct {
	held context.Context
	ok   bool
	err  error
}

type apiMachine struct {
	rdb    redis.UniversalClient
	actors []*apiActor
	byID   map[string]*apiActor
	pool   []string
	keys   map[string][]string // each name's lock key, queue and deadlines
	m      *model.Multi
	now    model.Time
	steps  *int
	grants *int // waiting calls that returned holding
}

// request draws a request for an idle actor: a fair lock on one name, or a multi-lock on one
// to four names of the pool.
func (s *apiMachine) request(t *rapid.T, a *apiActor) (model.MultiRequest, func(ctx context.Context, wait bool, bound time.Duration) (context.Context, bool, error)) {
	a.seq++
	a.hold = fmt.Sprintf("%s:%d", a.name, a.seq)
	if rapid.IntRange(0, 3).Draw(t, "fair") == 0 {
		name := rapid.SampledFrom(s.pool).Draw(t, "name")
		l, err := fair.New(a.c, name)
		if err != nil {
			t.Fatal(err)
		}
		a.unlock, a.what = l.Unlock, fmt.Sprintf("fair %s", name)
		return model.MultiRequest{Hold: a.hold, Names: []string{name}, Lease: apiLease, Fair: true},
			func(ctx context.Context, wait bool, bound time.Duration) (context.Context, bool, error) {
				switch {
				case !wait:
					return l.TryLock(ctx)
				case bound > 0:
					return l.TryLock(ctx, aqs.WithWait(bound))
				}
				h, err := l.Lock(ctx)
				return h, err == nil, err
			}
	}
	names := rapid.SliceOfNDistinct(rapid.SampledFrom(s.pool), 1, len(s.pool), rapid.ID[string]).Draw(t, "names")
	l, err := multilock.New(a.c, names)
	if err != nil {
		t.Fatal(err)
	}
	a.unlock, a.what = l.Unlock, fmt.Sprintf("multi %v", l.Names())
	return model.MultiRequest{Hold: a.hold, Names: l.Names(), Lease: apiLease},
		func(ctx context.Context, wait bool, bound time.Duration) (context.Context, bool, error) {
			switch {
			case !wait:
				return l.TryLock(ctx)
			case bound > 0:
				return l.TryLock(ctx, aqs.WithWait(bound))
			}
			h, err := l.Lock(ctx)
			return h, err == nil, err
		}
}

func (s *apiMachine) actor(t *rapid.T, st actorState) *apiActor {
	var c []*apiActor
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

func (s *apiMachine) tick() model.Time {
	s.now++
	*s.steps++
	return s.now
}

// tryLock makes one attempt without wait.
func (s *apiMachine) tryLock(t *rapid.T) {
	a := s.actor(t, idle)
	req, call := s.request(t, a)
	held, ok, err := call(context.Background(), false, 0)
	if err != nil {
		t.Fatalf("%s %s: TryLock: %v", a.name, a.what, err)
	}
	want := s.m.Attempt(s.tick(), req, false)
	if ok != (want.Status == model.Acquired) {
		t.Fatalf("%s %s: TryLock took it %v, the model says %v", a.name, a.what, ok, want.Status)
	}
	if ok {
		a.state, a.held = holding, held
	}
	s.settle(t)
}

// lock starts a call that waits in a goroutine: Lock, or TryLock with a wait bound far beyond
// the run.
func (s *apiMachine) lock(t *rapid.T) {
	a := s.actor(t, idle)
	req, call := s.request(t, a)
	bound := time.Duration(0)
	if rapid.Bool().Draw(t, "with wait bound") {
		bound = time.Hour
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan lockResult, 1)
	go func() {
		held, ok, err := call(ctx, true, bound)
		done <- lockResult{held, ok, err}
	}()
	a.state, a.cancel, a.done = waiting, cancel, done
	want := s.m.Attempt(s.tick(), req, true)
	if want.Status != model.Acquired && want.Status != model.Queued {
		t.Fatalf("%s %s: the model says %v", a.name, a.what, want.Status)
	}
	s.settle(t)
}

// unlock releases a holder's hold.
func (s *apiMachine) unlock(t *rapid.T) {
	a := s.actor(t, holding)
	if err := a.unlock(a.held); err != nil {
		t.Fatalf("%s %s: Unlock: %v", a.name, a.what, err)
	}
	if _, err := s.m.Release(s.tick(), a.hold); err != nil {
		t.Fatalf("%s %s: the model refuses the release: %v", a.name, a.what, err)
	}
	if a.cancel != nil {
		a.cancel()
	}
	a.state, a.held, a.cancel, a.done = idle, nil, nil, nil
	s.settle(t)
}

// cancel ends a waiting call by its context: it returns without the lock and leaves nothing
// behind.
func (s *apiMachine) cancel(t *rapid.T) {
	a := s.actor(t, waiting)
	a.cancel()
	r := <-a.done
	if r.ok || (r.err != nil && !errors.Is(r.err, context.Canceled)) {
		t.Fatalf("%s %s: cancelled while waiting: ok %v, err %v", a.name, a.what, r.ok, r.err)
	}
	if got := s.m.GiveUp(s.tick(), a.hold); got.Status == model.GaveUpNothing {
		t.Fatalf("%s %s: the model had nothing of the cancelled waiter", a.name, a.what)
	}
	a.state, a.cancel, a.done = idle, nil, nil
	s.settle(t)
}

// expected is the model's state of the pool: each name's owner and queue, as actor names.
func (s *apiMachine) expected() string {
	var b strings.Builder
	for _, n := range s.pool {
		owner := s.m.Owner(s.now, n)
		owner, _, _ = strings.Cut(owner, ":")
		var queue []string
		for _, h := range s.m.Queue(s.now, n) {
			a, _, _ := strings.Cut(h, ":")
			queue = append(queue, a)
		}
		fmt.Fprintf(&b, "%s: owner %q queue %v\n", n[strings.LastIndexByte(n, ':')+1:], owner, queue)
	}
	return b.String()
}

// actual reads the same from Redis: the lock value's hold (unless its recorded lease end has
// passed), the queue's members in list order that have a live deadline.
func (s *apiMachine) actual(t *rapid.T) string {
	ctx := context.Background()
	tm, err := s.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	now := tm.UnixMilli()
	actor := func(hold string) string {
		if a := s.byID[layout.ClientOf(hold)]; a != nil {
			return a.name
		}
		return "?" + hold
	}
	var b strings.Builder
	for _, n := range s.pool {
		k := s.keys[n]
		var get *redis.StringCmd
		var list *redis.StringSliceCmd
		var scores *redis.ZSliceCmd
		if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			get, list, scores = p.Get(ctx, k[0]), p.LRange(ctx, k[1], 0, -1), p.ZRangeWithScores(ctx, k[2], 0, -1)
			return nil
		}); err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		owner := ""
		if v, err := get.Result(); err == nil {
			lv, err := layout.ParseLockValue(v)
			if err != nil {
				t.Fatal(err)
			}
			if lv.LeaseEnd == 0 || lv.LeaseEnd > now {
				owner = actor(lv.Hold)
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
				queue = append(queue, actor(hold))
			}
		}
		fmt.Fprintf(&b, "%s: owner %q queue %v\n", n[strings.LastIndexByte(n, ':')+1:], owner, queue)
	}
	return b.String()
}

// settle waits until Redis agrees with the model and every call the model says holds has
// returned holding; then no other waiting call may have returned.
func (s *apiMachine) settle(t *rapid.T) {
	want := s.expected()
	deadline := time.Now().Add(apiSettle)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		pending := false
		for _, a := range s.actors {
			if a.state != waiting || !s.m.Holds(s.now, a.hold) {
				continue
			}
			select {
			case r := <-a.done:
				if !r.ok || r.err != nil {
					t.Fatalf("%s %s: granted by the model, the call returned ok %v, err %v", a.name, a.what, r.ok, r.err)
				}
				// The model learns it as the call did: from its attempt.
				if got := s.m.AttemptAgain(s.now, a.hold, true); got.Status != model.Acquired && got.Status != model.Granted {
					t.Fatalf("%s %s: returned holding; the model's attempt says %v", a.name, a.what, got.Status)
				}
				a.state, a.held, a.done = holding, r.held, nil
				*s.grants++
			default:
				pending = true
			}
		}
		got := s.actual(t)
		if !pending && got == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis did not come to the model's state within %v:\nmodel:\n%sredis:\n%s(a granted call still pending: %v)",
				apiSettle, want, got, pending)
		}
		<-tick.C
	}
	for _, a := range s.actors {
		if a.state != waiting {
			continue
		}
		select {
		case r := <-a.done:
			t.Fatalf("%s %s: the call returned (ok %v, err %v) while the model says it waits:\n%s", a.name, a.what, r.ok, r.err, want)
		default:
		}
	}
}

// teardown ends every call and hold, as the model does, and checks that nothing is left.
func (s *apiMachine) teardown(t *rapid.T) {
	for _, a := range s.actors {
		if a.state == waiting && !s.m.Holds(s.now, a.hold) {
			a.cancel()
			r := <-a.done
			if r.ok {
				t.Fatalf("%s %s: cancelled at the end, returned holding", a.name, a.what)
			}
			s.m.GiveUp(s.tick(), a.hold)
			a.state, a.cancel, a.done = idle, nil, nil
		}
	}
	s.settle(t)
	for _, a := range s.actors {
		if a.state == holding {
			if err := a.unlock(a.held); err != nil {
				t.Fatalf("%s %s: Unlock: %v", a.name, a.what, err)
			}
			s.m.Release(s.tick(), a.hold)
			a.cancel = nil
			a.state, a.held = idle, nil
		}
	}
	s.settle(t)
	for _, n := range s.pool {
		if o, q := s.m.Owner(s.now, n), s.m.Queue(s.now, n); o != "" || q != nil {
			t.Fatalf("after the teardown the model has %q owned by %q, queue %v", n, o, q)
		}
	}
}

// abandon ends whatever calls a failed run left waiting.
func (s *apiMachine) abandon() {
	for _, a := range s.actors {
		if a.state == waiting {
			a.cancel()
			if r := <-a.done; r.ok {
				_ = a.unlock(r.held)
			}
		}
		if a.state == holding {
			_ = a.unlock(a.held)
		}
		a.state, a.held, a.cancel, a.done = idle, nil, nil, nil
	}
}

func runAPIMachine(t *testing.T, rdb redis.UniversalClient) {
	var actors []*apiActor
	byID := map[string]*apiActor{}
	for i := range apiActors {
		c := newClient(t, rdb)
		a := &apiActor{name: string(rune('A' + i)), c: c, id: core.RuntimeOf(c).ID}
		actors = append(actors, a)
		byID[a.id] = a
	}
	steps, runs, grants := 0, 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		runs++
		tag := fmt.Sprintf("%s-%d", redistest.Name(t), runs)
		s := &apiMachine{rdb: rdb, actors: actors, byID: byID, keys: map[string][]string{},
			m: model.NewMulti(apiTimeout), steps: &steps, grants: &grants}
		for i := range apiPool {
			n := fmt.Sprintf("{%s}:%c", tag, 'a'+i)
			l, err := fair.New(actors[0].c, n)
			if err != nil {
				rt.Fatal(err)
			}
			s.pool = append(s.pool, n)
			s.keys[n] = l.Keys()
		}
		defer s.abandon()
		rt.Repeat(map[string]func(*rapid.T){
			"tryLock": s.tryLock,
			"lock":    s.lock,
			"unlock":  s.unlock,
			"cancel":  s.cancel,
			"":        func(t *rapid.T) { s.settle(t) },
		})
		s.teardown(rt)
		redistest.AssertNoKeyWithoutTTL(lintest.InRapid(t, rt), rdb, tag, s.keys[s.pool[0]][0])
	})
	t.Logf("%d runs, %d steps, %d waiting calls granted", runs, steps, grants)
}

func TestMultiLockAndFairLocksAgreeWithModel(t *testing.T) {
	topologies(t, runAPIMachine)
}
