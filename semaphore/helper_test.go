package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/semaphore"
)

// Helper processes.
//
// The multi-process tests (process_test.go) run this test binary again with
// redistest.StartChild, helperEnv set to a role. TestMain sees the variable and calls
// runHelperProcess instead of running tests, so a child never starts a redis-server of its own
// and never runs a test. Everything else a child needs comes in the environment variables
// below; it talks back with lines on stdout and its exit code: 0 the role is done, 1 the role
// failed, 2 the environment is bad, 3 the parent went away. The reason of a failure is on
// stderr, which the parent logs when a test fails.
//
// The parent sets the semaphore's permits before it starts a child: a child only opens the
// semaphore by its name. A child exits as soon as its stdin reaches EOF
// (redistest.WaitForLine), as redistest.StartChild requires so that no child outlives the test
// binary: it then exits on the spot, holding whatever it holds, as a crash would.

const (
	helperEnv           = "AQS_SEM_HELPER"     // the role: roleWork or roleHold
	helperAddrEnv       = "AQS_SEM_ADDR"       // single node "host:port"
	helperClusterEnv    = "AQS_SEM_CLUSTER"    // cluster masters, comma-separated; instead of the address
	helperNameEnv       = "AQS_SEM_NAME"       // the semaphore's name
	helperKindEnv       = "AQS_SEM_KIND"       // kindLeased or kindCounting
	helperPermitsEnv    = "AQS_SEM_PERMITS"    // roleWork: the semaphore's K; roleHold: the permits to take
	helperGoroutinesEnv = "AQS_SEM_GOROUTINES" // roleWork: worker goroutines in the process
	helperJobsEnv       = "AQS_SEM_JOBS"       // roleWork: jobs per goroutine
	helperWatchdogEnv   = "AQS_SEM_WATCHDOG"   // the Client's watchdog timeout (time.ParseDuration); optional
)

// Roles.
const (
	// roleWork prints lineReady once connected, waits for lineGo on stdin, then runs
	// goroutines × jobs jobs, each under one permit and checked in Redis (see enterScript), and
	// prints "lineDone <jobs> <violations>".
	roleWork = "work"
	// roleHold takes the leased semaphore's permits, prints lineHeld, and then holds them, its
	// watchdog renewing the lease, until it is killed.
	roleHold = "hold"
)

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

// runHelperProcess runs the role named by helperEnv and returns the exit code.
func runHelperProcess() int {
	role := os.Getenv(helperEnv)
	start := redistest.WaitForLine(lineGo)
	rdb, c, err := helperClient()
	if err != nil {
		fmt.Fprintf(os.Stderr, "helper %s: %v\n", role, err)
		return redistest.ExitBadEnv
	}
	defer rdb.Close()
	switch role {
	case roleWork:
		err = work(rdb, c, start)
	case roleHold:
		err = holdUntilKilled(c)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "helper %s (pid %d): %v\n", role, os.Getpid(), err)
		return redistest.ExitFailed
	}
	return redistest.ExitOK
}

// helperClient connects to the Redis named in the environment and returns an aqs Client on
// it that logs to stderr. The Client is never closed: the process ends with it, and a kill
// must find it running.
func helperClient() (redis.UniversalClient, *aqs.Client, error) {
	return redistest.ChildClient(helperAddrEnv, helperClusterEnv, helperWatchdogEnv)
}

// helperPool opens the semaphore of the kind and name in the environment.
func helperPool(c *aqs.Client) (pool, error) {
	name := os.Getenv(helperNameEnv)
	switch kind := os.Getenv(helperKindEnv); kind {
	case kindLeased:
		s, err := semaphore.NewLeased(c, name)
		return leasedPool{s}, err
	case kindCounting:
		s, err := semaphore.New(c, name)
		return countingPool{s}, err
	default:
		return nil, fmt.Errorf("%s=%q is neither %q nor %q", helperKindEnv, kind, kindLeased, kindCounting)
	}
}

// work is roleWork.
func work(rdb redis.UniversalClient, c *aqs.Client, start <-chan struct{}) error {
	var ns [3]int
	for i, env := range []string{helperPermitsEnv, helperGoroutinesEnv, helperJobsEnv} {
		n, err := redistest.EnvInt(env)
		if err != nil {
			return err
		}
		ns[i] = n
	}
	k, goroutines, jobs := ns[0], ns[1], ns[2]
	p, err := helperPool(c)
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
	fmt.Println(lineReady)
	select {
	case <-start:
	case <-time.After(time.Minute):
		return errors.New("no go from the parent")
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
	fmt.Printf("%s %d %d\n", lineDone, done, violations)
	return errors.Join(errs...)
}

// holdUntilKilled is roleHold. It never returns on success: the parent kills the process.
func holdUntilKilled(c *aqs.Client) error {
	n, err := redistest.EnvInt(helperPermitsEnv)
	if err != nil {
		return err
	}
	s, err := semaphore.NewLeased(c, os.Getenv(helperNameEnv))
	if err != nil {
		return err
	}
	// No deadline: the permit's context is a child of this one. The permits are free when the
	// parent starts this child, and the child exits when the parent is gone.
	p, err := s.Acquire(context.Background(), n)
	if err != nil {
		return fmt.Errorf("acquire %d: %w", n, err)
	}
	fmt.Println(lineHeld)
	<-p.Context().Done() // the kill comes first; this returns only if the lease was lost
	return fmt.Errorf("permit ended before the kill: %w", context.Cause(p.Context()))
}
