package core

import "time"

// LockConfig is the result of a call's lock options.
type LockConfig struct {
	Lease time.Duration // 0: watchdog
	Wait  time.Duration // 0: no wait (TryLock)
	Token bool          // assign the fencing token at acquisition
	Err   error
}

// LockOption configures one lock call.
type LockOption func(*LockConfig)

// ApplyLockOptions applies opts and returns the first invalid one's error.
func ApplyLockOptions(opts []LockOption) (LockConfig, error) {
	var c LockConfig
	for _, o := range opts {
		if o == nil {
			return c, Invalid("nil lock option")
		}
		o(&c)
		if c.Err != nil {
			return c, c.Err
		}
	}
	return c, nil
}

// ApplyBlockingLockOptions applies the options of a Lock call, which waits until its context
// is done and so takes no wait bound.
func ApplyBlockingLockOptions(opts []LockOption) (LockConfig, error) {
	c, err := ApplyLockOptions(opts)
	if err == nil && c.Wait > 0 {
		err = Invalid("Lock takes no wait bound; use TryLock with WithWait")
	}
	return c, err
}
