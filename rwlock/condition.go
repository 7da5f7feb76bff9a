package rwlock

import (
	"context"
	"time"

	"github.com/redaqs/aqs/internal/acquire"
	"github.com/redaqs/aqs/internal/cond"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/layout"
	"github.com/redaqs/aqs/internal/scripts"
)

// Condition is a condition of a Lock's write side, as Java's Condition is of a
// ReentrantReadWriteLock's write lock: writers of any process wait on it, giving the write
// side up, until another signals it. Create it with Lock.NewCondition; it is safe for
// concurrent use.
//
// Waiters are signalled in the order they began to wait, and a Signal moves a waiter onto the
// tail of the lock's queue, behind the readers and writers queued already. A Signal is never
// lost: Wait gives the write side up and joins the condition's waiters in one step in Redis.
// As with sync.Cond, a waiter may also wake without a Signal, and the state it waits for may
// have changed again by the time it has the write side back: wait in a loop on the predicate.
type Condition struct {
	c *cond.Cond
}

// NewCondition returns the condition of the given name of l's write side: every Condition of
// the same lock name and condition name, in any process, is the same condition. Any bytes make
// a valid name, but it must not be empty. Creating a Condition touches no key.
func (l *Lock) NewCondition(name string) (*Condition, error) {
	c, err := cond.New(condSide{l}, name)
	if err != nil {
		return nil, err
	}
	return &Condition{c: c}, nil
}

// Name returns the condition's name.
func (c *Condition) Name() string { return c.c.Name() }

// Keys returns the condition's own Redis keys, in the lock's hash slot: its waiters' list and
// their liveness deadlines.
func (c *Condition) Keys() []string { return c.c.Keys() }

// Wait gives up the write hold of held, whatever its count, waits on the condition until a
// Signal (or SignalAll) moves it onto the lock's queue, takes the write side back there, and
// returns the held context of the new write hold.
//
// The write hold of held ends at once: every held context of it, the outer ones of a re-entry
// too, is done with cause aqs.ErrReleased, and the queue is served as at an Unlock (a read
// hold the writer took before, a downgrade, is kept). The new hold counts one acquisition, is
// renewed by the Client's watchdog, and has a held context that is a child of the context the
// write hold of held was first taken with, whose deadline and cancellation bound the wait.
//
// If held holds no write hold, Wait fails with aqs.ErrNotOwner and changes nothing. If the
// context ends while it waits, Wait returns its cause, leaves the condition and the lock's
// queue, passes on what was granted to it in that instant, and the write side is not held.
func (c *Condition) Wait(held context.Context) (context.Context, error) { return c.c.Wait(held) }

// Signal moves the condition's longest waiting waiter onto the tail of the lock's queue, where
// it takes the write side in its turn, and reports whether there was one. It may be called
// with the lock held or not.
func (c *Condition) Signal(ctx context.Context) (bool, error) { return c.c.Signal(ctx) }

// SignalAll moves every waiter of the condition onto the lock's queue, in the order they
// waited, and reports how many.
func (c *Condition) SignalAll(ctx context.Context) (int, error) { return c.c.SignalAll(ctx) }

// condSide is the write side as its conditions see it.
type condSide struct{ l *Lock }

func (s condSide) CondLock() cond.Lock {
	l := s.l
	return cond.Lock{RT: l.rt, Kind: "rwlock", Name: l.name, Key: l.kw, Keys: l.keys, Queue: l.q,
		WaiterTimeout: l.waiterTimeout, Primitive: "rwlock-write", Signal: scripts.RWCondSignal, Beat: scripts.RWCondBeat}
}

func (condSide) CondMember(hold, lease string) string { return layout.WriterMemberOf(hold, lease) }

func (s condSide) CondRules(lease string) acquire.Rules {
	return &rules{l: s.l, lease: lease, mode: "x"}
}

func (s condSide) CondHold(lease time.Duration) *acquire.HoldSpec {
	return s.l.w.Hold(lease, true, false)
}

func (s condSide) CondBeatArgs(hold, lease string) []any {
	return []any{hold, lease, s.l.timeout, s.l.rt.PublishCommand()}
}

func (s condSide) ReleaseToCond(ctx context.Context, h *core.Hold, trusted time.Time, cq []string, member string) (bool, error) {
	return s.l.releaseToCond(ctx, h, trusted, cq, member)
}

// releaseToCond ends write hold h and puts member on the condition cq (rw_cond_wait.lua),
// through the engine's release, as Unlock's last release.
func (l *Lock) releaseToCond(ctx context.Context, h *core.Hold, trusted time.Time, cq []string, member string) (bool, error) {
	keys := append(append([]string{}, l.keys...), cq...)
	return l.w.ReleaseToCond(ctx, h, trusted, func(ctx context.Context, e acquire.Ending) (scripts.Release, error) {
		return l.w.Run(ctx, scripts.RWCondWait, e.Once, keys, h.ID, l.rt.PublishCommand(), member, l.timeout)
	})
}
