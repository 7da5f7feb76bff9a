package multilock_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/lintest"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/multilock"
)

// Multi-locks on overlapping sets of names, and fair locks on single names, are linearizable
// together against the specification with one queue per name and reservations
// (lintest.MultiLockModel): requests for random sets of four names, TryLock with and without
// waits, Lock whose context reaches its deadline or is cancelled mid-wait, Unlock, and Unlock
// of released holds, by goroutines of three Clients. Each call that waits is checked as its
// join and its outcome (lintest.SplitMultiWaits), so that a waiter whose wait ran out may have
// been granted its names and passed them on as it left, and names reserved for a waiter
// refuse newcomers with no reported holder. The default leases are renewed by the watchdog and
// the waiter timeout (5s) is beyond the run: no expiry, no dropped waiters. The run leaves no
// key without a TTL.
func TestMultiLockIsLinearizable(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		pool := names(t, lintest.MultiNames)
		var clients []*aqs.Client
		for range lintest.Clients {
			clients = append(clients, newClient(t, lintest.OwnRedis(t, rdb)))
		}
		lock := func(c int, mask uint8, isFair bool) lintest.Locker {
			var ns []string
			for i, n := range pool {
				if mask&(1<<i) != 0 {
					ns = append(ns, n)
				}
			}
			if isFair {
				l, err := fair.New(clients[c], ns[0])
				if err != nil {
					panic(fmt.Sprintf("fair.New: %v", err))
				}
				return l
			}
			l, err := multilock.New(clients[c], ns)
			if err != nil {
				panic(fmt.Sprintf("multilock.New: %v", err))
			}
			return l
		}
		history := lintest.RunMultiLocks(t, clients, len(pool), lock)
		if t.Failed() {
			return
		}
		lintest.LogMultiOutcomes(t, history)
		lintest.Check(t, lintest.MultiLockModel, lintest.SplitMultiWaits(history))
		f, err := fair.New(clients[0], pool[0])
		if err != nil {
			t.Fatal(err)
		}
		tag := pool[0][1:strings.IndexByte(pool[0], '}')] // what every key of the run contains
		redistest.AssertNoKeyWithoutTTL(t, rdb, tag, f.Key())
	})
}
