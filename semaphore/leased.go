package semaphore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/acquire"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/layout"
	"github.com/redaqs/aqs/internal/scripts"
)

// Leased is a distributed semaphore of leased permits. Create it with NewLeased; it is safe
// for concurrent use.
//
// Each acquisition gets a Permit: an id, its number of permits, and a lease in server time of
// its own. By default the Client's watchdog renews the lease while the Client lives, so a
// process that dies (or loses Redis) gives its permits back when the lease ends, at most the
// watchdog timeout later; aqs.WithLease sets a fixed lease instead. Leases that ran out count as
// available at once, whoever looks, and the waiters are served when they do: each waiter
// looks again at the nearest lease end reported by its last attempt, and the Client's
// heartbeats serve the queue too, so no release is needed and nothing polls.
type Leased struct {
	base
	kp   string   // the permits
	kpn  string   // their counts
	kpr  string   // the permits released by their id
	keys []string // s, q, d, p, pn (see internal/scripts/_lsem.lua)
	all  []string // keys and kpr
	// renewKeys are the keys of a permit's renewal after p (see lsem_renew.lua): pn, pr, and s
	// for a semaphore with an expiry, which its permits' renewals keep.
	renewKeys []string
}

// NewLeased returns the leased-permit semaphore of the given name. Any bytes make a valid
// name, but it must not be empty. Creating a Leased touches no key.
func NewLeased(c *aqs.Client, name string, opts ...Option) (*Leased, error) {
	b, err := newBase(core.RuntimeOf(c), name, opts)
	if err != nil {
		return nil, err
	}
	k := b.key
	keys := layout.LeasedKeys(k)
	kpr := k + layout.ReleasedPermitsSuffix
	l := &Leased{base: b, kp: keys[3], kpn: keys[4], kpr: kpr, keys: keys, all: append(keys[:5:5], kpr),
		renewKeys: []string{keys[4], kpr}}
	if b.expiry > 0 {
		l.renewKeys = append(l.renewKeys, k)
	}
	l.queue("leased-semaphore", &core.Orphans{GiveBack: l.returnGrant, Holders: l.holders})
	return l, nil
}

// holders returns the hold ids of the permits leased out (see internal/core/orphan.go).
func (l *Leased) holders(ctx context.Context) ([]string, error) {
	cmd := redis.NewStringSliceCmd(ctx, "zrange", l.kp, 0, -1)
	if err := l.rt.Pipe.Process(ctx, cmd); err != nil {
		return nil, core.RedisError(l.key, err)
	}
	return cmd.Val(), nil
}

// returnGrant gives back the permits granted to hold, a hold id this Client no longer uses
// (see internal/core/orphan.go): lsem_give_up finds them by the hold id; the queue member it
// names ("<hold> 0 0") is nobody's.
func (l *Leased) returnGrant(ctx context.Context, hold string) error {
	v, err := scripts.LSemGiveUp.Run(ctx, l.rt.Pipe, l.keys, l.args(hold, 0, 0, l.rt.PublishCommand())...).Result()
	if err != nil {
		return core.RedisError(l.key, err)
	}
	_, err = l.reply(v)
	return err
}

// Name returns the semaphore's name.
func (l *Leased) Name() string { return l.name }

// Key returns the Redis key of the semaphore's permits; its other keys share its hash tag.
func (l *Leased) Key() string { return l.key }

// Keys returns every key of the semaphore: the permits, the queue, its deadlines, the leased
// permits, their counts, and the permits released by their id.
func (l *Leased) Keys() []string { return l.all }

// TrySetPermits sets the semaphore's total permits to k, only if they were never set, and
// reports whether it set them.
func (l *Leased) TrySetPermits(ctx context.Context, k int) (bool, error) {
	return trySet(ctx, &l.base, l.keys, k, "l")
}

// AddPermits changes the total permits by delta: a positive delta serves the waiters it can,
// a negative one needs as many permits available (ErrInsufficientPermits otherwise; it never
// waits). Waiters that now ask for more than the total fail with ErrTooManyPermits. On a
// semaphore never set, it sets the total to delta.
func (l *Leased) AddPermits(ctx context.Context, delta int) error {
	return add(ctx, &l.base, l.keys, delta, "l")
}

// Available returns the permits available now, in server time: permits whose lease ran out
// are available, whether or not anyone has looked since. 0 when never set.
func (l *Leased) Available(ctx context.Context) (int, error) {
	if err := l.rt.Check(); err != nil {
		return 0, err
	}
	v, err := scripts.LSemAvailable.Run(ctx, l.rt.Pipe, []string{l.key, l.kp, l.kpn}).Result()
	if err != nil {
		return 0, core.RedisError(l.key, err)
	}
	n, _, err := scripts.DecodeAvailable(v)
	return int(n), err
}

// Permit is one acquisition of a Leased: n permits under one lease. Its methods are safe for
// concurrent use.
type Permit struct {
	l    *Leased
	id   string
	held context.Context

	mu sync.Mutex
	n  int

	// none ends the held context of a permit of 0 permits (see Leased.Acquire), nil for
	// others; ended tells whether it was released.
	none  context.CancelCauseFunc
	ended bool
}

// ID returns the permit's id, unique across Clients and time ("" for a permit of 0 permits).
func (p *Permit) ID() string { return p.id }

// Permits returns how many permits it holds (fewer after ReleasePart).
func (p *Permit) Permits() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// Context returns the permit's held context, a child of the context Acquire was called with:
// it is done, with aqs.ErrLockLost as its cause, once the permit's lease can no longer be
// trusted (it ran out, the renewals failed, or Redis lost it), and with aqs.ErrReleased after
// Release or after a release by its id (ReleaseID, from any process: see there when this
// Client learns of it). Work done under the permit should stop when it is done.
func (p *Permit) Context() context.Context { return p.held }

// Acquire blocks until n permits are granted or ctx is done, and returns the permit. Waiters
// are served in arrival order. It fails at once with ErrTooManyPermits when n is above the
// total, and with ErrNotSet when the permits were never set (a semaphore made WithSize sets
// them instead). Option: aqs.WithLease, for a fixed lease instead of the watchdog's renewals.
//
// Acquire of 0 permits succeeds at once, as in golang.org/x/sync/semaphore: it sends nothing to
// Redis and returns a permit of 0 permits, with no id and no lease, whose context ends only
// with ctx or with its Release (which, as ReleasePart and SetLease of it, sends nothing either).
//
// On failure Acquire returns context.Cause(ctx) (or the error), and leaves the semaphore
// unchanged: it leaves the queue, and a permit granted to it in the same instant goes to the
// next waiters.
func (l *Leased) Acquire(ctx context.Context, n int, opts ...aqs.LeaseOption) (*Permit, error) {
	if err := l.checkN("acquire", n); err != nil {
		return nil, err
	}
	cfg, err := core.ApplyOptions(opts)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return l.empty(ctx)
	}
	p, _, err := l.take(ctx, n, cfg, true)
	return p, err
}

// TryAcquire takes n permits only if it can at once (they are available and nobody waits);
// with aqs.WithWait(d) it waits in the queue up to d. Not getting them is a result, not an
// error: (nil, false, nil), and nothing is left behind. Option aqs.WithLease as for Acquire.
// TryAcquire of 0 permits succeeds at once, as Acquire of 0 does.
func (l *Leased) TryAcquire(ctx context.Context, n int, opts ...aqs.TryOption) (*Permit, bool, error) {
	if err := l.checkN("acquire", n); err != nil {
		return nil, false, err
	}
	cfg, err := core.ApplyOptions(opts)
	if err != nil {
		return nil, false, err
	}
	if n == 0 {
		p, err := l.empty(ctx)
		return p, err == nil, err
	}
	return l.take(ctx, n, cfg, false)
}

// empty returns a permit of 0 permits (see Acquire).
func (l *Leased) empty(ctx context.Context) (*Permit, error) {
	if err := l.none(ctx, true); err != nil {
		return nil, err
	}
	held, end := context.WithCancelCause(ctx)
	return &Permit{l: l, held: held, none: end}, nil
}

// endEmpty releases a permit of 0 permits: its context ends with aqs.ErrReleased; released
// already, it reports aqs.ErrNotOwner as the release of any permit released already.
func (l *Leased) endEmpty(op string, p *Permit, release bool) error {
	if err := l.rt.Check(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return fmt.Errorf("semaphore %q: %s of a permit of 0 permits: %w", l.name, op, core.ErrNotOwner)
	}
	if release {
		p.ended = true
		p.none(core.ErrReleased)
	}
	return nil
}

func (l *Leased) take(ctx context.Context, n int, cfg core.LockConfig, block bool) (*Permit, bool, error) {
	lease := l.lease(cfg)
	won, ok, err := l.q.Acquire(ctx, &acquire.Call{
		Rules:     &leasing{l: l, n: n, lease: lease},
		Block:     block,
		Wait:      cfg.Wait,
		Primitive: "leased-semaphore",
		Hold: &acquire.HoldSpec{
			Key: l.kp, Lease: lease, Watchdog: cfg.Lease == 0, Renew: scripts.LSemRenew,
			RenewKeys: l.renewKeys, FetchToken: noToken, Release: l.releaseHeld,
		},
	})
	if !ok || err != nil {
		return nil, ok, err
	}
	return &Permit{l: l, id: won.Hold, held: won.Held, n: n}, true, nil
}

// releaseHeld gives back the permit of a held context: for a call that won as its context
// ended.
func (l *Leased) releaseHeld(held context.Context) error {
	a := l.rt.Held(held, l.kp)
	if a == nil {
		return nil
	}
	if _, err := a.Release(); err != nil {
		return err
	}
	defer a.Hold().Settle()
	return l.undo(context.WithoutCancel(held), a.Hold().ID)
}

func (l *Leased) lease(cfg core.LockConfig) time.Duration {
	if cfg.Lease > 0 {
		return cfg.Lease
	}
	return l.rt.Cfg.WatchdogTimeout
}

func noToken(context.Context, *core.Hold) (int64, error) {
	return 0, core.Invalid("semaphore: permits have no fencing token")
}

// own returns the permit's live acquisition, or the error for a permit that is not this
// semaphore's or was released already.
func (l *Leased) own(op string, p *Permit) (*core.Acquisition, error) {
	if err := l.rt.Check(); err != nil {
		return nil, err
	}
	if p == nil || p.l != l {
		return nil, core.Invalid("semaphore %q: %s of a permit of another semaphore", l.name, op)
	}
	a := l.rt.Held(p.held, l.kp)
	if a == nil {
		return nil, fmt.Errorf("semaphore %q: %s of permit %s: %w", l.name, op, p.id, core.ErrNotOwner)
	}
	return a, nil
}

// Release gives back all of the permit's permits, and serves the waiters it can now satisfy,
// in order. It fails with ErrPermitExpired when the permit's lease ran out (its permits came
// back then), with ErrPermitReleased when a release by its id ended it (see ReleaseID), and
// with an error matching aqs.ErrNotOwner for a permit released already.
// Release does not use ctx's cancellation, only its values.
func (l *Leased) Release(ctx context.Context, p *Permit) error {
	if p != nil && p.l == l && p.none != nil {
		return l.endEmpty("release", p, true)
	}
	a, err := l.own("release", p)
	if err != nil {
		return err
	}
	h := a.Hold()
	trusted := h.TrustedUntil() // asked before Release ends the hold
	if _, err := a.Release(); err != nil {
		if errors.Is(context.Cause(p.held), core.ErrReleased) {
			// Ended by a release by its id, which this Client heard of (see ReleaseID).
			return l.releasedByID("release", p.id)
		}
		return fmt.Errorf("semaphore %q: release of permit %s: %w: %w", l.name, p.id, ErrPermitExpired, err)
	}
	return l.giveBack(ctx, p, h, 0, trusted)
}

// ReleasePart gives back k of the permit's permits and keeps the permit with the rest; k equal
// to all of them is Release. It fails with ErrOverRelease, and changes nothing, when k is above
// the permits it holds (fewer than Permits says after a ReleasePartID), and as Release does. ReleasePart of 0 permits changes nothing and sends nothing to Redis.
func (l *Leased) ReleasePart(ctx context.Context, p *Permit, k int) error {
	if err := l.checkN("release", k); err != nil {
		return err
	}
	if p != nil && p.l == l && p.none != nil {
		if err := l.endEmpty("release", p, false); err != nil || k == 0 {
			return err
		}
		return fmt.Errorf("semaphore %q: release of %d of 0 permits: %w", l.name, k, ErrOverRelease)
	}
	a, err := l.own("release", p)
	if err != nil {
		return err
	}
	if k == 0 {
		return nil
	}
	p.mu.Lock()
	n := p.n
	p.mu.Unlock()
	switch {
	case k > n:
		return fmt.Errorf("semaphore %q: release of %d of %d permits: %w", l.name, k, n, ErrOverRelease)
	case k == n:
		return l.Release(ctx, p)
	}
	return l.giveBack(ctx, p, a.Hold(), k, time.Time{})
}

// giveBack runs lsem_release.lua for k of the permit's permits (0: all, ending the permit),
// through the engine's release (internal/acquire/release.go), trusted being the hold's
// TrustedUntil (for k = 0).
func (l *Leased) giveBack(ctx context.Context, p *Permit, h *core.Hold, k int, trusted time.Time) error {
	// A permit this process knows to hold one permit holds one in Redis too (its count there
	// only ever goes down, and a partial release's lost reply leaves the local count higher),
	// so the script need not look.
	one := p.Permits() == 1
	keys := l.keys
	if k > 0 {
		// A partial release leaves the permit live, so a second run of it would give back k
		// more: a key of the call's own makes a run again answer as the first did (see
		// lsem_release.lua), and the engine may send it again while its outcome is unknown.
		keys = append(l.keys[:5:5], l.key+layout.OnceSuffix+l.rt.NewHoldID())
	}
	r, err := acquire.End(l.q, ctx, h, k == 0, true, trusted, func(ctx context.Context, _ acquire.Ending) (scripts.Sem, error) {
		v, err := scripts.LSemRelease.RunOnce(ctx, l.rt.Pipe, keys, l.args(p.id, k,
			l.rt.PublishCommand(), l.rt.ID, flag(one))...).Result()
		if err != nil {
			return scripts.Sem{}, core.RedisError(l.key, err)
		}
		r, err := scripts.DecodeSem(v)
		if err == nil && r.Gone() {
			// Gone: a release by its id leaves a mark that tells it from a lease that ran out.
			// Only this path, a rare one, pays for the look.
			var marked bool
			if marked, err = l.marked(ctx, p.id); marked {
				r.Status = scripts.SemReleasedByID
			}
		}
		return r, err
	})
	switch {
	case core.ReleasedUnseen(err):
		return nil // grants to this Client's waiters, if any, are found by them
	case err != nil:
		return err
	case r.Status == scripts.SemReleasedByID:
		h.Revoked()
		return l.releasedByID("release", p.id)
	case r.Gone():
		return fmt.Errorf("semaphore %q: release of permit %s: %w: %w", l.name, p.id, ErrPermitExpired, core.ErrLockLost)
	case r.Status != scripts.SemOK:
		return fmt.Errorf("semaphore %q: release of %d permits of permit %s: %w", l.name, k, p.id, ErrOverRelease)
	}
	p.mu.Lock()
	p.n = int(r.Value)
	p.mu.Unlock()
	return nil
}

// SetLease changes the permit's lease: d > 0 sets a fixed lease of d from now, which the
// watchdog no longer renews; d == 0 hands the lease to the watchdog, which renews it while the
// Client lives. It fails with ErrPermitExpired when the lease ran out already, and with
// ErrPermitReleased when a release by its id ended the permit (see ReleaseID).
func (l *Leased) SetLease(ctx context.Context, p *Permit, d time.Duration) error {
	if d < 0 {
		return core.Invalid("semaphore %q: negative lease %v", l.name, d)
	}
	if d > 0 && d < time.Millisecond {
		return core.Invalid("semaphore %q: lease %v is below 1ms", l.name, d)
	}
	if p != nil && p.l == l && p.none != nil {
		return l.endEmpty("set the lease", p, false) // it has no lease
	}
	a, err := l.own("set the lease", p)
	if err != nil {
		return err
	}
	lease := d
	if d == 0 {
		lease = l.rt.Cfg.WatchdogTimeout
	}
	sentAt := time.Now()
	ok, err := scripts.LSemRenew.RunInt(ctx, l.rt.Pipe, append([]string{l.kp}, l.renewKeys...), l.args(p.id, lease.Milliseconds())...)
	if err != nil {
		return core.RedisError(l.key, err)
	}
	if ok == 2 {
		a.Hold().Revoked()
		return l.releasedByID("set the lease", p.id)
	}
	if ok == 0 {
		l.q.HoldLost(a.Hold())
		return fmt.Errorf("semaphore %q: set the lease of permit %s: %w: %w", l.name, p.id, ErrPermitExpired, core.ErrLockLost)
	}
	l.rt.Relet(a.Hold(), lease, d == 0, sentAt)
	return nil
}

// leasing is the leased semaphore's rules for the acquire engine, for one call asking n
// permits.
type leasing struct {
	l     *Leased
	n     int
	lease time.Duration
}

func (c *leasing) Attempt(ctx context.Context, hold string, t acquire.Try) (scripts.Attempt, error) {
	a, err := c.attempt(ctx, hold, t)
	if a.Status == scripts.NotSet && c.l.sized {
		if err := c.l.seed(ctx, c.l.keys, "l"); err != nil {
			return scripts.Attempt{}, err
		}
		return c.attempt(ctx, hold, t)
	}
	return a, err
}

// attempt makes one run of lsem_acquire.lua.
func (c *leasing) attempt(ctx context.Context, hold string, t acquire.Try) (scripts.Attempt, error) {
	l := c.l
	v, err := l.rt.RunAcquire(ctx, scripts.LSemAcquire, l.keys, l.args(hold, c.n, c.lease.Milliseconds(),
		l.waiterTimeout.Milliseconds(), flag(t.Join), l.rt.PublishCommand(), flag(!t.First)),
		tookPermits, func(ctx context.Context) error { return l.undo(ctx, hold) }).Result()
	if err != nil {
		return scripts.Attempt{}, core.RedisError(l.key, err)
	}
	return l.attempt(v)
}

func (c *leasing) GiveUp(ctx context.Context, hold string) error {
	l := c.l
	v, err := scripts.LSemGiveUp.Run(ctx, l.rt.Pipe, l.keys, l.args(hold, c.n, c.lease.Milliseconds(),
		l.rt.PublishCommand())...).Result()
	if err != nil {
		return core.RedisError(l.key, err)
	}
	_, err = l.reply(v)
	return err
}

// confirmKeys are the keys of Confirm's renewal: p and pn, and for a semaphore with an expiry
// pr and s, which the renewal keeps as long as the lease (see lsem_renew.lua).
func (l *Leased) confirmKeys() []string {
	if l.expiry > 0 {
		return append([]string{l.kp}, l.renewKeys...)
	}
	return []string{l.kp, l.kpn}
}

// Confirm confirms a permit granted to the waiter under the replica-sync policy: the
// waiter's write is the renewal of the permit to its full lease.
func (c *leasing) Confirm(ctx context.Context, hold string) error {
	l := c.l
	r, err := l.rt.ConfirmGrant(ctx, scripts.LSemRenew, l.confirmKeys(), l.args(hold, c.lease.Milliseconds()),
		func(reply any) bool { return reply == int64(1) },
		func(ctx context.Context) error { return l.undo(ctx, hold) })
	if err != nil {
		return core.RedisError(l.key, err)
	}
	if r != int64(1) {
		return fmt.Errorf("semaphore %q: permit %s was gone when confirmed: %w: %w", l.name, hold, ErrPermitExpired, core.ErrLockLost)
	}
	return nil
}

func (c *leasing) Undo(ctx context.Context, hold string) error { return c.l.undo(ctx, hold) }

func (c *leasing) Beat(hold string) *core.Beat {
	l := c.l
	return &core.Beat{Keys: l.keys, Script: scripts.LSemHeartbeat,
		Args: l.args(hold, c.n, c.lease.Milliseconds(), l.waiterTimeout.Milliseconds(), l.rt.PublishCommand())}
}

// undo gives back every permit of an acquisition the replicas did not acknowledge (see
// internal/core/sync.go).
func (l *Leased) undo(ctx context.Context, hold string) error {
	v, err := scripts.LSemRelease.Run(ctx, l.rt.Pipe, l.keys, l.args(hold, 0, l.rt.PublishCommand(), l.rt.ID, "0")...).Result()
	if err != nil {
		return core.RedisError(l.key, err)
	}
	_, err = l.reply(v)
	return err
}

// ReleaseID gives back every permit of the permit whose id is id (Permit.ID), whoever holds it
// and from any process, as Redisson's RPermitExpirableSemaphore.release(id) does, and serves
// the waiters it can now satisfy, in order. The permit's lease and the queue's order are those
// of its holder's Release.
//
// The holder's permit context ends with aqs.ErrReleased (not aqs.ErrLockLost): at once when
// the holder is a Permit of this Client, otherwise at its Client's next renewal, within a third
// of that Client's watchdog timeout. A fixed lease (aqs.WithLease) that ends before that check
// ends the context with aqs.ErrLockLost, as it would have without the release. The holder's own
// Release, ReleasePart and SetLease of the permit then fail with ErrPermitReleased, and change
// nothing.
//
// It fails, and changes nothing, with an invalid argument for an id that is not a permit's
// (the empty id of a permit of 0 permits included), with ErrPermitReleased when a release by
// its id ended the permit already, and with an error matching aqs.ErrNotOwner when no live
// permit has the id (never leased here, its lease ran out, or its holder released it). Like
// Release, it does not use ctx's cancellation, only its values; a release whose reply was lost
// is sent again, and a run again gives back nothing more.
func (l *Leased) ReleaseID(ctx context.Context, id string) error {
	return l.releaseID(ctx, id, 0)
}

// ReleasePartID gives back k of the permits of the permit whose id is id, whoever holds it and
// from any process, and the permit keeps the rest: its lease and its holder's context go on,
// and its holder's Permits still counts them until its next release (which then fails with
// ErrOverRelease if it gives back more than are left). k equal to all of them is ReleaseID. It
// fails as ReleaseID does, and with ErrOverRelease, changing nothing, when k is above the
// permits the permit holds. ReleasePartID of 0 permits changes nothing and sends nothing to
// Redis.
func (l *Leased) ReleasePartID(ctx context.Context, id string, k int) error {
	if err := l.checkN("release", k); err != nil {
		return err
	}
	if err := l.checkID(id); err != nil || k == 0 {
		return err
	}
	return l.releaseID(ctx, id, k)
}

// checkID rejects an id that does not have the shape of a permit's (a hold id).
func (l *Leased) checkID(id string) error {
	if !layout.LooksLikeHold(id) {
		return core.Invalid("semaphore %q: %q is not a permit id", l.name, id)
	}
	return nil
}

// releaseID runs lsem_release_id.lua for k of the permits of permit id (0: all), with a key of
// the call's own, so that a run again answers as the first did; it is sent again while its
// outcome is unknown.
func (l *Leased) releaseID(ctx context.Context, id string, k int) error {
	if err := l.checkID(id); err != nil {
		return err
	}
	if err := l.rt.Check(); err != nil {
		return err
	}
	keys := append(l.all[:6:6], l.key+layout.OnceSuffix+l.rt.NewHoldID())
	v, err := acquire.Resend(l.q, ctx, func(ctx context.Context) (any, error) {
		return scripts.LSemReleaseID.RunOnce(ctx, l.rt.Pipe, keys, l.args(id, k, l.rt.PublishCommand(), l.rt.ID)...).Result()
	})
	if err != nil {
		return core.RedisError(l.key, err)
	}
	r, err := l.reply(v)
	switch {
	case err != nil:
		return err
	case r.Status == scripts.SemReleasedByID:
		return l.releasedByID("release", id)
	case r.Gone():
		return fmt.Errorf("semaphore %q: release of permit %s: no live permit has this id: %w", l.name, id, core.ErrNotOwner)
	case r.Status == scripts.SemOverRelease:
		return fmt.Errorf("semaphore %q: release of %d permits of permit %s: %w", l.name, k, id, ErrOverRelease)
	case r.Value == 0:
		l.rt.Revoke(l.kp, id) // a holder of this Client learns of it at once
	}
	return nil
}

// marked reports whether a release by its id ended permit id: its mark is in pr (see
// lsem_release_id.lua). A mark is only ever made for a permit of that id, and ids are never
// used again, so a mark found is that permit's.
func (l *Leased) marked(ctx context.Context, id string) (bool, error) {
	cmd := redis.NewFloatCmd(ctx, "zscore", l.kpr, id)
	err := l.rt.Pipe.Process(ctx, cmd)
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, core.RedisError(l.key, err)
	}
	return true, nil
}

// releasedByID is the error of op on a permit that a release by its id ended.
func (l *Leased) releasedByID(op, id string) error {
	return fmt.Errorf("semaphore %q: %s of permit %s: %w: %w", l.name, op, id, ErrPermitReleased, core.ErrNotOwner)
}
