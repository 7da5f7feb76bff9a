package latch_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/latch"
)

// Roles of the child processes of the multi-process tests (process_test.go), run as
// redistest.RegisterRole describes: the parameters come from the parent, the lines below go
// between the two, and the child's exit status and stderr say how its role ended.

var (
	// roleWait awaits the latch: it prints lineWaiting once its Await is registered with its
	// Client's hub (any CountDown after that reaches it), then "lineDone <error or ok>".
	roleWait = redistest.RegisterRole("wait", awaitLatch)
	// roleCount prints lineReady once connected, waits for lineGo on stdin, counts the latch
	// down once and prints lineCounted.
	roleCount = redistest.RegisterRole("count", countDownOnce)
)

// latchParams are the parameters of either role.
type latchParams struct {
	Name string // the latch's name
}

// The protocol lines.
const (
	lineWaiting = "waiting"
	lineReady   = "ready"
	lineGo      = "go"
	lineCounted = "counted"
	lineDone    = "done"
)

// childLatch connects to the parent's Redis and returns the latch of p's name on it.
func childLatch(env *redistest.ChildEnv, p latchParams) (redis.UniversalClient, *aqs.Client, *latch.Latch, error) {
	rdb, c, err := env.Client()
	if err != nil {
		return nil, nil, nil, err
	}
	l, err := latch.New(c, p.Name, latch.WithExpiry(time.Minute))
	if err != nil {
		rdb.Close()
		return nil, nil, nil, err
	}
	return rdb, c, l, nil
}

// awaitLatch is roleWait.
func awaitLatch(env *redistest.ChildEnv, p latchParams) error {
	rdb, c, l, err := childLatch(env, p)
	if err != nil {
		return err
	}
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := make(chan error, 1)
	go func() { out <- l.Await(ctx) }()
	hub := core.RuntimeOf(c).Hub
	for hub.Waiters() == 0 {
		select {
		case err = <-out:
			env.Println(lineDone, err)
			return fmt.Errorf("Await returned before it waited: %w", err)
		case <-time.After(time.Millisecond): // the hub has no notification of a registration
		}
	}
	env.Println(lineWaiting)
	if err = <-out; err != nil {
		env.Println(lineDone, err)
		return err
	}
	env.Println(lineDone, "ok")
	return nil
}

// countDownOnce is roleCount.
func countDownOnce(env *redistest.ChildEnv, p latchParams) error {
	rdb, _, l, err := childLatch(env, p)
	if err != nil {
		return err
	}
	defer rdb.Close()
	env.Println(lineReady)
	if err := env.WaitFor(lineGo, time.Minute); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.CountDown(ctx); err != nil {
		return err
	}
	env.Println(lineCounted)
	return nil
}
