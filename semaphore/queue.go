package semaphore

import (
	"context"
	"fmt"
	"time"

	"github.com/redaqs/aqs/internal/acquire"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/layout"
	"github.com/redaqs/aqs/internal/scripts"
)

// The wait queue, shared by both semaphores.
//
// A caller that cannot have its permits at once joins a FIFO queue in Redis (the queue every
// aqs primitive that waits shares: a list, and a zset of liveness deadlines kept by its
// Client's batched heartbeats). Every script that frees permits (a release, a give-up,
// AddPermits, and the heartbeats and attempts, which also serve the queue when permits came
// back without a release) grants them in order to the queued waiters it can now satisfy, and
// stops at the first it cannot: a large request at the head is never passed by later small
// ones, and only the waiters served are told. A grant goes to the waiter's own Client on its
// grant channel, tagged with the hold id; a grant to a waiter of the caller's own Client is
// returned by the script instead and told through the hub, with no pub/sub message. A waiter
// whose message was lost finds its grant at its next heartbeat. A waiter that gives up (its
// context ends, or its wait bound) leaves the queue, and permits granted to it in that same
// instant go back to the next waiters. The waiting itself is the acquire engine's
// (internal/acquire); each semaphore gives it its rules.

// base is what both semaphores share.
type base struct {
	rt            *core.Runtime
	name          string
	key           string // s, the hash (see internal/scripts/_sem.lua)
	grants        string // this Client's grant channel
	waiterTimeout time.Duration
	size          int           // WithSize's
	sized         bool          // WithSize was given
	expiry        time.Duration // WithExpiry's; 0: none
	q             *acquire.Queue
}

// Option configures a Semaphore or a Leased at New or NewLeased; this package's With functions
// make them. Every primitive package's WithWaiterTimeout means the same. A zero Option is an
// invalid argument.
type Option struct{ s *core.Setting }

// WithWaiterTimeout sets how long a waiter may go unheard of before it is dropped from the
// queue: a waiter whose process died holds up those behind it at most this long. Live waiters
// are kept alive by their Client's heartbeats, three per timeout. It must be at least 30ms.
// The default is 5s. Every
// primitive package has this option, with this meaning and these bounds.
func WithWaiterTimeout(d time.Duration) Option { return Option{core.WaiterTimeout(d)} }

// WithSize gives the semaphore its size: n permits in all, set when a call finds the permits
// not set (the first use, or after a Redis restart without persistence lost the key), so that
// callers never see ErrNotSet. It does not change permits that are set: TrySetPermits and
// AddPermits do. n must not be negative.
//
// Permits held when a restart lost the key are forgotten with it. The size set again is all
// available, so until those holders release, up to their number of holders too many may hold
// permits at once. A counting semaphore's release of such permits is absorbed: it succeeds,
// and while the key is gone it sets the size again; once the size is set, it gives the
// permits back (or fails with ErrOverRelease when that would make more available than the
// total). A leased permit held at the restart is lost: its renewal fails, its held context is
// cancelled with aqs.ErrLockLost, and its Release reports it gone.
func WithSize(n int) Option {
	return Option{core.Set(func(b *base) error {
		if n < 0 {
			return core.Invalid("size %d is negative", n)
		}
		b.size, b.sized = n, true
		return nil
	})}
}

// minExpiry is the shortest expiry WithExpiry accepts.
const minExpiry = time.Second

// WithExpiry makes the semaphore expire once idle: d after its last call, or after its last
// lease, waiter or grant ended if that is later, every key of the semaphore is gone, its
// permits included. Every call on it extends its life to d from then: the acquisitions
// (TryAcquire that gets nothing included), the releases (and, for Leased, ReleasePart,
// ReleaseID, ReleasePartID and SetLease), TrySetPermits, AddPermits, Drain and ForceRelease,
// whether they succeed or fail once they reach permits that are set; so do the heartbeats of
// its queued waiters and the give-ups of waiters that stop waiting. Available only reads, and
// extends nothing. d must be at least 1s.
//
// Without WithExpiry a semaphore's permits are kept until deleted (see "Permits in Redis" in
// the package's doc), which suits semaphores of a few known names; WithExpiry suits those
// made under generated names (one per tenant, one per job), which would otherwise pile up.
//
// What is in use does not expire under its users. A leased semaphore lives at least a second
// past the end of the latest lease of its live permits, which the watchdog's renewals push on
// while their holders live, and a fixed lease holds it to its end; a permit given back keeps
// nothing. Queued waiters keep it with their heartbeats, as long as they live. A counting
// semaphore's permits have no owner and no lease, so permits taken do not keep it: its expiry
// counts from its last call. A counting semaphore whose permits stay taken longer than d with
// no call in between (nobody waiting for them) expires, and its next use finds it as if never
// set.
//
// An expired semaphore is one whose permits were never set: a semaphore made WithSize sets its
// size again at its next use, all of it available, and without WithSize its calls fail with
// ErrNotSet (Available reports 0, Drain takes 0) until TrySetPermits or AddPermits sets the
// permits again; those failed calls create no key. Counting permits taken before the expiry
// are forgotten with it, as WithSize says of a restart that lost the key: a late Release of
// them is absorbed while the semaphore is still expired (it sets the size again, made
// WithSize) or fails with ErrNotSet (without WithSize); once the permits are set again, it
// gives them back, up to the total (ErrOverRelease beyond it), one holder too many for each.
// Leased permits are never forgotten this way: while one is held, the semaphore lives.
//
// Every value of a name, on every Client, should have the same expiry: each call makes the
// semaphore live at least its own value's expiry, and a value without one leaves the keys'
// TTLs as they are (it gives none, and removes none), so that a semaphore used through both
// may expire under the permits or the waiters of the one without. Values of one name on one
// Client that differ in expiry keep a local queue each, and meet in Redis as the values of two Clients
// would, as values that differ in waiter timeout do.
func WithExpiry(d time.Duration) Option {
	return Option{core.Set(func(b *base) error {
		if d < minExpiry {
			return core.Invalid("expiry %v is below %v", d, minExpiry)
		}
		b.expiry = d
		return nil
	})}
}

// args returns a script's arguments args followed, for a semaphore with an expiry, by the
// expiry in ms, which the semaphore scripts take as their last argument (see keep_semaphore in
// internal/scripts/_sem.lua). Without an expiry it adds nothing, so that the scripts run as
// they did before there were expiries.
func (b *base) args(args ...any) []any {
	if b.expiry > 0 {
		return append(args, b.expiry.Milliseconds())
	}
	return args
}

// seed sets the permits to the size given with WithSize if they are not set; kind is "c" or
// "l" (see sem_set.lua).
func (b *base) seed(ctx context.Context, keys []string, kind string) error {
	_, err := trySet(ctx, b, keys, b.size, kind)
	return err
}

// newBase returns the shared part of the semaphore of the given name on rt (a Client's
// runtime: nil for a nil Client, an invalid argument).
func newBase(rt *core.Runtime, name string, opts []Option) (base, error) {
	if rt == nil {
		return base{}, core.Invalid("nil aqs client")
	}
	key, err := rt.Key(name)
	if err != nil {
		return base{}, err
	}
	b := base{rt: rt, name: name, key: key, grants: layout.GrantChannel(key, rt.ID)}
	b.waiterTimeout, err = core.Settings(opts, func(o Option) *core.Setting { return o.s }, &b)
	if err != nil {
		return base{}, err
	}
	return b, nil
}

// queue sets the semaphore's engine queue: the one that every value of its name and kind
// ("semaphore", "leased-semaphore") on the Client shares (see internal/acquire/shared.go),
// made with the kind's give-back of a grant to a hold id the Client no longer uses (see
// internal/core/orphan.go) when there is none.
//
// A semaphore with an expiry is a kind of its own (its scripts keep its keys alive, the
// give-backs of orphaned grants included), so that values of one name that differ in expiry
// never share a queue.
func (b *base) queue(kind string, orphans *core.Orphans) {
	if b.expiry > 0 {
		kind += " expiring " + b.expiry.String()
	}
	b.q = acquire.Shared(b.rt, kind, acquire.Config{Grants: b.grants, WaiterTimeout: b.waiterTimeout, Name: b.name, Key: b.key,
		Orphans: orphans})
}

// checkN rejects a negative permit count.
func (b *base) checkN(op string, n int) error {
	if n < 0 {
		return core.Invalid("semaphore %q: %s of %d permits", b.name, op, n)
	}
	return nil
}

// none is an acquire or release of 0 permits, which succeeds at once, as in
// golang.org/x/sync/semaphore: it sends nothing to Redis, so it needs neither permits set nor a
// place in the queue, and it does not wait behind the queue's waiters (it takes nothing from
// them). It fails only as any call does before it is sent: on a closed Client, or with
// context.Cause(ctx) when ctx is done already (an acquire only; a release does not use ctx's
// cancellation).
func (b *base) none(ctx context.Context, acquire bool) error {
	if err := b.rt.Check(); err != nil {
		return err
	}
	if acquire && ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// attempt decodes an attempt script's reply (the engine tells the waiters it granted), and
// turns its refusals into errors.
func (b *base) attempt(v any) (scripts.Attempt, error) {
	a, err := scripts.DecodeAttempt(v)
	if err != nil {
		return a, err
	}
	switch a.Status {
	case scripts.NotSet:
		return a, acquire.Refuse(fmt.Errorf("semaphore %q: %w", b.name, ErrNotSet))
	case scripts.TooMany:
		return a, acquire.Refuse(fmt.Errorf("semaphore %q: %w", b.name, ErrTooManyPermits))
	}
	return a, nil
}

// reply decodes the reply of a semaphore script that is not an attempt and tells the waiters
// it granted.
func (b *base) reply(v any) (scripts.Sem, error) {
	r, err := scripts.DecodeSem(v)
	if err == nil {
		b.q.Tell(r.Mine)
	}
	return r, err
}

// tookPermits reports whether an attempt's reply means that the attempt itself took permits:
// the replies the replica-sync policy waits for and undoes. A grant made earlier and found by
// the attempt is confirmed by the rules' Confirm instead.
func tookPermits(v any) bool {
	a, err := scripts.DecodeAttempt(v)
	return err == nil && a.Status == scripts.Acquired
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
