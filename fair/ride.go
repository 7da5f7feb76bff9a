package fair

import (
	"context"
	"sync"
	"time"
)

// Riding along: joins carried by the holder's release.
//
// A waiter's join is a round trip of its own (fair_acquire.lua), and on a lock contended
// within one process it is half of the lock's cost: each goroutine that releases queues again
// at once, by a script of its own, while the next holder works. But when a goroutine calls
// Lock while a hold of the same Lock (so of its own Client) is held, the next thing that lock
// will do in Redis is that hold's release, a script this Client sends anyway. So the goroutine
// does not send its join: it boards the hold and waits, up to rideWindow, for the release,
// which carries its join (fair_release.lua): the riders join the queue's tail, in the order
// they called Lock, and then the lock is handed to the live head, one of them when nobody else
// waits. One round trip per hand-off instead of two: with 32 goroutines on one lock, 1.25×
// the acquisitions per second of the same lock without riding, measured interleaved
// (bench/cmd/compare, 1 s slices), and about a fifth fewer server instructions per hand-off
// (callgrind: 139k against 176k). Riders that board while a release is on its way wait for
// the next one when that release hands the lock to a waiter of this Client, and are
// dismissed to join on their own at once when it does not.
//
// Order is kept as the package states it: grants follow the order in which joins reached
// Redis, and a rider's join reaches Redis with the release, at most rideWindow after its call
// (had it sent its own, the network would have delayed it too). A rider never passes anyone:
// it joins at the tail before the hand-off. It only rides while a hold of its own Client is
// held, whose release is near on a busy lock; when the release does not come within
// rideWindow (a long hold, a lost hold, a hold that ends by re-entry count), or the release
// fails or cannot carry it (the hold has a count or a fencing token: the script's general
// path), it joins on its own, and that join also finds out whether a failed release had
// queued it or even handed it the lock. A rider whose call ends while it waits to ride leaves
// nothing behind: nothing of it reached Redis; once a release carries it, it waits for that
// release's outcome and gives up as any queued waiter does.

// rideWindow is how long a rider waits for the release that is to carry its join. It is a
// bound on how much later than its call a rider's join reaches Redis. On a contended lock a
// hold is released within a few hundred microseconds (BenchmarkFairContended); a hold that
// lasts longer lets its riders join on their own after this.
const rideWindow = 2 * time.Millisecond

// maxRiders bounds the joins one release carries (its arguments); later riders join on their
// own.
const maxRiders = 64

// rider is one waiter waiting for a release to carry its join.
type rider struct {
	member string    // the queue member: "<hold id> <lease ms>"
	done   chan rode // the carrying release's outcome; buffered
}

// rode is the outcome of a release that carried a rider.
type rode struct {
	joined bool          // the rider is queued (and may have been handed the lock)
	sentAt time.Time     // when the release was sent
	wait   time.Duration // the new holder's lease: how long to wait at most before an attempt
}

// rides is a Lock's riding state.
type rides struct {
	mu       sync.Mutex
	holder   string   // the hold of this Lock that this Client believes held, or ""
	inflight bool     // a release of this Lock's is on its way; it may hand to a local waiter
	riders   []*rider // waiting to be carried, in the order they boarded
}

// heldBy records that hold holds the lock now (acquired, or handed over by a release).
func (l *Lock) heldBy(hold string) {
	l.rides.mu.Lock()
	l.rides.holder = hold
	l.rides.mu.Unlock()
}

// heldHere reports whether a hold of this Lock is held, or a release of one is on its way.
func (l *Lock) heldHere() bool {
	l.rides.mu.Lock()
	defer l.rides.mu.Unlock()
	return l.rides.holder != "" || l.rides.inflight
}

// board makes r a rider, if a hold of this Lock is held now or a release on its way may hand
// the lock to another (whose release will then carry r), and if there is room. It reports
// whether it did.
func (l *Lock) board(r *rider) bool {
	l.rides.mu.Lock()
	defer l.rides.mu.Unlock()
	if (l.rides.holder == "" && !l.rides.inflight) || len(l.rides.riders) >= maxRiders {
		return false
	}
	l.rides.riders = append(l.rides.riders, r)
	return true
}

// alight takes r off the riders waiting to be carried, and reports false when a release
// carries it already or dismissed it (its outcome comes on r.done).
func (l *Lock) alight(r *rider) bool {
	l.rides.mu.Lock()
	defer l.rides.mu.Unlock()
	for i, x := range l.rides.riders {
		if x == r {
			l.rides.riders = append(l.rides.riders[:i], l.rides.riders[i+1:]...)
			return true
		}
	}
	return false
}

// carry is the Lock's excl.Base.Carry: the release that ends a hold takes every waiting rider
// along. Riders that board while it is on its way wait for the next release when this one
// hands the lock to a waiter of this Client, and are dismissed (they join on their own, at
// once) when it does not.
func (l *Lock) carry(at time.Time) ([]any, func(any, error) any) {
	l.rides.mu.Lock()
	rs := l.rides.riders
	l.rides.riders, l.rides.holder, l.rides.inflight = nil, "", true
	l.rides.mu.Unlock()
	var args []any
	if len(rs) > 0 {
		args = make([]any, 0, len(rs)+1)
		args = append(args, l.waiterTimeout.Milliseconds())
		for _, r := range rs {
			args = append(args, r.member)
		}
	}
	return args, func(reply any, err error) any {
		out := rode{sentAt: at}
		if a, ok := reply.([]any); ok && err == nil && len(a) == 2 {
			out.joined = true
			if lease, ok := a[1].(int64); ok {
				out.wait = time.Duration(lease) * time.Millisecond
			}
			reply = int64(0)
			if h, ok := a[0].(string); ok && h != "" {
				reply = h
			}
		}
		for _, r := range rs {
			r.done <- out
		}
		// Riders that boarded meanwhile.
		l.rides.mu.Lock()
		l.rides.inflight = false
		var dismissed []*rider
		if h, ok := reply.(string); ok && err == nil {
			l.rides.holder = h
		} else {
			dismissed, l.rides.riders = l.rides.riders, nil
		}
		l.rides.mu.Unlock()
		for _, r := range dismissed {
			r.done <- rode{}
		}
		return reply
	}
}

// ride waits for a release of this Lock's current hold (or of the next, when the release on
// its way hands the lock to a waiter of this Client) to carry member's join. It reports the
// release's outcome (joined or not: not when no release carried it, and the hold must join
// on its own), and ended when waitCtx or the Client ended before any release carried it:
// nothing of the hold reached Redis then.
func (l *Lock) ride(waitCtx context.Context, member string) (out rode, ended bool) {
	r := &rider{member: member, done: make(chan rode, 1)}
	if !l.board(r) {
		return rode{}, false
	}
	t := time.NewTimer(l.rideWindow)
	defer t.Stop()
	select {
	case out = <-r.done:
		return out, false
	case <-t.C:
	case <-waitCtx.Done():
		ended = true
	case <-l.x.RT.Done():
		ended = true
	}
	if l.alight(r) {
		return rode{}, ended
	}
	// A release carries it: its outcome decides, whatever ended meanwhile (a joined waiter
	// whose call ended gives up as any queued waiter does).
	return <-r.done, false
}
