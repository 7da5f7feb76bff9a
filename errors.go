package aqs

import "github.com/redaqs/aqs/internal/core"

// Errors. Compare with errors.Is; a *WrongTypeError also matches ErrWrongType.
var (
	// ErrClosed is returned by every call made after Client.Close.
	ErrClosed = core.ErrClosed
	// ErrLockLost is the cause (see context.Cause) of a held context cancelled because its
	// lease can no longer be trusted: the renewal was refused, the key was deleted or taken by
	// another owner, a fixed lease ran out, or renewals kept failing until the local lease
	// deadline minus a safety margin. Unlock of such a hold returns an error matching it.
	ErrLockLost = core.ErrLockLost
	// ErrReleased is the cause of a held context whose acquisition was given back by Unlock.
	ErrReleased = core.ErrReleased
	// ErrNotOwner is returned by Unlock when the context does not hold the lock: a context that
	// never acquired it, one whose acquisition was already released (one Unlock too many), or
	// one whose hold was lost. Nothing is changed.
	ErrNotOwner = core.ErrNotOwner
	// ErrInvalidArgument is wrapped by every error about a bad argument or option. Nothing is
	// changed.
	ErrInvalidArgument = core.ErrInvalidArgument
	// ErrWrongType is matched by *WrongTypeError.
	ErrWrongType = core.ErrWrongType
	// ErrReplicaSync is matched by *ReplicaSyncError: with WithReplicaSync, an acquisition
	// that too few replicas acknowledged in time (or whose WAIT failed), which was undone: the
	// caller does not hold. New returns an error matching it when the server does not accept
	// WAIT.
	ErrReplicaSync = core.ErrReplicaSync
)

// WrongTypeError reports that a key a primitive needs, its Key, already holds a value of
// another type. Nothing was written.
//
// It is an alias of a type of this module's internal packages, which create it: a type
// declared here could not be matched by errors.As on the errors they return.
type WrongTypeError = core.WrongTypeError

// ReplicaSyncError reports an acquisition (of the primitive whose key is Key) that fewer
// replicas than WithReplicaSync requires acknowledged in time, or whose WAIT failed: Acked of
// Want replicas acknowledged within Timeout, Err is WAIT's own error if it failed. The
// acquisition was undone, unless UndoErr says the undo failed too: it is then tried again in
// the background for a few seconds when Redis could not be reached (a failover), and the
// acquisition otherwise ends with its lease.
// Queued says that the call acquired nothing: it was queued, and left the queue because the
// replicas could not acknowledge while it waited; Unsent, that it sent nothing, because they
// could not a moment before. Either way the caller does not hold. It is an alias for the
// reason WrongTypeError is.
type ReplicaSyncError = core.ReplicaSyncError
