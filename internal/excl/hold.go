package excl

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/internal/acquire"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/scripts"
)

// Side is an exclusive hold's machinery on one key, whose value is an exclusive lock value
// (see internal/scripts/_lock_value.lua: hold id, count, fencing token, lease end): re-entry,
// the fencing token, the renewal and grant confirmation, the held context's grant, and the
// release sent through the engine. The exclusive locks (Lock) and the read-write lock's write
// side each have one, so that a write hold and a lock's hold are the same hold in every step
// after its acquisition; they differ in their acquire and release scripts only (the write
// side shares its queue with readers).
type Side struct {
	RT *core.Runtime
	// Key is the lock value's key.
	Key string
	// Kind and Name name the lock in errors ("reentrant", "fair", "rwlock"); Primitive in the
	// events of the Client's observer ("reentrant", "fair", "rwlock-write").
	Kind, Name, Primitive string
	// Queue is the engine's queue of the lock's name on RT.
	Queue *acquire.Queue
	// Unlock ends the acquisition a held context holds: what a held context of a call that
	// won as its context ended is given back with (acquire.HoldSpec.Release).
	Unlock func(held context.Context) error
	// RenewKeys are keys that the hold's renewals extend with the lock key (lock_renew.lua's
	// KEYS[2]); none for a plain lock.
	RenewKeys []string
}

// Lease returns the lease a new hold gets: the fixed lease, or the watchdog timeout.
func (s *Side) Lease(cfg core.LockConfig) time.Duration {
	if cfg.Lease == 0 {
		return s.RT.Cfg.WatchdogTimeout
	}
	return cfg.Lease
}

// Hold is the engine's description of a hold of this side with lease: renewed by the
// watchdog when watchdog is set, with its fencing token fetched at acquisition when token is.
func (s *Side) Hold(lease time.Duration, watchdog, token bool) *acquire.HoldSpec {
	return &acquire.HoldSpec{Key: s.Key, Lease: lease, Watchdog: watchdog, Renew: scripts.LockRenew,
		RenewKeys: s.RenewKeys, FetchToken: s.FetchToken, Token: token, Release: s.Unlock}
}

// FetchToken asks Redis for a hold's fencing token (lock_token.lua).
func (s *Side) FetchToken(ctx context.Context, h *core.Hold) (int64, error) {
	t, err := scripts.LockToken.RunInt(ctx, s.RT.Pipe, []string{s.Key}, h.ID)
	if err != nil {
		return 0, core.RedisError(s.Key, err)
	}
	return t, nil
}

// Reenter takes the side again for a context that holds it with h (lock_reenter.lua),
// through the engine's re-entry (see acquire.Queue.Reenter).
func (s *Side) Reenter(ctx context.Context, h *core.Hold, cfg core.LockConfig) (context.Context, bool, error) {
	return s.Queue.Reenter(ctx, h, cfg.Lease, acquire.Reentry{
		Send:      s.reenter,
		Grant:     core.Grant{Key: s.Key, Renew: scripts.LockRenew, FetchToken: s.FetchToken},
		Token:     cfg.Token,
		Primitive: s.Primitive,
		What:      acquire.Op{Kind: s.Kind, Verb: "re-enter", Name: s.Name},
	})
}

func (s *Side) reenter(ctx context.Context, hold string, lease time.Duration) (bool, error) {
	ok, err := scripts.Reenter(ctx, s.RT.Pipe, s.Key, hold, lease)
	return ok, core.RedisError(s.Key, err)
}

// Confirm confirms a grant under the replica-sync policy: the grantee's write is the renewal
// of its hold to the full lease (ms), which also replaces the short first lease of a grant.
// giveUp passes the grant on when the confirmation cannot be had.
func (s *Side) Confirm(ctx context.Context, hold, lease string, giveUp func(context.Context) error) error {
	v, err := s.RT.ConfirmGrant(ctx, scripts.LockRenew, []string{s.Key}, []any{hold, lease},
		func(reply any) bool { return reply == int64(1) }, giveUp)
	if err != nil {
		return core.RedisError(s.Key, err)
	}
	if v != int64(1) {
		return fmt.Errorf("%s: lock %q: the grant was gone when confirmed: %w", s.Kind, s.Name, core.ErrLockLost)
	}
	return nil
}

// Release ends (last) or counts down the acquisition held by ctx through the engine (see
// acquire.Unlock), whose release script send runs.
func (s *Side) Release(ctx context.Context, send acquire.Sender[scripts.Release]) error {
	return acquire.Unlock(s.Queue, ctx, s.Key, acquire.Op{Kind: s.Kind, Verb: "unlock", Name: s.Name}, send)
}

// ReleaseToCond ends hold h, whatever its count, through the engine's release, whose send
// runs the script that also puts the waiter on a condition (cond_wait.lua, rw_cond_wait.lua).
// It reports whether Redis still had the hold.
func (s *Side) ReleaseToCond(ctx context.Context, h *core.Hold, trusted time.Time, send acquire.Sender[scripts.Release]) (bool, error) {
	r, err := acquire.End(s.Queue, ctx, h, true, false, trusted, send)
	if err != nil {
		return false, err
	}
	return !r.Gone(), nil
}

// Run runs a release script s on keys, once (see acquire.Ending) or as go-redis sends any
// call, and decodes its reply.
func (s *Side) Run(ctx context.Context, sc *scripts.Script, once bool, keys []string, args ...any) (scripts.Release, error) {
	var cmd *redis.Cmd
	if once {
		cmd = sc.RunOnce(ctx, s.RT.Pipe, keys, args...)
	} else {
		cmd = sc.Run(ctx, s.RT.Pipe, keys, args...)
	}
	v, err := cmd.Result()
	if err != nil {
		return scripts.Release{}, core.RedisError(s.Key, err)
	}
	return scripts.DecodeRelease(v)
}

// RunArgs is Run with a command line that sc.Args started.
func (s *Side) RunArgs(ctx context.Context, sc *scripts.Script, once bool, a []any) (scripts.Release, error) {
	var cmd *redis.Cmd
	if once {
		cmd = sc.RunOnceArgs(ctx, s.RT.Pipe, a)
	} else {
		cmd = sc.Run(ctx, s.RT.Pipe, unboxKeys(a), a[3+a[2].(int):]...)
	}
	v, err := cmd.Result()
	if err != nil {
		return scripts.Release{}, core.RedisError(s.Key, err)
	}
	return scripts.DecodeRelease(v)
}

// unboxKeys returns the keys of a command line that scripts.Script.Args started.
func unboxKeys(a []any) []string {
	keys := make([]string, a[2].(int))
	for i := range keys {
		keys[i] = a[3+i].(string)
	}
	return keys
}

// Flag is a script's boolean argument: "1" or "0", boxed once (a string put into an
// interface value is copied to the heap each time).
func Flag(b bool) any {
	if b {
		return one
	}
	return zero
}

var one, zero any = "1", "0"

// box returns strs as script arguments, boxed once for every call that sends them.
func box(strs ...string) []any {
	a := make([]any, len(strs))
	for i, s := range strs {
		a[i] = s
	}
	return a
}

// TookIt reports whether an attempt script's reply means that the attempt itself took the
// lock: the replies the replica-sync policy waits for and undoes. A grant made earlier and
// found by the attempt is confirmed by the rules' Confirm instead.
func TookIt(v any) bool {
	a, err := scripts.DecodeAttempt(v)
	return err == nil && a.Status == scripts.Acquired
}
