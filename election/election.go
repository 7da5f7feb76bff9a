package election

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/excl"
	"github.com/redaqs/aqs/internal/layout"
	"github.com/redaqs/aqs/internal/scripts"
)

// MaxValue is the longest value a leader may have, in bytes: a value travels to every
// observer with each change, so it is meant to say who leads and where to reach it, not to
// carry data.
const MaxValue = 64 << 10

// rideWindow is the fair lock's (see package fair): the election's candidates queue on the
// fair lock of its name, with the same local hand-off.
const rideWindow = 2 * time.Millisecond

// giveBackGrace is how long a failed campaign whose context ended waits for the lock's
// release before it returns and leaves the release to the background (the acquire engine's
// grace for its own clean-ups).
const giveBackGrace = 25 * time.Millisecond

// Option configures an Election at New; this package's With functions make them. A zero
// Option is an invalid argument.
type Option struct{ s *core.Setting }

// WithWaiterTimeout sets how long a queued candidate may go unheard of before it is dropped
// from the queue: a candidate whose process died stalls those behind it at most this long. It
// has the meaning and bounds of every package's WithWaiterTimeout (at least 30ms; 5s by
// default). It does not bound how long a dead leader keeps leading: that is the Client's
// watchdog timeout (aqs.WithWatchdogTimeout).
func WithWaiterTimeout(d time.Duration) Option { return Option{core.WaiterTimeout(d)} }

// Leadership is a leader as everyone sees it: its value and its fencing token.
type Leadership struct {
	// Value is the value the leader campaigned with, or its last Proclaim's.
	Value string
	// Token is the leader's fencing token, the one aqs.FencingToken gives its leading
	// context: every later leader's is greater. A leader's Proclaim does not change it.
	Token int64
	// Client is the ID of the aqs Client the leader campaigned through (aqs.Client.ID).
	Client string
}

// Election is the leader election of one name. Create it with New; it is safe for concurrent
// use, and any number of Election values of a name, in any processes, are one election.
type Election struct {
	rt   *core.Runtime
	x    *excl.Lock
	name string
	key  string   // the fair lock's key
	keys []string // the lock key and the leader record (also the channel of changes)
}

// New returns the election of the given name. Any bytes make a valid name, but it must not be
// empty. Its candidates wait on the fair lock of that name: the election and fair.New(c, name)
// exclude each other (see the package doc). Creating an Election touches no key.
func New(c *aqs.Client, name string, opts ...Option) (*Election, error) {
	timeout, err := core.Settings(opts, func(o Option) *core.Setting { return o.s }, &struct{}{})
	if err != nil {
		return nil, err
	}
	rt := core.RuntimeOf(c)
	x, err := excl.New(rt, name, excl.Config{
		Kind: "election", WaiterTimeout: timeout, Board: rideWindow, Beside: layout.ElectionSuffix,
		// ctx bounds the campaign, not the leadership, as in etcd: a leader campaigns with
		// whatever context it waits with, and leads until Resign or the lease's loss.
		Detached: true,
	})
	if err != nil {
		return nil, err
	}
	return &Election{rt: rt, x: x, name: name, key: x.Key(), keys: []string{x.Key(), x.Key() + layout.ElectionSuffix}}, nil
}

// Name returns the election's name, as given to New.
func (e *Election) Name() string { return e.name }

// Keys returns the election's Redis keys: the fair lock's keys (its Keys), then the leader
// record, "<prefix>:{<name>}:e", which is also the channel its changes are published on.
func (e *Election) Keys() []string { return append(e.x.Keys()[:3:3], e.keys[1]) }

// Campaign blocks until this candidate leads, or ctx is done. Candidates lead in the order
// their campaigns reached Redis (they queue on the fair lock of the election's name), each as
// soon as the leader before it resigned, or its lease ended (within the Client's watchdog
// timeout of its process's death). A candidate leads from the moment Redis records its value
// as the leader's, which Campaign waits for: Leader and Observe report it from then on.
//
// ctx bounds the campaign only. Campaign returns the leading context, which carries ctx's
// values but not its cancellation, and is cancelled when leadership ends, and only then: with
// cause aqs.ErrReleased after Resign, aqs.ErrLockLost when the lease can no longer be trusted
// (renewals failed for too long, or found the lease gone, as after aqs unlock --force), or
// aqs.ErrClosed with it after Client.Close. A leader that stops leading for its own reasons
// (its service shuts down) calls Resign, as a lock's holder calls Unlock. The leading
// context's Err reports a lease that is no longer trusted the moment it is asked, before the
// Client's watchdog has run: a leader that checks Err before each act of leadership never acts after
// its lease may have ended, even in a process that was stopped and resumed. Its fencing token
// is aqs.FencingToken(leading), which a leader passes to the resources it writes.
//
// On failure Campaign returns context.Cause(ctx), or the Redis error, and leaves nothing
// behind: the candidate leaves the queue, and a leadership handed to it in that instant
// passes on. It returns by ctx's end whatever the servers do: a lock granted to it that Redis
// cannot take back by then (a failover) is given back in the background, as the fair lock's
// calls do. A ctx that leads this election already fails with aqs.ErrInvalidArgument, as
// does a value longer than MaxValue. After Client.Close it fails with aqs.ErrClosed.
func (e *Election) Campaign(ctx context.Context, value string) (context.Context, error) {
	if err := e.rt.Check(); err != nil {
		return nil, err
	}
	if len(value) > MaxValue {
		return nil, core.Invalid("election: the value of %q is %d bytes, over MaxValue", e.name, len(value))
	}
	// A leader campaigning again would wait for itself, or, as the lock's re-entry, lead a
	// second time under one lease: neither is what a candidate means.
	if e.rt.Held(ctx, e.key) != nil {
		return nil, core.Invalid("election: the context leads %q already (or holds its fair lock)", e.name)
	}
	held, _, err := e.x.Acquire(ctx, core.LockConfig{Token: true}, true)
	if err != nil {
		return nil, err
	}
	h := e.rt.HoldOf(held, e.key)
	if h == nil { // lost before it could be looked at
		_ = e.x.Unlock(held)
		return nil, fmt.Errorf("election: campaign %q: %w", e.name, aqs.ErrLockLost)
	}
	lease := strconv.FormatInt(e.rt.Cfg.WatchdogTimeout.Milliseconds(), 10)
	cmd, acked := e.rt.RunReplicated(ctx, scripts.ElectLead, e.keys, []any{h.ID, value, lease, e.rt.PublishCommand()})
	v, err := cmd.Result()
	switch {
	case err != nil:
		err = core.RedisError(e.key, err)
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
	case v == int64(0):
		err = fmt.Errorf("election: campaign %q: the lock was lost before its holder could lead: %w", e.name, aqs.ErrLockLost)
	case !acked:
		err = fmt.Errorf("election: campaign %q: fewer replicas than required acknowledged the leader's record: %w", e.name, aqs.ErrReplicaSync)
	}
	if err != nil {
		e.giveBack(ctx, held)
		return nil, err
	}
	return &leading{Context: held, h: h}, nil
}

// giveBack releases the lock of a failed campaign: the lock goes to the next candidate, and a
// record this hold may have written names a holder that no longer holds, which every reader
// takes for no leader. The release is waited for until ctx ends, and giveBackGrace more;
// beyond, it goes on in the background (the Client counts the campaign in Deferred), so that
// Campaign returns by its deadline when Redis cannot be reached.
func (e *Election) giveBack(ctx context.Context, held context.Context) {
	done := make(chan struct{})
	release := func(context.Context) {
		defer close(done)
		if err := e.x.Unlock(held); err != nil && !errors.Is(err, aqs.ErrNotOwner) {
			e.rt.Logger().Warn("aqs: election: giving back a failed campaign", "name", e.name, "err", err)
		}
	}
	if !e.rt.Go(release) {
		release(nil) // the Client is closed: the release fails at once
		return
	}
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	t := time.NewTimer(giveBackGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		e.rt.Defer()
	}
}

// leading is a leading context: the lock's held context, whose Err also ends the hold at once
// when its lease is no longer trusted (see Campaign), and which tells its hold (leadKey) from
// a hold of the fair lock of the election's name, which leads nothing.
type leading struct {
	context.Context
	h *core.Hold
}

func (c *leading) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if c.h.Expire() {
		// Expire ended the hold, which cancels its held contexts, unless it had ended already:
		// a release on its way cancels them too, in a moment, with its own cause.
		if err := c.Context.Err(); err != nil {
			return err
		}
		return context.Canceled
	}
	return nil
}

// leadKey is the key under which a leading context, and every context derived from it, gives
// the hold it leads with, for the lock key key.
type leadKey struct{ key string }

func (c *leading) Value(key any) any {
	if k, ok := key.(leadKey); ok && k.key == c.h.Key {
		return c.h
	}
	return c.Context.Value(key)
}

// leader returns the hold with which ctx leads the election: the hold of ctx's innermost
// acquisition of the election's lock when a Campaign made it, else nil.
func (e *Election) leader(ctx context.Context) *core.Hold {
	h := e.rt.HoldOf(ctx, e.key)
	if h == nil || ctx.Value(leadKey{e.key}) != h {
		return nil
	}
	return h
}

// Proclaim changes the leader's value, keeping its leadership and fencing token; Leader and
// Observe report the new value from then on. leading is the context Campaign returned, or a
// context derived from it, whose deadline, if any, bounds the call; the call ends anyway when
// leadership does.
//
// It fails with an error matching aqs.ErrNotOwner when leading does not lead this election
// (it never did, or resigned), and with one matching aqs.ErrLockLost when the leadership was
// lost; a context derived from leading that is done for another reason fails with its cause.
// The value is unchanged then. A value longer than MaxValue fails with
// aqs.ErrInvalidArgument. When Redis fails, the value may or may not have changed.
func (e *Election) Proclaim(leading context.Context, value string) error {
	if err := e.rt.Check(); err != nil {
		return err
	}
	if len(value) > MaxValue {
		return core.Invalid("election: the value of %q is %d bytes, over MaxValue", e.name, len(value))
	}
	h := e.leader(leading)
	if h == nil {
		return fmt.Errorf("election: proclaim %q: the context does not lead it: %w", e.name, aqs.ErrNotOwner)
	}
	if h.Expire() {
		return fmt.Errorf("election: proclaim %q: %w", e.name, errors.Join(aqs.ErrLockLost, aqs.ErrNotOwner))
	}
	if leading.Err() != nil {
		return context.Cause(leading)
	}
	cmd, acked := e.rt.RunReplicated(leading, scripts.ElectProclaim, e.keys, []any{h.ID, value, e.rt.PublishCommand()})
	n, err := cmd.Int64()
	switch {
	case err != nil:
		return core.RedisError(e.key, err)
	case n == 0:
		h.Lost()
		return fmt.Errorf("election: proclaim %q: the leadership was lost: %w", e.name, errors.Join(aqs.ErrLockLost, aqs.ErrNotOwner))
	case !acked:
		return fmt.Errorf("election: proclaim %q: fewer replicas than required acknowledged the value: %w", e.name, aqs.ErrReplicaSync)
	}
	return nil
}

// Resign ends the leadership of leading, the context Campaign returned, and hands it to the
// next candidate at once, in the same script; the leading context ends with cause
// aqs.ErrReleased. It fails as fair.Lock.Unlock does: with aqs.ErrNotOwner when leading does
// not lead (it never did, or resigned already), with aqs.ErrLockLost as well when the
// leadership was lost; when Redis fails, the leadership ends all the same, at the latest when
// its lease does.
func (e *Election) Resign(leading context.Context) error {
	if err := e.rt.Check(); err != nil {
		return err
	}
	if e.leader(leading) == nil {
		return fmt.Errorf("election: resign %q: the context does not lead it: %w", e.name, aqs.ErrNotOwner)
	}
	return e.x.Unlock(leading)
}

// Leader reads the current leader in one round trip: ok is false when nobody leads (no
// candidate, or the next one has not begun to lead yet). It is a snapshot: leadership may
// have changed by the time Leader returns. It fails with an error matching aqs.ErrWrongType
// when the election's lock key holds a value aqs did not write, and with aqs.ErrClosed after
// Client.Close.
func (e *Election) Leader(ctx context.Context) (Leadership, bool, error) {
	l, _, ok, err := e.read(ctx)
	return l, ok, err
}

// read reads the leader and its record's revision.
func (e *Election) read(ctx context.Context) (Leadership, int64, bool, error) {
	if err := e.rt.Check(); err != nil {
		return Leadership{}, 0, false, err
	}
	v, err := scripts.ElectLeader.Run(ctx, e.rt.Pipe, e.keys).Result()
	if err != nil {
		if errors.Is(err, redis.Nil) {
			return Leadership{}, 0, false, nil
		}
		return Leadership{}, 0, false, core.RedisError(e.key, err)
	}
	a, ok := v.([]any)
	if !ok || len(a) != 4 {
		return Leadership{}, 0, false, fmt.Errorf("election: unexpected leader reply %v", v)
	}
	var s [4]string
	for i := range a {
		if s[i], ok = a[i].(string); !ok {
			return Leadership{}, 0, false, fmt.Errorf("election: unexpected leader reply %v", v)
		}
	}
	token, err1 := strconv.ParseInt(s[1], 10, 64)
	rev, err2 := strconv.ParseInt(s[2], 10, 64)
	if err1 != nil || err2 != nil {
		return Leadership{}, 0, false, fmt.Errorf("election: unexpected leader reply %v", v)
	}
	return Leadership{Value: s[3], Token: token, Client: layout.ClientOf(s[0])}, rev, true, nil
}
