package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/internal/scripts"
)

// Replica sync.
//
// Redis replicates asynchronously: a master that acknowledged an acquisition and died before
// its replica received it leaves, after the failover, a lock that nobody holds in Redis while
// its holder believes it holds it, and the next caller gets it too. With the policy on
// (aqs.WithReplicaSync), every acquisition is followed by WAIT numreplicas timeout, and only
// an acquisition that enough replicas acknowledged is reported as acquired; one they did not
// acknowledge in time is undone and the caller gets a *ReplicaSyncError. The policy is off by
// default: WAIT costs every acquisition a round trip to the replicas.
//
// WAIT blocks until the replicas acknowledged the replication offset of the last write made
// on its own connection. So it must run on the acquisition's connection: it goes into one
// pipeline with the acquiring call (go-redis sends a pipeline over one connection). On Redis
// Cluster the pipeline is sent to the master of the key's slot through that node's own
// client, because the cluster client would route the keyless WAIT to any node; WAIT then
// counts that shard's replicas. An EVALSHA that met NOSCRIPT wrote nothing, so its WAIT
// proved nothing: the EVAL fallback is pipelined with WAIT again.
//
// What is acquired without an acquiring call of the caller's own: the fair lock's and the
// semaphores' releases (and give-ups, heartbeats and attempts that serve a queue) hand the
// lock or the permits to the next waiter inside their script, and the waiter learns it by a
// message, the release's reply, or its heartbeat. The releaser's WAIT would not protect the
// grantee, which the script notified before any WAIT could run. So the grantee confirms its
// grant itself, with a write of its own in the same slot (renewing its hold, or collecting its
// grant) pipelined with WAIT: replication is one ordered stream, so a replica that
// acknowledged that later write has the grant too. A grant not confirmed in time is undone
// like any acquisition. Releases run no WAIT: a release lost at a failover leaves the
// released hold in Redis until its lease ends, which delays others but never gives the lock
// to two holders.
//
// Renewals run no WAIT either: a renewal lost at a failover leaves the previous renewal's
// lease, which still runs past the next renewal (they come every third of the lease), so the
// holder's renewal after the failover extends it in time, provided the failover takes less
// than a third of the lease. Only the acquisition itself has no earlier state to fall back
// on.
//
// While the replicas cannot acknowledge at all, calls fail without waiting for each other's
// WAITs: see sync_watch.go.
//
// What the policy cannot do: WAIT makes a write durable on that many replicas, but a failover
// may still promote a replica that had not acknowledged it, when there are more replicas than
// numreplicas; ask for all of them, or rely on Sentinel's or Cluster's choice of the most
// advanced replica. And an undo that fails (the master died meanwhile) leaves the
// acquisition to end with its lease (a counting semaphore's permits have none: they stay
// taken).

// ReplicaSyncError reports an acquisition that fewer replicas than required acknowledged in
// time, or whose WAIT failed: the acquisition was undone and is not held. It matches
// ErrReplicaSync.
type ReplicaSyncError struct {
	Key     string        // the primitive's key
	Want    int           // the replicas required
	Acked   int           // the replicas that acknowledged in time (0 when WAIT failed)
	Timeout time.Duration // how long WAIT waited
	// Err is WAIT's own error, when it failed (the server refuses WAIT, or the connection
	// broke); nil when it answered with too few replicas.
	Err error
	// UndoErr is the undo's error. When the server could not be reached, the undo is tried
	// again in the background for a few seconds (a failover); otherwise, or when those fail,
	// the acquisition ends with its lease.
	UndoErr error
	// Queued: nothing was acquired; the call was queued, and left the queue because too few
	// replicas acknowledged the Client's acquisitions (or its probe) while it waited (see
	// sync_watch.go).
	Queued bool
	// Unsent: nothing was sent; too few replicas acknowledged the Client's acquisitions (or
	// its probe) on the server a moment before the call (see sync_watch.go).
	Unsent bool
}

func (e *ReplicaSyncError) Error() string {
	var msg string
	switch {
	case e.Queued:
		return fmt.Sprintf("aqs: replica sync of %q: %d of %d replicas acknowledged within %v while the call waited; it left the queue without acquiring",
			e.Key, e.Acked, e.Want, e.Timeout)
	case e.Unsent:
		return fmt.Sprintf("aqs: replica sync of %q: %d of %d replicas acknowledged within %v a moment ago; nothing was sent",
			e.Key, e.Acked, e.Want, e.Timeout)
	}
	if e.Err != nil {
		msg = fmt.Sprintf("aqs: replica sync of %q: WAIT %d %d failed: %v", e.Key, e.Want,
			e.Timeout.Milliseconds(), e.Err)
	} else {
		msg = fmt.Sprintf("aqs: replica sync of %q: %d of %d replicas acknowledged within %v",
			e.Key, e.Acked, e.Want, e.Timeout)
	}
	if e.UndoErr != nil {
		return msg + fmt.Sprintf("; undoing the acquisition failed (%v): it is tried again in the background "+
			"for a few seconds, and otherwise ends with its lease", e.UndoErr)
	}
	return msg + "; the acquisition was undone"
}

// Is makes errors.Is(err, ErrReplicaSync) true.
func (e *ReplicaSyncError) Is(target error) bool { return target == ErrReplicaSync }

// Unwrap returns WAIT's own error, if any.
func (e *ReplicaSyncError) Unwrap() error { return e.Err }

// undoTimeout bounds the undo of an acquisition the replicas did not acknowledge; undoBound,
// its attempts in the background when the master could not be reached (below the 10s for
// which a counting acquisition's key of its own, by which it is undone, lives).
const (
	undoTimeout = time.Second
	undoBound   = 8 * time.Second
)

// SyncOn reports whether the replica-sync policy is on.
func (rt *Runtime) SyncOn() bool { return rt.Cfg.SyncReplicas > 0 }

// RunAcquire runs s, a script that may acquire, as Script.Run does. With the replica-sync
// policy on, WAIT follows the script on the same connection, and when acquired(reply) says the
// script acquired something that fewer replicas than required acknowledged in time (or WAIT
// failed), undo gives it back and the returned command fails with a *ReplicaSyncError. An
// attempt that acquired nothing needs no acknowledgement: its reply is returned as it is.
func (rt *Runtime) RunAcquire(ctx context.Context, s *scripts.Script, keys []string, args []any,
	acquired func(reply any) bool, undo func(context.Context) error) *redis.Cmd {
	if !rt.SyncOn() {
		return s.Run(ctx, rt.Pipe, keys, args...)
	}
	cmd, wait := rt.runSynced(ctx, s, keys, args)
	if wait != nil && cmd.Err() == nil && acquired(cmd.Val()) {
		if serr := rt.settle(ctx, keys[0], wait, undo); serr != nil {
			cmd.SetErr(serr)
		}
	}
	return cmd
}

// runSynced runs s with WAIT after it on the same connection (see synced), and the EVAL
// fallback when the server lacked the script, whose EVALSHA wrote nothing. It returns the
// script's command and WAIT's, nil when the pipeline could not be sent (the command then holds
// the error).
func (rt *Runtime) runSynced(ctx context.Context, s *scripts.Script, keys []string, args []any) (*redis.Cmd, *redis.Cmd) {
	var q *scripts.Call
	wait, err := rt.synced(ctx, keys[0], func(p redis.Pipeliner) { q = s.Queue(ctx, p, keys, args...) })
	if err == nil && scripts.IsNoScript(q.Cmd.Err()) {
		wait, err = rt.synced(ctx, keys[0], func(p redis.Pipeliner) { q.Retry(ctx, p) })
	}
	if err != nil {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(err)
		return cmd, nil
	}
	rt.sawWait(keys[0], wait)
	return q.Cmd, wait
}

// Acquire runs an acquiring call that is not a script: call sends it on c, which is the
// Client's pipe, or with the policy on a pipeline that WAIT follows. Once it ran,
// acquired reports whether it acquired anything; then, as for RunAcquire, too few
// acknowledgements undo it and Acquire returns the *ReplicaSyncError. Any other error is the
// call's own, read from what call kept.
func (rt *Runtime) Acquire(ctx context.Context, key string, call func(c scripts.Processor),
	acquired func() bool, undo func(context.Context) error) error {
	if !rt.SyncOn() {
		call(rt.Pipe)
		return nil
	}
	wait, err := rt.synced(ctx, key, func(p redis.Pipeliner) { call(p) })
	if err != nil {
		return err
	}
	rt.sawWait(key, wait)
	if acquired() {
		return rt.settle(ctx, key, wait, undo)
	}
	return nil
}

// RunReplicated runs s as Script.Run does and, with the replica-sync policy on, WAIT after it on
// the same connection, and reports whether enough replicas acknowledged it (with the policy
// off, whether it ran). For a write that must survive a failover whatever it is, and that a
// second run of recognises (a counting semaphore's release, which has no lease to end it).
func (rt *Runtime) RunReplicated(ctx context.Context, s *scripts.Script, keys []string, args []any) (*redis.Cmd, bool) {
	if !rt.SyncOn() {
		cmd := s.Run(ctx, rt.Pipe, keys, args...)
		return cmd, cmd.Err() == nil
	}
	cmd, wait := rt.runSynced(ctx, s, keys, args)
	if wait == nil {
		return cmd, false
	}
	n, werr := wait.Int64()
	return cmd, cmd.Err() == nil && werr == nil && int(n) >= rt.Cfg.SyncReplicas
}

// ConfirmGrant makes a waiter's grant (made by another call's script: see the comment at the
// top of this file) as durable as an acquisition: s, a script that writes in the grant's slot
// on the waiter's behalf (the renewal of its hold), is sent with WAIT after it; confirmed
// reports from its reply whether the grant is still there. Too few acknowledgements undo the grant and return a
// *ReplicaSyncError. It returns the write's reply. Policy off: nothing is sent, (nil, nil).
func (rt *Runtime) ConfirmGrant(ctx context.Context, s *scripts.Script, keys []string, args []any,
	confirmed func(reply any) bool, undo func(context.Context) error) (any, error) {
	if !rt.SyncOn() {
		return nil, nil
	}
	return rt.RunAcquire(ctx, s, keys, args, confirmed, undo).Result()
}

// synced sends what queue adds and then WAIT in one pipeline over one connection to the
// master of key's slot. It returns WAIT's command; err is set when the pipeline could not be
// sent at all (no node for the slot). Each command's own error is in its command.
func (rt *Runtime) synced(ctx context.Context, key string, queue func(redis.Pipeliner)) (*redis.Cmd, error) {
	var c redis.Cmdable = rt.Redis
	cc, cluster := rt.Redis.(*redis.ClusterClient)
	if cluster {
		node, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return nil, RedisError(key, err)
		}
		c = node
	}
	p := c.Pipeline()
	queue(p)
	wait := p.Do(ctx, "WAIT", rt.Cfg.SyncReplicas, rt.Cfg.SyncTimeout.Milliseconds())
	cmds, _ := p.Exec(ctx) // every command holds its own reply or error
	if cluster && len(cmds) > 0 && misrouted(cmds[0].Err()) {
		// The node's client does not follow a redirection, nor tell the cluster client of
		// one, as the cluster client's own calls do: the call fails, and the cluster client
		// reloads its slot map so that the next call goes to the slot's new master (after a
		// failover, a resharding).
		cc.ReloadState(ctx)
	}
	return wait, nil
}

// misrouted reports whether err says that the node no longer serves the slot, or cannot be
// reached.
func misrouted(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ") ||
		strings.HasPrefix(msg, "CLUSTERDOWN") || !isRedisReply(err)
}

// isRedisReply reports whether err is an error reply of the server, rather than a failure to
// reach it.
func isRedisReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// settle reads WAIT's reply after a call that acquired something, and undoes the acquisition
// when too few replicas acknowledged it (or WAIT failed).
func (rt *Runtime) settle(ctx context.Context, key string, wait *redis.Cmd, undo func(context.Context) error) error {
	n, err := wait.Int64()
	if err == nil && int(n) >= rt.Cfg.SyncReplicas {
		return nil
	}
	e := ReplicaSyncError{Key: key, Want: rt.Cfg.SyncReplicas, Acked: int(n), Timeout: rt.Cfg.SyncTimeout, Err: err}
	if err != nil {
		e.Acked = 0
	}
	// The undo must run even when ctx ended: the caller is told it does not hold.
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
	defer cancel()
	e.UndoErr = undo(uctx)
	if e.UndoErr != nil && (!isRedisReply(e.UndoErr) || Transient(e.UndoErr)) {
		// The master could not be reached (or the cluster refused the slot for the moment):
		// it may have died after the acquisition reached its replica, whose promotion then holds what the caller was told it does not
		// (a counting semaphore's permits for good). The undo is sent again in the
		// background, until the promoted replica answers it, for up to undoBound.
		rt.Go(func(rctx context.Context) {
			ctx, cancel := context.WithTimeout(rctx, undoBound)
			defer cancel()
			for pause := 50 * time.Millisecond; undo(ctx) != nil; pause = min(2*pause, time.Second) {
				select {
				case <-time.After(pause):
				case <-ctx.Done():
					return
				}
			}
		})
	}
	return ReplicaSync(e)
}

// checkSync validates the replica-sync policy against the Redis client at NewRuntime: WAIT's
// reply must arrive within the client's read timeout (it shares a pipeline's read), and every
// master must accept WAIT. Masters with fewer replicas than required now are reported to the
// logger only: replicas may attach later, and every acquisition checks anyway.
func checkSync(ctx context.Context, rdb redis.UniversalClient, cfg Config) error {
	if cfg.SyncReplicas == 0 {
		return nil
	}
	var read time.Duration
	switch c := rdb.(type) {
	case *redis.Client:
		read = c.Options().ReadTimeout
	case *redis.ClusterClient:
		read = c.Options().ReadTimeout
	}
	if read > 0 && cfg.SyncTimeout >= read {
		return Invalid("replica sync timeout %v is not below the Redis client's read timeout %v", cfg.SyncTimeout, read)
	}
	probe := func(ctx context.Context, node redis.UniversalClient, addr string) error {
		// WAIT 0 with a 1ms timeout returns at once: the replicas connected and up to date.
		n, err := node.Do(ctx, "WAIT", 0, 1).Int64()
		if err != nil {
			return fmt.Errorf("%w: the server %sdoes not accept WAIT, so the replica-sync policy cannot be used with it: %w",
				ErrReplicaSync, addr, err)
		}
		if int(n) < cfg.SyncReplicas {
			cfg.Logger.Warn("aqs: replica sync: fewer replicas than required are connected; acquisitions fail until they are",
				"server", addr, "replicas", n, "required", cfg.SyncReplicas)
		}
		return nil
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return probe(ctx, node, node.Options().Addr+" ")
		})
	}
	return probe(ctx, rdb, "")
}
