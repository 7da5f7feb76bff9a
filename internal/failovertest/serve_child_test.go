package failovertest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/election"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/latch"
	"github.com/redaqs/aqs/reentrant"
	"github.com/redaqs/aqs/rwlock"
	"github.com/redaqs/aqs/semaphore"
)

// The child of TestEveryPrimitiveServesAgainAfterAFailover, in roleServe (see
// redistest.RegisterRole): one process of the load, with a Client of its own, whose workers
// use every primitive until the parent sends a line, and print one line per call (see
// call.line), and one per leader its election observer received (see observation.line),
// between a first "READY" and a last "END".

// roleServe is the role of a process of the load.
var roleServe = redistest.RegisterRole("serve", serveChild)

// serveParams are roleServe's parameters.
type serveParams struct {
	ID    string            // the child's number, in its workers' names
	Names map[string]string // the primitives' names (see primNames)
	Sync  bool              // the replica-sync policy on
}

// Figures of the load, shared with the parent.
const (
	serveWatchdog    = 2 * time.Second
	serveSyncTimeout = 500 * time.Millisecond
	serveDeadline    = 3 * time.Second // of every call
	servePermits     = 2
)

// The primitives under load, as the lines name them.
const (
	pReentrant = "reentrant"
	pFair      = "fair"
	pWrite     = "rwlock-write"
	pRead      = "rwlock-read"
	pCounting  = "counting"
	pLeased    = "leased"
	pLatch     = "latch"
	pCond      = "condition"
	pElection  = "election"
)

// Error classes of a failed call.
const (
	eSync     = "sync"     // aqs.ErrReplicaSync: too few replicas acknowledged: too few replicas acknowledged
	eDeadline = "deadline" // the call's deadline
	eLost     = "lost"     // aqs.ErrLockLost
	eRedis    = "redis"    // anything else
)

// call is one call of a worker: start, the acquisition (zero when it failed), and its end:
// the start of the release, or the moment the holder learned of a loss, or the failure. For
// the election, the acquisition is Campaign's return, and the end that of the leadership: the
// start of Resign, or the moment the leading context ended with aqs.ErrLockLost.
type call struct {
	prim, worker string
	start, acq   time.Time
	end          time.Time
	lost         bool   // the held context ended with aqs.ErrLockLost before the release
	class        string // a failed call's error class
	value        string // a campaign's value, unique to the call; "" for the other primitives
	detail       string
}

// line is the call as the child prints it: "C prim worker start acq end class value detail",
// times in Unix nanoseconds (the processes share the machine's clock), acq 0 for a failure,
// class "ok" or "lost" for an acquisition, value "-" when there is none.
func (c call) line() string {
	acq := int64(0)
	if !c.acq.IsZero() {
		acq = c.acq.UnixNano()
	}
	class := c.class
	if !c.acq.IsZero() {
		class = "ok"
		if c.lost {
			class = "lost"
		}
	}
	value := c.value
	if value == "" {
		value = "-"
	}
	return fmt.Sprintf("C %s %s %d %d %d %s %s %s", c.prim, c.worker, c.start.UnixNano(), acq, c.end.UnixNano(),
		class, value, strings.ReplaceAll(c.detail, "\n", " "))
}

// observation is a leader an election observer received, and when.
type observation struct {
	at    time.Time
	token int64
	value string
}

// line is the observation as the child prints it: "O at token value", at in Unix nanoseconds.
func (o observation) line() string {
	return fmt.Sprintf("O %d %d %s", o.at.UnixNano(), o.token, o.value)
}

func classOf(err error) string {
	var se *aqs.ReplicaSyncError
	switch {
	case errors.As(err, &se) && se.Err != nil:
		return eRedis // WAIT itself failed: the server could not be reached
	case errors.Is(err, aqs.ErrReplicaSync):
		return eSync
	case errors.Is(err, context.DeadlineExceeded):
		return eDeadline
	case errors.Is(err, aqs.ErrLockLost):
		return eLost
	}
	return eRedis
}

// serveChild is roleServe.
func serveChild(env *redistest.ChildEnv, p serveParams) error {
	opts := []aqs.Option{aqs.WithWatchdogTimeout(serveWatchdog),
		aqs.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))}
	if p.Sync {
		opts = append(opts, aqs.WithReplicaSync(1, serveSyncTimeout))
	}
	rdb, c, err := env.Client(opts...)
	if err != nil {
		return err
	}

	out := bufio.NewWriter(os.Stdout)
	var outMu sync.Mutex
	report := func(c call) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintln(out, c.line())
	}
	flush := func() {
		outMu.Lock()
		defer outMu.Unlock()
		_ = out.Flush()
	}
	stop := make(chan struct{})
	go func() {
		<-env.Lines()
		close(stop)
	}()
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				flush()
			}
		}
	}()

	w, err := newWorkers(c, p.Names, p.ID, report)
	if err != nil {
		return err
	}
	// The election's observer, for the whole load: it must follow the new master.
	el, err := election.New(c, p.Names[pElection])
	if err != nil {
		return err
	}
	octx, ocancel := context.WithCancel(context.Background())
	observed := el.Observe(octx)
	observing := make(chan struct{})
	go func() {
		defer close(observing)
		for l := range observed {
			o := observation{at: time.Now(), token: l.Token, value: l.Value}
			outMu.Lock()
			fmt.Fprintln(out, o.line())
			outMu.Unlock()
		}
	}()
	outMu.Lock()
	fmt.Fprintln(out, "READY") // the load starts
	_ = out.Flush()
	outMu.Unlock()
	w.run(stop)
	ocancel()
	<-observing // Observe closes its channel once its subscription is gone
	_ = c.Close()
	_ = rdb.Close()
	outMu.Lock()
	fmt.Fprintln(out, "END")
	outMu.Unlock()
	flush()
	return nil
}

// workers is one child's load.
type workers struct {
	id     string
	report func(call)
	jobs   []func(stop <-chan struct{})
}

// holdFor is how long a worker holds what it took.
func holdFor() time.Duration { return time.Duration(2+rand.IntN(4)) * time.Millisecond }

// pause is how long a worker waits after a failed call, so that a run of failures does not
// spin.
const pause = 20 * time.Millisecond

func newWorkers(c *aqs.Client, names map[string]string, id string, report func(call)) (*workers, error) {
	w := &workers{id: id, report: report}
	fa, err := fair.New(c, names[pFair])
	if err != nil {
		return nil, err
	}
	rw, err := rwlock.New(c, names["rwlock"])
	if err != nil {
		return nil, err
	}
	cs, err := semaphore.New(c, names[pCounting])
	if err != nil {
		return nil, err
	}
	ls, err := semaphore.NewLeased(c, names[pLeased])
	if err != nil {
		return nil, err
	}
	cl, err := fair.New(c, names[pCond])
	if err != nil {
		return nil, err
	}
	cv, err := cl.NewCondition("ready")
	if err != nil {
		return nil, err
	}
	el, err := election.New(c, names[pElection])
	if err != nil {
		return nil, err
	}
	// A Lock value per call, as a service builds them per request, for the exclusive locks.
	for i := range 3 {
		w.loop(pReentrant, i, func(ctx context.Context) (context.Context, func() error, error) {
			l, err := reentrant.New(c, names[pReentrant])
			if err != nil {
				return nil, nil, err
			}
			held, err := l.Lock(ctx)
			return held, func() error { return l.Unlock(held) }, err
		})
		w.loop(pFair, i, func(ctx context.Context) (context.Context, func() error, error) {
			held, err := fa.Lock(ctx)
			return held, func() error { return fa.Unlock(held) }, err
		})
		w.loop(pCounting, i, func(ctx context.Context) (context.Context, func() error, error) {
			err := cs.Acquire(ctx, 1)
			return nil, func() error { return cs.Release(context.Background(), 1) }, err
		})
		w.loop(pLeased, i, func(ctx context.Context) (context.Context, func() error, error) {
			p, err := ls.Acquire(ctx, 1)
			if err != nil {
				return nil, nil, err
			}
			return p.Context(), func() error { return ls.Release(context.Background(), p) }, nil
		})
	}
	for i := range 2 {
		w.loop(pWrite, i, func(ctx context.Context) (context.Context, func() error, error) {
			held, err := rw.Lock(ctx)
			return held, func() error { return rw.Unlock(held) }, err
		})
		w.loop(pRead, i, func(ctx context.Context) (context.Context, func() error, error) {
			held, err := rw.RLock(ctx)
			return held, func() error { return rw.RUnlock(held) }, err
		})
	}
	// Candidates: each campaign with a value of its own, lead for holdFor, resign.
	for i := range 2 {
		seq := 0
		w.loopCall(pElection, i, func(ctx context.Context, c *call) (context.Context, func() error, error) {
			seq++
			c.value = fmt.Sprintf("%s-%d", c.worker, seq)
			leading, err := el.Campaign(ctx, c.value)
			return leading, func() error { return el.Resign(leading) }, err
		})
	}
	w.latch(c, names[pLatch])
	w.condition(cl, cv)
	return w, nil
}

// loop adds a worker that takes and releases with take until stopped: one call each time,
// with the load's deadline, holding for holdFor.
func (w *workers) loop(prim string, i int, take func(ctx context.Context) (held context.Context, release func() error, err error)) {
	w.loopCall(prim, i, func(ctx context.Context, _ *call) (context.Context, func() error, error) { return take(ctx) })
}

// loopCall is loop with a take that sees the call it makes, to set its value.
func (w *workers) loopCall(prim string, i int, take func(ctx context.Context, c *call) (held context.Context, release func() error, err error)) {
	worker := fmt.Sprintf("%s.%d", w.id, i)
	w.jobs = append(w.jobs, func(stop <-chan struct{}) {
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), serveDeadline)
			c := call{prim: prim, worker: worker, start: time.Now()}
			held, release, err := take(ctx, &c)
			cancel()
			if err != nil {
				c.end, c.class, c.detail = time.Now(), classOf(err), err.Error()
				w.report(c)
				time.Sleep(pause)
				continue
			}
			c.acq = time.Now()
			var lostAt time.Time
			var lostMu sync.Mutex
			if held != nil {
				watched := make(chan struct{})
				stopWatch := context.AfterFunc(held, func() {
					defer close(watched)
					if errors.Is(context.Cause(held), aqs.ErrLockLost) {
						lostMu.Lock()
						lostAt = time.Now()
						lostMu.Unlock()
					}
				})
				time.Sleep(holdFor())
				// The holder looks at its hold before its work's end, as before any act under
				// it: a lease no longer trusted ends the held context now (an election's
				// leading context tells it before the watchdog runs).
				_ = held.Err()
				if !stopWatch() {
					<-watched // it ran, or is running: its moment is the loss's
				}
			} else {
				time.Sleep(holdFor())
			}
			c.end = time.Now()
			lostMu.Lock()
			if !lostAt.IsZero() {
				c.end, c.lost = lostAt, true
			}
			lostMu.Unlock()
			if err := release(); err != nil && !c.lost {
				c.detail = "release: " + err.Error()
			}
			w.report(c)
		}
	})
}

// latch adds a worker that, round after round, sets a latch of its own to 2, counts it down
// twice from another goroutine, and awaits it: an acquisition is an Await that returned. The
// call is TrySetCount and Await, which take the deadline; CountDown does not use its
// context's cancellation (a count-down cut short would leave the count unknown), so the
// call does not wait for the count-downs once Await has returned.
func (w *workers) latch(c *aqs.Client, base string) {
	worker := w.id + ".0"
	w.jobs = append(w.jobs, func(stop <-chan struct{}) {
		for round := 0; ; round++ {
			select {
			case <-stop:
				return
			default:
			}
			l, err := latch.New(c, fmt.Sprintf("%s-%s-%d", base, w.id, round), latch.WithExpiry(time.Minute))
			if err != nil {
				panic(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), serveDeadline)
			cl := call{prim: pLatch, worker: worker, start: time.Now()}
			err = func() error {
				if _, err := l.TrySetCount(ctx, 2); err != nil {
					return err
				}
				down := make(chan error, 1)
				go func() {
					var err error
					for range 2 {
						time.Sleep(time.Millisecond)
						if err = l.CountDown(ctx); err != nil {
							break
						}
					}
					down <- err
				}()
				err := l.Await(ctx)
				if err == nil {
					err = <-down // the count reached 0: both returned, or are about to
				}
				return err
			}()
			cancel()
			if err != nil {
				cl.end, cl.class, cl.detail = time.Now(), classOf(err), err.Error()
				w.report(cl)
				time.Sleep(pause)
				continue
			}
			cl.acq = time.Now()
			cl.end = cl.acq
			w.report(cl)
		}
	})
}

// condition adds a consumer, whose acquisition is a Wait that a Signal ended, and a producer
// that signals every few milliseconds, on the fair lock l.
func (w *workers) condition(l *fair.Lock, cv *fair.Condition) {
	worker := w.id + ".0"
	w.jobs = append(w.jobs, func(stop <-chan struct{}) {
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), serveDeadline)
			c := call{prim: pCond, worker: worker, start: time.Now()}
			held, err := l.Lock(ctx)
			if err == nil {
				held, err = cv.Wait(held)
			}
			cancel()
			if err != nil {
				c.end, c.class, c.detail = time.Now(), classOf(err), err.Error()
				w.report(c)
				time.Sleep(pause)
				continue
			}
			c.acq = time.Now()
			c.end = c.acq
			if err := l.Unlock(held); err != nil {
				c.detail = "release: " + err.Error()
			}
			w.report(c)
		}
	}, func(stop <-chan struct{}) {
		for {
			select {
			case <-stop:
				return
			case <-time.After(3 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), serveDeadline)
			if held, err := l.Lock(ctx); err == nil {
				_, _ = cv.Signal(held)
				_ = l.Unlock(held)
			}
			cancel()
		}
	})
}

// run runs every worker until stop is closed, and returns once all of them have.
func (w *workers) run(stop <-chan struct{}) {
	var wg sync.WaitGroup
	for _, j := range w.jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j(stop)
		}()
	}
	wg.Wait()
}
