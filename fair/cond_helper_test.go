package fair_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// Helper processes of the Condition's kill tests (cond_process_test.go), run as those of
// helper_test.go are, with helperEnv set to one of two roles, on the single node in
// helperAddrEnv, the lock in helperLockEnv with the waiter timeout in helperTimeoutEnv, and the
// watchdog timeout in condWatchdogEnv. One goroutine, one condition "c" of the lock:
//
// roleCondWaiter, a consumer:
//
//	child:  "ready"
//	parent: "wait"       lock, then wait on the condition
//	child:  "woken"      Wait returned: it holds the lock; it takes an item off stockKey and unlocks
//	child:  "released"
//
// roleSignaller, a producer:
//
//	child:  "ready"
//	parent: "stock"      lock, and add an item to stockKey
//	child:  "holding"
//	parent: "signal"     signal the condition, and unlock
//	child:  "signalled"
//
// Either exits 0 after its last line ("released", "signalled"), 1 on an error (said on stderr);
// the parent kills it mid-way.

const (
	roleCondWaiter  = "condwaiter"
	roleSignaller   = "signaller"
	condWatchdogEnv = "AQS_FAIR_WATCHDOG_TIMEOUT"
)

// stockKey is the list of items the producers add and the consumers take, in the lock's slot.
func stockKey(l *fair.Lock) string { return l.Key() + ":stock" }

func runCondHelper(role string) int {
	rdb, c, err := redistest.ChildClient(helperAddrEnv, "", condWatchdogEnv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s (pid %d): %v\n", role, os.Getpid(), err)
		return redistest.ExitBadEnv
	}
	defer rdb.Close()
	timeout, err := time.ParseDuration(os.Getenv(helperTimeoutEnv))
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s (pid %d): %s: %v\n", role, os.Getpid(), helperTimeoutEnv, err)
		return redistest.ExitBadEnv
	}
	l, err := fair.New(c, os.Getenv(helperLockEnv), fair.WithWaiterTimeout(timeout))
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s (pid %d): %v\n", role, os.Getpid(), err)
		return redistest.ExitBadEnv
	}
	cond, err := l.NewCondition("c")
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s (pid %d): %v\n", role, os.Getpid(), err)
		return redistest.ExitBadEnv
	}
	out := &lineWriter{}
	out.println(lineReady)
	ctx := context.Background()
	var held context.Context
	for cmd := range redistest.StdinLines() {
		switch cmd {
		case "wait":
			if held, err = l.Lock(ctx); err == nil {
				held, err = consume(rdb, l, cond, held)
			}
			if err == nil {
				out.println("woken")
				err = l.Unlock(held)
			}
			if err == nil {
				out.println("released")
				return redistest.ExitOK
			}
		case "stock":
			if held, err = l.Lock(ctx); err == nil {
				err = rdb.RPush(held, stockKey(l), os.Getpid()).Err()
			}
			if err == nil {
				out.println("holding")
			}
		case "signal":
			if _, err = cond.Signal(ctx); err == nil {
				err = l.Unlock(held)
			}
			if err == nil {
				out.println("signalled")
				return redistest.ExitOK
			}
		default:
			err = fmt.Errorf("unknown command %q", cmd)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s (pid %d): %s: %v\n", role, os.Getpid(), cmd, err)
			return redistest.ExitFailed
		}
	}
	panic("unreachable: redistest.StdinLines exits the process at EOF")
}

// consume waits on cond, with the hold of held, until the stock has an item, takes it, and
// returns the held context it holds the lock with: a consumer's loop on its predicate.
func consume(rdb redis.UniversalClient, l *fair.Lock, cond *fair.Condition, held context.Context) (context.Context, error) {
	for {
		item, err := rdb.LPop(held, stockKey(l)).Result()
		if err == nil && item != "" {
			return held, nil
		}
		if !errors.Is(err, redis.Nil) {
			return held, err
		}
		if held, err = cond.Wait(held); err != nil {
			return nil, err
		}
	}
}
