package multilock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/multilock"
)

// A multi-lock is an aqs.Locker, so aqs.NewSyncLocker takes it.
var _ aqs.Locker = (*multilock.Lock)(nil)

func TestLockHoldsEveryNameAndUnlockFreesThem(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c := newClient(t, rdb)
		ns := names(t, 3)
		m := newLock(t, c, ns)
		held, err := m.Lock(ctx)
		require.NoError(t, err)
		for _, n := range ns {
			f, err := fair.New(c, n)
			require.NoError(t, err)
			_, ok, err := f.TryLock(ctx)
			require.NoError(t, err)
			assert.False(t, ok, "%q is free while the multi-lock holds it", n)
		}
		require.NoError(t, m.Unlock(held))
		assert.ErrorIs(t, context.Cause(held), aqs.ErrReleased)
		for _, n := range ns {
			f, err := fair.New(c, n)
			require.NoError(t, err)
			fh, ok, err := f.TryLock(ctx)
			require.NoError(t, err)
			require.True(t, ok, "%q is still held after Unlock", n)
			require.NoError(t, f.Unlock(fh))
		}
		assert.ErrorIs(t, m.Unlock(held), aqs.ErrNotOwner)
	})
}

func TestAFairLockOnOneNameAndAMultiLockExcludeEachOtherInOneQueue(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c := newClient(t, rdb)
		ns := names(t, 2)
		a, err := fair.New(c, ns[0])
		require.NoError(t, err)
		ah, err := a.Lock(ctx)
		require.NoError(t, err)

		m := newLock(t, c, ns)
		got := make(chan context.Context)
		go func() {
			h, err := m.Lock(ctx)
			assert.NoError(t, err)
			got <- h
		}()
		// The multi-lock queues behind the holder of a; a later fair request for b must not
		// pass it (b is kept for it).
		require.Eventually(t, func() bool {
			n, err := rdb.ZCard(ctx, a.Keys()[2]).Result()
			return err == nil && n == 1
		}, 5*time.Second, time.Millisecond)
		b, err := fair.New(c, ns[1])
		require.NoError(t, err)
		_, ok, err := b.TryLock(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "b was taken by a later request while the multi-lock waited for it")

		bdone := make(chan context.Context)
		go func() {
			h, err := b.Lock(ctx)
			assert.NoError(t, err)
			bdone <- h
		}()
		require.NoError(t, a.Unlock(ah))
		mh := <-got
		select {
		case <-bdone:
			t.Fatal("the later fair request for b got it while the multi-lock held it")
		default:
		}
		require.NoError(t, m.Unlock(mh))
		bh := <-bdone
		require.NoError(t, b.Unlock(bh))
	})
}

func TestTryLockTakesAllOrNothing(t *testing.T) {
	ctx := context.Background()
	rdb := redistestSingle(t)
	c := newClient(t, rdb)
	ns := names(t, 4)
	f, err := fair.New(c, ns[2])
	require.NoError(t, err)
	fh, err := f.Lock(ctx)
	require.NoError(t, err)
	m := newLock(t, c, ns)
	_, ok, err := m.TryLock(ctx)
	require.NoError(t, err)
	assert.False(t, ok)
	for _, k := range []int{0, 1, 3} {
		n, err := rdb.Exists(ctx, m.Keys()[3*k], m.Keys()[3*k+1], m.Keys()[3*k+2]).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "a failed TryLock left keys of %q", ns[k])
	}
	require.NoError(t, f.Unlock(fh))
	h, ok, err := m.TryLock(ctx, aqs.WithFencingToken())
	require.NoError(t, err)
	require.True(t, ok)
	tok, err := aqs.FencingToken(h)
	require.NoError(t, err)
	assert.Positive(t, tok)
	require.NoError(t, m.Unlock(h))
}

func TestBadArguments(t *testing.T) {
	rdb := redistestSingle(t)
	c := newClient(t, rdb)
	_, err := multilock.New(c, nil)
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	_, err = multilock.New(c, []string{"a", ""})
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	_, err = multilock.New(nil, []string{"a"})
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	_, err = multilock.New(c, []string{"a"}, multilock.Option{})
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	_, err = multilock.New(c, []string{"a"}, multilock.WithWaiterTimeout(time.Millisecond))
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	m, err := multilock.New(c, []string{"b", "a", "b", "a"})
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, m.Names())

	ctx := context.Background()
	_, _, err = m.TryLock(ctx, aqs.WithLease(0))
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	_, _, err = m.TryLock(ctx, aqs.WithWait(-1))
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	_, err = m.Lock(ctx, aqs.WithLease(-time.Second))
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	assert.ErrorIs(t, m.Unlock(ctx), aqs.ErrNotOwner)
	for _, k := range m.Keys() {
		n, err := rdb.Exists(ctx, k).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "%s was written by a refused call", k)
	}

	// After Close every call fails with aqs.ErrClosed; a hold's names are not deleted, they
	// expire.
	c2 := newClient(t, rdb)
	m2, err := multilock.New(c2, names(t, 2))
	require.NoError(t, err)
	held, err := m2.Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, c2.Close())
	_, err = m2.Lock(ctx)
	assert.ErrorIs(t, err, aqs.ErrClosed)
	assert.ErrorIs(t, m2.Unlock(held), aqs.ErrClosed)
	<-held.Done()
	assert.ErrorIs(t, context.Cause(held), aqs.ErrLockLost)
	ttl, err := rdb.PTTL(ctx, m2.Keys()[0]).Result()
	require.NoError(t, err)
	assert.Positive(t, ttl)
}

func TestNamesAcrossSlotsAreRefusedOnACluster(t *testing.T) {
	c := newClient(t, redistestCluster(t))
	_, err := multilock.New(c, []string{"a", "b"}) // slots 15495 and 3300
	assert.ErrorIs(t, err, multilock.ErrCrossSlot)
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	_, err = multilock.New(c, []string{"{x}a", "{x}b"})
	assert.NoError(t, err)
}
