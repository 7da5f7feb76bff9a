package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
)

// Worker processes: the child side.
//
// Every scenario of the demo runs its buyers, readers, writer, pool workers or restocker in worker
// processes: aqs run again (see workerExec), with demoWorkerEnv holding a workerSpec in JSON.
// main, and the tests' TestMain, look for that variable before anything else and call
// demoWorkerMain instead of the command line, so a worker never parses flags, never starts a
// redis-server and, in a test binary, never runs a test.
//
// The protocol is lines of words. The worker prints "ready" on stdout once its Client is up,
// waits for "go" on stdin, then prints the events of its role (see each scenario's file) and
// ends with a "done" line and exit status 0. "stop" on stdin asks a role that runs until told
// (readers, pool workers) to finish what it is doing and end, and buyers of the inventory
// that wait for stock that will not come to give up. A worker exits at once, holding
// whatever it holds, when its stdin reaches EOF: the parent is gone, or gave up on it; so no
// worker outlives aqs, even one killed outright (on Linux they also get a parent-death
// signal). Why a worker failed goes to its stderr, which the parent shows.

// demoWorkerEnv names the environment variable that makes a process a demo worker.
const demoWorkerEnv = "AQS_DEMO_WORKER"

// Exit statuses of a worker process.
const (
	workerOK         = 0
	workerFailed     = 1
	workerBadSpec    = 2
	workerParentGone = 3 // stdin reached EOF
)

// The protocol's words shared by every role.
const (
	lineReady = "ready" // worker: connected, scripts loaded
	lineGo    = "go"    // parent: start
	lineStop  = "stop"  // parent: finish and end
	lineDone  = "done"  // worker: the role is over; its figures follow
)

// workerSpec is everything a worker process is told: its role and the sizes it needs.
type workerSpec struct {
	Role       string        `json:"role"`
	Redis      string        `json:"redis"` // address, as --redis takes it
	Name       string        `json:"name"`  // the primitive's name
	Proc       int           `json:"proc"`  // the process's number, from 1
	Goroutines int           `json:"goroutines"`
	Lease      time.Duration `json:"lease"` // the Client's watchdog timeout

	Tickets int           `json:"tickets,omitempty"`  // buyers: the tickets on sale
	Writes  int           `json:"writes,omitempty"`   // writer: how many writes
	JobTime time.Duration `json:"job_time,omitempty"` // pool: a job's typical length
	Metrics bool          `json:"metrics,omitempty"`  // observe the Client (see demo_metrics.go)
	Items   int           `json:"items,omitempty"`    // shoppers: items each; restocker: items in all
	Batch   int           `json:"batch,omitempty"`    // restocker: the largest batch
	Carts   int           `json:"carts,omitempty"`    // carts: carts each
	SKUs    int           `json:"skus,omitempty"`     // carts: the SKUs of the store
	Stock   int           `json:"stock,omitempty"`    // carts: the stock each SKU started with
	// Deadline is, for carts, how long a cart's Lock may wait before its buyer counts as stuck.
	Deadline time.Duration `json:"deadline,omitempty"`
}

// The roles, each implemented in its scenario's file.
var roles = map[string]func(ctx context.Context, w *worker) error{
	roleBuyers:    runBuyers,
	roleReaders:   runReaders,
	roleWriter:    runWriter,
	rolePool:      runPoolWorkers,
	roleShoppers:  runShoppers,
	roleRestocker: runRestocker,
	roleCarts:     runCartBuyers,
	roleCandidate: runCandidate,
}

// workerExec is how the demo starts a worker process: path with args, demoWorkerEnv added to
// this process's environment. The zero value runs os.Executable() with no arguments; the tests
// run their own test binary, whose TestMain calls demoWorkerMain.
type workerExec struct {
	path string
	args []string
}

// command returns the command that runs spec's worker.
func (x workerExec) command(spec workerSpec) (*exec.Cmd, error) {
	path := x.path
	if path == "" {
		p, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding the aqs binary to run workers: %w", err)
		}
		path = p
	}
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, x.args...)
	cmd.Env = append(os.Environ(), demoWorkerEnv+"="+string(js))
	return cmd, nil
}

// worker is what a role gets: its spec, its own Redis client and aqs.Client, its output, and
// the stop request.
type worker struct {
	spec   workerSpec
	rdb    *redis.Client
	client *aqs.Client
	out    *lineWriter
	// stop is done once the parent sent "stop" (or, in a test of the role, when it ends).
	stop context.Context
}

// demoWorkerMain runs a worker process described by spec (demoWorkerEnv's value) and returns
// its exit status.
func demoWorkerMain(spec string) int {
	var s workerSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintf(os.Stderr, "aqs worker: bad %s: %v\n", demoWorkerEnv, err)
		return workerBadSpec
	}
	role, ok := roles[s.Role]
	if !ok {
		fmt.Fprintf(os.Stderr, "aqs worker: unknown role %q\n", s.Role)
		return workerBadSpec
	}
	opts, err := parseRedisAddr(s.Redis)
	if err != nil {
		fmt.Fprintf(os.Stderr, "aqs worker: %v\n", err)
		return workerBadSpec
	}
	begin, stop := watchStdin(os.Stdin)
	if err := runWorker(s, role, opts, &lineWriter{w: os.Stdout}, begin, stop); err != nil {
		fmt.Fprintf(os.Stderr, "aqs worker %d (%s, pid %d): %v\n", s.Proc, s.Role, os.Getpid(), err)
		return workerFailed
	}
	return workerOK
}

// runWorker connects, says it is ready, waits for begin, and runs the role until it ends.
func runWorker(s workerSpec, role func(context.Context, *worker) error, opts *redis.Options, out *lineWriter,
	begin <-chan struct{}, stop context.Context) error {
	ctx := context.Background()
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	copts := []aqs.Option{aqs.WithWatchdogTimeout(s.Lease)}
	var metrics *demoMetrics
	if s.Metrics {
		metrics = newDemoMetrics()
		copts = append(copts, aqs.WithObserver(metrics))
	}
	client, err := aqs.New(ctx, rdb, copts...)
	if err != nil {
		return fmt.Errorf("connecting to Redis at %s: %w", s.Redis, err)
	}
	defer client.Close()
	out.println(lineReady)
	<-begin
	if err := role(ctx, &worker{spec: s, rdb: rdb, client: client, out: out, stop: stop}); err != nil {
		return err
	}
	if metrics != nil {
		out.println(metrics.words()...) // after "done": the fleet takes it in (see demo_metrics.go)
	}
	return nil
}

// watchStdin reads the parent's lines: begin is closed by "go", stop is cancelled by "stop".
// At EOF the process exits on the spot with workerParentGone (see "Worker processes" above).
func watchStdin(r io.Reader) (begin <-chan struct{}, stop context.Context) {
	b := make(chan struct{})
	stop, cancel := context.WithCancel(context.Background())
	go func() {
		var once sync.Once
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			switch sc.Text() {
			case lineGo:
				once.Do(func() { close(b) })
			case lineStop:
				cancel()
			}
		}
		os.Exit(workerParentGone)
	}()
	return b, stop
}

// lineWriter writes whole lines for concurrent goroutines: each line in one Write, so the
// lines of different goroutines never mix.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// println writes the words as one line.
func (l *lineWriter) println(words ...any) {
	s := fmt.Sprintln(words...)
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(l.w, s) // a broken pipe means the parent is gone: stdin's EOF ends us
}

// goroutineLabel names goroutine g of process p in the events: "p2/b3" for buyer 3 of process 2.
func goroutineLabel(p int, kind string, g int) string {
	return fmt.Sprintf("p%d/%s%d", p, kind, g)
}

// lineWords splits a line into its words.
func lineWords(line string) []string { return strings.Fields(line) }
