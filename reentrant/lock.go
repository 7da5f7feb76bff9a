package reentrant

import (
	"context"
	"time"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/excl"
)

// Lock is a distributed reentrant lock. Create it with New; it is safe for concurrent use.
type Lock struct {
	x *excl.Lock // the exclusive lock on its queue, which the fair lock shares
}

// The local hand-off (see the package doc and internal/acquire/local.go).
const (
	// maxLocalHandOffs bounds the hand-offs in a row to waiters of the releasing Client while
	// waiters of other Clients wait. A local hand-off costs the release script alone; the
	// bound keeps the goroutines of one process from passing the lock among themselves for
	// ever while other processes wait.
	maxLocalHandOffs = 16
	// boardWindow bounds how long a waiter whose Client holds the lock waits for the hold's
	// release, without hearing of it, before it makes an attempt of its own: for a hold this
	// Client does not see end (lost and never released, or handed to a waiter of a value of
	// the same name with other options). A waiter stays while the hold it waits for is held.
	boardWindow = 20 * time.Millisecond
)

// Info is a snapshot of the lock's state in Redis.
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

// Option configures a Lock at New; this package's With functions make them. Every primitive
// package's WithWaiterTimeout means the same. A zero Option is an invalid argument.
type Option struct{ s *core.Setting }

// WithWaiterTimeout sets how long a queued waiter may go unheard of before it is dropped from
// the queue: a waiter whose process died stalls those behind it at most this long. Live
// waiters are kept alive by their Client's heartbeats, three per timeout. It must be at least
// 30ms. The default is 5s. Every primitive package has this option, with this meaning and
// these bounds.
func WithWaiterTimeout(d time.Duration) Option { return Option{core.WaiterTimeout(d)} }

// New returns the lock of the given name. Any bytes make a valid name, but it must not be
// empty. Creating a Lock touches no key.
func New(c *aqs.Client, name string, opts ...Option) (*Lock, error) {
	timeout, err := core.Settings(opts, func(o Option) *core.Setting { return o.s }, &struct{}{})
	if err != nil {
		return nil, err
	}
	x, err := excl.New(core.RuntimeOf(c), name, excl.Config{
		Kind: "reentrant", WaiterTimeout: timeout, Board: boardWindow, Stay: true, Streak: maxLocalHandOffs,
	})
	if err != nil {
		return nil, err
	}
	return &Lock{x: x}, nil
}

// Name returns the lock's name, as given to New.
func (l *Lock) Name() string { return l.x.Name() }

// Key returns the Redis key that holds the lock while it is held, and only then:
// "<prefix>:{<name>}" (see aqs.WithKeyPrefix).
func (l *Lock) Key() string { return l.x.Key() }

// Keys returns every Redis key of the lock: Key, the queue of waiters (a list, in arrival
// order) and their liveness deadlines (a zset). The slice is the lock's own: do not modify it.
func (l *Lock) Keys() []string { return l.x.Keys() }

// ForceUnlock ends the current hold, whoever holds it, frees the lock and wakes its waiters,
// and reports whether the lock was held. The former holder is told at its Client's next
// renewal check of the hold: its held contexts are then cancelled with aqs.ErrLockLost, and
// its Unlock fails with an error matching aqs.ErrLockLost. Meant for administration (a holder
// known to be stuck), not for normal release. On error, the lock may or may not have been
// freed.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) { return l.x.ForceUnlock(ctx) }

// Info reads the lock's state in Redis, in one round trip. It is a snapshot: the lock may have
// changed hands by the time Info returns. It fails with an error matching aqs.ErrWrongType
// when the lock key holds a value aqs did not write, and with aqs.ErrClosed after
// Client.Close.
func (l *Lock) Info(ctx context.Context) (Info, error) {
	in, err := l.x.Info(ctx)
	return Info(in), err
}

// IsLocked reports whether anyone holds the lock (one Info).
func (l *Lock) IsLocked(ctx context.Context) (bool, error) { return l.x.IsLocked(ctx) }

// HoldCount returns how many times ctx's hold of this lock was acquired (its count in Redis:
// the first acquisition and its re-entries not released yet), or 0 when ctx does not hold the
// lock. Like Unlock, it reads only ctx's values, so it answers for a held context that is
// already done.
func (l *Lock) HoldCount(ctx context.Context) (int, error) { return l.x.HoldCount(ctx) }

// RemainingLease returns the remaining lease of the current hold, whoever holds it, or 0 when
// the lock is free (one Info).
func (l *Lock) RemainingLease(ctx context.Context) (time.Duration, error) {
	return l.x.RemainingLease(ctx)
}

// Token returns the fencing token of ctx's hold of this lock, which aqs.FencingToken
// describes: it is assigned in Redis on the hold's first request (one round trip), unless the
// acquisition assigned it (aqs.WithFencingToken), and answered locally after that. It fails
// with an error matching aqs.ErrNotOwner when ctx holds no acquisition of this lock, and with
// aqs.ErrLockLost when the hold was lost before a token was assigned. Like Unlock, it works
// with a held context that is already done.
func (l *Lock) Token(ctx context.Context) (int64, error) { return l.x.Token(ctx) }

// Unlock releases the acquisition held by ctx: the innermost successful Lock or TryLock of
// this lock in ctx's chain (the first or a re-entry) not released yet, and ends its held
// context with cause aqs.ErrReleased. Only the hold's last release gives up the lock, in one
// script: to the longest-waiting waiter of this Client while its streak lasts, otherwise to
// the waiter at the head of the queue, or it frees the lock (see the package doc). Unlock does
// not use ctx's cancellation, only its values, so it works with a held context that is
// already done.
//
// It returns an error matching aqs.ErrNotOwner, and changes nothing, when ctx holds no
// acquisition of this lock (it never acquired it, or released it already). When the hold was
// lost (its lease ran out or could no longer be trusted, or ForceUnlock ended it), the error
// matches both aqs.ErrNotOwner and aqs.ErrLockLost, and Unlock changes nothing in Redis: the
// lock is someone else's, or is given up when the lost hold's lease ends. When Redis fails, Unlock returns
// that error and the acquisition is released all the same: its held context has ended, the
// hold is no longer renewed, and a lock that the release did not reach is freed when its lease
// ends. After Client.Close it fails with aqs.ErrClosed.
func (l *Lock) Unlock(ctx context.Context) error { return l.x.Unlock(ctx) }

// Lock blocks until the lock is acquired or ctx is done, and returns the held context: a child
// of ctx that carries the hold (and so its fencing token). If ctx already holds this lock, Lock
// re-enters at once (or fails with aqs.ErrLockLost if that hold was lost).
//
// The held context is done when ctx is done, when this acquisition is released (cause
// aqs.ErrReleased) and when the lease can no longer be trusted (cause aqs.ErrLockLost).
//
// On failure Lock returns ctx's error (context.Cause(ctx), or the Redis error) and leaves the
// lock unchanged: a lock won in the same instant as the cancellation is released again. An
// invalid option fails with aqs.ErrInvalidArgument before anything is sent. Options:
// aqs.WithLease, aqs.WithFencingToken.
func (l *Lock) Lock(ctx context.Context, opts ...aqs.LockOption) (context.Context, error) {
	cfg, err := core.ApplyOptions(opts)
	if err != nil {
		return nil, err
	}
	held, _, err := l.x.Acquire(ctx, cfg, true)
	return held, err
}

// TryLock makes one attempt to take the lock, or, with aqs.WithWait(d), waits up to d for it.
// Not getting the lock is a result, not an error: it returns (nil, false, nil) and leaves
// nothing behind. On success it returns the held context as Lock does. An error (ctx done,
// Redis failing, an invalid option) leaves the lock unchanged. Options: aqs.WithLease,
// aqs.WithFencingToken, aqs.WithWait.
func (l *Lock) TryLock(ctx context.Context, opts ...aqs.TryLockOption) (context.Context, bool, error) {
	cfg, err := core.ApplyOptions(opts)
	if err != nil {
		return nil, false, err
	}
	return l.x.Acquire(ctx, cfg, false)
}
