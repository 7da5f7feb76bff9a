package redistest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
)

// What a child process running a role (roles.go) has on its side.

// Exit codes of a child process (see RegisterRole).
const (
	ExitOK         = 0 // the role returned nil
	ExitFailed     = 1 // the role returned an error, written to stderr
	ExitBadEnv     = 2 // the spec, the role's name or its parameters could not be used
	ExitParentGone = 3 // stdin reached EOF: the parent is gone or done with the child
)

// ChildEnv is what a child process running a role (see RegisterRole) has of its parent:
// where Redis is, the parent's lines, and stdout. Its methods are safe for concurrent use.
type ChildEnv struct {
	// Role is the name of the role the child runs.
	Role string
	// Target is where the parent's Redis is.
	Target Target

	lines chan string // the parent's stdin lines, never closed
	outMu sync.Mutex  // one line at a time on stdout
}

// newChildEnv returns the ChildEnv of spec and starts reading stdin: at EOF the process exits
// on the spot with ExitParentGone, holding whatever it holds, as a crash would, whether the
// role reads the parent's lines or not.
func newChildEnv(spec childSpec) *ChildEnv {
	e := &ChildEnv{Role: spec.Role, Target: spec.Target, lines: make(chan string)}
	read := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			read <- sc.Text()
		}
		os.Exit(ExitParentGone)
	}()
	go func() { // queues the lines the role has not received yet, so that the reader never blocks
		var queue []string
		for {
			var out chan<- string
			var next string
			if len(queue) > 0 {
				out, next = e.lines, queue[0]
			}
			select {
			case line := <-read:
				queue = append(queue, line)
			case out <- next:
				queue = queue[1:]
			}
		}
	}()
	return e
}

// Lines returns the parent's lines (Child.Send), in the order sent. Each line is received
// once, so a role reads them in one place. The channel is never closed: at EOF the process
// exits.
func (e *ChildEnv) Lines() <-chan string { return e.lines }

// WaitFor waits, at most within, for the parent's next line, which must be want; another line
// is an error, since the parent and the child disagree on the protocol.
func (e *ChildEnv) WaitFor(want string, within time.Duration) error {
	select {
	case line := <-e.lines:
		if line != want {
			return fmt.Errorf("the parent sent %q, want %q", line, want)
		}
		return nil
	case <-time.After(within):
		return fmt.Errorf("no %q from the parent within %v", want, within)
	}
}

// Println writes one line for the parent (Child.Expect) on stdout, as fmt.Println formats
// a; lines printed from several goroutines never interleave.
func (e *ChildEnv) Println(a ...any) {
	e.outMu.Lock()
	defer e.outMu.Unlock()
	fmt.Println(a...)
}

// Redis returns a new client of Target, for the role to close.
func (e *ChildEnv) Redis() (redis.UniversalClient, error) { return e.Target.client() }

// Client connects to Target and returns an aqs Client on it that logs to stderr, made with
// opts after that logger (a WithLogger among them wins). A role need not close the Client:
// the process ends with it, and a kill must find it running. On error nothing is left open.
func (e *ChildEnv) Client(opts ...aqs.Option) (redis.UniversalClient, *aqs.Client, error) {
	rdb, err := e.Redis()
	if err != nil {
		return nil, nil, err
	}
	opts = append([]aqs.Option{aqs.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil)))}, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := aqs.New(ctx, rdb, opts...)
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	return rdb, c, nil
}

// runChild runs the role that the spec raw names (see RegisterRole) and returns the exit code.
func runChild(raw string) int {
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "redistest: child (pid %d): %s: %v\n", os.Getpid(), childSpecEnv, err)
		return ExitBadEnv
	}
	run, err := lookupRole(spec)
	if err != nil {
		fmt.Fprintf(os.Stderr, "redistest: child (pid %d): %v\n", os.Getpid(), err)
		return ExitBadEnv
	}
	if err := run(newChildEnv(spec)); err != nil {
		fmt.Fprintf(os.Stderr, "%s (pid %d): %v\n", spec.Role, os.Getpid(), err)
		return ExitFailed
	}
	return ExitOK
}
