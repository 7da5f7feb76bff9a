// Package rwlock is a distributed read-write lock on Redis: any number of readers at once, or
// one writer alone. It is Redisson's RReadWriteLock, with its flaws fixed: each reader has a
// lease of its own, and readers and writers wait in one queue, so neither side starves.
//
// # Sides
//
// RLock, TryRLock and RUnlock work the read side, Lock, TryLock and Unlock the write side.
// Each side has the surface of package reentrant: a successful call returns a held context,
// which ends (with aqs.ErrLockLost as its cause) when the hold's lease can no longer be
// trusted; a hold is re-entered through its held context; the write side has fencing tokens
// (aqs.WithFencingToken, Token), the read side has none.
//
// Downgrade: a writer may take the read side through its held write context, at once; releasing
// the write side then leaves it a reader, and the readers waiting at the head of the queue get
// in with it. Upgrade is refused: asking for the write side through a held read context fails
// at once with ErrUpgrade (two readers upgrading would wait for each other forever).
//
// # Order
//
// Readers and writers that must wait join one queue in Redis, in arrival order, as Java's
// ReentrantReadWriteLock's do in its AbstractQueuedSynchronizer. When the write side is
// released, the lock goes to the head of the queue: a writer, or every reader at the head up
// to the next writer, all in the same script, with one message to each of their Clients. When
// the last reader leaves, the writer at the head gets the write side. So a reader waits at
// most for the writers queued ahead of it, and a writer for the holds ahead of it.
//
// Fair mode (the default): a newcomer never passes a live waiter: a reader that arrives while
// a writer is queued queues behind it (a reader that already holds may re-enter). Non-fair
// mode (WithNonFair): a new reader enters whenever no writer holds, whatever waits; this gives
// the highest read throughput, and a waiting writer gets in only when the readers happen to
// leave a gap. The queue itself is served in order in both modes.
//
// # Leases and liveness
//
// Every read hold has its own lease in server time, renewed by the Client's watchdog: a reader
// whose process died holds until its own lease ends, and renewing one reader never extends
// another. A queued waiter is kept alive by its Client's heartbeats; one whose process died is
// dropped from the queue within the waiter timeout (WithWaiterTimeout), and the queue moves
// on. No operation scans the readers or the queue: each is a point lookup or the first entry
// of a range.
//
// # Keys
//
// A read-write lock named name keeps its writer in "aqs:{name}" (Key), in the form of the
// reentrant lock's key, its readers in a zset, "aqs:{name}:r", scored by each reader's lease
// end, their re-entry counts in a hash, "aqs:{name}:rn", and its queue of readers and writers
// in "aqs:{name}:q" (a list, arrival order) and "aqs:{name}:d" (liveness deadlines). Every key
// expires on its own once abandoned. Do not use one name for a read-write lock and for a
// reentrant or fair lock: they would share the key "aqs:{name}".
//
// # Conditions
//
// Lock.NewCondition gives the write side conditions, as Java's Condition objects of a
// ReentrantReadWriteLock's write lock: a writer waits on one, giving the write side up, until
// another goroutine, in any process, signals it; signalled writers take the write side back in
// the order they began to wait, through the lock's queue (see Condition).
package rwlock
