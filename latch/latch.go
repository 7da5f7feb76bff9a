package latch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/acquire"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/layout"
	"github.com/redaqs/aqs/internal/scripts"
)

// Latch is a distributed count-down latch. Create it with New; it is safe for concurrent use,
// and any number of Latch values, of any Clients, may share one name.
//
// Counts are not owned: CountDown lowers the count whoever calls it, and nothing records who
// has counted down or who still must. So a counter that crashes before its CountDown never
// counts down, and nobody can tell: the waiters wait until their context ends, or until the
// latch expires (see WithExpiry), and then get ErrNotSet. Bound Await with a context deadline
// when a counter may die.
//
// The waiters are served all at once: the CountDown that makes the count 0 wakes every one of
// them, of every Client, and none is served before another.
type Latch struct {
	rt            *core.Runtime
	name          string
	key           string // the count: a decimal string, expiring after expiry
	channel       string // every Client's waiters hear here that the count reached 0
	expiry        time.Duration
	waiterTimeout time.Duration
	q             *acquire.Queue
	rules         *awaiting
}

// Option configures a Latch at New; this package's With functions make them. Every primitive
// package's WithWaiterTimeout has the same bounds. A zero Option is an invalid argument.
type Option struct{ s *core.Setting }

// WithExpiry sets how long the latch's count lives after TrySetCount set it or a CountDown
// last changed it: a latch that everyone abandoned is deleted then, and its waiters fail with
// ErrNotSet. Each CountDown starts the expiry over; a count that reached 0 stays 0 for this
// long. It must be at least 1s. The default is 24h.
func WithExpiry(d time.Duration) Option {
	return Option{core.Set(func(l *Latch) error {
		if d < time.Second {
			return core.Invalid("latch expiry %v is below 1s", d)
		}
		l.expiry = d
		return nil
	})}
}

// WithWaiterTimeout sets how often a waiter looks at the count when no message came: three
// times per timeout, by a heartbeat its Client batches with those of its other waiters. It is
// the fallback for a lost wake message (a Client reconnecting when the count reached 0): such
// a waiter returns at most about a third of the timeout late. It must be at least 30ms, and
// the default is 5s, as for every primitive package's WithWaiterTimeout.
func WithWaiterTimeout(d time.Duration) Option { return Option{core.WaiterTimeout(d)} }

// New returns the latch of the given name. Any bytes make a valid name, but it must not be
// empty. Creating a Latch touches no key: set its count with TrySetCount.
func New(c *aqs.Client, name string, opts ...Option) (*Latch, error) {
	rt := core.RuntimeOf(c)
	if rt == nil {
		return nil, core.Invalid("nil aqs client")
	}
	key, err := rt.Key(name)
	if err != nil {
		return nil, err
	}
	l := &Latch{rt: rt, name: name, key: key, channel: layout.LatchChannel(key), expiry: 24 * time.Hour}
	l.waiterTimeout, err = core.Settings(opts, func(o Option) *core.Setting { return o.s }, l)
	if err != nil {
		return nil, err
	}
	// The latch's channel is shared by every Client (one message must reach all of them), not
	// a grant channel of this Client's: nothing is ever granted to one waiter.
	l.q = acquire.Shared(rt, "latch", acquire.Config{Grants: l.channel, WaiterTimeout: l.waiterTimeout, Name: name, Key: key, WaitOnly: true})
	l.rules = &awaiting{l: l}
	return l, nil
}

// Name returns the latch's name.
func (l *Latch) Name() string { return l.name }

// Key returns the Redis key of the latch's count.
func (l *Latch) Key() string { return l.key }

// Keys returns every key of the latch: its count alone (its waiters are not recorded in Redis).
func (l *Latch) Keys() []string { return []string{l.key} }

// TrySetCount sets the count to n, only if the latch is not set or its count is 0, and
// reports whether it set it: false, with nothing changed, while a count above 0 is there. n
// must be at least 1. The count expires after the latch's expiry (WithExpiry).
//
// Setting a latch whose count is 0 starts it over: an Await that begins afterwards waits for
// the new count. A waiter that was woken by the count reaching 0 but had not yet looked at it
// again when the new count was set may wait for the new count too; a latch used once per name
// never meets that.
func (l *Latch) TrySetCount(ctx context.Context, n int) (bool, error) {
	if n < 1 {
		return false, core.Invalid("latch %q: count %d is below 1", l.name, n)
	}
	if err := l.rt.Check(); err != nil {
		return false, err
	}
	// A key of this call's own makes a second run of it (go-redis's retry after a lost reply)
	// answer as the first did, rather than report that a count it set itself was there.
	v, err := scripts.LatchSet.Run(ctx, l.rt.Pipe, []string{l.key, l.once()}, n, l.expiry.Milliseconds()).Result()
	if err != nil {
		return false, core.RedisError(l.key, err)
	}
	r, err := scripts.DecodeNumber(v)
	return r == 1, err
}

// CountDown lowers the count by one. The CountDown that makes it 0 wakes every waiter, of
// every Client, and the count stays 0 until the latch expires; a CountDown of a count that is
// 0 already changes nothing. Each CountDown that changes the count starts its expiry over. It
// fails with ErrNotSet, and changes nothing, on a latch not set (never set, or expired).
//
// CountDown does not use ctx's cancellation, only its values: a count-down cut short would
// leave the caller not knowing whether it counted. When its reply is lost it is sent again, for
// a few seconds, and counts once whatever the number of sends.
func (l *Latch) CountDown(ctx context.Context) error {
	if err := l.rt.Check(); err != nil {
		return err
	}
	keys := []string{l.key, l.once()}
	// Sent again while its outcome is unknown, as a release is: its own key makes every send
	// after the first change nothing (no hold is involved: nothing is ever "gone").
	v, err := acquire.Resend(l.q, ctx, func(ctx context.Context) (any, error) {
		return scripts.LatchCountDown.Run(ctx, l.rt.Pipe, keys, l.expiry.Milliseconds(),
			l.rt.PublishCommand(), l.channel).Result()
	})
	if err != nil {
		return core.RedisError(l.key, err)
	}
	n, err := scripts.DecodeNumber(v)
	if err == nil && n < 0 {
		return fmt.Errorf("latch %q: %w", l.name, ErrNotSet)
	}
	return err
}

// Count returns the count now: 0 when the latch is not set.
func (l *Latch) Count(ctx context.Context) (int, error) {
	if err := l.rt.Check(); err != nil {
		return 0, err
	}
	v, err := l.rt.Redis.Get(ctx, l.key).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, core.RedisError(l.key, err)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, core.WrongType(l.key) // a string, but not a count
	}
	return n, nil
}

// Await blocks until the count is 0 or ctx is done, and returns nil at once when the count is
// 0 already. It fails at once with ErrNotSet on a latch not set (never set, or expired), and
// with ErrNotSet when the latch expires while it waits.
//
// On failure Await returns context.Cause(ctx) (or the error), and leaves nothing behind: a
// waiter is not recorded in Redis, and its Client forgets it. If ctx is already done, Await
// fails without a call to Redis.
func (l *Latch) Await(ctx context.Context) error {
	_, _, err := l.q.Acquire(ctx, &acquire.Call{Rules: l.rules, Block: true, Primitive: "latch"})
	return err
}

// TryAwait reports whether the count is 0, without waiting; with aqs.WithWait(d) it waits up
// to d for it. A count still above 0 is a result, not an error: (false, nil). It fails with
// ErrNotSet as Await does.
func (l *Latch) TryAwait(ctx context.Context, opts ...aqs.WaitOption) (bool, error) {
	cfg, err := core.ApplyOptions(opts)
	if err != nil {
		return false, err
	}
	_, ok, err := l.q.Acquire(ctx, &acquire.Call{Rules: l.rules, Wait: cfg.Wait, Primitive: "latch"})
	return ok, err
}

// once returns a new key of one call's own (see _once.lua in internal/scripts).
func (l *Latch) once() string { return l.key + layout.OnceSuffix + l.rt.NewHoldID() }
