package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/reentrant"
)

// The demo.
//
// Workers stand for processes: each has its own Redis connection pool, aqs.Client and Lock
// value, all of the same lock name. Every worker runs goroutines that each take the lock a
// number of times and, holding it, increment a counter in Redis with a deliberately non-atomic
// GET then SET: increments that overlapped would be lost, so the final counter equals the
// number of acquisitions only if every hold excluded every other. Holding the lock, each
// goroutine then calls a second function that takes the lock again with the held context (a
// re-entry, which keeps the hold's fencing token) and checks the token against the highest
// token the counter has seen, stored beside it, as a resource guarding itself against stale
// holders would: every new hold must bring a strictly greater token.

const demoSynopsis = `Runs workers, each with its own Redis connection pool and aqs.Client (stand-ins for
processes), whose goroutines take one reentrant lock and increment a counter in Redis
with a non-atomic GET and SET while holding it. It prints progress and a summary:
the final counter must equal the number of acquisitions, and the fencing tokens
must strictly increase.`

type demoConfig struct {
	workers, goroutines, increments int
	lockName                        string
}

func runDemo(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "demo", demoSynopsis)
	redisAddr := addRedisFlag(fs)
	var cfg demoConfig
	fs.IntVar(&cfg.workers, "workers", 3, "number of workers")
	fs.IntVar(&cfg.goroutines, "goroutines", 4, "goroutines per worker")
	fs.IntVar(&cfg.increments, "increments", 25, "increments (lock acquisitions) per goroutine")
	fs.StringVar(&cfg.lockName, "lock", "", "lock `name` (default demo-<random hex>)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"workers", cfg.workers}, {"goroutines", cfg.goroutines}, {"increments", cfg.increments}} {
		if f.v < 1 {
			return usagef("--%s must be at least 1, not %d", f.name, f.v)
		}
	}
	if cfg.lockName == "" {
		var b [3]byte
		rand.Read(b[:]) // never fails; see crypto/rand.Read
		cfg.lockName = "demo-" + hex.EncodeToString(b[:])
	}

	conn, err := connectRedis(ctx, e, *redisAddr, true)
	if err != nil {
		return err
	}
	defer conn.Close()
	return demo(ctx, e.stdout, conn, cfg)
}

// demoRun is the state the workers share: only what the demo reports, never what the lock
// should protect (that lives in Redis).
type demoRun struct {
	counterKey, lastKey string // the resource: the counter and the highest fencing token it saw
	total, step         int64

	acquired   atomic.Int64
	reentries  atomic.Int64
	violations atomic.Int64 // tokens not above the highest seen

	outMu sync.Mutex
	out   io.Writer
}

func (d *demoRun) printf(format string, args ...any) {
	d.outMu.Lock()
	defer d.outMu.Unlock()
	fmt.Fprintf(d.out, format, args...)
}

// demoWorker is one stand-in process.
type demoWorker struct {
	n      int
	rdb    *redis.Client
	client *aqs.Client
	lock   *reentrant.Lock
	run    *demoRun
}

func demo(ctx context.Context, out io.Writer, conn *redisConn, cfg demoConfig) error {
	d := &demoRun{
		counterKey: "aqs-demo:" + cfg.lockName + ":counter",
		lastKey:    "aqs-demo:" + cfg.lockName + ":last-token",
		total:      int64(cfg.workers * cfg.goroutines * cfg.increments),
		out:        out,
	}
	d.step = max(d.total/10, 1)

	workers := make([]*demoWorker, cfg.workers)
	for i := range workers {
		rdb := conn.newClient()
		defer rdb.Close()
		client, err := aqs.New(ctx, rdb)
		if err != nil {
			return fmt.Errorf("connecting to Redis at %s: %w", conn.addr, err)
		}
		defer client.Close()
		lock, err := reentrant.New(client, cfg.lockName)
		if err != nil {
			return err
		}
		workers[i] = &demoWorker{n: i + 1, rdb: rdb, client: client, lock: lock, run: d}
	}
	rdb := workers[0].rdb
	if err := rdb.Del(ctx, d.counterKey, d.lastKey).Err(); err != nil {
		return err
	}
	defer func() {
		// The keys go even when ctx was cancelled.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		rdb.Del(cctx, d.counterKey, d.lastKey)
	}()

	d.printf("aqs demo: %d workers x %d goroutines x %d increments = %d acquisitions of lock %q (key %s)\n",
		cfg.workers, cfg.goroutines, cfg.increments, d.total, cfg.lockName, workers[0].lock.Key())
	for _, w := range workers {
		d.printf("  worker %d: own connection pool, aqs client %s\n", w.n, w.client.ID())
	}
	d.printf("progress (printed while holding the lock):\n")

	start := time.Now()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for _, w := range workers {
		for range cfg.goroutines {
			wg.Go(func() {
				for range cfg.increments {
					if err := w.increment(ctx); err != nil {
						cancel(fmt.Errorf("worker %d: %w", w.n, err))
						return
					}
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return err
	}

	counter, err := rdb.Get(ctx, d.counterKey).Int64()
	if err != nil {
		return fmt.Errorf("reading the counter: %w", err)
	}
	counterOK := counter == d.total
	tokensOK := d.violations.Load() == 0
	d.printf("summary:\n")
	d.printf("  acquisitions    %d (and %d re-entries through the held context)\n", d.acquired.Load(), d.reentries.Load())
	d.printf("  final counter   %d, expected %d: %s\n", counter, d.total, verdict(counterOK))
	d.printf("  fencing tokens  strictly increasing over %d holds: %s\n", d.acquired.Load(),
		verdict(tokensOK, fmt.Sprintf("%d tokens not above the last", d.violations.Load())))
	d.printf("  time            %v (%.0f acquisitions/s)\n", elapsed.Round(time.Millisecond),
		float64(d.acquired.Load())/elapsed.Seconds())
	if !counterOK || !tokensOK {
		return errors.New("the lock did not exclude every other holder")
	}
	return nil
}

// verdict returns "ok", or "FAILED" followed by the details.
func verdict(ok bool, details ...string) string {
	if ok {
		return "ok"
	}
	s := "FAILED"
	for _, d := range details {
		s += " (" + d + ")"
	}
	return s
}

// increment takes the lock, increments the counter and checks the fencing token.
func (w *demoWorker) increment(ctx context.Context) error {
	held, err := w.lock.Lock(ctx)
	if err != nil {
		return err
	}
	err = w.incrementHeld(held)
	if uerr := w.lock.Unlock(held); err == nil {
		err = uerr
	}
	return err
}

// incrementHeld runs with the lock held. Every Redis call takes the held context, so it stops
// as soon as the lock is lost.
func (w *demoWorker) incrementHeld(held context.Context) error {
	d := w.run
	n, err := w.rdb.Get(held, d.counterKey).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	n++
	if err := w.rdb.Set(held, d.counterKey, n, 0).Err(); err != nil {
		return err
	}
	token, err := w.checkToken(held)
	if err != nil {
		return err
	}
	if k := d.acquired.Add(1); k%d.step == 0 || k == d.total {
		d.printf("  %*d/%d  counter=%-*d  token=%d  worker %d\n",
			len(fmt.Sprint(d.total)), k, d.total, len(fmt.Sprint(d.total)), n, token, w.n)
	}
	return nil
}

// checkToken takes the lock again with ctx, which holds it already: a re-entry, which must keep
// the hold's token. It then checks the token against the highest one the resource has seen and
// records it there.
func (w *demoWorker) checkToken(ctx context.Context) (int64, error) {
	d := w.run
	inner, err := w.lock.Lock(ctx)
	if err != nil {
		return 0, fmt.Errorf("re-entering: %w", err)
	}
	defer w.lock.Unlock(inner)
	d.reentries.Add(1)
	token, err := aqs.FencingToken(inner)
	if err != nil {
		return 0, fmt.Errorf("fencing token: %w", err)
	}
	if outer, err := aqs.FencingToken(ctx); err != nil || token != outer {
		return 0, fmt.Errorf("re-entry changed the fencing token from %d to %d (%v)", outer, token, err)
	}
	last, err := w.rdb.Get(inner, d.lastKey).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, err
	}
	if token <= last {
		d.violations.Add(1)
	}
	return token, w.rdb.Set(inner, d.lastKey, token, 0).Err()
}
