package core

import (
	"context"
	"time"
)

// Observation.
//
// A Client with an observer (aqs.WithObserver) reports what its calls and holds do, from two
// places only: the acquire engine (internal/acquire), which every blocking call of every
// primitive runs through, reports how each call ended and when it joined a queue; this
// package reports the end of each hold, by its last local release (Acquisition.Release) or by
// being found lost (Hold.Lost). No primitive reports anything itself.
//
// Without an observer, Config.Observe is nil and every report point is one nil check: no clock
// is read, nothing is built, nothing allocates.

// EventKind says what an Event reports; the values are aqs.EventKind's.
type EventKind uint8

// The event kinds (see aqs.EventKind for their contracts).
const (
	EventAcquired EventKind = iota + 1
	EventQueued
	EventGaveUp
	EventFailed
	EventReleased
	EventLeaseLost
)

// Event is what the Client reports to its observer; the fields are aqs.Event's.
type Event struct {
	Kind      EventKind
	Primitive string
	Name      string
	Wait      time.Duration
	Hold      time.Duration
	QueueLen  int
	Err       error
	Context   context.Context
	Reentry   bool
}

// Observing reports whether the Client has an observer.
func (rt *Runtime) Observing() bool { return rt.Cfg.Observe != nil }

// Observe reports e to the Client's observer, if it has one.
func (rt *Runtime) Observe(e Event) {
	if o := rt.Cfg.Observe; o != nil {
		o(e)
	}
}

// holdObs is what a hold of a Client with an observer keeps for its end's event: who it is,
// when it was made, and the context of the call that made it.
type holdObs struct {
	primitive, name string
	at              time.Time
	ctx             context.Context
	lostSeen        bool // its loss was reported: it is reported once
}

// observeEnd reports the end of a hold (EventReleased or EventLeaseLost, once) with its hold
// time, when the Client has an observer and the hold was recorded with one. ctx is the
// releasing call's; nil for the context of the call that made the hold.
func (h *Hold) observeEnd(kind EventKind, ctx context.Context, err error) {
	o := h.rt.Cfg.Observe
	if o == nil {
		return
	}
	h.mu.Lock()
	ob := h.obs
	if ob == nil || kind == EventLeaseLost && ob.lostSeen {
		h.mu.Unlock()
		return
	}
	if kind == EventLeaseLost {
		ob.lostSeen = true
	}
	h.mu.Unlock()
	if ctx == nil {
		ctx = ob.ctx
	}
	o(Event{Kind: kind, Primitive: ob.primitive, Name: ob.name, Hold: time.Since(ob.at), Err: err, Context: ctx})
}

// Unreported keeps the hold's end from being reported: the call that made it reports that it
// did not get it, and gives it back. A nil Hold is fine.
func (h *Hold) Unreported() {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.obs = nil
	h.mu.Unlock()
}
