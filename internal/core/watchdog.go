package core

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/internal/scripts"
)

// The watchdog.
//
// One goroutine per Client keeps every hold honest. Every third of the watchdog timeout it
// sends one pipeline with a renewal call per hold (go-redis splits a pipeline by node on Redis
// Cluster, so a batch costs one round trip per master, not per lock): watchdog holds are
// extended to the full timeout, fixed-lease holds are only checked. A renewal names the hold's
// id, fresh for every hold, so a renewal that crosses an Unlock can never extend a later hold,
// and a hold ended by Unlock before the reply arrives is simply forgotten.
//
// A hold stops being trusted, and its held contexts are cancelled with ErrLockLost, when
//   - a renewal or check finds it gone (deleted, expired, taken by another owner), or
//   - its local deadline minus a safety margin passes: the local deadline is the send time of
//     the last successful acquisition or renewal plus the lease, a lower bound on the server's
//     expiry. This covers renewals that keep failing and fixed leases that simply run out.
// A renewal that answers 2 found the hold released by another call (a leased permit released by
// its id): its held contexts are cancelled with ErrReleased instead.
// The goroutine sleeps until the next renewal or the earliest such deadline, whichever is
// first; after a failed batch it retries three times as often until a batch succeeds.
//
// Renewal is tied to the Client and the hold, never to the caller's context.

func (rt *Runtime) watchdog() {
	defer close(rt.dogDone)
	interval := rt.Cfg.WatchdogTimeout / 3
	nextRenew := time.Now().Add(interval)
	timer := time.NewTimer(time.Until(rt.expireOverdue(time.Now(), nextRenew)))
	defer timer.Stop()
	for {
		select {
		case <-rt.closed:
			return
		case <-rt.dogWake:
		case <-timer.C:
		}
		if !time.Now().Before(nextRenew) {
			next := interval
			if !rt.renewAll(interval) {
				next = interval / 3
			}
			nextRenew = time.Now().Add(next)
		}
		wake := rt.expireOverdue(time.Now(), nextRenew)
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(time.Until(wake))
	}
}

// wakeWatchdogBy makes sure the watchdog wakes no later than due. It must be called after the
// hold is in rt.holds with its deadline set: the watchdog stores its next wake-up (dogNext) in
// the same critical section in which it scans the holds, so either that scan saw the hold, or
// dogNext was stored before the hold arrived and this comparison sees it.
func (rt *Runtime) wakeWatchdogBy(due time.Time) {
	if due.UnixNano() < rt.dogNext.Load() {
		select {
		case rt.dogWake <- struct{}{}:
		default:
		}
	}
}

// expireOverdue ends every hold whose trusted lease is over, extends the granted holds whose
// extension is due (see Grant.ExtendTo), and returns when the watchdog must wake next: at
// nextRenew, or earlier for a hold that needs it. It stores that moment in dogNext while it
// holds holdsMu (see wakeWatchdogBy).
func (rt *Runtime) expireOverdue(now, nextRenew time.Time) time.Time {
	var overdue, extend []*Hold
	wake := nextRenew
	rt.holdsMu.Lock()
	for _, h := range rt.holds {
		h.mu.Lock()
		due := h.deadline.Add(-margin(h.lease))
		extending := h.extendTo > 0 && h.extendAt.Before(due)
		if extending {
			due = h.extendAt
		}
		h.mu.Unlock()
		switch {
		case due.After(now):
			if due.Before(wake) {
				wake = due
			}
		case extending:
			extend = append(extend, h)
		default:
			overdue = append(overdue, h)
		}
	}
	if len(extend) > 0 {
		wake = now // look again once the extended holds have new deadlines
	}
	rt.dogNext.Store(wake.UnixNano())
	rt.holdsMu.Unlock()
	for _, h := range overdue {
		rt.Logger().Warn("aqs: lease no longer trusted", "key", h.Key, "hold", h.ID)
		h.Lost()
	}
	if len(extend) > 0 {
		rt.renew(extend, rt.Cfg.WatchdogTimeout/3)
	}
	return wake
}

// renewAll renews or checks every hold in one pipeline and reports whether every call got an
// answer.
func (rt *Runtime) renewAll(timeout time.Duration) bool {
	rt.holdsMu.Lock()
	holds := make([]*Hold, 0, len(rt.holds))
	for _, h := range rt.holds {
		holds = append(holds, h)
	}
	rt.holdsMu.Unlock()
	return rt.renew(holds, timeout)
}

// renew renews, extends or checks the given holds in one pipeline: a hold due for an
// extension gets its own lease, a watchdog hold the watchdog timeout, a fixed-lease hold only a
// check. It reports whether every call got an answer.
func (rt *Runtime) renew(holds []*Hold, timeout time.Duration) bool {
	if len(holds) == 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(rt.ctx, timeout)
	defer cancel()
	leases := make([]time.Duration, len(holds))
	for i, h := range holds {
		h.mu.Lock()
		switch {
		case h.extendTo > 0:
			leases[i] = h.extendTo
		case h.watchdog:
			leases[i] = rt.Cfg.WatchdogTimeout
		}
		h.mu.Unlock()
	}
	queued := make([]*scripts.Call, len(holds))
	sentAt := time.Now()
	_, err := rt.Redis.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, h := range holds {
			queued[i] = h.renew.Queue(ctx, p, h.keys, h.ID, strconv.FormatInt(leases[i].Milliseconds(), 10))
		}
		return nil
	})
	rt.Pipe.reroute(err)
	ok := true
	for i, h := range holds {
		alive, err := queued[i].Retry(ctx, rt.Redis).Int()
		switch {
		case err != nil:
			ok = false
			rt.Logger().Warn("aqs: renewal failed", "key", h.Key, "err", err)
			h.mu.Lock()
			if h.extendTo > 0 {
				h.extendAt = time.Now().Add(timeout / 3) // retry later, not in a loop
			}
			h.mu.Unlock()
		case alive == 1:
			if leases[i] > 0 {
				h.mu.Lock()
				if d := sentAt.Add(leases[i]); d.After(h.deadline) {
					h.deadline = d
				}
				h.lease = max(h.lease, leases[i])
				h.extendTo = 0
				h.mu.Unlock()
			}
		case alive == 2 && !h.isEnded():
			h.Revoked() // released by another call (a leased permit released by its id)
		case !h.isEnded():
			rt.Logger().Warn("aqs: lock lost", "key", h.Key, "hold", h.ID)
			h.Lost()
		}
	}
	return ok
}
