package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/election"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/layout"
	"github.com/redaqs/aqs/semaphore"
)

// holder is what aqs run holds NAME with: the fair lock, a permit of the leased semaphore, or
// the leadership of the election. It is used by one goroutine, acquire first.
type holder interface {
	// acquire takes NAME: it waits until it has it or ctx is done, but no longer than wait
	// unless wait is forever (0: one attempt). It returns the held context, which ends when
	// the hold is lost, or false when NAME was not acquired within wait. It leaves nothing
	// behind when it fails.
	acquire(ctx context.Context, wait time.Duration) (held context.Context, ok bool, err error)
	// vars returns the environment variables that describe the hold to the command.
	vars() ([]string, error)
	// trustedUntil returns when the hold's lease stops being trusted; the zero time once the
	// hold has ended.
	trustedUntil() time.Time
	// release gives NAME up. Its error matches aqs.ErrLockLost when the hold was lost.
	release() error
	// String names what is held, for messages: lock "x".
	String() string
}

// lockHolder holds the fair lock NAME, with a fencing token.
type lockHolder struct {
	rt   *core.Runtime
	l    *fair.Lock
	held context.Context
	hold *core.Hold
}

// newLockHolder returns the holder of the fair lock name. It fails when something other than
// a lock is at name.
func newLockHolder(ctx context.Context, a *admin, c *aqs.Client, name string) (*lockHolder, error) {
	l, err := fair.New(c, name)
	if err != nil {
		return nil, err
	}
	st, err := inspectName(ctx, a.rdb, a.prefix, name)
	switch {
	case isNothing(err):
	case err != nil:
		return nil, err
	case st.Kind != primLock:
		return nil, fmt.Errorf("%s is a %s, not a lock (a leased semaphore's permits: aqs run --permits K)", name, primTitle[st.Kind])
	}
	return &lockHolder{rt: core.RuntimeOf(c), l: l}, nil
}

func (h *lockHolder) acquire(ctx context.Context, wait time.Duration) (context.Context, bool, error) {
	var held context.Context
	ok := true
	var err error
	switch {
	case wait == forever:
		held, err = h.l.Lock(ctx, aqs.WithFencingToken())
	case wait == 0:
		held, ok, err = h.l.TryLock(ctx, aqs.WithFencingToken())
	default:
		held, ok, err = h.l.TryLock(ctx, aqs.WithFencingToken(), aqs.WithWait(wait))
	}
	if err != nil || !ok {
		return nil, false, err
	}
	h.held, h.hold = held, h.rt.HoldOf(held, h.l.Key())
	return held, true, nil
}

func (h *lockHolder) vars() ([]string, error) {
	t, err := h.l.Token(h.held)
	if err != nil {
		return nil, err
	}
	return []string{envToken + "=" + strconv.FormatInt(t, 10)}, nil
}

func (h *lockHolder) trustedUntil() time.Time { return trustedUntil(h.hold) }

func (h *lockHolder) release() error { return h.l.Unlock(h.held) }

func (h *lockHolder) String() string { return fmt.Sprintf("lock %q", h.l.Name()) }

// trustedUntil returns the hold's TrustedUntil, the zero time for no hold.
func trustedUntil(h *core.Hold) time.Time {
	if h == nil {
		return time.Time{}
	}
	return h.TrustedUntil()
}

// permitHolder holds one permit of the leased semaphore NAME.
type permitHolder struct {
	rt   *core.Runtime
	l    *semaphore.Leased
	p    *semaphore.Permit
	hold *core.Hold
}

// newPermitHolder returns the holder of a permit of the leased semaphore name of k permits.
// It sets the size k when none is set, and fails, changing nothing, when another size is set
// or something other than a leased semaphore is at name.
func newPermitHolder(ctx context.Context, a *admin, c *aqs.Client, name string, k int) (*permitHolder, error) {
	// WithSize sets the size again should a restart of Redis have lost it.
	l, err := semaphore.NewLeased(c, name, semaphore.WithSize(k))
	if err != nil {
		return nil, err
	}
	st, err := inspectName(ctx, a.rdb, a.prefix, name)
	if isNothing(err) || err == nil && st.Kind == primLeased && !st.Permits.Set {
		var set bool
		if set, err = l.TrySetPermits(ctx, k); err != nil {
			return nil, err
		}
		if set {
			return &permitHolder{rt: core.RuntimeOf(c), l: l}, nil
		}
		st, err = inspectName(ctx, a.rdb, a.prefix, name) // set by another meanwhile
	}
	switch {
	case err != nil:
		return nil, err
	case st.Kind != primLeased:
		return nil, fmt.Errorf("%s is a %s, not a leased semaphore (a lock: aqs run without --permits)", name, primTitle[st.Kind])
	case st.Permits.Total != int64(k):
		return nil, fmt.Errorf("leased semaphore %q has %d permits, not %d: give --permits %d (aqs run does not resize it)",
			name, st.Permits.Total, k, st.Permits.Total)
	}
	return &permitHolder{rt: core.RuntimeOf(c), l: l}, nil
}

func (h *permitHolder) acquire(ctx context.Context, wait time.Duration) (context.Context, bool, error) {
	var p *semaphore.Permit
	ok := true
	var err error
	switch {
	case wait == forever:
		p, err = h.l.Acquire(ctx, 1)
	case wait == 0:
		p, ok, err = h.l.TryAcquire(ctx, 1)
	default:
		p, ok, err = h.l.TryAcquire(ctx, 1, aqs.WithWait(wait))
	}
	if err != nil || !ok {
		return nil, false, err
	}
	// A permit's hold is kept under the semaphore's key of leased permits.
	h.p, h.hold = p, h.rt.HoldOf(p.Context(), h.l.Key()+layout.PermitsSuffix)
	return p.Context(), true, nil
}

// vars gives the permit's id: permits have no fencing token.
func (h *permitHolder) vars() ([]string, error) { return []string{envPermit + "=" + h.p.ID()}, nil }

func (h *permitHolder) trustedUntil() time.Time { return trustedUntil(h.hold) }

func (h *permitHolder) release() error { return h.l.Release(context.Background(), h.p) }

func (h *permitHolder) String() string {
	return fmt.Sprintf("a permit of leased semaphore %q", h.l.Name())
}

// leaderHolder leads the election NAME, with the leader's fencing token.
type leaderHolder struct {
	rt      *core.Runtime
	e       *election.Election
	value   string
	leading context.Context
	hold    *core.Hold
}

// newLeaderHolder returns the holder of the leadership of the election name, campaigning with
// value. It fails when something other than a lock (an election's lock is the fair lock of
// its name) is at name.
func newLeaderHolder(ctx context.Context, a *admin, c *aqs.Client, name, value string) (*leaderHolder, error) {
	e, err := election.New(c, name)
	if err != nil {
		return nil, err
	}
	st, err := inspectName(ctx, a.rdb, a.prefix, name)
	switch {
	case isNothing(err):
	case err != nil:
		return nil, err
	case st.Kind != primLock:
		return nil, fmt.Errorf("%s is a %s, not an election (a leased semaphore's permits: aqs run --permits K)", name, primTitle[st.Kind])
	}
	return &leaderHolder{rt: core.RuntimeOf(c), e: e, value: value}, nil
}

// acquire campaigns. A campaign always waits its turn in the queue: wait bounds it through
// the context, which bounds the campaign only, never the leadership (see Campaign).
func (h *leaderHolder) acquire(ctx context.Context, wait time.Duration) (context.Context, bool, error) {
	cctx := ctx
	if wait != forever {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	leading, err := h.e.Campaign(cctx, h.value)
	if err != nil {
		if ctx.Err() == nil && cctx.Err() != nil {
			return nil, false, nil // the wait ran out
		}
		return nil, false, err
	}
	h.leading, h.hold = leading, h.rt.HoldOf(leading, h.e.Keys()[0])
	return leading, true, nil
}

func (h *leaderHolder) vars() ([]string, error) {
	t, err := aqs.FencingToken(h.leading)
	if err != nil {
		return nil, err
	}
	return []string{envToken + "=" + strconv.FormatInt(t, 10)}, nil
}

func (h *leaderHolder) trustedUntil() time.Time { return trustedUntil(h.hold) }

func (h *leaderHolder) release() error { return h.e.Resign(h.leading) }

func (h *leaderHolder) String() string {
	return fmt.Sprintf("the leadership of election %q", h.e.Name())
}
