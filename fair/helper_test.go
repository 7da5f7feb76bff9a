package fair_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// Roles of the child processes.
//
// The multi-process tests (process_test.go) run this test binary again in roleWaiters, as
// redistest.RegisterRole describes. A child is a process of waiters on one fair lock, one aqs
// Client shared by all of them, each waiter a goroutine:
//
//	child:  "ready"                    connected, scripts loaded
//	parent: "start <k>"                start waiter k in a new goroutine
//	child:  "got <k> <unix ns>"        waiter k acquired the lock (and appended k to orderKey)
//	child:  "released <k> <unix ns>"   waiter k unlocked; the time is when it called Unlock
//	child:  "failed <k> <error>"       waiter k failed (also on stderr)
//	parent: "end"                      no more waiters: exit once the started ones are done
//
// The times are the child's wall clock, comparable between processes on one machine; a release
// cannot reach Redis before its time, so a delay measured from it is never too short. The
// child exits with redistest.ExitOK when every waiter succeeded and redistest.ExitFailed when
// one failed; at EOF on stdin it exits on the spot, holding whatever it holds, as a crash
// would.

var (
	// roleWaiters is the process of waiters above.
	roleWaiters = redistest.RegisterRole("waiters", runWaiters)
	// roleContend is the role of the multi-process benchmark (bench_test.go): goroutines
	// that take and release the lock as fast as they can.
	//
	//	child:  "ready"
	//	parent: "go <goroutines> <duration in ns>"   (a round; as many as the parent likes)
	//	child:  "counts <n1> <n2> …"   acquisitions per goroutine, once the duration is over
	roleContend = redistest.RegisterRole("contend", runContender)
)

// lockParams are the parameters of every role of this package: the lock its child opens.
type lockParams struct {
	Lock          string        // the lock's name
	WaiterTimeout time.Duration // fair.WithWaiterTimeout
	Watchdog      time.Duration // the Client's watchdog timeout; 0 for the default
}

// The protocol's words.
const (
	lineReady    = "ready"
	lineStart    = "start"
	lineGot      = "got"
	lineReleased = "released"
	lineFailed   = "failed"
	lineEnd      = "end"
)

// orderKey is the list to which each waiter appends its number once it holds the lock. It
// starts with the lock key, so it lies in the lock's hash slot.
func orderKey(l *fair.Lock) string { return l.Key() + ":order" }

// runWaiters is roleWaiters.
func runWaiters(env *redistest.ChildEnv, p lockParams) error {
	rdb, l, err := childLock(env, p)
	if err != nil {
		return err
	}
	defer rdb.Close()
	env.Println(lineReady)

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed bool
	)
	for cmd := range env.Lines() {
		word, arg, _ := strings.Cut(cmd, " ")
		switch word {
		case lineStart:
			k, err := strconv.Atoi(arg)
			if err != nil {
				return fmt.Errorf("bad command %q", cmd)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := waiter(env, rdb, l, k); err != nil {
					fmt.Fprintf(os.Stderr, "waiters (pid %d): waiter %d: %v\n", os.Getpid(), k, err)
					env.Println(lineFailed, k, strings.ReplaceAll(err.Error(), "\n", " "))
					mu.Lock()
					failed = true
					mu.Unlock()
				}
			}()
		case lineEnd:
			wg.Wait()
			if failed {
				return errors.New("a waiter failed")
			}
			return nil
		default:
			return fmt.Errorf("unknown command %q", cmd)
		}
	}
	panic("unreachable: the parent's lines end only with the process")
}

// childLock connects to the parent's Redis and returns the fair lock of p on it.
func childLock(env *redistest.ChildEnv, p lockParams) (redis.UniversalClient, *fair.Lock, error) {
	var opts []aqs.Option
	if p.Watchdog > 0 {
		opts = append(opts, aqs.WithWatchdogTimeout(p.Watchdog))
	}
	rdb, c, err := env.Client(opts...)
	if err != nil {
		return nil, nil, err
	}
	l, err := fair.New(c, p.Lock, fair.WithWaiterTimeout(p.WaiterTimeout))
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	return rdb, l, nil
}

// waiter is waiter k: it waits for the lock, appends k to orderKey under it, and unlocks. The
// bound on the wait only keeps a stuck child from living on; the parent's bounds are shorter.
func waiter(env *redistest.ChildEnv, rdb redis.UniversalClient, l *fair.Lock, k int) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	held, err := l.Lock(ctx)
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	got := time.Now()
	if err := rdb.RPush(held, orderKey(l), k).Err(); err != nil {
		return errors.Join(fmt.Errorf("rpush: %w", err), l.Unlock(held))
	}
	env.Println(lineGot, k, got.UnixNano())
	unlocking := time.Now()
	if err := l.Unlock(held); err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	env.Println(lineReleased, k, unlocking.UnixNano())
	return nil
}

// runContender is roleContend.
func runContender(env *redistest.ChildEnv, p lockParams) error {
	rdb, l, err := childLock(env, p)
	if err != nil {
		return err
	}
	defer rdb.Close()
	env.Println(lineReady)
	for cmd := range env.Lines() {
		var goroutines int
		var span time.Duration
		if _, err := fmt.Sscanf(cmd, "go %d %d", &goroutines, &span); err != nil {
			return fmt.Errorf("bad command %q: %w", cmd, err)
		}
		counts, err := contend(l, goroutines, span)
		if err != nil {
			return err
		}
		words := []any{"counts"}
		for _, n := range counts {
			words = append(words, n)
		}
		env.Println(words...)
	}
	panic("unreachable: the parent's lines end only with the process")
}

// contend runs goroutines that take and release l as fast as they can for span, and returns
// each one's count of acquisitions.
func contend(l *fair.Lock, goroutines int, span time.Duration) ([]int, error) {
	counts := make([]int, goroutines)
	stop := time.Now().Add(span)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed error
	for g := range counts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				h, err := l.Lock(context.Background())
				if err == nil {
					err = l.Unlock(h)
				}
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
					return
				}
				counts[g]++
			}
		}()
	}
	wg.Wait()
	return counts, failed
}
