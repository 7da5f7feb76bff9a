package multilock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/layout"
	"github.com/redaqs/aqs/internal/scripts"
	"github.com/redaqs/aqs/model"
	"github.com/redaqs/aqs/multilock"
)

// A waiter's heartbeats are sent in batches by its Client, on a connection of their own: one
// sent just before the waiter's attempt took every name can reach Redis just after it. Such a
// heartbeat must leave the hold alone (model.Multi.Heartbeat: a heartbeat of a holder changes
// nothing), as the fair lock's does (lock_heartbeat.lua). The two tests below show that
// multi_heartbeat.lua does not: it finds every name the holder's and "extends" them as
// reservations, to its waiter timeout, dropping the hold's lease and its fencing token field;
// the names are then free once the waiter timeout has passed, and other requests take them
// while the holder, renewed by the watchdog only later, still holds.

// The scripts, step by step: a hold takes both names with a lease of a minute, then a late
// heartbeat (waiter timeout 100ms) comes; the model says the hold keeps its lease.
func TestAHeartbeatThatLandsAfterTheAcquisitionLeavesTheHoldAlone(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		m := newLock(t, newClient(t, rdb), names(t, 2))
		pub := "PUBLISH"
		if _, ok := rdb.(*redis.ClusterClient); ok {
			pub = "SPUBLISH"
		}
		const lease, timeout = 60000, 100
		mm := model.NewMulti(timeout)
		hold := uuid.NewString() + ":1"
		r, err := scripts.DecodeAttempt(scripts.MultiAcquire.Run(ctx, rdb, m.Keys(), hold, lease, timeout, "1", "1", pub).Val())
		require.NoError(t, err)
		require.Equal(t, scripts.Acquired, r.Status)
		require.Equal(t, model.Acquired, mm.Attempt(0, model.MultiRequest{Hold: hold, Names: m.Names(), Lease: lease}, true).Status)

		beat, err := scripts.DecodeBeat(scripts.MultiHeartbeat.Run(ctx, rdb, m.Keys(), hold, timeout, pub).Val())
		require.NoError(t, err)
		want, _ := mm.Heartbeat(0, hold)
		assert.Equal(t, int(want), int(beat), "the heartbeat's reply")
		wantMs, _ := mm.RemainingLease(0, m.Names()[0])

		now, err := rdb.Time(ctx).Result()
		require.NoError(t, err)
		for i, name := range m.Names() {
			key := m.Keys()[3*i]
			v, err := rdb.Get(ctx, key).Result()
			require.NoError(t, err)
			lv, err := layout.ParseLockValue(v)
			require.NoError(t, err)
			left := lv.LeaseEnd - now.UnixMilli()
			if lv.LeaseEnd == 0 {
				left = rdb.PTTL(ctx, key).Val().Milliseconds()
			}
			// The real time between the acquisition and this read is far below 30s.
			assert.Greater(t, left, wantMs/2, "%q: the hold's lease after a late heartbeat, value %q (the model keeps %d ms)", name, v, wantMs)
			assert.Equal(t, r.Token, lv.Token, "%q: the hold's fencing token field after a late heartbeat, value %q", name, v)
		}
	})
}

// Through the API: waiters with a short waiter timeout (100ms: heartbeats every 33ms) take
// three names in turn and hold them 150ms each, longer than the waiter timeout. A granted
// hold's first lease runs only to its waiter's liveness deadline, and the Client must renew it
// to its own lease in time. No two holders may be inside at once while both held contexts are
// live, and every hold must end by its own Unlock, not lost. (The waiter timeout leaves the
// renewal tens of milliseconds, so that a loaded machine's scheduling does not lose holds:
// a holder whose context ended may still be inside when the next one enters, which the
// library allows, since the lost hold's context ended first.)
func TestAHoldLongerThanTheWaiterTimeoutIsNeverLost(t *testing.T) {
	rdb := redistestSingle(t)
	pool := names(t, 3)
	var inside atomic.Int32
	var overlaps, lost, held atomic.Int32
	var current atomic.Value // the held context of the latest holder to enter
	var wg sync.WaitGroup
	for range 3 {
		c := newClient(t, rdb)
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m, err := multilock.New(c, pool, multilock.WithWaiterTimeout(100*time.Millisecond))
				if !assert.NoError(t, err) {
					return
				}
				for range 4 {
					h, err := m.Lock(context.Background())
					if !assert.NoError(t, err) {
						return
					}
					held.Add(1)
					prev, _ := current.Swap(h).(context.Context)
					if inside.Add(1) != 1 && prev != nil && prev.Err() == nil {
						overlaps.Add(1)
					}
					time.Sleep(150 * time.Millisecond) // the work done under the lock
					inside.Add(-1)
					if err := m.Unlock(h); err != nil {
						lost.Add(1)
						assert.ErrorIs(t, err, aqs.ErrLockLost)
					}
				}
			}()
		}
	}
	wg.Wait()
	t.Logf("%d holds", held.Load())
	assert.Zero(t, overlaps.Load(), "holds that found another holder inside, whose held context was live")
	assert.Zero(t, lost.Load(), "holds lost before their Unlock")
}
