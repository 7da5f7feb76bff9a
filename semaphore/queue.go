package semaphore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/core"
)

// The wait queue, shared by both semaphores.
//
// A caller that cannot have its permits at once joins a FIFO queue in Redis (a list, and a
// zset of liveness deadlines kept by its Client's batched heartbeats, as for the fair lock).
// Every script that frees permits (a release, a give-up, AddPermits, and the heartbeats and
// attempts, which also serve the queue when permits came back without a release) grants them
// in order to the queued waiters it can now satisfy, and stops at the first it cannot: a large
// request at the head is never passed by later small ones, and only the waiters served are
// told. A grant goes to the waiter's own Client on its grant channel, tagged with the hold id;
// a grant to a waiter of the caller's own Client is returned by the script instead and told
// through the hub, with no pub/sub message. A waiter whose message was lost finds its grant at
// its next heartbeat. A waiter that gives up (its context ends, or its wait bound) leaves the
// queue, and permits granted to it in that same instant go back to the next waiters.

// reply is the outcome of one attempt script.
type reply struct {
	status int64         // see sem_acquire.lua and lsem_acquire.lua
	hint   time.Duration // when queued: look again after this long without a message (0: never)
}

// The attempt statuses.
const (
	acquired     = 1
	grantedEarly = 2 // granted while it waited, its message missed
	notQueued    = 0
	queued       = -1
	notSet       = -2
	tooMany      = -3
)

// kind is what differs between the two semaphores' waiting.
type kind interface {
	// attempt runs one attempt; retry tells the script to look for a grant made earlier, quick
	// that it is a call's first attempt while this Client has no waiters, which the counting
	// semaphore first makes with its cheapest script (sem_try.lua).
	attempt(ctx context.Context, hold string, retry, enqueue, quick bool) (reply, error)
	// giveUp takes the hold out of the queue, giving back permits granted to it meanwhile.
	giveUp(ctx context.Context, hold string) error
	// beat returns the hold's heartbeat (its OnReply is set by the caller).
	beat(hold string) *core.Beat
	// confirm makes permits granted to the hold by another call's script as durable as an
	// acquisition, under the replica-sync policy (see granted); it undoes them when too few
	// replicas acknowledge it.
	confirm(ctx context.Context, hold string) error
}

// base is what both semaphores share.
type base struct {
	rt            *core.Runtime
	name          string
	key           string // s, the hash (see internal/scripts/_sem.lua)
	grants        string // this Client's grant channel
	waiterTimeout time.Duration
}

// Option configures a Semaphore or a Leased.
type Option func(*base) error

// WithWaiterTimeout sets how long a waiter may go unheard of before it is dropped from the
// queue: a waiter whose process died holds up those behind it at most this long. Live waiters
// are kept alive by their Client's heartbeats, three per timeout. It must be at least 30ms.
// The default is 5s.
func WithWaiterTimeout(d time.Duration) Option {
	return func(b *base) error {
		if d < 30*time.Millisecond {
			return core.Invalid("waiter timeout %v is below 30ms", d)
		}
		b.waiterTimeout = d
		return nil
	}
}

func newBase(c *aqs.Client, name string, opts []Option) (base, error) {
	rt := c.Runtime(core.Access{})
	if rt == nil {
		return base{}, core.Invalid("nil aqs client")
	}
	key, err := rt.Key(name)
	if err != nil {
		return base{}, err
	}
	b := base{rt: rt, name: name, key: key, grants: key + ":c:" + rt.ID, waiterTimeout: 5 * time.Second}
	for _, o := range opts {
		if o == nil {
			return base{}, core.Invalid("nil option")
		}
		if err := o(&b); err != nil {
			return base{}, err
		}
	}
	return b, nil
}

// checkN rejects a permit count that is not positive.
func (b *base) checkN(op string, n int) error {
	if n <= 0 {
		return core.Invalid("semaphore %q: %s of %d permits", b.name, op, n)
	}
	return nil
}

// parse reads a script reply, status or {status, [hint,] local grants...}: it tells the waiters of this
// Client that were granted permits (yielding so that they run), and returns the rest.
func (b *base) parse(v any, withHint bool) (status int64, hint time.Duration) {
	if n, ok := v.(int64); ok {
		return n, 0 // a status alone: nothing granted
	}
	arr, _ := v.([]any)
	if len(arr) == 0 {
		return 0, 0
	}
	status, _ = arr[0].(int64)
	rest := arr[1:]
	if withHint && len(rest) > 0 {
		ms, _ := rest[0].(int64)
		hint, rest = time.Duration(ms)*time.Millisecond, rest[1:]
	}
	for _, h := range rest {
		if hold, ok := h.(string); ok {
			b.rt.Hub.Deliver(b.grants, hold)
		}
	}
	if len(rest) > 0 {
		runtime.Gosched()
	}
	return status, hint
}

// statusErr turns an attempt's error statuses into errors.
func (b *base) statusErr(status int64) error {
	switch status {
	case notSet:
		return fmt.Errorf("semaphore %q: %w", b.name, ErrNotSet)
	case tooMany:
		return fmt.Errorf("semaphore %q: %w", b.name, ErrTooManyPermits)
	}
	return nil
}

// outcome is the result of acquire.
type outcome struct {
	hold string
	// granted: the permits were granted while the hold waited; they were taken after since.
	// Otherwise the acquiring attempt was sent at since.
	granted bool
	since   time.Time
}

// acquire takes permits through k, waiting in the queue when block or cfg.Wait allow. It
// returns ok false, with a nil error, when the permits could not be had in time (TryAcquire).
// On failure it leaves nothing behind.
func (b *base) acquire(ctx context.Context, cfg core.LockConfig, block bool, k kind) (outcome, bool, error) {
	if err := b.rt.Check(); err != nil {
		return outcome{}, false, err
	}
	if ctx.Err() != nil {
		return outcome{}, false, context.Cause(ctx)
	}
	hold := b.rt.NewHoldID()
	wait := block || cfg.Wait > 0
	// When the hub is already subscribed to this Client's grant channel (it is while this
	// Client's waiters come and go), the waiter registers before its first attempt at no
	// cost. Otherwise the first attempt goes first, so that the uncontended path subscribes
	// to nothing; if it queues, the waiter subscribes and tries again at once, which finds a
	// grant made before the subscription.
	var w *core.Waiter
	if wait {
		w = b.rt.Hub.Join(b.grants, hold)
	}
	closeW := func() {
		if w != nil {
			w.Close()
		}
	}
	sentAt := time.Now()
	r, err := k.attempt(ctx, hold, false, wait, w == nil)
	if err == nil {
		err = b.statusErr(r.status)
	}
	if err != nil {
		closeW()
		b.abandon(k, hold)
		return outcome{}, false, causeOf(ctx, err)
	}
	if r.status == acquired {
		closeW()
		return outcome{hold: hold, since: sentAt}, true, nil
	}
	if r.status == grantedEarly {
		// This first attempt ran twice (go-redis's retry after a lost reply): its first run
		// queued the hold, and a release granted it before the second (lsem_acquire.lua).
		closeW()
		return b.granted(ctx, k, hold, sentAt)
	}
	if !wait {
		return outcome{}, false, nil
	}
	waitCtx := ctx
	if cfg.Wait > 0 {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeout(ctx, cfg.Wait)
		defer cancel()
	}
	// From here the hold is queued: every way out gives up, which also gives back permits
	// granted in the same instant.
	giveUp := func(err error) (outcome, bool, error) {
		gerr := k.giveUp(ctx, hold)
		err = causeOf(ctx, err)
		if err == nil {
			err = gerr
		}
		return outcome{}, false, err
	}
	queuedAt := sentAt // the last call that found the hold queued was sent then
	retry := false     // the next attempt must look for a grant: only after a first one
	if w == nil {
		if w, err = b.rt.Hub.Wait(waitCtx, b.grants, hold); err != nil {
			if ctx.Err() == nil && waitCtx.Err() != nil {
				err = nil // the wait bound ran out
			}
			return giveUp(err)
		}
		retry = true // subscribed only now: a grant may have come before
	}
	defer w.Close()
	var q *core.Place
	defer func() { q.Stop() }()
	since := func() time.Time {
		if q != nil && q.Since().After(queuedAt) {
			return q.Since()
		}
		return queuedAt
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		if retry {
			sentAt = time.Now()
			r, err = k.attempt(ctx, hold, true, true, false)
			if err == nil {
				err = b.statusErr(r.status)
			}
			switch {
			case err != nil:
				return giveUp(err)
			case r.status == grantedEarly:
				return b.granted(ctx, k, hold, since())
			case r.status == acquired:
				return outcome{hold: hold, since: sentAt}, true, nil
			}
			queuedAt = sentAt
		}
		retry = true
		if q == nil || q.Hold != hold {
			q.Stop() // heartbeats start once queued, so that the uncontended path has none
			q = b.queue(k, hold)
		}
		if r.hint > 0 {
			timer.Reset(r.hint)
		}
		select {
		case <-w.C:
			if w.Tagged() {
				return b.granted(ctx, k, hold, since())
			}
			// A wakeup to look again: a reconnect, or the total changed.
		case <-q.Granted:
			return b.granted(ctx, k, hold, since())
		case <-q.Dropped:
			// Unheard of past its deadline (a stall): join again at the tail, as a new hold.
			hold = b.rt.NewHoldID()
			w.SetTag(hold)
			retry = false
			sentAt = time.Now()
			r, err = k.attempt(ctx, hold, false, true, false)
			if err == nil {
				err = b.statusErr(r.status)
			}
			if err != nil {
				return giveUp(err)
			}
			if r.status == acquired {
				return outcome{hold: hold, since: sentAt}, true, nil
			}
			queuedAt = sentAt
		case <-timer.C:
		case <-waitCtx.Done():
			if ctx.Err() != nil {
				return giveUp(context.Cause(ctx))
			}
			return giveUp(nil) // the wait bound ran out
		case <-b.rt.Done():
			// Leave the queue rather than hold it up for the waiter timeout.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = k.giveUp(cctx, hold)
			cancel()
			return outcome{}, false, aqs.ErrClosed
		}
		timer.Stop()
	}
}

// granted returns the outcome of permits granted to hold by another call's script (a
// release, a give-up, a heartbeat), which hold learned from the hub or its heartbeat. With the
// replica-sync policy on, the waiter confirms them first with a write of its own and WAIT (see
// internal/core/sync.go): a grant too few replicas acknowledged is undone and the call fails.
// A grant found by the waiter's own attempt (grantedEarly) is confirmed too: the leased
// semaphore's attempt finds it without writing, so its WAIT proved nothing. It runs even when
// ctx ended; the caller then gives confirmed permits back.
func (b *base) granted(ctx context.Context, k kind, hold string, since time.Time) (outcome, bool, error) {
	if !b.rt.SyncOn() {
		return outcome{hold: hold, granted: true, since: since}, true, nil
	}
	sentAt := time.Now()
	if err := k.confirm(context.WithoutCancel(ctx), hold); err != nil {
		return outcome{}, false, err
	}
	// The confirmation renewed a leased permit's full lease, sent at sentAt.
	return outcome{hold: hold, since: sentAt}, true, nil
}

// statusOf reads the status of an attempt's reply without acting on its grants (see parse).
func statusOf(v any) int64 {
	if n, ok := v.(int64); ok {
		return n
	}
	if arr, _ := v.([]any); len(arr) > 0 {
		n, _ := arr[0].(int64)
		return n
	}
	return 0
}

// tookPermits reports whether an attempt's reply means that the attempt itself took permits:
// the replies the replica-sync policy waits for and undoes. A grant made earlier and found by
// the attempt (grantedEarly) is confirmed by base.granted instead.
func tookPermits(v any) bool { return statusOf(v) == acquired }

// causeOf returns the error a failed call reports: context.Cause(ctx) when ctx ended and err
// is nil or only says so (the caller's cause, not the call it cut short), err otherwise.
func causeOf(ctx context.Context, err error) error {
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return context.Cause(ctx)
	}
	return err
}

// abandon undoes an attempt whose reply was lost: it may have queued the hold or given it
// permits. In the background, bounded.
func (b *base) abandon(k kind, hold string) {
	b.rt.Go(func(rctx context.Context) {
		cctx, cancel := context.WithTimeout(rctx, time.Second)
		defer cancel()
		_ = k.giveUp(cctx, hold)
	})
}

// queue starts the heartbeats that keep the hold's place in the queue.
func (b *base) queue(k kind, hold string) *core.Place {
	beat := k.beat(hold)
	beat.Interval = b.waiterTimeout / 3
	return b.rt.Queue(hold, beat)
}
