// Command aqs runs the synchronizers of github.com/redaqs/aqs from the shell.
//
// Usage:
//
//	aqs <command> [flags]
//
// Commands:
//
//	demo    run the five uses across processes: tickets (fair lock), config (read-write lock),
//	        pool (leased semaphore, a worker killed mid-job), inventory (carts with the
//	        multi-lock, then a Condition of the fair lock), leader (leader election, the
//	        leader killed)
//	inspect show what is at a name: aqs inspect NAME [--json]
//	top     a live view of every name under the prefix: aqs top [--once [--json]]
//	unlock  force the release of a name: aqs unlock --force NAME [--yes]
//	verify  check a deployment as the library relies on it, then drill it: aqs verify [--json]
//	run     run a command while holding a name: aqs run [flags] NAME -- command args...
//
// Every command reaches Redis at the address of its --redis flag (host:port, or a redis://,
// rediss:// or unix:// URL), else at $REDIS_URL. With neither, demo starts a throwaway
// redis-server from PATH (or the binary $REDIS_SERVER names, valkey-server for one) on a free
// loopback port and stops it when it exits.
// inspect, top, unlock, run and verify start none: they use an existing Redis, and also take a Redis
// Cluster (any node, or host:port,host:port,...) or Sentinel (redis://...?master_name=NAME).
//
// Exit status: 0 on success, 1 on failure, 2 on a usage error, 130 when interrupted. aqs
// verify exits with 1 when a finding fails (a guarantee does not hold on the deployment) and
// with 2 when it could not run (an unreachable server among them). aqs run
// exits with its command's status instead, and keeps its own statuses out of the range
// commands commonly use, as timeout(1) and env(1) do: 75 when NAME was not acquired within
// --wait, 76 when the hold was lost and the command stopped, 125 when aqs run itself failed
// (a bad command line among them), 126 when the command cannot be executed, 127 when it was
// not found, 128+N when a signal N killed the command or, while it waited for NAME, aqs run.
//
// Install it with go install github.com/redaqs/aqs/cmd/aqs@latest, or run it from a checkout
// with go run ./cmd/aqs. For example:
//
//	aqs demo                                   # about 15s, on a throwaway redis-server
//	aqs demo --redis localhost:6379 --scenario pool --permits 5
//	aqs inspect --redis localhost:6379 orders  # holders, leases, tokens, queue, permits
//	aqs top --redis localhost:6379             # every name, longest queues first; Ctrl-C ends it
//	aqs unlock --force --yes --redis localhost:6379 orders
//	aqs run --redis localhost:6379 nightly-report -- ./report.sh --since yesterday
//	aqs verify --redis redis://app:secret@redis.internal:6379 --prefix app
//
// demo runs each scenario across several OS processes (it runs itself again as workers) and
// ends with a table of its checks: every ticket sold once and buyers served in arrival order,
// no torn read of the configuration, at most K jobs at once while a worker is killed with
// SIGKILL mid-job and its permit comes back when its lease ends, and never two leaders while
// the leader is killed and a standby takes over. inspect only reads, in one atomic snapshot
// timed by the server's clock; --json prints it for scripts, in the shape aqs inspect -h
// describes. unlock --force releases whatever holds the name and lets its waiters in, after
// asking unless --yes is given; the former holders learn it at their next renewal. Both fail
// with a clear message on a wrong address, an empty name, or a key that no aqs primitive would
// write. top finds every name under the prefix with SCAN (never KEYS) and shows them as inspect
// reads them, longest queues first, with the Clients that hold or wait and how long ago each
// last renewed or heartbeat, those that stopped marked stale; it refreshes every second until
// Ctrl-C, or prints once with --once (--json for scripts). run holds the fair lock NAME (or,
// with --permits K, one of K permits of the leased semaphore NAME; with --elect, the
// leadership of the election NAME) while its command runs, gives the command the hold's
// fencing token in $AQS_FENCING_TOKEN, and stops the command before another holder can start
// should the hold be lost. verify checks the server's eviction policy, persistence, replicas
// and WAIT, topology, script and ACL permissions on the prefix, round trip and clock, then has
// two Clients contend on a scratch fair lock and semaphore, and explains each finding with its
// fix. Run aqs <command> -h for every flag.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// env is what a command may use of the process, so that tests can run commands in-process.
type env struct {
	stdin          io.Reader // the stdin of run's command (nil: none)
	stdout, stderr io.Writer
	getenv         func(string) string
	worker         workerExec // how demo starts its worker processes (the zero value: this executable)
	// signals relays the process's signals sig to c until stop is called: signal.Notify, for
	// the commands that handle signals themselves (run). nil relays none.
	signals func(c chan<- os.Signal, sig ...os.Signal) (stop func())
}

// command is one subcommand. run parses its own flags from args (the arguments after the
// command's name) with newFlagSet and parseFlags; it returns a *usageError for a bad command
// line.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env, args []string) error
	// ownSignals: the command handles SIGINT and SIGTERM itself (through env.signals), and
	// main does not cancel its ctx on them.
	ownSignals bool
	// usageStatus is the exit status of a usage error; 0 means 2.
	usageStatus int
}

// commands lists the subcommands in the order usage shows them.
var commands = []command{
	{name: "demo", summary: "run ticket sales, a shared config, a worker pool and inventory reservation across processes", run: runDemo},
	{name: "inspect", summary: "show what is at a name: holders, leases, tokens, queue, permits", run: runInspect},
	{name: "top", summary: "a live view of every name: kinds, holders, queues, leases, Clients gone stale", run: runTop},
	{name: "verify", summary: "check a deployment as the library relies on it (eviction, ACL, persistence, replicas...), then drill it", run: runVerify},
	{name: "unlock", summary: "force the release of a name whoever holds it (--force), waking its waiters", run: runUnlock},
	{name: "run", summary: "run a command while holding a name: a fair lock, a permit (--permits), a leadership (--elect)", run: runRun,
		ownSignals: true, usageStatus: exitRunFailed},
}

// lookup returns the command of the given name, or nil.
func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// exitStatus is an error that sets the exit status itself (aqs run's statuses). Its err, when
// not nil, is printed as the command's message.
type exitStatus struct {
	code int
	err  error
}

func (x *exitStatus) Error() string {
	if x.err == nil {
		return fmt.Sprintf("exit status %d", x.code)
	}
	return x.err.Error()
}

func (x *exitStatus) Unwrap() error { return x.err }

// usageError is an error in the command line: the exit status is then 2 (or the command's
// usageStatus).
type usageError struct {
	err      error
	reported bool // the flag package has printed it already, with the command's usage
}

func (u *usageError) Error() string { return u.err.Error() }
func (u *usageError) Unwrap() error { return u.err }

// usagef returns a *usageError.
func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

func main() {
	// go-redis logs every failed dial to stderr; the command's own error says it once.
	redis.SetLogger(quietLogger{})
	if spec, ok := os.LookupEnv(demoWorkerEnv); ok {
		os.Exit(demoWorkerMain(spec)) // a worker process of demo (demo_worker.go)
	}
	os.Exit(mainArgs(os.Args[1:]))
}

// mainArgs runs the command line args (without the program name) with the process's stdio,
// environment and signals, and returns the exit status.
func mainArgs(args []string) int {
	e := &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, signals: relaySignals}
	ctx := context.Background()
	var c *command
	if len(args) > 0 {
		c = lookup(args[0])
	}
	if c == nil || !c.ownSignals {
		// Ctrl-C and SIGTERM cancel ctx: commands stop their work, and run returns only after
		// the deferred clean-ups (a throwaway redis-server among them) have run.
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
	}
	return run(ctx, args, e)
}

// relaySignals is env.signals for the process.
func relaySignals(c chan<- os.Signal, sig ...os.Signal) (stop func()) {
	signal.Notify(c, sig...)
	return func() { signal.Stop(c) }
}

// quietLogger discards go-redis's log.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// run runs the command line args (without the program name) and returns the exit status.
func run(ctx context.Context, args []string, e *env) int {
	if len(args) == 0 {
		usage(e.stderr)
		return 2
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		usage(e.stdout)
		return 0
	}
	if c := lookup(name); c != nil {
		err := c.run(ctx, e, args[1:])
		var ue *usageError
		var xs *exitStatus
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.As(err, &ue):
			if !ue.reported {
				fmt.Fprintf(e.stderr, "aqs %s: %v (see aqs %s -h)\n", name, err, name)
			}
			if c.usageStatus != 0 {
				return c.usageStatus
			}
			return 2
		case errors.As(err, &xs):
			if xs.err != nil {
				fmt.Fprintf(e.stderr, "aqs %s: %v\n", name, xs.err)
			}
			return xs.code
		case ctx.Err() != nil:
			fmt.Fprintf(e.stderr, "aqs %s: interrupted\n", name)
			return 130
		default:
			fmt.Fprintf(e.stderr, "aqs %s: %v\n", name, err)
			return 1
		}
	}
	fmt.Fprintf(e.stderr, "aqs: unknown command %q\n\n", name)
	usage(e.stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: aqs <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "aqs <command> -h" for a command's flags.`)
}

// newFlagSet returns the flag set of a subcommand; its errors and help go to stderr, and
// Parse returns them (flag.ErrHelp for -h) instead of exiting.
func newFlagSet(e *env, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("aqs "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: aqs %s [flags]\n\n%s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args into fs and rejects positional arguments. It returns flag.ErrHelp
// for -h and a *usageError for anything else wrong.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &usageError{err: err, reported: true}
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}
