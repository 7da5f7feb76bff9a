// Package aqs is a library of distributed synchronizers on Redis, all sharing one Client
// runtime: a reentrant lock (package reentrant), a FIFO fair lock (package fair), a read-write
// lock (package rwlock), a counting semaphore and a semaphore of leased permits (package
// semaphore), and a count-down latch (package latch). It is for Go services that already run
// Redis and need exclusion or limits shared by many processes: a job that must not run twice,
// a record one worker at a time may rewrite, at most K jobs at once across a fleet, a
// coordinator that waits for its workers.
//
// This package holds the Client, its options, the options of the primitives' calls, the
// errors they share, FencingToken, the Observer hook, and Locker with its sync.Locker
// adapter. The ordering each primitive guarantees is in its own
// package's documentation.
//
// The server is Redis 7.0 or later, or Valkey 7.2 or later (the tests run on Redis 7.0.15 and
// Valkey 8.0.1); what this documentation says of Redis holds of Valkey too.
//
// # The Client
//
// A Client carries what the primitives share: a random client id from which hold ids are
// made, the script loader, one pub/sub hub and one lease watchdog. Create one per process and
// per Redis deployment, share it between all goroutines, and Close it at shutdown.
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
// So sharing round trips helps a process that makes many calls at once, on many names. It
// cannot help a lone goroutine (its calls go one to a round trip, as in any library), one hot
// name (its hand-offs are serial, each waiting for the release before it), or many processes
// with few busy goroutines each: a Client pipelines its own calls only, so use one Client per
// process, shared by every goroutine.
//
// # Holds and held contexts
//
// Ownership travels in the context. A successful Lock returns a held context, a child of the
// caller's context that carries the hold; a Lock on the same lock with that context (or one
// derived from it) re-enters the hold instead of waiting. Any other call is a new holder that
// must wait, so one lock value may be shared by many goroutines, as a sync.Mutex is. Values
// are cheap, too: a request's handler may build its own (New with the name), since values of
// one name and the same options on one Client are one lock to that Client, with one local
// queue and hand-off, and a hold taken through one may be released through another. Pass the
// held context down the call stack, and do not hand it to a goroutine that must be excluded
// from its caller. Unlock(held) releases that acquisition; the last release of a hold gives
// up the lock. Unlock works with a held context that is already done.
//
// The held context is cancelled, with cause ErrLockLost, as soon as the lease can no longer be
// trusted: a renewal was refused, the key was deleted or taken over, a fixed lease ran out, or
// renewals kept failing until the local lease deadline minus a safety margin (a fiftieth of the
// lease, between 1ms and 1s). Redis and database calls made with the held context stop there,
// before another holder can get in. Read the cause with context.Cause. Unlock of a lost hold
// returns an error matching both ErrNotOwner and ErrLockLost. A released acquisition's context
// ends with cause ErrReleased.
//
// # Leases and the watchdog
//
// A hold taken without WithLease has a lease of the watchdog timeout (WithWatchdogTimeout, 30s
// by default), which the Client renews every third of it, all of its holds in one pipelined
// batch. Renewal belongs to the Client and the hold, never to the caller's context. If the
// process dies, its holds end within the watchdog timeout. A hold taken WithLease(d) is not
// renewed: it expires d after the acquisition, and its held context is cancelled just before.
// Client.Close stops renewing: held contexts are cancelled with a cause matching ErrLockLost
// and ErrClosed, and the locks expire at the end of their lease.
//
// Every deadline (a lease, a waiter's liveness, a permit's lease) is computed inside Redis from
// the server's clock; clients send durations only, so clock skew between clients does not
// matter.
//
// # Fencing tokens
//
// Every hold of an exclusive lock (reentrant, fair, and the read-write lock's write side) has
// a fencing token strictly greater than the token of every earlier hold of that name, also
// after its key expired and was created again; a re-entry keeps its hold's token. Read it with
// FencingToken or the lock's Token, send it with each write, and let the resource refuse tokens
// lower than the highest it has accepted.
//
// That check is what protects the resource. A lock in Redis is a lease, and a holder can lose
// it without running any code that could notice: a long GC pause or a stalled VM outlasts the
// lease, another process takes the lock, and the first one resumes and writes. Its held context
// is cancelled by then, but a write already past the check goes through; a token check at the
// resource refuses it.
//
// The token is the server's clock in microseconds, read when the token is first asked for
// during the hold; it assumes that the server's clock does not step backwards, as Redis's own
// key expiry does. After a failover, tokens come from another server's clock, so a new
// holder's token may not be greater than a lost holder's. Where that matters, make the
// protected operation safe to repeat or give the resource a guard of its own.
//
// # Deadlines and cancellation
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
// # Lost replies
//
// A reply lost on the way back does not change an outcome. go-redis sends a command again when
// its connection broke after the command was sent (its option MaxRetries), so an acquisition
// may run twice in Redis: every acquisition recognises its own second run and acquires once.
// Releases are not left to those retries: when a release's reply is lost, the Client sends it
// again itself, for a few seconds, and a release that then finds its hold gone while the
// hold's lease was still running reports success, since its earlier send did it.
//
// # Failover and replica sync
//
// A failover replaces the master: Sentinel promotes a replica when the master dies or when an
// operator asks for it (SENTINEL FAILOVER), and Redis Cluster promotes a master's replica once
// the master has not answered for the node timeout. What a Client sees:
//
//   - While the master is lost, calls fail (a connection error; on Redis Cluster CLUSTERDOWN
//     until the promotion) or wait, and every call returns by its context's deadline. A
//     release that cannot reach Redis, or that the cluster refuses for the moment, is sent
//     again for a few seconds (a counting semaphore's for up to 8s).
//   - After the promotion the Client follows the new master. Its calls go where its Redis
//     client sends them: go-redis's failover client follows Sentinel's announcement, and the
//     Client makes a cluster client reload its slot map as soon as a node cannot be reached.
//     Its subscriptions follow within half a second: while calls wait, it checks that the
//     server its calls reach knows them, and subscribes there anew when it does not (after a
//     controlled failover the old master keeps its subscribers for some ten seconds).
//   - The promoted replica holds what the old master had replicated. A hold whose release
//     only the old master saw stays held until its lease ends: at most the watchdog timeout
//     (WithWatchdogTimeout) or the lease asked for. The queue entries of calls that had ended
//     come back too; a Client gives back at once what Redis grants to an entry of its own that
//     it no longer uses, so they delay nobody. An acquisition the replica had not received is
//     lost, and a second owner can take the lock while the first still holds it; the first
//     learns it at its next renewal, a third of the watchdog timeout later, when its held
//     context is cancelled with ErrLockLost.
//   - A controlled failover lets the old master take writes for about a second after the
//     promotion, until the Clients follow Sentinel's announcement, and Sentinel turns it into
//     a replica of the new master some ten seconds later. What Clients wrote there meanwhile
//     is lost, as above. Redis's min-replicas-to-write 1 (with min-replicas-max-lag 1) makes a
//     master whose replicas left refuse writes (NOREPLICAS: an acquisition fails, a release is
//     sent again), which shortens that moment.
//
// How soon after the promotion every primitive serves again is measured by make failover;
// docs/DESIGN.md ("Failovers") gives the times.
//
// WithReplicaSync(n, timeout) closes the gap of acquisitions lost at a failover: every
// acquiring call is followed, on the same connection, by WAIT n timeout, and an acquisition is
// reported only once n replicas acknowledged it. One they do not acknowledge in time is undone
// and fails with a *ReplicaSyncError. A lock or permits handed to a waiter by someone else's
// release are confirmed by the waiter, with a write of its own and WAIT after it, before its
// call returns. On Redis Cluster, WAIT goes to the master of the primitive's slot. While fewer
// than n replicas can acknowledge, nothing can be acquired, and calls do not wait for their
// turn to find it out: they fail with a *ReplicaSyncError, a new call at once (the Client's last
// WAIT on that server, less than a timeout ago, found too few) and a queued one within about
// two timeouts. That lasts, after a master's death, until a replica is attached to the new
// master (at once when the master had two replicas), and after a controlled failover of a
// master with a single replica until Sentinel attaches the old master, some ten seconds. Run
// two replicas or more.
//
// The limits: WAIT makes an acquisition durable on n replicas, not Redis strongly consistent.
// With more replicas than n, a failover may promote one that had not acknowledged it, so ask
// for all of them where that matters; in a controlled failover, the old master's other
// replicas acknowledge its writes for a moment after the promotion. Releases and renewals of
// holds are not waited for: a release lost at a failover leaves the hold in Redis until its
// lease ends (a delay, never two holders), and a lost renewal leaves the previous lease. A
// counting semaphore's permits are counts without owners or leases: an acquisition or a
// release lost at a failover changes how many are available for good (ForceRelease and
// AddPermits repair it). Under the policy its releases wait for the replicas too (for up to
// 3s), which narrows that but does not close it: a counting semaphore may come out of a
// failover with more or fewer permits, with the policy or without it. Use a Leased semaphore
// where permits must survive failovers: its permits come back when their lease ends. An undo
// that cannot reach the master is sent again for a few seconds, and otherwise leaves the
// acquisition to end with its lease. Keys must not be evicted: run Redis with
// maxmemory-policy noeviction (its default).
//
// # Verifying a deployment
//
// The guarantees assume a server set up as the library expects: one that never evicts keys,
// whose ACL lets the user run the scripts on the prefix's keys and channels, and whose
// persistence and replicas are what the user thinks. Verify (on a Client) and VerifyServer (on
// a go-redis client, before any Client exists) check that, and return a Report of findings,
// each Pass, Warn, Fail or Skip with what it means and its fix; Report.Failed tells whether a
// guarantee does not hold. They end with a drill of two Clients of their own on scratch
// names, and leave nothing behind. The aqs command's verify runs the same checks from a shell
// (exit status 0, 1 when a finding fails, 2 when it could not run). New warns, through the
// logger of WithLogger or else slog.Default(), when a master may evict keys.
//
// # Keys, Redis Cluster and Sentinel
//
// Every key and channel of a primitive named name starts with "aqs:{name}" (the prefix is set
// by WithKeyPrefix), so all of them share one hash slot and every script touches one slot.
// Names may hold any bytes: "%", "{" and "}" are escaped (as "%25", "%7B", "%7D"), so a name
// cannot break out of its hash tag or reach another primitive's keys. A name should hold one
// kind of primitive: a reentrant or fair lock and a read-write lock of the same name would
// share a key. Each primitive's package lists its keys, and every key expires on its own once
// abandoned, except a semaphore's permits, which are configuration (unless the semaphore is
// made WithExpiry).
//
// New takes a *redis.Client, a *redis.ClusterClient or a *redis.FailoverClient (Sentinel). On
// Redis Cluster the Client uses sharded pub/sub (SSUBSCRIBE and SPUBLISH, Redis 7 or later);
// when a resharding moves a primitive's slot, the Client subscribes again on the new owner and
// wakes its waiters to look again.
//
// # Errors
//
// Compare errors with errors.Is. A call that does not get what it asked for without waiting
// (TryLock, TryAcquire) returns false and no error: that is a result. A blocking call whose
// context ends first returns the context's cause and leaves the primitive unchanged. Errors
// from Redis itself are wrapped with an "aqs: redis:" prefix and keep their cause. The errors
// shared by every package are ErrClosed, ErrLockLost, ErrReleased, ErrNotOwner,
// ErrInvalidArgument, ErrWrongType and ErrReplicaSync; package rwlock adds ErrUpgrade, package
// semaphore its own.
//
// # Options
//
// Each call takes the options that apply to it, as types of their own: Lock takes a
// LockOption, TryLock a TryLockOption, and so on. An option a call cannot take, such as a wait
// bound for a Lock that waits until its context is done or a fencing token for a read hold,
// does not compile. A bad value (WithLease(0), WithWait(-1s), the zero LeaseOption or
// WaitOption, a nil option) fails the call with an error matching ErrInvalidArgument before it
// changes anything.
//
// A primitive's New takes its package's Option, made by that package's With functions, so
// that an option of another primitive does not compile either. Every primitive package has
// WithWaiterTimeout, with one meaning and one bound: how long a waiter may go unheard of
// before it is dropped (at least 30ms; 5s by default). A bad value, or a zero Option, fails New
// with an error matching ErrInvalidArgument.
package aqs
