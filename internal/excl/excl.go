// Package excl is the exclusive lock that packages reentrant and fair present: its rule set
// for the acquire engine (internal/acquire), and everything done with a hold once it exists:
// re-entry, release, fencing tokens, inspection and forced release.
//
// Both locks keep the same state in Redis, the lock value and its wait queue (see
// internal/scripts/_lock.lua), and run the same scripts; they differ in the local hand-off
// only (see internal/acquire/local.go): the fair lock's release always serves the queue in
// order, the reentrant lock's may hand the lock to a waiter of its own Client for a streak.
package excl

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/internal/acquire"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/layout"
	"github.com/redaqs/aqs/internal/scripts"
)

// Config is what differs between the exclusive locks.
type Config struct {
	// Kind names the lock in error messages and in the events of the Client's observer:
	// "reentrant", "fair".
	Kind string
	// WaiterTimeout is how long a queued waiter may go unheard of before it is dropped.
	WaiterTimeout time.Duration
	// Board, Stay and Streak are the local hand-off's (see acquire.Config).
	Board  time.Duration
	Stay   bool
	Streak int
	// Detached makes a new hold's held context keep the caller's values but not its
	// cancellation: the hold's context ends when the hold does (an election's leadership).
	Detached bool
	// Beside, when not empty, is the suffix of a key beside the lock key that lives as long as
	// a hold does: the hold's renewals extend it with the lock (an election's leader record).
	Beside string
}

// Lock is one exclusive lock value.
type Lock struct {
	rt      *core.Runtime
	cfg     Config
	name    string
	key     string   // the lock value
	keys    []string // the lock value, the queue list, the queue's deadlines
	timeout string   // cfg.WaiterTimeout in ms, as the scripts take it
	// keys and timeout as script arguments, boxed once
	keysArg    []any
	keyArg     any
	timeoutArg any
	// byDefault are the rule sets of calls with the default lease, without and with the
	// fencing token: made once, since nothing in them changes between calls.
	byDefault [2]*rules
	q         *acquire.Queue
	side      Side                            // the hold's machinery once it exists
	send      acquire.Sender[scripts.Release] // l.release, made once: Unlock allocates no method value
}

// New returns the exclusive lock of the given name on rt (a Client's runtime: nil for a nil
// Client, an invalid argument).
func New(rt *core.Runtime, name string, cfg Config) (*Lock, error) {
	if rt == nil {
		return nil, core.Invalid("nil aqs client")
	}
	// A Lock holds nothing of its own: every value of a name and configuration on rt is the
	// one its Queue keeps (see acquire.Queue.Keep), found without computing its keys again.
	qc := acquire.Config{WaiterTimeout: cfg.WaiterTimeout, Board: cfg.Board, Stay: cfg.Stay, Streak: cfg.Streak, Name: name}
	if q := acquire.Find(rt, cfg.Kind, qc); q != nil {
		if l, ok := q.Kept().(*Lock); ok {
			return l, nil
		}
	}
	key, err := rt.Key(name)
	if err != nil {
		return nil, err
	}
	l := &Lock{rt: rt, cfg: cfg, name: name, key: key,
		keys:    layout.LockKeys(key),
		timeout: strconv.FormatInt(cfg.WaiterTimeout.Milliseconds(), 10)}
	l.keysArg, l.keyArg, l.timeoutArg = box(l.keys...), l.key, l.timeout
	l.send = l.release
	qc.Grants, qc.Key = layout.GrantChannel(key, rt.ID), key
	qc.Orphans = &core.Orphans{GiveBack: l.giveBack, Holders: l.holders}
	l.q = acquire.Shared(rt, cfg.Kind, qc)
	l.side = Side{RT: rt, Key: key, Kind: cfg.Kind, Name: name, Primitive: cfg.Kind, Queue: l.q, Unlock: l.Unlock}
	if cfg.Beside != "" {
		l.side.RenewKeys = []string{key + cfg.Beside}
	}
	l.byDefault = [2]*rules{l.newRules(core.LockConfig{}), l.newRules(core.LockConfig{Token: true})}
	// Another value of the name may have been made meanwhile: the first one kept is every one.
	return l.q.Keep(l).(*Lock), nil
}

// giveBack passes on the lock granted to hold, a hold id this Client no longer uses (see
// internal/core/orphan.go): lock_give_up, whose queue member ("<hold> 0") is nobody's.
func (l *Lock) giveBack(ctx context.Context, hold string) error {
	v, err := scripts.LockGiveUp.Run(ctx, l.rt.Pipe, l.keys, hold, "0", l.rt.PublishCommand()).Result()
	if err == nil {
		_, err = scripts.DecodeGiveUp(v)
	}
	return core.RedisError(l.key, err)
}

// holders returns the hold id of the lock's holder, if any (see internal/core/orphan.go).
func (l *Lock) holders(ctx context.Context) ([]string, error) {
	cmd := redis.NewStringCmd(ctx, "get", l.key)
	if err := l.rt.Pipe.Process(ctx, cmd); err != nil {
		if err == redis.Nil {
			return nil, nil
		}
		return nil, core.RedisError(l.key, err)
	}
	return layout.HoldsIn(cmd.Val()), nil
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Key returns the Redis key of the lock.
func (l *Lock) Key() string { return l.key }

// Keys returns the lock key, its queue list and its queue's deadlines.
func (l *Lock) Keys() []string { return l.keys }

// Lease returns the lease a new hold gets: the fixed lease, or the watchdog timeout.
func (l *Lock) Lease(cfg core.LockConfig) time.Duration { return l.side.Lease(cfg) }

// Acquire takes the lock for ctx: a re-entry when ctx holds it already, otherwise a new hold
// through the acquire engine, waiting until ctx is done when block is set, else up to
// cfg.Wait. It returns the held context, or false with no error when the lock was not had
// in time.
func (l *Lock) Acquire(ctx context.Context, cfg core.LockConfig, block bool) (context.Context, bool, error) {
	if err := l.rt.Check(); err != nil {
		return nil, false, err
	}
	if ctx.Err() != nil {
		return nil, false, context.Cause(ctx)
	}
	if held := l.rt.Held(ctx, l.key); held != nil {
		return l.side.Reenter(ctx, held.Hold(), cfg)
	}
	r := l.rulesFor(cfg)
	won, ok, err := l.q.Acquire(ctx, &acquire.Call{
		Rules:     r,
		Block:     block,
		Wait:      cfg.Wait,
		Member:    r.member,
		Local:     !cfg.Token,
		Primitive: l.cfg.Kind,
		Hold:      r.hold,
	})
	return won.Held, ok, err
}

// rules is the exclusive lock's rule set for the calls of one lease and token choice.
type rules struct {
	l        *Lock
	lease    string // ms
	leaseArg any    // lease, boxed once
	token    bool
	member   func(hold string) string // the queue member of a waiter
	hold     *acquire.HoldSpec
}

// rulesFor returns the rule set of a call with cfg.
func (l *Lock) rulesFor(cfg core.LockConfig) *rules {
	if cfg.Lease == 0 {
		return l.byDefault[b2i(cfg.Token)]
	}
	return l.newRules(cfg)
}

func (l *Lock) newRules(cfg core.LockConfig) *rules {
	lease := l.side.Lease(cfg)
	ms := lease.Milliseconds()
	r := &rules{l: l, lease: strconv.FormatInt(ms, 10), token: cfg.Token,
		member: func(hold string) string { return layout.LockMemberOf(hold, ms) },
		hold:   l.side.Hold(lease, cfg.Lease == 0, cfg.Token)}
	r.hold.Detached = l.cfg.Detached
	r.leaseArg = r.lease
	return r
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Fast is the minimal lock's acquisition, SET key hold NX PX lease, under the Client's
// replica-sync policy. It cannot pass a waiter: while the queue is not empty the lock key
// exists even when the holder's lease has run out (see _lock_value.lua). A call that asks for
// its fencing token has no fast attempt.
func (r *rules) Fast(ctx context.Context, hold string) (bool, error) {
	if r.token {
		return false, nil
	}
	l := r.l
	cmd := redis.NewBoolCmd(ctx, "set", l.keyArg, hold, "px", r.leaseArg, "nx")
	var err error
	if l.rt.SyncOn() {
		err = l.rt.Acquire(ctx, l.key, func(c scripts.Processor) { _ = c.Process(ctx, cmd) },
			func() bool { return cmd.Val() }, func(ctx context.Context) error { return r.GiveUp(ctx, hold) })
	} else {
		_ = l.rt.Pipe.Process(ctx, cmd) // as Acquire does it without the policy, without its closures
	}
	if err == nil {
		err = cmd.Err()
	}
	if err != nil {
		return false, core.RedisError(l.key, err)
	}
	return cmd.Val(), nil
}

func (r *rules) Attempt(ctx context.Context, hold string, t acquire.Try) (scripts.Attempt, error) {
	l := r.l
	v, err := l.rt.RunAcquire(ctx, scripts.LockAcquire, l.keys,
		[]any{hold, r.lease, l.timeout, Flag(t.Join), Flag(r.token), Flag(t.First), Flag(t.Local), l.rt.PublishCommand()}, TookIt,
		func(ctx context.Context) error { return r.GiveUp(ctx, hold) }).Result()
	if err != nil {
		return scripts.Attempt{}, core.RedisError(l.key, err)
	}
	return scripts.DecodeAttempt(v)
}

func (r *rules) GiveUp(ctx context.Context, hold string) error {
	l := r.l
	v, err := scripts.LockGiveUp.Run(ctx, l.rt.Pipe, l.keys, hold, r.lease, l.rt.PublishCommand()).Result()
	if err == nil {
		_, err = scripts.DecodeGiveUp(v)
	}
	return core.RedisError(l.key, err)
}

func (r *rules) Beat(hold string) *core.Beat {
	l := r.l
	return &core.Beat{Keys: l.keys, Script: scripts.LockHeartbeat, Args: []any{hold, r.lease, l.timeout}}
}

// Confirm confirms a grant under the replica-sync policy: the grantee's write is the renewal
// of its hold to the full lease, which also replaces the short first lease of a grant.
func (r *rules) Confirm(ctx context.Context, hold string) error {
	return r.l.side.Confirm(ctx, hold, r.lease, func(ctx context.Context) error { return r.GiveUp(ctx, hold) })
}

// Unlock releases the acquisition held by ctx: the innermost Lock of this lock in ctx's chain
// that was not released yet. The hold's last release hands the lock on (see the package
// doc). Unlock works when ctx is already done (it does not use ctx's cancellation, only its
// values).
//
// It returns an error matching aqs.ErrNotOwner, and changes nothing, when ctx holds no
// acquisition of this lock. When the hold was lost, the error matches both aqs.ErrNotOwner
// and aqs.ErrLockLost. Either way this acquisition's held context ends.
func (l *Lock) Unlock(ctx context.Context) error {
	return l.side.Release(ctx, l.send)
}

// release is the lock's release script, lock_release.lua: it counts the hold down, or ends it
// and hands the lock on (to e.Pick, or the queue's head) after e.Riders join the queue.
func (l *Lock) release(ctx context.Context, e acquire.Ending) (scripts.Release, error) {
	// With no pick and no rider the script's defaults stand for the rest (see its header):
	// the uncontended release sends the fewest arguments.
	short := e.Pick == "" && !e.Over && len(e.Riders) == 0
	n := 6 + len(e.Riders)
	if short {
		n = 3
	}
	a := scripts.LockRelease.Args(l.keysArg, n)
	a = append(a, e.Hold.ID, Flag(e.Last), l.rt.PublishCommand())
	if !short {
		a = append(a, l.timeoutArg, e.Pick, Flag(e.Over))
		for _, m := range e.Riders {
			a = append(a, m)
		}
	}
	return l.side.RunArgs(ctx, scripts.LockRelease, e.Once, a)
}

// ForceUnlock frees the lock whoever holds it and hands it to the live head of its queue. It
// reports whether the lock was held.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	if err := l.rt.Check(); err != nil {
		return false, err
	}
	n, err := scripts.LockForceRelease.RunInt(ctx, l.rt.Pipe, l.keys, l.rt.PublishCommand(), "")
	if err != nil {
		return false, core.RedisError(l.key, err)
	}
	return n == 1, nil
}

// Info is a snapshot of an exclusive lock's state in Redis.
type Info struct {
	Locked         bool
	Holder         string
	HoldCount      int
	Token          int64
	RemainingLease time.Duration
}

// Info reads the lock's state in one round trip.
func (l *Lock) Info(ctx context.Context) (Info, error) {
	if err := l.rt.Check(); err != nil {
		return Info{}, err
	}
	v, err := scripts.LockInfo.Run(ctx, l.rt.Pipe, []string{l.key}).Result()
	if err != nil {
		return Info{}, core.RedisError(l.key, err)
	}
	r, err := scripts.DecodeLockInfo(v)
	return Info{Locked: r.Holder != "", Holder: r.Holder, HoldCount: r.Count, Token: r.Token, RemainingLease: r.Remaining}, err
}

// IsLocked reports whether anyone holds the lock.
func (l *Lock) IsLocked(ctx context.Context) (bool, error) {
	in, err := l.Info(ctx)
	return in.Locked, err
}

// HoldCount returns how many times ctx's hold of this lock was acquired (its count in Redis),
// or 0 when ctx does not hold the lock.
func (l *Lock) HoldCount(ctx context.Context) (int, error) {
	held := l.rt.Held(ctx, l.key)
	in, err := l.Info(context.WithoutCancel(ctx))
	if err != nil || held == nil || !in.Locked || in.Holder != held.Hold().ID {
		return 0, err
	}
	return in.HoldCount, nil
}

// RemainingLease returns the current holder's remaining lease, or 0 when the lock is free.
func (l *Lock) RemainingLease(ctx context.Context) (time.Duration, error) {
	in, err := l.Info(ctx)
	return in.RemainingLease, err
}

// Token returns the fencing token of ctx's hold of this lock; see aqs.FencingToken.
func (l *Lock) Token(ctx context.Context) (int64, error) { return l.rt.TokenOf(ctx, l.key) }

// Boarded reports how many waiters of this Client wait for a release of this Lock's hold
// without an attempt of their own (for tests).
func (l *Lock) Boarded() int { return l.q.Boarded() }

// QueuedLocally reports how many waiters of this Client, queued in Redis, a release of this
// Lock's hold may pick (for tests).
func (l *Lock) QueuedLocally() int { return l.q.QueuedLocally() }
