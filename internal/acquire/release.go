package acquire

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/scripts"
)

// The release.
//
// A hold ends in the engine as it began there (Java's AQS: release is tryRelease, then the
// next waiter's signal). Every release of a hold, whatever the primitive, goes through End:
// an Unlock's (the reentrant and fair locks, both sides of the read-write lock), a partial
// release (a re-entered hold counted down, some of a leased permit's permits given back), and
// a Condition's wait, which gives the hold up and puts the waiter on the condition in one
// script. The rule set supplies its release script's one send and the decoding of its reply
// (AQS's tryRelease); End does the rest, in this order:
//
//  1. the send, without the caller's cancellation (a release must reach Redis). One that ends
//     the hold goes out once per try (go-redis would run it again after a broken connection,
//     and the second run find the hold gone) under core.SendRelease's lost-reply policy: sent
//     again while its outcome is unknown; a reply that then finds the hold gone, while its
//     lease was trusted, is the earlier send's doing (core.ReleasedUnseen). A release that
//     counts the hold down is idempotent only when the rule set makes it so (Ending.Repeat);
//     otherwise it is sent once, by go-redis;
//  2. for a Queue with local hand-offs (local.go), the pick and the riders of this Client's
//     waiters, and their outcomes;
//  3. the grants the script made to waiters of this Client (Granted), delivered to them
//     through the hub with no message published;
//  4. a reply that found the hold gone (Gone): the hold is recorded lost, for the held
//     context and for this Queue's hand-offs (HoldLost).
//
// Unlock adds the held context's side before it: the innermost acquisition of the context,
// counted down locally (the local count decides which release ends the hold, see
// internal/core/hold.go), and the errors of a release that held nothing. The Observer hears
// of the hold's end from the hold record (EventReleased, EventLeaseLost).

// Ending is one release as a rule set's send sees it.
type Ending struct {
	// Hold is the hold released.
	Hold *core.Hold
	// Last: the release ends the hold; otherwise it counts the hold down.
	Last bool
	// Once: send it through a send that go-redis does not repeat (scripts.Script.RunOnce);
	// End repeats it under its lost-reply policy.
	Once bool
	// Trusted is the hold's TrustedUntil, asked before its last local release.
	Trusted time.Time
	// Pick, Over and Riders are the local hand-off's (see ReleaseFunc): zero for a Queue
	// without one.
	Pick   string
	Over   bool
	Riders []string
}

// detached returns ctx without its cancellation: ctx itself when it has none (a release
// passes its context on detached already, and WithoutCancel allocates).
func detached(ctx context.Context) context.Context {
	if ctx.Done() == nil {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

// Released is what the engine reads of a release's reply.
type Released interface {
	// Gone: the release found the hold gone; nothing changed.
	Gone() bool
	// Granted: hold ids of waiters of this Client that the release granted.
	Granted() []string
}

// Sender is a rule set's release: its script's one send for e, decoded.
type Sender[R Released] func(ctx context.Context, e Ending) (R, error)

// End sends the release of h described above: the one that ends it when last, else one that
// counts it down; repeat says that a count-down may be sent again while its outcome is unknown
// (the rule set made it idempotent). trusted is the hold's TrustedUntil, asked before its last
// local release. It returns the reply, or an error matching core.ReleasedUnseen when a send
// whose reply was lost released the hold (what it did besides is unknown; this Client's
// waiters find their grants by themselves), or the send's error.
func End[R Released](q *Queue, ctx context.Context, h *core.Hold, last, repeat bool, trusted time.Time, send Sender[R]) (R, error) {
	ctx = detached(ctx)
	sendOnce := func(e Ending) (R, error) {
		e.Hold, e.Last, e.Trusted = h, last, trusted
		if !last && !repeat {
			return send(ctx, e)
		}
		e.Once = true
		ends := h // the hold the send ends, whose id stays in use until it returns
		if !last {
			ends = nil
		}
		return core.SendRelease(q.rt, ends, trusted, func() (R, error) { return send(ctx, e) },
			func(r R) bool { return last && r.Gone() })
	}
	var r R
	var err error
	if q.local() {
		_, err = q.Release(ctx, h.ID, last, func(_ context.Context, pick string, over bool, riders []string) (scripts.Release, error) {
			r, err = sendOnce(Ending{Pick: pick, Over: over, Riders: riders})
			// The local hand-off reads the exclusive lock's reply: the only kind of a Queue
			// with local hand-offs.
			rel, _ := any(r).(scripts.Release)
			return rel, err
		})
	} else {
		r, err = sendOnce(Ending{})
	}
	if err != nil {
		return r, err
	}
	q.Tell(r.Granted())
	if r.Gone() {
		q.HoldLost(h)
	}
	return r, nil
}

// Unlock releases the innermost acquisition of key that ctx holds, through send, as End does,
// and returns nil when it did. what names the call in errors. It
// fails with an error matching core.ErrNotOwner, changing nothing, when ctx holds no
// acquisition of key; and with one matching both core.ErrNotOwner and core.ErrLockLost when
// the hold was lost. Either way the acquisition's held context ends.
func Unlock[R Released](q *Queue, ctx context.Context, key string, what Op, send Sender[R]) error {
	if err := q.rt.Check(); err != nil {
		return err
	}
	held := q.rt.Held(ctx, key)
	if held == nil {
		return fmt.Errorf("%s: %w", what, core.ErrNotOwner)
	}
	h := held.Hold()
	trusted := h.TrustedUntil() // asked before Release ends the hold
	last, err := held.Release()
	if err != nil {
		q.Lost(h.ID)
		return fmt.Errorf("%s: %w: %w", what, core.ErrNotOwner, err)
	}
	r, err := End(q, ctx, h, last, false, trusted, send)
	switch {
	case core.ReleasedUnseen(err):
		return nil
	case err != nil:
		return err
	case r.Gone():
		return fmt.Errorf("%s: %w: %w", what, core.ErrNotOwner, core.ErrLockLost)
	}
	return nil
}

// Resend sends a release that no hold stands for (a latch's count-down), which its rule set
// made idempotent, under End's lost-reply policy: sent again while its outcome is unknown,
// without the caller's cancellation.
func Resend[R any](q *Queue, ctx context.Context, send func(ctx context.Context) (R, error)) (R, error) {
	ctx = detached(ctx)
	return core.SendRelease(q.rt, nil, time.Time{}, func() (R, error) { return send(ctx) }, func(R) bool { return false })
}

// HoldLost records that h was found lost: its held contexts end (cause ErrLockLost), and this
// Queue no longer counts it held.
func (q *Queue) HoldLost(h *core.Hold) {
	h.Lost()
	q.Lost(h.ID)
}

// local reports whether the Queue hands the lock on within its Client (see local.go).
func (q *Queue) local() bool { return q.cfg.Streak > 0 || q.cfg.Board > 0 }

// Tell delivers grants that a script made to waiters of this Client, which it did not
// publish, and yields, so that a granted waiter may run before the caller's next call.
func (q *Queue) Tell(mine []string) {
	for _, hold := range mine {
		q.rt.Hub.Deliver(q.cfg.Grants, hold)
	}
	if len(mine) > 0 {
		runtime.Gosched()
	}
}

// Op names a call in its errors: `<Kind>: <Verb> "<Name>"` ("fair: unlock \"invoice:42\"").
// It is formatted only when there is an error to report.
type Op struct{ Kind, Verb, Name string }

func (o Op) String() string { return fmt.Sprintf("%s: %s %q", o.Kind, o.Verb, o.Name) }
