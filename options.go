package aqs

import (
	"time"

	"github.com/redaqs/aqs/internal/core"
)

// LockOption configures one Lock or TryLock call.
type LockOption = core.LockOption

// WithLease gives the hold a fixed lease: it expires d after the acquisition unless released
// before, and the watchdog does not renew it (its held context is cancelled with ErrLockLost
// just before d runs out). On a re-entry it extends the hold's lease to at least d; it never
// shortens it. Without it, a new hold is renewed by the Client's watchdog. d must be positive.
func WithLease(d time.Duration) LockOption {
	return func(o *core.LockConfig) {
		if d <= 0 {
			o.Err = core.Invalid("lease %v is not positive", d)
			return
		}
		o.Lease = d
	}
}

// WithWait bounds how long TryLock waits for the lock. d must be positive; without it TryLock
// makes one attempt and does not wait. Lock rejects it: Lock waits until its context is done.
func WithWait(d time.Duration) LockOption {
	return func(o *core.LockConfig) {
		if d <= 0 {
			o.Err = core.Invalid("wait %v is not positive", d)
			return
		}
		o.Wait = d
	}
}

// WithFencingToken has the acquisition assign the hold's fencing token, so that FencingToken
// answers without a round trip. Without it the token is assigned on the first FencingToken
// call. It costs a slightly heavier acquisition.
func WithFencingToken() LockOption {
	return func(o *core.LockConfig) { o.Token = true }
}
