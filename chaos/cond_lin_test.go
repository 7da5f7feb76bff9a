package chaos_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/lintest"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// The Condition's histories (lintest.RunConds: Lock, Wait, Signal, SignalAll and Unlock on a
// fair lock by Clients on their own connections) stay linearizable against lintest.CondModel
// under each fault of lin_test.go that makes no call fail: the pub/sub connections killed
// every 20ms, so that grant messages to waiters moved by a Signal are lost; the script cache
// flushed every 5ms, so that every script of the condition falls back from EVALSHA to EVAL,
// its first send of a Wait's release included. No signal may be lost, no waiter moved out of
// order, and no Wait may return without a Signal.
func TestConditionHistoriesStayLinearizableUnderFaultsThatFailNoCall(t *testing.T) {
	rounds := scale(1, 5)
	for _, fault := range linFaults {
		t.Run(fault.name, func(t *testing.T) {
			for round := range rounds {
				srv := redistest.NewServer(t)
				admin := srv.Client(t)
				name := redistest.Name(t)
				var (
					clients []*aqs.Client
					locks   []lintest.CondLock
					conds   []lintest.Cond
				)
				for range lintest.Clients {
					c, err := aqs.New(context.Background(), srv.Client(t))
					require.NoError(t, err)
					t.Cleanup(func() { _ = c.Close() })
					l, err := fair.New(c, name)
					require.NoError(t, err)
					cond, err := l.NewCondition("c")
					require.NoError(t, err)
					clients, locks, conds = append(clients, c), append(locks, l), append(conds, cond)
				}
				stop, done := make(chan struct{}), make(chan int64)
				go func() {
					var n int64
					tick := time.NewTicker(fault.every)
					defer tick.Stop()
					for {
						select {
						case <-stop:
							done <- n
							return
						case <-tick.C:
							k, err := fault.inject(context.Background(), admin)
							if err != nil {
								t.Errorf("%s: %v", fault.name, err)
							}
							n += k
						}
					}
				}()
				history := lintest.RunConds(t, clients, locks, conds)
				close(stop)
				faults := <-done
				if t.Failed() {
					return
				}
				lintest.LogCondOutcomes(t, history)
				t.Logf("SUMMARY linearizability condition under %s, round %d: %d faults in %v", fault.name, round,
					faults, lintest.RunFor)
				lintest.Check(t, lintest.CondModel, lintest.SplitConds(history))
			}
		})
	}
}
