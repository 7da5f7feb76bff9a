// Package excl holds what the exclusive locks (reentrant, fair, and the write side of the
// read-write lock to come) share: the lock key's value, "<hold id> [n<count>] [t<token>] [w]"
// (see internal/scripts/lock_acquire.lua), and everything done with a hold once it exists:
// re-entry, release, lazy fencing tokens, inspection and forced release. Each lock supplies
// its own acquisition and its own release and force scripts (the fair lock's hand the lock
// to the next waiter); they all take ARGV hold id, end flag, publish command (release) and
// publish command, hold id (force).
package excl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/scripts"
)

// Base is one exclusive lock's shared part.
type Base struct {
	RT      *core.Runtime
	Kind    string // "reentrant", "fair": the prefix of error messages
	name    string
	key     string   // the lock key
	keys    []string // KEYS of the release and force scripts (the lock key first)
	channel string   // release notifications: key + ":ch"
	release *scripts.Script
	force   *scripts.Script
	// Handed, when set, is told of a release that handed the lock to a waiter of this Client
	// without notifying it (the fair lock: see hand_off in _fair_queue.lua).
	Handed func(hold string)
	// Pick, when set, may pick a local waiter to hand the lock to when a hold ends (the
	// reentrant lock: see internal/core/pick.go), and returns the arguments that the release
	// script then gets after its own three; the script replies -2 when it handed the lock
	// over. done, which Pick returns too, is told whether it did, after every release that
	// called Pick (handed is false when Pick picked nobody), and whether the release's outcome
	// is known at all.
	Pick func(at time.Time) (w *core.Waiter, args []any, done func(handed, known bool))
	// Carry, when set, is called before the release that ends a hold is sent (the fair lock:
	// its riders, see fair/ride.go). It may return arguments that the release script then gets
	// after its own three, and settle, which is told the script's reply and error and returns
	// the reply to go on with.
	Carry func(at time.Time) (args []any, settle func(r any, err error) any)
}

// New returns the shared part of the lock of the given name on rt (a Client's runtime: nil
// for a nil Client, an invalid argument); extra are the keys, after the lock key, that its
// release and force scripts need.
func New(rt *core.Runtime, kind, name string, release, force *scripts.Script, extra ...string) (*Base, error) {
	if rt == nil {
		return nil, core.Invalid("nil aqs client")
	}
	key, err := rt.Key(name)
	if err != nil {
		return nil, err
	}
	keys := []string{key}
	for _, suffix := range extra {
		keys = append(keys, key+suffix)
	}
	return &Base{RT: rt, Kind: kind, name: name, key: key, keys: keys, channel: key + ":ch",
		release: release, force: force}, nil
}

// Name returns the lock's name.
func (b *Base) Name() string { return b.name }

// Key returns the Redis key of the lock.
func (b *Base) Key() string { return b.key }

// Keys returns the lock key and the keys after it that the lock's scripts use.
func (b *Base) Keys() []string { return b.keys }

// Channel returns the channel on which releases notify waiters.
func (b *Base) Channel() string { return b.channel }

// Lease returns the lease a new hold gets: the fixed lease, or the watchdog timeout.
func (b *Base) Lease(cfg core.LockConfig) time.Duration {
	if cfg.Lease == 0 {
		return b.RT.Cfg.WatchdogTimeout
	}
	return cfg.Lease
}

// Won turns a successful acquisition into a held context, unless ctx ended meanwhile: then
// the lock goes back (x/sync's rule: a failed call leaves the lock unchanged).
func (b *Base) Won(ctx context.Context, hold string, cfg core.LockConfig, token int64, sentAt time.Time) (context.Context, bool, error) {
	held := b.RT.Adopt(ctx, core.Grant{
		Key: b.key, ID: hold, Token: token, Lease: b.Lease(cfg), Watchdog: cfg.Lease == 0,
		Renew: scripts.LockRenew, FetchToken: b.fetchToken, SentAt: sentAt,
	})
	if ctx.Err() != nil {
		_ = b.Unlock(held)
		return nil, false, context.Cause(ctx)
	}
	return held, true, nil
}

// WonGrant turns a lock handed over by another holder's release (or taken by a heartbeat)
// into a held context. The grant's lease runs at first only to the waiter's liveness deadline
// (see grant in _fair_queue.lua), which the caller bounds by first: the lease started after
// since and lasts at least first. If the hold outlives half of that, the watchdog sets its own
// lease with one renewal; the caller owns the lock at once.
func (b *Base) WonGrant(ctx context.Context, hold string, cfg core.LockConfig, since time.Time, first time.Duration) (context.Context, bool, error) {
	if b.RT.SyncOn() {
		// The replica-sync policy: the grant was made by another call's script, so the new
		// holder confirms it with a write of its own, WAIT after it (see internal/core/sync.go).
		// The write is the renewal to the hold's full lease, which also replaces the short
		// first lease of the grant. It runs even when ctx ended: a confirmed hold is then
		// released below, an unconfirmed one is undone.
		sentAt := time.Now()
		r, err := b.RT.ConfirmGrant(context.WithoutCancel(ctx), scripts.LockRenew, []string{b.key},
			[]any{hold, b.Lease(cfg).Milliseconds()}, isOne, b.undoer(hold))
		if err != nil {
			return nil, false, core.RedisError(b.key, err)
		}
		if r != int64(1) {
			return nil, false, fmt.Errorf("%s: lock %q: the grant was gone when confirmed: %w", b.Kind, b.name, core.ErrLockLost)
		}
		since, first = sentAt, b.Lease(cfg)
	}
	held := b.RT.Adopt(ctx, core.Grant{
		Key: b.key, ID: hold, Lease: min(first, b.Lease(cfg)), Watchdog: cfg.Lease == 0,
		Renew: scripts.LockRenew, FetchToken: b.fetchToken, SentAt: since,
	})
	if first < b.Lease(cfg) {
		if a := b.RT.Held(held, b.key); a != nil {
			b.RT.ExtendLater(a.Hold(), b.Lease(cfg), since.Add(first/2))
		}
	}
	if ctx.Err() != nil {
		_ = b.Unlock(held)
		return nil, false, context.Cause(ctx)
	}
	return held, true, nil
}

// isOne reports whether a script's reply is 1: an acquisition or a confirmed hold.
func isOne(reply any) bool { return reply == int64(1) }

// Acquired reports whether the reply of an acquiring script of an exclusive lock
// (lock_acquire.lua, fair_acquire.lua, rw_write_acquire.lua, rw_read_acquire.lua) means that
// this attempt acquired: 1 or a fencing token. 2 is not: lock_acquire.lua and fair_acquire.lua
// reply 2 for a lock handed to the hold earlier (a release's hand-off the waiter had not heard
// of), which the attempt found without a write, so its WAIT proved nothing about it; the
// locks pass it to WonGrant, which confirms it as any grant. A token is never 2: tokens are
// server times in microseconds.
func Acquired(reply any) bool {
	n, ok := reply.(int64)
	return ok && (n == 1 || n > 2)
}

// Undo gives back what an acquisition of hold took, with the lock's force script bounded to
// hold: the undo of an acquisition the replicas did not acknowledge (see
// internal/core/sync.go). The hold id is fresh, so releasing whatever it holds is always safe.
func (b *Base) Undo(ctx context.Context, hold string) error {
	return core.RedisError(b.key, b.force.Run(ctx, b.RT.Redis, b.keys, b.RT.PublishCommand(), hold).Err())
}

// undoer returns Undo for hold, as the replica-sync policy takes it.
func (b *Base) undoer(hold string) func(context.Context) error {
	return func(ctx context.Context) error { return b.Undo(ctx, hold) }
}

// SetNXAcquire is the minimal lock's acquisition, SET key hold NX PX lease, under the Client's
// replica-sync policy (core.Runtime.Acquire): with the policy on, an acquisition too few
// replicas acknowledged is undone and reported as an error matching aqs.ErrReplicaSync.
func (b *Base) SetNXAcquire(ctx context.Context, hold string, lease time.Duration) (bool, error) {
	var cmd *redis.BoolCmd
	err := b.RT.Acquire(ctx, b.key, func(c redis.Cmdable) { cmd = c.SetNX(ctx, b.key, hold, lease) },
		func() bool { return cmd.Val() }, b.undoer(hold))
	if err == nil {
		err = cmd.Err()
	}
	if err != nil {
		return false, core.RedisError(b.key, err)
	}
	return cmd.Val(), nil
}

// RunAcquire runs an acquiring script of hold under the Client's replica-sync policy (see
// core.Runtime.RunAcquire), its reply read with Acquired and its undo Undo.
func (b *Base) RunAcquire(ctx context.Context, s *scripts.Script, keys []string, hold string, args ...any) *redis.Cmd {
	return b.RT.RunAcquire(ctx, s, keys, args, Acquired, b.undoer(hold))
}

// fetchToken asks Redis for a hold's fencing token (lock_token.lua).
func (b *Base) fetchToken(ctx context.Context, h *core.Hold) (int64, error) {
	t, err := scripts.LockToken.Run(ctx, b.RT.Redis, []string{b.key}, h.ID).Int64()
	if err != nil {
		return 0, core.RedisError(b.key, err)
	}
	return t, nil
}

// Reenter takes the lock again for a context that holds it.
func (b *Base) Reenter(ctx context.Context, h *core.Hold, cfg core.LockConfig) (context.Context, bool, error) {
	sentAt := time.Now()
	ok, err := scripts.LockReenter.Run(ctx, b.RT.Redis, []string{b.key},
		h.ID, cfg.Lease.Milliseconds()).Int64()
	if err != nil {
		return nil, false, core.RedisError(b.key, err)
	}
	if ok == 0 {
		h.Lost()
		return nil, false, fmt.Errorf("%s: re-enter %q: %w", b.Kind, b.name, core.ErrLockLost)
	}
	held := b.RT.Adopt(ctx, core.Grant{
		Key: b.key, ID: h.ID, Lease: cfg.Lease,
		Renew: scripts.LockRenew, FetchToken: b.fetchToken, SentAt: sentAt,
	})
	if cfg.Token {
		if _, err := h.Token(ctx); err != nil {
			return nil, false, err
		}
	}
	return held, true, nil
}

// Abandon undoes an acquisition whose reply was lost (a read timeout, a cancelled call): the
// attempt may have taken the lock. The hold id is fresh, so releasing whatever that id holds
// is always safe. It runs in the background, bounded by a second, so the caller gets its
// error by its deadline; the lease ends the hold if it fails too. An attempt that never
// reached Redis (a failed dial) needs no undoing.
func (b *Base) Abandon(hold string, err error) {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return
	}
	b.RT.Go(func(rctx context.Context) {
		cctx, cancel := context.WithTimeout(rctx, time.Second)
		defer cancel()
		_ = b.Undo(cctx, hold)
	})
}

// Unlock releases the acquisition held by ctx: the innermost Lock of this lock in ctx's chain
// that was not released yet. The hold's last release frees the lock and wakes a waiter (the
// fair lock hands it to the next one). Unlock works when ctx is already done (it does not use
// ctx's cancellation, only its values).
//
// It returns an error matching aqs.ErrNotOwner, and changes nothing, when ctx holds no
// acquisition of this lock (never locked with it, or released already). When the hold was
// lost, the error matches both aqs.ErrNotOwner and aqs.ErrLockLost. Either way this
// acquisition's held context ends.
func (b *Base) Unlock(ctx context.Context) error {
	if err := b.RT.Check(); err != nil {
		return err
	}
	held := b.RT.Held(ctx, b.key)
	if held == nil {
		return fmt.Errorf("%s: unlock %q: %w", b.Kind, b.name, core.ErrNotOwner)
	}
	h := held.Hold()
	last, err := held.Release()
	if err != nil {
		return fmt.Errorf("%s: unlock %q: %w: %w", b.Kind, b.name, core.ErrNotOwner, err)
	}
	end := "0"
	if last {
		end = "1"
	}
	args := []any{h.ID, end, b.RT.PublishCommand()}
	var picked *core.Waiter
	var pickDone func(handed, known bool)
	if last && b.Pick != nil {
		var more []any
		if picked, more, pickDone = b.Pick(time.Now()); picked != nil {
			args = append(args, more...)
		}
	}
	var settle func(any, error) any
	if last && b.Carry != nil && picked == nil {
		var more []any
		if more, settle = b.Carry(time.Now()); settle != nil {
			args = append(args, more...)
		}
	}
	// The release must not be cut short by ctx: go-redis's own timeouts bound it.
	r, err := b.release.Run(context.WithoutCancel(ctx), b.RT.Redis, b.keys, args...).Result()
	if settle != nil {
		r = settle(r, err)
	}
	if picked != nil {
		handed := err == nil && r == int64(-2)
		// done first: once settled, the new holder may run and release before this goroutine
		// goes on.
		pickDone(handed, err == nil)
		b.RT.Hub.Settle(picked, handed, err == nil)
		if handed {
			runtime.Gosched() // as for the fair lock's hand-off below
			return nil
		}
	} else if pickDone != nil {
		pickDone(false, err == nil)
	}
	if err != nil {
		return core.RedisError(b.key, err)
	}
	n, ok := r.(int64)
	if !ok {
		hold, isHold := r.(string)
		if !isHold || b.Handed == nil {
			return fmt.Errorf("%s: unlock %q: unexpected reply %v", b.Kind, b.name, r)
		}
		b.Handed(hold)
		// The new holder is ready to run on this P; let it run first. Our caller's next step
		// (typically its own next Lock, queueing at the tail) is not on anyone's critical
		// path, the new holder's work and release are: this raises contended throughput by
		// a third on 2 cores (BenchmarkFairContended).
		runtime.Gosched()
		return nil
	}
	if n < 0 {
		h.Lost()
		return fmt.Errorf("%s: unlock %q: %w: %w", b.Kind, b.name, core.ErrNotOwner, core.ErrLockLost)
	}
	return nil
}

// ForceUnlock frees the lock whoever holds it and wakes a waiter (the fair lock hands it to
// the next one). It reports whether the lock was held. The former holder's held contexts are
// cancelled with aqs.ErrLockLost at its next renewal check. Meant for administration, not for
// normal release.
func (b *Base) ForceUnlock(ctx context.Context) (bool, error) {
	if err := b.RT.Check(); err != nil {
		return false, err
	}
	n, err := b.force.Run(ctx, b.RT.Redis, b.keys, b.RT.PublishCommand(), "").Int64()
	if err != nil {
		return false, core.RedisError(b.key, err)
	}
	return n == 1, nil
}

// Info is a snapshot of an exclusive lock's state in Redis. The locks convert it to an Info
// type of their own, with the same fields.
type Info struct {
	// Locked reports whether anyone held the lock.
	Locked bool
	// Holder is the hold id of the current hold ("<client id>:<sequence>"); empty when free.
	Holder string
	// HoldCount is the holder's count of acquisitions in Redis.
	HoldCount int
	// Token is the fencing token of the current hold, or 0 when none was assigned yet.
	Token int64
	// RemainingLease is the holder's remaining lease; 0 when free.
	RemainingLease time.Duration
}

// Info reads the lock's state in one round trip.
func (b *Base) Info(ctx context.Context) (Info, error) {
	if err := b.RT.Check(); err != nil {
		return Info{}, err
	}
	res, err := scripts.LockInfo.Run(ctx, b.RT.Redis, []string{b.key}).Slice()
	if err != nil {
		return Info{}, core.RedisError(b.key, err)
	}
	var in Info
	if s, ok := res[0].(string); ok {
		in.Locked, in.Holder = true, s
	}
	if n, ok := res[1].(int64); ok {
		in.HoldCount = int(n)
	}
	if s, ok := res[2].(string); ok {
		in.Token, _ = strconv.ParseInt(s, 10, 64)
	}
	if pttl, _ := res[3].(int64); in.Locked && pttl > 0 {
		in.RemainingLease = time.Duration(pttl) * time.Millisecond
	}
	return in, nil
}

// IsLocked reports whether anyone holds the lock.
func (b *Base) IsLocked(ctx context.Context) (bool, error) {
	in, err := b.Info(ctx)
	return in.Locked, err
}

// HoldCount returns how many times ctx's hold of this lock was acquired (its count in Redis),
// or 0 when ctx does not hold the lock. Like Unlock, it reads only ctx's values, so it answers
// for a held context that is already done.
func (b *Base) HoldCount(ctx context.Context) (int, error) {
	held := b.RT.Held(ctx, b.key)
	in, err := b.Info(context.WithoutCancel(ctx))
	if err != nil || held == nil || !in.Locked || in.Holder != held.Hold().ID {
		return 0, err
	}
	return in.HoldCount, nil
}

// RemainingLease returns the current holder's remaining lease, or 0 when the lock is free.
func (b *Base) RemainingLease(ctx context.Context) (time.Duration, error) {
	in, err := b.Info(ctx)
	return in.RemainingLease, err
}

// Token returns the fencing token of ctx's hold of this lock; see aqs.FencingToken.
func (b *Base) Token(ctx context.Context) (int64, error) { return b.RT.TokenOf(ctx, b.key) }
