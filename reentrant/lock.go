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
// take the lock before them. Use package fair for first-come first-served. A goroutine that
// calls Lock while its own Client holds the lock sends nothing to Redis: it waits for that
// Client's release to hand it the lock (see boarding).
//
// Leases: a hold taken without WithLease is renewed by the Client's watchdog, and it expires
// within the watchdog timeout when its process dies. A hold taken WithLease(d) expires d after
// it was taken. Either way the held context is cancelled with cause aqs.ErrLockLost as soon as
// the lease can no longer be trusted.
package reentrant

import (
	"context"
	"errors"
	"sync"
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
	x      *excl.Base   // holds, release, inspection: what the exclusive locks share
	streak atomic.Int32 // local hand-offs in a row (see maxLocalHandOffs)
	bd     boarding
}

// Boarding: waiting for a release of this Client without an attempt of its own.
//
// A waiter's attempts are round trips of their own: a goroutine that finds the lock taken
// sends its SET NX, then lock_acquire.lua, which marks the lock, before it waits. But when a
// goroutine calls Lock while a hold of the same Lock (so of its own Client) is held, or while
// that hold's release is on its way, the next thing the lock does in Redis is that release,
// and the release of a hold of this Client hands the lock to the longest-waiting local waiter
// that takes hand-offs (pick), boarded or not. So the goroutine sends nothing: it registers as
// such a waiter and boards. With 32 goroutines on one lock in one process, a hand-off then
// costs the release script alone, where it cost three commands. A boarded waiter makes its
// own first attempt, and goes on as any waiter, when a release of this Lock ends without
// handing the lock to a waiter of this Client (the streak was over, the release was sent
// before it registered, the hold was lost): the lock may be free or reserved for another
// Client, whose waiters the release woke, so the boarded are woken too. And it makes it after
// boardWindow at most, for a hold that lasts long or that this Lock cannot see end (a hold
// lost and never unlocked; a hand-off to a waiter of another Lock value of the same name).
// Boarding changes no order the lock promises: a boarded waiter takes a local hand-off in
// the order it registered, as any local waiter does.
type boarding struct {
	mu       sync.Mutex
	held     bool           // a hold of this Lock is held, as far as this Client knows
	hold     *core.Hold     // that hold, once adopted (nil while a hand-off is being taken)
	since    time.Time      // when held was set without a hold (a hand-off)
	inflight int            // releases of this Lock's holds on their way
	boarded  []*core.Waiter // waiters that made no attempt of their own yet
	// gen counts the holds taken and the releases picked: a release's outcome (picked) only
	// changes held when nothing happened since its pick. (A waiter whose attempt found the
	// lock handed to it may have taken, used and released it before the release that
	// handed it over heard back.)
	gen uint64
}

// boardWindow bounds how long a boarded waiter waits for a release of this Client before it
// makes an attempt of its own (see boarding).
const boardWindow = 20 * time.Millisecond

// heldBy records that h, a hold of this Lock, holds the lock.
func (l *Lock) heldBy(h *core.Hold) {
	l.bd.mu.Lock()
	l.bd.held, l.bd.hold = true, h
	l.bd.gen++
	l.bd.mu.Unlock()
}

// boardable reports, with l.bd.mu held, whether a hold of this Lock is held (its lease
// trusted; a hand-off being taken for a moment) or a release of one is on its way.
func (l *Lock) boardable() bool {
	return l.bd.inflight > 0 || (l.bd.held && (l.bd.hold != nil && l.bd.hold.LeaseTrusted() ||
		l.bd.hold == nil && time.Since(l.bd.since) < boardWindow))
}

// mayBoard reports whether a waiter could board now (see board).
func (l *Lock) mayBoard() bool {
	l.bd.mu.Lock()
	defer l.bd.mu.Unlock()
	return l.boardable()
}

// board makes w boarded if a hold of this Lock is held or a release of one is on its way, and
// reports whether it did.
func (l *Lock) board(w *core.Waiter) bool {
	l.bd.mu.Lock()
	defer l.bd.mu.Unlock()
	ok := l.boardable()
	if ok {
		l.bd.boarded = append(l.bd.boarded, w)
	}
	return ok
}

// generation returns the current gen (see boarding).
func (l *Lock) generation() uint64 {
	l.bd.mu.Lock()
	defer l.bd.mu.Unlock()
	return l.bd.gen
}

// alight takes w off the boarded waiters (when it is to make its own attempt).
func (l *Lock) alight(w *core.Waiter) {
	l.bd.mu.Lock()
	defer l.bd.mu.Unlock()
	for i, x := range l.bd.boarded {
		if x == w {
			l.bd.boarded = append(l.bd.boarded[:i], l.bd.boarded[i+1:]...)
			return
		}
	}
}

// unheld records that no hold of this Lock is held any longer (unless stale: a hold was taken
// since gen) and wakes the boarded waiters to make their own attempts.
func (l *Lock) unheld(gen uint64) {
	l.bd.mu.Lock()
	if l.bd.gen == gen {
		l.bd.held, l.bd.hold = false, nil
	}
	ws := l.bd.boarded
	l.bd.boarded = nil
	l.bd.mu.Unlock()
	for _, w := range ws {
		w.Nudge()
	}
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

// New returns the lock of the given name. Any bytes make a valid name, but it must not be
// empty. Creating a Lock touches no key.
func New(c *aqs.Client, name string) (*Lock, error) {
	b, err := excl.New(c.Runtime(core.Access{}), "reentrant", name, scripts.LockRelease, scripts.LockForceRelease)
	if err != nil {
		return nil, err
	}
	l := &Lock{x: b}
	b.Pick = l.pick
	return l, nil
}

// Name returns the lock's name, as given to New.
func (l *Lock) Name() string { return l.x.Name() }

// Key returns the Redis key that holds the lock while it is held, and only then:
// "<prefix>:{<name>}" (see aqs.WithKeyPrefix).
func (l *Lock) Key() string { return l.x.Key() }

// Keys returns every Redis key of the lock: Key alone. The slice is the lock's own: do not
// modify it.
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

// pick chooses the local waiter a release may hand the lock to, if any, and tells the script
// whether this Client's streak is over (see maxLocalHandOffs): lock_release.lua's ARGV[4-6].
func (l *Lock) pick(at time.Time) (*core.Waiter, []any, func(handed, known bool)) {
	l.bd.mu.Lock()
	l.bd.held, l.bd.hold = false, nil
	l.bd.inflight++
	l.bd.gen++
	gen := l.bd.gen
	l.bd.mu.Unlock()
	w, tag, arg, ok := l.x.RT.Hub.Pick(l.x.Channel(), at)
	if !ok {
		l.streak.Store(0)
		return nil, nil, func(handed, known bool) { l.picked(gen, false, handed, known) }
	}
	over, arg6 := false, "0"
	if l.streak.Load() >= maxLocalHandOffs {
		over, arg6 = true, "1"
	}
	return w, []any{tag, arg, arg6}, func(handed, known bool) { l.picked(gen, over, handed, known) }
}

// picked counts the local hand-offs in a row, and settles the boarded waiters, once the
// outcome of the release picked at gen is known: a hand-off to a waiter of this Client keeps
// them boarded (the new holder's release picks them in turn); a release that ended a streak
// (over) without handing over reserved the lock for another Client's turn and queued this
// one (lock_release.lua), and the boarded wait for this Client's turn; any other outcome sends
// them to make their own attempts.
func (l *Lock) picked(gen uint64, over, handed, known bool) {
	l.bd.mu.Lock()
	l.bd.inflight--
	if handed && l.bd.gen == gen {
		l.bd.held, l.bd.since = true, time.Now()
	}
	l.bd.mu.Unlock()
	switch {
	case handed:
		l.streak.Add(1)
	case over && known:
		// Reserved for another Client, and this one queued for its next turn (held is false
		// since the pick): the boarded wait for that turn's wakeup, or their boardWindow,
		// rather than all fail at once. (A release that found the hold gone also lands here:
		// Unlock's ErrLockLost wakes them.)
		l.streak.Store(0)
	default:
		l.streak.Store(0)
		l.unheld(gen)
	}
}

// Unlock releases the acquisition held by ctx: the innermost successful Lock or TryLock of
// this lock in ctx's chain (the first or a re-entry) not released yet, and ends its held
// context with cause aqs.ErrReleased. Only the hold's last release gives up the lock: when waiters of
// this Client wait, it hands the lock to the longest-waiting of them, in the same script (see
// the package doc for the turns Clients take); otherwise it frees the lock and wakes the
// waiters of other Clients. Unlock does not use ctx's cancellation, only its values, so it
// works with a held context that is already done.
//
// It returns an error matching aqs.ErrNotOwner, and changes nothing, when ctx holds no
// acquisition of this lock (it never acquired it, or released it already). When the hold was
// lost (its lease ran out or could no longer be trusted, or ForceUnlock ended it), the error
// matches both aqs.ErrNotOwner and aqs.ErrLockLost, and Unlock changes nothing in Redis: the
// lock is someone else's, or is given up when the lost hold's lease ends. When Redis fails, Unlock returns
// that error and the acquisition is released all the same: its held context has ended, the
// hold is no longer renewed, and a lock that the release did not reach is freed when its lease
// ends. After Client.Close it fails with aqs.ErrClosed.
func (l *Lock) Unlock(ctx context.Context) error {
	err := l.x.Unlock(ctx)
	if errors.Is(err, aqs.ErrLockLost) {
		l.unheld(l.generation()) // the hold ended without a release of its own
	}
	return err
}

// leave unregisters a waiter that leaves without the lock. If a release handed it the lock in
// that instant (or may have), the lock is given back before the call returns, so that the
// call leaves nothing behind (others found the lock taken only during the call); in the
// background, bounded, if that fails.
func (l *Lock) leave(ctx context.Context, w *core.Waiter, hold string) {
	l.alight(w)
	if !w.Leave(settleBound) {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if l.x.Undo(cctx, hold) != nil {
		l.x.Abandon(hold, nil)
	}
	l.unheld(l.generation()) // given back: the lock is free, and the waiters of this Client must know
}

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
	held, _, err := l.acquire(ctx, cfg, true)
	return held, err
}

// acquire takes the lock (see take) and records, for boarding, that this Client holds it.
func (l *Lock) acquire(ctx context.Context, cfg core.LockConfig, block bool) (context.Context, bool, error) {
	held, ok, err := l.take(ctx, cfg, block)
	if ok {
		if a := l.x.RT.Held(held, l.Key()); a != nil {
			l.heldBy(a.Hold())
		}
	}
	return held, ok, err
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
	ok, err := l.x.SetNXAcquire(ctx, hold, l.x.Lease(cfg))
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
	r, err := l.x.RunAcquire(ctx, scripts.LockAcquire, []string{l.Key()}, hold,
		hold, l.x.Lease(cfg).Milliseconds(), mode, token).Int64()
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

func (l *Lock) take(ctx context.Context, cfg core.LockConfig, block bool) (context.Context, bool, error) {
	if err := l.x.RT.Check(); err != nil {
		return nil, false, err
	}
	if ctx.Err() != nil {
		// context.Cause: a held context that was cancelled because its hold was lost reports
		// aqs.ErrLockLost rather than a bare context.Canceled.
		return nil, false, context.Cause(ctx)
	}
	if held := l.x.RT.Held(ctx, l.Key()); held != nil {
		return l.x.Reenter(ctx, held.Hold(), cfg)
	}
	hold := l.x.RT.NewHoldID() // a fresh id for every hold
	var deadline time.Time
	if cfg.Wait > 0 {
		deadline = time.Now().Add(cfg.Wait)
	}

	waits := block || cfg.Wait > 0
	waitCtx := ctx
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	// register makes the caller a local waiter, one that takes hand-offs unless it must have
	// its fencing token at once (that one takes the lock by its own attempt). When it fails
	// (w stays nil), the caller returns its results.
	var w *core.Waiter
	register := func() (context.Context, bool, error) {
		var err error
		if w, err = l.x.RT.Hub.Wait(waitCtx, l.x.Channel(), hold); err != nil {
			if ctx.Err() == nil && waitCtx.Err() != nil {
				return nil, false, nil // the wait bound ran out
			}
			return nil, false, err
		}
		if !cfg.Token {
			w.SetArg(l.x.Lease(cfg).Milliseconds())
		}
		return nil, false, nil
	}
	// A waiter whose Client holds the lock already, or is releasing it, boards (see boarding):
	// registered, it waits for that release without an attempt of its own.
	boarded := false
	if waits && !cfg.Token && l.mayBoard() {
		if held, ok, err := register(); w == nil {
			return held, ok, err
		}
		defer w.Close()
		boarded = l.board(w)
	}

	sentAt := time.Now()
	firstSent := sentAt
	var a attempt
	var err error
	switch {
	case w != nil:
		// Registered already: the attempts below (a boarded waiter's after its wait).
	case waits && !cfg.Token:
		a, err = l.tryFast(ctx, hold, cfg)
	default:
		a, err = l.try(ctx, hold, cfg, noWait)
	}
	if err != nil {
		l.x.Abandon(hold, err)
		return nil, false, err
	}
	if a.acquired {
		return l.x.Won(ctx, hold, cfg, a.token, sentAt)
	}
	if !waits {
		return nil, false, nil
	}

	// Subscribe, then try again: a release after this attempt reaches us.
	if w == nil {
		if held, ok, err := register(); w == nil {
			return held, ok, err
		}
		defer w.Close()
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
		l.alight(w)
		since := w.PickedAt()
		if since.IsZero() {
			since = firstSent
		}
		return l.x.WonGrant(ctx, hold, cfg, since, l.x.Lease(cfg))
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop() // armed by each failed attempt; since Go 1.23 a stopped timer holds no value
	defer timer.Stop()
	for {
		if boarded {
			// No attempt yet: the release of this Client's hold hands the lock over, or wakes
			// the boarded to attempt; boardWindow bounds the wait for it.
			a = attempt{pttl: boardWindow}
		} else {
			mode := waiting
			if w.Others() {
				mode = waitingOthers
			}
			sentAt = time.Now()
			a, err = l.try(ctx, hold, cfg, mode)
		}
		if err != nil {
			l.leave(ctx, w, hold)
			l.x.Abandon(hold, err)
			return nil, false, err
		}
		if a.handed {
			return handed()
		}
		if a.acquired {
			// Out of the hub first: when ctx ended meanwhile, Won gives the lock back at once,
			// and that release must not pick this very waiter (a lock handed to a waiter that
			// has gone stays held to the end of its lease).
			l.alight(w)
			w.Close()
			return l.x.Won(ctx, hold, cfg, a.token, sentAt)
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
		case <-l.x.RT.Done():
			l.leave(ctx, w, hold)
			return nil, false, aqs.ErrClosed
		}
		if boarded {
			l.alight(w)
			boarded = false
		}
	}
}
