package core

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// When the replicas lack.
//
// With the replica-sync policy on, nothing can be acquired while the master has fewer
// replicas able to acknowledge than the policy requires: after a failover, until another
// replica has attached to the new master (after a controlled Sentinel failover with a single
// replica, Sentinel turns the old master into a replica only some ten seconds later), or
// while the replicas are down. Every acquisition then fails with a *ReplicaSyncError once its
// WAIT times out, and every attempt that joins a queue waits as long for its WAIT too. A
// queued waiter would learn it only on its turn, after every waiter ahead of it had waited out
// a WAIT of its own: the queue drains at one replica-sync timeout per waiter, and the waiters
// behind it wait for their deadlines.
//
// So the Client keeps a verdict per server (on Redis Cluster, per slot), from the WAIT of
// every acquisition and grant confirmation it makes there (settle) and, while calls of it wait
// there longer than the replica-sync timeout, from a probe of its own every replica-sync
// timeout (WAIT numreplicas timeout). While the last verdict says that the replicas lack, and
// is not older than the replica-sync timeout:
//
//   - a new call that would acquire fails at once with a *ReplicaSyncError (Queued unset,
//     Acked the verdict's count), sending nothing;
//   - a queued call leaves the queue at once with a *ReplicaSyncError (Queued set).
//
// An older verdict decides nothing: the next call goes to Redis, and its WAIT gives the next
// verdict, so that the Client finds the replicas back within about a replica-sync timeout. A
// WAIT that fails (the server cannot be reached) gives no verdict: the calls wait on, bounded
// by their contexts. A wait shorter than the replica-sync timeout costs nothing: the probes
// start only after it.

// ReplicaWatch is one queued call's watch of the replicas of the server it waits on.
type ReplicaWatch struct {
	w *replicaWatch
}

// replicaWatch is the verdict on one server (on Redis Cluster, on one slot's master).
type replicaWatch struct {
	rt    *Runtime
	route string // a key of the slot: the probes are sent to its master

	mu      sync.Mutex
	calls   int           // queued calls watching
	probing bool          // the probe goroutine runs
	lack    chan struct{} // closed while the verdict says the replicas lack
	acked   int           // the verdict's count, while it says they lack
	at      time.Time     // when the verdict was given
}

// ReplicasLack returns the error of a call that would acquire something in key's queue (whose
// slot route is in) while the replicas lack (see above); nil when the policy is off or they
// do not lack. queued says that the call is queued: it leaves the queue, as a queued call's
// watch makes it.
func (rt *Runtime) ReplicasLack(route, key string, queued bool) error {
	if !rt.SyncOn() {
		return nil
	}
	w := rt.replicaWatch(route)
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.lacking() {
		return nil
	}
	return w.errFor(key, queued)
}

// WatchReplicas starts the watch of a call queued in key's queue, whose slot route is in (see
// above); nil when the policy is off. The caller must Stop it.
func (rt *Runtime) WatchReplicas(route string) *ReplicaWatch {
	if !rt.SyncOn() {
		return nil
	}
	w := rt.replicaWatch(route)
	w.mu.Lock()
	w.lacking() // an old verdict is dropped
	w.calls++
	start := !w.probing
	w.probing = true
	w.mu.Unlock()
	if start {
		rt.Go(w.probe)
	}
	return &ReplicaWatch{w: w}
}

// replicaWatch returns the verdict on route's server.
func (rt *Runtime) replicaWatch(route string) *replicaWatch {
	slot := 0
	if rt.Sharded {
		slot = Slot(route)
	}
	rt.watchMu.Lock()
	defer rt.watchMu.Unlock()
	if rt.watches == nil {
		rt.watches = map[int]*replicaWatch{}
	}
	w := rt.watches[slot]
	if w == nil {
		w = &replicaWatch{rt: rt, route: route, lack: make(chan struct{})}
		rt.watches[slot] = w
	}
	return w
}

// lacking reports whether the verdict says that the replicas lack, and is fresh; an old one
// is dropped. w.mu must be held.
func (w *replicaWatch) lacking() bool {
	select {
	case <-w.lack:
	default:
		return false
	}
	if time.Since(w.at) <= w.rt.Cfg.SyncTimeout {
		return true
	}
	w.lack = make(chan struct{})
	return false
}

// errFor is the error of a call on key that the verdict ends; w.mu must be held.
func (w *replicaWatch) errFor(key string, queued bool) error {
	return ReplicaSync(ReplicaSyncError{Key: key, Want: w.rt.Cfg.SyncReplicas, Acked: w.acked, Timeout: w.rt.Cfg.SyncTimeout,
		Queued: queued, Unsent: !queued})
}

// Lacking is closed while the replicas lack: the call must leave with Err. A nil watch's is
// nil (never closed).
func (x *ReplicaWatch) Lacking() <-chan struct{} {
	if x == nil {
		return nil
	}
	x.w.mu.Lock()
	defer x.w.mu.Unlock()
	return x.w.lack
}

// Err returns the error of a call on key that leaves the queue because the replicas lack.
func (x *ReplicaWatch) Err(key string) error {
	x.w.mu.Lock()
	defer x.w.mu.Unlock()
	return x.w.errFor(key, true)
}

// Stop ends the call's watch. A nil watch is fine.
func (x *ReplicaWatch) Stop() {
	if x == nil || x.w == nil {
		return
	}
	x.w.mu.Lock()
	x.w.calls--
	x.w.mu.Unlock()
	x.w = nil
}

// probe asks the server for its replicas every replica-sync timeout while calls wait there,
// the first time one timeout after it started (see above).
func (w *replicaWatch) probe(ctx context.Context) {
	every := w.rt.Cfg.SyncTimeout
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		w.mu.Lock()
		if w.calls == 0 || ctx.Err() != nil {
			w.probing = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		sent := time.Now()
		if n, err := w.ask(ctx); err == nil {
			w.saw(int(n))
		}
		t.Reset(max(every-time.Since(sent), time.Millisecond))
	}
}

// ask sends WAIT numreplicas timeout to the server.
func (w *replicaWatch) ask(ctx context.Context) (int64, error) {
	rt := w.rt
	ctx, cancel := context.WithTimeout(ctx, 2*rt.Cfg.SyncTimeout+time.Second)
	defer cancel()
	var c interface {
		Do(context.Context, ...any) *redis.Cmd
	} = rt.Redis
	if cc, ok := rt.Redis.(*redis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, w.route)
		if err != nil {
			return 0, err
		}
		c = node
	}
	return c.Do(ctx, "WAIT", rt.Cfg.SyncReplicas, rt.Cfg.SyncTimeout.Milliseconds()).Int64()
}

// saw records a WAIT's answer on the server: n replicas acknowledged.
func (w *replicaWatch) saw(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.at = time.Now()
	lacking := w.lacking()
	switch {
	case n >= w.rt.Cfg.SyncReplicas && lacking:
		w.lack = make(chan struct{})
	case n < w.rt.Cfg.SyncReplicas:
		w.acked = n
		if !lacking {
			close(w.lack)
		}
	}
}

// sawWait records the answer of a WAIT sent after a call in key's slot (RunAcquire, Acquire),
// whether the call acquired anything or not: a WAIT that failed tells nothing.
func (rt *Runtime) sawWait(key string, wait *redis.Cmd) {
	if n, err := wait.Int64(); err == nil {
		rt.replicaWatch(key).saw(int(n))
	}
}
