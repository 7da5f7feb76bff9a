// Package latch holds a distributed count-down latch on Redis (Java's CountDownLatch,
// Redisson's RCountDownLatch), for one or more goroutines, in any processes, that wait until a
// number of events happened elsewhere: a coordinator that waits for its workers to be ready,
// say.
//
// The latch is set to a count with TrySetCount; each CountDown lowers it by one; Await returns
// once it is 0. The count is a number in Redis, not a list of who counts: any caller may count
// down, and nobody owns a share of the count.
//
// # Order
//
// A CountDown that is acknowledged is counted: an Await that begins after the CountDown that
// made the count 0 returned sees 0 and returns at once. The CountDown that makes the count 0
// sends one message, on a channel every Client's waiters of the latch share, and that message
// wakes every waiter of every Client; none of them is served before another, and none polls.
// A waiter whose message was lost (its Client was reconnecting, say) finds the count 0 at its
// next heartbeat, which its Client sends, batched with its other waiters', three times per
// waiter timeout (WithWaiterTimeout).
//
// # What failure leaves behind
//
// A waiter leaves nothing in Redis: a waiter that gives up, or whose process dies, changes
// nothing for the others. A counter that dies before its CountDown never counts down: the
// waiters wait until their context ends, or until the latch expires, and then fail with
// ErrNotSet. The count expires WithExpiry after it was set or last counted down, so that a
// latch abandoned by everyone is deleted; a count that reached 0 stays 0 until then.
package latch
