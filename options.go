package aqs

import (
	"time"

	"github.com/redaqs/aqs/internal/core"
)

// LockOption is an option of a call that waits until its context is done: Lock of the
// reentrant and fair locks, and the write side's Lock of the read-write lock. LeaseOption and
// TokenOption implement it; no type outside this package can.
type LockOption interface {
	lockOption()
}

// TryLockOption is an option of TryLock (of the reentrant and fair locks, and of the
// read-write lock's write side). LeaseOption, TokenOption and WaitOption implement it; no type
// outside this package can.
type TryLockOption interface {
	tryLockOption()
}

// TryOption is an option of the read-write lock's TryRLock and of the leased semaphore's
// TryAcquire, which take a lease and a wait bound but have no fencing token. LeaseOption and
// WaitOption implement it; no type outside this package can.
type TryOption interface {
	tryOption()
}

// LeaseOption sets the lease of a hold or a permit. Make it with WithLease: its zero value
// is an invalid argument.
type LeaseOption struct{ d time.Duration }

// WithLease gives the hold (or the permit) a fixed lease: it expires d after the acquisition
// unless released before, and the watchdog does not renew it (its held context is cancelled
// with ErrLockLost just before d runs out). On a re-entry it extends the hold's lease to at
// least d; it never shortens it. d must be positive. The default, without it, is a lease of
// the Client's watchdog timeout (WithWatchdogTimeout), renewed by the watchdog while the
// Client lives.
func WithLease(d time.Duration) LeaseOption { return LeaseOption{d} }

// apply records the option in a call's configuration, or the error of a lease that is not
// positive.
func (o LeaseOption) apply(c *core.LockConfig) {
	if o.d <= 0 {
		c.Err = core.Invalid("lease %v is not positive", o.d)
		return
	}
	c.Lease = o.d
}

func (LeaseOption) lockOption()    {}
func (LeaseOption) tryLockOption() {}
func (LeaseOption) tryOption()     {}

// WaitOption bounds how long a TryLock, TryRLock or TryAcquire waits. Make it with WithWait:
// its zero value is an invalid argument.
type WaitOption struct{ d time.Duration }

// WithWait has the call wait up to d for the lock (or the permits): it joins the waiters and
// returns (not acquired, no error) when d runs out first. d must be positive. The default,
// without it, is one attempt that does not wait. The calls that wait until their context is
// done (Lock, RLock, Acquire) take no WaitOption: bound them with the context's deadline.
func WithWait(d time.Duration) WaitOption { return WaitOption{d} }

// apply records the option in a call's configuration, or the error of a wait that is not
// positive.
func (o WaitOption) apply(c *core.LockConfig) {
	if o.d <= 0 {
		c.Err = core.Invalid("wait %v is not positive", o.d)
		return
	}
	c.Wait = o.d
}

func (WaitOption) tryLockOption() {}
func (WaitOption) tryOption()     {}

// TokenOption has the acquisition assign the hold's fencing token. Make it with
// WithFencingToken.
type TokenOption struct{}

// WithFencingToken has the acquisition assign the hold's fencing token, so that FencingToken
// (and the lock's Token) answer without a round trip. It costs a slightly heavier acquisition.
// The default, without it, is to assign the token on the hold's first FencingToken call, so
// that holds whose holders never ask pay nothing for it. Read holds and permits have no
// fencing token, and their calls take no TokenOption.
func WithFencingToken() TokenOption { return TokenOption{} }

// apply records the option in a call's configuration.
func (TokenOption) apply(c *core.LockConfig) { c.Token = true }

func (TokenOption) lockOption()    {}
func (TokenOption) tryLockOption() {}

// The primitives' packages apply a call's options through core.ApplyOptions, which reads them
// here.
func init() {
	core.ApplyOption = func(o any, c *core.LockConfig) bool {
		x, ok := o.(interface{ apply(*core.LockConfig) })
		if ok {
			x.apply(c)
		}
		return ok
	}
}
