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
// The goroutine sleeps until the next renewal or the earliest such deadline, whichever is
// first; after a failed batch it retries three times as often until a batch succeeds.
//
// Renewal is tied to the Client and the hold, never to the caller's context.

func (rt *Runtime) watchdog() {
	defer close(rt.dogDone)
	interval := rt.Cfg.WatchdogTimeout / 3
	nextRenew := time.Now().Add(interval)
	rt.dogNext.Store(nextRenew.UnixNano())
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		select {
		case <-rt.closed:
			return
		case <-rt.dogWake:
		case <-timer.C:
		}
		now := time.Now()
		earliest := rt.expireOverdue(now)
		if !now.Before(nextRenew) {
			next := interval
			if !rt.renewAll(interval) {
				next = interval / 3
			}
			nextRenew = time.Now().Add(next)
			earliest = rt.expireOverdue(time.Now())
		}
		wake := nextRenew
		if !earliest.IsZero() && earliest.Before(wake) {
			wake = earliest
		}
		rt.dogNext.Store(wake.UnixNano())
		timer.Reset(time.Until(wake))
	}
}

// wakeWatchdogBy makes sure the watchdog wakes no later than due.
func (rt *Runtime) wakeWatchdogBy(due time.Time) {
	if due.UnixNano() < rt.dogNext.Load() {
		select {
		case rt.dogWake <- struct{}{}:
		default:
		}
	}
}

// expireOverdue ends every hold whose trusted lease is over and returns the earliest moment at
// which a remaining hold will be.
func (rt *Runtime) expireOverdue(now time.Time) (earliest time.Time) {
	var overdue []*Hold
	rt.holdsMu.Lock()
	for _, h := range rt.holds {
		h.mu.Lock()
		due := h.deadline.Add(-margin(h.lease))
		h.mu.Unlock()
		if !due.After(now) {
			overdue = append(overdue, h)
			continue
		}
		if earliest.IsZero() || due.Before(earliest) {
			earliest = due
		}
	}
	rt.holdsMu.Unlock()
	for _, h := range overdue {
		rt.Logger().Warn("aqs: lease no longer trusted", "key", h.Key, "hold", h.ID)
		h.Lost()
	}
	return earliest
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
	if len(holds) == 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(rt.ctx, timeout)
	defer cancel()
	dogLease := strconv.FormatInt(rt.Cfg.WatchdogTimeout.Milliseconds(), 10)
	queued := make([]*scripts.Queued, len(holds))
	sentAt := time.Now()
	_, _ = rt.Redis.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, h := range holds {
			lease := "0"
			if h.watchdog {
				lease = dogLease
			}
			queued[i] = h.renew.Queue(ctx, p, []string{h.Key}, h.ID, lease)
		}
		return nil
	})
	ok := true
	for i, h := range holds {
		alive, err := queued[i].Retry(ctx, rt.Redis).Int()
		switch {
		case err != nil:
			ok = false
			rt.Logger().Warn("aqs: renewal failed", "key", h.Key, "err", err)
		case alive == 1:
			if h.watchdog {
				h.mu.Lock()
				if d := sentAt.Add(rt.Cfg.WatchdogTimeout); d.After(h.deadline) {
					h.deadline = d
				}
				h.mu.Unlock()
			}
		case !h.isEnded():
			rt.Logger().Warn("aqs: lock lost", "key", h.Key, "hold", h.ID)
			h.Lost()
		}
	}
	return ok
}
