package model

// Reentrant is the reference model of one reentrant lock (the reentrant/
// package; Redisson's RLock).
//
// At any time the lock is free or held by exactly one owner. The holder may
// acquire it again (re-enter) any number of times and must release it as many
// times, or release it all at once with ReleaseAll, before it is free. A hold
// lasts until it is released or its lease runs out, whichever comes first: at
// now >= the expiry time the hold is gone, exactly as a Redis key whose
// PEXPIRE deadline has passed, and the lock is free for anyone.
//
// Every new hold (an Acquire on a free or expired lock) gets a fencing token
// strictly greater than every token this model issued before, even if an
// earlier hold of the same owner expired or was forced open in between;
// re-entry keeps the token of the hold it re-enters. The model issues 1, 2,
// 3, … in order and never reuses or skips one; a failed operation issues no
// token.
//
// There is no waiting: Acquire is one non-blocking attempt, which is what one
// run of the acquire script does on the server.
//
// Every method takes the current logical time and panics if it is earlier
// than a time already passed to this model. The zero value is a free lock
// that has issued no token and accepts any first time.
type Reentrant struct {
	clock
	owner     string // "" when free
	count     int    // hold count of owner, > 0 while held
	token     int64  // fencing token of the current hold
	expiresAt Time   // the hold is gone at this time
	lastToken int64  // highest token ever issued, 0 before the first
}

// AcquireResult is the reply of Acquire and AcquireExpect.
type AcquireResult struct {
	// Acquired reports whether the caller holds the lock after the call.
	Acquired bool
	// Token is the fencing token of the caller's hold when Acquired, else 0.
	Token int64
	// Count is the caller's hold count after the call when Acquired, else 0.
	Count int
	// Remaining is, when Acquire fails because another owner holds the lock,
	// that holder's remaining lease in milliseconds (always >= 1); else 0.
	Remaining int64
	// Lost is set when AcquireExpect fails: the caller no longer holds the
	// lock with the token it expected. Acquire never sets it.
	Lost bool
}

// expire drops a hold whose lease has run out. Called after every observe, so
// the fields below describe the lock at the current time: lazy expiry gives
// the same replies as Redis's key expiry because time never goes backwards.
func (m *Reentrant) expire() {
	if m.owner != "" && m.now >= m.expiresAt {
		m.free()
	}
}

func (m *Reentrant) free() {
	m.owner, m.count, m.token, m.expiresAt = "", 0, 0, 0
}

// at moves the model to time now and applies expiry.
func (m *Reentrant) at(op string, now Time) {
	m.observe(op, now)
	m.expire()
}

// Acquire makes one attempt by owner to take the lock for lease milliseconds; a re-entry
// extends the lease to at least lease. It is AcquireLease(now, owner, lease, lease).
func (m *Reentrant) Acquire(now Time, owner string, lease int64) AcquireResult {
	return m.AcquireLease(now, owner, lease, lease)
}

// AcquireLease makes one attempt by owner to take the lock.
//
//   - If the lock is free (never held, released, forced open, or its lease
//     has run out), owner gets a new hold: count 1, a new fencing token, and
//     expiry at now+lease.
//   - If owner already holds it, owner re-enters: the count goes up by one,
//     the token stays, and the expiry becomes now+reentryLease if that is
//     later; a re-entry never shortens a lease, and reentryLease 0 leaves
//     the expiry alone.
//   - If another owner holds it, nothing changes and the reply carries that
//     holder's remaining lease, so a waiter knows the longest it may need to
//     wait.
//
// AcquireLease panics if owner is empty, lease is not positive or
// reentryLease is negative.
func (m *Reentrant) AcquireLease(now Time, owner string, lease, reentryLease int64) AcquireResult {
	const op = "Reentrant.Acquire"
	checkOwner(op, owner)
	at := deadline(op, now, lease)
	m.at(op, now)
	switch m.owner {
	case "":
		m.lastToken++
		m.owner, m.count, m.token, m.expiresAt = owner, 1, m.lastToken, at
	case owner:
		m.count++
		m.extend(op, now, reentryLease)
	default:
		return AcquireResult{Remaining: int64(m.expiresAt - now)}
	}
	return AcquireResult{Acquired: true, Token: m.token, Count: m.count}
}

// extend moves the expiry to now+lease if that is later.
func (m *Reentrant) extend(op string, now Time, lease int64) {
	if lease < 0 {
		panic(op + ": negative re-entry lease")
	}
	if lease > 0 {
		if at := deadline(op, now, lease); at > m.expiresAt {
			m.expiresAt = at
		}
	}
}

// AcquireExpect re-enters a hold that owner believes it has with fencing
// token token. It succeeds only if owner holds the lock with exactly that
// token: then, as a re-entry by AcquireLease with reentryLease lease, the
// count goes up by one, the token stays and the expiry is extended to at
// least now+lease (lease 0 leaves it alone).
//
// Otherwise (the lock is free, expired, held by another owner, or held by
// owner under a newer token after its old hold was lost) the reply has Lost
// set and nothing changes. In particular AcquireExpect never starts a new
// hold: a caller whose hold was lost must learn that, not silently continue
// under a new token.
//
// AcquireExpect panics if owner is empty or lease is negative.
func (m *Reentrant) AcquireExpect(now Time, owner string, lease int64, token int64) AcquireResult {
	const op = "Reentrant.AcquireExpect"
	checkOwner(op, owner)
	if lease < 0 {
		panic(op + ": negative lease")
	}
	m.at(op, now)
	if m.owner != owner || m.token != token {
		return AcquireResult{Lost: true}
	}
	m.count++
	m.extend(op, now, lease)
	return AcquireResult{Acquired: true, Token: m.token, Count: m.count}
}

// Release gives up one acquisition by owner and returns owner's remaining
// hold count; 0 means the lock is now free.
//
// A release that leaves the count above zero does not touch the lease: the
// expiry set by the latest Acquire or Renew stands. (Redisson's unlock re-arms
// the lease here; we do not, because extending a lease is the watchdog's job
// and a release should never make a hold last longer.)
//
// If owner does not hold the lock (it is free, owner's hold expired, or
// another owner holds it) Release returns 0 and ErrNotOwner and changes
// nothing.
//
// Release panics if owner is empty.
func (m *Reentrant) Release(now Time, owner string) (int, error) {
	const op = "Reentrant.Release"
	checkOwner(op, owner)
	m.at(op, now)
	if m.owner != owner {
		return 0, ErrNotOwner
	}
	m.count--
	if m.count == 0 {
		m.free()
		return 0, nil
	}
	return m.count, nil
}

// ReleaseAll gives up owner's whole hold, whatever its count, and returns the
// count that was given up. The lock is free afterwards. The real lock uses
// this when the caller's own bookkeeping says this was its last acquisition.
//
// If owner does not hold the lock ReleaseAll returns 0 and ErrNotOwner and
// changes nothing, as Release does.
//
// ReleaseAll panics if owner is empty.
func (m *Reentrant) ReleaseAll(now Time, owner string) (int, error) {
	const op = "Reentrant.ReleaseAll"
	checkOwner(op, owner)
	m.at(op, now)
	if m.owner != owner {
		return 0, ErrNotOwner
	}
	count := m.count
	m.free()
	return count, nil
}

// ForceRelease frees the lock whoever holds it, and reports whether it was
// held (an expired hold does not count). The next hold gets a new token, so a
// holder that was forced out is fenced off.
func (m *Reentrant) ForceRelease(now Time) bool {
	m.at("Reentrant.ForceRelease", now)
	if m.owner == "" {
		return false
	}
	m.free()
	return true
}

// Renew extends owner's hold to expire at now+lease and reports true, if
// owner holds the lock with fencing token token. The count and token do not
// change. A lease of 0 only checks: it reports whether owner holds the lock
// with that token and leaves the expiry alone. A renewal may shorten the
// lease; the latest lease asked for wins.
//
// If owner does not hold the lock with that token (free, expired, another
// owner, or a newer hold of the same owner) Renew reports false and changes
// nothing: a lost hold is never revived.
//
// Renew panics if owner is empty or lease is negative.
func (m *Reentrant) Renew(now Time, owner string, token int64, lease int64) bool {
	const op = "Reentrant.Renew"
	checkOwner(op, owner)
	var at Time
	if lease != 0 {
		at = deadline(op, now, lease)
	}
	m.at(op, now)
	if m.owner != owner || m.token != token {
		return false
	}
	if lease != 0 {
		m.expiresAt = at
	}
	return true
}

// Holder returns the current holder and its hold count; ok is false, with ""
// and 0, when the lock is free.
func (m *Reentrant) Holder(now Time) (owner string, count int, ok bool) {
	m.at("Reentrant.Holder", now)
	return m.owner, m.count, m.owner != ""
}

// HoldCount returns owner's hold count: 0 if owner does not hold the lock.
func (m *Reentrant) HoldCount(now Time, owner string) int {
	m.at("Reentrant.HoldCount", now)
	if owner == "" || m.owner != owner {
		return 0
	}
	return m.count
}

// IsLocked reports whether anyone holds the lock.
func (m *Reentrant) IsLocked(now Time) bool {
	m.at("Reentrant.IsLocked", now)
	return m.owner != ""
}

// RemainingLease returns the milliseconds until the current hold expires
// (always >= 1); ok is false, with 0, when the lock is free.
func (m *Reentrant) RemainingLease(now Time) (ms int64, ok bool) {
	m.at("Reentrant.RemainingLease", now)
	if m.owner == "" {
		return 0, false
	}
	return int64(m.expiresAt - now), true
}

// Token returns the fencing token of the current hold; ok is false, with 0,
// when the lock is free.
func (m *Reentrant) Token(now Time) (token int64, ok bool) {
	m.at("Reentrant.Token", now)
	return m.token, m.owner != ""
}
