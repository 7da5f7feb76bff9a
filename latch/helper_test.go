package latch_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/latch"
)

// Helper processes.
//
// The multi-process tests (process_test.go) run this test binary again with
// redistest.StartChild, helperEnv set to a role. TestMain sees the variable and calls
// runHelperProcess instead of running tests. A child talks back with lines on stdout and its
// exit code (see redistest's Exit codes); the reason of a failure is on stderr. A child exits
// as soon as its stdin reaches EOF, holding whatever it holds, as a crash would.

const (
	helperEnv        = "AQS_LATCH_HELPER"  // the role: roleWait or roleCount
	helperAddrEnv    = "AQS_LATCH_ADDR"    // single node "host:port"
	helperClusterEnv = "AQS_LATCH_CLUSTER" // cluster masters, comma-separated; instead of the address
	helperNameEnv    = "AQS_LATCH_NAME"    // the latch's name
)

// Roles.
const (
	// roleWait awaits the latch: it prints lineWaiting once its Await is registered with its
	// Client's hub (any CountDown after that reaches it), then "lineDone <error or ok>".
	roleWait = "wait"
	// roleCount prints lineReady once connected, waits for lineGo on stdin, counts the latch
	// down once and prints lineCounted.
	roleCount = "count"
)

// The protocol lines.
const (
	lineWaiting = "waiting"
	lineReady   = "ready"
	lineGo      = "go"
	lineCounted = "counted"
	lineDone    = "done"
)

// runHelperProcess runs the role named by helperEnv and returns the exit code.
func runHelperProcess() int {
	role := os.Getenv(helperEnv)
	start := redistest.WaitForLine(lineGo)
	rdb, c, err := redistest.ChildClient(helperAddrEnv, helperClusterEnv, "")
	if err != nil {
		fmt.Fprintf(os.Stderr, "helper %s: %v\n", role, err)
		return redistest.ExitBadEnv
	}
	defer rdb.Close()
	l, err := latch.New(c, os.Getenv(helperNameEnv), latch.WithExpiry(time.Minute))
	if err != nil {
		fmt.Fprintf(os.Stderr, "helper %s: %v\n", role, err)
		return redistest.ExitBadEnv
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	switch role {
	case roleWait:
		out := make(chan error, 1)
		go func() { out <- l.Await(ctx) }()
		hub := core.RuntimeOf(c).Hub
		for hub.Waiters() == 0 {
			select {
			case err = <-out:
				fmt.Printf("%s %v\n", lineDone, err) // returned before it waited
				return redistest.ExitFailed
			case <-time.After(time.Millisecond): // the hub has no notification of a registration
			}
		}
		fmt.Println(lineWaiting)
		err = <-out
		if err != nil {
			fmt.Printf("%s %v\n", lineDone, err)
			return redistest.ExitFailed
		}
		fmt.Printf("%s ok\n", lineDone)
	case roleCount:
		fmt.Println(lineReady)
		select {
		case <-start:
		case <-ctx.Done():
			err = errors.New("no go from the parent")
		}
		if err == nil {
			err = l.CountDown(ctx)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "helper %s (pid %d): %v\n", role, os.Getpid(), err)
			return redistest.ExitFailed
		}
		fmt.Println(lineCounted)
	default:
		fmt.Fprintf(os.Stderr, "unknown role %q\n", role)
		return redistest.ExitBadEnv
	}
	return redistest.ExitOK
}
