package latch

import (
	"context"
	"fmt"

	"github.com/redaqs/aqs/internal/acquire"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/scripts"
)

// Awaiting, as the acquire engine's rules.
//
// An Await is a blocking call of the engine (internal/acquire) like a Lock, with nothing to
// take: its attempt succeeds when the count is 0, and otherwise the caller waits. So the
// engine does for it what it does for every primitive: it registers the waiter with the
// Client's hub before the attempt whose failure makes it wait (no wake is lost between the
// two), waits for a message, for the fallback timer the attempt's reply bounds, or for its
// heartbeat's news, honours the caller's deadline, and leaves nothing behind.
//
// What is particular to the latch:
//
//   - A waiter is not recorded in Redis: the count is all there is. The attempt writes
//     nothing, replies Queued while the count is above 0 (a place in no queue: the call waits)
//     and Acquired at 0; giving up, undoing and clearing have nothing to do.
//   - The hub channel is the latch's own, shared by every Client (see layout.LatchChannel):
//     the CountDown that makes the count 0 publishes "*" there once, and each Client's hub
//     wakes all its waiters of the latch, which attempt again and find 0. No message is
//     addressed to one waiter, so the engine's grant path is never taken by a message.
//   - The fallback timer is the count's remaining time to live: a waiter whose latch expires
//     looks again then and gets ErrNotSet.
//   - The heartbeat is the fallback for a lost wake message: it reports the count 0 as a
//     grant (the engine then returns, as for a grant whose message was lost), above 0 as still
//     queued, and a missing count as dropped (the engine attempts again, and the attempt
//     reports ErrNotSet).
//   - Nothing is acquired, so nothing needs the replica-sync policy's confirmation: a count
//     seen at 0 is not a hold that a failover could give to two callers. A failover that lost
//     the last CountDown (asynchronous replication) may show a count above 0 after waiters
//     returned; the CountDown that counted is not sent again by aqs.
type awaiting struct {
	l *Latch
}

var _ acquire.Rules = (*awaiting)(nil)

// awaiting has no fast attempt (acquire.Faster): the full attempt is one small read-only
// script, and a cheaper way to find the count 0 that would then need the full one when it is
// not 0 would cost a waiter two round trips. An Await takes nothing and its attempts write
// nothing, so its give-up (GiveUp) is all its undo and clear-up need.

// Attempt looks at the count once.
func (a *awaiting) Attempt(ctx context.Context, _ string, t acquire.Try) (scripts.Attempt, error) {
	l := a.l
	join := "0"
	if t.Join {
		join = "1"
	}
	v, err := scripts.LatchAwait.Run(ctx, l.rt.Pipe, []string{l.key}, join).Result()
	if err != nil {
		return scripts.Attempt{}, core.RedisError(l.key, err)
	}
	r, err := scripts.DecodeAttempt(v)
	if err != nil {
		return r, err
	}
	if r.Status == scripts.NotSet {
		// A refusal that changed nothing: the engine has nothing to clear for it.
		return r, acquire.Refuse(fmt.Errorf("latch %q: %w", l.name, ErrNotSet))
	}
	return r, nil
}

// GiveUp has nothing to do: the waiter is not recorded in Redis.
func (a *awaiting) GiveUp(context.Context, string) error { return nil }

// Beat is the waiter's heartbeat: the count, read (see the type's doc).
func (a *awaiting) Beat(string) *core.Beat {
	return &core.Beat{Keys: []string{a.l.key}, Script: scripts.LatchBeat}
}

// Confirm has nothing to confirm: a count seen at 0 is not an acquisition (see the type's doc).
func (a *awaiting) Confirm(context.Context, string) error { return nil }
