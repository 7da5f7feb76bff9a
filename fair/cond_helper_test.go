package fair_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// Roles of the Condition's kill tests (cond_process_test.go), run as those of helper_test.go
// are, with the same parameters: the lock, its waiter timeout, and the watchdog timeout. One
// goroutine, one condition "c" of the lock:
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
// Either exits with redistest.ExitOK after its last line ("released", "signalled"), and
// redistest.ExitFailed on an error (said on stderr); the parent kills it mid-way. Both run
// runCond, which answers whichever of the lines comes.

var (
	roleCondWaiter = redistest.RegisterRole("condwaiter", runCond)
	roleSignaller  = redistest.RegisterRole("signaller", runCond)
)

// stockKey is the list of items the producers add and the consumers take, in the lock's slot.
func stockKey(l *fair.Lock) string { return l.Key() + ":stock" }

// runCond is roleCondWaiter and roleSignaller.
func runCond(env *redistest.ChildEnv, p lockParams) error {
	rdb, l, err := childLock(env, p)
	if err != nil {
		return err
	}
	defer rdb.Close()
	cond, err := l.NewCondition("c")
	if err != nil {
		return err
	}
	env.Println(lineReady)
	ctx := context.Background()
	var held context.Context
	for cmd := range env.Lines() {
		switch cmd {
		case "wait":
			if held, err = l.Lock(ctx); err == nil {
				held, err = consume(rdb, l, cond, held)
			}
			if err == nil {
				env.Println("woken")
				err = l.Unlock(held)
			}
			if err == nil {
				env.Println("released")
				return nil
			}
		case "stock":
			if held, err = l.Lock(ctx); err == nil {
				err = rdb.RPush(held, stockKey(l), os.Getpid()).Err()
			}
			if err == nil {
				env.Println("holding")
			}
		case "signal":
			if _, err = cond.Signal(ctx); err == nil {
				err = l.Unlock(held)
			}
			if err == nil {
				env.Println("signalled")
				return nil
			}
		default:
			err = fmt.Errorf("unknown command %q", cmd)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", cmd, err)
		}
	}
	panic("unreachable: the parent's lines end only with the process")
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
