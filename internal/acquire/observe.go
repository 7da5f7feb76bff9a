package acquire

import (
	"context"
	"errors"
	"time"

	"github.com/redaqs/aqs/internal/core"
)

// What a call reports to the Client's observer (see internal/core/observe.go).
//
// Every call that runs through the engine reports exactly one outcome when it returns, on the
// caller's goroutine: EventAcquired (it holds what it asked for), EventGaveUp (it ended without
// it and without an error of its own: its context ended, its wait bound ran out, or a call
// that may not wait found it taken) or EventFailed (any other error: Redis, a closed Client, a
// refusal). Wait is the time from the call to that outcome. Before it, a call that joins the
// queue in Redis reports EventQueued once, with the queue's length at the join when the
// primitive's attempt script reports it (0 otherwise, and for a join carried by a release of
// its own Client); a waiter that waits within its Client for a hand-off (local.go) is not in
// the queue and reports no join. A re-entry (reenter.go) reports EventAcquired, or
// EventFailed, marked Reentry.

// observed is what a call with an observer notes for its report.
type observed struct {
	start    time.Time
	queued   bool
	queueLen int
}

// joined reports the call's first join of the queue, of length n (0: unknown).
func (a *attempt) joined(n int) {
	o := a.c.obs
	if o == nil || o.queued {
		return
	}
	o.queued, o.queueLen = true, n
	a.q.rt.Observe(core.Event{Kind: core.EventQueued, Primitive: a.c.Primitive, Name: a.q.cfg.Name,
		Wait: time.Since(o.start), QueueLen: n, Context: a.ctx})
}

// observe reports how a call on ctx ended: ok and err are what it returns.
func (q *Queue) observe(ctx context.Context, c *Call, ok bool, err error) {
	e := core.Event{Kind: core.EventFailed, Primitive: c.Primitive, Name: q.cfg.Name,
		Wait: time.Since(c.obs.start), QueueLen: c.obs.queueLen, Err: err, Context: ctx}
	switch {
	case ok:
		e.Kind = core.EventAcquired
	case err == nil || ctx.Err() != nil && errors.Is(err, context.Cause(ctx)):
		e.Kind = core.EventGaveUp
	}
	q.rt.Observe(e)
}
