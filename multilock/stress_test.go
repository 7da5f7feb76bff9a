package multilock_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/multilock"
)

// TestOverlappingCartsNeverShareANameAndAllFinish has goroutines of two Clients take carts of
// 1-4 names among 6 (and, now and then, one name through package fair), each checking that no
// other holder of any of its names is inside. Every goroutine finishes its rounds (no
// deadlock), and nothing is left held or queued at the end.
func TestOverlappingCartsNeverShareANameAndAllFinish(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		clients := [2]struct{}{}
		pool := names(t, 6)
		inside := make([]atomic.Int32, len(pool))
		index := map[string]int{}
		for i, n := range pool {
			index[n] = i
		}
		var overlaps atomic.Int32
		var wg sync.WaitGroup
		for ci := range clients {
			c := newClient(t, rdb)
			for g := range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(ci), uint64(g)))
					for range 25 {
						k := 1 + r.IntN(4)
						cart := make([]string, k)
						for i := range cart {
							cart[i] = pool[r.IntN(len(pool))]
						}
						var held context.Context
						var unlock func(context.Context) error
						var in []string
						if k == 1 && r.IntN(2) == 0 {
							f, err := fair.New(c, cart[0])
							require.NoError(t, err)
							h, err := f.Lock(ctx)
							if !assert.NoError(t, err) {
								return
							}
							held, unlock, in = h, f.Unlock, cart[:1]
						} else {
							m, err := multilock.New(c, cart)
							require.NoError(t, err)
							h, err := m.Lock(ctx)
							if !assert.NoError(t, err) {
								return
							}
							held, unlock, in = h, m.Unlock, m.Names()
						}
						for _, n := range in {
							if inside[index[n]].Add(1) != 1 {
								overlaps.Add(1)
							}
						}
						time.Sleep(time.Duration(r.IntN(300)) * time.Microsecond)
						for _, n := range in {
							inside[index[n]].Add(-1)
						}
						assert.NoError(t, unlock(held))
					}
				}()
			}
		}
		wg.Wait()
		assert.Zero(t, overlaps.Load(), "two holders of one name at once")
		for _, n := range pool {
			f, err := fair.New(newClient(t, rdb), n)
			require.NoError(t, err)
			locked, err := f.IsLocked(context.Background())
			require.NoError(t, err)
			assert.False(t, locked, "%q is held after every holder released", n)
			card, err := rdb.ZCard(context.Background(), f.Keys()[2]).Result()
			require.NoError(t, err)
			assert.Zero(t, card, "%q has waiters left", n)
		}
	})
}
