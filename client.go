package aqs

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/internal/core"
)

// Client is the runtime shared by every primitive of a process. It is safe for concurrent use.
type Client struct {
	rt *core.Runtime
}

// New returns a Client on rdb, which may be a *redis.Client, a *redis.ClusterClient (sharded
// pub/sub is then used) or a *redis.FailoverClient (Sentinel). It loads every script on every
// master, so an unreachable server or a bad option is reported here, with nothing left
// running. The Client does not close rdb.
//
// New also reads each master's maxmemory and maxmemory-policy (INFO memory, else CONFIG GET),
// and logs a warning when the server may evict keys (a limit, and a policy other than
// noeviction): an evicted lock key lets a second holder in. The warning goes to the logger of
// WithLogger, or to slog.Default() when none is given; a server that answers neither is not
// reported (Verify says what it could not check).
func New(ctx context.Context, rdb redis.UniversalClient, opts ...Option) (*Client, error) {
	cfg := core.DefaultConfig()
	for _, o := range opts {
		if o == nil {
			return nil, core.Invalid("nil option")
		}
		if err := o.(option)(&cfg); err != nil {
			return nil, err
		}
	}
	rt, err := core.NewRuntime(ctx, rdb, cfg)
	if err != nil {
		return nil, err
	}
	return &Client{rt: rt}, nil
}

// Close stops lease renewals and subscriptions. Held contexts are cancelled with a cause that
// matches both ErrLockLost and ErrClosed, since their leases are no longer renewed. Close does
// not delete held locks: they expire at the end of their lease. Every call after Close fails
// with ErrClosed. Close is idempotent and always returns nil.
func (c *Client) Close() error { return c.rt.Close() }

// ID returns the Client's random id, the stem of every hold id it issues.
func (c *Client) ID() string { return c.rt.ID }

// The primitives' packages reach a Client's runtime through core.RuntimeOf.
func init() {
	core.RuntimeOf = func(client any) *core.Runtime {
		if c, _ := client.(*Client); c != nil {
			return c.rt
		}
		return nil
	}
}

// Option configures a Client: WithWatchdogTimeout, WithKeyPrefix, WithReplicaSync,
// WithObserver and the other With functions of this package make them.
type Option interface{ clientOption() }

// option is the one implementation of Option.
type option func(*core.Config) error

func (option) clientOption() {}

// WithWatchdogTimeout sets the lease of holds taken without WithLease. The watchdog renews
// such holds every third of it; a holder whose process dies keeps the lock at most this long.
// It must be at least 30ms. The default is 30s.
func WithWatchdogTimeout(d time.Duration) Option {
	return option(func(c *core.Config) error {
		if d < 30*time.Millisecond {
			return core.Invalid("watchdog timeout %v is below 30ms", d)
		}
		c.WatchdogTimeout = d
		return nil
	})
}

// WithKeyPrefix sets the prefix of every key and channel: "<prefix>:{<name>}…". It must be
// non-empty and contain no brace. The default is "aqs".
func WithKeyPrefix(prefix string) Option {
	return option(func(c *core.Config) error {
		if err := core.ValidPrefix(prefix); err != nil {
			return err
		}
		c.Prefix = prefix
		return nil
	})
}

// WithLogger sets where the Client reports lost leases and failed renewals, and where New
// warns about a server that may evict keys. The default discards the reports and sends New's
// warning to slog.Default().
func WithLogger(l *slog.Logger) Option {
	return option(func(c *core.Config) error {
		if l == nil {
			return core.Invalid("nil logger")
		}
		c.Logger, c.LoggerSet = l, true
		return nil
	})
}

// WithReplicaSync makes every acquisition wait until at least replicas replicas of the
// master acknowledged it, with Redis's WAIT replicas timeout sent right after the acquiring
// call on its connection. An acquisition they do not acknowledge within timeout is undone
// and fails with an error matching ErrReplicaSync (a *ReplicaSyncError, which says how many
// acknowledged); so is one whose WAIT fails. A lock or permits handed over to a waiter by
// someone else's release are confirmed by the waiter the same way before its call returns.
// A lock reported as acquired then survives the failover to any replica that acknowledged it
// (see "Failover and replica sync" in the package documentation for the limits).
//
// While too few replicas acknowledge (after a failover, before a replica has attached to the
// new master; while the replicas are down), nothing can be acquired, and calls do not wait
// for it: a call queued behind others leaves the queue within about two timeouts, and a new
// call fails at once while the Client's last WAIT on that server, less than timeout ago,
// found too few, each with a *ReplicaSyncError. A Client with calls queued on a server asks
// its replicas itself (WAIT) every timeout, so that it knows when they are back.
//
// It costs every attempt to acquire, successful or not (WAIT is sent with the attempt, before
// its outcome is known), the time the replicas take to acknowledge it: about one round trip
// from the master to them, plus a round trip of the waiter's own when a lock or permits are
// handed to it. Releases and renewals are unchanged. replicas must be at least 1; timeout at
// least 1ms, a whole number of milliseconds (WAIT's unit), and below the read timeout of rdb
// (5s by default in go-redis), since the pipelined WAIT's reply shares that read: New checks
// it. New also fails, with an error matching ErrReplicaSync, when the server does not accept
// WAIT. The default is off: acquisitions are replicated asynchronously, and a failover can
// lose one that was reported.
func WithReplicaSync(replicas int, timeout time.Duration) Option {
	return option(func(c *core.Config) error {
		if replicas < 1 {
			return core.Invalid("replica sync of %d replicas; it needs at least 1", replicas)
		}
		if timeout < time.Millisecond || timeout%time.Millisecond != 0 {
			return core.Invalid("replica sync timeout %v is not a whole number of milliseconds of at least 1ms", timeout)
		}
		c.SyncReplicas, c.SyncTimeout = replicas, timeout
		return nil
	})
}

// FencingToken returns the fencing token of the innermost lock held by ctx (a context returned
// by a successful Lock, or derived from one). Tokens of one lock name strictly increase from
// hold to hold, also across the expiry of its key, and a re-entry keeps its hold's token: a
// resource that remembers the highest token it has seen and refuses lower ones cannot be
// written by a stale holder.
//
// The token is assigned in Redis on the first request during the hold (one round trip; later
// requests are answered locally), so locks whose holders never ask pay nothing for it; ask
// with the lock option WithFencingToken to have it assigned by the acquisition itself. It
// fails with ErrNotOwner when ctx holds no lock and with ErrLockLost when the hold was lost
// before a token was assigned. Like Unlock, it works with a done held context.
func FencingToken(ctx context.Context) (int64, error) { return core.Token(ctx) }
