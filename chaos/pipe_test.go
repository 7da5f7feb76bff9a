package chaos_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/reentrant"
)

// The Client's auto-pipeline under connection cuts: 32 goroutines of one Client lock and unlock
// 16 names at random, so that most calls go in pipelines, while the proxy cuts every connection
// every 100ms and adds latency every other period. A cut pipeline holding a release (which
// go-redis does not send again) has its other calls sent again by the pipe. A witness per
// name must see no overlap, and every name must be free once the load stopped.
func TestPipelinedCallsUnderConnectionCuts(t *testing.T) {
	span := scale(2*time.Second, 20*time.Second)
	const (
		names    = 16
		workers  = 32
		cutEvery = 100 * time.Millisecond
		latency  = 2 * time.Millisecond
	)
	pl := newPipeLoad(t, names, false)
	px, c, locks, inside, ctx := pl.px, pl.c, pl.locks, pl.inside, context.Background()

	stop := make(chan struct{})
	var cuts int
	faults := sync.WaitGroup{}
	faults.Add(1)
	go func() {
		defer faults.Done()
		tick := time.NewTicker(cutEvery)
		defer tick.Stop()
		end := time.After(span)
		for {
			select {
			case <-end:
				px.SetLatency(0)
				close(stop)
				return
			case <-tick.C:
				px.Cut()
				cuts++
				if cuts%2 == 1 {
					px.SetLatency(latency)
				} else {
					px.SetLatency(0)
				}
			}
		}
	}()

	var acquired, failed, overlaps atomic.Int64
	var firstErr atomic.Value
	fail := func(err error) {
		failed.Add(1)
		firstErr.CompareAndSwap(nil, err.Error())
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := rand.IntN(names)
				lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				held, err := locks[i].Lock(lctx)
				cancel()
				if err != nil {
					fail(err)
					continue
				}
				if inside[i].Add(1) != 1 {
					overlaps.Add(1)
				}
				acquired.Add(1)
				for t0 := time.Now(); time.Since(t0) < 50*time.Microsecond; {
					// the critical section: long enough for another holder to be seen
				}
				inside[i].Add(-1)
				if err := locks[i].Unlock(held); err != nil {
					fail(err)
				}
			}
		}()
	}
	wg.Wait()
	faults.Wait()
	st := core.RuntimeOf(c).Pipe.Stats()
	t.Logf("SUMMARY pipe under cuts: %d acquisitions, %d failed calls (first: %v), %d overlaps, %d cuts in %v; "+
		"pipe: %d calls alone, %d pipelines of %d calls, %d calls sent again",
		acquired.Load(), failed.Load(), firstErr.Load(), overlaps.Load(), cuts, span,
		st.Alone, st.Batches, st.Batched, st.Resent)
	count(int(overlaps.Load()), 0, 0)
	assert.Zero(t, overlaps.Load(), "overlaps")
	assert.NotZero(t, acquired.Load())
	assert.NotZero(t, st.Batches, "the load went through pipelines")
	pl.assertFree() // a hold orphaned by a cut ends with its lease (1s)
}

// The same load on a go-redis client that honours context deadlines (ContextTimeoutEnabled),
// through a proxy that adds 1ms of latency, with Lock deadlines of 2–20ms: most calls
// end while they wait in the pipe's queue, or while their pipeline is on its way. Every call
// must return by its deadline (give or take the engine's documented clean-up), no overlap,
// and every name free after the load.
func TestPipelinedCallsEndingByTheirDeadlines(t *testing.T) {
	span := scale(2*time.Second, 10*time.Second)
	const (
		names   = 8
		workers = 32
		// late bounds how long after its deadline a call may return: the engine's patience
		// and grace (37.5ms) and a loaded machine's scheduling.
		late = 250 * time.Millisecond
	)
	pl := newPipeLoad(t, names, true)
	pl.px.SetLatency(time.Millisecond)
	c, locks, inside, ctx := pl.c, pl.locks, pl.inside, context.Background()
	var acquired, expired, overlaps, tooLate atomic.Int64
	var worst atomic.Int64
	stop := time.Now().Add(span)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				i := rand.IntN(names)
				d := time.Duration(2+rand.IntN(19)) * time.Millisecond
				lctx, cancel := context.WithTimeout(ctx, d)
				deadline, _ := lctx.Deadline()
				held, err := locks[i].Lock(lctx)
				over := time.Since(deadline)
				cancel()
				if over > late {
					tooLate.Add(1)
				}
				if int64(over) > worst.Load() {
					worst.Store(int64(over))
				}
				if err != nil {
					expired.Add(1)
					continue
				}
				if inside[i].Add(1) != 1 {
					overlaps.Add(1)
				}
				acquired.Add(1)
				inside[i].Add(-1)
				if err := locks[i].Unlock(held); err != nil {
					t.Errorf("unlock: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	st := core.RuntimeOf(c).Pipe.Stats()
	t.Logf("SUMMARY pipe with deadlines: %d acquisitions, %d calls ended by their deadline, %d overlaps, "+
		"latest return %v after the deadline; pipe: %d calls alone, %d pipelines of %d calls",
		acquired.Load(), expired.Load(), overlaps.Load(), time.Duration(worst.Load()).Round(time.Millisecond),
		st.Alone, st.Batches, st.Batched)
	count(int(overlaps.Load()), 0, 0)
	assert.Zero(t, overlaps.Load(), "overlaps")
	assert.Zero(t, tooLate.Load(), "calls that returned more than %v after their deadline", late)
	assert.NotZero(t, acquired.Load())
	assert.NotZero(t, st.Batches, "the load went through pipelines")
	pl.assertFree()
}

// pipeLoad is the set-up of the tests above: one Client (watchdog 1s) on a go-redis client
// that reaches a server of its own through a proxy, and reentrant locks on names of its own,
// each with a witness counter.
type pipeLoad struct {
	t      *testing.T
	admin  *redis.Client
	px     *proxy
	c      *aqs.Client
	locks  []*reentrant.Lock
	inside []atomic.Int32
}

func newPipeLoad(t *testing.T, names int, honoursDeadlines bool) *pipeLoad {
	srv := redistest.NewServer(t)
	pl := &pipeLoad{t: t, admin: srv.Client(t), px: newProxy(t, srv.Addr())}
	rdb := redis.NewClient(&redis.Options{Addr: pl.px.Addr(), ContextTimeoutEnabled: honoursDeadlines})
	t.Cleanup(func() { rdb.Close() })
	var err error
	pl.c, err = aqs.New(context.Background(), rdb, aqs.WithWatchdogTimeout(time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { pl.c.Close() })
	pl.locks = make([]*reentrant.Lock, names)
	pl.inside = make([]atomic.Int32, names)
	base := redistest.Name(t)
	for i := range pl.locks {
		pl.locks[i], err = reentrant.New(pl.c, fmt.Sprintf("%s:%d", base, i))
		require.NoError(t, err)
	}
	return pl
}

// assertFree asserts that every name is free, within a few seconds; a name still taken is
// shown as Redis has it (its value, its life left, its queue), for the failure's reader.
func (pl *pipeLoad) assertFree() {
	ctx := context.Background()
	for _, l := range pl.locks {
		if !assert.Eventually(pl.t, func() bool {
			n, err := pl.admin.Exists(ctx, l.Key()).Result()
			return err == nil && n == 0
		}, 5*time.Second, 10*time.Millisecond, "%s still taken after the load", l.Name()) {
			keys := l.Keys()
			pl.t.Logf("%s: value %q, pttl %v; queue %v; deadlines %v", l.Name(),
				pl.admin.Get(ctx, keys[0]).Val(), pl.admin.PTTL(ctx, keys[0]).Val(),
				pl.admin.LRange(ctx, keys[1], 0, -1).Val(), pl.admin.ZRangeWithScores(ctx, keys[2], 0, -1).Val())
		}
	}
}
