package reentrant_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestSmoke(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		c := newClient(t, rdb)
		l := newLock(t, c)
		ctx := context.Background()
		held, err := l.Lock(ctx)
		require.NoError(t, err)
		inner, err := l.Lock(held)
		require.NoError(t, err)
		n, err := l.HoldCount(inner)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		_, ok, err := l.TryLock(ctx)
		require.NoError(t, err)
		require.False(t, ok)
		got := make(chan error, 1)
		go func() {
			h2, err := l.Lock(ctx)
			if err == nil {
				err = l.Unlock(h2)
			}
			got <- err
		}()
		require.NoError(t, l.Unlock(inner))
		time.Sleep(50 * time.Millisecond)
		require.NoError(t, l.Unlock(held))
		select {
		case err := <-got:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("waiter not woken")
		}
	})
}
