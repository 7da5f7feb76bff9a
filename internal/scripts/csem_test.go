package scripts_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/internal/scripts"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// A counting semaphore's grant record (zset g, the fallback for a lost grant message) has a
// TTL a second beyond the granted waiter's liveness deadline: a waiter that dies granted
// leaves no key that lives for ever.
func TestCountingGrantRecordsExpire(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Single(t).Client(t)
	key := "aqs:{" + redistest.Name(t) + "}"
	keys := []string{key, key + ":q", key + ":d", key + ":g"}
	a, b := uuid.NewString(), uuid.NewString()
	_, err := scripts.SemSet.Run(ctx, rdb, keys, "set", 1, "PUBLISH", a, "c").Result()
	require.NoError(t, err)
	acquire := func(hold string) scripts.Attempt {
		return attemptOf(t, scripts.SemAcquire.Run(ctx, rdb, keys, hold, 1, 60000, "1", "PUBLISH", "0"))
	}
	require.Equal(t, scripts.Acquired, acquire(a+":1").Status)
	require.Equal(t, scripts.Queued, acquire(b+":1").Status)
	_, err = scripts.SemRelease.Run(ctx, rdb, keys, 1, "PUBLISH", a).Result()
	require.NoError(t, err)
	n, err := rdb.ZCard(ctx, keys[3]).Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "the grant to the other Client's waiter is recorded")
	pttl, err := rdb.PTTL(ctx, keys[3]).Result()
	require.NoError(t, err)
	require.Greater(t, pttl, 59*time.Second)
	require.LessOrEqual(t, pttl, 61*time.Second)
}

// A leased semaphore's permits (zset p, hash pn) live a second beyond the latest lease end
// they record, and a p that is gone (expired: every lease in it had ended) counts no permit
// leased out, though the count in s still had them.
func TestLeasedPermitKeysExpire(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Single(t).Client(t)
	key := "aqs:{" + redistest.Name(t) + "}"
	keys := []string{key, key + ":q", key + ":d", key + ":p", key + ":pn"}
	a := uuid.NewString()
	_, err := scripts.SemSet.Run(ctx, rdb, keys, "set", 3, "PUBLISH", a, "l").Result()
	require.NoError(t, err)
	st := attemptOf(t, scripts.LSemAcquire.Run(ctx, rdb, keys, a+":1", 2, 30000, 60000, "1", "PUBLISH", "0"))
	require.Equal(t, scripts.Acquired, st.Status)
	for _, k := range keys[3:5] {
		pttl, err := rdb.PTTL(ctx, k).Result()
		require.NoError(t, err)
		require.Greater(t, pttl, 29*time.Second, k)
		require.LessOrEqual(t, pttl, 31*time.Second, k)
	}
	avail := func() int64 {
		v, err := scripts.LSemAvailable.Run(ctx, rdb, []string{keys[0], keys[3], keys[4]}).Int64Slice()
		require.NoError(t, err)
		return v[0]
	}
	require.Equal(t, int64(1), avail())
	require.NoError(t, rdb.Del(ctx, keys[3], keys[4]).Err()) // as their expiry does
	require.Equal(t, int64(3), avail(), "no permit leased out once p is gone")
}
