package rwlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/rwlock"
)

// Roles of the child processes of the multi-process tests (process_test.go), run as
// redistest.RegisterRole describes: the parameters come from the parent, the lines below go
// between the two, and the child's exit status and stderr say how its role ended.

var (
	// roleContend prints lineReady once connected, waits for lineGo on stdin, then runs
	// goroutines × rounds holds, a mix of reads and writes (see isWrite), each checked in Redis
	// (see enterScript), and prints "lineDone <reads> <writes> <violations>".
	roleContend = redistest.RegisterRole("contend", contend)
	// roleRead takes the read side, prints lineHeld, and then holds it, its watchdog renewing
	// the lease, until it is killed.
	roleRead = redistest.RegisterRole("read", readUntilKilled)
)

// contendParams are roleContend's parameters.
type contendParams struct {
	Lock       string // the lock's name
	NonFair    bool   // the lock is made WithNonFair
	Goroutines int    // goroutines in the process
	Rounds     int    // holds per goroutine
}

// readParams are roleRead's parameters.
type readParams struct {
	Lock     string        // the lock's name
	Watchdog time.Duration // the Client's watchdog timeout
}

// The protocol lines.
const (
	lineReady = "ready" // child: connected, scripts loaded
	lineGo    = "go"    // parent, on stdin: start contending
	lineHeld  = "held"  // child: the read side is held
	lineDone  = "done"  // child: "done <reads> <writes> <violations>"
)

// holdTime is how long a contender stays inside each hold, long enough for an overlap to show
// if the lock allowed one.
const holdTime = 500 * time.Microsecond

// bookTTL is the TTL every book key gets on each write to it, so that none outlives the test
// even if a child dies inside a hold.
const bookTTL = 60 * time.Second

// books are the Redis-side records of the holds, all in the lock's hash slot (the lock key
// ends with its "{name}" hash tag), so the scripts below run alike on a cluster.
type books struct {
	insideW    string // writers inside: INCR on entry, DECR on exit
	insideR    string // readers inside: INCR on entry, DECR on exit
	violations string // entries that found the lock's promise broken
	maxReaders string // the most readers found inside at once
	reads      string // read holds completed
	writes     string // write holds completed
}

func booksOf(l *rwlock.Lock) books {
	k := l.Key()
	return books{
		insideW:    k + ":inside-w",
		insideR:    k + ":inside-r",
		violations: k + ":violations",
		maxReaders: k + ":max-readers",
		reads:      k + ":reads",
		writes:     k + ":writes",
	}
}

func (b books) all() []string {
	return []string{b.insideW, b.insideR, b.violations, b.maxReaders, b.reads, b.writes}
}

// enterScript enters a hold, and checks it, in one atomic step in Redis.
//
// KEYS: insideW, insideR, violations, maxReaders. ARGV[1] "w" for a writer, "r" for a reader;
// ARGV[2] TTL in ms for every key written.
//
// A writer counts itself in insideW and must find itself alone: insideW 1 and insideR 0. A
// reader counts itself in insideR and must find no writer: insideW 0. Every overlap of a
// writer with anyone is seen by whichever of the two entered second. A violation is counted in
// the violations key, and the reply is the number of violations this entry found (0 or 1).
var enterScript = redis.NewScript(`
local w, r, v, m = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local ttl = ARGV[2]
local bad = false
if ARGV[1] == 'w' then
  local nw = redis.call('INCR', w)
  redis.call('PEXPIRE', w, ttl)
  bad = nw ~= 1 or tonumber(redis.call('GET', r) or '0') ~= 0
else
  local nr = redis.call('INCR', r)
  redis.call('PEXPIRE', r, ttl)
  if nr > tonumber(redis.call('GET', m) or '0') then
    redis.call('SET', m, nr, 'PX', ttl)
  end
  bad = tonumber(redis.call('GET', w) or '0') ~= 0
end
if bad then
  redis.call('INCR', v)
  redis.call('PEXPIRE', v, ttl)
  return 1
end
return 0
`)

// leaveScript leaves a hold: it counts the holder out and the hold as completed.
//
// KEYS: inside (insideW or insideR), completed (writes or reads). ARGV[1] TTL in ms.
var leaveScript = redis.NewScript(`
redis.call('DECR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return 1
`)

// isWrite reports whether round i of goroutine g takes the write side: one in four, at
// staggered rounds, so writers and readers of every process are interleaved.
func isWrite(g, i int) bool { return (g+i)%4 == 0 }

// childLock connects to the parent's Redis and returns the lock of that name on it, made
// with lopts, on a Client made with opts.
func childLock(env *redistest.ChildEnv, name string, lopts []rwlock.Option, opts ...aqs.Option) (redis.UniversalClient, *rwlock.Lock, error) {
	rdb, c, err := env.Client(opts...)
	if err != nil {
		return nil, nil, err
	}
	l, err := rwlock.New(c, name, lopts...)
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	return rdb, l, nil
}

// contend is roleContend.
func contend(env *redistest.ChildEnv, p contendParams) error {
	var lopts []rwlock.Option
	if p.NonFair {
		lopts = append(lopts, rwlock.WithNonFair())
	}
	rdb, l, err := childLock(env, p.Lock, lopts)
	if err != nil {
		return err
	}
	defer rdb.Close()
	b := booksOf(l)
	// Load the checking scripts before the start, so the first holds are not slower.
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
		wg                        sync.WaitGroup
		mu                        sync.Mutex
		errs                      []error
		reads, writes, violations int
	)
	for g := 0; g < p.Goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < p.Rounds; i++ {
				write := isWrite(g, i)
				// Every fifth read re-enters its hold once, so the re-entry counts take part.
				bad, err := hold(rdb, l, b, write, !write && i%5 == 1)
				mu.Lock()
				violations += bad
				switch {
				case err != nil:
					errs = append(errs, fmt.Errorf("goroutine %d round %d (write %v): %w", g, i, write, err))
				case write:
					writes++
				default:
					reads++
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	env.Println(lineDone, reads, writes, violations)
	return errors.Join(errs...)
}

// hold takes one side of the lock and, holding it, enters (checked in Redis), stays holdTime,
// and leaves. It returns the violations its entry found. The Redis calls run under the held
// context, so a lost lease shows up as an error instead of unprotected work.
func hold(rdb redis.UniversalClient, l *rwlock.Lock, b books, write, reenter bool) (bad int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	side, inside, completed := "r", b.insideR, b.reads
	lock, unlock := func(ctx context.Context) (context.Context, error) { return l.RLock(ctx) }, l.RUnlock
	if write {
		side, inside, completed = "w", b.insideW, b.writes
		lock, unlock = func(ctx context.Context) (context.Context, error) { return l.Lock(ctx) }, l.Unlock
	}
	held, err := lock(ctx)
	if err != nil {
		return 0, fmt.Errorf("lock: %w", err)
	}
	defer func() {
		if uerr := unlock(held); uerr != nil && err == nil {
			err = fmt.Errorf("unlock: %w", uerr)
		}
	}()
	ttl := bookTTL.Milliseconds()
	bad, err = enterScript.Run(held, rdb, []string{b.insideW, b.insideR, b.violations, b.maxReaders}, side, ttl).Int()
	if err != nil {
		return 0, fmt.Errorf("enter: %w", err)
	}
	if reenter {
		inner, err := l.RLock(held)
		if err != nil {
			return bad, fmt.Errorf("re-enter: %w", err)
		}
		if err := l.RUnlock(inner); err != nil {
			return bad, fmt.Errorf("unlock the re-entry: %w", err)
		}
	}
	select {
	case <-time.After(holdTime):
	case <-held.Done():
		return bad, fmt.Errorf("hold ended inside: %w", context.Cause(held))
	}
	if err := leaveScript.Run(held, rdb, []string{inside, completed}, ttl).Err(); err != nil {
		return bad, fmt.Errorf("leave: %w", err)
	}
	return bad, nil
}

// readUntilKilled is roleRead. It never returns on success: the parent kills the process.
func readUntilKilled(env *redistest.ChildEnv, p readParams) error {
	rdb, l, err := childLock(env, p.Lock, nil, aqs.WithWatchdogTimeout(p.Watchdog))
	if err != nil {
		return err
	}
	defer rdb.Close()
	held, ok, err := l.TryRLock(context.Background(), aqs.WithWait(30*time.Second))
	if err != nil {
		return fmt.Errorf("read-lock: %w", err)
	}
	if !ok {
		return errors.New("read-lock: not granted within 30s")
	}
	env.Println(lineHeld)
	<-held.Done() // the kill comes first; this returns only if the lease was lost
	return fmt.Errorf("read hold ended before the kill: %w", context.Cause(held))
}
