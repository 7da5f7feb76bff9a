package core

import (
	"github.com/redaqs/aqs/internal/layout"

	"context"
	"strconv"
	"strings"
	"time"
)

// Grants to holds nobody waits for.
//
// A failover can bring back what the Client had finished with: the promoted replica holds the
// queue as it was a moment before the master was lost, with entries of calls that went on,
// and ended, on the old master (after a controlled Sentinel failover the old master serves
// for a while longer). Those entries are live for Redis until their liveness deadline, a
// waiter timeout after their last heartbeat: a release hands the lock (the permits) to such
// an entry, and the name stays blocked until that deadline, though every Client involved is
// alive and would answer.
//
// So a Client gives back at once a grant to one of its hold ids that it does not use: a hold
// id is in use from the moment the engine makes it for a call until the call ends, once the
// call holds something until the hold is found lost or its release returns (Hold.Settle), and
// while something else of the Client's still acts for it (UseWhile). Hold ids are never
// reused, so a hold id not in use never will be again, and giving back what Redis granted to
// it takes nothing from anyone: the grant passes on to the next waiter, as a give-up's does.
// The hub finds such grants two ways, and gives them back in the background, bounded by
// orphanBound, with the channel's Orphans (Hub.Wait, Hub.Join):
//
//   - a grant message whose tag no local waiter answers to (see deliver in hub.go);
//   - a look at who holds the primitive (Orphans.Holders), after the hub may have missed
//     messages: when its subscription moved to another server (rehome) or was confirmed again
//     after its connection broke. A failover is both the moment entries of ended calls come
//     back and the moment the Client may not yet listen where their grants are published.
//
// A grant to a hold of a Client that died is not given back: it waits for its deadline.

// Orphans is a primitive's handling of grants to hold ids its Client no longer uses.
type Orphans struct {
	// GiveBack gives back, without the call's own arguments, whatever Redis granted to hold
	// (the lock, a read or write hold, permits): a give-up for a hold id its Client no longer
	// uses. It must be safe to repeat, and change nothing when hold has nothing.
	GiveBack func(ctx context.Context, hold string) error
	// Holders returns the hold ids that hold the primitive, or were granted some of it, now.
	Holders func(ctx context.Context) ([]string, error)
}

// orphanBound bounds the background give-back of a grant to a hold id not in use.
const orphanBound = 5 * time.Second

// NewCallHold returns a fresh hold id for a call of the engine, in use until EndCallHold.
func (rt *Runtime) NewCallHold() string {
	n := rt.seq.Add(1)
	rt.use(n, 1)
	return layout.HoldID(rt.ID, n)
}

// UseWhile keeps hold in use (see above) while f runs in the background, tried again after a
// pause while it fails, for up to bound (and not after Close); the returned channel is closed
// when it ended.
func (rt *Runtime) UseWhile(hold string, bound time.Duration, f func(ctx context.Context) error) <-chan struct{} {
	done := make(chan struct{})
	n, ok := rt.seqOf(hold)
	if !ok {
		close(done)
		return done
	}
	rt.use(n, 1)
	started := rt.Go(func(rctx context.Context) {
		defer close(done)
		defer rt.use(n, -1)
		ctx, cancel := context.WithTimeout(rctx, bound)
		defer cancel()
		for pause := 20 * time.Millisecond; f(ctx) != nil; pause *= 2 {
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return
			}
		}
	})
	if !started { // the Client closed
		rt.use(n, -1)
		close(done)
	}
	return done
}

// EndCallHold ends a call's use of its hold id (it may still be in use by the hold the call
// made).
func (rt *Runtime) EndCallHold(hold string) {
	if n, ok := rt.seqOf(hold); ok {
		rt.use(n, -1)
	}
}

// use adds d to the uses of the hold id with sequence number n.
func (rt *Runtime) use(n uint64, d int) {
	rt.liveMu.Lock()
	defer rt.liveMu.Unlock()
	if rt.live == nil {
		rt.live = map[uint64]int{}
	}
	if c := rt.live[n] + d; c > 0 {
		rt.live[n] = c
	} else {
		delete(rt.live, n)
	}
}

// inUse reports whether hold is one of this Client's hold ids in use.
func (rt *Runtime) inUse(hold string) bool {
	n, ok := rt.seqOf(hold)
	if !ok {
		return true // not this Client's: not for it to give back
	}
	rt.liveMu.Lock()
	defer rt.liveMu.Unlock()
	return rt.live[n] > 0
}

// seqOf returns the sequence number of one of this Client's hold ids.
func (rt *Runtime) seqOf(hold string) (uint64, bool) {
	rest, ok := strings.CutPrefix(hold, rt.ID)
	if !ok || len(rest) < 2 || rest[0] != ':' {
		return 0, false
	}
	n, err := strconv.ParseUint(rest[1:], 10, 64)
	return n, err == nil
}

// giveBack gives back, in the background, a grant to hold when the Client does not use hold
// (see above).
func (h *Hub) giveBack(o *Orphans, channel, hold string) {
	if o == nil || h.rt.inUse(hold) {
		return
	}
	h.rt.Go(func(rctx context.Context) {
		ctx, cancel := context.WithTimeout(rctx, orphanBound)
		defer cancel()
		h.returnGrant(ctx, o, channel, hold)
	})
}

// sweep gives back, in the background, what holders of the primitive of o are hold ids of
// this Client that it does not use (see above).
func (h *Hub) sweep(o *Orphans, channel string) {
	if o == nil || o.Holders == nil {
		return
	}
	h.rt.Go(func(rctx context.Context) {
		ctx, cancel := context.WithTimeout(rctx, orphanBound)
		defer cancel()
		for pause := 20 * time.Millisecond; ; pause *= 2 {
			holds, err := o.Holders(ctx)
			if err == nil {
				for _, hold := range holds {
					if _, ours := h.rt.seqOf(hold); ours && !h.rt.inUse(hold) {
						h.returnGrant(ctx, o, channel, hold)
					}
				}
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

// returnGrant runs o's give-back of hold until it succeeds or ctx ends.
func (h *Hub) returnGrant(ctx context.Context, o *Orphans, channel, hold string) {
	for pause := 20 * time.Millisecond; ; pause *= 2 {
		if h.rt.inUse(hold) {
			return
		}
		err := o.GiveBack(ctx, hold)
		if err == nil {
			h.rt.Logger().Info("aqs: gave back a grant to a hold this Client no longer uses", "channel", channel, "hold", hold)
			return
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			h.rt.Logger().Warn("aqs: could not give back a grant to a hold this Client no longer uses",
				"channel", channel, "hold", hold, "err", err)
			return
		}
	}
}
