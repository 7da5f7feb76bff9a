package chaos_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"

	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// Fault 5: SCRIPT FLUSH during load. Every script runs with EVALSHA and falls back to EVAL on
// NOSCRIPT (internal/scripts), so emptying the server's script cache every few milliseconds
// must surface no error to any caller, lose no hold and break no exclusion. One hold is kept
// past the watchdog timeout, so that the watchdog's renewals and the waiters' heartbeats, which
// run as pipelined EVALSHA, meet the flushes too.

func TestScriptFlushDuringLoadIsInvisible(t *testing.T) {
	span := scale(2*time.Second, 20*time.Second)
	// One hold outlives the watchdog timeout (1s), so that renewals (pipelined scripts) and
	// the others' heartbeats meet the flushes too.
	longHold := scale(1500*time.Millisecond, 3*time.Second)
	forEachKind(t, allKinds, func(t *testing.T, kind string) {
		srv := redistest.NewServer(t)
		rdb := srv.Client(t)
		clients := []redis.UniversalClient{srv.Client(t), srv.Client(t), srv.Client(t)}
		stop := make(chan struct{})
		flushes := 0
		done := make(chan struct{})
		go func() {
			defer close(done)
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			end := time.After(span)
			for {
				select {
				case <-end:
					close(stop)
					return
				case <-tick.C:
					if err := rdb.ScriptFlush(context.Background()).Err(); err != nil {
						t.Errorf("SCRIPT FLUSH: %v", err)
					}
					flushes++
				}
			}
		}()
		res := runLoad(t, loadConfig{
			cfg:     primConfig{kind: kind, name: redistest.Name(t), waiterTimeout: loadWaiterTimeout, permits: 2},
			clients: clients, workers: 2, work: time.Millisecond, bound: 10 * time.Second, watchdog: time.Second,
			longHold: longHold,
		}, stop)
		<-done
		t.Logf("SUMMARY script flush %s: %v with %d SCRIPT FLUSH in %v, one hold kept %v (watchdog 1s); %s",
			kind, res, flushes, span, longHold, errorSample(res.errs, 3))
		count(int(res.overlaps), 0, 0)
		assert.Empty(t, res.stuck, "stuck after the load")
		assert.Zero(t, res.overlaps, "overlaps")
		assert.Empty(t, res.errs, "errors surfaced to callers")
		assert.Zero(t, res.lost, "holds lost")
		for i, n := range res.perWorker {
			assert.NotZero(t, n, "worker %d never acquired", i)
		}
	})
}
