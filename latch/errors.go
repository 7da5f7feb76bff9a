package latch

import "errors"

// ErrNotSet is returned by Await, TryAwait and CountDown on a latch whose count is not set: it
// was never set, or its key expired (see WithExpiry). A waiter whose latch expires while it
// waits gets it too. Nothing was changed.
var ErrNotSet = errors.New("latch: count not set")
