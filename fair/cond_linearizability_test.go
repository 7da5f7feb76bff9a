package fair_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/lintest"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// Linearizability of the Condition.
//
// Goroutines on several Clients (each on its own go-redis client) lock one fair lock, wait on
// its condition, signal it with Signal and SignalAll (with the lock held or not) and unlock,
// for a short time (lintest.RunConds); every operation is recorded with the times taken just
// before the library call and just after it returned, and the history is checked with
// porcupine against lintest.CondModel: the holder, the lock's FIFO queue and the condition's
// FIFO queue, with Wait's release and its joining the condition one step, and Signal moving
// the condition's head to the lock queue's tail.

// A lock with a condition is linearizable against lintest.CondModel, single node and cluster:
// no signal lost, waiters moved in the order they waited, no wake-up without a signal; the run
// leaves no key without a TTL.
func TestConditionIsLinearizable(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		name := redistest.Name(t)
		var (
			clients []*aqs.Client
			locks   []lintest.CondLock
			conds   []lintest.Cond
			first   *fair.Lock
		)
		for range lintest.Clients {
			c := newClient(t, lintest.OwnRedis(t, rdb))
			l, err := fair.New(c, name)
			if err != nil {
				t.Fatal(err)
			}
			cond, err := l.NewCondition("c")
			if err != nil {
				t.Fatal(err)
			}
			if first == nil {
				first = l
			}
			clients, locks, conds = append(clients, c), append(locks, l), append(conds, cond)
		}
		history := lintest.RunConds(t, clients, locks, conds)
		if t.Failed() {
			return
		}
		lintest.LogCondOutcomes(t, history)
		lintest.Check(t, lintest.CondModel, lintest.SplitConds(history))
		redistest.AssertNoKeyWithoutTTL(t, rdb, first.Name(), first.Key())
		_ = rdb.Del(context.Background(), first.Key())
	})
}
