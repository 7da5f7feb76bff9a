package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/semaphore"
)

// Roles of the child processes of the multi-process tests (process_test.go), run as
// redistest.RegisterRole describes: the parameters come from the parent, the lines below go
// between the two, and the child's exit status and stderr say how its role ended. The parent
// sets the semaphore's permits before it starts a child: a child only opens the semaphore by
// its name.

var (
	// roleWork prints lineReady once connected, waits for lineGo on stdin, then runs
	// goroutines × jobs jobs, each under one permit and checked in Redis (see enterScript), and
	// prints "lineDone <jobs> <violations>".
	roleWork = redistest.RegisterRole("work", work)
	// roleHold takes the leased semaphore's permits, prints lineHeld, and then holds them, its
	// watchdog renewing the lease, until it is killed.
	roleHold = redistest.RegisterRole("hold", holdUntilKilled)
	// roleHoldByID takes the leased semaphore's permits, prints "lineHeld <permit id>", and
	// waits for its permit's context to end: released by its id elsewhere, the context must
	// end with aqs.ErrReleased and the child's own Release fail with ErrPermitReleased; it then
	// prints lineEnded and exits 0.
	roleHoldByID = redistest.RegisterRole("hold-by-id", holdUntilReleasedByID)
)

// workParams are roleWork's parameters.
type workParams struct {
	Name       string // the semaphore's name
	Kind       string // kindLeased or kindCounting
	Permits    int    // the semaphore's K
	Goroutines int    // worker goroutines in the process
	Jobs       int    // jobs per goroutine
}

// holdParams are roleHold's parameters.
type holdParams struct {
	Name     string        // the leased semaphore's name
	Permits  int           // the permits to take
	Watchdog time.Duration // the Client's watchdog timeout
}

// The semaphore kinds.
const (
	kindLeased   = "leased"
	kindCounting = "counting"
)

// The protocol lines.
const (
	lineReady = "ready" // child: connected, scripts loaded
	lineGo    = "go"    // parent, on stdin: start the jobs
	lineHeld  = "held"  // child: the permits are held
	lineDone  = "done"  // child: "done <jobs> <violations>"
	lineEnded = "ended" // child: its permit ended as a release by its id ends it
)

// bookTTL is the TTL every book key gets on each write to it, so that none outlives the test
// even if a child dies inside a job.
const bookTTL = 60 * time.Second

// jobTime is how long job i of goroutine g stays inside: 1 to 3 ms, long enough for the jobs
// of several processes to overlap.
func jobTime(g, i int) time.Duration { return time.Duration(1+(g+i)%3) * time.Millisecond }

// books are the Redis-side records of the jobs, all in the semaphore's hash slot (its key ends
// with its "{name}" hash tag), so the scripts below run alike on a cluster.
type books struct {
	inside     string // jobs running now: INCR on entry, DECR on exit
	max        string // the most jobs found running at once
	violations string // entries that found more than K jobs running
	done       string // jobs completed
}

func booksOf(key string) books {
	return books{inside: key + ":jobs", max: key + ":jobs-max", violations: key + ":violations", done: key + ":done"}
}

func (b books) all() []string { return []string{b.inside, b.max, b.violations, b.done} }

// enterScript enters a job, and checks it, in one atomic step in Redis.
//
// KEYS: inside, max, violations. ARGV[1] K, the semaphore's permits; ARGV[2] TTL in ms for
// every key written.
//
// The job counts itself in inside, records the count in max when it is a new high, and must
// find at most K jobs running, itself included: every moment with more than K jobs running is
// seen by the entry that made it so. A violation is counted in the violations key, and the
// reply is the number of violations this entry found (0 or 1).
var enterScript = redis.NewScript(`
local inside, max, v = KEYS[1], KEYS[2], KEYS[3]
local ttl = ARGV[2]
local n = redis.call('INCR', inside)
redis.call('PEXPIRE', inside, ttl)
if n > tonumber(redis.call('GET', max) or '0') then
  redis.call('SET', max, n, 'PX', ttl)
end
if n > tonumber(ARGV[1]) then
  redis.call('INCR', v)
  redis.call('PEXPIRE', v, ttl)
  return 1
end
return 0
`)

// leaveScript leaves a job: it counts it out and as completed.
//
// KEYS: inside, done. ARGV[1] TTL in ms.
var leaveScript = redis.NewScript(`
redis.call('DECR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return 1
`)

// pool is the semaphore a worker takes its permits from, either kind.
type pool interface {
	key() string
	// job takes one permit, runs f under it (with the permit's context for a leased one), and
	// gives the permit back.
	job(ctx context.Context, f func(ctx context.Context) error) error
}

type leasedPool struct{ s *semaphore.Leased }

func (p leasedPool) key() string { return p.s.Key() }

func (p leasedPool) job(ctx context.Context, f func(context.Context) error) (err error) {
	permit, err := p.s.Acquire(ctx, 1)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	defer func() {
		if rerr := p.s.Release(ctx, permit); rerr != nil && err == nil {
			err = fmt.Errorf("release: %w", rerr)
		}
	}()
	// The Redis calls run under the permit's context, so a lost lease shows up as an error
	// instead of unprotected work.
	return f(permit.Context())
}

type countingPool struct{ s *semaphore.Semaphore }

func (p countingPool) key() string { return p.s.Key() }

func (p countingPool) job(ctx context.Context, f func(context.Context) error) (err error) {
	if err := p.s.Acquire(ctx, 1); err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	defer func() {
		if rerr := p.s.Release(ctx, 1); rerr != nil && err == nil {
			err = fmt.Errorf("release: %w", rerr)
		}
	}()
	return f(ctx)
}

// openPool opens the semaphore of the kind and name.
func openPool(c *aqs.Client, kind, name string) (pool, error) {
	switch kind {
	case kindLeased:
		s, err := semaphore.NewLeased(c, name)
		return leasedPool{s}, err
	case kindCounting:
		s, err := semaphore.New(c, name)
		return countingPool{s}, err
	default:
		return nil, fmt.Errorf("kind %q is neither %q nor %q", kind, kindLeased, kindCounting)
	}
}

// work is roleWork.
func work(env *redistest.ChildEnv, wp workParams) error {
	rdb, c, err := env.Client()
	if err != nil {
		return err
	}
	defer rdb.Close()
	k, goroutines, jobs := wp.Permits, wp.Goroutines, wp.Jobs
	p, err := openPool(c, wp.Kind, wp.Name)
	if err != nil {
		return err
	}
	b := booksOf(p.key())
	// Load the checking scripts before the start, so the first jobs are not slower.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range []*redis.Script{enterScript, leaveScript} {
		if err := s.Load(ctx, rdb).Err(); err != nil {
			return fmt.Errorf("script load: %w", err)
		}
	}
	env.Println(lineReady)
	if err := env.WaitFor(lineGo, time.Minute); err != nil {
		return err
	}
	var (
		wg               sync.WaitGroup
		mu               sync.Mutex
		errs             []error
		done, violations int
	)
	ttl := bookTTL.Milliseconds()
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < jobs; i++ {
				bad := 0
				jctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err := p.job(jctx, func(ctx context.Context) error {
					var err error
					bad, err = enterScript.Run(ctx, rdb, []string{b.inside, b.max, b.violations}, k, ttl).Int()
					if err != nil {
						return fmt.Errorf("enter: %w", err)
					}
					select {
					case <-time.After(jobTime(g, i)): // the job's work
					case <-ctx.Done():
						return fmt.Errorf("permit ended inside the job: %w", context.Cause(ctx))
					}
					if err := leaveScript.Run(ctx, rdb, []string{b.inside, b.done}, ttl).Err(); err != nil {
						return fmt.Errorf("leave: %w", err)
					}
					return nil
				})
				cancel()
				mu.Lock()
				violations += bad
				if err != nil {
					errs = append(errs, fmt.Errorf("goroutine %d job %d: %w", g, i, err))
				} else {
					done++
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	env.Println(lineDone, done, violations)
	return errors.Join(errs...)
}

// holdUntilKilled is roleHold. It never returns on success: the parent kills the process.
func holdUntilKilled(env *redistest.ChildEnv, hp holdParams) error {
	rdb, c, err := env.Client(aqs.WithWatchdogTimeout(hp.Watchdog))
	if err != nil {
		return err
	}
	defer rdb.Close()
	s, err := semaphore.NewLeased(c, hp.Name)
	if err != nil {
		return err
	}
	n := hp.Permits
	// No deadline: the permit's context is a child of this one. The permits are free when the
	// parent starts this child, and the child exits when the parent is gone.
	p, err := s.Acquire(context.Background(), n)
	if err != nil {
		return fmt.Errorf("acquire %d: %w", n, err)
	}
	env.Println(lineHeld)
	<-p.Context().Done() // the kill comes first; this returns only if the lease was lost
	return fmt.Errorf("permit ended before the kill: %w", context.Cause(p.Context()))
}

// holdUntilReleasedByID is roleHoldByID.
func holdUntilReleasedByID(env *redistest.ChildEnv, hp holdParams) error {
	rdb, c, err := env.Client(aqs.WithWatchdogTimeout(hp.Watchdog))
	if err != nil {
		return err
	}
	defer rdb.Close()
	s, err := semaphore.NewLeased(c, hp.Name)
	if err != nil {
		return err
	}
	ctx := context.Background()
	p, err := s.Acquire(ctx, hp.Permits)
	if err != nil {
		return fmt.Errorf("acquire %d: %w", hp.Permits, err)
	}
	env.Println(lineHeld, p.ID())
	select {
	case <-p.Context().Done():
	case <-time.After(time.Minute):
		return errors.New("the permit's context did not end within a minute")
	}
	if cause := context.Cause(p.Context()); !errors.Is(cause, aqs.ErrReleased) || errors.Is(cause, aqs.ErrLockLost) {
		return fmt.Errorf("the permit's context ended with %v, not aqs.ErrReleased", cause)
	}
	if err := s.Release(ctx, p); !errors.Is(err, semaphore.ErrPermitReleased) {
		return fmt.Errorf("the holder's own release after the release by id: %v, not ErrPermitReleased", err)
	}
	env.Println(lineEnded)
	return nil
}
