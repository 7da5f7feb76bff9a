package reentrant

import (
	"context"

	"github.com/redaqs/aqs/internal/cond"
)

// Condition is a condition of a Lock, as Java's Condition is of a ReentrantLock: goroutines of
// any process that hold the lock wait on it, giving the lock up, until another signals it.
// Create it with Lock.NewCondition; it is safe for concurrent use.
//
// Waiters are signalled in the order they began to wait. A Signal is never lost: Wait gives the
// lock up and joins the condition's waiters in one step in Redis, so a Signal made once the
// lock is free again finds it. As with sync.Cond, a waiter may also wake without a Signal (its
// process lost track of it while it waited, for instance), and the state it waits for may have
// changed again by the time it has the lock back: wait in a loop on the predicate,
//
//	for !ready(held) {
//		if held, err = cond.Wait(held); err != nil {
//			return err
//		}
//	}
type Condition struct {
	c *cond.Cond
}

// NewCondition returns the condition of the given name of l: every Condition of the same lock
// name and condition name, in any process, is the same condition. Any bytes make a valid
// name, but it must not be empty. Creating a Condition touches no key.
func (l *Lock) NewCondition(name string) (*Condition, error) {
	c, err := l.x.NewCond(name)
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

// Wait gives up the hold of held, whatever its count, waits on the condition until a Signal
// (or SignalAll) moves it onto the lock's queue, takes the lock back there, and returns the
// held context of the new hold.
//
// The hold of held ends at once: every held context of it, the outer ones of a re-entry too,
// is done with cause aqs.ErrReleased, and the lock goes on as at an Unlock. The new hold
// counts one acquisition (one Unlock ends it), is renewed by the Client's watchdog, and has a
// held context that is a child of the context the hold of held was first taken with, whose
// deadline and cancellation bound the wait. Java restores the hold count because its thread
// is the owner; in aqs the held contexts are, and those of the old hold cannot be revived, so
// code that re-entered must go on with the returned context only.
//
// On the reentrant lock the new hold waits in the lock's queue like any waiter of another
// Client: it gets no local hand-off.
//
// If held holds nothing, Wait fails with aqs.ErrNotOwner and changes nothing; if its lease
// ran out already, with aqs.ErrLockLost too. If the context ends while it waits, Wait returns
// its cause, leaves the condition and the lock's queue, passes on a lock granted to it in that
// instant, and the lock is not held.
func (c *Condition) Wait(held context.Context) (context.Context, error) { return c.c.Wait(held) }

// Signal moves the condition's longest waiting waiter onto the lock's queue, where it takes
// the lock back in its turn (at once when the lock is free), and reports whether there was
// one. It may be called with the lock held or not.
func (c *Condition) Signal(ctx context.Context) (bool, error) { return c.c.Signal(ctx) }

// SignalAll moves every waiter of the condition onto the lock's queue, in the order they
// waited, and reports how many.
func (c *Condition) SignalAll(ctx context.Context) (int, error) { return c.c.SignalAll(ctx) }
