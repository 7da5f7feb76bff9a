// Package model holds small, deterministic, pure-Go reference models of the
// synchronizers in this module, with explicit logical time.
//
// A model is the specification of its primitive (DESIGN.md, decision 9): the
// Redis implementation must give the same reply as the model for every
// operation. Each model is checked twice, by rapid state machines: this
// package's tests hold its invariants over random sequences of calls, and
// the primitive's own package (its model_test.go) drives the model and the
// scripts on Redis with the same operations and compares every reply (and,
// for the primitives with a queue, the state after each step). To make that
// possible a model
//
//   - never reads a real clock: every operation takes the current logical
//     time, a [Time], and the caller decides how time moves;
//   - has no goroutines and no randomness: the same calls always give the same
//     replies;
//   - never blocks: an operation that the real primitive would wait on (Lock)
//     is modelled by its single non-blocking attempt (TryLock), which is what
//     one script run does on the server.
//
// Misuse that only a buggy test could commit, such as time going backwards, an
// empty owner or a non-positive lease, panics. Outcomes that the real
// primitive reports to its caller, such as releasing a lock one does not hold,
// are replies or errors.
//
// Models are not safe for concurrent use; a test that drives one from several
// goroutines must serialize the calls, exactly as the Redis server serializes
// scripts.
//
// The package exports what a reader of the specification needs, and nothing
// else: for each primitive, its type, whose doc states the state and the
// rules; its constructor; one method for each script run a user's call makes
// (an attempt, a heartbeat, a release, a give-up, a renewal…); the queries
// that read the state the type's doc describes, which the model-versus-Redis
// tests compare with the keys in Redis and a user's queries (IsLocked,
// HoldCount, Available…) must match; and the replies, statuses and errors of
// those methods. What was given to a constructor is not read back, and
// bookkeeping that only this package's invariant checks look at, such as the
// highest fencing token issued, stays unexported.
package model

import (
	"errors"
	"fmt"
)

// Time is a logical instant in milliseconds. Models compare times only with
// each other and with leases given in milliseconds, so the origin is
// arbitrary; tests usually start at 0.
//
// Expiry follows Redis PEXPIRE: something with a lease of d milliseconds
// granted at time s exists at every time t with t < s+d and is gone at s+d.
type Time int64

// ErrNotOwner is returned when an owner releases a hold it does not have: the
// lock is free, its hold has expired, or someone else holds it. The model is
// left unchanged.
var ErrNotOwner = errors.New("model: lock not held by this owner")

// clock keeps the latest time a model has been told about and rejects calls
// that go back in time. Every model embeds one and calls observe first in
// every exported method, queries included, so a test that reorders its calls
// by mistake fails loudly instead of comparing replies from two timelines.
//
// The zero value accepts any first time.
type clock struct {
	now     Time
	started bool
}

// observe records now as the current time. It panics if now is before the
// latest time already observed; equal times are fine (several operations may
// happen in the same millisecond).
func (c *clock) observe(op string, now Time) {
	if c.started && now < c.now {
		panic(fmt.Sprintf("model: %s at time %d, before the already observed time %d", op, now, c.now))
	}
	c.now, c.started = now, true
}

// deadline returns now+lease, panicking if lease is not positive or the sum
// overflows: both are bugs in the test that drives the model.
func deadline(op string, now Time, lease int64) Time {
	if lease <= 0 {
		panic(fmt.Sprintf("model: %s with non-positive lease %d ms", op, lease))
	}
	at := now + Time(lease)
	if at < now {
		panic(fmt.Sprintf("model: %s: time %d + lease %d ms overflows", op, now, lease))
	}
	return at
}

// checkOwner panics on the empty owner, which the models use to mean "nobody".
func checkOwner(op, owner string) {
	if owner == "" {
		panic(fmt.Sprintf("model: %s with empty owner", op))
	}
}

// Status is the outcome of one attempt of a queued primitive, numbered as
// the attempt scripts reply it, so that a test can compare the model's reply
// with Redis's directly.
type Status uint8

// The attempt statuses.
const (
	// Acquired: the attempt took what it asked for.
	Acquired Status = 1
	// Granted: the hold already had what it asks for, granted to it while
	// it waited (or this attempt is a repeat of one that took it).
	Granted Status = 2
	// Queued: the hold waits in the queue.
	Queued Status = 3
	// Busy: not acquired and not queued (the attempt did not ask to wait).
	Busy Status = 4
	// Dropped: the hold's waiter had died (its liveness deadline passed)
	// and is out of the queue; the caller starts over under a new hold id.
	Dropped Status = 5
)

func (s Status) String() string {
	switch s {
	case Acquired:
		return "acquired"
	case Granted:
		return "granted"
	case Queued:
		return "queued"
	case Busy:
		return "busy"
	case Dropped:
		return "dropped"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// BeatStatus is the reply of a waiter's heartbeat, numbered as the
// heartbeat scripts reply it.
type BeatStatus uint8

// The heartbeat statuses.
const (
	// BeatDropped: the hold is not queued (its deadline passed, it left, or
	// it never joined) and does not have what it waits for.
	BeatDropped BeatStatus = 0
	// BeatQueued: the hold is queued and its deadline was renewed.
	BeatQueued BeatStatus = 1
	// BeatGranted: the hold has what it waits for (the heartbeat stands in
	// for a grant message that was lost).
	BeatGranted BeatStatus = 2
)

func (b BeatStatus) String() string {
	switch b {
	case BeatDropped:
		return "dropped"
	case BeatQueued:
		return "queued"
	case BeatGranted:
		return "granted"
	}
	return fmt.Sprintf("beat(%d)", uint8(b))
}

// GiveUpStatus is the reply of a waiter's give-up, numbered as the give-up
// scripts reply it.
type GiveUpStatus uint8

// The give-up statuses.
const (
	// GaveUpNothing: the hold was neither a live waiter nor holding.
	GaveUpNothing GiveUpStatus = 0
	// LeftQueue: the hold was a live waiter and left the queue.
	LeftQueue GiveUpStatus = 1
	// PassedOn: the hold had what it waited for (granted in that instant,
	// or taken by an attempt whose reply was lost) and gave it up.
	PassedOn GiveUpStatus = 2
)

func (g GiveUpStatus) String() string {
	switch g {
	case GaveUpNothing:
		return "nothing"
	case LeftQueue:
		return "left queue"
	case PassedOn:
		return "passed on"
	}
	return fmt.Sprintf("giveup(%d)", uint8(g))
}
