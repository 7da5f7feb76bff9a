// Package fair is a distributed FIFO lock on Redis: whoever asked first gets it first, across
// goroutines and processes. It is Redisson's RFairLock, with the flaws of that design fixed.
//
// Order: grants follow the order in which first attempts reached Redis. There is no barging:
// a newcomer never takes the lock while a live waiter is queued, not even a goroutine in the
// holder's own process. The release hands the lock straight to the live head of the queue,
// inside the release script, and notifies only that waiter's Client, which owns the lock on
// receipt, without a further round trip. When that waiter is of the releaser's own Client,
// nothing is published: the release's reply names it and the releasing goroutine wakes it.
// A goroutine that asks for the lock while its own Client holds it rides along: its join goes
// to Redis with that hold's release, in the same script, rather than in a round trip of its
// own (see ride.go); it joins at the tail all the same.
//
// The queue lives in Redis as a list (arrival order) and a zset of liveness deadlines, in the
// lock's slot (see internal/scripts/_fair_queue.lua). Each waiter's deadline is its own,
// computed from server time, refreshed by its Client's batched heartbeats: a waiter whose
// process died is dropped within the waiter timeout, and a live one never is. No operation
// rewrites anyone else's score, so each is O(log N) in the queue length. A waiter that gives
// up (its context ends, or TryLock's wait bound) leaves the queue at once; if it was handed
// the lock in that same instant, the lock passes on to the next waiter.
//
// Holds, re-entry, leases, the watchdog, lease-loss cancellation and fencing tokens work as in
// package reentrant.
package fair

import (
	"context"
	"strconv"
	"time"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/excl"
	"github.com/redaqs/aqs/internal/scripts"
)

// Lock is a distributed FIFO reentrant lock. Create it with New; it is safe for concurrent use.
type Lock struct {
	x             *excl.Base // holds, release, inspection: what the exclusive locks share
	waiterTimeout time.Duration
	grants        string // this Client's grant channel: "<key>:c:<client id>"
	rides         rides  // see ride.go
	rideWindow    time.Duration
}

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

// Option configures a fair Lock.
type Option func(*Lock) error

// WithWaiterTimeout sets how long a waiter may go unheard of before it is dropped from the
// queue: a waiter whose process died stalls those behind it at most this long. Live waiters
// are kept alive by their Client's heartbeats, three per timeout. It must be at least 30ms.
// The default is 5s.
func WithWaiterTimeout(d time.Duration) Option {
	return func(l *Lock) error {
		if d < 30*time.Millisecond {
			return core.Invalid("waiter timeout %v is below 30ms", d)
		}
		l.waiterTimeout = d
		return nil
	}
}

// New returns the fair lock of the given name. Any bytes make a valid name, but it must not
// be empty. Creating a Lock touches no key.
func New(c *aqs.Client, name string, opts ...Option) (*Lock, error) {
	b, err := excl.New(c.Runtime(core.Access{}), "fair", name, scripts.FairRelease, scripts.FairForceRelease, ":q", ":d")
	if err != nil {
		return nil, err
	}
	l := &Lock{x: b, waiterTimeout: 5 * time.Second, grants: b.Key() + ":c:" + b.RT.ID,
		rideWindow: rideWindow}
	// A release that hands the lock to a waiter of this Client tells it here, with no pub/sub
	// message. Should the reply be lost, the waiter finds its grant at its next attempt or
	// heartbeat, as for a lost message.
	b.Handed = func(hold string) {
		l.heldBy(hold)
		b.RT.Hub.Deliver(l.grants, hold)
	}
	b.Carry = l.carry
	for _, o := range opts {
		if o == nil {
			return nil, core.Invalid("nil option")
		}
		if err := o(l); err != nil {
			return nil, err
		}
	}
	return l, nil
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
	held, _, err := l.acquire(ctx, cfg, true)
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
	return l.acquire(ctx, cfg, false)
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

// attempt is the outcome of one fair_acquire.lua call.
type attempt struct {
	acquired bool
	granted  bool          // acquired by a grant the waiter had missed (see fair_acquire.lua)
	token    int64         // when the attempt assigned one
	dropped  bool          // the waiter had been dropped as dead: start over with a new hold id
	wait     time.Duration // when not acquired: how long to wait at most before trying again
}

func (l *Lock) attempt(ctx context.Context, hold string, cfg core.LockConfig, enqueue bool) (attempt, error) {
	q, token := "0", "0"
	if enqueue {
		q = "1"
	}
	if cfg.Token {
		token = "1"
	}
	r, err := l.x.RunAcquire(ctx, scripts.FairAcquire, l.Keys(), hold, hold, l.x.Lease(cfg).Milliseconds(),
		l.waiterTimeout.Milliseconds(), q, token).Int64()
	switch {
	case err != nil:
		return attempt{}, core.RedisError(l.Key(), err)
	case r > 2:
		return attempt{acquired: true, token: r}, nil
	case r == 2:
		return attempt{acquired: true, granted: true}, nil
	case r == 1:
		return attempt{acquired: true}, nil
	case r == 0:
		return attempt{dropped: true}, nil
	default:
		return attempt{wait: time.Duration(-1-r) * time.Millisecond}, nil
	}
}

// giveUp takes a waiter out of the queue (fair_give_up.lua), passing the lock on if it was
// handed to it meanwhile. It does not use ctx's cancellation: it runs because ctx ended.
func (l *Lock) giveUp(ctx context.Context, hold string, cfg core.LockConfig) error {
	err := scripts.FairGiveUp.Run(context.WithoutCancel(ctx), l.x.RT.Redis, l.Keys(), hold,
		l.x.Lease(cfg).Milliseconds(), l.x.RT.PublishCommand()).Err()
	return core.RedisError(l.Key(), err)
}

// failed undoes a queued attempt that failed: when ctx ended (the attempt was cut short by
// it), at once, so that Lock leaves nothing behind when it returns, and reports ctx's cause;
// otherwise (Redis failed) in the background, and reports err.
func (l *Lock) failed(ctx context.Context, hold string, cfg core.LockConfig, err error) error {
	if ctx.Err() == nil {
		l.abandon(hold, cfg)
		return err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if gerr := l.giveUp(cctx, hold, cfg); gerr != nil {
		l.abandon(hold, cfg)
	}
	return context.Cause(ctx)
}

// abandon undoes an attempt whose reply was lost: it may have queued the hold or given it
// the lock. In the background, bounded; otherwise the waiter timeout or the lease ends it.
func (l *Lock) abandon(hold string, cfg core.LockConfig) {
	l.x.RT.Go(func(rctx context.Context) {
		cctx, cancel := context.WithTimeout(rctx, time.Second)
		defer cancel()
		_ = l.giveUp(cctx, hold, cfg)
	})
}

// acquire takes the lock (see take) and records, for riders, that this Client holds it.
func (l *Lock) acquire(ctx context.Context, cfg core.LockConfig, block bool) (context.Context, bool, error) {
	held, ok, err := l.take(ctx, cfg, block)
	if ok {
		if a := l.x.RT.Held(held, l.Key()); a != nil {
			l.heldBy(a.Hold().ID)
		}
	}
	return held, ok, err
}

func (l *Lock) take(ctx context.Context, cfg core.LockConfig, block bool) (context.Context, bool, error) {
	if err := l.x.RT.Check(); err != nil {
		return nil, false, err
	}
	if ctx.Err() != nil {
		return nil, false, context.Cause(ctx)
	}
	if held := l.x.RT.Held(ctx, l.Key()); held != nil {
		return l.x.Reenter(ctx, held.Hold(), cfg)
	}
	hold := l.x.RT.NewHoldID()
	if !block && cfg.Wait == 0 {
		sentAt := time.Now()
		a, err := l.attempt(ctx, hold, cfg, false)
		if err != nil {
			l.x.Abandon(hold, err)
			return nil, false, err
		}
		if !a.acquired {
			return nil, false, nil
		}
		return l.x.Won(ctx, hold, cfg, a.token, sentAt)
	}

	// A grant is published on this Client's grant channel. When the hub is already subscribed
	// to it (it is while this Client's waiters come and go), the waiter registers before its
	// first attempt at no cost. Otherwise the first attempt goes first, so that the
	// uncontended path subscribes to nothing: if it queues, the waiter subscribes and then
	// tries again at once, which also finds a grant made before the subscription (the holder's
	// own attempt reports its hold).
	waitCtx := ctx
	if cfg.Wait > 0 {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeout(ctx, cfg.Wait)
		defer cancel()
	}
	// The first attempt is a plain SET NX PX, the minimal lock's command. It cannot pass a
	// waiter: while the queue is not empty the lock key exists even when the holder's lease has
	// run out (see _lock_value.lua). When it fails, the attempts go through fair_acquire.lua.
	w := l.x.RT.Hub.Join(l.grants, hold)
	// firstSent: nothing of this hold reached Redis before it, so a lock that an attempt finds
	// already its own (fair_acquire.lua's 2) was taken after it, also when that was an earlier
	// attempt of its own whose reply was lost (go-redis then runs the attempt again).
	firstSent := time.Now()
	// A waiter whose Client holds the lock already rides along with the hold's release,
	// rather than join on its own (see ride.go).
	var carried *rode
	if w == nil && l.heldHere() {
		// The first waiter of this Client to ride subscribes first (as the first attempt
		// would once queued), so that a grant finds it.
		var err error
		if w, err = l.x.RT.Hub.Wait(waitCtx, l.grants, hold); err != nil {
			return l.ended(ctx, waitCtx, err)
		}
	}
	if w != nil {
		out, ended := l.ride(waitCtx, hold+" "+strconv.FormatInt(l.x.Lease(cfg).Milliseconds(), 10))
		switch {
		case ended:
			w.Close()
			return l.ended(ctx, waitCtx, aqs.ErrClosed)
		case out.joined:
			carried = &out
		}
	}
	if w == nil && !cfg.Token { // when this Client has waiters already, the lock is contended
		sentAt := firstSent
		ok, err := l.x.SetNXAcquire(ctx, hold, l.x.Lease(cfg))
		if err != nil {
			l.x.Abandon(hold, err)
			return nil, false, err
		}
		if ok {
			return l.x.Won(ctx, hold, cfg, 0, sentAt)
		}
	}

	// queuedAt is the send time of the last attempt that found this hold queued: a grant came
	// later, so a granted lease started after it (the heartbeats move it on too). Until then,
	// the first attempt's.
	queuedAt := firstSent
	// joined is the send time of the first attempt that found this hold queued: heartbeats
	// start once it has waited a third of the waiter timeout (see below).
	var joined time.Time
	if w == nil {
		sentAt := time.Now()
		a, err := l.attempt(ctx, hold, cfg, true)
		if err != nil {
			return nil, false, l.failed(ctx, hold, cfg, err)
		}
		if a.granted { // an earlier run of our own took it, or queued and was handed it
			return l.x.WonGrant(ctx, hold, cfg, firstSent, l.waiterTimeout)
		}
		if a.acquired {
			return l.x.Won(ctx, hold, cfg, a.token, sentAt)
		}
		queuedAt, joined = sentAt, sentAt
		if w, err = l.x.RT.Hub.Wait(waitCtx, l.grants, hold); err != nil {
			gerr := l.giveUp(ctx, hold, cfg)
			switch {
			case gerr != nil:
				return nil, false, gerr
			case ctx.Err() == nil && waitCtx.Err() != nil:
				return nil, false, nil // the wait bound ran out
			}
			return nil, false, err
		}
	}
	defer w.Close()
	var q *core.Place
	defer func() { q.Stop() }()
	since := func() time.Time {
		if q != nil && q.Since().After(queuedAt) {
			return q.Since()
		}
		return queuedAt
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop() // armed by each failed attempt; since Go 1.23 a stopped timer holds no value
	defer timer.Stop()
	for {
		sentAt := time.Now()
		var a attempt
		var err error
		if carried != nil {
			// Queued by the release that carried it: that release stands for the first
			// attempt, and the new holder's lease bounds the first wait.
			a, sentAt, carried = attempt{wait: max(carried.wait, time.Millisecond)}, carried.sentAt, nil
		} else if a, err = l.attempt(ctx, hold, cfg, true); err != nil {
			return nil, false, l.failed(ctx, hold, cfg, err)
		}
		if a.granted {
			return l.x.WonGrant(ctx, hold, cfg, since(), l.waiterTimeout)
		}
		if a.acquired {
			return l.x.Won(ctx, hold, cfg, a.token, sentAt)
		}
		if a.dropped {
			hold = l.x.RT.NewHoldID() // out of the queue: join again at the tail
			w.SetTag(hold)
			joined = time.Time{}
			q.Stop()
			q = nil
			continue
		}
		queuedAt = sentAt
		if joined.IsZero() {
			joined = sentAt
		}
		// Heartbeats start only once the waiter has waited a third of the waiter timeout, when
		// the first would be due anyway: on a busy lock most waits end long before, and
		// registering a heartbeat costs the Client more than the wait's attempt itself
		// (BenchmarkFairContended). Until then each attempt keeps the place alive (it refreshes
		// the waiter's deadline), and the timer wakes the waiter for one in time.
		wait := a.wait
		var granted, dropped <-chan struct{}
		if q == nil {
			if beat := l.waiterTimeout/3 - time.Since(joined); beat > 0 {
				wait = min(wait, beat)
			} else {
				q = l.queue(hold, cfg)
			}
		}
		if q != nil {
			granted, dropped = q.Granted, q.Dropped
		}
		timer.Reset(wait)
		select {
		case <-w.C:
			if w.Tagged() {
				return l.x.WonGrant(ctx, hold, cfg, since(), l.waiterTimeout)
			}
			// A reconnect, or a wakeup passed on: check again.
		case <-granted:
			return l.x.WonGrant(ctx, hold, cfg, since(), l.waiterTimeout)
		case <-dropped:
		case <-timer.C:
		case <-waitCtx.Done():
			if err := l.giveUp(ctx, hold, cfg); err != nil {
				return nil, false, err
			}
			if ctx.Err() != nil {
				return nil, false, context.Cause(ctx)
			}
			return nil, false, nil // the wait bound ran out
		case <-l.x.RT.Done():
			// Leave the queue rather than stall it for the waiter timeout.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = l.giveUp(cctx, hold, cfg)
			cancel()
			return nil, false, aqs.ErrClosed
		}
		timer.Stop()
	}
}

// ended is the outcome of a wait that ended before anything of it reached Redis: the wait
// bound ran out (no error), ctx ended (its cause), or else err.
func (l *Lock) ended(ctx, waitCtx context.Context, err error) (context.Context, bool, error) {
	switch {
	case ctx.Err() != nil:
		return nil, false, context.Cause(ctx)
	case waitCtx.Err() != nil:
		return nil, false, nil
	}
	return nil, false, err
}

// queue starts the heartbeats that keep the hold's place in the queue.
func (l *Lock) queue(hold string, cfg core.LockConfig) *core.Place {
	return l.x.RT.Queue(hold, &core.Beat{
		Keys:     l.Keys(),
		Script:   scripts.FairHeartbeat,
		Args:     []any{hold, l.x.Lease(cfg).Milliseconds(), l.waiterTimeout.Milliseconds()},
		Interval: l.waiterTimeout / 3,
	})
}
