package acquire

import (
	"context"
	"time"

	"github.com/redaqs/aqs/internal/core"
)

// Making the hold.
//
// What a call took becomes a hold: a record in the Client (internal/core/hold.go) with the
// lease counted from before the round trip that took it, renewed by the watchdog or fixed,
// and a held context, a child of the caller's, that is cancelled when the lease can no longer
// be trusted. A grant (handed over by another call's script) starts with a lease that runs
// only to the waiter's liveness deadline, at least first after since; the watchdog sets the
// hold's own lease before half of that has passed, unless the hold ended. Under the
// replica-sync policy the grantee first confirms the grant with a write of its own and WAIT.
//
// A call whose context ended in the instant it won gives back what it took (x/sync's rule: a
// failed call leaves the semaphore unchanged).

// won makes the hold of what the call took: by its own attempt sent at since (granted false;
// token is the fencing token the attempt assigned, if any), or by a grant whose lease started
// after since and runs at least first (0: the full lease).
func (a *attempt) won(since time.Time, first time.Duration, token int64, granted bool) (Won, bool, error) {
	q, c, hold := a.q, a.c, a.hold
	if a.w != nil {
		q.finish(a.w)
		a.w = nil
	}
	if granted && q.rt.SyncOn() {
		sent := time.Now()
		_, err := call(q.rt, a.ctx, patience, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, c.Rules.Confirm(context.WithoutCancel(ctx), hold)
		}, func() { clearLater(q.rt, c.Rules, hold, nil) })
		if err != nil {
			return Won{}, false, cause(a.ctx, err)
		}
		since, first = sent, 0 // the confirmation renewed the hold's full lease
	}
	spec := c.Hold
	if spec == nil {
		if a.ctx.Err() != nil {
			now(q.rt, a.ctx, func(ctx context.Context) error { return undoOf(c.Rules, ctx, hold) })
			return Won{}, false, context.Cause(a.ctx)
		}
		return Won{Hold: hold}, true, nil
	}
	parent := a.ctx
	if spec.Detached {
		parent = context.WithoutCancel(a.ctx)
	}
	lease := spec.Lease
	if first <= 0 || first > lease {
		first = lease
	}
	g := core.Grant{
		Key: spec.Key, ID: hold, Token: token, Lease: first, Watchdog: spec.Watchdog,
		Renew: spec.Renew, RenewKeys: spec.RenewKeys, FetchToken: spec.FetchToken, SentAt: since,
		Primitive: c.Primitive, Name: q.cfg.Name, Owner: q,
	}
	if first < lease || granted && !q.rt.SyncOn() {
		// A grant's lease started at some moment after since, which may be long before now
		// (the waiter's last round trip that found it queued), and may run only to the
		// waiter's liveness deadline: the hold is renewed to its own lease halfway through
		// what is sure of it, rather than at the watchdog's next round, which may come after
		// it is no longer trusted.
		g.ExtendTo, g.ExtendAt = lease, since.Add(first/2)
	}
	held := q.rt.Adopt(parent, g)
	h := q.rt.HoldOf(held, spec.Key)
	if h != nil {
		if c.Local {
			q.heldBy(hold, h)
		}
	}
	if a.ctx.Err() != nil {
		if h != nil {
			h.Unreported() // the call reports that it gave up: no hold to end
		}
		now(q.rt, a.ctx, func(context.Context) error { return spec.Release(held) })
		return Won{}, false, context.Cause(a.ctx)
	}
	if spec.Token && token == 0 && h != nil {
		if _, err := h.Token(held); err != nil {
			h.Unreported()
			now(q.rt, a.ctx, func(context.Context) error { return spec.Release(held) })
			return Won{}, false, err
		}
	}
	return Won{Hold: hold, Held: held}, true, nil
}
