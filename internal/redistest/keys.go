package redistest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// AssertNoKeyWithoutTTL checks every key whose name contains name, on every master of rdb (a
// *redis.Client or a *redis.ClusterClient): each must expire, since a key that does not would
// outlive a crashed holder forever. A probe key, slotKey+":probe", set with a TTL just before
// the scan, must be among them, so that a wrong pattern or a missed node cannot pass unseen;
// slotKey must contain name and lie in the slot of the keys checked, the lock's key for one.
func AssertNoKeyWithoutTTL(t testing.TB, rdb redis.UniversalClient, name, slotKey string) {
	t.Helper()
	probe := slotKey + ":probe"
	require.NoError(t, rdb.Set(context.Background(), probe, "x", time.Minute).Err())
	defer rdb.Del(context.Background(), probe)
	var (
		mu        sync.Mutex // ForEachMaster scans the masters concurrently
		seen      = map[string]time.Duration{}
		persisted []string
	)
	scan := func(ctx context.Context, node *redis.Client) error {
		iter := node.Scan(ctx, 0, "*"+name+"*", 100).Iterator()
		for iter.Next(ctx) {
			key := iter.Val()
			pttl, err := node.PTTL(ctx, key).Result()
			if err != nil {
				return err
			}
			if pttl == -2 { // gone since the scan saw it
				continue
			}
			mu.Lock()
			seen[key] = pttl
			if pttl == -1 {
				persisted = append(persisted, key)
			}
			mu.Unlock()
		}
		return iter.Err()
	}
	ctx := context.Background()
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		require.NoError(t, c.ForEachMaster(ctx, scan))
	case *redis.Client:
		require.NoError(t, scan(ctx, c))
	default:
		t.Fatalf("unexpected client %T", rdb)
	}
	t.Logf("keys left: %v", seen)
	assert.Contains(t, seen, probe, "the scan did not find the probe key")
	assert.Empty(t, persisted, "keys without a TTL")
}
