package latch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/lintest"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/latch"
)

// Linearizability of the latch.
//
// Goroutines on two Clients (each on its own go-redis client) run random operations on a few
// latches for a short time (lintest.RunLatches: TrySetCount, CountDown, Count, TryAwait with
// and without a wait bound, Await until its context's deadline or cancellation, and the key
// deleted as its expiry would); every operation is recorded with its input, its output and the
// times taken just before the library call and just after it returned. The history is then
// checked with porcupine against lintest.LatchModel: the count, set or not; an Await that
// returned saw 0 at an instant of its call, and one whose context ended is no operation.

// The latch is linearizable against lintest.LatchModel, single node and cluster; the run
// leaves no key of the latch without a TTL.
func TestLatchIsLinearizable(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		const clients = 2
		base := redistest.Name(t)
		var cs []*aqs.Client
		latches := make([][]*latch.Latch, clients) // [client][key]
		for ci := range clients {
			c := newClient(t, lintest.OwnRedis(t, rdb))
			cs = append(cs, c)
			for k := range lintest.Locks {
				l, err := latch.New(c, fmt.Sprintf("%s-%d", base, k), latch.WithExpiry(time.Minute))
				if err != nil {
					t.Fatal(err)
				}
				latches[ci] = append(latches[ci], l)
			}
		}
		history := lintest.RunLatches(t, cs, latches)
		if t.Failed() {
			return
		}
		lintest.LogLatchOutcomes(t, history)
		lintest.Check(t, lintest.LatchModel, history)
		for _, l := range latches[0] {
			redistest.AssertNoKeyWithoutTTL(t, rdb, l.Name(), l.Key())
			_ = rdb.Del(context.Background(), l.Key())
		}
	})
}
