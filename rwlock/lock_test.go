package rwlock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/rwlock"
)

func TestReadersShareAndWriterExcludes(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		l := newLock(t, newClient(t, rdb))
		r1, err := l.RLock(ctx)
		require.NoError(t, err)
		r2, err := l.RLock(ctx)
		require.NoError(t, err)
		info, err := l.Info(ctx)
		require.NoError(t, err)
		assert.Equal(t, 2, info.Readers)
		locked, err := l.IsLocked(ctx)
		require.NoError(t, err)
		assert.True(t, locked)

		_, ok, err := l.TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "a writer gets in only when no reader holds")

		require.NoError(t, l.RUnlock(r1))
		require.NoError(t, l.RUnlock(r2))
		w, ok, err := l.TryLock(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		_, ok, err = l.TryRLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "no reader while a writer holds")
		_, ok, err = l.TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "no second writer")
		tok, err := l.Token(w)
		require.NoError(t, err)
		assert.Positive(t, tok)
		require.NoError(t, l.Unlock(w))
		locked, err = l.IsLocked(ctx)
		require.NoError(t, err)
		assert.False(t, locked)
		redistest.AssertNoKeyWithoutTTL(t, rdb, l.Name(), l.Key())
	})
}

func TestLastReaderWakesTheWaitingWriter(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Single(t).Client(t)
	l := newLock(t, newClient(t, rdb))
	r, err := l.RLock(ctx)
	require.NoError(t, err)
	got := make(chan context.Context, 1)
	go func() {
		w, err := l.Lock(ctx)
		assert.NoError(t, err)
		got <- w
	}()
	require.Eventually(t, func() bool {
		info, err := l.Info(ctx)
		return err == nil && info.Waiters == 1
	}, 5*time.Second, time.Millisecond)
	released := time.Now()
	require.NoError(t, l.RUnlock(r))
	select {
	case w := <-got:
		// Woken by the message, not by the fallback timer (the reader's 30s lease).
		assert.Less(t, time.Since(released), 5*time.Second)
		require.NoError(t, l.Unlock(w))
	case <-time.After(10 * time.Second):
		t.Fatal("the writer was not woken")
	}
	info, err := l.Info(ctx)
	require.NoError(t, err)
	assert.Zero(t, info.Waiters, "the writer left the queue with its grant")
}

func TestFairModeHoldsNewReadersBehindAWaitingWriter(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Single(t).Client(t)
	l := newLock(t, newClient(t, rdb))
	r, err := l.RLock(ctx)
	require.NoError(t, err)
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	writerIn, writerOut := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(writerOut)
		w, err := l.Lock(ctx)
		if !assert.NoError(t, err) {
			close(writerIn)
			return
		}
		note("writer")
		close(writerIn)
		assert.NoError(t, l.Unlock(w), "the writer's unlock")
	}()
	require.Eventually(t, func() bool {
		info, err := l.Info(ctx)
		return err == nil && info.Waiters == 1
	}, 5*time.Second, time.Millisecond)
	_, ok, err := l.TryRLock(ctx)
	require.NoError(t, err)
	assert.False(t, ok, "a new reader waits behind the waiting writer")
	lateReader := make(chan struct{})
	go func() {
		defer close(lateReader)
		h, err := l.RLock(ctx)
		if !assert.NoError(t, err) {
			return
		}
		note("late reader")
		assert.NoError(t, l.RUnlock(h))
	}()
	// The reader that held when the writer came may re-enter, and then leaves.
	r2, err := l.RLock(r)
	require.NoError(t, err)
	require.NoError(t, l.RUnlock(r2))
	require.NoError(t, l.RUnlock(r))
	<-writerIn
	<-lateReader
	<-writerOut // the writer's unlock ends within the test, which checks it
	assert.Equal(t, []string{"writer", "late reader"}, order)
}

func TestNonFairModeLetsReadersPassAWaitingWriter(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Single(t).Client(t)
	l := newLock(t, newClient(t, rdb), rwlock.WithNonFair())
	r, err := l.RLock(ctx)
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := l.Lock(wctx)
		done <- err
	}()
	require.Eventually(t, func() bool {
		info, err := l.Info(ctx)
		return err == nil && info.Waiters == 1
	}, 5*time.Second, time.Millisecond)
	r2, ok, err := l.TryRLock(ctx)
	require.NoError(t, err)
	require.True(t, ok, "the non-fair mode lets a reader in while a writer waits")
	require.NoError(t, l.RUnlock(r2))
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
	info, err := l.Info(ctx)
	require.NoError(t, err)
	assert.Zero(t, info.Waiters, "giving up takes the writer out of the queue")
	require.NoError(t, l.RUnlock(r))
}

func TestDowngradeLeavesAReaderAndWakesReaders(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Single(t).Client(t)
	l := newLock(t, newClient(t, rdb))
	w, err := l.Lock(ctx)
	require.NoError(t, err)
	readerIn := make(chan context.Context, 1)
	go func() {
		h, err := l.RLock(ctx)
		assert.NoError(t, err)
		readerIn <- h
	}()
	require.Eventually(t, func() bool {
		info, err := l.Info(ctx)
		return err == nil && info.Waiters == 1
	}, 5*time.Second, time.Millisecond, "the reader is queued")
	down, err := l.RLock(w) // the writer takes the read side too
	require.NoError(t, err)
	require.NoError(t, l.Unlock(w))
	select {
	case h := <-readerIn:
		require.NoError(t, l.RUnlock(h))
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting reader was not woken by the downgrade")
	}
	assert.ErrorIs(t, context.Cause(w), aqs.ErrReleased)
	assert.NoError(t, down.Err(), "the downgraded read context outlives the write side's release")
	_, ok, err := l.TryLock(ctx)
	require.NoError(t, err)
	assert.False(t, ok, "the downgraded holder is still a reader")
	require.NoError(t, l.RUnlock(down))
	w2, ok, err := l.TryLock(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, l.Unlock(w2))
}

func TestUpgradeFailsAtOnce(t *testing.T) {
	ctx := context.Background()
	l := newLock(t, newClient(t, redistest.Single(t).Client(t)))
	r, err := l.RLock(ctx)
	require.NoError(t, err)
	start := time.Now()
	_, err = l.Lock(r)
	assert.ErrorIs(t, err, rwlock.ErrUpgrade)
	_, _, err = l.TryLock(r, aqs.WithWait(time.Second))
	assert.ErrorIs(t, err, rwlock.ErrUpgrade)
	assert.Less(t, time.Since(start), 500*time.Millisecond)
	require.NoError(t, l.RUnlock(r))
}

func TestReadAndWriteSidesAreReentrantAndCounted(t *testing.T) {
	ctx := context.Background()
	l := newLock(t, newClient(t, redistest.Single(t).Client(t)))
	r1, err := l.RLock(ctx)
	require.NoError(t, err)
	r2, err := l.RLock(r1)
	require.NoError(t, err)
	require.NoError(t, l.RUnlock(r2))
	assert.ErrorIs(t, context.Cause(r2), aqs.ErrReleased)
	assert.NoError(t, r1.Err(), "the outer read acquisition still holds")
	require.NoError(t, l.RUnlock(r1))
	assert.ErrorIs(t, l.RUnlock(r1), aqs.ErrNotOwner)

	w1, err := l.Lock(ctx)
	require.NoError(t, err)
	w2, err := l.Lock(w1)
	require.NoError(t, err)
	info, err := l.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, info.WriteCount)
	require.NoError(t, l.Unlock(w2))
	require.NoError(t, l.Unlock(w1))
}

func TestUnlockingTheOtherSideIsNotOwner(t *testing.T) {
	ctx := context.Background()
	l := newLock(t, newClient(t, redistest.Single(t).Client(t)))
	w, err := l.Lock(ctx)
	require.NoError(t, err)
	assert.ErrorIs(t, l.RUnlock(w), aqs.ErrNotOwner, "read-unlock while holding only the write side")
	require.NoError(t, l.Unlock(w))
	r, err := l.RLock(ctx)
	require.NoError(t, err)
	assert.ErrorIs(t, l.Unlock(r), aqs.ErrNotOwner, "write-unlock while holding only the read side")
	require.NoError(t, l.RUnlock(r))
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Single(t).Client(t)
	c := newClient(t, rdb)
	_, err := rwlock.New(c, "")
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	_, err = rwlock.New(c, "x", rwlock.WithWriterTimeout(time.Millisecond))
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	_, err = rwlock.New(c, "x", rwlock.Option{})
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	l := newLock(t, c)
	_, err = l.RLock(ctx, aqs.WithLease(-time.Second))
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	assert.ErrorIs(t, l.Unlock(ctx), aqs.ErrNotOwner)
	assert.ErrorIs(t, l.RUnlock(ctx), aqs.ErrNotOwner)

	// A key of another type: a typed error, nothing written.
	require.NoError(t, rdb.Set(ctx, l.Key(), "precious", 0).Err())
	_, err = l.RLock(ctx)
	assert.ErrorIs(t, err, aqs.ErrWrongType)
	_, err = l.Lock(ctx)
	assert.ErrorIs(t, err, aqs.ErrWrongType)
	_, err = l.Info(ctx)
	assert.ErrorIs(t, err, aqs.ErrWrongType)
	v, err := rdb.Get(ctx, l.Key()).Result()
	require.NoError(t, err)
	assert.Equal(t, "precious", v)
	assert.Zero(t, rdb.Exists(ctx, l.Keys()[1:]...).Val(), "nothing written: no reader, no re-entry count, no queue")
	require.NoError(t, rdb.Del(ctx, l.Key()).Err())
	require.NoError(t, rdb.HSet(ctx, l.Key()+":r", "a", "b").Err())
	_, err = l.RLock(ctx)
	assert.ErrorIs(t, err, aqs.ErrWrongType)
	require.NoError(t, rdb.Del(ctx, l.Key()+":r").Err())
}

func TestManyReadersAndWritersNeverOverlap(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		l1 := newLock(t, newClient(t, rdb))
		l2, err := rwlock.New(newClient(t, rdb), l1.Name()) // the same lock through another Client
		require.NoError(t, err)
		var readers, writers, bad atomic.Int64
		var wg sync.WaitGroup
		for i := 0; i < 12; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				l := l1
				if i%2 == 1 {
					l = l2
				}
				for k := 0; k < 15; k++ {
					if i%4 == 0 {
						h, err := l.Lock(ctx)
						if !assert.NoError(t, err) {
							return
						}
						if writers.Add(1) != 1 || readers.Load() != 0 {
							bad.Add(1)
						}
						time.Sleep(100 * time.Microsecond) // a short critical section, to overlap if it could
						writers.Add(-1)
						assert.NoError(t, l.Unlock(h))
						continue
					}
					h, err := l.RLock(ctx)
					if !assert.NoError(t, err) {
						return
					}
					readers.Add(1)
					if writers.Load() != 0 {
						bad.Add(1)
					}
					time.Sleep(100 * time.Microsecond)
					readers.Add(-1)
					assert.NoError(t, l.RUnlock(h))
				}
			}(i)
		}
		wg.Wait()
		assert.Zero(t, bad.Load(), "a writer overlapped another holder")
		redistest.AssertNoKeyWithoutTTL(t, rdb, l1.Name(), l1.Key())
	})
}

func TestAnAbandonedReaderExpiresAloneAndLetsTheWriterIn(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Single(t).Client(t)
	crashed := newClient(t, rdb)
	l := newLock(t, crashed)
	_, err := l.RLock(ctx, aqs.WithLease(300*time.Millisecond))
	require.NoError(t, err)
	live, err := l.RLock(ctx) // a watchdog reader: its lease is its own
	require.NoError(t, err)
	other, err := rwlock.New(newClient(t, rdb), l.Name())
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, l.RUnlock(live))
	w, err := other.Lock(ctx)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 2*time.Second, "the writer got in within the crashed reader's lease")
	require.NoError(t, other.Unlock(w))
}
