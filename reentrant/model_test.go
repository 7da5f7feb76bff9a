package reentrant_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/lintest"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/model"
	"github.com/redaqs/aqs/reentrant"
)

// The model-versus-Redis state machine: the same operations, from several owners, go to the
// real lock on Redis and to model.Reentrant, and every reply is compared. Leases are long, so
// time passes only through the "expire" action, which ends the hold in Redis (PEXPIRE 1) and
// moves the model's logical clock to the hold's expiry.

const modelLease = time.Minute

type owner struct {
	name  string
	stack []context.Context // held contexts, innermost last
}

type lockMachine struct {
	rdb    redis.UniversalClient
	l      *reentrant.Lock
	m      model.Reentrant
	now    model.Time
	owners []*owner
	real   map[int64]int64 // model token -> real token
	maxTok int64           // highest real token seen
	checks *int
}

func (s *lockMachine) owner(t *rapid.T) *owner {
	return rapid.SampledFrom(s.owners).Draw(t, "owner")
}

func (s *lockMachine) ctxOf(o *owner) context.Context {
	if len(o.stack) == 0 {
		return context.Background()
	}
	return o.stack[len(o.stack)-1]
}

func (s *lockMachine) leaseOpt(t *rapid.T) ([]aqs.TryLockOption, int64) {
	if rapid.Bool().Draw(t, "fixedLease") {
		return []aqs.TryLockOption{aqs.WithLease(modelLease)}, modelLease.Milliseconds()
	}
	return nil, 0 // watchdog hold: its lease is the watchdog timeout; re-entry leaves it alone
}

func (s *lockMachine) acquire(t *rapid.T) {
	o := s.owner(t)
	opts, lease := s.leaseOpt(t)
	ctx := s.ctxOf(o)
	held, ok, err := s.l.TryLock(ctx, opts...)
	var want model.AcquireResult
	if len(o.stack) > 0 {
		tok, _ := aqs.FencingToken(ctx)
		want = s.m.AcquireExpect(s.now, o.name, lease, s.modelToken(t, tok))
	} else {
		newLease := lease
		if newLease == 0 {
			newLease = (30 * time.Second).Milliseconds()
		}
		want = s.m.AcquireLease(s.now, o.name, newLease, lease)
	}
	switch {
	case want.Lost:
		if !errors.Is(err, aqs.ErrLockLost) {
			t.Fatalf("%s re-entered a lost hold: ok=%v err=%v, model says lost", o.name, ok, err)
		}
		return
	case err != nil:
		t.Fatalf("%s acquire: %v", o.name, err)
	case ok != want.Acquired:
		t.Fatalf("%s acquire: real %v, model %+v", o.name, ok, want)
	case !ok:
		return
	}
	tok, _ := aqs.FencingToken(held)
	if r, seen := s.real[want.Token]; seen {
		if r != tok {
			t.Fatalf("re-entry changed the token: real %d, want %d", tok, r)
		}
	} else {
		if tok <= s.maxTok {
			t.Fatalf("new hold got token %d, not above earlier %d", tok, s.maxTok)
		}
		s.real[want.Token], s.maxTok = tok, tok
	}
	o.stack = append(o.stack, held)
}

// modelToken maps a real token back to the model's.
func (s *lockMachine) modelToken(t *rapid.T, real int64) int64 {
	for m, r := range s.real {
		if r == real {
			return m
		}
	}
	t.Fatalf("unknown real token %d", real)
	return 0
}

func (s *lockMachine) release(t *rapid.T) {
	o := s.owner(t)
	err := s.l.Unlock(s.ctxOf(o))
	_, want := s.m.Release(s.now, o.name)
	if len(o.stack) > 0 {
		o.stack = o.stack[:len(o.stack)-1]
	}
	if (err == nil) != (want == nil) {
		t.Fatalf("%s release: real err %v, model err %v", o.name, err, want)
	}
	if err != nil && !errors.Is(err, aqs.ErrNotOwner) {
		t.Fatalf("%s release: %v does not match ErrNotOwner", o.name, err)
	}
}

func (s *lockMachine) forceRelease(t *rapid.T) {
	got, err := s.l.ForceUnlock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := s.m.ForceRelease(s.now); got != want {
		t.Fatalf("force release: real %v, model %v", got, want)
	}
}

func (s *lockMachine) expire(t *rapid.T) {
	ms, ok := s.m.RemainingLease(s.now)
	if !ok {
		t.Skip("nothing to expire")
	}
	ctx := context.Background()
	if err := s.rdb.PExpire(ctx, s.l.Key(), time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.rdb.Exists(ctx, s.l.Key()).Val() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("key did not expire")
		}
		time.Sleep(time.Millisecond)
	}
	s.now += model.Time(ms)
}

// forget drops an owner's contexts once its hold is gone (a caller that gave up after losing).
func (s *lockMachine) forget(t *rapid.T) {
	o := s.owner(t)
	if len(o.stack) == 0 || s.m.HoldCount(s.now, o.name) > 0 {
		t.Skip("owner holds the lock")
	}
	o.stack = nil
}

func (s *lockMachine) check(t *rapid.T) {
	*s.checks++
	info, err := s.l.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	holder, count, held := s.m.Holder(s.now)
	if info.Locked != held {
		t.Fatalf("locked: real %v, model %v", info.Locked, held)
	}
	for _, o := range s.owners {
		n, err := s.l.HoldCount(s.ctxOf(o))
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		if held && holder == o.name && len(o.stack) > 0 {
			want = count
		}
		if n != want {
			t.Fatalf("%s hold count: real %d, model %d", o.name, n, want)
		}
	}
}

func runLockMachine(t *testing.T, rdb redis.UniversalClient) {
	c := newClient(t, rdb)
	checks, runs := 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		runs++
		l, err := reentrant.New(c, fmt.Sprintf("%s-%d", t.Name(), runs))
		if err != nil {
			rt.Fatal(err)
		}
		s := &lockMachine{rdb: rdb, l: l, real: map[int64]int64{}, checks: &checks}
		for i := 0; i < 3; i++ {
			s.owners = append(s.owners, &owner{name: fmt.Sprintf("o%d", i)})
		}
		defer func() {
			_, _ = l.ForceUnlock(context.Background())
			_ = rdb.Del(context.Background(), l.Key()).Err()
		}()
		rt.Repeat(map[string]func(*rapid.T){
			"acquire": s.acquire,
			"release": s.release,
			"force":   s.forceRelease,
			"expire":  s.expire,
			"forget":  s.forget,
			"":        s.check,
		})
		redistest.AssertNoKeyWithoutTTL(lintest.InRapid(t, rt), rdb, l.Name(), l.Key())
	})
	if runs < 100 {
		t.Fatalf("only %d runs", runs)
	}
	t.Logf("%d runs, %d state checks", runs, checks)
}

func TestLockAgreesWithModel(t *testing.T) {
	topologies(t, runLockMachine)
}
