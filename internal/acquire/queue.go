package acquire

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/scripts"
)

// Rules are a primitive's state rules for one call: which scripts try, give up and beat for a
// hold, and what their replies mean. Every method that sends something gets the hold id the
// engine made for the call (fresh for every hold, so that no call ever acts on another's).
type Rules interface {
	// Attempt makes one attempt of hold, as t says: take it now, or else join the queue (or
	// keep the hold's place in it), or report it held by this Client. The engine tells the
	// waiters of this Client that the reply says the attempt granted (Mine). A typed refusal
	// (semaphore.ErrNotSet, ErrTooManyPermits) is an error; the reply's status is then NotSet
	// or TooMany.
	Attempt(ctx context.Context, hold string, t Try) (scripts.Attempt, error)
	// GiveUp leaves nothing of hold in Redis: it takes it out of the queue, and passes on what
	// it holds or was granted (the lock, permits) to the next waiters. It is safe to repeat.
	GiveUp(ctx context.Context, hold string) error
	// Beat is hold's heartbeat while it is queued: its script's reply is a BeatStatus.
	Beat(hold string) *core.Beat
	// Confirm makes a grant to hold (made by another call's script) as durable as an
	// acquisition, under the replica-sync policy: a write of the hold's own with WAIT after
	// it. It undoes the grant and fails when too few replicas acknowledge it.
	Confirm(ctx context.Context, hold string) error
}

// The optional parts of a rule set. A rule set without them has no fast attempt, and its
// give-up (GiveUp) undoes and clears.

// Faster is a rule set with a fast first attempt: the cheapest way there is (SET NX for a
// lock), made when the Client has no waiter of the primitive, so that the uncontended call
// costs the least. A fast attempt that fails must have changed nothing; Attempt then makes a
// full one. It may report false and send nothing (a call that asks for its fencing token).
type Faster interface {
	Fast(ctx context.Context, hold string) (acquired bool, err error)
}

// Undoer gives back what an acquisition of hold took, for a call that won the instant its
// context ended and has no held context to release (the counting semaphore's permits). Calls
// with a held context give back through HoldSpec.Release instead.
type Undoer interface {
	Undo(ctx context.Context, hold string) error
}

// Clearer leaves nothing of hold in Redis, after a round trip of it whose outcome is unknown
// (err is that round trip's error, nil when its reply was lost): it settles that round trip,
// and gives the hold up (out of the queue; what it holds or was granted passes on). The
// counting semaphore first settles its attempt by the attempt's own key. It must be safe to
// repeat: the engine runs it within grace when the call ends, and again in the background,
// bounded, while it fails.
type Clearer interface {
	Clear(ctx context.Context, hold string, err error) error
}

func fastOf(r Rules, ctx context.Context, hold string) (bool, error) {
	if f, ok := r.(Faster); ok {
		return f.Fast(ctx, hold)
	}
	return false, nil
}

func undoOf(r Rules, ctx context.Context, hold string) error {
	if u, ok := r.(Undoer); ok {
		return u.Undo(ctx, hold)
	}
	return r.GiveUp(ctx, hold)
}

func clearOf(r Rules, ctx context.Context, hold string, err error) error {
	if c, ok := r.(Clearer); ok {
		return c.Clear(ctx, hold, err)
	}
	return r.GiveUp(ctx, hold)
}

// Collector is implemented by rules whose grants leave a record in Redis that the waiter
// collects (the counting semaphore's): a waiter that learns of its grant by its message
// collects it in the background (an attempt or heartbeat that finds a grant collects it).
// Collecting receives the channel closed when that ended, before the call's Confirm, Undo
// and Clear run.
type Collector interface {
	Collect(ctx context.Context, hold string) error
	Collecting(done <-chan struct{})
}

// Try says what an attempt does when it cannot take what it asks for.
type Try struct {
	// First: the hold's first attempt, which can find no grant made earlier.
	First bool
	// Join: join the queue (or keep the hold's place in it); otherwise the reply is Busy.
	Join bool
	// Local: a first attempt that finds the lock held by another hold of this Client neither
	// takes nor joins: it replies HeldLocally, and the call waits for that hold's release
	// (see local.go). Asked only of rules whose Config has a Streak; rules that cannot tell
	// ignore it.
	Local bool
}

// HoldSpec says how a successful call holds what it took: the lease, its renewal, the held
// context. A nil HoldSpec: nothing is held (the counting semaphore's permits are not owned).
type HoldSpec struct {
	// Key is the key whose renewals keep the hold: the lock key, the readers' or the permits'
	// zset.
	Key string
	// Lease is the hold's lease; Watchdog that the Client's watchdog renews it.
	Lease    time.Duration
	Watchdog bool
	// Renew is the renewal script (KEYS[1] = Key, then RenewKeys; ARGV hold id, lease ms, 0
	// to only check).
	Renew     *scripts.Script
	RenewKeys []string
	// FetchToken asks Redis for the hold's fencing token.
	FetchToken func(context.Context, *core.Hold) (int64, error)
	// Token: the call asked for the token at acquisition; a hold granted without one fetches
	// it before the call returns, so that it is answered locally afterwards.
	Token bool
	// Detached makes the held context keep the caller's values but not its cancellation (a
	// read-write lock's downgrade, which outlives the write hold's context).
	Detached bool
	// Release gives back the hold of a held context: for a call that won the instant its
	// context ended (a failed call leaves nothing behind).
	Release func(held context.Context) error
}

// Call is one blocking call: its rules, how long it waits, and what it holds.
type Call struct {
	Rules Rules
	// Block: wait until the context is done (Lock); otherwise wait at most Wait (TryLock
	// with a wait bound), or not at all.
	Block bool
	Wait  time.Duration
	// Member returns a hold's queue member (see internal/layout): a waiter of this Client that
	// a release carries joins the queue as Member(hold). Needed with Local only.
	Member func(hold string) string
	// Local: the call may take a hand-off from a release of this Client (see local.go). Off
	// for a call that must take the lock by an attempt of its own (one that asks for its
	// fencing token at acquisition) and for primitives without local hand-offs.
	Local bool
	// Hold says how the call holds what it takes; nil: nothing is held.
	Hold *HoldSpec
	// Primitive names the call's primitive in the events of the Client's observer:
	// "reentrant", "fair", "rwlock-read", "rwlock-write", "semaphore", "leased-semaphore".
	Primitive string

	obs *observed // set by Acquire when the Client has an observer (see observe.go)
}

// Won is a successful call's outcome.
type Won struct {
	// Hold is the hold id: the permit id of a leased permit.
	Hold string
	// Held is the held context; nil when the call holds nothing (HoldSpec nil).
	Held context.Context
}

// Config configures a Queue.
type Config struct {
	// Grants is this Client's grant channel: "<base key>:c:<Client id>".
	Grants string
	// More are further grant channels of a primitive over several names (a multi-name lock's,
	// granted each name on that name's channel): a waiter registers on Grants and on each of
	// them, Orphans handling every one.
	More []string
	// Parts: a grant addressed to a waiter is one part of what it waits for (one name of a
	// multi-name lock). The waiter holds, without attempting again, once every part its last
	// attempt found missing has been granted; until then it waits on (see attempt.wait).
	Parts bool
	// WaiterTimeout is how long a queued waiter may go unheard of before it is dropped.
	WaiterTimeout time.Duration
	// Board is how long a waiter may wait for a release of this Client to carry its join or
	// hand it the lock (see local.go); 0: waiters never board.
	Board time.Duration
	// Stay keeps a boarded waiter boarded past Board for as long as a hold of this Queue is
	// held, its lease trusted (the reentrant lock, whose releases hand the lock to boarded
	// waiters): Board then bounds only the wait for a hold whose end this Queue cannot see.
	// Without it a boarded waiter joins on its own after Board (the fair lock: a rider's
	// join reaches Redis at most Board after its call).
	Stay bool
	// Streak is how many times in a row a release may hand the lock to a waiter of its own
	// Client past a waiter of another Client queued ahead of it; 0: never (FIFO).
	Streak int
	// Name is the primitive's name, as its user gave it, for the events of the Client's
	// observer.
	Name string
	// Key is the primitive's key, for errors.
	Key string
	// Orphans handles grants to this Client's hold ids that it no longer uses (see
	// internal/core/orphan.go); nil for primitives that grant nothing to a waiter.
	Orphans *core.Orphans
	// WaitOnly: the calls wait for a state and acquire nothing (a latch's Await), so the
	// replica-sync policy, which makes acquisitions durable, does not apply to them.
	WaitOnly bool
}

// Queue is the engine's side of one primitive value: what the calls on it share.
type Queue struct {
	rt  *core.Runtime
	cfg Config

	mu       sync.Mutex
	held     string       // the hold of this Queue's that this Client holds, "" when none
	heldHold *core.Hold   // its record, nil while a hand-off is being taken
	heldAt   time.Time    // when held was set without a record
	inflight int          // releases of this Queue's holds on their way
	attempts int          // attempts of this Queue's local calls on their way
	waiters  []*waiter    // local waiters that may take a hand-off, in the order they came
	streak   int          // local hand-offs in a row
	kept     atomic.Value // the primitive's value kept with the Queue (see Keep)
	chans    []string     // Grants and More, when there are More
}

// New returns the Queue of one primitive value.
func New(rt *core.Runtime, cfg Config) *Queue {
	q := &Queue{rt: rt, cfg: cfg}
	if cfg.More != nil {
		q.chans = append(append(make([]string, 0, 1+len(cfg.More)), cfg.Grants), cfg.More...)
	}
	return q
}

// hubJoin registers hold with the hub on the Queue's channels if it is subscribed to all of
// them already (see core.Hub.Join), else returns nil.
func (q *Queue) hubJoin(hold string) *core.Waiter {
	if q.chans == nil {
		return q.rt.Hub.Join(q.cfg.Grants, hold, q.cfg.Orphans)
	}
	return q.rt.Hub.JoinAll(q.chans, hold, q.cfg.Orphans)
}

// hubWait registers hold with the hub on the Queue's channels (see core.Hub.Wait).
func (q *Queue) hubWait(ctx context.Context, hold string) (*core.Waiter, error) {
	if q.chans == nil {
		return q.rt.Hub.Wait(ctx, q.cfg.Grants, hold, q.cfg.Orphans)
	}
	return q.rt.Hub.WaitAll(ctx, q.chans, hold, q.cfg.Orphans)
}

// Runtime returns the Client's runtime.
func (q *Queue) Runtime() *core.Runtime { return q.rt }
