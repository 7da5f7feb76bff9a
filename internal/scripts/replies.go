package scripts

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The typed protocol between Go and Lua.
//
// Each kind of script reply is decoded here, by one function, into a typed value: no caller
// reads a raw reply, and no integer means a token, a status or a wait depending on its sign.
// Every attempt script answers {status, value, grants...}, every heartbeat a BeatStatus, every
// release of an exclusive lock {kind, ...}.

// Status is the outcome of one attempt script (lock_acquire, rw_write_acquire,
// rw_read_acquire, sem_acquire, lsem_acquire).
type Status uint8

// The attempt statuses, as the scripts write them.
const (
	// Acquired: the attempt took what it asked for.
	Acquired Status = 1
	// Granted: a release (or a heartbeat) gave the hold what it waited for before this
	// attempt, which found it so: the grant whose message the waiter missed.
	Granted Status = 2
	// Queued: the hold waits in the queue.
	Queued Status = 3
	// Busy: not acquired, and not queued (the call does not wait).
	Busy Status = 4
	// Dropped: the hold had been dropped from the queue as dead (its liveness deadline passed
	// before it was heard of again); it must start over under a new hold id.
	Dropped Status = 5
	// NotSet: a semaphore whose permits were never set, a latch whose count is not set.
	NotSet Status = 6
	// TooMany: more permits asked than the semaphore has in all (the hold left the queue).
	TooMany Status = 7
	// HeldLocally: not acquired and not queued: another hold of the caller's Client holds the
	// lock (asked for by the reentrant lock's first attempt, which then waits for that
	// hold's release within its Client rather than in the queue).
	HeldLocally Status = 8
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
	case NotSet:
		return "not set"
	case TooMany:
		return "too many"
	case HeldLocally:
		return "held locally"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// Attempt is the reply of one attempt script.
type Attempt struct {
	Status Status
	// Token is the fencing token an Acquired attempt assigned, 0 when it assigned none.
	Token int64
	// Wait, for Queued, Busy and HeldLocally, is how long to wait at most before trying again without a
	// message: the holder's remaining lease, the nearest lease end, the head's liveness; 0
	// when nothing runs out by itself.
	Wait time.Duration
	// Mine are the hold ids of waiters of the caller's Client that the script granted: their
	// grants were not published, and the caller tells them.
	Mine []string
	// QueueLen, for Queued, is the length of the queue's list right after the hold joined it
	// (the waiters ahead, the hold itself, and entries of waiters that left and are not yet
	// dropped), when the script reports it (an integer among the trailing values); 0 when it
	// does not (a later attempt of a queued hold, a script that reports no length).
	QueueLen int
	// Missing, for Queued, are the parts of what the hold waits for that are still to be
	// granted to it (a multi-name lock's names not reserved for it, by their 0-based index),
	// when the script reports them (the integers after the first among the trailing values);
	// nil when it does not.
	Missing []int
}

// DecodeAttempt decodes an attempt script's reply {status, value, grants...}: value is the
// token for Acquired, the wait in ms for Queued, Busy and HeldLocally. An integer among the
// grants of a Queued reply is the queue's length at the join (QueueLen).
func DecodeAttempt(v any) (Attempt, error) {
	a, ok := v.([]any)
	if !ok || len(a) < 2 {
		return Attempt{}, fmt.Errorf("aqs: unexpected attempt reply %v", v)
	}
	st, ok1 := a[0].(int64)
	n, ok2 := a[1].(int64)
	if !ok1 || !ok2 || st < int64(Acquired) || st > int64(HeldLocally) {
		return Attempt{}, fmt.Errorf("aqs: unexpected attempt reply %v", v)
	}
	r := Attempt{Status: Status(st)}
	switch r.Status {
	case Acquired:
		r.Token = n
	case Queued, Busy, HeldLocally:
		r.Wait = time.Duration(n) * time.Millisecond
	}
	r.Mine = holds(a[2:])
	if r.Status == Queued {
		ints := 0
		for _, x := range a[2:] {
			if n, ok := x.(int64); ok {
				if ints == 0 {
					r.QueueLen = int(n)
				} else {
					r.Missing = append(r.Missing, int(n))
				}
				ints++
			}
		}
	}
	return r, nil
}

// holds reads the hold ids at the end of a reply.
func holds(v []any) []string {
	if len(v) == 0 {
		return nil
	}
	var out []string // nil when there is none (a Queued reply's queue length alone)
	for _, x := range v {
		if s, ok := x.(string); ok {
			if out == nil {
				out = make([]string, 0, len(v))
			}
			out = append(out, s)
		}
	}
	return out
}

// BeatStatus is the reply of a heartbeat script (lock_heartbeat, rw_heartbeat,
// sem_heartbeat, lsem_heartbeat).
type BeatStatus uint8

// The heartbeat statuses, as the scripts write them.
const (
	// BeatDropped: the waiter is no longer queued (its deadline passed, or it left).
	BeatDropped BeatStatus = 0
	// BeatQueued: still queued; its deadline was renewed.
	BeatQueued BeatStatus = 1
	// BeatGranted: what it waits for is its (the fallback for a lost grant message).
	BeatGranted BeatStatus = 2
)

// DecodeBeat decodes a heartbeat script's reply.
func DecodeBeat(v any) (BeatStatus, error) {
	n, ok := v.(int64)
	if !ok || n < 0 || n > 2 {
		return 0, fmt.Errorf("aqs: unexpected heartbeat reply %v", v)
	}
	return BeatStatus(n), nil
}

// ReleaseKind is the outcome of an exclusive lock's release (lock_release, rw_write_release).
type ReleaseKind uint8

// The release outcomes, as the scripts write them.
const (
	// Counted: the hold was counted down and is still held.
	Counted ReleaseKind = 0
	// Freed: the hold ended and the lock is free.
	Freed ReleaseKind = 1
	// HandedLocal: the hold ended and the lock went to a waiter of the caller's Client, which
	// was not told.
	HandedLocal ReleaseKind = 2
	// HandedRemote: the hold ended and the lock went to a waiter of another Client, which was
	// told.
	HandedRemote ReleaseKind = 3
	// NotHeld: the lock was not this hold's (its lease ran out, or it was taken from it);
	// nothing changed.
	NotHeld ReleaseKind = 4
)

// Release is the reply of an exclusive lock's release.
type Release struct {
	Kind ReleaseKind
	// Left is how many holds are left, for Counted.
	Left int
	// Hold and Lease are the waiter the lock went to and its lease, for HandedLocal.
	Hold  string
	Lease time.Duration
	// Joined, for HandedLocal, reports that the release's riders joined the queue before the
	// lock was handed on (rather than the lock going straight to the release's pick).
	Joined bool
	// Passed, for HandedLocal, reports that the lock went to the release's pick past a live
	// waiter of another Client (a local hand-off that counts in its Client's streak).
	Passed bool
	// Mine, for Freed, are the hold ids of waiters of the caller's Client that the release
	// granted (the read-write lock's, which may grant many), not published.
	Mine []string
}

// DecodeRelease decodes a release's reply: {0, n} Counted, {1, grants...} Freed, {2, hold,
// lease ms, joined, passed} HandedLocal, {3} HandedRemote, {4} NotHeld.
func DecodeRelease(v any) (Release, error) {
	a, ok := v.([]any)
	if !ok || len(a) < 1 {
		return Release{}, fmt.Errorf("aqs: unexpected release reply %v", v)
	}
	k, ok := a[0].(int64)
	if !ok || k < 0 || k > int64(NotHeld) {
		return Release{}, fmt.Errorf("aqs: unexpected release reply %v", v)
	}
	r := Release{Kind: ReleaseKind(k)}
	switch r.Kind {
	case Counted:
		if len(a) < 2 {
			return Release{}, fmt.Errorf("aqs: unexpected release reply %v", v)
		}
		n, _ := a[1].(int64)
		r.Left = int(n)
	case Freed:
		r.Mine = holds(a[1:])
	case HandedLocal:
		if len(a) < 3 {
			return Release{}, fmt.Errorf("aqs: unexpected release reply %v", v)
		}
		r.Hold, _ = a[1].(string)
		n, _ := a[2].(int64)
		r.Lease = time.Duration(n) * time.Millisecond
		if len(a) > 3 {
			j, _ := a[3].(int64)
			r.Joined = j == 1
		}
		if len(a) > 4 {
			p, _ := a[4].(int64)
			r.Passed = p == 1
		}
	}
	return r, nil
}

// GiveUp is the reply of a give-up script (lock_give_up).
type GiveUp uint8

// The give-up outcomes.
const (
	// GaveUpNothing: the hold was neither queued nor holding.
	GaveUpNothing GiveUp = 0
	// LeftQueue: the hold was queued and left.
	LeftQueue GiveUp = 1
	// PassedOn: the hold had what it waited for (a grant whose message was on its way, or an
	// attempt whose reply was lost), which passed on.
	PassedOn GiveUp = 2
)

// DecodeGiveUp decodes a give-up script's reply.
func DecodeGiveUp(v any) (GiveUp, error) {
	n, ok := v.(int64)
	if !ok || n < 0 || n > 2 {
		return 0, fmt.Errorf("aqs: unexpected give-up reply %v", v)
	}
	return GiveUp(n), nil
}

// SemStatus is the status of a semaphore script that is not an attempt (sem_release,
// lsem_release, lsem_release_id, sem_give_up, lsem_give_up, sem_force, sem_set).
type SemStatus uint8

// The semaphore statuses, as the scripts write them.
const (
	// SemOK: done.
	SemOK SemStatus = 0
	// SemNotSet: the permits were never set; nothing changed.
	SemNotSet SemStatus = 6
	// SemOverRelease: more permits given back than taken; nothing changed.
	SemOverRelease SemStatus = 8
	// SemExpired: no live permit has the id (its lease ran out, or it was released); nothing
	// changed.
	SemExpired SemStatus = 9
	// SemInsufficient: a reduction of the permits larger than the available ones; nothing
	// changed.
	SemInsufficient SemStatus = 10
	// SemReleasedByID: no live permit has the id, because a release by its id ended it
	// (lsem_release_id.lua keeps a mark of that until the permit's lease would have ended);
	// nothing changed.
	SemReleasedByID SemStatus = 11
)

// Sem is the reply of a semaphore script that is not an attempt: {status, value, grants...}.
type Sem struct {
	Status SemStatus
	// Value is the script's number: the permits a leased permit still holds (lsem_release),
	// the permits given back (the give-ups), released (sem_force), 1 when the permits were
	// set or changed (sem_set).
	Value int64
	// Mine are the hold ids of waiters of the caller's Client that the script granted.
	Mine []string
}

// DecodeSem decodes the reply of a semaphore script that is not an attempt.
func DecodeSem(v any) (Sem, error) {
	a, ok := v.([]any)
	if !ok || len(a) < 2 {
		return Sem{}, fmt.Errorf("aqs: unexpected semaphore reply %v", v)
	}
	st, ok1 := a[0].(int64)
	n, ok2 := a[1].(int64)
	if !ok1 || !ok2 || st < 0 || st > int64(SemReleasedByID) {
		return Sem{}, fmt.Errorf("aqs: unexpected semaphore reply %v", v)
	}
	return Sem{Status: SemStatus(st), Value: n, Mine: holds(a[2:])}, nil
}

// Gone reports that the release found the hold gone (NotHeld): what the engine's release
// (internal/acquire/release.go) reads of any release's reply.
func (r Release) Gone() bool { return r.Kind == NotHeld }

// Granted returns the hold ids of waiters of the caller's Client that the release granted.
func (r Release) Granted() []string { return r.Mine }

// Gone reports that a leased permit's release found the permit gone (SemExpired).
func (s Sem) Gone() bool { return s.Status == SemExpired }

// Granted returns the hold ids of waiters of the caller's Client that the script granted.
func (s Sem) Granted() []string { return s.Mine }

// Reenter runs lock_reenter.lua for hold on the lock key key (the exclusive locks', the
// read-write lock's write side): it counts the hold up, extends its lease to at least lease
// (0: leaves it alone), and reports whether the key still held hold.
func Reenter(ctx context.Context, c redis.Scripter, key, hold string, lease time.Duration) (bool, error) {
	n, err := LockReenter.Run(ctx, c, []string{key}, hold, lease.Milliseconds()).Int64()
	return n != 0, err
}

// Signal is the reply of a condition's signal script (cond_signal, rw_cond_signal):
// {moved, grants...}.
type Signal struct {
	// Moved is how many waiters moved from the condition onto the lock's queue.
	Moved int
	// Mine are the hold ids of waiters of the caller's Client that the script granted the
	// lock to (it was free), not published.
	Mine []string
}

// DecodeSignal decodes a signal script's reply.
func DecodeSignal(v any) (Signal, error) {
	a, ok := v.([]any)
	if !ok || len(a) < 1 {
		return Signal{}, fmt.Errorf("aqs: unexpected signal reply %v", v)
	}
	n, ok := a[0].(int64)
	if !ok {
		return Signal{}, fmt.Errorf("aqs: unexpected signal reply %v", v)
	}
	return Signal{Moved: int(n), Mine: holds(a[1:])}, nil
}

// LockState is the reply of lock_info: {holder or false, count, token, pttl}.
type LockState struct {
	Holder    string // "" when the lock is free
	Count     int
	Token     int64
	Remaining time.Duration // the holder's remaining lease; 0 when free
}

// DecodeLockInfo decodes lock_info's reply.
func DecodeLockInfo(v any) (LockState, error) {
	a, ok := v.([]any)
	if !ok || len(a) < 4 {
		return LockState{}, fmt.Errorf("aqs: unexpected lock info reply %v", v)
	}
	var in LockState
	in.Holder, _ = a[0].(string)
	in.Count = int(toInt(a[1]))
	in.Token = toInt(a[2])
	if ms := toInt(a[3]); in.Holder != "" && ms > 0 {
		in.Remaining = time.Duration(ms) * time.Millisecond
	}
	return in, nil
}

// RWState is the reply of rw_info: {writer or false, its count, its token, its pttl, readers,
// waiters}.
type RWState struct {
	LockState // the writer's
	Readers   int
	Waiters   int
}

// DecodeRWInfo decodes rw_info's reply.
func DecodeRWInfo(v any) (RWState, error) {
	a, ok := v.([]any)
	if !ok || len(a) < 6 {
		return RWState{}, fmt.Errorf("aqs: unexpected read-write lock info reply %v", v)
	}
	w, err := DecodeLockInfo(a[:4])
	if err != nil {
		return RWState{}, err
	}
	return RWState{LockState: w, Readers: int(toInt(a[4])), Waiters: int(toInt(a[5]))}, nil
}

// DecodeInt decodes a script's integer reply: lock_token's token, the force releases' and
// lsem_renew's 1 or 0, rw_read_reenter's count, sem_drain's and cond_leave's numbers,
// sem_unsure's 1 or 0.
func DecodeInt(v any) (int64, error) {
	if n, ok := v.(int64); ok {
		return n, nil
	}
	return 0, fmt.Errorf("aqs: unexpected reply %v", v)
}

// DecodeAvailable decodes lsem_available's reply {available, total}: the available permits,
// and whether the permits are set (total -1: never set).
func DecodeAvailable(v any) (available int64, set bool, err error) {
	a, ok := v.([]any)
	if ok && len(a) == 2 {
		n, ok1 := a[0].(int64)
		t, ok2 := a[1].(int64)
		if ok1 && ok2 {
			return n, t >= 0, nil
		}
	}
	return 0, false, fmt.Errorf("aqs: unexpected reply %v", v)
}

// DecodeNumber decodes a one-number list reply {n} (the latch's scripts).
func DecodeNumber(v any) (int64, error) {
	a, ok := v.([]any)
	if ok && len(a) == 1 {
		if n, ok := a[0].(int64); ok {
			return n, nil
		}
	}
	return 0, fmt.Errorf("aqs: unexpected reply %v", v)
}

// DecodePoll decodes cond_poll's reply: moved (the waiter left the condition for the lock's
// queue: {0}), or still on the condition, an Attempt {3, ms}.
func DecodePoll(v any) (moved bool, a Attempt, err error) {
	if n, err := DecodeNumber(v); err == nil && n == 0 {
		return true, Attempt{}, nil
	}
	a, err = DecodeAttempt(v)
	return false, a, err
}

// toInt reads an integer reply element: an int64, a numeric string, or false/nil as 0.
func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}
