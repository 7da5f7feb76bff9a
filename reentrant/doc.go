// Package reentrant is a distributed reentrant lock on Redis, the counterpart of Redisson's
// RLock and of sync.Mutex across processes.
//
// One Lock value may be shared by any number of goroutines, or each may build its own (New in
// a request's handler): values of one name and the same options on one Client are one lock to
// that Client, with one local queue and hand-off, and a hold taken through one value may be
// released through another. The hold is carried by the
// context: Lock returns a held context, and a Lock on the same lock with that context (or any
// context derived from it) re-enters the hold instead of waiting for it. Every other call is a
// new holder and waits, as two goroutines do with sync.Mutex. Pass the held context down the
// call stack; a goroutine handed the held context can re-enter, so do not hand it to one that
// must be excluded from the caller.
//
// # Ordering
//
// The lock is not fair: it prefers the waiters of the Client that holds it, as Java's
// non-fair ReentrantLock lets a thread barge in. Waiters of other Clients wait in a queue in
// Redis, in arrival order (the fair lock's queue). A goroutine that calls Lock while its own
// Client holds the lock sends nothing to Redis: it waits for that hold's release, which hands
// it the lock straight away, in the same script, with no message and no round trip of the
// waiter's own (one whose attempt finds the lock just taken by its own Client waits the same
// way, unqueued). Values of the name with other options (another waiter timeout) wait as
// another Client's waiters do, in Redis's queue. A release hands the lock to
// a waiter of its own Client past queued waiters of other Clients up to sixteen times in a row;
// then the lock goes to the head of the queue, and the releasing Client's waiters join the
// queue's tail. So a waiter in another process waits at most seventeen holds for each Client ahead
// of it in the queue. Use package fair for strict first-come first-served, across goroutines
// too.
//
// # Leases
//
// A hold taken without WithLease is renewed by the Client's watchdog, and it expires within
// the watchdog timeout when its process dies. A hold taken WithLease(d) expires d after it was
// taken. Either way the held context is cancelled with cause aqs.ErrLockLost as soon as the
// lease can no longer be trusted. A queued waiter whose process died is dropped from the queue
// within five seconds. A re-entry with WithLease extends the hold's lease to at least d; it
// never shortens it. The package aqs documentation says when a lease can no longer be trusted
// and what the watchdog does.
//
// # Fencing tokens
//
// Every hold of a lock name has a fencing token greater than every earlier hold's (see
// aqs.FencingToken for what it promises and its limits). Read it with Token, or have the
// acquisition assign it with aqs.WithFencingToken; a hold whose holder never asks pays
// nothing for it.
//
// # Keys
//
// A lock named name lives in one string key, "aqs:{name}" (Key), present only while the lock
// is held or waited for, so an uncontended Lock and Unlock cost what the minimal SET NX lock
// costs: one SET NX PX to take it, one compare-and-delete script to release it. Its queue of
// waiters is a list, "aqs:{name}:q", in arrival order, and a zset of their liveness deadlines,
// "aqs:{name}:d" (Keys). While the queue is not empty, the lock key records the holder's lease
// end and outlives it, so that a newcomer's SET NX can never pass a live waiter. Grants go to
// the waiter's Client on a channel of its own. The fair lock keeps the same keys in the same
// form: a reentrant and a fair lock of one name are the same lock in Redis, served by
// different rules.
//
// # Conditions
//
// Lock.NewCondition gives the lock conditions, as Java's Condition objects: a holder waits on
// one, giving the lock up, until another goroutine, in any process, signals it; signalled
// waiters take the lock back in the order they began to wait, through the lock's queue (see
// Condition). A condition's waiters are kept in "aqs:{name}:w:<condition name>" and its
// deadlines, beside the lock's keys.
package reentrant
