// Package semaphore holds two distributed semaphores on Redis, for limits shared by several
// processes, such as a worker pool that runs at most K jobs at once:
//
//   - Semaphore, a counting semaphore (Redisson's RSemaphore): permits are numbers, taken and
//     given back by anyone;
//   - Leased, a semaphore of leased permits (Redisson's RPermitExpirableSemaphore): each
//     acquisition gets a permit with an id and a lease, renewed by the Client's watchdog or
//     fixed, so that the permits of a process that crashed come back when their lease ends.
//
// # Order
//
// Both serve waiters in arrival order, across processes: while a waiter is queued nobody takes
// permits past it, and a large request at the head is not passed by later small ones (as in
// golang.org/x/sync/semaphore). A release grants the permits to exactly the waiters it can
// now satisfy, in order, and tells only them; nothing polls. A waiter whose process died is
// dropped from the queue after the waiter timeout (WithWaiterTimeout).
//
// # Permits in Redis
//
// The total and the available (or leased) permits live in one hash with no TTL: like
// Redisson's, a semaphore's permits are configuration, kept until the key is deleted. Set them
// once with TrySetPermits, change them with AddPermits.
package semaphore
