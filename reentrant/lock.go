// Package reentrant is a distributed reentrant lock on Redis, the counterpart of Redisson's
// RLock and of sync.Mutex across processes.
//
// One Lock value may be shared by any number of goroutines. The hold is carried by the
// context: Lock returns a held context, and a Lock on the same lock with that context (or any
// context derived from it) re-enters the hold instead of waiting for it. Every other call is a
// new holder and waits, as two goroutines do with sync.Mutex. Pass the held context down the
// call stack; a goroutine handed the held context can re-enter, so do not hand it to one that
// must be excluded from the caller.
//
// Ordering: the lock is not fair. A release wakes one waiter in each Client that has waiters;
// among the waiters of one Client the longest-waiting one is woken first, but a newcomer may
// take the lock before it. Use package fair for first-come first-served.
//
// Leases: a hold taken without WithLease is renewed by the Client's watchdog, and it expires
// within the watchdog timeout when its process dies. A hold taken WithLease(d) expires d after
// it was taken. Either way the held context is cancelled with cause aqs.ErrLockLost as soon as
// the lease can no longer be trusted.
package reentrant

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/scripts"
)

// Lock is a distributed reentrant lock. Create it with New; it is safe for concurrent use.
type Lock struct {
	rt      *core.Runtime
	name    string
	key     string // the lock key: "<hold id> [n<count>] [t<token>] [w]" (see lock_acquire.lua)
	channel string // release notifications
}

// New returns the lock of the given name. Any bytes make a valid name, but it must not be
// empty. Creating a Lock touches no key.
func New(c *aqs.Client, name string) (*Lock, error) {
	rt, err := core.ClientRuntime(c)
	if err != nil {
		return nil, err
	}
	key, err := rt.Key(name)
	if err != nil {
		return nil, err
	}
	return &Lock{rt: rt, name: name, key: key, channel: key + ":ch"}, nil
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Key returns the Redis key of the lock.
func (l *Lock) Key() string { return l.key }

// Lock blocks until the lock is acquired or ctx is done, and returns the held context: a child
// of ctx that carries the hold (and so its fencing token). If ctx already holds this lock, Lock
// re-enters at once (or fails with aqs.ErrLockLost if that hold was lost).
//
// The held context is done when ctx is done, when this acquisition is released (cause
// aqs.ErrReleased) and when the lease can no longer be trusted (cause aqs.ErrLockLost).
//
// On failure Lock returns ctx's error (context.Cause(ctx), or the Redis error) and leaves the lock unchanged: a
// lock won in the same instant as the cancellation is released again. Options: WithLease.
func (l *Lock) Lock(ctx context.Context, opts ...aqs.LockOption) (context.Context, error) {
	cfg, err := core.ApplyLockOptions(opts)
	if err != nil {
		return nil, err
	}
	if cfg.Wait > 0 {
		return nil, core.Invalid("Lock takes no wait bound; use TryLock with WithWait")
	}
	held, _, err := l.acquire(ctx, cfg, true)
	return held, err
}

// TryLock makes one attempt to take the lock, or, with WithWait(d), waits up to d for it.
// Not getting the lock is a result, not an error: it returns (nil, false, nil) and leaves
// nothing behind. On success it returns the held context as Lock does. An error (ctx done,
// Redis failing, bad option) leaves the lock unchanged.
func (l *Lock) TryLock(ctx context.Context, opts ...aqs.LockOption) (context.Context, bool, error) {
	cfg, err := core.ApplyLockOptions(opts)
	if err != nil {
		return nil, false, err
	}
	return l.acquire(ctx, cfg, false)
}

// attempt is the reply of one acquisition attempt.
type attempt struct {
	acquired bool
	token    int64         // when assigned by the attempt
	pttl     time.Duration // the holder's remaining lease, when not acquired
}

// Waiting modes of lock_acquire.lua: whether a failed (or successful) attempt marks the lock
// so that the next release publishes. A release publishes only when someone marked it, so
// the uncontended path costs no PUBLISH.
const (
	noWait        = "0" // TryLock without a wait bound
	waiting       = "1" // a waiter: a failed attempt marks the lock
	waitingOthers = "2" // a waiter with fellow local waiters: mark whatever the outcome
)

func (l *Lock) lease(cfg core.LockConfig) time.Duration {
	if cfg.Lease == 0 {
		return l.rt.Cfg.WatchdogTimeout
	}
	return cfg.Lease
}

// tryFast is the first attempt of a Lock that will wait if it fails: a plain SET NX PX of the
// hold id, the same command as the minimal lock. On failure the caller subscribes and makes
// its next attempts with lock_acquire, which marks the lock and reports the remaining lease
// (and reports a key of another type).
func (l *Lock) tryFast(ctx context.Context, hold string, cfg core.LockConfig) (attempt, error) {
	ok, err := l.rt.Redis.SetNX(ctx, l.key, hold, l.lease(cfg)).Result()
	if err != nil {
		return attempt{}, core.RedisError(l.key, err)
	}
	return attempt{acquired: ok}, nil
}

func (l *Lock) try(ctx context.Context, hold string, cfg core.LockConfig, mode string) (attempt, error) {
	token := "0"
	if cfg.Token {
		token = "1"
	}
	r, err := scripts.LockAcquire.Run(ctx, l.rt.Redis, []string{l.key},
		hold, l.lease(cfg).Milliseconds(), mode, token).Int64()
	switch {
	case err != nil:
		return attempt{}, core.RedisError(l.key, err)
	case r > 1:
		return attempt{acquired: true, token: r}, nil
	case r == 1:
		return attempt{acquired: true}, nil
	default:
		return attempt{pttl: time.Duration(-1-r) * time.Millisecond}, nil
	}
}

func (l *Lock) acquire(ctx context.Context, cfg core.LockConfig, block bool) (context.Context, bool, error) {
	if err := l.rt.Check(); err != nil {
		return nil, false, err
	}
	if ctx.Err() != nil {
		// context.Cause: a held context that was cancelled because its hold was lost reports
		// aqs.ErrLockLost rather than a bare context.Canceled.
		return nil, false, context.Cause(ctx)
	}
	if held := l.rt.Held(ctx, l.key); held != nil {
		return l.reenter(ctx, held.Hold(), cfg)
	}
	hold := l.rt.NewHoldID() // a fresh id for every hold
	var deadline time.Time
	if cfg.Wait > 0 {
		deadline = time.Now().Add(cfg.Wait)
	}

	sentAt := time.Now()
	var a attempt
	var err error
	if (block || cfg.Wait > 0) && !cfg.Token {
		a, err = l.tryFast(ctx, hold, cfg)
	} else {
		a, err = l.try(ctx, hold, cfg, noWait)
	}
	if err != nil {
		l.abandon(hold, err)
		return nil, false, err
	}
	if a.acquired {
		return l.won(ctx, hold, cfg, a, sentAt)
	}
	if !block && cfg.Wait == 0 {
		return nil, false, nil
	}

	// Subscribe, then try again: a release after this attempt reaches us.
	waitCtx := ctx
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	w, err := l.rt.Hub.Wait(waitCtx, l.channel, "")
	if err != nil {
		if ctx.Err() == nil && waitCtx.Err() != nil {
			return nil, false, nil // the wait bound ran out
		}
		return nil, false, err
	}
	defer w.Close()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		mode := waiting
		if w.Others() {
			mode = waitingOthers
		}
		sentAt = time.Now()
		a, err = l.try(ctx, hold, cfg, mode)
		if err != nil {
			l.abandon(hold, err)
			return nil, false, err
		}
		if a.acquired {
			return l.won(ctx, hold, cfg, a, sentAt)
		}
		// Fallback for a lost message: the holder's lease will have run out by then.
		// (PTTL -1 cannot happen for our keys; -2 means it just went: try again at once.)
		wait := max(a.pttl, 0)
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return nil, false, nil
			}
			wait = min(wait, left)
		}
		timer.Reset(wait)
		select {
		case <-w.C:
			if !timer.Stop() {
				<-timer.C
			}
		case <-timer.C:
		case <-ctx.Done():
			return nil, false, context.Cause(ctx)
		case <-l.rt.Done():
			return nil, false, aqs.ErrClosed
		}
	}
}

// won turns a successful attempt into a held context, unless ctx ended meanwhile: then the
// lock goes back (x/sync's rule: a failed call leaves the lock unchanged).
func (l *Lock) won(ctx context.Context, hold string, cfg core.LockConfig, a attempt, sentAt time.Time) (context.Context, bool, error) {
	held := l.rt.Adopt(ctx, core.Grant{
		Key: l.key, ID: hold, Token: a.token, Lease: l.lease(cfg),
		Watchdog: cfg.Lease == 0, Renew: scripts.LockRenew, FetchToken: l.fetchToken, SentAt: sentAt,
	})
	if err := ctx.Err(); err != nil {
		_ = l.Unlock(held)
		return nil, false, err
	}
	return held, true, nil
}

// fetchToken asks Redis for a hold's fencing token (lock_token.lua).
func (l *Lock) fetchToken(ctx context.Context, h *core.Hold) (int64, error) {
	t, err := scripts.LockToken.Run(ctx, l.rt.Redis, []string{l.key}, h.ID).Int64()
	if err != nil {
		return 0, core.RedisError(l.key, err)
	}
	return t, nil
}

// reenter takes the lock again for a context that holds it.
func (l *Lock) reenter(ctx context.Context, h *core.Hold, cfg core.LockConfig) (context.Context, bool, error) {
	sentAt := time.Now()
	ok, err := scripts.LockReenter.Run(ctx, l.rt.Redis, []string{l.key},
		h.ID, cfg.Lease.Milliseconds()).Int64()
	if err != nil {
		return nil, false, core.RedisError(l.key, err)
	}
	if ok == 0 {
		h.Lost()
		return nil, false, fmt.Errorf("reentrant: re-enter %q: %w", l.name, aqs.ErrLockLost)
	}
	held := l.rt.Adopt(ctx, core.Grant{
		Key: l.key, ID: h.ID, Lease: cfg.Lease,
		Renew: scripts.LockRenew, FetchToken: l.fetchToken, SentAt: sentAt,
	})
	if cfg.Token {
		if _, err := h.Token(ctx); err != nil {
			return nil, false, err
		}
	}
	return held, true, nil
}

// abandon undoes an acquisition whose reply was lost (a read timeout, a cancelled call): the
// attempt may have taken the lock. The hold id is fresh, so releasing whatever that id holds
// is always safe. It runs in the background, bounded by a second, so the caller gets its
// error by its deadline; the lease ends the hold if it fails too. An attempt that never
// reached Redis (a failed dial) needs no undoing.
func (l *Lock) abandon(hold string, err error) {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return
	}
	l.rt.Go(func(rctx context.Context) {
		cctx, cancel := context.WithTimeout(rctx, time.Second)
		defer cancel()
		_ = scripts.LockForceRelease.Run(cctx, l.rt.Redis, []string{l.key}, l.rt.PublishCommand(), hold).Err()
	})
}

// Unlock releases the acquisition held by ctx: the innermost Lock of this lock in ctx's chain
// that was not released yet. The hold's last release frees the lock and wakes a waiter. Unlock
// works when ctx is already done (it does not use ctx's cancellation, only its values).
//
// It returns an error matching aqs.ErrNotOwner, and changes nothing, when ctx holds no
// acquisition of this lock (never locked with it, or released already). When the hold was
// lost, the error matches both aqs.ErrNotOwner and aqs.ErrLockLost. Either way this
// acquisition's held context ends.
func (l *Lock) Unlock(ctx context.Context) error {
	if err := l.rt.Check(); err != nil {
		return err
	}
	held := l.rt.Held(ctx, l.key)
	if held == nil {
		return fmt.Errorf("reentrant: unlock %q: %w", l.name, aqs.ErrNotOwner)
	}
	h := held.Hold()
	last, err := held.Release()
	if err != nil {
		return fmt.Errorf("reentrant: unlock %q: %w: %w", l.name, aqs.ErrNotOwner, err)
	}
	// The release must not be cut short by ctx: go-redis's own timeouts bound it.
	err = l.release(context.WithoutCancel(ctx), h, last)
	if errors.Is(err, aqs.ErrNotOwner) {
		h.Lost()
		return fmt.Errorf("reentrant: unlock %q: %w: %w", l.name, err, aqs.ErrLockLost)
	}
	return err
}

func (l *Lock) release(ctx context.Context, h *core.Hold, last bool) error {
	end := "0"
	if last {
		end = "1"
	}
	n, err := scripts.LockRelease.Run(ctx, l.rt.Redis, []string{l.key},
		h.ID, end, l.rt.PublishCommand()).Int64()
	if err != nil {
		return core.RedisError(l.key, err)
	}
	if n < 0 {
		return aqs.ErrNotOwner
	}
	return nil
}

// ForceUnlock frees the lock whoever holds it and wakes a waiter. It reports whether the lock
// was held. The former holder's held contexts are cancelled with aqs.ErrLockLost at its next
// renewal check. Meant for administration, not for normal release.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	if err := l.rt.Check(); err != nil {
		return false, err
	}
	n, err := scripts.LockForceRelease.Run(ctx, l.rt.Redis, []string{l.key},
		l.rt.PublishCommand(), "").Int64()
	if err != nil {
		return false, core.RedisError(l.key, err)
	}
	return n == 1, nil
}

// Info is a snapshot of the lock's state in Redis.
type Info struct {
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
func (l *Lock) Info(ctx context.Context) (Info, error) {
	if err := l.rt.Check(); err != nil {
		return Info{}, err
	}
	res, err := scripts.LockInfo.Run(ctx, l.rt.Redis, []string{l.key}).Slice()
	if err != nil {
		return Info{}, core.RedisError(l.key, err)
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
func (l *Lock) IsLocked(ctx context.Context) (bool, error) {
	in, err := l.Info(ctx)
	return in.Locked, err
}

// HoldCount returns how many times ctx's hold of this lock was acquired (its count in Redis),
// or 0 when ctx does not hold the lock. Like Unlock, it reads only ctx's values, so it answers
// for a held context that is already done.
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
