package acquire

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/redaqs/aqs/internal/core"
)

// Calls to Redis, deadlines and lost replies.
//
// Every round trip a blocking call makes goes through call, which returns shortly after the
// caller's deadline (patience and grace, below) even when the server stalls (see internal/core/deadline.go for when the
// round trip runs on a goroutine of its own). A round trip whose reply did not come, because
// the caller stopped waiting or because the connection failed, may have done anything its
// script can do: taken the lock, queued the hold, been granted permits. Its hold is then given
// up in the background by the Rules' Clear (see clearLater), once the round trip has ended if
// it is still running, and bounded: a hold that cannot be given up ends with its lease, or its
// waiter deadline.

// grace bounds how long a call that ends, at its deadline or because its Client closed, waits
// for its own clean-up (leaving the queue, giving back what was granted in that instant) before
// it returns and leaves the clean-up to the background. Against a healthy server the clean-up
// takes a round trip, so the call returns with nothing left behind.
const grace = 25 * time.Millisecond

// patience bounds how long a call whose context ended while one of its round trips was on its
// way waits for that reply (see call), before its clean-up. Against a healthy server the reply
// is a moment away, even on a loaded machine; against one that stalls it never comes, and the
// call gives up waiting for it sooner than for a clean-up that stalls. So a call returns
// within patience plus grace of its deadline, whatever the server does.
const patience = grace / 2

// settleBound bounds a background clean-up.
const settleBound = 8 * time.Second // below the 10s for which a counting attempt's key of its own lives (sem_acquire.lua)

// errAbandoned reports a round trip the caller stopped waiting for.
var errAbandoned = errors.New("aqs: stopped waiting for redis")

type result[T any] struct {
	v   T
	err error
}

// call runs f, one round trip to Redis, so that the caller returns by ctx's deadline, give or
// take linger. When ctx ends while f is on its way, call waits up to linger more for f's
// outcome and returns it: the round trip may have taken the lock or queued the hold, and a
// caller that has its reply settles that before it returns (it gives the lock back, it leaves
// the queue), where another caller would otherwise find it done, after the call returned, by
// a call that reported failure. A call's own round trips linger for patience; a clean-up's,
// bounded by grace already, do not. When the caller stops waiting for it, call returns
// errAbandoned and runs late with f's outcome once f has returned (in the background, unless
// the Client closes first).
func call[T any](rt *core.Runtime, ctx context.Context, linger time.Duration, f func(context.Context) (T, error),
	late func()) (T, error) {
	if !rt.Detach(ctx) {
		return f(ctx)
	}
	ch := make(chan result[T], 1)
	go func() {
		v, err := f(context.WithoutCancel(ctx))
		ch <- result[T]{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
	}
	if linger > 0 {
		t := time.NewTimer(linger)
		defer t.Stop()
		select {
		case r := <-ch:
			return r.v, r.err
		case <-t.C:
		case <-rt.Done():
		}
	}
	rt.Defer() // f runs on, and what it does outlives the caller's return
	if late != nil {
		rt.Go(func(rctx context.Context) {
			select {
			case <-ch:
				late()
			case <-rctx.Done():
			}
		})
	}
	var zero T
	return zero, errAbandoned
}

// unknown reports whether a round trip that failed with err may have changed something: a
// script that failed half-way leaves what it wrote before the error (Redis does not roll a
// script back), and a reply that never came may have been anything. Only a refused dial
// (nothing reached the server), a replica-sync failure (its undo ran already) and a typed
// refusal of the rules (see Refuse) leave nothing to give up.
func unknown(err error) bool {
	if err == nil || errors.Is(err, core.ErrReplicaSync) {
		return false
	}
	var r *refusal
	if errors.As(err, &r) {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false
	}
	return true
}

// refusal is a typed refusal of a primitive's rules: an attempt whose reply said no, and
// changed nothing (a semaphore whose permits were never set).
type refusal struct{ error }

func (r *refusal) Unwrap() error { return r.error }

// Refuse marks err, an attempt's typed refusal that changed nothing, so that the engine gives
// nothing up for it.
func Refuse(err error) error { return &refusal{err} }

// later runs f in the background with the Client's context bounded by settleBound, trying
// again after a pause while it fails and the bound allows: a clean-up that must happen, but
// need not be waited for. f must be safe to repeat.
func later(rt *core.Runtime, f func(ctx context.Context) error) {
	rt.Defer()
	rt.Go(func(rctx context.Context) {
		ctx, cancel := context.WithTimeout(rctx, settleBound)
		defer cancel()
		for pause := 20 * time.Millisecond; ; pause *= 2 {
			if f(ctx) == nil {
				return
			}
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return
			}
		}
	})
}

// clearLater runs rules.Clear for hold in the background (see later).
func clearLater(rt *core.Runtime, rules Rules, hold string, err error) {
	later(rt, func(ctx context.Context) error { return clearOf(rules, ctx, hold, err) })
}

// now runs f, a clean-up, within grace; when it fails or takes longer, it goes on in the
// background (see later), and now returns.
func now(rt *core.Runtime, parent context.Context, f func(ctx context.Context) error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), grace)
	defer cancel()
	_, err := call(rt, ctx, 0, func(ctx context.Context) (struct{}, error) { return struct{}{}, f(ctx) }, nil)
	if err != nil && err != errAbandoned {
		later(rt, f) // it failed: again, in the background
	}
}

// cause is the error a call that ended reports: ctx's cause when ctx ended (the caller's, not
// the round trip's it cut short), err otherwise.
func cause(ctx context.Context, err error) error {
	if ctx.Err() != nil && (err == nil || errors.Is(err, errAbandoned) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return context.Cause(ctx)
	}
	return err
}
