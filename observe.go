package aqs

import (
	"context"
	"time"

	"github.com/redaqs/aqs/internal/core"
)

// Observer receives the events of a Client's calls and holds (see WithObserver), to turn them
// into metrics, traces or logs; package github.com/redaqs/aqs/otel turns them into
// OpenTelemetry metrics and span events.
//
// Observe is called synchronously: on the goroutine of the call the event is about (Lock,
// TryLock, RLock, Acquire, Unlock and the other releases, FencingToken), or on the Client's
// watchdog goroutine for a lease it finds lost. It must therefore return quickly and never
// block (a slow Observe delays the caller, or the renewal of every hold of the Client), must
// not call back into the Client, and must be safe for concurrent use. The Event is the
// observer's to keep.
type Observer interface {
	Observe(Event)
}

// ObserverFunc is an Observer made of a function.
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// EventKind says what an Event reports.
type EventKind uint8

// The event kinds. Every acquiring call of a primitive (Lock, TryLock, RLock, TryRLock,
// Acquire, TryAcquire) reports exactly one of EventAcquired, EventGaveUp and EventFailed when
// it returns, and EventQueued before that when it joins the queue in Redis; a re-entry of a
// hold its context has already reports EventAcquired or EventFailed, marked Event.Reentry. Every hold (of a lock, a read lock, or a leased permit;
// counting permits have no holder) reports one EventReleased when it ends by its last
// release, or one EventLeaseLost when it is found lost; a hold whose release finds it gone
// (its lease ran out, or it was force-released, before the Client noticed) reports both.
const (
	// EventAcquired: the call got what it asked for. Wait is the time from the call to that
	// moment, QueueLen as for EventQueued when the call joined the queue on its way, else 0.
	EventAcquired EventKind = iota + 1
	// EventQueued: the call joined the primitive's queue in Redis; reported at most once per
	// call. QueueLen is the length of the queue right after the join, the call included (it
	// may count a few entries of waiters that gave up and are not removed yet), as the
	// reentrant and fair locks' acquisition reports it; it is 0 when unknown: for the
	// read-write lock and the semaphores, whose scripts do not report it, and for a waiter
	// whose join was carried by a release of its own Client. Wait is the time from the call
	// to the join. A goroutine waiting for a hand-off within its own Client (the reentrant
	// lock's local waiters) is not in the queue and reports no EventQueued.
	EventQueued
	// EventGaveUp: the call ended without what it asked for and without an error of its own:
	// its context ended (Err is the context's cause), its wait bound (WithWait) ran out, or a
	// call that may not wait found it taken (Err nil). Wait is the time the call took.
	EventGaveUp
	// EventFailed: the call failed with Err (Redis failing, the Client closed, a refusal of
	// the semaphore's such as semaphore.ErrNotSet, a replica-sync failure). Wait is the time
	// the call took.
	EventFailed
	// EventReleased: the last release of a hold ended it; Hold is the time from the
	// acquisition to that release. It is reported before the release's round trip to
	// Redis, whose errors the releasing call returns.
	EventReleased
	// EventLeaseLost: a hold was found lost: its lease ran out or could no longer be trusted
	// (renewals failing), or Redis no longer had it (expired, deleted, force-released). Hold
	// is the time from the acquisition to the discovery; Err is ErrLockLost. Close does not
	// report the holds it gives up.
	EventLeaseLost
)

func (k EventKind) String() string {
	switch k {
	case EventAcquired:
		return "acquired"
	case EventQueued:
		return "queued"
	case EventGaveUp:
		return "gave up"
	case EventFailed:
		return "failed"
	case EventReleased:
		return "released"
	case EventLeaseLost:
		return "lease lost"
	}
	return "unknown"
}

// Event is one report of a Client to its Observer. The fields that do not apply to its Kind
// are zero.
type Event struct {
	Kind EventKind
	// Primitive is the kind of primitive: "reentrant", "fair", "rwlock-read", "rwlock-write",
	// "semaphore" (counting), "leased-semaphore", "latch" (whose Await reports
	// EventAcquired when it finds the count at zero, and holds nothing) or "multilock". Calls
	// of 0 permits report nothing.
	Primitive string
	// Name is the primitive's name, as given to its New; a multi-lock's names, as its Names
	// returns them, joined by ", ".
	Name string
	// Wait is how long the call had waited (EventAcquired, EventQueued, EventGaveUp,
	// EventFailed).
	Wait time.Duration
	// Hold is how long the hold had lasted (EventReleased, EventLeaseLost).
	Hold time.Duration
	// QueueLen is the queue's length at the call's join (EventQueued, EventAcquired,
	// EventGaveUp, EventFailed); 0 when the call did not join, or the length is unknown.
	QueueLen int
	// Err is the error of EventFailed and EventLeaseLost, and the context's cause of an
	// EventGaveUp whose context ended.
	Err error
	// Reentry: the call re-entered a hold that its context has already (EventAcquired, or
	// EventFailed when the hold was found lost): it neither waited nor queued, and Wait is its
	// round trip. The hold's end is reported once, by the release that ends it.
	Reentry bool
	// Context is the context of the call the event is about, for its values (a trace span,
	// say): the acquiring call's for an acquisition's events and for EventLeaseLost; for
	// EventReleased, the context the release found the hold in: the releasing call's (a held
	// context, or one derived from it), or a leased permit's held context. It may be done
	// already.
	Context context.Context
}

// WithObserver has the Client report the events of its calls and holds to o (see Observer
// and EventKind). The default is no observer, which costs the calls nothing.
func WithObserver(o Observer) Option {
	return option(func(c *core.Config) error {
		if o == nil {
			return core.Invalid("nil observer")
		}
		c.Observe = func(e core.Event) {
			o.Observe(Event{Kind: EventKind(e.Kind), Primitive: e.Primitive, Name: e.Name, Wait: e.Wait,
				Hold: e.Hold, QueueLen: e.QueueLen, Err: e.Err, Context: e.Context, Reentry: e.Reentry})
		}
		return nil
	})
}
