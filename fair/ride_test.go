package fair_test

import (
	"context"
	"fmt"
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
			errs := make(chan error, 2)
			release := make(chan struct{})
			lockAndRecord := func(l *fair.Lock, name string) {
				h, err := l.Lock(ctx)
				if err != nil {
					got <- "failed: " + name
					errs <- err
					return
				}
				got <- name
				<-release
				if err := l.Unlock(h); err != nil {
					// A rider granted by the other Client's release may fail here: see
					// TestRiderGrantedByAnotherClientsReleaseKeepsItsHold in internal/acquire.
					errs <- fmt.Errorf("%s's Unlock: %w", name, err)
					return
				}
				errs <- nil
			}
			go lockAndRecord(other, "other")
			waitQueued(t, rdb, l, 1)
			go lockAndRecord(l, "rider")
			// The release lands at a point swept across the rider's window, from before its
			// call to after it joined on its own (a delay to spread a race, not a wait).
			time.Sleep(time.Duration(round) * 250 * time.Microsecond)
			require.NoError(t, l.Unlock(held))
			first := <-got
			close(release)
			assert.Equal(t, []string{"other", "rider"}, []string{first, <-got}, "round %d", round)
			for range 2 {
				require.NoError(t, <-errs, "round %d", round)
			}
			n, err := rdb.Exists(ctx, l.Keys()...).Result()
			require.NoError(t, err)
			require.Zero(t, n, "round %d: keys left behind", round)
		}
	})
}
