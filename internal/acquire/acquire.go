package acquire

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/scripts"
)

// The wait.
//
// A call makes a fresh hold id and, in order:
//
//  1. boards a hold of its own Client, if one is held (see local.go);
//  2. makes its first attempt: for a call that may wait, the rules' fast one when its Client
//     has no waiter of the primitive (nothing suggests contention, and the hub is not
//     subscribed), and a full attempt when that fails, which joins the queue when it cannot
//     take the lock (a call that may not wait makes the full attempt only: the one round
//     trip that can tell it all, a key of another type included);
//  3. when queued: registers with the hub (a first registration subscribes, and then
//     attempts again at once, which finds a grant made before the subscription), and waits
//     for a grant addressed to its hold, a wakeup to look again, a hand-off from a release of
//     its own Client, its heartbeat's news (granted, or dropped as dead: it joins again under
//     a new hold id), or the fallback timer the last reply bounded (the holder's remaining
//     lease: a crashed holder delays a waiter, never strands it);
//  4. ends: won (see hold.go), or gave up (see giveUp).
//
// Heartbeats start only once the waiter has waited a third of the waiter timeout, when the
// first would be due anyway: on a busy lock most waits end long before, and each attempt
// keeps the place alive meanwhile (the timer wakes the waiter for one in time).

// Acquire runs one call: it returns the held outcome, or false with a nil error when a call
// that may not wait (or only Wait long) did not get it, or an error. On failure it leaves
// nothing behind: the hold leaves the queue, and what was granted to it in that instant passes
// on.
//
// With an observer on the Client, the call reports how it ended (see observe).
func (q *Queue) Acquire(ctx context.Context, c *Call) (Won, bool, error) {
	if !q.rt.Observing() {
		return q.acquire(ctx, c)
	}
	c.obs = &observed{start: time.Now()}
	won, ok, err := q.acquire(ctx, c)
	q.observe(ctx, c, ok, err)
	return won, ok, err
}

func (q *Queue) acquire(ctx context.Context, c *Call) (Won, bool, error) {
	if err := q.rt.Check(); err != nil {
		return Won{}, false, err
	}
	if ctx.Err() != nil {
		// context.Cause: a held context that was cancelled because its hold was lost reports
		// aqs.ErrLockLost rather than a bare context.Canceled.
		return Won{}, false, context.Cause(ctx)
	}
	a := &attempt{q: q, c: c, ctx: ctx, waitCtx: ctx, hold: q.rt.NewCallHold()}
	if c.Wait > 0 {
		var cancel context.CancelFunc
		a.waitCtx, cancel = context.WithTimeout(ctx, c.Wait)
		defer cancel()
	}
	return a.run()
}

// attempt is one call in progress.
type attempt struct {
	q            *Queue
	c            *Call
	ctx, waitCtx context.Context
	hold         string

	w        *waiter            // the local waiter, once registered (Call.Local)
	hub      *core.Waiter       // the hub registration
	queuedAt time.Time          // send time of the last round trip that found the hold queued
	joinedAt time.Time          // send time of the first one, for this hold id
	place    *place             // heartbeats, once started
	watch    *core.ReplicaWatch // the replicas' watch while queued under the replica-sync policy
	locals   int                // HeldLocally replies that did not end in a hand-off (see maxLocals)

	// The rounds' state (see run).
	first  bool            // the next attempt is the hold's first: no grant to look for
	r      scripts.Attempt // the last reply
	sentAt time.Time       // when its attempt was sent
	timer  *time.Timer     // the fallback timer, made by the first wait that needs one
}

func (a *attempt) waits() bool { return a.c.Block || a.c.Wait > 0 }

// run is the call: its start, then a round for each reply until the call ends.
func (a *attempt) run() (Won, bool, error) {
	defer a.close()
	defer a.stopTimer()
	a.first = true
	e := a.start()
	for !e.over {
		e = a.round()
	}
	return e.won, e.ok, e.err
}

// end is what a phase of run returns: whether the call is over, and then what run returns.
type end struct {
	over bool
	won  Won
	ok   bool
	err  error
}

func fin(won Won, ok bool, err error) end { return end{true, won, ok, err} }

var goOn = end{} // the call is not over

// start boards a hold of this Client's when one is held (see local.go), and otherwise, or when
// the boarding did not settle the call, makes the call's first attempt.
func (a *attempt) start() end {
	boarded, o, ended := a.board()
	if e, settled := a.alighted(boarded, o, ended); settled {
		return e
	}
	if a.hub == nil && a.waits() {
		a.hub = a.q.hubJoin(a.hold) // free when subscribed
	}
	a.sentAt = time.Now()
	// Nothing of this hold reached Redis before now: a lock or permits it is found to have
	// later (an attempt of its own whose reply was lost, which go-redis sent again) were taken
	// after this.
	if a.queuedAt.IsZero() {
		a.queuedAt = a.sentAt
	}
	// A waiter dismissed by its own Client's release that freed the lock tries the fast way
	// too: the lock is likely free, and a plain SET NX never passes a waiter.
	fast := a.first && a.waits() && (a.hub == nil || boarded && o.free)
	return a.send(a.attemptFirst(fast))
}

// alighted acts on how a boarding ended (see local.go): the call ended (ended), or a release
// of this Client handed it the lock or carried its join, which settles what it does next; or
// it attempts on its own (settled false), after a release whose outcome is unknown as a hold
// that may be queued, or granted, already.
func (a *attempt) alighted(boarded bool, o outcome, ended error) (e end, settled bool) {
	switch {
	case ended != nil:
		return fin(a.ended(ended)), true
	case boarded && o.kind == oHanded:
		return fin(a.won(o.since, o.lease, 0, true)), true
	case boarded && o.kind == oJoined:
		a.carried(o)
		return goOn, true
	case boarded && o.kind == oUnknown:
		// A release may have queued it, or handed it the lock: after it was sent.
		a.first, a.queuedAt = false, o.since
	}
	return goOn, false
}

// carried records that a release of this Client carried the call's join (oJoined): that
// release stands for an attempt that queued it, and the new holder's lease bounds the first
// wait (heartbeats find a lost grant).
func (a *attempt) carried(o outcome) {
	a.sentAt, a.joinedAt = o.since, o.since
	a.r = scripts.Attempt{Status: scripts.Queued, Wait: a.q.rt.Cfg.WatchdogTimeout}
	a.joined(0)
}

// send records the reply of an attempt just made, or ends the call on its error.
func (a *attempt) send(r scripts.Attempt, err error) end {
	if err != nil {
		return fin(a.failed(err))
	}
	a.r = r
	return goOn
}

// round acts on the last reply: the call ends, attempts again, or waits.
func (a *attempt) round() end {
	switch a.r.Status {
	case scripts.Acquired:
		return fin(a.won(a.sentAt, 0, a.r.Token, false))
	case scripts.Granted:
		return fin(a.won(a.since(), a.q.cfg.WaiterTimeout, 0, true))
	case scripts.Busy:
		return end{over: true}
	case scripts.HeldLocally:
		return a.heldLocally()
	case scripts.Dropped:
		// Out of the queue as dead (a stall): join again at the tail, as a new hold.
		a.rejoin()
		a.sentAt = time.Now()
		return a.send(a.attempt(true))
	case scripts.Queued:
		a.queuedAt = a.sentAt
		if a.joinedAt.IsZero() {
			a.joinedAt = a.sentAt
			a.joined(a.r.QueueLen)
		}
	}
	if a.hub == nil {
		return a.subscribe()
	}
	return a.wait()
}

// heldLocally: the lock is held by another hold of this Client; the call waits for that
// hold's release (see local.go), and is not queued.
func (a *attempt) heldLocally() end {
	boarded, o, ended := a.boardHeld()
	if e, settled := a.alighted(boarded, o, ended); settled {
		return e
	}
	a.sentAt = time.Now()
	if a.first {
		return a.send(a.attemptFirst(boarded && o.free))
	}
	return a.send(a.attempt(false))
}

// subscribe registers the queued call with the hub, which subscribes to its grant channel,
// and attempts again at once: a grant may have come before the subscription.
func (a *attempt) subscribe() end {
	var err error
	if a.hub, err = a.q.hubWait(a.waitCtx, a.hold); err != nil {
		if a.waitCtx.Err() != nil {
			err = nil // its context ended, or its wait bound ran out
		}
		return fin(a.giveUp(err))
	}
	a.sentAt = time.Now()
	return a.send(a.attempt(false))
}

// wait sleeps, queued, until something may have changed (see the list at the top of this
// file), and attempts again when that calls for it.
func (a *attempt) wait() end {
	if a.c.Local {
		if a.w == nil {
			a.w = a.newWaiter()
		}
		a.q.queued(a.w)
	}
	wait := a.bound()
	var granted, dropped <-chan struct{}
	if a.place != nil {
		granted, dropped = a.place.granted, a.place.dropped
	}
	var out <-chan outcome
	if a.w != nil {
		out = a.w.out
	}
	if a.watch == nil && !a.q.cfg.WaitOnly {
		a.watch = a.q.rt.WatchReplicas(a.q.cfg.Grants)
	}
	fallback := a.arm(wait)
	again := true
	select {
	case <-a.hub.C:
		if a.hub.Tagged() {
			if !a.q.cfg.Parts {
				return a.tagged()
			}
			// Parts of what it waits for, each granted by a message: once every part the last
			// attempt found missing has come, the call has it all, as a grant (see partsSince);
			// until then it waits on. A part that comes another way comes with a wakeup, its
			// heartbeat's news, or its fallback timer. An attempt that reports no missing
			// parts is attempted again.
			if a.r.Missing == nil {
				break
			}
			if a.hub.TaggedOn(a.r.Missing) {
				return fin(a.won(a.partsSince(), a.q.cfg.WaiterTimeout, 0, true))
			}
			again = a.hub.Looked() // a wakeup to look again may have come in the same signal
		}
		// A wakeup to look again: a reconnect, or a change of the permits.
	case o := <-out:
		switch o.kind {
		case oHanded:
			return fin(a.won(o.since, o.lease, 0, true))
		case oStill, oJoined:
			again = false // still queued; nothing happened
		}
	case <-granted:
		if a.q.cfg.Parts {
			return fin(a.won(a.partsSince(), a.q.cfg.WaiterTimeout, 0, true))
		}
		return fin(a.won(a.since(), a.q.cfg.WaiterTimeout, 0, true))
	case <-dropped:
		a.r = scripts.Attempt{Status: scripts.Dropped}
		a.stopTimer()
		return goOn
	case <-fallback:
	case <-a.watch.Lacking():
		// Nothing can be acquired on this server now (see internal/core/sync_watch.go).
		return fin(a.giveUp(a.watch.Err(a.q.cfg.Key)))
	case <-a.waitCtx.Done():
		return fin(a.giveUp(nil))
	case <-a.q.rt.Done():
		return fin(a.giveUp(core.ErrClosed))
	}
	a.stopTimer()
	if !again {
		return goOn // still queued, with the same fallback bound
	}
	a.sentAt = time.Now()
	return a.send(a.attempt(false))
}

// bound returns how long the queued call may sleep before it attempts again: the last
// reply's bound, or less, until its heartbeats are due (0: no bound). It starts the
// heartbeats once the call has waited a third of the waiter timeout.
func (a *attempt) bound() time.Duration {
	wait := a.r.Wait
	if a.place == nil {
		if beat := a.q.cfg.WaiterTimeout/3 - time.Since(a.joinedAt); beat > 0 {
			if wait <= 0 || beat < wait {
				wait = beat
			}
		} else {
			a.place = a.q.startPlace(a.hold, a.c.Rules.Beat(a.hold))
		}
	}
	return wait
}

// arm sets the fallback timer to wait and returns its channel; nil when wait is no bound.
func (a *attempt) arm(wait time.Duration) <-chan time.Time {
	if wait <= 0 {
		return nil
	}
	if a.timer == nil { // made by the first wait that needs one: most calls never wait
		a.timer = time.NewTimer(max(wait, time.Millisecond))
	} else {
		a.timer.Reset(max(wait, time.Millisecond))
	}
	return a.timer.C
}

func (a *attempt) stopTimer() {
	if a.timer != nil {
		a.timer.Stop() // since Go 1.23 a stopped timer holds no value
	}
}

// tagged: a grant addressed to the call's hold arrived.
func (a *attempt) tagged() end {
	if c, ok := a.c.Rules.(Collector); ok {
		// The grant's record stays in Redis until collected: collected in the background, with
		// the hold id in use until then, so that the record is not taken for a grant to an
		// unused hold id (internal/core/orphan.go).
		hold := a.hold
		c.Collecting(a.q.rt.UseWhile(hold, a.q.cfg.WaiterTimeout,
			func(ctx context.Context) error { return c.Collect(ctx, hold) }))
	}
	return fin(a.won(a.since(), a.q.cfg.WaiterTimeout, 0, true))
}

// attempt makes one full attempt through call.
func (a *attempt) attempt(first bool) (scripts.Attempt, error) {
	if err := a.lacking(); err != nil {
		return scripts.Attempt{}, err
	}
	hold := a.hold
	if a.q.cfg.Parts && a.hub != nil {
		// The parts granted from now on are counted for the next wait; those granted before
		// are what this attempt finds.
		a.hub.SetTag(hold)
	}
	t := Try{First: first, Join: a.waits()}
	t.Local = first && t.Join && a.c.Local && a.q.cfg.Streak > 0 && a.q.cfg.Board > 0 &&
		a.locals < maxLocals
	counted := a.q.attempting(first && a.c.Local)
	r, err := call(a.q.rt, a.ctx, patience, func(ctx context.Context) (scripts.Attempt, error) {
		r, err := a.c.Rules.Attempt(ctx, hold, t)
		a.q.Tell(r.Mine) // told even when the call stopped waiting for this reply
		return r, err
	}, func() { clearLater(a.q.rt, a.c.Rules, hold, nil) })
	if err == nil && (r.Status == scripts.Acquired || r.Status == scripts.Granted) {
		a.q.attempted(counted, hold)
	} else {
		a.q.attempted(counted, "")
	}
	return r, err
}

// attemptFirst makes a hold's first attempt: the rules' fast one when fast, and a full one
// when that fails (an Acquired status with no token: the fast one took it).
func (a *attempt) attemptFirst(fast bool) (scripts.Attempt, error) {
	if fast {
		if err := a.lacking(); err != nil {
			return scripts.Attempt{}, err
		}
		ok, err := callFast(a, a.c.Rules)
		switch {
		case err != nil:
			return scripts.Attempt{}, err
		case ok:
			return scripts.Attempt{Status: scripts.Acquired}, nil
		}
	}
	return a.attempt(true)
}

// lacking returns the error of a call that must not attempt because the replicas lack (see
// internal/core/sync_watch.go): the replica-sync policy's WAIT after an earlier round trip of
// this Client on the server, this call's own among them, found too few.
func (a *attempt) lacking() error {
	if a.q.cfg.WaitOnly {
		return nil
	}
	return a.q.rt.ReplicasLack(a.q.cfg.Grants, a.q.cfg.Key, !a.joinedAt.IsZero())
}

// callFast makes the fast attempt through call.
func callFast(a *attempt, rules Rules) (bool, error) {
	hold := a.hold
	counted := a.q.attempting(a.c.Local)
	var ok bool
	var err error
	if a.q.rt.Detach(a.ctx) {
		ok, err = call(a.q.rt, a.ctx, patience, func(ctx context.Context) (bool, error) {
			return fastOf(rules, ctx, hold)
		}, func() { clearLater(a.q.rt, rules, hold, nil) })
	} else {
		ok, err = fastOf(rules, a.ctx, hold) // as call does it, without making its closures
	}
	if err == nil && ok {
		a.q.attempted(counted, hold)
	} else {
		a.q.attempted(counted, "")
	}
	return ok, err
}

// partsSince is since for a hold whose parts were granted one by one (Config.Parts): each
// part's lease runs to the hold's liveness deadline, which only its join and its heartbeats
// renew, not its later attempts.
func (a *attempt) partsSince() time.Time {
	if a.place != nil {
		if s := a.place.since(); s.After(a.joinedAt) {
			return s
		}
	}
	return a.joinedAt
}

// since is when the lease of a grant to the hold started at the earliest: after the last
// round trip that found it queued, or after the last heartbeat that did.
func (a *attempt) since() time.Time {
	if a.place != nil {
		if s := a.place.since(); s.After(a.queuedAt) {
			return s
		}
	}
	return a.queuedAt
}

// newWaiter returns the call's local waiter.
func (a *attempt) newWaiter() *waiter {
	return &waiter{hold: a.hold, member: a.c.Member(a.hold), rules: a.c.Rules, out: make(chan outcome, 1)}
}

// board boards a hold of this Client when the call may (see local.go), and waits for the
// release's outcome. ended is set (to the reason) when the call ended before anything of it
// reached Redis.
func (a *attempt) board() (boarded bool, o outcome, ended error) {
	q := a.q
	if !a.c.Local || q.cfg.Board <= 0 || !a.waits() {
		return false, outcome{}, nil
	}
	q.mu.Lock()
	ok := q.boardable(a.c.Block)
	q.mu.Unlock()
	if !ok {
		return false, outcome{}, nil
	}
	return a.boardNow()
}

// boardHeld boards a hold of this Client after an attempt found the lock held by one
// (HeldLocally), when this Queue knows of one (see boardable), and waits for the release's
// outcome as board does. Not boarded, the call attempts again; after maxLocals such replies
// it joins the queue as any waiter (the hold is then one of another Queue of the same name, a
// value's with other options, whose releases this Queue never sees).
func (a *attempt) boardHeld() (boarded bool, o outcome, ended error) {
	a.locals++
	return a.boardNow()
}

// boardNow boards, if a hold of this Client is still there to board on, and rides.
func (a *attempt) boardNow() (boarded bool, o outcome, ended error) {
	q := a.q
	if a.hub == nil {
		// The first boarder of this Client subscribes first (as the first attempt would once
		// queued), so that a grant after the release finds it.
		hub, err := q.hubWait(a.waitCtx, a.hold)
		if err != nil {
			return false, outcome{}, err
		}
		a.hub = hub
	}
	if a.w == nil {
		a.w = a.newWaiter()
	}
	if !q.board(a.w, a.c.Block) {
		return false, outcome{}, nil
	}
	return a.ride()
}

// ride waits, boarded, for the outcome of a release of this Client.
func (a *attempt) ride() (boarded bool, o outcome, ended error) {
	q := a.q
	// It waits for a release's outcome until its window runs out or its call ends; then it
	// alights, unless a release on its way decides about it: that outcome decides, whatever
	// ended meanwhile (a joined waiter whose call ended gives up as any queued waiter does).
	// That wait is bounded by grace once the call ended, so that it returns by its deadline;
	// beyond, the release gives up what it gave this waiter. A release that hands the lock to
	// another waiter of this Client leaves it boarded (oStill): its window and its context
	// still count.
	window := time.NewTimer(q.cfg.Board)
	defer window.Stop()
	over, done, closed := window.C, a.waitCtx.Done(), q.rt.Done()
	var bound <-chan time.Time
	for {
		if over == nil || ended != nil {
			if q.unboard(a.w) {
				return true, outcome{kind: oDismissed}, ended
			}
			if ended != nil && bound == nil {
				b := time.NewTimer(grace)
				defer b.Stop()
				bound = b.C
			}
		}
		select {
		case o = <-a.w.out:
			if o.kind == oStill {
				continue
			}
			return true, o, nil
		case <-over:
			if q.cfg.Stay && q.stillHeld(a.c.Block) {
				window.Reset(q.cfg.Board)
				continue
			}
			over = nil
			a.locals = maxLocals // no release came: the hold is not this Queue's to see
		case <-done:
			done, ended = nil, a.waitCtx.Err()
		case <-closed:
			closed, ended = nil, core.ErrClosed
		case <-bound:
			if !q.orphan(a.w) {
				bound = nil // decided meanwhile: its outcome is on its way
				if o = <-a.w.out; o.kind != oStill {
					return true, o, nil
				}
				continue
			}
			a.w = nil
			return true, outcome{}, ended
		}
	}
}

// rejoin starts the hold over under a new hold id, at the queue's tail.
func (a *attempt) rejoin() {
	a.q.rt.EndCallHold(a.hold)
	a.hold = a.q.rt.NewCallHold()
	if a.hub != nil {
		a.hub.SetTag(a.hold)
	}
	a.joinedAt = time.Time{}
	a.place.stop()
	a.place = nil
	if a.w != nil {
		a.q.alight(a.w)
		a.w = a.newWaiter()
	}
}

// close unregisters the call's waiter from the hub and the Queue, and stops its heartbeats.
func (a *attempt) close() {
	defer a.q.rt.EndCallHold(a.hold)
	a.place.stop()
	a.watch.Stop()
	if a.hub != nil {
		a.hub.Close()
	}
	if a.w != nil {
		a.q.alight(a.w)
	}
}

// ended is the outcome of a call that ended before anything of it reached Redis: its
// context's cause, no error when only its wait bound ran out, or err.
func (a *attempt) ended(err error) (Won, bool, error) {
	switch {
	case a.ctx.Err() != nil:
		return Won{}, false, context.Cause(a.ctx)
	case a.waitCtx.Err() != nil:
		return Won{}, false, nil
	}
	return Won{}, false, err
}

// failed ends a call whose round trip failed. What the round trip did may be unknown, and
// the hold may be queued from an earlier round trip: it is cleared (see Rules.Clear) before
// the call returns, within grace, and in the background beyond. An abandoned round trip is
// cleared once it ends (see call); one known to have done nothing, by a hold never queued,
// needs nothing.
func (a *attempt) failed(err error) (Won, bool, error) {
	// Its local waiter leaves first, as in giveUp, so that no release of this Client hands
	// the lock to a hold that is giving up; one on its way that decides about it gives up
	// what it gives it.
	if a.w != nil {
		for !a.q.alight(a.w) && !a.q.orphan(a.w) {
			// Decided between the two looks: look again.
		}
		a.w = nil
	}
	if err != errAbandoned && (unknown(err) || !a.joinedAt.IsZero()) {
		hold, rules := a.hold, a.c.Rules
		now(a.q.rt, a.ctx, func(ctx context.Context) error { return clearOf(rules, ctx, hold, err) })
	}
	out := cause(a.ctx, err)
	if closed := a.q.rt.Check(); closed != nil && a.ctx.Err() == nil && !errors.Is(out, closed) {
		// The Client was closed while the round trip was on its way (which then failed, its
		// go-redis client closed too, say): the call ends as every call after Close does.
		out = fmt.Errorf("%w: %w", closed, out)
	}
	return Won{}, false, out
}

// giveUp ends a queued call without the lock: its hold leaves the queue, passing on what was
// granted to it in that instant, within grace (beyond, in the background). err is what ended
// it: nil for its context or its wait bound.
func (a *attempt) giveUp(err error) (Won, bool, error) {
	a.place.stop()
	a.place = nil
	if a.w != nil && !a.q.alight(a.w) {
		// A release of this Client decides about it: wait for the outcome, briefly. Handed
		// the lock in that instant, it gives it back below, as any grant; picked or not, it
		// leaves the local waiters before it leaves the queue, so that no later release can
		// hand the lock to it once it has gone.
		t := time.NewTimer(grace)
		defer t.Stop()
	wait:
		for {
			select {
			case o := <-a.w.out:
				if o.kind == oHanded {
					a.w = nil
					break wait
				}
				if a.q.alight(a.w) {
					break wait
				}
			case <-t.C:
				if a.q.orphan(a.w) {
					a.w = nil // that release gives up what it gives this waiter
					return a.gaveUp(err)
				}
				// Decided meanwhile: its outcome is on its way.
			}
		}
	}
	hold := a.hold
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), grace)
	defer cancel()
	_, gerr := call(a.q.rt, ctx, 0, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, a.c.Rules.GiveUp(ctx, hold)
	}, nil)
	if gerr != nil {
		// Not given up in time, or not at all: in the background, bounded (it is safe to
		// repeat).
		clearLater(a.q.rt, a.c.Rules, hold, gerr)
	}
	if err == nil && a.ctx.Err() == nil && gerr != nil && !unknown(gerr) {
		err = gerr
	}
	return a.gaveUp(err)
}

// gaveUp is the outcome of a call that gave up: err, its context's cause, or no error when
// only its wait bound ran out.
func (a *attempt) gaveUp(err error) (Won, bool, error) {
	if err != nil {
		return Won{}, false, err
	}
	return a.ended(nil)
}
