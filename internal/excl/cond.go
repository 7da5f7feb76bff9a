package excl

import (
	"context"
	"fmt"
	"strings"

	"github.com/redaqs/aqs/internal/acquire"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/layout"
	"github.com/redaqs/aqs/internal/scripts"
)

// Cond is a condition of an exclusive lock: waiters that gave the lock up until a Signal, as
// Java's AbstractQueuedSynchronizer.ConditionObject is. Its queue is a second wait queue in the
// lock's slot (cond_wait.lua); a Signal moves its longest waiter onto the lock's queue inside
// Redis, and the waiter then takes the lock back as any queued waiter of the lock does.
type Cond struct {
	l    *Lock
	name string
	keys []string // the lock's three keys, then the condition's list and deadlines
}

// NewCond returns the condition of the given name of l. Any bytes make a valid name, but it
// must not be empty. Creating a Cond touches no key.
func (l *Lock) NewCond(name string) (*Cond, error) {
	if name == "" {
		return nil, core.Invalid("%s %q: empty condition name", l.cfg.Kind, l.name)
	}
	// ':' and '%' escaped, so that no condition's list is another's deadlines.
	esc := strings.NewReplacer("%", "%25", ":", "%3A").Replace(name)
	cq := l.key + ":w:" + esc
	return &Cond{l: l, name: name, keys: []string{l.keys[0], l.keys[1], l.keys[2], cq, cq + layout.DeadlineSuffix}}, nil
}

// Name returns the condition's name.
func (c *Cond) Name() string { return c.name }

// Keys returns the condition's own keys: its queue list and their deadlines.
func (c *Cond) Keys() []string { return c.keys[3:] }

// Wait gives up the hold of held, whatever its count, waits for a Signal, and takes the lock
// back as a new hold (see the packages' Condition.Wait for the contract).
func (c *Cond) Wait(held context.Context) (context.Context, error) {
	l := c.l
	if err := l.rt.Check(); err != nil {
		return nil, err
	}
	x := l.rt.Held(held, l.key)
	if x == nil {
		return nil, fmt.Errorf("%s: wait on condition %q of %q: %w", l.cfg.Kind, c.name, l.name, core.ErrNotOwner)
	}
	base := x.Base()
	if base.Err() != nil {
		return nil, context.Cause(base)
	}
	lease := l.Lease(core.LockConfig{})
	r := &condRules{c: c, x: x, lock: rules{l: l, lease: fmt.Sprint(lease.Milliseconds())}}
	won, _, err := l.q.Acquire(base, &acquire.Call{
		Rules:     r,
		Block:     true,
		Primitive: l.cfg.Kind,
		Hold: &acquire.HoldSpec{
			Key: l.key, Lease: lease, Watchdog: true, Renew: scripts.LockRenew,
			FetchToken: l.fetchToken, Release: l.Unlock,
		},
	})
	if err != nil && r.released == nil {
		// The hold was not given up: the call failed before its first attempt (a closed
		// Client, a context done).
		return nil, err
	}
	if r.released != nil {
		return nil, r.released
	}
	return won.Held, err
}

// Signal moves the condition's longest waiting waiter, if any, onto the lock's queue. It
// reports whether there was one.
func (c *Cond) Signal(ctx context.Context) (bool, error) {
	n, err := c.signal(ctx, "1")
	return n > 0, err
}

// SignalAll moves every waiter of the condition onto the lock's queue, in the order they
// waited, and reports how many.
func (c *Cond) SignalAll(ctx context.Context) (int, error) {
	return c.signal(ctx, "0")
}

func (c *Cond) signal(ctx context.Context, one string) (int, error) {
	l := c.l
	if err := l.rt.Check(); err != nil {
		return 0, err
	}
	if ctx.Err() != nil {
		return 0, context.Cause(ctx)
	}
	v, err := scripts.CondSignal.Run(ctx, l.rt.Pipe, c.keys, one, l.timeout, l.rt.PublishCommand(), l.rt.ID).Slice()
	if err != nil {
		return 0, core.RedisError(l.key, err)
	}
	if len(v) != 2 {
		return 0, fmt.Errorf("aqs: unexpected signal reply %v", v)
	}
	n, _ := v[0].(int64)
	if hold, _ := v[1].(string); hold != "" {
		// The lock was free and went to a waiter of this Client: tell it.
		l.rt.Hub.Deliver(layout.GrantChannel(l.key, l.rt.ID), hold)
	}
	return int(n), nil
}

// condRules are a Wait's rules: its first attempt gives the hold up and waits on the
// condition (cond_wait.lua); later ones look whether a Signal moved it onto the lock's
// queue, and from then on they are the lock's own.
type condRules struct {
	c    *Cond
	x    *core.Acquisition // the hold given up
	lock rules

	waited   bool  // the first attempt was made: the hold was given up
	released error // why the hold could not be given up (nothing was queued then)
	moved    bool  // no longer on the condition: on the lock's queue
}

func (r *condRules) member(hold string) string { return hold + " " + r.lock.lease }

func (r *condRules) Fast(context.Context, string) (bool, error) { return false, nil }

func (r *condRules) Attempt(ctx context.Context, hold string, t acquire.Try) (scripts.Attempt, error) {
	c, l := r.c, r.c.l
	if !r.waited {
		r.waited = true
		return r.wait(ctx, hold)
	}
	if !r.moved {
		v, err := scripts.CondPoll.Run(ctx, l.rt.Pipe, c.keys[3:], r.member(hold), l.timeout).Result()
		if err != nil {
			return scripts.Attempt{}, core.RedisError(l.key, err)
		}
		if a, ok := v.([]any); !ok || len(a) != 1 || a[0] != int64(0) {
			return scripts.DecodeAttempt(v) // still on the condition: {3, ms}
		}
		r.moved = true
	}
	t.Local = false
	return r.lock.Attempt(ctx, hold, t)
}

// wait gives the hold up and queues hold on the condition, in one script, through the
// engine's release (which settles this Client's other waiters of the lock).
func (r *condRules) wait(ctx context.Context, hold string) (scripts.Attempt, error) {
	c, l := r.c, r.c.l
	h := r.x.Hold()
	trusted := h.TrustedUntil()
	if err := r.x.ReleaseHold(); err != nil {
		l.q.Lost(h.ID)
		r.released = fmt.Errorf("%s: wait on condition %q of %q: %w: %w", l.cfg.Kind, c.name, l.name, core.ErrNotOwner, err)
		return scripts.Attempt{}, r.released
	}
	rel, err := l.q.Release(ctx, h.ID, true, func(ctx context.Context, pick string, over bool, riders []string) (scripts.Release, error) {
		args := make([]any, 0, 7+len(riders))
		args = append(args, h.ID, "1", l.rt.PublishCommand(), l.timeout, pick, flag(over), r.member(hold))
		for _, m := range riders {
			args = append(args, m)
		}
		return core.SendRelease(l.rt, trusted, func() (scripts.Release, error) {
			v, err := scripts.CondWait.RunOnce(ctx, l.rt.Pipe, c.keys, args...).Result()
			if err != nil {
				return scripts.Release{}, core.RedisError(l.key, err)
			}
			return scripts.DecodeRelease(v)
		}, func(r scripts.Release) bool { return r.Kind == scripts.NotHeld })
	})
	switch {
	case core.ReleasedUnseen(err):
		// Its outcome is unknown: the waiter looks (cond_poll.lua), and finds itself on the
		// condition, or not there and then not on the lock's queue either: it starts over
		// as a new waiter of the lock, a spurious wake-up.
	case err != nil:
		r.released = err
		return scripts.Attempt{}, err
	case rel.Kind == scripts.NotHeld:
		h.Lost()
		l.q.Lost(h.ID)
		r.released = fmt.Errorf("%s: wait on condition %q of %q: %w: %w", l.cfg.Kind, c.name, l.name, core.ErrNotOwner, core.ErrLockLost)
		return scripts.Attempt{}, r.released
	}
	return scripts.Attempt{Status: scripts.Queued, Wait: l.cfg.WaiterTimeout / 3}, nil
}

func (r *condRules) GiveUp(ctx context.Context, hold string) error {
	c, l := r.c, r.c.l
	if !r.waited || r.released != nil {
		return nil
	}
	left, err := scripts.CondLeave.Run(ctx, l.rt.Pipe, c.keys[3:], r.member(hold)).Int()
	if err != nil {
		return core.RedisError(l.key, err)
	}
	if left == 1 {
		return nil
	}
	return r.lock.GiveUp(ctx, hold)
}

func (r *condRules) Beat(hold string) *core.Beat {
	l := r.c.l
	return &core.Beat{Keys: r.c.keys, Script: scripts.CondBeat, Args: []any{hold, r.lock.lease, l.timeout}}
}

func (r *condRules) Confirm(ctx context.Context, hold string) error { return r.lock.Confirm(ctx, hold) }

func (r *condRules) Undo(ctx context.Context, hold string) error { return r.GiveUp(ctx, hold) }

func (r *condRules) Clear(ctx context.Context, hold string, _ error) error {
	return r.GiveUp(ctx, hold)
}
