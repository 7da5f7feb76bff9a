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
// Ordering: the lock is not fair. A release by a Client that has waiters of its own hands the
// lock straight to the longest-waiting of them, inside the release script; while waiters of
// other Clients wait too, only up to maxLocalHandOffs times in a row, and then the lock is
// reserved for a moment for the Client whose turn it is: the Clients whose waiters wait take
// turns in the order they first failed to get the lock (lock_release.lua). Otherwise a release
// frees the lock and wakes one waiter in each Client that has waiters, and a newcomer may
// take the lock before them. Use package fair for first-come first-served.
//
// Leases: a hold taken without WithLease is renewed by the Client's watchdog, and it expires
// within the watchdog timeout when its process dies. A hold taken WithLease(d) expires d after
// it was taken. Either way the held context is cancelled with cause aqs.ErrLockLost as soon as
// the lease can no longer be trusted.
package reentrant

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/excl"
	"github.com/redaqs/aqs/internal/scripts"
)

// Lock is a distributed reentrant lock. Create it with New; it is safe for concurrent use.
// Its key holds "<hold id> [n<count>] [t<token>] [w]" while it is held (see lock_acquire.lua).
type Lock struct {
	*excl.Base
	streak atomic.Int32 // local hand-offs in a row (see maxLocalHandOffs)
}

// maxLocalHandOffs bounds the hand-offs in a row to waiters of the releasing Client while
// waiters of other Clients wait. A local hand-off costs the release script alone: no wakeup
// published, no waiter of every Client racing to Redis and all but one failing, which is what
// makes the lock slow under contention across processes. Unbounded, it would let the
// goroutines of one process pass the lock among themselves for ever while other processes
// wait; after this many in a row, the release reserves the lock for the waiters of the Client
// whose turn it is (a plain free lock would be taken again at once by the releaser's own next
// Lock, before any other process heard of it), and that Client starts a streak of its own.
// With 8, a waiter in another process waits at most 9 holds for each Client ahead of its own.
const maxLocalHandOffs = 8

// settleBound bounds how long a waiter that gives up waits for a release that picked it to
// settle (one script call: go-redis's timeouts end it well before).
const settleBound = 5 * time.Second

// Info is a snapshot of the lock's state in Redis.
type Info = excl.Info

// New returns the lock of the given name. Any bytes make a valid name, but it must not be
// empty. Creating a Lock touches no key.
func New(c *aqs.Client, name string) (*Lock, error) {
	b, err := excl.New(c, "reentrant", name, scripts.LockRelease, scripts.LockForceRelease)
	if err != nil {
		return nil, err
	}
	l := &Lock{Base: b}
	b.Pick, b.Picked = l.pick, l.picked
	return l, nil
}

// pick chooses the local waiter a release may hand the lock to, if any, and tells the script
// whether this Client's streak is over (see maxLocalHandOffs): lock_release.lua's ARGV[4-6].
func (l *Lock) pick(at time.Time) (*core.Waiter, []any) {
	w, tag, arg, ok := l.RT.Hub.Pick(l.Channel(), at)
	if !ok {
		l.streak.Store(0)
		return nil, nil
	}
	over := "0"
	if l.streak.Load() >= maxLocalHandOffs {
		over = "1"
	}
	return w, []any{tag, arg, over}
}

// picked counts the local hand-offs in a row.
func (l *Lock) picked(handed bool) {
	if handed {
		l.streak.Add(1)
	} else {
		l.streak.Store(0)
	}
}

// leave unregisters a waiter that leaves without the lock. If a release handed it the lock in
// that instant (or may have), the lock is given back before the call returns, so that the
// call leaves nothing behind (others found the lock taken only during the call); in the
// background, bounded, if that fails.
func (l *Lock) leave(ctx context.Context, w *core.Waiter, hold string) {
	if !w.Leave(settleBound) {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if l.Undo(cctx, hold) != nil {
		l.Abandon(hold, nil)
	}
}

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
	cfg, err := core.ApplyBlockingLockOptions(opts)
	if err != nil {
		return nil, err
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
	handed   bool          // acquired by a local hand-off the waiter had not heard of yet
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

// tryFast is the first attempt of a Lock that will wait if it fails: a plain SET NX PX of the
// hold id, the same command as the minimal lock. On failure the caller subscribes and makes
// its next attempts with lock_acquire, which marks the lock and reports the remaining lease
// (and reports a key of another type).
func (l *Lock) tryFast(ctx context.Context, hold string, cfg core.LockConfig) (attempt, error) {
	ok, err := l.SetNXAcquire(ctx, hold, l.Lease(cfg))
	if err != nil {
		return attempt{}, err
	}
	return attempt{acquired: ok}, nil
}

func (l *Lock) try(ctx context.Context, hold string, cfg core.LockConfig, mode string) (attempt, error) {
	token := "0"
	if cfg.Token {
		token = "1"
	}
	r, err := l.RunAcquire(ctx, scripts.LockAcquire, []string{l.Key()}, hold,
		hold, l.Lease(cfg).Milliseconds(), mode, token).Int64()
	switch {
	case err != nil:
		return attempt{}, core.RedisError(l.Key(), err)
	case r == 2:
		return attempt{acquired: true, handed: true}, nil
	case r > 1:
		return attempt{acquired: true, token: r}, nil
	case r == 1:
		return attempt{acquired: true}, nil
	default:
		return attempt{pttl: time.Duration(-1-r) * time.Millisecond}, nil
	}
}

func (l *Lock) acquire(ctx context.Context, cfg core.LockConfig, block bool) (context.Context, bool, error) {
	if err := l.RT.Check(); err != nil {
		return nil, false, err
	}
	if ctx.Err() != nil {
		// context.Cause: a held context that was cancelled because its hold was lost reports
		// aqs.ErrLockLost rather than a bare context.Canceled.
		return nil, false, context.Cause(ctx)
	}
	if held := l.RT.Held(ctx, l.Key()); held != nil {
		return l.Reenter(ctx, held.Hold(), cfg)
	}
	hold := l.RT.NewHoldID() // a fresh id for every hold
	var deadline time.Time
	if cfg.Wait > 0 {
		deadline = time.Now().Add(cfg.Wait)
	}

	sentAt := time.Now()
	firstSent := sentAt
	var a attempt
	var err error
	if (block || cfg.Wait > 0) && !cfg.Token {
		a, err = l.tryFast(ctx, hold, cfg)
	} else {
		a, err = l.try(ctx, hold, cfg, noWait)
	}
	if err != nil {
		l.Abandon(hold, err)
		return nil, false, err
	}
	if a.acquired {
		return l.Won(ctx, hold, cfg, a.token, sentAt)
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
	w, err := l.RT.Hub.Wait(waitCtx, l.Channel(), hold)
	if err != nil {
		if ctx.Err() == nil && waitCtx.Err() != nil {
			return nil, false, nil // the wait bound ran out
		}
		return nil, false, err
	}
	defer w.Close()
	if !cfg.Token {
		// A release of this Client may hand it the lock (see maxLocalHandOffs); one that must
		// have its fencing token at once takes it by its own attempt.
		w.SetArg(l.Lease(cfg).Milliseconds())
	}
	// handed turns a lock handed over by a local release into a held context: its lease
	// started after that release was sent.
	// Without a pick, the lock is this hold's by an attempt of its own whose reply was lost
	// (go-redis runs a command again when its connection broke after it was sent, and the
	// attempt that ran first took the lock): its lease started after the first attempt was
	// sent. (A zero PickedAt would make the hold untrusted at once: lost on the spot, its
	// Unlock failing with ErrLockLost, the key held to the end of its lease; the chaos
	// package's network test saw it.)
	handed := func() (context.Context, bool, error) {
		since := w.PickedAt()
		if since.IsZero() {
			since = firstSent
		}
		return l.WonGrant(ctx, hold, cfg, since, l.Lease(cfg))
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop() // armed by each failed attempt; since Go 1.23 a stopped timer holds no value
	defer timer.Stop()
	for {
		mode := waiting
		if w.Others() {
			mode = waitingOthers
		}
		sentAt = time.Now()
		a, err = l.try(ctx, hold, cfg, mode)
		if err != nil {
			l.leave(ctx, w, hold)
			l.Abandon(hold, err)
			return nil, false, err
		}
		if a.handed {
			return handed()
		}
		if a.acquired {
			return l.Won(ctx, hold, cfg, a.token, sentAt)
		}
		// Fallback for a lost message: the holder's lease will have run out by then.
		// (PTTL -1 cannot happen for our keys; -2 means it just went: try again at once.)
		wait := max(a.pttl, 0)
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				l.leave(ctx, w, hold)
				return nil, false, nil
			}
			wait = min(wait, left)
		}
		timer.Reset(wait)
		select {
		case <-w.C:
			timer.Stop()
			if w.Tagged() {
				return handed()
			}
		case <-timer.C:
		case <-ctx.Done():
			l.leave(ctx, w, hold)
			return nil, false, context.Cause(ctx)
		case <-l.RT.Done():
			l.leave(ctx, w, hold)
			return nil, false, aqs.ErrClosed
		}
	}
}
