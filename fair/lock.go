package fair

import (
	"context"
	"time"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/excl"
)

// Lock is a distributed FIFO reentrant lock. Create it with New; it is safe for concurrent use.
type Lock struct {
	x *excl.Lock // the exclusive lock on its queue, which the reentrant lock shares
}

// rideWindow is how long a waiter whose Client holds the lock waits for the hold's release to
// carry its join (see the package doc): a bound on how much later than its call a rider's
// join reaches Redis. On a contended lock a hold is released within a few hundred
// microseconds; a hold that lasts longer lets its riders join on their own after this.
const rideWindow = 2 * time.Millisecond

// Info is a snapshot of the lock's holder in Redis.
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

// Option configures a fair Lock at New; this package's With functions make them. Every primitive
// package's WithWaiterTimeout means the same. A zero Option is an invalid argument.
type Option struct{ s *core.Setting }

// WithWaiterTimeout sets how long a queued waiter may go unheard of before it is dropped from
// the queue: a waiter whose process died stalls those behind it at most this long. Live
// waiters are kept alive by their Client's heartbeats, three per timeout. It must be at least
// 30ms. The default is 5s. Every primitive package has this option, with this meaning and
// these bounds.
func WithWaiterTimeout(d time.Duration) Option { return Option{core.WaiterTimeout(d)} }

// New returns the fair lock of the given name. Any bytes make a valid name, but it must not
// be empty. Creating a Lock touches no key.
func New(c *aqs.Client, name string, opts ...Option) (*Lock, error) {
	timeout, err := core.Settings(opts, func(o Option) *core.Setting { return o.s }, &struct{}{})
	if err != nil {
		return nil, err
	}
	x, err := excl.New(core.RuntimeOf(c), name, excl.Config{
		Kind: "fair", WaiterTimeout: timeout, Board: rideWindow,
	})
	if err != nil {
		return nil, err
	}
	return &Lock{x: x}, nil
}

// Lock blocks until the lock is granted or ctx is done, and returns the held context (see
// package reentrant for what it carries and when it ends). If ctx already holds this lock,
// Lock re-enters at once.
//
// On failure Lock returns context.Cause(ctx) (or the Redis error), and leaves nothing behind:
// its queue entry is removed, and a lock handed to it in the same instant passes on to the
// next waiter. An invalid option fails with aqs.ErrInvalidArgument before anything is sent.
// Options: aqs.WithLease, aqs.WithFencingToken.
func (l *Lock) Lock(ctx context.Context, opts ...aqs.LockOption) (context.Context, error) {
	cfg, err := core.ApplyOptions(opts)
	if err != nil {
		return nil, err
	}
	held, _, err := l.x.Acquire(ctx, cfg, true)
	return held, err
}

// TryLock takes the lock only if it is free and nobody waits for it; with aqs.WithWait(d) it
// joins the queue at the tail and waits up to d for its turn. If ctx already holds this lock,
// TryLock re-enters at once. Not getting the lock is a result, not an error: it returns (nil,
// false, nil) and leaves nothing behind. On success it returns the held context as Lock does;
// an error (ctx done, Redis failing, an invalid option) leaves nothing behind either. Options:
// aqs.WithLease, aqs.WithFencingToken, aqs.WithWait.
func (l *Lock) TryLock(ctx context.Context, opts ...aqs.TryLockOption) (context.Context, bool, error) {
	cfg, err := core.ApplyOptions(opts)
	if err != nil {
		return nil, false, err
	}
	return l.x.Acquire(ctx, cfg, false)
}

// Name returns the lock's name, as given to New.
func (l *Lock) Name() string { return l.x.Name() }

// Key returns the Redis key that holds the lock while it is held: "<prefix>:{<name>}" (see
// aqs.WithKeyPrefix). The lock's other keys share its hash tag, so they live in its slot.
func (l *Lock) Key() string { return l.x.Key() }

// Keys returns every Redis key of the lock: Key, the queue of waiters (a list, in arrival
// order) and their liveness deadlines (a zset). The slice is the lock's own: do not modify it.
func (l *Lock) Keys() []string { return l.x.Keys() }

// Unlock releases the acquisition held by ctx: the innermost successful Lock or TryLock of
// this lock in ctx's chain (the first or a re-entry) not released yet, and ends its held
// context with cause aqs.ErrReleased. Only the hold's last release gives up the lock: it hands it to
// the live waiter at the head of the queue, in the same script, or frees it when nobody waits.
// Unlock does not use ctx's cancellation, only its values, so it works with a held context that
// is already done.
//
// It returns an error matching aqs.ErrNotOwner, and changes nothing, when ctx holds no
// acquisition of this lock (it never acquired it, or released it already). When the hold was
// lost (its lease ran out or could no longer be trusted, or ForceUnlock ended it), the error
// matches both aqs.ErrNotOwner and aqs.ErrLockLost, and Unlock changes nothing in Redis: the
// lock is someone else's, or is given up when the lost hold's lease ends. When Redis fails, Unlock returns
// that error and the acquisition is released all the same: its held context has ended, the
// hold is no longer renewed, and a lock that the release did not reach is handed on or freed
// when its lease ends. After Client.Close it fails with aqs.ErrClosed.
func (l *Lock) Unlock(ctx context.Context) error { return l.x.Unlock(ctx) }

// ForceUnlock ends the current hold, whoever holds it, and reports whether the lock was held.
// Like a release, it hands the lock to the live waiter at the head of the queue, or frees it.
// The former holder is told at its Client's next renewal check of the hold: its held contexts
// are then cancelled with aqs.ErrLockLost, and its Unlock fails with an error matching
// aqs.ErrLockLost. Meant for administration (a holder known to be stuck), not for normal
// release. On error, the lock may or may not have been freed.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) { return l.x.ForceUnlock(ctx) }

// Info reads the lock's holder in Redis, in one round trip. It is a snapshot: the lock may
// have changed hands by the time Info returns. It fails with an error matching
// aqs.ErrWrongType when the lock key holds a value aqs did not write, and with aqs.ErrClosed
// after Client.Close.
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
