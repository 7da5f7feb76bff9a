package reentrant_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/reentrant"
	"github.com/redaqs/aqs/rwlock"
)

var (
	_ aqs.Locker  = (*reentrant.Lock)(nil)
	_ aqs.Locker  = (*fair.Lock)(nil)
	_ aqs.Locker  = (*rwlock.Lock)(nil)
	_ sync.Locker = (*aqs.SyncLocker)(nil)
)

// SyncLockers over the same lock name in two Clients exclude each other, and one shared by
// goroutines of one Client excludes them as a sync.Mutex does (a Lock while it is held waits).
func TestSyncLockerExcludesAcrossGoroutinesAndClients(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	a := newLock(t, newClient(t, rdb))
	b := sameLock(t, newClient(t, rdb), a)
	lockers := []*aqs.SyncLocker{
		aqs.NewSyncLocker(context.Background(), a),
		aqs.NewSyncLocker(context.Background(), b),
	}
	var inside, most, total atomic.Int64 // atomics: the race detector cannot see Redis's order
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			s := lockers[g%2]
			for range 25 {
				s.Lock()
				require.NotNil(t, s.Held())
				require.NoError(t, s.Held().Err())
				if n := inside.Add(1); n > most.Load() {
					most.Store(n)
				}
				total.Add(1)
				inside.Add(-1)
				s.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(1), most.Load(), "holders at once")
	assert.Equal(t, int64(200), total.Load())
	for _, s := range lockers {
		assert.Nil(t, s.Held())
	}
	locked, err := a.IsLocked(context.Background())
	require.NoError(t, err)
	assert.False(t, locked)
}

// panicOf returns what f panicked with, or nil.
func panicOf(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// SyncLocker panics where the Locker fails, and leaves nothing held.
func TestSyncLockerPanicsOnFailure(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	l := newLock(t, newClient(t, rdb))
	ctx := context.Background()

	s := aqs.NewSyncLocker(ctx, l)
	v := panicOf(s.Unlock)
	require.NotNil(t, v, "an Unlock with nothing held")
	assert.Contains(t, v, "not locked")

	gone, cancel := context.WithCancel(ctx)
	cancel()
	v = panicOf(aqs.NewSyncLocker(gone, l).Lock)
	err, ok := v.(error)
	require.True(t, ok, "a panic with %v", v)
	assert.ErrorIs(t, err, context.Canceled)
	locked, err := l.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked, "a failed Lock leaves nothing held")

	// A hold taken from it by force: its Unlock fails, and the hold is forgotten.
	s.Lock()
	held := s.Held()
	forced, err := l.ForceUnlock(ctx)
	require.NoError(t, err)
	require.True(t, forced)
	v = panicOf(s.Unlock)
	err, ok = v.(error)
	require.True(t, ok, "a panic with %v", v)
	assert.True(t, errors.Is(err, aqs.ErrLockLost) || errors.Is(err, aqs.ErrNotOwner), "%v", err)
	assert.Nil(t, s.Held())
	<-held.Done()
}
