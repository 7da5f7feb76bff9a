package core

import "time"

// LockConfig is the result of a call's lock options (aqs.WithLease, aqs.WithWait,
// aqs.WithFencingToken), each of which records itself through ApplyOption.
type LockConfig struct {
	Lease time.Duration // 0: watchdog
	Wait  time.Duration // 0: no wait (TryLock)
	Token bool          // assign the fencing token at acquisition
	Err   error         // the first invalid option's error
}

// ApplyOption records the call option o (a value of one of package aqs's option types) in c,
// and reports whether o is one: package aqs sets it, since the options' fields are its own.
var ApplyOption = func(o any, c *LockConfig) bool { return false }

// ApplyOptions applies a call's options in order and returns the first invalid one's error; a
// nil option is invalid. T is the option type the call takes: an option interface of package
// aqs (aqs.LockOption, aqs.TryLockOption, aqs.TryOption) or a concrete option
// (aqs.LeaseOption, aqs.WaitOption).
func ApplyOptions[T any](opts []T) (LockConfig, error) {
	if len(opts) == 0 {
		return LockConfig{}, nil // the common call, without the allocation of c below
	}
	var c LockConfig
	for _, o := range opts {
		if any(o) == nil {
			return c, Invalid("nil lock option")
		}
		if !ApplyOption(any(o), &c) {
			return c, Invalid("unknown lock option %T", o)
		}
		if c.Err != nil {
			return c, c.Err
		}
	}
	return c, nil
}
