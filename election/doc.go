// Package election is leader election on Redis: of any number of candidates, in any
// processes, at most one leads at a time, and when it resigns or dies the next one leads. It is
// etcd's concurrency.Election (Campaign, Proclaim, Leader, Observe, Resign) on the fair lock
// of package fair.
//
// # Leading
//
// Candidates queue on the fair lock of the election's name, so they lead in the order their
// Campaign reached Redis: a standby takes over in arrival order, and a candidate that gives up
// (its context ends) leaves the queue at once. A candidate leads from the moment Redis records
// its value as the leader's, in the leader record beside the lock's keys, until its hold of the
// lock ends: Resign hands the lock to the next candidate in the same script; the Client's
// watchdog renews the lease while the process lives, and when it dies the lease ends within
// the Client's watchdog timeout (aqs.WithWatchdogTimeout, 30s by default), and the next
// candidate leads. That timeout is how long an election may go without a leader after a crash:
// a service that needs a quick takeover sets a short one on the Client it campaigns with.
//
// Campaign returns the leading context, which ends when leadership ends, before another
// candidate can lead: when renewals fail, the lease stops being trusted a margin before it can
// end in Redis (see package reentrant's held contexts). A leader does its work under that
// context and checks its Err before each act of leadership; the leading context's Err tells a
// lease that is no longer trusted at once, even in a process that was stopped (SIGSTOP, a long
// pause) and resumed before its watchdog ran.
//
// No lease is proof against everything: a process can be paused between its check of Err and
// its write. Each leader has a fencing token (Leadership.Token, aqs.FencingToken of the
// leading context), greater for every later leader: a resource that remembers the greatest
// token it saw, and refuses writes with a smaller one, is safe from a former leader.
//
// # Observing
//
// Leader reads who leads; Observe reports every change of leader and value, in order, from a
// subscription (see Observe). Each change is published by the script that makes it.
//
// # Keys and interplay
//
// An election's keys are those of the fair lock of its name ("<prefix>:{<name>}" and its
// queue) and the leader record "<prefix>:{<name>}:e" (a hash, which expires with the leader's
// lease), all in one Redis Cluster slot. The election and fair.New(c, name) are the same lock:
// a fair lock holder of the name excludes every leader, and waits in the same queue; so do
// `aqs run NAME` and `aqs run --elect NAME`. aqs inspect shows the lock and its queue, and
// aqs unlock --force ends a leadership as it ends any hold: the leader learns it at its next
// renewal, its leading context ends with aqs.ErrLockLost, and the next candidate leads at once.
//
// Under the Client's replica-sync policy (aqs.WithReplicaSync) a candidate leads only once the
// replicas acknowledged both its hold and its record, so a failover does not make a second
// leader; without it, a failover that loses the leader's hold lets another candidate lead
// before the former leader's renewal finds out, and only the fencing token tells them apart.
package election
