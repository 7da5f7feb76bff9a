// Package rwlock is a distributed read-write lock on Redis: any number of readers at once, or
// one writer alone. It is Redisson's RReadWriteLock, with its flaws fixed: each reader has a
// lease of its own, and by default a waiting writer is not starved by a stream of readers.
//
// # Sides
//
// RLock, TryRLock and RUnlock work the read side, Lock, TryLock and Unlock the write side.
// Each side has the surface of package reentrant: a successful call returns a held context,
// which ends (with aqs.ErrLockLost as its cause) when the hold's lease can no longer be
// trusted; a hold is re-entered through its held context; the write side has fencing tokens
// (aqs.WithFencingToken, Token), the read side has none.
//
// Downgrade: a writer may take the read side through its held write context; releasing the
// write side then leaves it a reader, and waiting readers are woken at that moment. Upgrade is
// refused: asking for the write side through a held read context fails at once with
// ErrUpgrade (two readers upgrading would wait for each other forever).
//
// # Leases
//
// Every read hold has its own lease in server time (the score of its entry in a zset), renewed
// by the Client's watchdog: a reader whose process died holds until its own lease ends, and
// renewing one reader never extends another. No operation scans the readers: each is a point
// lookup or the first entry of a range, so its cost does not grow with their number.
//
// # Order
//
// Fair mode (the default): once a writer waits, readers that arrive after it wait behind it
// (a reader that already holds may re-enter), so a stream of readers cannot starve a writer;
// the readers that held when it arrived finish, the last one's release wakes the writer, and
// the writer's release wakes every waiting reader. Writers are not ordered among themselves,
// and writers are preferred: under a stream of writers, readers wait.
//
// Non-fair mode (WithNonFair): readers enter whenever no writer holds, whatever waits; this
// gives the highest read throughput, and a writer gets in only when the readers happen to
// leave a gap.
//
// Messages: a write release wakes all waiting readers with one message on the readers'
// channel, and one waiting writer per Client on the writers' channel when no reader holds; the
// last reader's release wakes one writer per Client. Subscriptions are shared by the waiters
// of a Client, as for every aqs lock. Waiters also retry when the lease they wait for (or a
// waiting writer's liveness) runs out, so a lost message or a crashed holder delays, never
// strands, them.
package rwlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/excl"
	"github.com/redaqs/aqs/internal/scripts"
)

// ErrUpgrade is returned, at once, by Lock and TryLock through a context that holds the read
// side but not the write side.
var ErrUpgrade = errors.New("rwlock: a read hold cannot be upgraded to the write side")

// Lock is a distributed read-write lock. Create it with New; it is safe for concurrent use.
type Lock struct {
	w             *excl.Base // the write side: an exclusive lock on the key w
	rt            *core.Runtime
	name          string
	fair          bool
	writerTimeout time.Duration

	// The keys (see internal/scripts/_rw.lua) and channels.
	kw, kr, krn, kww, krw string
	readCh, writeCh       string

	reentered sync.Map // read hold id -> struct{}: holds whose count in Redis is above 1

	// writerSeen is set when this Lock last saw a writer waiting (a release found the
	// WAITING marker): releases then go through the script, which wakes the writer in the
	// same round trip, rather than through plain commands and a second call.
	writerSeen atomic.Bool
}

// Option configures a Lock.
type Option func(*Lock) error

// WithNonFair lets readers in whenever no writer holds, even while writers wait: the highest
// read throughput, at the price of writers waiting for a gap between readers.
func WithNonFair() Option {
	return func(l *Lock) error {
		l.fair = false
		return nil
	}
}

// WithWriterTimeout sets how long a waiting writer stays recorded as waiting without being
// heard of: readers held back by a writer whose process died wait at most this long. Live
// waiting writers are kept alive by their Client's heartbeats, three per timeout. It must be
// at least 30ms; the default is 5s.
func WithWriterTimeout(d time.Duration) Option {
	return func(l *Lock) error {
		if d < 30*time.Millisecond {
			return core.Invalid("writer timeout %v is below 30ms", d)
		}
		l.writerTimeout = d
		return nil
	}
}

// New returns the read-write lock of the given name. Any bytes make a valid name, but it must
// not be empty. Creating a Lock touches no key.
func New(c *aqs.Client, name string, opts ...Option) (*Lock, error) {
	w, err := excl.New(c.Runtime(core.Access{}), "rwlock", name, scripts.RWWriteRelease, scripts.RWForceRelease,
		":r", ":rn", ":ww", ":rw")
	if err != nil {
		return nil, err
	}
	k := w.Keys()
	l := &Lock{w: w, rt: w.RT, name: name, fair: true, writerTimeout: 5 * time.Second,
		kw: k[0], kr: k[1], krn: k[2], kww: k[3], krw: k[4],
		readCh: k[0] + ":rch", writeCh: k[0] + ":wch"}
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

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Key returns the Redis key of the write side; the other keys of the lock share its hash tag.
func (l *Lock) Key() string { return l.kw }

// Keys returns every key of the lock: the write side, the readers, their re-entry counts,
// the waiting writers and the readers-waiting flag.
func (l *Lock) Keys() []string { return []string{l.kw, l.kr, l.krn, l.kww, l.krw} }

// Fair reports whether the lock holds new readers back while a writer waits.
func (l *Lock) Fair() bool { return l.fair }

func (l *Lock) lease(cfg core.LockConfig) time.Duration { return l.w.Lease(cfg) }

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// ---- the write side ----

// Lock blocks until the write side is granted or ctx is done, and returns the held context.
// Through a context that holds the write side it re-enters at once; through one that holds
// only the read side it fails with ErrUpgrade. On failure it leaves nothing behind: its mark
// as a waiting writer is removed (and readers held back by it are woken); an invalid option
// fails with aqs.ErrInvalidArgument before anything is sent. Options: aqs.WithLease,
// aqs.WithFencingToken.
func (l *Lock) Lock(ctx context.Context, opts ...aqs.LockOption) (context.Context, error) {
	cfg, err := core.ApplyOptions(opts)
	if err != nil {
		return nil, err
	}
	held, _, err := l.acquireWrite(ctx, cfg, true)
	return held, err
}

// TryLock takes the write side only if it can at once; with aqs.WithWait(d) it waits up to d.
// Not getting it is a result, not an error: (nil, false, nil), and nothing is left behind.
// Re-entry and the refused upgrade are as for Lock. Options: aqs.WithLease,
// aqs.WithFencingToken, aqs.WithWait.
func (l *Lock) TryLock(ctx context.Context, opts ...aqs.TryLockOption) (context.Context, bool, error) {
	cfg, err := core.ApplyOptions(opts)
	if err != nil {
		return nil, false, err
	}
	return l.acquireWrite(ctx, cfg, false)
}

// Unlock releases the write acquisition held by ctx (see reentrant.Lock.Unlock). A context
// that holds only the read side gets an error matching aqs.ErrNotOwner.
func (l *Lock) Unlock(ctx context.Context) error { return l.w.Unlock(ctx) }

// Token returns the fencing token of ctx's write hold.
func (l *Lock) Token(ctx context.Context) (int64, error) { return l.w.Token(ctx) }

// ForceUnlock frees the lock whoever holds it, writer and readers, and wakes every waiter.
// It reports whether anything was held. Meant for administration.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) { return l.w.ForceUnlock(ctx) }

func (l *Lock) writeAttempt(ctx context.Context, hold string, cfg core.LockConfig, wait bool) (ok bool, token int64, hint time.Duration, err error) {
	r, err := l.w.RunAcquire(ctx, scripts.RWWriteAcquire, []string{l.kw, l.kr, l.krn, l.kww}, hold,
		hold, l.lease(cfg).Milliseconds(), l.writerTimeout.Milliseconds(), flag(wait), flag(cfg.Token)).Int64()
	switch {
	case err != nil:
		return false, 0, 0, core.RedisError(l.kw, err)
	case r > 1:
		return true, r, 0, nil
	case r == 1:
		return true, 0, 0, nil
	default:
		return false, 0, time.Duration(-1-r) * time.Millisecond, nil
	}
}

// giveUpWrite removes a waiting writer's mark. It does not use ctx's cancellation.
func (l *Lock) giveUpWrite(ctx context.Context, hold string) error {
	err := scripts.RWWriterGiveUp.Run(context.WithoutCancel(ctx), l.rt.Redis, []string{l.kw, l.kww, l.krw},
		hold, l.rt.PublishCommand()).Err()
	return core.RedisError(l.kw, err)
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
	hold := l.rt.NewHoldID()
	wait := block || cfg.Wait > 0
	// When this Client is subscribed to the writers' channel already (it stays subscribed a
	// while after its last waiter), the writer registers before its first attempt, at no
	// cost: a wake after that attempt reaches it, and it need not try twice before waiting.
	var w *core.Waiter
	if wait {
		w = l.rt.Hub.Join(l.writeCh, "")
	}
	closeW := func() {
		if w != nil {
			w.Close()
		}
	}
	sentAt := time.Now()
	ok, token, hint, err := l.writeAttempt(ctx, hold, cfg, wait)
	if err != nil {
		closeW()
		l.w.Abandon(hold, err)
		if wait {
			_ = l.giveUpWrite(ctx, hold)
		}
		return nil, false, err
	}
	if ok || !wait {
		closeW()
		if ok {
			return l.w.Won(ctx, hold, cfg, token, sentAt)
		}
		return nil, false, nil
	}

	waitCtx := ctx
	if cfg.Wait > 0 {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeout(ctx, cfg.Wait)
		defer cancel()
	}
	// From here the writer is marked as waiting: every way out removes the mark. The error
	// reported is the one that ended the wait; a failure to remove the mark is reported only
	// when there is none (the mark then ends with its deadline).
	giveUp := func(err error) (context.Context, bool, error) {
		gerr := l.giveUpWrite(ctx, hold)
		if err == nil && ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		if err == nil {
			err = gerr
		}
		return nil, false, err
	}
	retry := w == nil // subscribed only now: a wake may have come before, try again at once
	if w == nil {
		if w, err = l.rt.Hub.Wait(waitCtx, l.writeCh, ""); err != nil {
			if ctx.Err() == nil && waitCtx.Err() != nil {
				return giveUp(nil) // the wait bound ran out
			}
			return giveUp(err)
		}
	}
	defer w.Close()
	// The mark is kept alive while the writer waits, as the fair lock's waiters are. A
	// heartbeat that finds the mark gone (it outlived its deadline) makes the writer attempt
	// again, which marks it anew.
	dropped := make(chan struct{}, 1)
	stopBeat := l.rt.StartBeat(&core.Beat{
		Keys:     []string{l.kw, l.kww},
		Script:   scripts.RWWriterHeartbeat,
		Args:     []any{hold, l.writerTimeout.Milliseconds()},
		Interval: l.writerTimeout / 3,
		OnReply: func(r int64, _ time.Time, err error) {
			if err == nil && r == 0 {
				select {
				case dropped <- struct{}{}:
				default:
				}
			}
		},
	})
	defer stopBeat()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		if retry {
			sentAt = time.Now()
			ok, token, hint, err = l.writeAttempt(ctx, hold, cfg, true)
			if err != nil {
				l.w.Abandon(hold, err)
				return giveUp(err)
			}
			if ok {
				return l.w.Won(ctx, hold, cfg, token, sentAt)
			}
		}
		retry = true
		timer.Reset(max(hint, time.Millisecond))
		select {
		case <-w.C:
		case <-dropped:
		case <-timer.C:
		case <-waitCtx.Done():
			if ctx.Err() != nil {
				return giveUp(context.Cause(ctx))
			}
			return giveUp(nil) // the wait bound ran out
		case <-l.rt.Done():
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = l.giveUpWrite(cctx, hold)
			cancel()
			return nil, false, aqs.ErrClosed
		}
		timer.Stop()
	}
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
// released yet. The hold's last release frees its place, and the last reader's wakes a
// waiting writer. A context that holds only the write side gets an error matching
// aqs.ErrNotOwner; a hold that was lost, one matching aqs.ErrNotOwner and aqs.ErrLockLost.
func (l *Lock) RUnlock(ctx context.Context) error {
	if err := l.rt.Check(); err != nil {
		return err
	}
	held := l.rt.Held(ctx, l.kr)
	if held == nil {
		return fmt.Errorf("rwlock: read-unlock %q: %w", l.name, core.ErrNotOwner)
	}
	h := held.Hold()
	trusted := h.LeaseTrusted() // asked before Release ends the hold
	last, err := held.Release()
	if err != nil {
		return fmt.Errorf("rwlock: read-unlock %q: %w: %w", l.name, core.ErrNotOwner, err)
	}
	reentered := false
	if last {
		_, reentered = l.reentered.LoadAndDelete(h.ID)
	}
	if last && trusted && !reentered && !l.writerSeen.Load() {
		return l.releaseRead(ctx, h)
	}
	n, err := scripts.RWReadRelease.Run(context.WithoutCancel(ctx), l.rt.Redis, []string{l.kw, l.kr, l.krn},
		h.ID, flag(last), l.rt.PublishCommand(), flag(reentered), flag(trusted)).Int64()
	if err != nil {
		return core.RedisError(l.kw, err)
	}
	if last && (n == 0 || n == -2) {
		l.writerSeen.Store(n == -2) // -2: released while a writer waits
		n = 0
	}
	if n < 0 {
		l.reentered.Delete(h.ID)
		h.Lost()
		return fmt.Errorf("rwlock: read-unlock %q: %w: %w", l.name, core.ErrNotOwner, core.ErrLockLost)
	}
	return nil
}

// releaseRead ends a read hold whose lease is known to run and that was never re-entered,
// with two plain commands in one round trip (ZREM of the hold, then GET of the write key): the
// common release costs Redis a third of a script's work. Only when the write key shows a
// waiting writer does a script (rw_wake_writer.lua) wake it, if this was the last live
// reader. The two need not be atomic: a writer that marks itself waiting after the GET made
// its attempt after the ZREM, so it saw this reader gone; if other readers remain, the last of
// them wakes it.
func (l *Lock) releaseRead(ctx context.Context, h *core.Hold) error {
	ctx = context.WithoutCancel(ctx)
	var zrem *redis.IntCmd
	var get *redis.StringCmd
	_, err := l.rt.Redis.Pipelined(ctx, func(p redis.Pipeliner) error {
		zrem = p.ZRem(ctx, l.kr, h.ID)
		get = p.Get(ctx, l.kw)
		return nil
	})
	if err != nil && err != redis.Nil {
		return core.RedisError(l.kw, err)
	}
	if zrem.Val() == 0 {
		h.Lost()
		return fmt.Errorf("rwlock: read-unlock %q: %w: %w", l.name, core.ErrNotOwner, core.ErrLockLost)
	}
	if get.Val() == waitingMarker {
		l.writerSeen.Store(true)
		err := scripts.RWWakeWriter.Run(ctx, l.rt.Redis, []string{l.kw, l.kr}, l.rt.PublishCommand()).Err()
		return core.RedisError(l.kw, err)
	}
	return nil
}

// waitingMarker is the write key's value while writers wait and none holds (WAITING in
// internal/scripts/_rw.lua).
const waitingMarker = "00000000-0000-0000-0000-000000000000:0"

func (l *Lock) readAttempt(ctx context.Context, hold, writer string, cfg core.LockConfig, wait bool) (bool, time.Duration, error) {
	margin := int64(0) // a waiting reader's flag outlives its next attempt by this much
	if wait {
		margin = l.writerTimeout.Milliseconds()
	}
	// The write side's undo (rw_force_release.lua bounded to the hold) undoes a read hold too.
	r, err := l.w.RunAcquire(ctx, scripts.RWReadAcquire, []string{l.kw, l.kr, l.krw}, hold,
		hold, l.lease(cfg).Milliseconds(), writer, flag(l.fair), margin).Int64()
	switch {
	case err != nil:
		return false, 0, core.RedisError(l.kw, err)
	case r >= 1:
		return true, 0, nil
	default:
		return false, time.Duration(-1-r) * time.Millisecond, nil
	}
}

// wonRead turns a successful read attempt into a held context, unless ctx ended meanwhile.
// A downgrade's held context does not inherit the cancellation of the write side's held
// context (only its values): it must outlive the write side's release.
func (l *Lock) wonRead(ctx context.Context, hold string, downgrade bool, cfg core.LockConfig, sentAt time.Time) (context.Context, bool, error) {
	parent := ctx
	if downgrade {
		parent = context.WithoutCancel(ctx)
	}
	held := l.rt.Adopt(parent, core.Grant{
		Key: l.kr, ID: hold, Lease: l.lease(cfg), Watchdog: cfg.Lease == 0,
		Renew: scripts.RWReadRenew, FetchToken: noToken, SentAt: sentAt,
	})
	if ctx.Err() != nil {
		_ = l.RUnlock(held)
		return nil, false, context.Cause(ctx)
	}
	return held, true, nil
}

func noToken(context.Context, *core.Hold) (int64, error) {
	return 0, core.Invalid("rwlock: read holds have no fencing token")
}

// reenterRead takes the read side again for a context that holds it.
func (l *Lock) reenterRead(ctx context.Context, h *core.Hold, cfg core.LockConfig) (context.Context, bool, error) {
	sentAt := time.Now()
	ok, err := scripts.RWReadReenter.Run(ctx, l.rt.Redis, []string{l.kr, l.krn},
		h.ID, cfg.Lease.Milliseconds()).Int64()
	if err != nil {
		return nil, false, core.RedisError(l.kw, err)
	}
	if ok == 0 {
		l.reentered.Delete(h.ID)
		h.Lost()
		return nil, false, fmt.Errorf("rwlock: read re-enter %q: %w", l.name, core.ErrLockLost)
	}
	l.reentered.Store(h.ID, struct{}{})
	return l.rt.Adopt(ctx, core.Grant{
		Key: l.kr, ID: h.ID, Lease: cfg.Lease, Renew: scripts.RWReadRenew, FetchToken: noToken,
		SentAt: sentAt,
	}), true, nil
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
	hold := l.rt.NewHoldID()
	wait := block || cfg.Wait > 0
	abandon := func(err error) { l.w.Abandon(hold, err) } // the force script undoes a read hold too
	sentAt := time.Now()
	ok, hint, err := l.readAttempt(ctx, hold, writer, cfg, wait)
	if err != nil {
		abandon(err)
		return nil, false, err
	}
	if ok {
		return l.wonRead(ctx, hold, writer != "", cfg, sentAt)
	}
	if !wait {
		return nil, false, nil
	}
	waitCtx := ctx
	if cfg.Wait > 0 {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeout(ctx, cfg.Wait)
		defer cancel()
	}
	w, err := l.rt.Hub.Wait(waitCtx, l.readCh, "")
	if err != nil {
		if ctx.Err() == nil && waitCtx.Err() != nil {
			return nil, false, nil // the wait bound ran out
		}
		return nil, false, err
	}
	defer w.Close()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		sentAt = time.Now()
		ok, hint, err = l.readAttempt(ctx, hold, writer, cfg, true)
		if err != nil {
			abandon(err)
			return nil, false, err
		}
		if ok {
			return l.wonRead(ctx, hold, writer != "", cfg, sentAt)
		}
		timer.Reset(max(hint, time.Millisecond))
		select {
		case <-w.C:
		case <-timer.C:
		case <-waitCtx.Done():
			if ctx.Err() != nil {
				return nil, false, context.Cause(ctx)
			}
			return nil, false, nil // the wait bound ran out
		case <-l.rt.Done():
			return nil, false, aqs.ErrClosed
		}
		timer.Stop()
	}
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
	// WaitingWriters is the number of writers recorded as waiting and still live.
	WaitingWriters int
}

// Info reads the lock's state in one round trip.
func (l *Lock) Info(ctx context.Context) (Info, error) {
	if err := l.rt.Check(); err != nil {
		return Info{}, err
	}
	res, err := scripts.RWInfo.Run(ctx, l.rt.Redis, []string{l.kw, l.kr, l.kww}).Slice()
	if err != nil {
		return Info{}, core.RedisError(l.kw, err)
	}
	in := Info{Readers: int(toInt(res[4])), WaitingWriters: int(toInt(res[5]))}
	if s, ok := res[0].(string); ok {
		in.Writer = s
		in.WriteCount = int(toInt(res[1]))
		in.Token = toInt(res[2])
		in.WriteLease = time.Duration(toInt(res[3])) * time.Millisecond
	}
	return in, nil
}

// IsLocked reports whether a writer or any reader holds the lock.
func (l *Lock) IsLocked(ctx context.Context) (bool, error) {
	in, err := l.Info(ctx)
	if err != nil {
		return false, err
	}
	return in.Writer != "" || in.Readers > 0, nil
}

// toInt reads an integer reply element: an int64, a numeric string, or false/nil as 0.
func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		var n int64
		_, _ = fmt.Sscan(x, &n)
		return n
	}
	return 0
}
