package redistest

import (
	"context"
	"fmt"
	"sort"
	"strings"
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

// checkKeysExpire scans the shared servers, once the tests of the binary have run, for keys
// of aqs's default prefix that have no TTL: every key a primitive writes expires once it is
// abandoned, except a semaphore's permits hash (its configuration: a hash with the total in
// field t). Keys under other prefixes are the tests' own.
func checkKeysExpire() error {
	var servers []*Server
	if single.srv != nil {
		servers = append(servers, single.srv)
	}
	if cluster.c != nil {
		servers = append(servers, cluster.c.nodes...)
	}
	ctx := context.Background()
	var persisted []string
	for _, s := range servers {
		rdb := redis.NewClient(s.Options())
		iter := rdb.Scan(ctx, 0, "aqs:*", 1000).Iterator()
		for iter.Next(ctx) {
			key := iter.Val()
			if pttl, err := rdb.PTTL(ctx, key).Result(); err != nil || pttl != -1 {
				continue
			}
			if rdb.Type(ctx, key).Val() == "hash" && rdb.HExists(ctx, key, "t").Val() {
				continue
			}
			persisted = append(persisted, key)
		}
		err := iter.Err()
		rdb.Close()
		if err != nil {
			return fmt.Errorf("scanning %s for keys without a TTL: %w", s.Addr(), err)
		}
	}
	if len(persisted) > 0 {
		sort.Strings(persisted)
		if len(persisted) > 20 {
			persisted = append(persisted[:20], "…")
		}
		return fmt.Errorf("keys without a TTL left by the tests: %s", strings.Join(persisted, ", "))
	}
	return nil
}
