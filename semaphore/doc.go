// Package semaphore holds two distributed semaphores on Redis, for limits shared by several
// processes, such as a worker pool that runs at most K jobs at once:
//
//   - Semaphore, a counting semaphore (Redisson's RSemaphore): permits are numbers, taken and
//     given back by anyone;
//   - Leased, a semaphore of leased permits (Redisson's RPermitExpirableSemaphore): each
//     acquisition gets a permit with an id and a lease, renewed by the Client's watchdog or
//     fixed, so that the permits of a process that crashed come back when their lease ends.
//
// A leased permit may also be released by its id (Permit.ID), whoever holds it and from any
// process: Leased.ReleaseID and ReleasePartID, Redisson's release(id). Its holder's permit
// context then ends with aqs.ErrReleased, at once in the releasing Client, otherwise at the
// holder's Client's next renewal; its own Release fails with ErrPermitReleased.
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
// once with TrySetPermits, change them with AddPermits, or let WithSize set them on first use.
// A semaphore made WithExpiry is deleted instead once idle for its expiry, every key of it,
// which suits semaphores made under generated names (one per tenant, one per job): every call
// extends its life, and live leases and queued waiters keep it (see WithExpiry).
// A semaphore named name keeps that hash in "aqs:{name}" (Key), its queue in "aqs:{name}:q"
// (a list, arrival order) and "aqs:{name}:d" (liveness deadlines), as the locks do. A
// counting semaphore keeps the grants its waiters have not collected yet in a zset,
// "aqs:{name}:g"; a leased one keeps its permits in a zset, "aqs:{name}:p", scored by each
// permit's lease end, with their counts in a hash, "aqs:{name}:pn", and the permits released
// by their id in a zset, "aqs:{name}:pr", scored by the lease end each had (until then its
// holder learns that it was released, not lost). Those keys expire a second after the latest
// deadline or lease end they record, so an abandoned semaphore leaves only its hash (and, made
// WithExpiry, nothing).
//
// # Crashes and lost replies
//
// A counting semaphore's permits are not owned: a process that dies holding some takes them
// with it, until ForceRelease gives them back. Use Leased where that matters: the permits of a
// process that died come back when their lease ends, and Available counts them back at once,
// whoever looks. Every acquisition recognises a second run of itself (a reply lost and sent
// again by go-redis), and a counting acquisition whose reply is lost for good gives its
// permits back; a counting release whose outcome is unknown is sent again for up to 8s.
//
// # Failovers
//
// Both kinds serve again within moments of a failover (see "Failover and replica sync" in
// package aqs). A leased permit whose release only the old master saw comes back when its
// lease ends. A counting semaphore's permits have no owner and no lease: an acquisition or a
// release that a failover loses changes the number available for good, until ForceRelease or
// AddPermits (with aqs.WithReplicaSync its acquisitions and releases wait for the replicas,
// which closes that gap but for the moment of a controlled failover, when the old master
// still takes writes). Use Leased where permits must survive failovers.
package semaphore
