package semaphore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/acquire"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/layout"
	"github.com/redaqs/aqs/internal/scripts"
)

// Semaphore is a distributed counting semaphore. Create it with New; it is safe for concurrent
// use. Permits are not owned: Release gives permits back whoever took them, so a process that
// dies holding permits takes them with it (use Leased where that matters).
type Semaphore struct {
	base
	keys []string // s, q, d, g (see internal/scripts/sem_acquire.lua)
}

// New returns the counting semaphore of the given name. Any bytes make a valid name, but it
// must not be empty. Creating a Semaphore touches no key.
func New(c *aqs.Client, name string, opts ...Option) (*Semaphore, error) {
	b, err := newBase(core.RuntimeOf(c), name, opts)
	if err != nil {
		return nil, err
	}
	s := &Semaphore{base: b, keys: layout.CountingKeys(b.key)}
	s.queue("semaphore", &core.Orphans{GiveBack: s.giveBack, Holders: s.holders})
	return s, nil
}

// holders returns the hold ids of the grants not collected (see internal/core/orphan.go): a
// grant heard by its message is collected in the background (Collect), its hold id in use
// until then. Counting permits taken have no holder recorded.
func (s *Semaphore) holders(ctx context.Context) ([]string, error) {
	cmd := redis.NewStringSliceCmd(ctx, "zrange", s.keys[3], 0, -1)
	if err := s.rt.Pipe.Process(ctx, cmd); err != nil {
		return nil, core.RedisError(s.key, err)
	}
	holds := cmd.Val()
	for i, m := range holds {
		holds[i], _, _ = strings.Cut(m, " ")
	}
	return holds, nil
}

// giveBack gives back the permits granted to hold, a hold id this Client no longer uses (see
// internal/core/orphan.go): sem_give_up with no count finds the grant by the hold id.
func (s *Semaphore) giveBack(ctx context.Context, hold string) error {
	v, err := scripts.SemGiveUp.Run(ctx, s.rt.Pipe, s.keys, s.args(hold, 0, s.rt.PublishCommand())...).Result()
	if err != nil {
		return core.RedisError(s.key, err)
	}
	_, err = s.reply(v)
	return err
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Key returns the Redis key of the semaphore's permits; its other keys share its hash tag.
func (s *Semaphore) Key() string { return s.key }

// Keys returns every key of the semaphore: the permits, the queue, its deadlines and the
// grants not yet collected.
func (s *Semaphore) Keys() []string { return s.keys }

// TrySetPermits sets the semaphore's permits to k, all available, only if they were never
// set, and reports whether it set them.
func (s *Semaphore) TrySetPermits(ctx context.Context, k int) (bool, error) {
	return trySet(ctx, &s.base, s.keys, k, "c")
}

// AddPermits changes the total permits by delta, and the available permits with it: a
// positive delta serves the waiters it can, a negative one needs as many permits available
// (ErrInsufficientPermits otherwise; it never waits). Waiters that now ask for more than the
// total fail with ErrTooManyPermits. On a semaphore never set, it sets the permits to delta.
func (s *Semaphore) AddPermits(ctx context.Context, delta int) error {
	return add(ctx, &s.base, s.keys, delta, "c")
}

// Acquire blocks until n permits are granted or ctx is done. Waiters are served in arrival
// order. It fails at once with ErrTooManyPermits when n is above the total, and with ErrNotSet
// when the permits were never set (a semaphore made WithSize sets them instead). Acquire of 0
// permits succeeds at once, without a call to Redis, as in golang.org/x/sync/semaphore.
//
// On failure Acquire returns context.Cause(ctx) (or the error), and leaves the semaphore
// unchanged: it leaves the queue, and permits granted to it in the same instant go to the
// next waiters. If ctx is already done, Acquire fails without a call to Redis.
func (s *Semaphore) Acquire(ctx context.Context, n int) error {
	if n == 0 {
		return s.none(ctx, true)
	}
	if err := s.checkN("acquire", n); err != nil {
		return err
	}
	_, _, err := s.q.Acquire(ctx, &acquire.Call{Rules: &counting{s: s, n: n}, Block: true, Primitive: "semaphore"})
	return err
}

// TryAcquire takes n permits only if it can at once (they are available and nobody waits);
// with aqs.WithWait(d) it waits in the queue up to d. Not getting them is a result, not an
// error: (false, nil), and nothing is left behind. Counting permits have no lease and no
// fencing token, so aqs.WithWait is its only option. TryAcquire of 0 permits reports true at
// once, without a call to Redis.
func (s *Semaphore) TryAcquire(ctx context.Context, n int, opts ...aqs.WaitOption) (bool, error) {
	if err := s.checkN("acquire", n); err != nil {
		return false, err
	}
	cfg, err := core.ApplyOptions(opts)
	if err != nil {
		return false, err
	}
	if n == 0 {
		err := s.none(ctx, true)
		return err == nil, err
	}
	_, ok, err := s.q.Acquire(ctx, &acquire.Call{Rules: &counting{s: s, n: n}, Wait: cfg.Wait, Primitive: "semaphore"})
	return ok, err
}

// Release gives n permits back and grants them to the waiters it can now satisfy, in order.
// It fails with ErrOverRelease, and changes nothing, when that would make more permits
// available than the total. Release does not use ctx's cancellation, only its values: a
// release cut short would leave the outcome unknown. While Redis cannot be reached it tries
// again, for up to 8s (a failover of the master), and under the replica-sync policy
// (aqs.WithReplicaSync) it returns once enough replicas acknowledged the release, or after
// 3s of trying with a warning logged: counting permits have no lease, so a release a failover
// loses keeps them taken. Release of 0 permits succeeds at once, without a call to Redis.
func (s *Semaphore) Release(ctx context.Context, n int) error {
	if n == 0 {
		return s.none(ctx, false)
	}
	if err := s.checkN("release", n); err != nil {
		return err
	}
	return s.release(ctx, n, s.rt.NewHoldID(), false)
}

// release is Release of n permits, with the key of its own "<s>:r:<id>": a release of the same
// id within 10s is the same release (see sem_release.lua). bounded says that the release is
// an undo inside a call (a grant the call gives back, refused for want of acknowledgement or
// ended as it won): under the replica-sync policy it runs once, without waiting for the
// replicas, and the wait for them goes on in the background, because the call's refusal is
// owed to its caller by its deadline, and the caller's waiting for the replicas would not
// change what the call returns.
func (s *Semaphore) release(ctx context.Context, n int, id string, bounded bool) error {
	if err := s.rt.Check(); err != nil {
		return err
	}
	keys := append(s.keys[:4:4], s.key+layout.ReleaseSuffix+id)
	start := time.Now()
	var v any
	var err error
	if bounded && s.rt.SyncOn() {
		v, err = scripts.SemRelease.Run(ctx, s.rt.Pipe, keys, s.args(n, s.rt.PublishCommand(), s.rt.ID)...).Result()
		if err == nil {
			s.rt.Go(func(rctx context.Context) {
				if _, durable, _ := s.sendRelease(rctx, keys, n, start); !durable {
					s.unacked(n)
				}
			})
		}
	} else {
		var durable bool
		v, durable, err = s.sendRelease(ctx, keys, n, start)
		if err == nil && !durable {
			s.unacked(n)
		}
	}
	if err != nil {
		return core.RedisError(s.key, err)
	}
	r, err := s.reply(v)
	switch {
	case err != nil:
		return err
	case r.Status == scripts.SemNotSet && s.sized:
		return s.seed(ctx, s.keys, "c") // the permits it gives back are in the size (see WithSize)
	case r.Status == scripts.SemNotSet:
		return fmt.Errorf("semaphore %q: %w", s.name, ErrNotSet)
	case r.Status == scripts.SemOverRelease:
		return fmt.Errorf("semaphore %q: release of %d: %w", s.name, n, ErrOverRelease)
	}
	return nil
}

// sendRelease sends the release of n permits with keys (the last, its key of its own) until
// its outcome is known and, under the replica-sync policy, the replicas acknowledged it, and
// returns the last reply and whether they did. A key of its own makes a second run change
// nothing (see sem_release.lua), so when the outcome is unknown (the reply lost, go-redis's
// retries spent) it is sent again, for up to releaseWindow from start, rather than leaving the
// caller to guess whether its permits came back: counting permits have no lease, and a
// release that never reaches Redis (a master that died, until its replica is promoted) keeps
// them taken for good. Under the policy it is sent again as well until the replicas
// acknowledge it, while the next try could still be acknowledged within unackedWindow from
// start: a release that only the master had is lost at a failover (a master that died; the old
// master of a controlled failover, which its clients reach for a moment after the promotion),
// and a run again on the new master, where the key of its own is not, gives the permits back
// there.
func (s *Semaphore) sendRelease(ctx context.Context, keys []string, n int, start time.Time) (any, bool, error) {
	for delay := 20 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		cmd, durable := s.rt.RunReplicated(context.WithoutCancel(ctx), scripts.SemRelease, keys,
			s.args(n, s.rt.PublishCommand(), s.rt.ID))
		v, err := cmd.Result()
		var replied redis.Error
		next := time.Now().Add(delay)
		over := next.After(start.Add(releaseWindow))
		if err == nil {
			// It ran: what is left is the replicas' acknowledgement, which the next try
			// gets within a replica-sync timeout, or not.
			over = next.Add(s.rt.Cfg.SyncTimeout).After(start.Add(unackedWindow))
		}
		if durable || errors.As(err, &replied) && !core.Transient(err) || over || s.rt.Check() != nil {
			return v, durable, err
		}
		time.Sleep(delay) // a pause before sending again, not a wait for a condition
	}
}

// unacked logs a release of n permits that the replicas did not acknowledge.
func (s *Semaphore) unacked(n int) {
	s.rt.Logger().Warn("aqs: the replicas did not acknowledge a counting semaphore's release: a failover may lose it",
		"key", s.key, "permits", n)
}

// Available returns the permits available now (0 when never set).
func (s *Semaphore) Available(ctx context.Context) (int, error) {
	if err := s.rt.Check(); err != nil {
		return 0, err
	}
	v, err := s.rt.Redis.HMGet(ctx, s.key, "a", "q").Result()
	if err != nil {
		return 0, core.RedisError(s.key, err)
	}
	a, _ := v[0].(string)
	n, _ := strconv.ParseInt(a, 10, 64)
	if v[1] != nil {
		n += layout.Gate
	}
	return int(max(n, 0)), nil
}

// Drain takes every permit available now, whoever waits, and returns how many it took.
func (s *Semaphore) Drain(ctx context.Context) (int, error) {
	if err := s.rt.Check(); err != nil {
		return 0, err
	}
	n, err := scripts.SemDrain.RunInt(ctx, s.rt.Pipe, s.keys[:1], s.args()...)
	if err != nil {
		return 0, core.RedisError(s.key, err)
	}
	return int(n), nil
}

// releaseWindow bounds how long a counting release is sent again while its outcome is unknown:
// below the 10s for which a release's key of its own makes a run again change nothing
// (sem_release.lua). unackedWindow bounds it once it ran but, under the replica-sync policy,
// was not acknowledged: the time the Client may take to follow a controlled failover to the
// new master (its runs on the old one are lost); past it, replicas are missing, and sending
// again would not help.
const (
	releaseWindow = 8 * time.Second
	unackedWindow = 3 * time.Second
)

// counting is the counting semaphore's rules for the acquire engine, for one call asking n
// permits.
//
// Every attempt is a script, never a plain HINCRBY that a script would undo when it fails: a
// failed plain decrement, until its undo, makes every other caller see fewer permits than
// there are (a TryAcquire refused while permits are free, a Drain that takes too few), and lets
// a release beyond what was taken pass unseen. And every attempt has a key of its own (once,
// see sem_try.lua), which makes a second run of it (go-redis's retry after a lost reply) take
// nothing more, and by which an attempt whose reply was lost is settled (see unsure).
type counting struct {
	s    *Semaphore
	n    int
	last string // the key of the call's latest attempt
	// collecting is closed once the background collection of a grant heard by its message
	// ended (nil: there was none); removed, then, says whether it took the grant's record out
	// of g on the server it reached (see Collect and giveBackGrant).
	collecting <-chan struct{}
	removed    atomic.Bool
}

// Fast is the uncontended path: a script with one key and one argument, which changes nothing
// when it cannot take the permits.
func (c *counting) Fast(ctx context.Context, _ string) (bool, error) {
	s := c.s
	c.last = s.key + layout.AttemptSuffix + s.rt.NewHoldID()
	ok, err := s.rt.RunAcquire(ctx, scripts.SemTry, []string{s.key, c.last}, s.args(c.n),
		func(v any) bool { return v == int64(1) }, c.undoOf(c.last)).Int()
	if err != nil {
		return false, core.RedisError(s.key, err)
	}
	return ok == 1, nil
}

func (c *counting) Attempt(ctx context.Context, hold string, t acquire.Try) (scripts.Attempt, error) {
	a, err := c.attempt(ctx, hold, t)
	if a.Status == scripts.NotSet && c.s.sized {
		if err := c.s.seed(ctx, c.s.keys, "c"); err != nil {
			return scripts.Attempt{}, err
		}
		return c.attempt(ctx, hold, t)
	}
	return a, err
}

// attempt makes one run of sem_acquire.lua.
func (c *counting) attempt(ctx context.Context, hold string, t acquire.Try) (scripts.Attempt, error) {
	s := c.s
	c.last = s.key + layout.AttemptSuffix + s.rt.NewHoldID()
	v, err := s.rt.RunAcquire(ctx, scripts.SemAcquire,
		append(s.keys[:4:4], c.last, s.key+layout.WaiterSuffix+hold), s.args(hold, c.n, s.waiterTimeout.Milliseconds(), flag(t.Join),
			s.rt.PublishCommand(), flag(!t.First)), tookPermits, c.undoOf(c.last)).Result()
	if err != nil {
		return scripts.Attempt{}, core.RedisError(s.key, err)
	}
	return s.attempt(v)
}

func (c *counting) GiveUp(ctx context.Context, hold string) error {
	s := c.s
	v, err := scripts.SemGiveUp.Run(ctx, s.rt.Pipe, s.keys, s.args(hold, c.n, s.rt.PublishCommand())...).Result()
	if err != nil {
		return core.RedisError(s.key, err)
	}
	_, err = s.reply(v)
	return err
}

// Collect collects the grant of hold, heard by its message: its record leaves g, and the
// permits are the hold's (see acquire.Collector). A record gone already (dropped after its
// deadline, or never on the server reached: a failover lost the grant) leaves nothing to do.
func (c *counting) Collect(ctx context.Context, hold string) error {
	s := c.s
	cmd := redis.NewIntCmd(ctx, "zrem", s.keys[3], layout.CountingMemberOf(hold, c.n))
	if err := s.rt.Pipe.Process(ctx, cmd); err != nil {
		return core.RedisError(s.key, err)
	}
	if cmd.Val() == 1 {
		c.removed.Store(true)
	}
	return nil
}

// Collecting records the background collection of the call's grant (see acquire.Collector).
func (c *counting) Collecting(done <-chan struct{}) { c.collecting = done }

// giveBackGrant gives back the permits granted to hold, which the call does not keep (the
// replicas did not acknowledge the grant, or the call ended as it won): by the grant's record
// while it is there, so that a server that never saw the grant (a failover lost it) gives
// nothing back; by a release of as many once the call's collection took the record out.
func (c *counting) giveBackGrant(ctx context.Context, hold string) error {
	if c.collecting != nil {
		select {
		case <-c.collecting:
		case <-ctx.Done():
			return ctx.Err()
		}
		if c.removed.Load() {
			return c.s.release(ctx, c.n, hold, true) // one release, however often this runs
		}
	}
	s := c.s
	v, err := scripts.SemGiveUp.Run(ctx, s.rt.Pipe, s.keys, s.args(hold, c.n, s.rt.PublishCommand())...).Result()
	if err != nil {
		return core.RedisError(s.key, err)
	}
	r, err := s.reply(v)
	if err != nil || r.Value > 0 || c.collecting != nil {
		return err
	}
	// Granted, and collected by a heartbeat: the permits are the call's.
	return c.s.release(ctx, c.n, hold, true)
}

// undo gives back the permits of a call that won as its context ended: counting permits are
// not owned, so a release of as many.
func (c *counting) undo(ctx context.Context) error { return c.s.Release(ctx, c.n) }

// undoOf returns the undo of an attempt the replicas did not acknowledge, once its key of its
// own: the attempt is settled by that key (see settle), not released blindly, because the
// server the undo reaches may be a replica promoted meanwhile that never saw the attempt: a
// release there would give back permits it never saw taken, one holder too many.
func (c *counting) undoOf(once string) func(context.Context) error {
	return func(ctx context.Context) error { return c.settle(ctx, once) }
}

// Undo gives back the permits of a call that won as its context ended: a grant's by
// giveBackGrant, an attempt's by a release.
func (c *counting) Undo(ctx context.Context, hold string) error {
	if c.collecting != nil {
		return c.giveBackGrant(ctx, hold)
	}
	return c.undo(ctx)
}

// Confirm confirms permits granted to the waiter under the replica-sync policy. Counting
// permits leave no record of their holder to renew, so the waiter's write is HINCRBY of the
// available permits by 0: it changes no value, but it is a write, replicated after the grant,
// which is all WAIT needs. The permits' hash exists: the grant was just made from it, and it
// has no TTL, or (WithExpiry) one that the grant extended past the grant record's deadline.
func (c *counting) Confirm(ctx context.Context, hold string) error {
	s := c.s
	var cmd *redis.IntCmd
	err := s.rt.Acquire(ctx, s.key, func(r scripts.Processor) {
		cmd = redis.NewIntCmd(ctx, "hincrby", s.key, "a", 0)
		_ = r.Process(ctx, cmd)
	},
		func() bool { return true }, func(ctx context.Context) error { return c.giveBackGrant(ctx, hold) })
	if err == nil {
		err = cmd.Err()
	}
	return core.RedisError(s.key, err)
}

func (c *counting) Beat(hold string) *core.Beat {
	s := c.s
	// The fifth key lets a heartbeat that collected the grant answer so again if it runs
	// twice (see sem_heartbeat.lua).
	return &core.Beat{Keys: append(s.keys[:4:4], s.key+layout.WaiterSuffix+hold), Script: scripts.SemHeartbeat,
		Args: s.args(hold, c.n, s.waiterTimeout.Milliseconds(), s.rt.PublishCommand())}
}

// Clear settles the call's latest attempt by its key (see settle), then gives the hold up: it
// may be queued, or have been granted permits. An error Redis replied is no doubt: the script
// ran, and failed before taking anything (a key of another type), and a replica-sync failure
// was undone already.
func (c *counting) Clear(ctx context.Context, hold string, err error) error {
	var replied redis.Error
	if c.last != "" && !errors.As(err, &replied) && !errors.Is(err, core.ErrWrongType) &&
		!errors.Is(err, core.ErrReplicaSync) {
		if err := c.settle(ctx, c.last); err != nil {
			return err
		}
	}
	if c.collecting != nil {
		return c.giveBackGrant(ctx, hold) // it was granted: the grant goes back
	}
	return c.GiveUp(ctx, hold)
}

// trySet runs sem_set.lua's "set" for either kind.
func trySet(ctx context.Context, b *base, keys []string, k int, kind string) (bool, error) {
	if k < 0 {
		return false, core.Invalid("semaphore %q: %d permits", b.name, k)
	}
	if err := b.rt.Check(); err != nil {
		return false, err
	}
	v, err := scripts.SemSet.Run(ctx, b.rt.Pipe, keys, b.args("set", k, b.rt.PublishCommand(), b.rt.ID, kind)...).Result()
	if err != nil {
		return false, core.RedisError(b.key, err)
	}
	r, err := b.reply(v)
	return err == nil && r.Value == 1, err
}

// add runs sem_set.lua's "add" for either kind.
func add(ctx context.Context, b *base, keys []string, delta int, kind string) error {
	if err := b.rt.Check(); err != nil {
		return err
	}
	v, err := scripts.SemSet.Run(context.WithoutCancel(ctx), b.rt.Pipe, keys, b.args("add", delta,
		b.rt.PublishCommand(), b.rt.ID, kind)...).Result()
	if err != nil {
		return core.RedisError(b.key, err)
	}
	r, err := b.reply(v)
	if err == nil && r.Status == scripts.SemInsufficient {
		return fmt.Errorf("semaphore %q: remove %d: %w", b.name, -delta, ErrInsufficientPermits)
	}
	return err
}

// settle settles an attempt whose outcome is unknown (its reply was lost: the script may have
// run, or not, or may still arrive): sem_unsure.lua reads the status the attempt recorded
// under its key of its own (once, see sem_try.lua) and leaves a mark that makes the attempt,
// should it still arrive, take nothing; when the attempt took permits, they are given back by
// a release whose key of its own is derived from the attempt's, so that running settle again
// (the engine retries it while it fails) neither takes nor gives back anything twice.
func (c *counting) settle(ctx context.Context, once string) error {
	s := c.s
	n, err := scripts.SemUnsure.RunInt(ctx, s.rt.Pipe, []string{once})
	if err != nil || n != 1 {
		return err // it took nothing, and now never will
	}
	release := append(s.keys[:4:4], s.key+layout.ReleaseSuffix+strings.TrimPrefix(once, s.key+layout.AttemptSuffix))
	v, err := scripts.SemRelease.Run(ctx, s.rt.Pipe, release, s.args(c.n, s.rt.PublishCommand(), s.rt.ID)...).Result()
	if err == nil {
		_, err = s.reply(v)
	}
	return err
}
