package semaphore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/internal/redistest"
	"github.com/redaqs/aqs/internal/scripts"
)

// go-redis re-sends a command whose reply a broken connection lost (MaxRetries), so a script
// that ran may run again. A leased acquisition run twice under one hold id leases its permits
// once: the uncontended path and the general one (a hold that attempted before).
func TestALeasedAcquisitionRunTwiceLeasesItsPermitsOnce(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	l := newLeased(t, newClient(t, rdb), 5)
	ctx := context.Background()
	for i, again := range []string{"0", "1"} {
		hold := "0f8a9c1e-2b3d-4e5f-8a6b-7c8d9e0f1a2b:" + string(rune('1'+i))
		args := []any{hold, 2, 60000, 5000, "0", "PUBLISH", again}
		for run := 0; run < 2; run++ {
			_, err := scripts.LSemAcquire.Run(ctx, rdb, l.Keys(), args...).Result()
			require.NoError(t, err)
		}
		avail, err := l.Available(ctx)
		require.NoError(t, err)
		assert.Equal(t, 5-2*(i+1), avail, "after hold %d's acquisition ran twice", i+1)
	}
}
