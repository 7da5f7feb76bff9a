package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
)

// A load of goroutines in the test process, on a few Clients, for the faults that need no
// process of their own (the pub/sub connection killed, a proxy in the way, the script cache
// flushed). Each worker acquires, enters the witness (witness_test.go), works a moment, leaves
// and releases, over and over, until the load stops.

// loadWaiterTimeout is the loads' waiter timeout: a waiter unheard of for that long is taken
// for dead, and a counting semaphore's permits granted to it stay taken (by design, see
// grants_in in internal/scripts/_csem.lua), so it leaves room for the heartbeats of a loaded
// machine under -race.
const loadWaiterTimeout = 3 * time.Second

// loadConfig is one load.
type loadConfig struct {
	cfg     primConfig
	clients []redis.UniversalClient // one aqs Client on each, closed at the end of the test
	workers int                     // per Client
	work    time.Duration
	// longHold, when set, is how long worker 0 keeps its first acquisition: long enough for
	// the watchdog to renew it, and for the others to wait (heartbeats) meanwhile.
	longHold time.Duration
	// bound is how long one acquisition may take before it is given up as stuck (an error).
	bound    time.Duration
	watchdog time.Duration
	admin    redis.UniversalClient // a direct client, for describing the keys on a failure; may be nil
	// started, when set, is called once the Clients and primitives are made, before the
	// workers start: faults that would fail the set-up (a Client's script loading) start there.
	started func()
}

// loadResult is what a load did.
type loadResult struct {
	acquisitions int64
	perWorker    []int64
	overlaps     int64
	lost         int64 // holds whose held context ended during the work
	errs         []string
	maxGap       time.Duration // the longest time without any acquisition
	freeAfter    time.Duration // how long after the load the primitive was free; -1: never
	stuck        string        // why it was not
}

func (r loadResult) String() string {
	return fmt.Sprintf("%d acquisitions (per worker min %d, max %d), longest time without one %v, "+
		"overlaps %d, holds lost %d, errors %d, free %v after the load", r.acquisitions, slices.Min(r.perWorker),
		slices.Max(r.perWorker), r.maxGap.Round(time.Millisecond), r.overlaps, r.lost, len(r.errs),
		r.freeAfter.Round(time.Millisecond))
}

// runLoad runs the load until stop is closed and returns what it did. A worker's op: rwlock
// workers read, or write (a third of them), semaphore workers take one permit.
func runLoad(t *testing.T, lc loadConfig, stop <-chan struct{}) loadResult {
	t.Helper()
	w := witness{dir: t.TempDir(), permits: lc.cfg.permits}
	admin := lc.admin
	if admin == nil {
		admin = lc.clients[0]
	}
	var prims []*prim
	for _, rdb := range lc.clients {
		c, err := aqs.New(context.Background(), rdb, aqs.WithWatchdogTimeout(lc.watchdog))
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		p, err := newPrim(context.Background(), c, lc.cfg)
		require.NoError(t, err)
		prims = append(prims, p)
	}
	if lc.started != nil {
		lc.started()
	}
	var (
		res      loadResult
		mu       sync.Mutex // res.errs, last, res.maxGap
		last     = time.Now()
		wg       sync.WaitGroup
		total    atomic.Int64
		overlaps atomic.Int64
		lost     atomic.Int64
	)
	res.perWorker = make([]int64, len(prims)*lc.workers)
	fail := func(what string, err error) {
		mu.Lock()
		defer mu.Unlock()
		res.errs = append(res.errs, what+": "+err.Error())
	}
	for i := range res.perWorker {
		p := prims[i%len(prims)]
		op := exclusiveOp(lc.cfg.kind)
		// rwlock: a third of the workers write, and pause between their turns. Writers are
		// preferred (a waiting writer holds back new readers, see package rwlock), so writers
		// that queue again at once would starve the readers by design, which is not the fault
		// under test.
		var pause time.Duration
		if lc.cfg.kind == kindRWLock {
			if i%3 == 0 {
				pause = 5 * lc.work
			} else {
				op = opRead
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			work := lc.work
			if i == 0 && lc.longHold > 0 {
				work = lc.longHold
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), lc.bound)
				h, err := p.acquire(ctx, op)
				cancel()
				if err != nil {
					fail("acquire "+op, err)
					continue
				}
				leave, err := w.enter(op)
				if errors.Is(err, errOverlap) {
					overlaps.Add(1)
					t.Logf("overlap: worker %d took %s (permit %q) at %s; in Redis: %s", i, op, h.id,
						time.Now().Format("15:04:05.000000"), dump(admin, p.keys))
				} else if err != nil {
					fail("witness", err)
				}
				// The work done under the hold, which stops when the held context ends, as the
				// contract asks: a lost hold leaves the witness at once.
				timer := time.NewTimer(work)
				select {
				case <-timer.C:
				case <-h.ctx.Done():
					timer.Stop()
				}
				work = lc.work
				if h.ctx.Err() != nil && !errors.Is(context.Cause(h.ctx), context.Canceled) {
					lost.Add(1)
				}
				if leave != nil {
					leave()
				}
				if err := h.Release(); err != nil {
					fail("release "+op, err)
				}
				time.Sleep(pause) // a writer's time between turns (see above)
				res.perWorker[i]++
				total.Add(1)
				now := time.Now()
				mu.Lock()
				res.maxGap = max(res.maxGap, now.Sub(last))
				last = now
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.acquisitions, res.overlaps, res.lost = total.Load(), overlaps.Load(), lost.Load()
	// Nothing stays stuck: once every worker is done, the primitive is free, or every permit
	// is back (a hold whose release failed ends with its lease; the counting semaphore's
	// permits have none, and its releases do not fail here).
	p := prims[0]
	var free bool
	var err error
	res.freeAfter = -1
	start := time.Now()
	if assertEventually(lc.watchdog+5*time.Second, func() bool {
		free, err = p.free(context.Background())
		return err == nil && free
	}) {
		res.freeAfter = time.Since(start)
	} else {
		res.stuck = fmt.Sprintf("not free %v after the load (last error %v); in Redis: %s",
			lc.watchdog+5*time.Second, err, dump(admin, p.keys))
	}
	return res
}

// dump describes keys for a failure message.
func dump(rdb redis.UniversalClient, keys []string) string {
	ctx := context.Background()
	var out []string
	for _, k := range keys {
		typ, err := rdb.Type(ctx, k).Result()
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", k, err))
			continue
		}
		var v any
		switch typ {
		case "string":
			v, err = rdb.Get(ctx, k).Result()
		case "hash":
			v, err = rdb.HGetAll(ctx, k).Result()
		case "zset":
			v, err = rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
		case "list":
			v, err = rdb.LRange(ctx, k, 0, -1).Result()
		case "none":
			continue
		}
		out = append(out, fmt.Sprintf("%s (%s) = %v %v", k, typ, v, err))
	}
	return strings.Join(out, "; ")
}

// errorSample returns up to n distinct errors, for a log line.
func errorSample(errs []string, n int) string {
	seen := map[string]bool{}
	var out []string
	for _, e := range errs {
		if !seen[e] && len(out) < n {
			seen[e] = true
			out = append(out, e)
		}
	}
	return strings.Join(out, "; ")
}
