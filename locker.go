package aqs

import (
	"context"
	"fmt"
	"sync"
)

// Locker is a lock taken with a context: reentrant.Lock, fair.Lock, the write side of
// rwlock.Lock, and the read side as rwlock.Lock.RLocker returns it. Lock blocks until the lock
// is held or ctx is done, and returns the held context, which Unlock takes back (see the lock's
// own documentation for its ordering and what a failure leaves behind).
type Locker interface {
	Lock(ctx context.Context, opts ...LockOption) (context.Context, error)
	Unlock(held context.Context) error
}

// SyncLocker is a sync.Locker over a Locker, for code that wants one. Make it with
// NewSyncLocker; it is safe for concurrent use.
//
// It keeps the held contexts inside: Lock takes the lock with the context given to
// NewSyncLocker, and Unlock releases the most recent hold taken through it that is not
// released yet. So, as with sync.Mutex, a goroutine that calls Lock while the lock is held
// through the same SyncLocker waits (it is not a re-entry), and the goroutine that unlocks
// need not be the one that locked. Over the read side of a read-write lock (RLocker), holds
// taken through it overlap, and each Unlock releases one of them.
//
// A sync.Locker cannot return errors, so SyncLocker panics where the Locker returns one, as
// sync.Mutex does on an unlock of an unlocked mutex: Lock when the lock cannot be taken (the
// context ended, the Client is closed, Redis failed past its retries), leaving nothing held;
// Unlock when nothing is held through it, or when the release fails, for instance with
// ErrLockLost when the hold's lease ran out before (the hold is forgotten all the same). Code
// that can handle errors should use the Locker itself; Held gives the held context, whose end
// tells that the lease can no longer be trusted.
type SyncLocker struct {
	ctx context.Context
	l   Locker

	mu   sync.Mutex
	held []context.Context // the holds taken through it, oldest first
}

// NewSyncLocker returns a sync.Locker over l, whose Lock takes l with ctx: a ctx with a
// deadline bounds each Lock, and ctx's values reach the lock (context.Background() is the usual
// choice).
func NewSyncLocker(ctx context.Context, l Locker) *SyncLocker {
	return &SyncLocker{ctx: ctx, l: l}
}

var _ sync.Locker = (*SyncLocker)(nil)

// Lock takes the lock, and panics with the Locker's error when it cannot (see SyncLocker).
func (s *SyncLocker) Lock() {
	held, err := s.l.Lock(s.ctx)
	if err != nil {
		panic(fmt.Errorf("aqs: SyncLocker.Lock: %w", err))
	}
	s.mu.Lock()
	s.held = append(s.held, held)
	s.mu.Unlock()
}

// Unlock releases the most recent hold taken through s, and panics when there is none or
// when its release fails (see SyncLocker).
func (s *SyncLocker) Unlock() {
	s.mu.Lock()
	n := len(s.held)
	if n == 0 {
		s.mu.Unlock()
		panic("aqs: SyncLocker.Unlock: not locked through this SyncLocker")
	}
	held := s.held[n-1]
	s.held[n-1] = nil
	s.held = s.held[:n-1]
	s.mu.Unlock()
	if err := s.l.Unlock(held); err != nil {
		panic(fmt.Errorf("aqs: SyncLocker.Unlock: %w", err))
	}
}

// Held returns the held context of the most recent hold taken through s that is not released
// yet, or nil when there is none. It is done, with ErrLockLost as its cause, once that hold's
// lease can no longer be trusted.
func (s *SyncLocker) Held() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.held); n > 0 {
		return s.held[n-1]
	}
	return nil
}
