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

// Setting is one option of a primitive's New, what each primitive package's opaque Option
// wraps: the waiter timeout that every primitive takes (WaiterTimeout), or a setting of the
// package's own (Set, given the package's configuration). Every package's WithWaiterTimeout
// is made by WaiterTimeout, so that the option has one meaning, one bound and one error
// everywhere; the Option types stay one per package, so that the compiler rejects an option
// of another package's primitive.
type Setting struct {
	waiterTimeout time.Duration
	set           func(cfg any) error
}

// MinWaiterTimeout is the shortest waiter timeout a primitive accepts.
const MinWaiterTimeout = 30 * time.Millisecond

// DefaultWaiterTimeout is a primitive's waiter timeout without WithWaiterTimeout.
const DefaultWaiterTimeout = 5 * time.Second

// WaiterTimeout is the setting of WithWaiterTimeout(d); d below MinWaiterTimeout makes New fail
// with an invalid argument.
func WaiterTimeout(d time.Duration) *Setting {
	if d < MinWaiterTimeout {
		return &Setting{set: func(any) error { return Invalid("waiter timeout %v is below %v", d, MinWaiterTimeout) }}
	}
	return &Setting{waiterTimeout: d}
}

// Set is a package's own setting: f gets the configuration that the package's New passes to
// Settings, and returns an invalid argument for a bad value.
func Set[C any](f func(cfg *C) error) *Setting {
	return &Setting{set: func(cfg any) error { return f(cfg.(*C)) }}
}

// Settings applies a New's options in order to cfg (the package's configuration, which Set's
// functions take) and returns the waiter timeout (DefaultWaiterTimeout unless set), or the
// first invalid option's error. A zero Option (a nil setting) is an invalid argument.
func Settings[O any, C any](opts []O, setting func(O) *Setting, cfg *C) (time.Duration, error) {
	timeout := DefaultWaiterTimeout
	for _, o := range opts {
		s := setting(o)
		switch {
		case s == nil:
			return 0, Invalid("zero option: make options with the package's With functions")
		case s.set != nil:
			if err := s.set(cfg); err != nil {
				return 0, err
			}
		default:
			timeout = s.waiterTimeout
		}
	}
	return timeout, nil
}
