package core

import "time"

// Local hand-offs (the reentrant lock).
//
// A release by a Client that has local waiters of the same lock can hand the lock straight to
// one of them inside the release script, rather than free it and publish a wakeup that sends
// one waiter of every Client racing to Redis (most of whom fail and wait again). The releaser
// picks the waiter here before it sends the script, and settles the pick once the script's
// outcome is known. While picked, a waiter cannot leave: a waiter that gives up must know
// whether it was handed the lock, to give it back (Leave).

// SetArg makes the waiter one that takes hand-offs; arg is what a release needs to hand it the
// lock (the reentrant lock: its lease in ms). Its tag must be its hold id.
func (w *Waiter) SetArg(arg int64) {
	w.hub.mu.Lock()
	defer w.hub.mu.Unlock()
	w.arg, w.takes = arg, true
}

// Nudge wakes the waiter to check the lock (a waiter that waited for a local release without
// an attempt of its own: see reentrant's boarding). A pending wakeup absorbs it.
func (w *Waiter) Nudge() { w.wake() }

// Pick chooses the longest-registered waiter of channel that takes hand-offs and is not
// picked already, marks it picked by a release sent at time at, and returns it with its tag
// and argument. The caller must Settle it.
func (h *Hub) Pick(channel string, at time.Time) (w *Waiter, tag string, arg int64, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.chans[channel]
	if c == nil || h.closed {
		return nil, "", 0, false
	}
	for _, x := range c.waiters {
		if x.takes && !x.picked && !x.done && !x.tagged {
			x.picked, x.pickedAt, x.maybe = true, at, false
			return x, x.tag, x.arg, true
		}
	}
	return nil, "", 0, false
}

// Settle ends a pick: handed reports that the release handed the lock to the waiter, known
// whether the release's outcome is known at all (a release whose reply was lost may or may not
// have handed it). The waiter is woken either way: to own the lock, or to check.
func (h *Hub) Settle(w *Waiter, handed, known bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w.picked = false
	switch {
	case handed:
		w.tagged = true
	case !known:
		w.maybe = true
	}
	w.wake()
}

// PickedAt returns when the release that picked the waiter last was sent: a lock handed to it
// was handed later, so its lease started after that.
func (w *Waiter) PickedAt() time.Time {
	w.hub.mu.Lock()
	defer w.hub.mu.Unlock()
	return w.pickedAt
}

// Leave unregisters a waiter that leaves without the lock (its context ended, the Client
// closed, an attempt failed). A pick in progress is waited for first, at most maxSettle, so
// that a lock handed to it in that instant is not left held by nobody: Leave reports whether
// the lock was handed to it, or may have been, and the caller must then give it back.
func (w *Waiter) Leave(maxSettle time.Duration) (mayHold bool) {
	h := w.hub
	deadline := time.Now().Add(maxSettle)
	// A wakeup taken while waiting for the settlement may have been a "wake one" meant for a
	// local waiter: it is put back, so that Close passes it on (at worst a spurious check).
	took := false
	defer func() {
		if took {
			w.wake()
		}
		w.Close()
	}()
	for {
		h.mu.Lock()
		if !w.picked {
			mayHold = w.tagged || w.maybe
			h.mu.Unlock()
			return mayHold
		}
		h.mu.Unlock()
		left := time.Until(deadline)
		if left <= 0 {
			return true // never settled: assume the worst
		}
		t := time.NewTimer(left)
		select {
		case <-w.C:
			took = true
		case <-t.C:
		}
		t.Stop()
	}
}
