package core

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The sentinel errors of aqs, as the internal packages return them. Package aqs declares the
// public ones and sets each of these to its own at init (aqs/errors.go), so that every error
// the library returns matches the public sentinel; the values here serve the internal
// packages' own tests, which run without package aqs.
var (
	// ErrClosed is returned by every call made after Client.Close.
	ErrClosed = errors.New("aqs: client closed")
	// ErrLockLost is the cause of a held context that was cancelled because the lease can no
	// longer be trusted: the renewal was refused, the key was deleted or taken over, the lease
	// ran out, or renewals kept failing until the local lease deadline.
	ErrLockLost = errors.New("aqs: lock lost")
	// ErrReleased is the cause of a held context whose acquisition was released by Unlock.
	ErrReleased = errors.New("aqs: lock released")
	// ErrNotOwner is returned by Unlock when the caller's context does not hold the lock, and
	// nothing was changed.
	ErrNotOwner = errors.New("aqs: lock not held by this owner")
	// ErrInvalidArgument is wrapped by every error about a bad argument or option.
	ErrInvalidArgument = errors.New("aqs: invalid argument")
	// ErrWrongType is matched by a *WrongTypeError.
	ErrWrongType = errors.New("aqs: key holds another type")
	// ErrReplicaSync is matched by a *ReplicaSyncError: with the replica-sync policy on, an
	// acquisition that too few replicas acknowledged in time, and was undone. NewRuntime
	// returns it too when the server does not accept WAIT.
	ErrReplicaSync = errors.New("aqs: replica sync failed")
)

// WrongTypeError reports that a key the primitive needs already holds a value of another
// type. Nothing was written.
type WrongTypeError struct {
	Key string
}

func (e *WrongTypeError) Error() string {
	return fmt.Sprintf("aqs: key %q holds a value of another type; nothing was changed", e.Key)
}

// Is makes errors.Is(err, ErrWrongType) true.
func (e *WrongTypeError) Is(target error) bool { return target == ErrWrongType }

// WrongType returns the error of a key that holds a value of another type: package aqs sets it
// to make its own *aqs.WrongTypeError (whose fields are WrongTypeError's).
var WrongType = func(key string) error { return &WrongTypeError{Key: key} }

// ReplicaSync returns the error of a call that the replica-sync policy failed: package aqs
// sets it to make its own *aqs.ReplicaSyncError (whose fields are ReplicaSyncError's).
var ReplicaSync = func(e ReplicaSyncError) error { return &e }

// Invalid returns an error wrapping ErrInvalidArgument.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// RedisError wraps an error from Redis for the given key, turning WRONGTYPE into a
// *WrongTypeError.
func RedisError(key string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrReplicaSync) {
		return err // already says which key, and is not a Redis failure
	}
	if strings.Contains(err.Error(), "WRONGTYPE") {
		return WrongType(key)
	}
	if errors.Is(err, redis.ErrClosed) {
		// The go-redis client was closed (typically right after the Client): the Client can
		// do nothing more, as after its own Close.
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return fmt.Errorf("aqs: redis: %w", err)
}
