package reentrant_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/reentrant"
)

// Roles of the child processes of the multi-process tests (process_test.go), run as
// redistest.RegisterRole describes: the parameters come from the parent, the lines below go
// between the two, and the child's exit status and stderr say how its role ended.

var (
	// roleContend prints lineReady once connected, waits for lineGo on stdin, then runs
	// goroutines × rounds critical sections (see criticalSection) and prints
	// "lineDone <sections>".
	roleContend = redistest.RegisterRole("contend", contend)
	// roleHold takes the lock and re-enters it (hold count 2), prints "lineHeld <token>" and
	// then holds it, its watchdog renewing the lease, until it is killed.
	roleHold = redistest.RegisterRole("hold", holdUntilKilled)
)

// contendParams are roleContend's parameters.
type contendParams struct {
	Lock       string // the lock's name
	Goroutines int    // goroutines in the process
	Rounds     int    // critical sections per goroutine
}

// holdParams are roleHold's parameters.
type holdParams struct {
	Lock     string        // the lock's name
	Watchdog time.Duration // the Client's watchdog timeout
}

// The protocol lines.
const (
	lineReady = "ready" // child: connected, scripts loaded
	lineGo    = "go"    // parent, on stdin: start contending
	lineHeld  = "held"  // child: "held <fencing token>"
	lineDone  = "done"  // child: "done <critical sections completed>"
)

// sectionKeys are the Redis-side books of the critical section, all in the lock's hash slot
// (the lock key ends with its "{name}" hash tag), so the test runs alike on a cluster.
type sectionKeys struct {
	inside      string // INCR on entry, DECR on exit: anything but 1 after the INCR is an overlap
	overlaps    string // entries that found someone inside
	completed   string // critical sections done
	lastToken   string // the fencing token of the latest holder
	regressions string // entries whose token was not above the previous holder's
	lastHolder  string // the process id of the latest holder
	switches    string // entries whose previous holder was another process
}

func keysOf(l *reentrant.Lock) sectionKeys {
	k := l.Key()
	return sectionKeys{
		inside:      k + ":inside",
		overlaps:    k + ":overlaps",
		completed:   k + ":completed",
		lastToken:   k + ":last-token",
		regressions: k + ":regressions",
		lastHolder:  k + ":last-holder",
		switches:    k + ":switches",
	}
}

func (k sectionKeys) all() []string {
	return []string{k.inside, k.overlaps, k.completed, k.lastToken, k.regressions, k.lastHolder, k.switches}
}

// childLock connects to the parent's Redis and returns the lock of that name on it, on a
// Client made with opts.
func childLock(env *redistest.ChildEnv, name string, opts ...aqs.Option) (redis.UniversalClient, *reentrant.Lock, error) {
	rdb, c, err := env.Client(opts...)
	if err != nil {
		return nil, nil, err
	}
	l, err := reentrant.New(c, name)
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	return rdb, l, nil
}

// contend is roleContend.
func contend(env *redistest.ChildEnv, p contendParams) error {
	rdb, l, err := childLock(env, p.Lock)
	if err != nil {
		return err
	}
	defer rdb.Close()
	keys := keysOf(l)
	env.Println(lineReady)
	if err := env.WaitFor(lineGo, time.Minute); err != nil {
		return err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		done int
	)
	for g := 0; g < p.Goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < p.Rounds; i++ {
				if err := criticalSection(rdb, l, keys); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("goroutine %d round %d: %w", g, i, err))
					mu.Unlock()
					return
				}
				mu.Lock()
				done++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	env.Println(lineDone, done)
	return errors.Join(errs...)
}

// criticalSection takes the lock and, holding it, keeps the books of sectionKeys. Every
// command goes to Redis in turn, so the time between entering (INCR) and leaving (DECR) spans
// several round trips in which a second holder would be seen. The Redis calls run under the
// held context, so a lost lease shows up as an error instead of unprotected work.
func criticalSection(rdb redis.UniversalClient, l *reentrant.Lock, keys sectionKeys) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	held, err := l.Lock(ctx)
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	defer func() {
		if uerr := l.Unlock(held); uerr != nil && err == nil {
			err = fmt.Errorf("unlock: %w", uerr)
		}
	}()
	token, err := l.Token(held)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	n, err := rdb.Incr(held, keys.inside).Result()
	if err != nil {
		return err
	}
	if n != 1 {
		if err := rdb.Incr(held, keys.overlaps).Err(); err != nil {
			return err
		}
	}
	prev, err := rdb.SetArgs(held, keys.lastToken, token, redis.SetArgs{Get: true}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	if p, perr := strconv.ParseInt(prev, 10, 64); perr == nil && p >= token {
		if err := rdb.Incr(held, keys.regressions).Err(); err != nil {
			return err
		}
	}
	pid := strconv.Itoa(os.Getpid())
	prevPID, err := rdb.SetArgs(held, keys.lastHolder, pid, redis.SetArgs{Get: true}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	if prevPID != "" && prevPID != pid {
		if err := rdb.Incr(held, keys.switches).Err(); err != nil {
			return err
		}
	}
	if err := rdb.Decr(held, keys.inside).Err(); err != nil {
		return err
	}
	return rdb.Incr(held, keys.completed).Err()
}

// holdUntilKilled is roleHold. It never returns on success: the parent kills the process.
func holdUntilKilled(env *redistest.ChildEnv, p holdParams) error {
	rdb, l, err := childLock(env, p.Lock, aqs.WithWatchdogTimeout(p.Watchdog))
	if err != nil {
		return err
	}
	defer rdb.Close()
	held, ok, err := l.TryLock(context.Background(), aqs.WithWait(30*time.Second))
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	if !ok {
		return errors.New("lock: still taken after 30s")
	}
	inner, err := l.Lock(held)
	if err != nil {
		return fmt.Errorf("re-enter: %w", err)
	}
	token, _ := l.Token(inner)
	env.Println(lineHeld, token)
	<-inner.Done() // the kill comes first; this returns only if the lease was lost
	return fmt.Errorf("hold ended before the kill: %w", context.Cause(inner))
}
