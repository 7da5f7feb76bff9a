package acquire

import (
	"context"
	"fmt"
	"time"

	"github.com/redaqs/aqs/internal/core"
)

// Reentry is a primitive's re-entry rules: a Lock through a context that holds the primitive
// already takes the same hold again, in one round trip, and never waits.
type Reentry struct {
	// Send runs the re-entry script for hold: it counts the hold up, extends its lease to at
	// least lease (0: leaves it alone), and reports whether Redis still had the hold.
	Send func(ctx context.Context, hold string, lease time.Duration) (bool, error)
	// Grant is the held context's grant: its Key, Renew, RenewKeys and FetchToken (Reenter
	// sets the rest).
	Grant core.Grant
	// Token: the call asked for the hold's fencing token.
	Token bool
	// Primitive names the call in the events of the Client's observer; What in its errors.
	Primitive string
	What      Op
}

// Reenter takes h again for ctx, which holds it, with lease (0: the hold's expiry is left
// alone), and returns the new acquisition's held context. A hold that Redis no longer has is
// recorded lost (see HoldLost), and the call fails with an error matching core.ErrLockLost.
// With an observer on the Client it reports EventAcquired or EventFailed, marked Reentry.
func (q *Queue) Reenter(ctx context.Context, h *core.Hold, lease time.Duration, r Reentry) (context.Context, bool, error) {
	start := time.Now()
	held, err := q.reenter(ctx, h, lease, r)
	if q.rt.Observing() {
		e := core.Event{Kind: core.EventAcquired, Primitive: r.Primitive, Name: q.cfg.Name,
			Wait: time.Since(start), Err: err, Context: ctx, Reentry: true}
		if err != nil {
			e.Kind = core.EventFailed
		}
		q.rt.Observe(e)
	}
	return held, err == nil, err
}

func (q *Queue) reenter(ctx context.Context, h *core.Hold, lease time.Duration, r Reentry) (context.Context, error) {
	sentAt := time.Now()
	ok, err := r.Send(ctx, h.ID, lease)
	if err != nil {
		return nil, err
	}
	if !ok {
		q.HoldLost(h)
		return nil, fmt.Errorf("%s: %w", r.What, core.ErrLockLost)
	}
	g := r.Grant
	g.ID, g.Lease, g.SentAt = h.ID, lease, sentAt
	held := q.rt.Adopt(ctx, g)
	if r.Token {
		if _, err := h.Token(ctx); err != nil {
			return nil, err
		}
	}
	return held, nil
}
