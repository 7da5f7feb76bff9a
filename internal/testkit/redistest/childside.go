package redistest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
)

// What a child process started by StartChild uses on its side.

// Exit codes of a child process.
const (
	ExitOK         = 0
	ExitFailed     = 1
	ExitBadEnv     = 2
	ExitParentGone = 3 // stdin reached EOF: the parent is gone or done with the child
)

// StdinLines returns the parent's lines as they come. At EOF the process exits on the spot
// with ExitParentGone, holding whatever it holds, as a crash would: no child outlives the test
// binary (see StartChild).
func StdinLines() <-chan string {
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
		os.Exit(ExitParentGone)
	}()
	return lines
}

// WaitForLine returns a channel that is closed when the parent sends the line want; other
// lines are ignored. At EOF the process exits as with StdinLines.
func WaitForLine(want string) <-chan struct{} {
	got := make(chan struct{})
	lines := StdinLines()
	go func() {
		var once sync.Once
		for line := range lines {
			if line == want {
				once.Do(func() { close(got) })
			}
		}
	}()
	return got
}

// EnvInt reads a positive integer from the environment variable name.
func EnvInt(name string) (int, error) {
	n, err := strconv.Atoi(os.Getenv(name))
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q is not a positive integer", name, os.Getenv(name))
	}
	return n, nil
}

// ChildRedis returns a client of the Redis that the parent named in the environment: a
// cluster when clusterEnv holds its masters (comma-separated), else the single node in
// addrEnv ("host:port").
func ChildRedis(addrEnv, clusterEnv string) (redis.UniversalClient, error) {
	switch addrs, addr := os.Getenv(clusterEnv), os.Getenv(addrEnv); {
	case addrs != "":
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ",")}), nil
	case addr != "":
		return redis.NewClient(&redis.Options{Addr: addr}), nil
	default:
		return nil, fmt.Errorf("neither %s nor %s is set", addrEnv, clusterEnv)
	}
}

// ChildClient connects to the Redis named in the environment (see ChildRedis) and returns an
// aqs Client on it that logs to stderr, with the watchdog timeout in watchdogEnv when that is
// set (time.ParseDuration). The Client is never closed: the process ends with it, and a kill
// must find it running. On error nothing is left open.
func ChildClient(addrEnv, clusterEnv, watchdogEnv string) (redis.UniversalClient, *aqs.Client, error) {
	rdb, err := ChildRedis(addrEnv, clusterEnv)
	if err != nil {
		return nil, nil, err
	}
	opts := []aqs.Option{aqs.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil)))}
	if s := os.Getenv(watchdogEnv); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			rdb.Close()
			return nil, nil, fmt.Errorf("%s: %w", watchdogEnv, err)
		}
		opts = append(opts, aqs.WithWatchdogTimeout(d))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := aqs.New(ctx, rdb, opts...)
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	return rdb, c, nil
}

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
