package fair_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/fair"
)

// A goroutine that calls Lock while its own Client holds the lock rides along: its join goes
// to Redis with the hold's release, or on its own once the ride window is over (see the package
// doc). Either way it joins at the tail: it never passes a waiter of another Client that queued
// before it. (The riders' mechanics, with windows a test can rely on, are tested in
// internal/acquire.)
func TestGoroutineOfTheHoldingClientNeverPassesAnotherClientsWaiter(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		l := newLock(t, newClient(t, rdb))
		other, err := fair.New(newClient(t, rdb), l.Name())
		require.NoError(t, err)
		for round := 0; round < 16; round++ {
			held, err := l.Lock(ctx)
			require.NoError(t, err)
			got := make(chan string, 2)
			lockAndRecord := func(l *fair.Lock, name string, release <-chan struct{}) {
				h, err := l.Lock(ctx)
				if !assert.NoError(t, err) {
					got <- "failed: " + name
					return
				}
				got <- name
				<-release
				// A rider granted by the other Client's release may fail here: see
				// TestRiderGrantedByAnotherClientsReleaseKeepsItsHold in internal/acquire.
				assert.NoError(t, l.Unlock(h), "%s's Unlock", name)
			}
			release := make(chan struct{})
			go lockAndRecord(other, "other", release)
			waitQueued(t, rdb, l, 1)
			go lockAndRecord(l, "rider", release)
			// The release lands at a point swept across the rider's window, from before its
			// call to after it joined on its own (a delay to spread a race, not a wait).
			time.Sleep(time.Duration(round) * 250 * time.Microsecond)
			require.NoError(t, l.Unlock(held))
			first := <-got
			close(release)
			assert.Equal(t, []string{"other", "rider"}, []string{first, <-got}, "round %d", round)
			require.Eventually(t, func() bool {
				n, err := rdb.Exists(ctx, l.Keys()...).Result()
				return err == nil && n == 0
			}, 5*time.Second, time.Millisecond, "round %d: keys left behind", round)
		}
	})
}
