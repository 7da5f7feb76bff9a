package aqs

import (
	"errors"
	"time"

	"github.com/redaqs/aqs/internal/core"
)

// Errors. Compare with errors.Is; a *WrongTypeError also matches ErrWrongType, a
// *ReplicaSyncError ErrReplicaSync.
var (
	// ErrClosed is returned by every call made after Client.Close.
	ErrClosed = errors.New("aqs: client closed")
	// ErrLockLost is the cause (see context.Cause) of a held context cancelled because its
	// lease can no longer be trusted: the renewal was refused, the key was deleted or taken by
	// another owner, a fixed lease ran out, or renewals kept failing until the local lease
	// deadline minus a safety margin. Unlock of such a hold returns an error matching it.
	ErrLockLost = errors.New("aqs: lock lost")
	// ErrReleased is the cause of a held context whose acquisition was given back by Unlock.
	ErrReleased = errors.New("aqs: lock released")
	// ErrNotOwner is returned by Unlock when the context does not hold the lock: a context that
	// never acquired it, one whose acquisition was already released (one Unlock too many), or
	// one whose hold was lost. Nothing is changed.
	ErrNotOwner = errors.New("aqs: lock not held by this owner")
	// ErrInvalidArgument is wrapped by every error about a bad argument or option. Nothing is
	// changed.
	ErrInvalidArgument = errors.New("aqs: invalid argument")
	// ErrWrongType is matched by *WrongTypeError.
	ErrWrongType = errors.New("aqs: key holds another type")
	// ErrReplicaSync is matched by *ReplicaSyncError: with WithReplicaSync, an acquisition
	// that too few replicas acknowledged in time (or whose WAIT failed), which was undone: the
	// caller does not hold. New returns an error matching it when the server does not accept
	// WAIT.
	ErrReplicaSync = errors.New("aqs: replica sync failed")
)

// WrongTypeError reports that a key a primitive needs already holds a value of another type.
// Nothing was written.
type WrongTypeError struct {
	// Key is the key of the other type.
	Key string
}

func (e *WrongTypeError) Error() string { return (*core.WrongTypeError)(e).Error() }

// Is makes errors.Is(err, ErrWrongType) true.
func (e *WrongTypeError) Is(target error) bool { return target == ErrWrongType }

// ReplicaSyncError reports an acquisition that fewer replicas than WithReplicaSync requires
// acknowledged in time, or whose WAIT failed, or a call that the policy stopped (Queued,
// Unsent). Either way the caller does not hold.
type ReplicaSyncError struct {
	// Key is the key of the primitive.
	Key string
	// Want is the number of replicas required.
	Want int
	// Acked is how many acknowledged within Timeout (0 when WAIT failed).
	Acked int
	// Timeout is how long WAIT waited.
	Timeout time.Duration
	// Err is WAIT's own error when it failed (the server refuses WAIT, or the connection
	// broke); nil when it answered with too few replicas.
	Err error
	// UndoErr is the error of undoing the acquisition, when that failed too: it is then tried
	// again in the background for a few seconds when Redis could not be reached (a failover),
	// and the acquisition otherwise ends with its lease. Nil: the acquisition was undone.
	UndoErr error
	// Queued: the call acquired nothing: it was queued, and left the queue because the
	// replicas could not acknowledge while it waited.
	Queued bool
	// Unsent: the call sent nothing, because the replicas could not acknowledge a moment
	// before.
	Unsent bool
}

func (e *ReplicaSyncError) Error() string { return (*core.ReplicaSyncError)(e).Error() }

// Is makes errors.Is(err, ErrReplicaSync) true.
func (e *ReplicaSyncError) Is(target error) bool { return target == ErrReplicaSync }

// Unwrap returns WAIT's own error, if any.
func (e *ReplicaSyncError) Unwrap() error { return e.Err }

// The internal packages return this package's errors (see internal/core/errors.go).
func init() {
	core.ErrClosed, core.ErrLockLost, core.ErrReleased, core.ErrNotOwner = ErrClosed, ErrLockLost, ErrReleased, ErrNotOwner
	core.ErrInvalidArgument, core.ErrWrongType, core.ErrReplicaSync = ErrInvalidArgument, ErrWrongType, ErrReplicaSync
	core.WrongType = func(key string) error { return &WrongTypeError{Key: key} }
	core.ReplicaSync = func(e core.ReplicaSyncError) error { x := ReplicaSyncError(e); return &x }
}
