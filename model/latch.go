package model

import "errors"

// ErrLatchNotSet is returned by the latch's CountDown and Await when its count
// is not set: it was never set, or it expired. The model is left unchanged.
var ErrLatchNotSet = errors.New("model: latch count not set")

// ErrLatchCount is returned by TrySetCount for a count below 1. The model is
// left unchanged.
var ErrLatchCount = errors.New("model: latch count below 1")

// Latch is the reference model of one count-down latch (the latch/ package;
// Redisson's RCountDownLatch).
//
// The latch is a count with an expiry, and nothing else: its waiters are not
// recorded, so there is nothing to give up, and no counter owns a share of
// the count.
//
//   - TrySetCount sets the count to n >= 1, only when it is not set or is 0,
//     and starts its expiry over;
//   - CountDown lowers a count above 0 by one and starts its expiry over; the
//     CountDown that makes it 0 reports Opened (the real script publishes one
//     message that wakes every waiter); at 0 it changes nothing;
//   - Await is one attempt of a waiter: Acquired at 0, Queued (or Busy, for a
//     caller that does not wait) above 0 with the time the count has left to
//     live as a hint, ErrLatchNotSet when not set;
//   - Beat is a waiter's heartbeat: BeatGranted at 0, BeatQueued above 0,
//     BeatDropped when not set.
//
// The count expires, as a key with PEXPIRE does, expiry milliseconds after it
// was last set or changed: at that time and after, the latch is not set.
type Latch struct {
	clock
	count  int64
	set    bool
	expire Time
}

// NewLatch returns a latch that is not set.
func NewLatch() *Latch { return &Latch{} }

// live reports whether the count is set at now, forgetting it when it expired.
func (l *Latch) live(now Time) bool {
	if l.set && now >= l.expire {
		l.set, l.count = false, 0
	}
	return l.set
}

// TrySetCount sets the count to n, expiring expiry ms after now, when the
// latch is not set or its count is 0, and reports whether it set it.
func (l *Latch) TrySetCount(now Time, n, expiry int64) (bool, error) {
	l.observe("TrySetCount", now)
	if n < 1 {
		return false, ErrLatchCount
	}
	if l.live(now) && l.count > 0 {
		return false, nil
	}
	l.count, l.set, l.expire = n, true, deadline("TrySetCount", now, expiry)
	return true, nil
}

// CountDown lowers the count by one and starts its expiry (expiry ms) over,
// returning the count after it and whether this CountDown made it 0 (the
// waiters are then woken). A count at 0 stays 0, unchanged.
func (l *Latch) CountDown(now Time, expiry int64) (count int64, opened bool, err error) {
	l.observe("CountDown", now)
	if !l.live(now) {
		return 0, false, ErrLatchNotSet
	}
	if l.count == 0 {
		return 0, false, nil
	}
	l.count--
	l.expire = deadline("CountDown", now, expiry)
	return l.count, l.count == 0, nil
}

// Count returns the count, 0 when not set.
func (l *Latch) Count(now Time) int64 {
	l.observe("Count", now)
	if !l.live(now) {
		return 0
	}
	return l.count
}

// Await is one attempt of a waiter that waits (wait) or not: Acquired when the
// count is 0; Queued (wait) or Busy above 0, with the ms the count has left to
// live (>= 1); ErrLatchNotSet when not set. It changes nothing.
func (l *Latch) Await(now Time, wait bool) (Status, int64, error) {
	l.observe("Await", now)
	switch {
	case !l.live(now):
		return 0, 0, ErrLatchNotSet
	case l.count == 0:
		return Acquired, 0, nil
	case wait:
		return Queued, int64(l.expire - now), nil
	}
	return Busy, int64(l.expire - now), nil
}

// Beat is a waiter's heartbeat. It changes nothing.
func (l *Latch) Beat(now Time) BeatStatus {
	l.observe("Beat", now)
	switch {
	case !l.live(now):
		return BeatDropped
	case l.count == 0:
		return BeatGranted
	}
	return BeatQueued
}
