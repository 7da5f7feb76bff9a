// Package acquire is the engine on which every blocking call of aqs runs: the Go half of what
// Java's AbstractQueuedSynchronizer is, the Lua half being the queue discipline of
// internal/scripts/_queue.lua.
//
// A primitive (package reentrant, fair, rwlock, semaphore) knows its state rules only: its
// keys, its scripts and what their typed replies mean (a Rules value). The engine does the
// rest, once for all of them:
//
//   - registering with the Client's pub/sub hub before the attempt whose failure makes the
//     caller wait, so that no grant or wakeup is lost between "queued" and "waiting";
//   - the wait itself: a grant addressed to this waiter (its hold id, on its Client's grant
//     channel), a wakeup to look again, the fallback timer a reply bounds, and the
//     heartbeats that keep a queued waiter alive (batched by the Client), which also find a
//     grant whose message was lost;
//   - the caller's deadline, also when Redis stalls (see call.go);
//   - giving up without residue: a waiter whose call ends leaves the queue, and what was
//     granted to it in that same instant passes on;
//   - the lost-reply policy: an attempt whose reply never came may have done anything, so
//     the hold it named is given up in the background, bounded;
//   - making the hold: the lease, the watchdog, the held context, the fencing token, the
//     confirmation of a grant under the replica-sync policy;
//   - the hand-off to a waiter of the same Client (local.go): a release carries the joins of
//     this Client's new waiters, or hands the lock straight to one of them, instead of each
//     waiter paying round trips of its own.
//
// Nothing here knows a primitive by name.
package acquire
