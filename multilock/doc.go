// Package multilock takes several locks at once: a cart's SKUs, a block of seats, the two
// accounts of a transfer. A request holds all of its names or none, and requests are served
// fairly and can never deadlock, however their names overlap.
//
// # One lock per name, one queue per name
//
// Each name is the fair lock of that name: a multi-lock on {"a", "b"} and fair.New(client,
// "a") exclude each other, and wait in one queue, so code that takes one name with package
// fair and several with this package needs nothing else. (The reentrant lock of a name is the
// same lock too; its local hand-offs may pass waiters, as package reentrant says.)
//
// # Fair, and free of deadlocks, by construction
//
// A request joins the queue of every one of its names in one script, so all queues order the
// requests by one arrival order. A request is granted when, for each of its names, the name is
// free and the request is at the head of its queue. A name released while its queue's head is
// a request for several names is kept for that request (reserved, for as long as the request
// is alive) while it waits for its other names. So:
//
//   - requests that share a name are served in the order they arrived: a request for {a, b}
//     is not overtaken by a later request for a, or for b, or for {b, c};
//   - a request waits only for requests that arrived before it, so no cycle of waits can form
//     and every request is granted once the older ones are done;
//   - a dead waiter (its process killed) leaves every queue within the waiter timeout, and the
//     names kept for it pass on within that time.
//
// What it costs: a request waits behind every older request that shares any name with it,
// including one that itself waits for a name this request does not want; and a name kept for
// a request that still waits for another name is idle meanwhile. This is the price of never
// starving a request for many names; a request never waits for one that arrived after it.
//
// # Names
//
// New takes the names in any order; duplicates are one name, and the empty list is an invalid
// argument. Names are taken in one step, so their number only makes the scripts longer: up to
// a few hundred names per request is fine.
//
// # Redis Cluster
//
// All names of one multi-lock must live in one slot: give them a common hash tag, as
// "{cart-17}:sku-1" and "{cart-17}:sku-2" (a name with a hash tag lives in the slot of its
// tag, see aqs.WithKeyPrefix). New refuses names across slots with an error matching
// ErrCrossSlot: taking them slot by slot would be neither atomic nor fair, and this package
// promises both. On a single server and with Sentinel any names go together.
//
// # Holds
//
// A hold of a multi-lock is one hold of all its names: one lease, renewed by the Client's
// watchdog as a whole, one held context, cancelled with aqs.ErrLockLost when any name is lost,
// one fencing token for all names (aqs.FencingToken), and the Client's Observer events under
// the primitive "multilock". A multi-lock is not reentrant: Lock with a context that holds it
// already, or holds one of its names through another lock, fails with
// aqs.ErrInvalidArgument instead of waiting for itself.
package multilock
