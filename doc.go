// Package aqs is a library of distributed synchronizers on Redis, all sharing one Client
// runtime: a reentrant lock (package reentrant), a FIFO fair lock (package fair), a read-write
// lock (package rwlock), and a counting semaphore and a semaphore of leased permits (package
// semaphore).
//
// A Client carries what the primitives share: a random client id from which hold ids are
// made, the script loader, one pub/sub hub and one lease watchdog. Create one per process and
// per Redis deployment, and Close it at shutdown.
//
// The calls of one Client share round trips. A call made while fewer than two round trips of
// the Client are on their way to its Redis server (to that master, on Redis Cluster) is sent at
// once, on its own, as go-redis sends any command. A call made while two are on their way waits
// for one of them to end, and then goes with every other call that waited meanwhile in one
// pipeline: one write and one read for all of them, on one connection of rdb's pool. So the
// more goroutines of a process use the Client at once, on many different names, the more calls
// each round trip carries; a lone call waits for nothing. The Client's calls keep their order
// where it matters: a goroutine waits for each reply before its next call, so its release
// reaches Redis before its next acquisition. Acquisitions under WithReplicaSync go in a
// pipeline of their own, followed by WAIT. Commands sent directly on rdb are not affected.
//
// Ownership travels in the context. A successful Lock returns a held context that carries the
// hold; a Lock on the same lock with that context (or one derived from it) re-enters the hold.
// Any other call is a new holder that must wait, so one lock value may be shared by many
// goroutines. The held context is cancelled, with cause ErrLockLost, as soon as the lease can no
// longer be trusted, so work done under it stops before another holder can get in. Read the
// cause with context.Cause.
//
// Every blocking call (Lock, RLock, Acquire, and the Try variants with a wait) returns by its
// context's deadline, give or take a few tens of milliseconds, also when the Redis server
// stalls or refuses connections, and leaves nothing behind. When its context ends while a
// round trip is on its way, it waits a moment for the reply and gives up, before it returns,
// what that round trip did (a lock taken, a place in the queue, permits granted); when Redis
// does not answer in that time, that is done in the background once the server answers again
// (for at most 5 seconds; what cannot be given up by then ends with its lease or its waiter
// timeout). go-redis honours a context's deadline on the socket only with its option
// ContextTimeoutEnabled; without it, a call whose deadline comes before the longest a go-redis
// call could take (its timeouts and retries) waits for Redis on a goroutine of its own, which
// costs a little. A context without a deadline waits for Redis as go-redis does.
//
// A reply lost on the way back does not change an outcome. go-redis sends a command again when
// its connection broke after the command was sent (its option MaxRetries), so an acquisition
// may run twice in Redis: every acquisition recognises its own second run and acquires once.
// Releases are not left to those retries: when a release's reply is lost, the Client sends it
// again itself, for a few seconds, and a release that then finds its hold gone while the
// hold's lease was still running reports success, since its earlier send did it.
//
// Each call takes the options that apply to it, as types of their own: Lock takes a
// LockOption, TryLock a TryLockOption, and so on. An option a call cannot take, such as a wait
// bound for a Lock that waits until its context is done or a fencing token for a read hold,
// does not compile. A bad value (WithLease(0), WithWait(-1s), the zero LeaseOption or
// WaitOption, a nil option) fails the call with an error matching ErrInvalidArgument before it
// changes anything.
package aqs
