package rwlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/acquire"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/excl"
	"github.com/redaqs/aqs/internal/layout"
	"github.com/redaqs/aqs/internal/scripts"
)

// ErrUpgrade is returned, at once, by Lock and TryLock through a context that holds the read
// side but not the write side.
var ErrUpgrade = errors.New("rwlock: a read hold cannot be upgraded to the write side")

// Lock is a distributed read-write lock. Create it with New; it is safe for concurrent use.
type Lock struct {
	rt            *core.Runtime
	name          string
	fair          bool
	waiterTimeout time.Duration
	timeout       string // waiterTimeout in ms, as the scripts take it

	// The keys (see internal/scripts/_rw.lua): the write side, the readers, their re-entry
	// counts, the queue and its deadlines.
	kw, kr, krn, kq, kd string
	keys                []string
	grants              string
	q                   *acquire.Queue
	// w is the write side's hold machinery, the exclusive locks' own (internal/excl).
	w excl.Side
	// sendWrite and sendRead are the sides' release scripts, made once: an Unlock allocates
	// no func value.
	sendWrite, sendRead acquire.Sender[scripts.Release]

	// queueSeen is set when this Lock's last release of a read hold found the queue not
	// empty: releases then go through the script, which serves the queue in the same round
	// trip, rather than through plain commands and a second call.
	queueSeen atomic.Bool
}

// config is what New's options of this package's own set.
type config struct {
	fair bool
}

// Option configures a Lock at New; this package's With functions make them. Every primitive
// package's WithWaiterTimeout means the same. A zero Option is an invalid argument.
type Option struct{ s *core.Setting }

// WithNonFair lets new readers in whenever no writer holds, even while writers wait: the
// highest read throughput, at the price of writers waiting for a gap between readers. The
// default is the fair mode.
func WithNonFair() Option {
	return Option{core.Set(func(c *config) error {
		c.fair = false
		return nil
	})}
}

// WithWaiterTimeout sets how long a queued waiter (reader or writer) may go unheard of before
// it is dropped from the queue: those queued behind a waiter whose process died wait at most
// this long for it. Live waiters are kept alive by their Client's heartbeats, three per
// timeout. It must be at least 30ms; the default is 5s. Every primitive package has this
// option, with this meaning and these bounds.
func WithWaiterTimeout(d time.Duration) Option { return Option{core.WaiterTimeout(d)} }

// WithWriterTimeout is WithWaiterTimeout, kept for existing callers: the timeout applies to
// every waiter, reader or writer.
//
// Deprecated: use WithWaiterTimeout.
func WithWriterTimeout(d time.Duration) Option { return WithWaiterTimeout(d) }

// New returns the read-write lock of the given name. Any bytes make a valid name, but it must
// not be empty. Creating a Lock touches no key.
func New(c *aqs.Client, name string, opts ...Option) (*Lock, error) {
	cfg := config{fair: true}
	timeout, err := core.Settings(opts, func(o Option) *core.Setting { return o.s }, &cfg)
	if err != nil {
		return nil, err
	}
	rt := core.RuntimeOf(c)
	if rt == nil {
		return nil, core.Invalid("nil aqs client")
	}
	key, err := rt.Key(name)
	if err != nil {
		return nil, err
	}
	l := &Lock{rt: rt, name: name, fair: cfg.fair, waiterTimeout: timeout,
		timeout: strconv.FormatInt(timeout.Milliseconds(), 10),
		keys:    layout.RWKeys(key), grants: layout.GrantChannel(key, rt.ID)}
	l.kw, l.kr, l.krn, l.kq, l.kd = l.keys[0], l.keys[1], l.keys[2], l.keys[3], l.keys[4]
	kind := "rwlock" // the fair rwlock's queue rules differ: its own Queue (see internal/acquire/shared.go)
	if cfg.fair {
		kind = "rwlock-fair"
	}
	l.q = acquire.Shared(rt, kind, acquire.Config{Grants: l.grants, WaiterTimeout: timeout, Name: name, Key: key,
		Orphans: &core.Orphans{GiveBack: l.giveBack, Holders: l.holders}})
	l.w = excl.Side{RT: rt, Key: l.kw, Kind: "rwlock", Name: name, Primitive: "rwlock-write", Queue: l.q, Unlock: l.Unlock}
	l.sendWrite, l.sendRead = l.releaseWrite, l.releaseRead
	return l, nil
}

// giveBack gives back the write side or the read hold granted to hold, a hold id this Client
// no longer uses (see internal/core/orphan.go): rw_give_up in either mode, whose queue member
// ("<hold> 0 x", "<hold> 0 s") is nobody's.
func (l *Lock) giveBack(ctx context.Context, hold string) error {
	for _, mode := range []string{"x", "s"} {
		v, err := scripts.RWGiveUp.Run(ctx, l.rt.Pipe, l.keys, hold, 0, mode, l.rt.PublishCommand()).Result()
		if err == nil {
			_, err = scripts.DecodeGiveUp(v)
		}
		if err != nil {
			return core.RedisError(l.kw, err)
		}
	}
	return nil
}

// holders returns the hold ids of the write hold and of the read holds (see
// internal/core/orphan.go).
func (l *Lock) holders(ctx context.Context) ([]string, error) {
	w := redis.NewStringCmd(ctx, "get", l.kw)
	r := redis.NewStringSliceCmd(ctx, "zrange", l.kr, 0, -1)
	if err := l.rt.Pipe.ProcessAll(ctx, w, r); err != nil && err != redis.Nil {
		return nil, core.RedisError(l.kw, err)
	}
	return append(layout.HoldsIn(w.Val()), r.Val()...), nil
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Key returns the Redis key of the write side; the other keys of the lock share its hash tag.
func (l *Lock) Key() string { return l.kw }

// Keys returns every key of the lock: the write side, the readers, their re-entry counts,
// the queue of waiters (a list, in arrival order) and their liveness deadlines (a zset). The
// slice is the lock's own: do not modify it.
func (l *Lock) Keys() []string { return l.keys }

// Fair reports whether a new reader waits behind queued waiters (the fair mode).
func (l *Lock) Fair() bool { return l.fair }

// ---- the write side ----

// Lock blocks until the write side is granted or ctx is done, and returns the held context.
// Through a context that holds the write side it re-enters at once; through one that holds
// only the read side it fails with ErrUpgrade. On failure it leaves nothing behind: it leaves
// the queue, and what was granted to it in that instant passes on; an invalid option fails
// with aqs.ErrInvalidArgument before anything is sent. Options: aqs.WithLease,
// aqs.WithFencingToken.
func (l *Lock) Lock(ctx context.Context, opts ...aqs.LockOption) (context.Context, error) {
	cfg, err := core.ApplyOptions(opts)
	if err != nil {
		return nil, err
	}
	held, _, err := l.acquireWrite(ctx, cfg, true)
	return held, err
}

// TryLock takes the write side only if it can at once (nobody holds and nobody waits); with
// aqs.WithWait(d) it joins the queue and waits up to d. Not getting it is a result, not an
// error: (nil, false, nil), and nothing is left behind. Re-entry and the refused upgrade are as
// for Lock. Options: aqs.WithLease, aqs.WithFencingToken, aqs.WithWait.
func (l *Lock) TryLock(ctx context.Context, opts ...aqs.TryLockOption) (context.Context, bool, error) {
	cfg, err := core.ApplyOptions(opts)
	if err != nil {
		return nil, false, err
	}
	return l.acquireWrite(ctx, cfg, false)
}

// Unlock releases the write acquisition held by ctx: the innermost Lock in ctx's chain not
// released yet, and ends its held context with cause aqs.ErrReleased. The hold's last release
// gives the lock to the head of the queue, in the same script (see the package doc). Unlock
// does not use ctx's cancellation, only its values, so it works with a held context that is
// already done. A context that holds only the read side gets an error matching
// aqs.ErrNotOwner; a hold that was lost, one matching aqs.ErrNotOwner and aqs.ErrLockLost, and
// nothing changes. When Redis fails, Unlock returns that error and the acquisition is released
// all the same: its held context has ended, the hold is no longer renewed, and a write hold
// that the release did not reach is handed on or freed when its lease ends. After Client.Close
// it fails with aqs.ErrClosed.
func (l *Lock) Unlock(ctx context.Context) error {
	return l.w.Release(ctx, l.sendWrite)
}

// releaseWrite is the write side's release, rw_write_release.lua: it counts the hold down,
// or ends it and serves the queue.
func (l *Lock) releaseWrite(ctx context.Context, e acquire.Ending) (scripts.Release, error) {
	return l.w.Run(ctx, scripts.RWWriteRelease, e.Once, l.keys, e.Hold.ID, excl.Flag(e.Last), l.rt.PublishCommand())
}

// Token returns the fencing token of ctx's write hold (see aqs.FencingToken). It fails with an
// error matching aqs.ErrNotOwner when ctx holds no write acquisition of this lock.
func (l *Lock) Token(ctx context.Context) (int64, error) { return l.rt.TokenOf(ctx, l.kw) }

// ForceUnlock frees the lock whoever holds it, writer and readers, and gives it to the head of
// the queue. It reports whether anything was held. The former holders' held contexts are
// cancelled with aqs.ErrLockLost at their Client's next renewal check. Meant for
// administration.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	if err := l.rt.Check(); err != nil {
		return false, err
	}
	n, err := scripts.RWForceRelease.RunInt(ctx, l.rt.Pipe, l.keys, l.rt.PublishCommand(), "")
	if err != nil {
		return false, core.RedisError(l.kw, err)
	}
	return n == 1, nil
}

func (l *Lock) acquireWrite(ctx context.Context, cfg core.LockConfig, block bool) (context.Context, bool, error) {
	if err := l.rt.Check(); err != nil {
		return nil, false, err
	}
	if ctx.Err() != nil {
		return nil, false, context.Cause(ctx)
	}
	if held := l.rt.Held(ctx, l.kw); held != nil {
		return l.w.Reenter(ctx, held.Hold(), cfg)
	}
	if l.rt.Held(ctx, l.kr) != nil {
		return nil, false, fmt.Errorf("rwlock: lock %q: %w", l.name, ErrUpgrade)
	}
	lease := l.w.Lease(cfg)
	won, ok, err := l.q.Acquire(ctx, &acquire.Call{
		Rules:     &rules{l: l, lease: strconv.FormatInt(lease.Milliseconds(), 10), mode: "x", token: cfg.Token},
		Block:     block,
		Wait:      cfg.Wait,
		Primitive: "rwlock-write",
		Hold:      l.w.Hold(lease, cfg.Lease == 0, cfg.Token),
	})
	return won.Held, ok, err
}

// rules is the read-write lock's rule set for the acquire engine, for one call of either side.
type rules struct {
	l      *Lock
	lease  string // ms
	mode   string // "x" the write side, "s" the read side
	token  bool   // the write side: assign the fencing token at acquisition
	writer string // the read side: the caller's own write hold (a downgrade), or ""
}

func (r *rules) Attempt(ctx context.Context, hold string, t acquire.Try) (scripts.Attempt, error) {
	l := r.l
	s, args := scripts.RWWriteAcquire, []any{hold, r.lease, l.timeout, excl.Flag(t.Join), excl.Flag(r.token),
		l.rt.PublishCommand(), excl.Flag(t.First)}
	if r.mode == "s" {
		s, args = scripts.RWReadAcquire, []any{hold, r.lease, r.writer, excl.Flag(l.fair), l.timeout, excl.Flag(t.Join),
			l.rt.PublishCommand(), excl.Flag(t.First)}
	}
	v, err := l.rt.RunAcquire(ctx, s, l.keys, args, excl.TookIt,
		func(ctx context.Context) error { return r.GiveUp(ctx, hold) }).Result()
	if err != nil {
		return scripts.Attempt{}, core.RedisError(l.kw, err)
	}
	return scripts.DecodeAttempt(v)
}

func (r *rules) GiveUp(ctx context.Context, hold string) error {
	l := r.l
	v, err := scripts.RWGiveUp.Run(ctx, l.rt.Pipe, l.keys, hold, r.lease, r.mode, l.rt.PublishCommand()).Result()
	if err == nil {
		_, err = scripts.DecodeGiveUp(v)
	}
	return core.RedisError(l.kw, err)
}

func (r *rules) Beat(hold string) *core.Beat {
	l := r.l
	return &core.Beat{Keys: l.keys, Script: scripts.RWHeartbeat,
		Args: []any{hold, r.lease, r.mode, l.timeout, l.rt.PublishCommand()}}
}

// Confirm confirms a grant under the replica-sync policy: the grantee's write is the renewal
// of its hold to the full lease.
func (r *rules) Confirm(ctx context.Context, hold string) error {
	l := r.l
	giveUp := func(ctx context.Context) error { return r.GiveUp(ctx, hold) }
	if r.mode == "x" {
		return l.w.Confirm(ctx, hold, r.lease, giveUp)
	}
	v, err := l.rt.ConfirmGrant(ctx, scripts.RWReadRenew, []string{l.kr, l.krn}, []any{hold, r.lease},
		func(reply any) bool { return reply == int64(1) }, giveUp)
	if err != nil {
		return core.RedisError(l.kw, err)
	}
	if v != int64(1) {
		return fmt.Errorf("rwlock: lock %q: the grant was gone when confirmed: %w", l.name, core.ErrLockLost)
	}
	return nil
}

// ---- the read side ----

// RLock blocks until the read side is granted or ctx is done, and returns the held context.
// Through a context that holds the read side it re-enters at once; through one that holds the
// write side it takes the read side too, at once (a downgrade): that read context is not
// ended by the write side's release (it keeps the values of the write side's context, not its
// cancellation), and ends with its own RUnlock or the loss of its hold. On failure it leaves
// nothing behind; an invalid option fails with aqs.ErrInvalidArgument before anything is
// sent. Option: aqs.WithLease (read holds have no fencing token).
func (l *Lock) RLock(ctx context.Context, opts ...aqs.LeaseOption) (context.Context, error) {
	cfg, err := core.ApplyOptions(opts)
	if err != nil {
		return nil, err
	}
	held, _, err := l.acquireRead(ctx, cfg, true)
	return held, err
}

// TryRLock takes the read side only if it can at once; with aqs.WithWait(d) it waits up to d.
// Not getting it is a result, not an error: (nil, false, nil), and nothing is left behind.
// Re-entry and downgrade are as for RLock. Options: aqs.WithLease, aqs.WithWait.
func (l *Lock) TryRLock(ctx context.Context, opts ...aqs.TryOption) (context.Context, bool, error) {
	cfg, err := core.ApplyOptions(opts)
	if err != nil {
		return nil, false, err
	}
	return l.acquireRead(ctx, cfg, false)
}

// RUnlock releases the read acquisition held by ctx: the innermost RLock in ctx's chain not
// released yet, and ends its held context with cause aqs.ErrReleased. The hold's last release
// frees its place, and the last reader's gives the write side to the writer at the head of the
// queue. RUnlock does not use ctx's cancellation, only its values, so it works with a held
// context that is already done. A context that holds only the write side gets an error
// matching aqs.ErrNotOwner; a hold that was lost, one matching aqs.ErrNotOwner and
// aqs.ErrLockLost, and nothing changes. When Redis fails, RUnlock returns that error and the
// acquisition is released all the same: its held context has ended, the hold is no longer
// renewed, and a read hold that the release did not reach ends with its lease. After
// Client.Close it fails with aqs.ErrClosed.
func (l *Lock) RUnlock(ctx context.Context) error {
	return acquire.Unlock(l.q, ctx, l.kr, acquire.Op{Kind: "rwlock", Verb: "read-unlock", Name: l.name}, l.sendRead)
}

// releaseRead is the read side's release: rw_read_release.lua, or, for the last release of a
// hold whose lease is known to run and that was never re-entered, two plain commands (see
// releasePlain).
func (l *Lock) releaseRead(ctx context.Context, e acquire.Ending) (scripts.Release, error) {
	trusted := time.Now().Before(e.Trusted)
	reentered := e.Hold.Reentered()
	if e.Last && trusted && !reentered && !l.queueSeen.Load() {
		return l.releasePlain(ctx, e.Hold)
	}
	r, err := l.w.Run(ctx, scripts.RWReadRelease, e.Once, l.keys,
		e.Hold.ID, excl.Flag(e.Last), l.rt.PublishCommand(), excl.Flag(reentered), excl.Flag(trusted))
	if err == nil && e.Last {
		l.queueSeen.Store(false) // the next release looks again, with plain commands
	}
	return r, err
}

// releasePlain ends read hold h with two plain commands in one round trip (ZREM of the hold,
// then LINDEX of the queue's head), sent once: the common release costs Redis a fraction of a
// script's work. Only when the queue is not empty does a script (rw_serve.lua) serve it. The
// two need not be atomic: a waiter that joins after the LINDEX made its attempt after the
// ZREM, so it saw this reader gone, and was served by its own attempt if it could be.
func (l *Lock) releasePlain(ctx context.Context, h *core.Hold) (scripts.Release, error) {
	zrem := redis.NewIntCmd(ctx, "zrem", l.kr, h.ID)
	head := redis.NewStringCmd(ctx, "lindex", l.kq, 0)
	err := l.rt.Pipe.ProcessAll(ctx, scripts.NoRetry{Cmder: zrem}, scripts.NoRetry{Cmder: head})
	switch {
	case err != nil && err != redis.Nil:
		return scripts.Release{}, core.RedisError(l.kw, err)
	case zrem.Val() == 0:
		return scripts.Release{Kind: scripts.NotHeld}, nil
	case head.Err() == redis.Nil:
		return scripts.Release{Kind: scripts.Freed}, nil
	}
	l.queueSeen.Store(true)
	v, err := scripts.RWServe.Run(ctx, l.rt.Pipe, []string{l.kw, l.kr, l.kq, l.kd}, l.rt.PublishCommand(), l.rt.ID).Result()
	if err != nil {
		return scripts.Release{}, core.RedisError(l.kw, err)
	}
	r, err := scripts.DecodeRelease(v)
	return scripts.Release{Kind: scripts.Freed, Mine: r.Mine}, err
}

func noToken(context.Context, *core.Hold) (int64, error) {
	return 0, core.Invalid("rwlock: read holds have no fencing token")
}

// reenterRead takes the read side again for a context that holds it (rw_read_reenter.lua).
func (l *Lock) reenterRead(ctx context.Context, h *core.Hold, cfg core.LockConfig) (context.Context, bool, error) {
	return l.q.Reenter(ctx, h, cfg.Lease, acquire.Reentry{
		Send: func(ctx context.Context, hold string, lease time.Duration) (bool, error) {
			n, err := scripts.RWReadReenter.RunInt(ctx, l.rt.Pipe, []string{l.kr, l.krn}, hold, lease.Milliseconds())
			return n != 0, core.RedisError(l.kw, err)
		},
		Grant:     core.Grant{Key: l.kr, Renew: scripts.RWReadRenew, RenewKeys: []string{l.krn}, FetchToken: noToken},
		Primitive: "rwlock-read",
		What:      acquire.Op{Kind: "rwlock", Verb: "read re-enter", Name: l.name},
	})
}

func (l *Lock) acquireRead(ctx context.Context, cfg core.LockConfig, block bool) (context.Context, bool, error) {
	if err := l.rt.Check(); err != nil {
		return nil, false, err
	}
	if ctx.Err() != nil {
		return nil, false, context.Cause(ctx)
	}
	if held := l.rt.Held(ctx, l.kr); held != nil {
		return l.reenterRead(ctx, held.Hold(), cfg)
	}
	writer := ""
	if held := l.rt.Held(ctx, l.kw); held != nil {
		writer = held.Hold().ID // a downgrade: the writer takes the read side too
	}
	lease := l.w.Lease(cfg)
	won, ok, err := l.q.Acquire(ctx, &acquire.Call{
		Rules:     &rules{l: l, lease: strconv.FormatInt(lease.Milliseconds(), 10), mode: "s", writer: writer},
		Block:     block,
		Wait:      cfg.Wait,
		Primitive: "rwlock-read",
		Hold: &acquire.HoldSpec{Key: l.kr, Lease: lease, Watchdog: cfg.Lease == 0, Renew: scripts.RWReadRenew, RenewKeys: []string{l.krn},
			FetchToken: noToken, Detached: writer != "", Release: l.RUnlock},
	})
	return won.Held, ok, err
}

// ---- inspection ----

// Info is a snapshot of a read-write lock in Redis.
type Info struct {
	// Writer is the hold id of the write hold, "" when no writer holds.
	Writer string
	// WriteCount is the writer's count of acquisitions in Redis.
	WriteCount int
	// Token is the write hold's fencing token, 0 when none was assigned.
	Token int64
	// WriteLease is the writer's remaining lease; 0 when no writer holds.
	WriteLease time.Duration
	// Readers is the number of live read holds.
	Readers int
	// Waiters is the number of live waiters in the queue, readers and writers.
	Waiters int
}

// Info reads the lock's state in one round trip. It is a snapshot: the lock may have changed
// by the time Info returns.
func (l *Lock) Info(ctx context.Context) (Info, error) {
	if err := l.rt.Check(); err != nil {
		return Info{}, err
	}
	v, err := scripts.RWInfo.Run(ctx, l.rt.Pipe, []string{l.kw, l.kr, l.kd}).Result()
	if err != nil {
		return Info{}, core.RedisError(l.kw, err)
	}
	r, err := scripts.DecodeRWInfo(v)
	in := Info{Readers: r.Readers, Waiters: r.Waiters}
	if r.Holder != "" {
		in.Writer, in.WriteCount, in.Token, in.WriteLease = r.Holder, r.Count, r.Token, r.Remaining
	}
	return in, err
}

// IsLocked reports whether a writer or any reader holds the lock (one Info).
func (l *Lock) IsLocked(ctx context.Context) (bool, error) {
	in, err := l.Info(ctx)
	if err != nil {
		return false, err
	}
	return in.Writer != "" || in.Readers > 0, nil
}
