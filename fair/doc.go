// Package fair is a distributed FIFO lock on Redis: whoever asked first gets it first, across
// goroutines and processes. It is Redisson's RFairLock, with the flaws of that design fixed.
//
// # Order
//
// Grants follow the order in which first attempts reached Redis. There is no barging:
// a newcomer never takes the lock while a live waiter is queued, not even a goroutine in the
// holder's own process. The release hands the lock straight to the live head of the queue,
// inside the release script, and notifies only that waiter's Client, which owns the lock on
// receipt, without a further round trip. When that waiter is of the releaser's own Client,
// nothing is published: the release's reply names it and the releasing goroutine wakes it.
// A goroutine that asks for the lock while its own Client holds it rides along: its join goes
// to Redis with that hold's release, in the same script, rather than in a round trip of its
// own, at most a couple of milliseconds after its call; it joins at the tail all the same.
// So "arrival" is when a waiter's join reached Redis. Values of one name and the same options
// on one Client are one lock to that Client: goroutines may share one Lock value or build
// their own (New in a request's handler), and ride along all the same.
//
// # The queue
//
// The queue lives in Redis as a list (arrival order) and a zset of liveness deadlines, in the
// lock's slot. Each waiter's deadline is its own, computed from server time, refreshed by its
// Client's batched heartbeats: a waiter whose process died is dropped within the waiter
// timeout, and a live one never is. No operation rewrites anyone else's score, so each is
// O(log N) in the queue length. A waiter that gives up (its context ends, or TryLock's wait
// bound) leaves the queue at once; if it was handed the lock in that same instant, the lock
// passes on to the next waiter. The waiter timeout is 5s unless WithWaiterTimeout sets it.
//
// # Holds and keys
//
// Holds, re-entry, leases, the watchdog, lease-loss cancellation and fencing tokens work as in
// package reentrant, and the lock keeps the same keys in Redis: the lock key "aqs:{name}",
// present while the lock is held or waited for, and the queue, "aqs:{name}:q" (a list) and
// "aqs:{name}:d" (the deadlines). Every key expires on its own once abandoned.
//
// # Conditions
//
// Lock.NewCondition gives the lock conditions, as Java's Condition objects: a holder waits on
// one, giving the lock up, until another goroutine, in any process, signals it; signalled
// waiters take the lock back in the order they began to wait, through the lock's queue (see
// Condition). A condition's waiters are kept in "aqs:{name}:w:<condition name>" and its
// deadlines, beside the lock's keys.
package fair
