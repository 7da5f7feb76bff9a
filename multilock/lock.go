package multilock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/acquire"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/excl"
	"github.com/redaqs/aqs/internal/layout"
	"github.com/redaqs/aqs/internal/scripts"
)

// ErrCrossSlot is matched by the error of New on Redis Cluster when the names do not all live
// in one slot (see the package doc). That error also matches aqs.ErrInvalidArgument.
var ErrCrossSlot = errors.New("multilock: names in more than one Redis Cluster slot")

// Option configures a Lock at New; this package's With functions make them. A zero Option is
// an invalid argument.
type Option struct{ s *core.Setting }

// WithWaiterTimeout sets how long a queued waiter may go unheard of before it is dropped from
// the queues, and the names kept for it pass on: a waiter whose process died stalls those
// behind it at most this long. It has the meaning and bounds of every package's
// WithWaiterTimeout (at least 30ms; 5s by default).
func WithWaiterTimeout(d time.Duration) Option { return Option{core.WaiterTimeout(d)} }

// Lock is a lock on several names at once. Create it with New; it is safe for concurrent use.
type Lock struct {
	rt      *core.Runtime
	names   []string // in the order of their keys, without duplicates
	keys    []string // each name's lock key, queue and deadlines, in that order
	locks   []string // the hold's key, then each name's lock key: the renewal's keys
	holdKey string   // the key the Client files a hold under (it holds nothing in Redis)
	timeout string   // the waiter timeout in ms
	q       *acquire.Queue
	// def are the rule sets of calls with the default lease, without and with the fencing
	// token, made with the Lock.
	def  [2]rules
	what string // the names, for errors and events
}

// New returns the lock on the given names, in any order; duplicates are one name. Any bytes
// make a valid name, but not the empty one, and the list must not be empty. On Redis Cluster
// the names must share a slot (see the package doc), or New fails with an error matching
// ErrCrossSlot. Creating a Lock touches no key.
func New(c *aqs.Client, names []string, opts ...Option) (*Lock, error) {
	timeout, err := core.Settings(opts, func(o Option) *core.Setting { return o.s }, &struct{}{})
	if err != nil {
		return nil, err
	}
	rt := core.RuntimeOf(c)
	if rt == nil {
		return nil, core.Invalid("nil aqs client")
	}
	if len(names) == 0 {
		return nil, core.Invalid("multilock: no names")
	}
	type named struct{ name, key string }
	ns := make([]named, 0, len(names))
	for _, name := range names {
		key, err := rt.Key(name)
		if err != nil {
			return nil, err
		}
		ns = append(ns, named{name, key})
	}
	// One fixed order, the keys', for every request: not needed for fairness (a request joins
	// every queue in one script) but it makes equal sets one value.
	slices.SortFunc(ns, func(a, b named) int { return strings.Compare(a.key, b.key) })
	ns = slices.CompactFunc(ns, func(a, b named) bool { return a.key == b.key })
	if rt.Sharded {
		slot := core.Slot(ns[0].key)
		for _, n := range ns[1:] {
			if s := core.Slot(n.key); s != slot {
				return nil, fmt.Errorf("%w: %q is in slot %d, %q in slot %d; give the names one hash tag, as {tag}:name: %w",
					ErrCrossSlot, ns[0].name, slot, n.name, s, core.Invalid("multilock: names across slots"))
			}
		}
	}
	n := len(ns)
	l := &Lock{rt: rt, timeout: strconv.FormatInt(timeout.Milliseconds(), 10),
		names: make([]string, n), keys: make([]string, 0, 3*n), locks: make([]string, n+1)}
	// The hold's own key, in the slot of the first name: a Client files the hold under it, so
	// that it is this lock's and no single name's. It names the set by a 64-bit FNV-1a hash of
	// its keys (each with its length), and Unlock checks the hold's keys besides.
	h := uint64(14695981039346656037)
	mix := func(b byte) { h = (h ^ uint64(b)) * 1099511628211 }
	// Every name's queue, deadlines and grant channel, cut from one string.
	grant := layout.GrantChannel("", rt.ID) // ":c:<Client id>"
	size := 0
	for _, nm := range ns {
		size += 3*len(nm.key) + len(layout.QueueSuffix) + len(layout.DeadlineSuffix) + len(grant)
	}
	var b strings.Builder
	b.Grow(size)
	for _, nm := range ns {
		for _, suffix := range [...]string{layout.QueueSuffix, layout.DeadlineSuffix, grant} {
			b.WriteString(nm.key)
			b.WriteString(suffix)
		}
	}
	all, at := b.String(), 0
	cut := func(n int) string {
		at += n
		return all[at-n : at]
	}
	channels := make([]string, n)
	for i, nm := range ns {
		l.names[i] = nm.name
		l.keys = append(l.keys, nm.key, cut(len(nm.key)+len(layout.QueueSuffix)), cut(len(nm.key)+len(layout.DeadlineSuffix)))
		channels[i] = cut(len(nm.key) + len(grant))
		l.locks[1+i] = nm.key
		for k := len(nm.key); k > 0; k >>= 8 {
			mix(byte(k))
		}
		mix(0)
		for j := 0; j < len(nm.key); j++ {
			mix(nm.key[j])
		}
	}
	l.holdKey = ns[0].key + ":m:" + strconv.FormatUint(h, 36)
	l.locks[0] = l.holdKey
	l.what = strings.Join(l.names, ", ")

	cfg := acquire.Config{WaiterTimeout: timeout, Name: l.what, Key: l.holdKey, Parts: true,
		Grants: channels[0], More: channels[1:], Orphans: &core.Orphans{GiveBack: l.giveBack, Holders: l.holders}}
	// No local hand-off: a release always serves the queues in order, and a Queue of its own
	// per value is all the engine needs.
	l.q = acquire.New(rt, cfg)
	l.def[0] = rules{l: l, lease: l.leaseOf(0), leaseD: rt.Cfg.WatchdogTimeout}
	l.def[1] = l.def[0]
	l.def[1].token = true
	return l, nil
}

// giveBack passes on whatever Redis granted to hold, a hold id this Client no longer uses (see
// internal/core/orphan.go): its names, reserved or held, and its places in the queues.
func (l *Lock) giveBack(ctx context.Context, hold string) error {
	v, err := scripts.MultiGiveUp.Run(ctx, l.rt.Pipe, l.keys, hold, l.timeout, l.rt.PublishCommand()).Result()
	if err == nil {
		_, err = scripts.DecodeGiveUp(v)
	}
	return core.RedisError(l.locks[1], err)
}

// holders returns the hold ids that hold the names, or for which they are reserved.
func (l *Lock) holders(ctx context.Context) ([]string, error) {
	cmd := redis.NewSliceCmd(ctx, append([]any{"mget"}, anys(l.locks[1:])...)...)
	if err := l.rt.Pipe.Process(ctx, cmd); err != nil {
		return nil, core.RedisError(l.locks[1], err)
	}
	var out []string
	for _, v := range cmd.Val() {
		if s, ok := v.(string); ok {
			out = append(out, layout.HoldsIn(s)...)
		}
	}
	return out, nil
}

func anys(ss []string) []any {
	a := make([]any, len(ss))
	for i, s := range ss {
		a[i] = s
	}
	return a
}

// Names returns the lock's names, without duplicates, in the order their keys sort in (the
// order every script takes them in). The slice is the lock's own: do not modify it.
func (l *Lock) Names() []string { return l.names }

// Keys returns the Redis keys of every name: its lock key, its queue and its queue's
// deadlines, the names in the order of Names. The slice is the lock's own: do not modify it.
func (l *Lock) Keys() []string { return l.keys }

// Lock blocks until the lock holds every name, or ctx is done, and returns the held context:
// a child of ctx, cancelled when the hold ends (Unlock: cause aqs.ErrReleased) or can no
// longer be trusted (any name lost: aqs.ErrLockLost), carrying the hold's fencing token.
//
// On failure Lock returns context.Cause(ctx) (or the Redis error) and leaves nothing behind:
// it leaves every queue, and names kept for it pass on to the next waiters. It fails at once
// with aqs.ErrInvalidArgument when ctx holds this lock already, or one of its names through
// another lock (it would wait for itself), or for an invalid option. Options: aqs.WithLease,
// aqs.WithFencingToken.
func (l *Lock) Lock(ctx context.Context, opts ...aqs.LockOption) (context.Context, error) {
	cfg, err := core.ApplyOptions(opts)
	if err != nil {
		return nil, err
	}
	held, _, err := l.acquire(ctx, cfg, true)
	return held, err
}

// TryLock takes every name only if each is free and nobody waits for it; with
// aqs.WithWait(d) it joins the queues at their tails and waits up to d for its turn. Not
// getting the lock is a result, not an error: it returns (nil, false, nil) and leaves nothing
// behind. Otherwise it is Lock. Options: aqs.WithLease, aqs.WithFencingToken, aqs.WithWait.
func (l *Lock) TryLock(ctx context.Context, opts ...aqs.TryLockOption) (context.Context, bool, error) {
	cfg, err := core.ApplyOptions(opts)
	if err != nil {
		return nil, false, err
	}
	return l.acquire(ctx, cfg, false)
}

func (l *Lock) acquire(ctx context.Context, cfg core.LockConfig, block bool) (context.Context, bool, error) {
	if err := l.rt.Check(); err != nil {
		return nil, false, err
	}
	if ctx.Err() != nil {
		return nil, false, context.Cause(ctx)
	}
	if key, ok := l.rt.HeldAny(ctx, l.locks); ok {
		if i := slices.Index(l.locks, key); i > 0 {
			return nil, false, core.Invalid("multilock: the context holds %q already, through this or another lock; it would wait for itself", l.names[i-1])
		}
		return nil, false, core.Invalid("multilock: the context holds the lock on %s already; it is not reentrant", l.what)
	}
	r := &l.def[b2i(cfg.Token)]
	if cfg.Lease != 0 {
		r = &rules{l: l, lease: l.leaseOf(cfg.Lease), leaseD: cfg.Lease, token: cfg.Token}
	}
	won, ok, err := l.q.Acquire(ctx, &acquire.Call{
		Rules: r, Block: block, Wait: cfg.Wait, Primitive: "multilock",
		Hold: &acquire.HoldSpec{Key: l.holdKey, Lease: r.leaseD, Watchdog: cfg.Lease == 0, Renew: scripts.MultiRenew,
			RenewKeys: l.locks[1:], FetchToken: l.fetchToken, Token: cfg.Token, Release: l.Unlock},
	})
	return won.Held, ok, err
}

// Unlock releases the hold of ctx: every name goes to the live head of its queue, in one
// script, or is freed when nobody waits; the held context ends with cause aqs.ErrReleased.
// Unlock does not use ctx's cancellation, only its values, so it works with a held context
// that is already done.
//
// It returns an error matching aqs.ErrNotOwner, and changes nothing, when ctx does not hold
// this lock. When the hold had lost a name (its lease ran out, or fair's ForceUnlock ended
// it), the error matches both aqs.ErrNotOwner and aqs.ErrLockLost: that name is left as it
// is, and the names the hold still had are released. When Redis fails, Unlock returns that
// error and the hold is released all the same locally; names the release did not reach are
// handed on or freed when the lease ends.
func (l *Lock) Unlock(ctx context.Context) error {
	var hold string
	if a := l.rt.Held(ctx, l.holdKey); a != nil {
		if !slices.Equal(a.Hold().Keys(), l.locks) {
			// Another lock's hold whose own key is this lock's: their names' hashes met.
			return fmt.Errorf("multilock: unlock %s: %w", l.what, core.ErrNotOwner)
		}
		hold = a.Hold().ID
	}
	err := acquire.Unlock(l.q, ctx, l.holdKey, acquire.Op{Kind: "multilock", Verb: "unlock", Name: l.what}, l.release)
	if hold != "" && errors.Is(err, core.ErrLockLost) {
		// A hold found lost may still have its other names, which would otherwise wait for
		// their lease to end: they are released now (the release leaves a name it does not
		// have as it is).
		_, _ = scripts.MultiRelease.Run(context.WithoutCancel(ctx), l.rt.Pipe, l.keys, hold, l.rt.PublishCommand()).Result()
	}
	return err
}

func (l *Lock) release(ctx context.Context, e acquire.Ending) (scripts.Release, error) {
	var cmd *redis.Cmd
	if e.Once {
		cmd = scripts.MultiRelease.RunOnce(ctx, l.rt.Pipe, l.keys, e.Hold.ID, l.rt.PublishCommand())
	} else {
		cmd = scripts.MultiRelease.Run(ctx, l.rt.Pipe, l.keys, e.Hold.ID, l.rt.PublishCommand())
	}
	v, err := cmd.Result()
	if err != nil {
		return scripts.Release{}, core.RedisError(l.locks[1], err)
	}
	return scripts.DecodeRelease(v)
}

func (l *Lock) fetchToken(ctx context.Context, h *core.Hold) (int64, error) {
	t, err := scripts.MultiToken.RunInt(ctx, l.rt.Pipe, l.locks, h.ID)
	if err != nil {
		return 0, core.RedisError(l.locks[1], err)
	}
	return t, nil
}

// rules is the multi-lock's rule set for the calls of one lease.
type rules struct {
	l      *Lock
	lease  string // ms
	leaseD time.Duration
	token  bool // the fencing token is assigned at acquisition
}

// leaseOf returns a hold's lease in ms, as the scripts take it: lease, or the watchdog
// timeout for 0.
func (l *Lock) leaseOf(lease time.Duration) string {
	if lease == 0 {
		lease = l.rt.Cfg.WatchdogTimeout
	}
	return strconv.FormatInt(lease.Milliseconds(), 10)
}

func (r *rules) Attempt(ctx context.Context, hold string, t acquire.Try) (scripts.Attempt, error) {
	l := r.l
	v, err := l.rt.RunAcquire(ctx, scripts.MultiAcquire, l.keys,
		[]any{hold, r.lease, l.timeout, excl.Flag(t.Join), excl.Flag(t.First), l.rt.PublishCommand(), excl.Flag(r.token)}, excl.TookIt,
		func(ctx context.Context) error { return r.GiveUp(ctx, hold) }).Result()
	if err != nil {
		return scripts.Attempt{}, core.RedisError(l.locks[1], err)
	}
	return scripts.DecodeAttempt(v)
}

func (r *rules) GiveUp(ctx context.Context, hold string) error {
	l := r.l
	v, err := scripts.MultiGiveUp.Run(ctx, l.rt.Pipe, l.keys, hold, l.timeout, l.rt.PublishCommand()).Result()
	if err == nil {
		_, err = scripts.DecodeGiveUp(v)
	}
	return core.RedisError(l.locks[1], err)
}

func (r *rules) Beat(hold string) *core.Beat {
	l := r.l
	return &core.Beat{Keys: l.keys, Script: scripts.MultiHeartbeat, Args: []any{hold, l.timeout, l.rt.PublishCommand()}}
}

// Confirm confirms, under the replica-sync policy, a hold that a heartbeat found complete:
// the renewal of every name to the full lease, with WAIT after it.
func (r *rules) Confirm(ctx context.Context, hold string) error {
	l := r.l
	v, err := l.rt.ConfirmGrant(ctx, scripts.MultiRenew, l.locks, []any{hold, r.lease},
		func(reply any) bool { return reply == int64(1) }, func(ctx context.Context) error { return r.GiveUp(ctx, hold) })
	if err != nil {
		return core.RedisError(l.locks[1], err)
	}
	if v != int64(1) {
		return fmt.Errorf("multilock: lock on %s: the names were gone when confirmed: %w", l.what, core.ErrLockLost)
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
