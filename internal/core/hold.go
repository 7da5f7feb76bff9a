package core

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/redaqs/aqs/internal/scripts"
)

// Holds and held contexts.
//
// A Hold is this process's record of one hold of one lock by one owner: from the acquisition
// that created it in Redis to the release that ended it (or the moment it was found lost). Each
// successful Lock call on it is an acquisition (acq) with its own held context, a child of the
// caller's context that carries the acq as a value. Walking the acq chain from a context gives
// the owner (for re-entry and for nested locks), the innermost token, and the acquisition an
// Unlock should release.
//
// The local count of acquisitions, not the count in Redis, decides which Unlock ends the hold:
// if a re-entry's reply was lost to a network error the count in Redis may be one too high, and
// the last local Unlock still ends the hold (lock_release.lua's "end" flag).

type holdKey struct{ key, owner string }

// Hold is one owner's hold of one lock.
type Hold struct {
	rt       *Runtime
	Key      string
	Owner    string
	Token    int64
	tokenArg string
	renew    *scripts.Script
	watchdog bool // renewed by the watchdog; otherwise a fixed lease, only checked
	lease    time.Duration

	mu       sync.Mutex
	acqs     []*acq
	deadline time.Time // local bound on the lease: the lease is trusted until deadline-margin
	ended    bool
}

type acq struct {
	hold     *Hold
	cancel   context.CancelCauseFunc
	parent   *acq
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
	Owner string
	Token int64
	// Lease is the lease the script set: the watchdog timeout for a watchdog hold, the fixed
	// lease otherwise; 0 for a re-entry that left the expiry alone.
	Lease    time.Duration
	Watchdog bool            // a new hold is renewed by the watchdog
	Renew    *scripts.Script // renewal script: KEYS[1] = Key; ARGV owner, token, lease ms (0 = check)
	SentAt   time.Time       // when the acquiring call was sent: the lease started no earlier
}

// Adopt records a successful acquisition and returns its held context, a child of parent.
// An acquisition with the token of a live local hold re-enters it; any other starts a new hold
// (ending a stale local hold of the same owner and lock, which Redis no longer has).
func (rt *Runtime) Adopt(parent context.Context, g Grant) (context.Context, error) {
	k := holdKey{g.Key, g.Owner}
	rt.holdsMu.Lock()
	h := rt.holds[k]
	if h != nil && (h.Token != g.Token || h.isEnded()) {
		delete(rt.holds, k)
		go h.lose(ErrLockLost)
		h = nil
	}
	if h == nil {
		h = &Hold{rt: rt, Key: g.Key, Owner: g.Owner, Token: g.Token,
			tokenArg: strconv.FormatInt(g.Token, 10),
			renew:    g.Renew, watchdog: g.Watchdog}
		rt.holds[k] = h
	}
	rt.holdsMu.Unlock()

	cctx, cancel := context.WithCancelCause(parent)
	a := &acq{hold: h, cancel: cancel, parent: acqFrom(parent)}
	h.mu.Lock()
	h.acqs = append(h.acqs, a)
	if g.Lease > 0 {
		if d := g.SentAt.Add(g.Lease); d.After(h.deadline) {
			h.deadline = d
		}
		h.lease = max(h.lease, g.Lease)
	}
	due := h.deadline.Add(-margin(h.lease))
	h.mu.Unlock()
	rt.wakeWatchdogBy(due)
	return context.WithValue(cctx, acqKey{}, a), nil
}

// Held returns the caller's innermost unreleased acquisition of key through this runtime, or
// nil when ctx holds no such lock.
func (rt *Runtime) Held(ctx context.Context, key string) *Acquisition {
	for a := acqFrom(ctx); a != nil; a = a.parent {
		if a.hold.rt == rt && a.hold.Key == key && !a.isReleased() {
			return &Acquisition{a}
		}
	}
	return nil
}

// OwnerOf returns the owner carried by ctx for this runtime, if any.
func (rt *Runtime) OwnerOf(ctx context.Context) (string, bool) {
	for a := acqFrom(ctx); a != nil; a = a.parent {
		if a.hold.rt == rt {
			return a.hold.Owner, true
		}
	}
	return "", false
}

// Token returns the fencing token of the innermost unreleased acquisition in ctx.
func Token(ctx context.Context) (int64, bool) {
	for a := acqFrom(ctx); a != nil; a = a.parent {
		if !a.isReleased() {
			return a.hold.Token, true
		}
	}
	return 0, false
}

// TokenOf returns the fencing token of ctx's hold of key through this runtime.
func (rt *Runtime) TokenOf(ctx context.Context, key string) (int64, bool) {
	if a := rt.Held(ctx, key); a != nil {
		return a.a.hold.Token, true
	}
	return 0, false
}

// Acquisition is a handle on one acquisition, for the primitive that releases it.
type Acquisition struct{ a *acq }

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
	}
	h.mu.Unlock()
	x.a.cancel(ErrReleased)
	if last {
		h.rt.forget(h)
	}
	if lost {
		return last, ErrLockLost
	}
	return last, nil
}

// Lost ends the hold because Redis no longer has it: every held context of it is cancelled
// with ErrLockLost.
func (h *Hold) Lost() { h.rt.forget(h); h.lose(ErrLockLost) }

// TokenArg is the token as the scripts store it.
func (h *Hold) TokenArg() string { return h.tokenArg }

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

func (rt *Runtime) forget(h *Hold) {
	rt.holdsMu.Lock()
	if rt.holds[holdKey{h.Key, h.Owner}] == h {
		delete(rt.holds, holdKey{h.Key, h.Owner})
	}
	rt.holdsMu.Unlock()
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
