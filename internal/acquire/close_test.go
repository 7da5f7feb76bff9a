package acquire_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// A call blocked on a held lock returns an error matching aqs.ErrClosed when its Client is
// closed, also when its go-redis client is closed right after (or right before) the Client,
// whatever the call was doing at that moment: waiting, or in a round trip that the closed
// go-redis client then fails.
func TestBlockedCallReturnsErrClosedWhenItsClientAndGoRedisClientClose(t *testing.T) {
	srv := redistest.Single(t)
	hc := newClient(t, srv.Client(t))
	for round := 0; round < 20; round++ {
		// A lock of its own per round: a closed waiter's place stays queued until its
		// liveness deadline, as a waiter's whose process died.
		holder := newLock(t, hc, fmt.Sprintf("%s-%d", redistest.Name(t), round), 0, 0)
		held, err := lock(context.Background(), holder)
		require.NoError(t, err)
		rdb := srv.Client(t)
		c, err := aqs.New(context.Background(), rdb)
		require.NoError(t, err)
		// The rounds close at spread moments, half of them go-redis first.
		l := newLock(t, c, holder.Name(), 0, 0)
		done := make(chan error, 1)
		go func() {
			_, err := lock(context.Background(), l)
			done <- err
		}()
		waitQueued(t, srv.Client(t), l, 1)
		time.Sleep(time.Duration(round) * 100 * time.Microsecond) // spreads the moment, not a wait
		if round%2 == 0 {
			require.NoError(t, c.Close())
			_ = rdb.Close()
		} else {
			_ = rdb.Close()
			_ = c.Close()
		}
		select {
		case err := <-done:
			require.ErrorIs(t, err, aqs.ErrClosed, "round %d", round)
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: the blocked call did not return after Close", round)
		}
		require.NoError(t, holder.Unlock(held))
	}
}
