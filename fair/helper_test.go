package fair_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// Helper processes.
//
// The multi-process tests (process_test.go) run this test binary again with
// redistest.StartChild, helperEnv set. TestMain sees the variable and calls runHelperProcess
// instead of running tests, so a child never starts a redis-server of its own and never runs a
// test. A child is a process of waiters on one fair lock, one aqs Client shared by all of
// them, each waiter a goroutine:
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
// exit code is 0 when every waiter succeeded, 1 when one failed, 2 for a bad environment, 3
// when stdin reached EOF first: the parent went away, or is done with us, and the process
// exits on the spot, holding whatever it holds, as a crash would (redistest.StartChild relies
// on that exit so that no child outlives the test binary).

const (
	helperEnv        = "AQS_FAIR_HELPER"         // set (to "waiters") in a child
	helperAddrEnv    = "AQS_FAIR_ADDR"           // the single node's "host:port"
	helperLockEnv    = "AQS_FAIR_LOCK"           // the lock's name
	helperTimeoutEnv = "AQS_FAIR_WAITER_TIMEOUT" // fair.WithWaiterTimeout (time.ParseDuration)
)

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

// runHelperProcess runs a helper process and returns its exit code.
func runHelperProcess() int {
	if os.Getenv(helperEnv) == roleContend {
		return runContender()
	}
	if role := os.Getenv(helperEnv); role == roleCondWaiter || role == roleSignaller {
		return runCondHelper(role) // cond_helper_test.go
	}
	rdb, l, err := helperLock()
	if err != nil {
		fmt.Fprintf(os.Stderr, "helper (pid %d): %v\n", os.Getpid(), err)
		return redistest.ExitBadEnv
	}
	defer rdb.Close()
	out := &lineWriter{}
	out.println(lineReady)

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed bool
	)
	for cmd := range redistest.StdinLines() {
		word, arg, _ := strings.Cut(cmd, " ")
		switch word {
		case lineStart:
			k, err := strconv.Atoi(arg)
			if err != nil {
				fmt.Fprintf(os.Stderr, "helper (pid %d): bad command %q\n", os.Getpid(), cmd)
				return redistest.ExitFailed
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := waiter(rdb, l, k, out); err != nil {
					fmt.Fprintf(os.Stderr, "helper (pid %d): waiter %d: %v\n", os.Getpid(), k, err)
					out.println(lineFailed, k, strings.ReplaceAll(err.Error(), "\n", " "))
					mu.Lock()
					failed = true
					mu.Unlock()
				}
			}()
		case lineEnd:
			wg.Wait()
			if failed {
				return redistest.ExitFailed
			}
			return redistest.ExitOK
		default:
			fmt.Fprintf(os.Stderr, "helper (pid %d): unknown command %q\n", os.Getpid(), cmd)
			return redistest.ExitFailed
		}
	}
	panic("unreachable: redistest.StdinLines exits the process at EOF")
}

// helperLock connects to the Redis named in the environment and returns the fair lock on it,
// on a Client that logs to stderr. The Client is never closed: the process ends with it, and
// a kill must find it running.
func helperLock() (*redis.Client, *fair.Lock, error) {
	addr := os.Getenv(helperAddrEnv)
	if addr == "" {
		return nil, nil, fmt.Errorf("%s is not set", helperAddrEnv)
	}
	timeout, err := time.ParseDuration(os.Getenv(helperTimeoutEnv))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", helperTimeoutEnv, err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := aqs.New(ctx, rdb, aqs.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))))
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	l, err := fair.New(c, os.Getenv(helperLockEnv), fair.WithWaiterTimeout(timeout))
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	return rdb, l, nil
}

// waiter is waiter k: it waits for the lock, appends k to orderKey under it, and unlocks. The
// bound on the wait only keeps a stuck child from living on; the parent's bounds are shorter.
func waiter(rdb *redis.Client, l *fair.Lock, k int, out *lineWriter) (err error) {
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
	out.println(lineGot, k, got.UnixNano())
	unlocking := time.Now()
	if err := l.Unlock(held); err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	out.println(lineReleased, k, unlocking.UnixNano())
	return nil
}

// lineWriter writes whole lines to stdout from many goroutines.
type lineWriter struct{ mu sync.Mutex }

func (w *lineWriter) println(a ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Println(a...)
}

// roleContend is the helper role of the multi-process benchmark (bench_test.go): goroutines
// that take and release the lock as fast as they can.
//
//	child:  "ready"
//	parent: "go <goroutines> <duration in ns>"   (a round; as many as the parent likes)
//	child:  "counts <n1> <n2> …"   acquisitions per goroutine, once the duration is over
const roleContend = "contend"

func runContender() int {
	rdb, l, err := helperLock()
	if err != nil {
		fmt.Fprintf(os.Stderr, "contender (pid %d): %v\n", os.Getpid(), err)
		return redistest.ExitBadEnv
	}
	defer rdb.Close()
	out := &lineWriter{}
	out.println(lineReady)
	for cmd := range redistest.StdinLines() {
		var goroutines int
		var span time.Duration
		if _, err := fmt.Sscanf(cmd, "go %d %d", &goroutines, &span); err != nil {
			fmt.Fprintf(os.Stderr, "contender (pid %d): bad command %q: %v\n", os.Getpid(), cmd, err)
			return redistest.ExitBadEnv
		}
		counts, err := contend(l, goroutines, span)
		if err != nil {
			fmt.Fprintf(os.Stderr, "contender (pid %d): %v\n", os.Getpid(), err)
			return redistest.ExitFailed
		}
		words := []any{"counts"}
		for _, n := range counts {
			words = append(words, n)
		}
		out.println(words...)
	}
	panic("unreachable: redistest.StdinLines exits the process at EOF")
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
