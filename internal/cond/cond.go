// Package cond is the Condition of a lock's exclusive side (the reentrant and fair locks, the
// read-write lock's write side), AQS's ConditionObject: a second wait queue beside the lock's,
// in the same slot, with the same discipline (internal/scripts/_queue.lua).
//
// A Wait is one call of the acquire engine on the lock's own queue, with rules that differ
// from the lock's at their edges only: the first attempt ends the caller's hold and puts a new
// hold id on the condition in one script; later ones look whether a Signal moved it onto the
// lock's queue (cond_poll.lua), and from then on they are the lock's own attempts, so the lock
// reaches it as any grant does. Its heartbeat keeps it alive on either queue.
package cond

import (
	"context"
	"fmt"
	"time"

	"github.com/redaqs/aqs/internal/acquire"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/layout"
	"github.com/redaqs/aqs/internal/scripts"
)

// Lock is what a lock's exclusive side shares with its Conditions.
type Lock struct {
	RT            *core.Runtime
	Kind, Name    string // the lock's kind ("fair"...) and name, for errors
	Key           string // the key of its exclusive hold
	Keys          []string
	Queue         *acquire.Queue
	WaiterTimeout time.Duration
	Primitive     string // for the Client's observer
	// Signal is the script that moves one ("1") or all ("0") of the condition's waiters onto the
	// lock's queue: KEYS Keys then cq; ARGV one, the waiter timeout ms, the publish command,
	// the Client id; reply {moved, holds granted to waiters of the Client...}.
	Signal *scripts.Script
	// Beat is the heartbeat script of a Wait's waiter, on the condition or on the lock's queue:
	// KEYS Keys then cq; ARGV CondBeatArgs.
	Beat *scripts.Script
}

// Side is a lock's exclusive side, as its Conditions need it: the reentrant and fair locks'
// (internal/excl) and the read-write lock's write side implement it.
type Side interface {
	// CondLock returns what the side shares with its Conditions.
	CondLock() Lock
	// CondMember returns a new exclusive hold's queue member for a lease in ms.
	CondMember(hold, lease string) string
	// CondRules returns the lock's rules of a new exclusive hold of lease ms (a Wait's attempts
	// once signalled, its give-up from the lock's queue, its confirmation).
	CondRules(lease string) acquire.Rules
	// CondHold says how a Wait's new hold of lease holds the lock.
	CondHold(lease time.Duration) *acquire.HoldSpec
	// ReleaseToCond ends hold h and puts member on the condition cq (its list and deadlines),
	// in one script, through the engine's release (acquire.End) as the lock's last release. It
	// reports whether Redis had the hold (nothing changed when it did not).
	ReleaseToCond(ctx context.Context, h *core.Hold, trusted time.Time, cq []string, member string) (bool, error)
	// CondBeatArgs returns the ARGV of a Wait's heartbeat (Lock.Beat).
	CondBeatArgs(hold, lease string) []any
}

// Cond is one condition of a Side.
type Cond struct {
	side Side
	s    Lock
	name string
	cq   []string // its list and deadlines
	keys []string // the Side's keys, then cq
}

// New returns the condition of the given name of s. Any bytes make a valid name, but it must
// not be empty.
func New(side Side, name string) (*Cond, error) {
	s := side.CondLock()
	if name == "" {
		return nil, core.Invalid("%s %q: empty condition name", s.Kind, s.Name)
	}
	cq := layout.ConditionKeys(s.Key, name)
	return &Cond{side: side, s: s, name: name, cq: cq, keys: append(append([]string{}, s.Keys...), cq...)}, nil
}

// Name returns the condition's name.
func (c *Cond) Name() string { return c.name }

// Keys returns the condition's own keys: its waiters' list and their deadlines.
func (c *Cond) Keys() []string { return c.cq }

// Wait gives up the hold of held, whatever its count, waits for a Signal, and takes the lock
// back as a new hold (see the packages' Condition.Wait for the contract).
func (c *Cond) Wait(held context.Context) (context.Context, error) {
	s := &c.s
	if err := s.RT.Check(); err != nil {
		return nil, err
	}
	x := s.RT.Held(held, s.Key)
	if x == nil {
		return nil, fmt.Errorf("%s: wait on condition %q of %q: %w", s.Kind, c.name, s.Name, core.ErrNotOwner)
	}
	base := x.Base()
	if base.Err() != nil {
		return nil, context.Cause(base)
	}
	lease := s.RT.Cfg.WatchdogTimeout
	ms := fmt.Sprint(lease.Milliseconds())
	r := &rules{c: c, x: x, lease: ms, lock: c.side.CondRules(ms)}
	won, _, err := s.Queue.Acquire(base, &acquire.Call{Rules: r, Block: true, Primitive: s.Primitive, Hold: c.side.CondHold(lease)})
	if r.released != nil {
		return nil, r.released
	}
	return won.Held, err
}

// Signal moves the condition's longest waiting live waiter, if any, onto the lock's queue,
// and reports whether there was one.
func (c *Cond) Signal(ctx context.Context) (bool, error) {
	n, err := c.signal(ctx, "1")
	return n > 0, err
}

// SignalAll moves every live waiter of the condition onto the lock's queue, in the order they
// waited, and reports how many.
func (c *Cond) SignalAll(ctx context.Context) (int, error) { return c.signal(ctx, "0") }

func (c *Cond) signal(ctx context.Context, one string) (int, error) {
	s := &c.s
	if err := s.RT.Check(); err != nil {
		return 0, err
	}
	if ctx.Err() != nil {
		return 0, context.Cause(ctx)
	}
	v, err := s.Signal.Run(ctx, s.RT.Pipe, c.keys, one, s.WaiterTimeout.Milliseconds(), s.RT.PublishCommand(), s.RT.ID).Result()
	if err != nil {
		return 0, core.RedisError(s.Key, err)
	}
	r, err := scripts.DecodeSignal(v)
	if err != nil {
		return 0, err
	}
	s.Queue.Tell(r.Mine) // the lock was free and went to a waiter of this Client
	return r.Moved, nil
}

// rules are a Wait's rules.
type rules struct {
	c     *Cond
	x     *core.Acquisition // the hold given up
	lease string            // the new hold's lease, ms
	lock  acquire.Rules

	waited   bool  // the first attempt was made: the hold was given up
	released error // why the hold could not be given up (nothing was queued then)
	moved    bool  // no longer on the condition: on the lock's queue
}

func (r *rules) member(hold string) string { return r.c.side.CondMember(hold, r.lease) }

func (r *rules) Attempt(ctx context.Context, hold string, t acquire.Try) (scripts.Attempt, error) {
	c, s := r.c, &r.c.s
	if !r.waited {
		r.waited = true
		return r.wait(ctx, hold)
	}
	if !r.moved {
		v, err := scripts.CondPoll.Run(ctx, s.RT.Pipe, c.cq, r.member(hold), s.WaiterTimeout.Milliseconds()).Result()
		if err != nil {
			return scripts.Attempt{}, core.RedisError(s.Key, err)
		}
		moved, a, err := scripts.DecodePoll(v)
		if err != nil || !moved {
			return a, err // still on the condition
		}
		r.moved = true
	}
	t.Local = false
	return r.lock.Attempt(ctx, hold, t)
}

// wait gives the hold up and puts hold on the condition, in one script.
func (r *rules) wait(ctx context.Context, hold string) (scripts.Attempt, error) {
	c, s := r.c, &r.c.s
	h := r.x.Hold()
	trusted := h.TrustedUntil()
	fail := func(err error) (scripts.Attempt, error) {
		r.released = fmt.Errorf("%s: wait on condition %q of %q: %w: %w", s.Kind, c.name, s.Name, core.ErrNotOwner, err)
		return scripts.Attempt{}, r.released
	}
	if err := r.x.ReleaseHold(); err != nil {
		s.Queue.Lost(h.ID)
		return fail(err)
	}
	had, err := c.side.ReleaseToCond(ctx, h, trusted, c.cq, r.member(hold))
	switch {
	case core.ReleasedUnseen(err):
		// Its outcome is unknown: the waiter looks (cond_poll.lua), and finds itself on the
		// condition, or not there and then not on the lock's queue either: it starts over
		// as a new waiter of the lock, a spurious wake-up.
	case err != nil:
		r.released = err
		return scripts.Attempt{}, err
	case !had: // the release recorded the hold lost
		return fail(core.ErrLockLost)
	}
	return scripts.Attempt{Status: scripts.Queued, Wait: s.WaiterTimeout / 3}, nil
}

func (r *rules) GiveUp(ctx context.Context, hold string) error {
	c, s := r.c, &r.c.s
	if !r.waited || r.released != nil {
		return nil
	}
	left, err := scripts.CondLeave.RunInt(ctx, s.RT.Pipe, c.cq, r.member(hold))
	if err != nil {
		return core.RedisError(s.Key, err)
	}
	if left == 1 {
		return nil
	}
	return r.lock.GiveUp(ctx, hold)
}

func (r *rules) Beat(hold string) *core.Beat {
	s := &r.c.s
	return &core.Beat{Keys: r.c.keys, Script: s.Beat, Args: r.c.side.CondBeatArgs(hold, r.lease)}
}

func (r *rules) Confirm(ctx context.Context, hold string) error { return r.lock.Confirm(ctx, hold) }
