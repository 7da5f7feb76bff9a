package core

import (
	"context"
	"sync"
	"time"

	"github.com/redaqs/aqs/internal/scripts"
)

// Holds and held contexts.
//
// A Hold is this process's record of one hold of one lock: from the acquisition that created
// it in Redis to the release that ended it (or the moment it was found lost). Every hold has a
// fresh id (a Client id and a sequence number), which is what Redis stores as the holder: a
// renewal, release or token request names the hold, so it can never act on a later hold.
//
// Each successful Lock call on a hold is an acquisition (acq) with its own held context, a
// child of the caller's context that carries the acq as a value. Walking the acq chain from a
// context gives the hold to re-enter, the innermost token, and the acquisition an Unlock
// should release.
//
// The local count of acquisitions, not the count in Redis, decides which Unlock ends the hold:
// if a re-entry's reply was lost to a network error the count in Redis may be one too high, and
// the last local Unlock still ends the hold (lock_release.lua's "end" flag).

type holdKey struct{ key, id string }

// Hold is one hold of one lock.
type Hold struct {
	rt       *Runtime
	Key      string
	ID       string // the hold id: fresh for every hold
	renew    *scripts.Script
	keys     []string // the renewal's KEYS: Key, and the RenewKeys of its Grant
	key1     [1]string
	fetch    func(context.Context, *Hold) (int64, error)
	watchdog bool // renewed by the watchdog; otherwise a fixed lease, only checked
	lease    time.Duration

	mu        sync.Mutex
	token     int64
	acqs      []*acq
	acq1      [1]*acq
	deadline  time.Time     // local bound on the lease: the lease is trusted until deadline-margin
	extendTo  time.Duration // when > 0: the watchdog sets this lease at extendAt (Grant.ExtendTo)
	extendAt  time.Time
	ended     bool
	released  bool     // ended by its last local release (not found lost): its release is on its way
	settled   bool     // its id's use ended (see Settle)
	obs       *holdObs // for the Client's observer only: nil without one (see observe.go)
	owner     any      // Grant.Owner
	reentered bool     // acquired more than once (see Reentered)
}

// Reentered reports whether the hold was ever re-entered: acquired again while held.
func (h *Hold) Reentered() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reentered
}

type acq struct {
	hold     *Hold
	cancel   context.CancelCauseFunc
	parent   *acq
	base     context.Context // the context the acquisition was made with
	released bool
}

type acqKey struct{}

func acqFrom(ctx context.Context) *acq {
	a, _ := ctx.Value(acqKey{}).(*acq)
	return a
}

// Grant describes a successful acquisition reported by a script.
type Grant struct {
	Key   string
	ID    string // the hold id
	Token int64  // the fencing token when the acquisition assigned one, else 0
	// Lease is the lease the script set: the watchdog timeout for a watchdog hold, the fixed
	// lease otherwise; 0 for a re-entry that left the expiry alone.
	Lease    time.Duration
	Watchdog bool            // a new hold is renewed by the watchdog
	Renew    *scripts.Script // renewal script: KEYS[1] = Key; ARGV hold id, lease ms (0 = check)
	// RenewKeys are keys the renewal script needs after Key (a reader's re-entry counts).
	RenewKeys []string
	// FetchToken asks Redis for the hold's fencing token (assigning it on first request).
	FetchToken func(context.Context, *Hold) (int64, error)
	SentAt     time.Time // when the acquiring call was sent: the lease started no earlier
	// ExtendTo, when > 0, is the lease a new hold is to have by ExtendAt, if it still exists
	// then (the watchdog batches such extensions with its renewals). It is set on the hold
	// before the watchdog can see it, so that a hold whose first lease is short or nearly
	// over (a grant) is extended rather than found overdue.
	ExtendTo time.Duration
	ExtendAt time.Time
	// Primitive and Name identify a new hold in the events of the Client's observer
	// ("reentrant", "rwlock-read"...; the primitive's name). A re-entry needs neither.
	Primitive, Name string
	// Owner is kept alive with the hold (the engine's Queue that its release goes through:
	// see internal/acquire/shared.go).
	Owner any
}

// Adopt records a successful acquisition and returns its held context, a child of parent.
// An acquisition of a live local hold re-enters it; any other starts a new hold.
func (rt *Runtime) Adopt(parent context.Context, g Grant) context.Context {
	k := holdKey{g.Key, g.ID}
	rt.holdsMu.Lock()
	h := rt.holds[k]
	if h != nil && h.isEnded() {
		h = nil
	}
	reentry := h != nil
	if h == nil {
		// The deadline is set before the hold is visible to the watchdog, which would take a
		// zero deadline for an expired lease.
		h = &Hold{rt: rt, Key: g.Key, ID: g.ID, renew: g.Renew, fetch: g.FetchToken, owner: g.Owner,
			watchdog: g.Watchdog, lease: g.Lease, deadline: g.SentAt.Add(g.Lease), extendTo: g.ExtendTo, extendAt: g.ExtendAt}
		// The renewal's keys and the first acquisition in the Hold's own arrays: one
		// allocation for a hold that is never re-entered and renews one key.
		h.key1[0] = g.Key
		h.keys = append(h.key1[:1:1], g.RenewKeys...)
		h.acqs = h.acq1[:0]
		if rt.Observing() {
			// The hold time runs from here: the caller has the lock from now on.
			h.obs = &holdObs{primitive: g.Primitive, name: g.Name, at: time.Now(), ctx: parent}
		}
		rt.holds[k] = h
		if n, ok := rt.seqOf(g.ID); ok {
			rt.use(n, 1) // the hold's id is in use until the hold ends (see orphan.go)
		}
	}
	rt.holdsMu.Unlock()

	cctx, cancel := context.WithCancelCause(parent)
	a := &acq{hold: h, cancel: cancel, parent: acqFrom(parent), base: parent}
	h.mu.Lock()
	h.acqs = append(h.acqs, a)
	h.reentered = h.reentered || reentry
	if g.Token != 0 {
		h.token = g.Token
	}
	if g.Lease > 0 {
		if d := g.SentAt.Add(g.Lease); d.After(h.deadline) {
			h.deadline = d
		}
		h.lease = max(h.lease, g.Lease)
	}
	due := h.deadline.Add(-margin(h.lease))
	if h.extendTo > 0 && h.extendAt.Before(due) {
		due = h.extendAt
	}
	h.mu.Unlock()
	rt.wakeWatchdogBy(due)
	return context.WithValue(cctx, acqKey{}, a)
}

// Relet records that a call sent at sentAt set a hold's lease in Redis to lease: from now on
// a fixed lease, only checked by the watchdog, or, with watchdog, a lease the watchdog renews.
// (A leased permit's SetLease.)
func (rt *Runtime) Relet(h *Hold, lease time.Duration, watchdog bool, sentAt time.Time) {
	rt.holdsMu.Lock() // serialized with the watchdog's scan (see wakeWatchdogBy)
	h.mu.Lock()
	h.watchdog, h.lease, h.extendTo = watchdog, lease, 0
	h.deadline = sentAt.Add(lease)
	due := h.deadline.Add(-margin(lease))
	h.mu.Unlock()
	rt.holdsMu.Unlock()
	rt.wakeWatchdogBy(due)
}

// HoldOf returns the hold of the caller's innermost unreleased acquisition of key through this
// runtime, or nil: Held's hold, without the Acquisition.
func (rt *Runtime) HoldOf(ctx context.Context, key string) *Hold {
	for a := acqFrom(ctx); a != nil; a = a.parent {
		if a.hold.rt == rt && a.hold.Key == key && !a.isReleased() {
			return a.hold
		}
	}
	return nil
}

// Held returns the caller's innermost unreleased acquisition of key through this runtime, or
// nil when ctx holds no such lock.
func (rt *Runtime) Held(ctx context.Context, key string) *Acquisition {
	for a := acqFrom(ctx); a != nil; a = a.parent {
		if a.hold.rt == rt && a.hold.Key == key && !a.isReleased() {
			return &Acquisition{a: a, ctx: ctx}
		}
	}
	return nil
}

// HeldAny returns a key of keys that a hold of an unreleased acquisition in ctx has (its Key
// or one of its renewal keys: a multi-name lock's names), and whether there is one.
func (rt *Runtime) HeldAny(ctx context.Context, keys []string) (string, bool) {
	for a := acqFrom(ctx); a != nil; a = a.parent {
		if a.hold.rt != rt || a.isReleased() {
			continue
		}
		for _, k := range a.hold.keys {
			for _, key := range keys {
				if k == key {
					return key, true
				}
			}
		}
	}
	return "", false
}

// Keys returns the hold's keys: its Key, then the renewal's other keys.
func (h *Hold) Keys() []string { return h.keys }

// Token returns the fencing token of the innermost unreleased acquisition in ctx, asking
// Redis for it on the first request of the hold. It fails with ErrNotOwner when ctx holds no
// lock, and with ErrLockLost when the hold is gone.
func Token(ctx context.Context) (int64, error) {
	for a := acqFrom(ctx); a != nil; a = a.parent {
		if !a.isReleased() {
			return a.hold.Token(ctx)
		}
	}
	return 0, ErrNotOwner
}

// TokenOf returns the fencing token of ctx's hold of key through this runtime.
func (rt *Runtime) TokenOf(ctx context.Context, key string) (int64, error) {
	if a := rt.Held(ctx, key); a != nil {
		return a.a.hold.Token(ctx)
	}
	return 0, ErrNotOwner
}

// Token returns the hold's fencing token, fetching it once. The call does not use ctx's
// cancellation (only its values), like Unlock, so that it answers for a done held context.
func (h *Hold) Token(ctx context.Context) (int64, error) {
	h.mu.Lock()
	t, ended := h.token, h.ended
	h.mu.Unlock()
	if t != 0 {
		return t, nil
	}
	if ended {
		return 0, ErrLockLost
	}
	if err := h.rt.Check(); err != nil {
		return 0, err
	}
	t, err := h.fetch(context.WithoutCancel(ctx), h)
	if err != nil {
		return 0, err
	}
	if t == 0 {
		h.Lost()
		return 0, ErrLockLost
	}
	h.mu.Lock()
	h.token = t
	h.mu.Unlock()
	return t, nil
}

// Acquisition is a handle on one acquisition, for the primitive that releases it.
type Acquisition struct {
	a   *acq
	ctx context.Context // the context it was found in (Held): the releasing call's
}

// Hold returns the acquisition's hold.
func (x *Acquisition) Hold() *Hold { return x.a.hold }

// Release marks the acquisition released and reports whether it was the hold's last; the last
// one ends the hold, so the watchdog stops renewing it before the release reaches Redis (a late
// renewal is refused by its token). It fails with ErrNotOwner if the acquisition was released
// already, and with ErrLockLost if the hold was lost.
func (x *Acquisition) Release() (last bool, err error) {
	h := x.a.hold
	h.mu.Lock()
	if x.a.released {
		h.mu.Unlock()
		return false, ErrNotOwner
	}
	x.a.released = true
	for i, a := range h.acqs {
		if a == x.a {
			h.acqs = append(h.acqs[:i], h.acqs[i+1:]...)
			break
		}
	}
	lost := h.ended
	last = len(h.acqs) == 0
	if last {
		h.ended = true
		h.released = !lost
	}
	h.mu.Unlock()
	x.a.cancel(ErrReleased)
	if last {
		h.rt.forget(h)
		if !lost {
			h.observeEnd(EventReleased, x.ctx, nil)
		}
	}
	if lost {
		return last, ErrLockLost
	}
	return last, nil
}

// Base returns the context the hold's first acquisition was made with: the caller's context
// before any held context of this hold (a Condition's Wait takes the lock back under it).
func (x *Acquisition) Base() context.Context {
	a := x.a
	for a.parent != nil && a.parent.hold == a.hold {
		a = a.parent
	}
	return a.base
}

// ReleaseHold ends the whole hold, whatever its count: every acquisition of it is released and
// its held context cancelled with ErrReleased, as by as many Releases (a Condition's Wait). It
// fails as Release does.
func (x *Acquisition) ReleaseHold() error {
	h := x.a.hold
	h.mu.Lock()
	if x.a.released {
		h.mu.Unlock()
		return ErrNotOwner
	}
	acqs := h.acqs
	h.acqs = nil
	for _, a := range acqs {
		a.released = true
	}
	lost := h.ended
	h.ended = true
	h.released = !lost
	h.mu.Unlock()
	for _, a := range acqs {
		a.cancel(ErrReleased)
	}
	h.rt.forget(h)
	if lost {
		return ErrLockLost
	}
	h.observeEnd(EventReleased, x.ctx, nil)
	return nil
}

// LeaseTrusted reports whether the hold's lease is certainly still running in Redis: its local
// deadline (the lease counted from before the acquiring or renewing call was sent), less the
// margin for the clocks' rates, has not passed, and the hold was not found lost.
func (h *Hold) LeaseTrusted() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.ended && time.Now().Before(h.deadline.Add(-margin(h.lease)))
}

// Expire ends the hold, as the watchdog does, when its lease is no longer trusted (see
// LeaseTrusted), and reports whether the hold has ended (by that, or before). It lets a caller
// that must not act on a lease that may have run out in Redis find out at once, rather than
// when the watchdog's goroutine next runs: after a process was stopped and resumed, its
// goroutines run in any order.
func (h *Hold) Expire() bool {
	h.mu.Lock()
	ended := h.ended
	overdue := !ended && !time.Now().Before(h.deadline.Add(-margin(h.lease)))
	h.mu.Unlock()
	if overdue {
		h.rt.Logger().Warn("aqs: lease no longer trusted", "key", h.Key, "hold", h.ID)
		h.Lost()
	}
	return ended || overdue
}

// TrustedUntil returns when the hold's lease stops being trusted (see LeaseTrusted); the zero
// time for a hold that ended or was found lost. Ask it before the last Release ends the hold.
func (h *Hold) TrustedUntil() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return time.Time{}
	}
	return h.deadline.Add(-margin(h.lease))
}

// Releasing reports whether the hold was ended by its last local release, and not found lost
// before: the release to Redis is on its way (or done).
func (h *Hold) Releasing() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.released
}

// Lost ends the hold because Redis no longer has it: every held context of it is cancelled
// with ErrLockLost. The Client's observer hears of it once (EventLeaseLost), also when the
// hold's release found it gone after its last local release.
func (h *Hold) Lost() {
	h.rt.forget(h)
	h.lose(ErrLockLost)
	h.observeEnd(EventLeaseLost, nil, ErrLockLost)
}

// Revoked ends the hold because another call released it in Redis (a leased permit released
// by its id, from any process): every held context of it is cancelled with ErrReleased. The
// Client's observer hears of it as a release (EventReleased).
func (h *Hold) Revoked() {
	h.rt.forget(h)
	h.mu.Lock()
	live := !h.ended
	h.mu.Unlock()
	h.lose(ErrReleased)
	if live {
		h.observeEnd(EventReleased, nil, nil)
	}
}

// Revoke ends this Client's hold of key whose id is id, if it has one, as Revoked does: its
// release in Redis was another call's.
func (rt *Runtime) Revoke(key, id string) {
	rt.holdsMu.Lock()
	h := rt.holds[holdKey{key, id}]
	rt.holdsMu.Unlock()
	if h != nil {
		h.Revoked()
	}
}

func (a *acq) isReleased() bool {
	a.hold.mu.Lock()
	defer a.hold.mu.Unlock()
	return a.released
}

func (h *Hold) isEnded() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ended
}

// lose ends the hold and cancels every live held context of it with cause.
func (h *Hold) lose(cause error) {
	h.mu.Lock()
	h.ended = true
	acqs := h.acqs
	h.acqs = nil
	h.mu.Unlock()
	for _, a := range acqs {
		a.cancel(cause)
	}
}

// forget takes the hold out of the Client's holds. The hold's id stays in use (see
// orphan.go) until Settle when the hold ended by its last local release: the release is on
// its way, and what Redis still holds for the id is not to be given back meanwhile.
func (rt *Runtime) forget(h *Hold) {
	rt.holdsMu.Lock()
	gone := rt.holds[holdKey{h.Key, h.ID}] == h
	if gone {
		delete(rt.holds, holdKey{h.Key, h.ID})
	}
	rt.holdsMu.Unlock()
	if gone && !h.Releasing() {
		h.Settle()
	}
}

// Settle ends the use of the hold's id (see orphan.go): the hold was found lost, or the
// release that ended it returned. Settling twice, or a nil hold, is fine.
func (h *Hold) Settle() {
	if h == nil {
		return
	}
	h.mu.Lock()
	done := h.settled
	h.settled = true
	h.mu.Unlock()
	if !done {
		if n, ok := h.rt.seqOf(h.ID); ok {
			h.rt.use(n, -1)
		}
	}
}

// margin is how long before the local lease deadline a hold stops being trusted: room for a
// late timer and for the client's clock running a little faster than the server's.
func margin(lease time.Duration) time.Duration {
	m := lease / 50
	if m < time.Millisecond {
		m = time.Millisecond
	}
	if m > time.Second {
		m = time.Second
	}
	return m
}
