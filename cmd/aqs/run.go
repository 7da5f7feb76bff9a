package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/election"
	"github.com/redaqs/aqs/internal/core"
)

const runUsage = "run [flags] NAME -- command [args...]"

const runSynopsis = `Runs the command while holding NAME, and gives NAME up when the command exits:
the fair lock NAME (aqs runs waiting for it are served in arrival order), with
--permits K one of the K permits of the leased semaphore NAME, or with --elect the
leadership of the election NAME (candidates lead in arrival order; an election is
the fair lock of its name, so aqs run NAME and aqs run --elect NAME exclude each
other). The command's stdin, stdout and stderr are aqs run's; its environment is
aqs run's plus AQS_NAME (NAME) and AQS_FENCING_TOKEN (the lock's or the leader's
fencing token: greater than any earlier holder's) or AQS_PERMIT_ID (the permit's
id). Flags go before the "--".

The hold is a lease that aqs run renews every third of --lease: if aqs run dies,
NAME is free at most --lease later (on Linux its command then gets SIGKILL). If the
renewals fail until the lease can no longer be trusted, or the hold is broken (aqs
unlock --force), the command is stopped before another holder can start: SIGTERM to
its process group once less than the grace plus a margin (a tenth of the lease,
10ms to 1s) is left of the trusted lease, SIGKILL when only the margin is left; a
hold found broken gets SIGTERM at once and SIGKILL after the grace.

SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to aqs run are passed on to the command's
process group; aqs run then waits for the command to exit, gives NAME up and exits
with the command's status (processes the command leaves running in the background
are not waited for). Received while aqs run still waits for NAME, they end the wait,
and the command is not run. The command runs in a process group of its own,
so that a stop reaches every process it started, and a Ctrl-C in the terminal
reaches it once, through aqs run; in turn it cannot read from the terminal (it
would be stopped): give it its input from a file or a pipe. aqs run ignores Ctrl-Z
(SIGTSTP): stopped, it could not renew the lease while its command runs on.

Exit status:
  the command's status, 128+N when signal N killed the command
  75    NAME was not acquired within --wait
  76    the hold was lost or could no longer be trusted while the command ran
        (the command was stopped if it had not exited)
  125   aqs run itself failed: a bad command line, Redis unreachable or failing,
        NAME is another kind of primitive, --permits differs from its size
  126   the command cannot be executed
  127   the command was not found
  128+N interrupted by signal N while waiting for NAME (130: Ctrl-C)`

// aqs run's own exit statuses. 75 and 76 are the numbers of EX_TEMPFAIL and EX_PROTOCOL in
// sysexits.h, which nothing else in aqs run uses; 125 to 127 are what timeout(1), env(1)
// and the shells use: a wrapper's own failures stay out of the range of its command's usual
// statuses, so aqs run's usage errors are 125 too, not 2 as for the other commands.
const (
	exitNotAcquired   = 75
	exitLockLost      = 76
	exitRunFailed     = 125
	exitCannotExecute = 126
	exitNotFound      = 127
)

// The environment variables that describe the hold to the command.
const (
	envName   = "AQS_NAME"
	envToken  = "AQS_FENCING_TOKEN"
	envPermit = "AQS_PERMIT_ID"
)

const (
	// defaultGrace is the grace between SIGTERM and SIGKILL, capped at a third of the lease.
	defaultGrace = 10 * time.Second
	// forever is the wait of a run without --wait.
	forever time.Duration = -1
)

// killLead is how long before its trusted lease runs out a command that is still running is
// sent SIGKILL: room for the kill to take effect before the lease may end in Redis (the
// trusted lease ends a margin before the local bound of the lease, itself no later than its
// end in Redis; see internal/core/hold.go), even when aqs run's timer is late on a busy
// machine. A tenth of the lease, 10ms to 1s.
func killLead(lease time.Duration) time.Duration {
	return min(max(lease/10, 10*time.Millisecond), time.Second)
}

// runOptions is a parsed aqs run command line.
type runOptions struct {
	admin   *adminFlags
	name    string
	argv    []string      // the command and its arguments
	permits int           // 0: the fair lock, or the election
	elect   bool          // lead the election NAME
	value   string        // the leader's value
	wait    time.Duration // forever, or the bound (0: one attempt)
	lease   time.Duration
	grace   time.Duration
}

// optDuration is a duration flag that tells whether it was given.
type optDuration struct {
	d   time.Duration
	set bool
}

func (o *optDuration) String() string {
	if o == nil || !o.set {
		return ""
	}
	return o.d.String()
}

func (o *optDuration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a duration (such as 500ms, 10s or 2m)")
	}
	o.d, o.set = d, true
	return nil
}

// parseRun parses aqs run's command line. It returns flag.ErrHelp for -h and a *usageError
// for anything wrong, having touched nothing.
func parseRun(e *env, args []string) (*runOptions, error) {
	fs := newFlagSet(e, runUsage, runSynopsis)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: aqs %s\n\n%s\n\nFlags:\n", runUsage, runSynopsis)
		fs.PrintDefaults()
	}
	o := &runOptions{admin: addAdminFlags(fs)}
	var wait, grace optDuration
	fs.IntVar(&o.permits, "permits", 0, "hold one of `K` permits of the leased semaphore NAME instead of the fair lock\n"+
		"(it sets the size K if none is set, and fails if another size is)")
	fs.BoolVar(&o.elect, "elect", false, "lead the election NAME instead of holding the fair lock: the command runs while\n"+
		"aqs run leads (candidates lead in arrival order; see package election)")
	fs.StringVar(&o.value, "value", "", "the leader's `value`, for aqs inspect and the election's observers, with --elect\n"+
		"(default host:pid of aqs run)")
	fs.Var(&wait, "wait", "give up (status 75) when NAME is not acquired within `duration`; 0 tries once\n(default: wait as long as it takes)")
	fs.DurationVar(&o.lease, "lease", core.DefaultConfig().WatchdogTimeout,
		"the hold's `lease`, renewed every third of it: how soon NAME is free after aqs run dies")
	fs.Var(&grace, "grace", "the `duration` between SIGTERM and SIGKILL when the command is stopped for the\n"+
		"hold's sake; at most a third of --lease (default 10s, or a third of --lease if less)")

	var names []string
	var argv []string
	dashes := false
	for !dashes {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &usageError{err: err, reported: true}
		}
		rest := fs.Args()
		// fs.Parse stops at "--", which it drops, or at the first argument that is no flag:
		// NAME, maybe followed by more flags.
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			dashes, argv = true, rest
			break
		}
		if len(rest) == 0 {
			break
		}
		names = append(names, rest[0])
		args = rest[1:]
	}
	switch {
	case len(names) == 0:
		return nil, usagef("missing NAME: aqs %s", runUsage)
	case !dashes:
		return nil, usagef("missing -- between NAME and the command: aqs %s", runUsage)
	case len(names) > 1:
		return nil, usagef("unexpected argument %q before --: one NAME, then -- and the command", names[1])
	case names[0] == "":
		return nil, usagef("empty NAME")
	case len(argv) == 0:
		return nil, usagef("missing the command after --")
	case argv[0] == "":
		return nil, usagef("empty command after --")
	}
	o.name = names[0]
	o.argv = argv

	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["permits"] && o.permits < 1 {
		return nil, usagef("--permits must be at least 1")
	}
	switch {
	case o.elect && set["permits"]:
		return nil, usagef("--elect and --permits exclude each other: an election has one leader")
	case set["value"] && !o.elect:
		return nil, usagef("--value is the leader's: give --elect")
	case o.elect && len(o.value) > election.MaxValue:
		return nil, usagef("--value is %d bytes, over %d", len(o.value), election.MaxValue)
	case o.elect && !set["value"]:
		host, err := os.Hostname()
		if err != nil {
			host = "unknown-host"
		}
		o.value = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	o.wait = forever
	if wait.set {
		switch {
		case wait.d < 0:
			return nil, usagef("--wait %v is negative", wait.d)
		case wait.d == 0 && o.elect:
			// A campaign waits in the queue for its turn: there is no single try of one.
			return nil, usagef("--wait 0 does not go with --elect: a campaign waits its turn; give a duration")
		}
		o.wait = wait.d
	}
	if o.lease < 30*time.Millisecond {
		return nil, usagef("--lease %v is below 30ms", o.lease)
	}
	o.grace = min(defaultGrace, o.lease/3)
	if grace.set {
		switch {
		case grace.d < 0:
			return nil, usagef("--grace %v is negative", grace.d)
		case grace.d > o.lease/3:
			// More, and the command would be stopped whenever one renewal is late.
			return nil, usagef("--grace %v is more than a third of --lease %v", grace.d, o.lease)
		}
		o.grace = grace.d
	}
	return o, nil
}

// runRun runs aqs run. Every error it returns is a *usageError or an *exitStatus.
func runRun(ctx context.Context, e *env, args []string) error {
	o, err := parseRun(e, args)
	if err != nil {
		return err
	}
	if !canRun {
		return &exitStatus{exitRunFailed, errors.New("runs commands on Unix systems only")}
	}
	// A command that cannot start is reported before NAME is taken.
	path, err := exec.LookPath(o.argv[0])
	if errors.Is(err, exec.ErrDot) {
		err = nil // found relative to the current directory through PATH: run it, as shells do
	}
	if err != nil {
		return &exitStatus{startFailure(err), err}
	}
	r := &runner{e: e, o: o}
	defer r.close()
	return r.run(ctx, path)
}

// startFailure returns the exit status for a command that could not start.
func startFailure(err error) int {
	var ee *exec.Error
	switch {
	case errors.As(err, &ee) && errors.Is(ee.Err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return exitNotFound
	case errors.Is(err, fs.ErrPermission), cannotExecute(err):
		return exitCannotExecute
	}
	return exitRunFailed
}

// runner is one aqs run.
type runner struct {
	e      *env
	o      *runOptions
	admin  *admin
	client *aqs.Client
}

// close closes the connections.
func (r *runner) close() {
	if r.client != nil {
		r.client.Close()
	}
	if r.admin != nil {
		r.admin.Close()
	}
}

// warnf prints a message of aqs run's own on its stderr, which it shares with its command.
func (r *runner) warnf(format string, args ...any) {
	fmt.Fprintf(r.e.stderr, "aqs run: "+format+"\n", args...)
}

// run takes NAME, runs the command and gives NAME up.
func (r *runner) run(ctx context.Context, path string) error {
	sigs := make(chan os.Signal, 8)
	if r.e.signals != nil {
		defer r.e.signals(sigs, runSignals...)()
	}

	// Until the command starts, a signal ends the wait: the goroutine cancels waitCtx. It stops
	// watching before the command starts, so the held context (a child of waitCtx) is
	// cancelled only by a signal that came before, which the check below catches.
	waitCtx, cancelWait := context.WithCancel(ctx)
	defer cancelWait()
	interrupt := make(chan os.Signal, 1)
	started := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case s := <-sigs:
				if ignoredSignal(s) {
					continue
				}
				interrupt <- s
				cancelWait()
				return
			case <-started:
				return
			}
		}
	}()
	h, held, ok, err := r.acquire(waitCtx)
	close(started)
	<-watched
	select {
	case s := <-interrupt:
		if held != nil {
			r.release(h)
		}
		return &exitStatus{signalStatus(s), fmt.Errorf("interrupted by %s while waiting for %s: the command was not run", signalName(s), r.what())}
	default:
	}
	var ue *usageError
	switch {
	case errors.As(err, &ue):
		return err
	case err != nil:
		return &exitStatus{exitRunFailed, err}
	case !ok && r.o.wait == 0:
		return &exitStatus{exitNotAcquired, fmt.Errorf("%s is taken: not acquired (--wait 0)", h)}
	case !ok:
		return &exitStatus{exitNotAcquired, fmt.Errorf("%s not acquired within %v", h, r.o.wait)}
	}

	vars, err := h.vars()
	if err == nil && held.Err() != nil {
		err = fmt.Errorf("lost %s before the command started: %w", h, context.Cause(held))
	}
	if err != nil {
		r.release(h)
		code := exitRunFailed
		if held.Err() != nil {
			code = exitLockLost
		}
		return &exitStatus{code, err}
	}
	cmd := &exec.Cmd{Path: path, Args: r.o.argv, Env: commandEnv(os.Environ(), append(vars, envName+"="+r.o.name)),
		Stdin: r.e.stdin, Stdout: r.e.stdout, Stderr: r.e.stderr}
	ownGroup(cmd)
	exited, err := start(cmd)
	if err != nil {
		r.release(h)
		return &exitStatus{startFailure(err), err}
	}
	s := &supervisor{r: r, cmd: cmd, h: h, held: held, grace: r.o.grace, lead: killLead(r.o.lease)}
	s.trusted = h.trustedUntil()
	s.first, s.firstLease = s.trusted, time.Until(s.trusted)
	waitErr, lost := s.supervise(exited, sigs)
	if s.stopping() {
		// Nothing of the command may run on without the hold, in the background either.
		_ = signalGroup(cmd, sigKill)
	}
	if left, ok := s.expiring(); ok {
		// Redis has not answered the renewals: the release would wait seconds for it
		// (the engine sends a release again while its outcome is unknown), for a lease that
		// ends sooner by itself.
		r.warnf("not giving up %s: Redis did not answer the renewals; its lease ends in %v", h, left.Round(time.Millisecond))
	} else {
		r.release(h)
	}

	var xe *exec.ExitError
	switch {
	case lost:
		why := s.why
		if why == "" {
			why = fmt.Sprintf("lost %s (%v) as the command ended", h, context.Cause(held))
		}
		return &exitStatus{exitLockLost, fmt.Errorf("%s: exit status %d", why, exitLockLost)}
	case waitErr == nil:
		return nil
	case errors.As(waitErr, &xe):
		return &exitStatus{code: exitStatusOf(xe.ProcessState)}
	}
	return &exitStatus{exitRunFailed, waitErr}
}

// what names what is held, for messages before the holder exists.
func (r *runner) what() string {
	switch {
	case r.o.permits > 0:
		return fmt.Sprintf("a permit of leased semaphore %q", r.o.name)
	case r.o.elect:
		return fmt.Sprintf("the leadership of election %q", r.o.name)
	}
	return fmt.Sprintf("lock %q", r.o.name)
}

// acquire connects to Redis and takes NAME.
func (r *runner) acquire(ctx context.Context) (h holder, held context.Context, ok bool, err error) {
	r.admin, err = openAdmin(ctx, r.e, r.o.admin)
	if err != nil {
		return nil, nil, false, err
	}
	r.client, err = aqs.New(ctx, r.admin.rdb, aqs.WithKeyPrefix(r.admin.prefix), aqs.WithWatchdogTimeout(r.o.lease))
	if err != nil {
		return nil, nil, false, fmt.Errorf("connecting to Redis at %s: %w", r.admin.addr, err)
	}
	switch {
	case r.o.permits > 0:
		h, err = newPermitHolder(ctx, r.admin, r.client, r.o.name, r.o.permits)
	case r.o.elect:
		h, err = newLeaderHolder(ctx, r.admin, r.client, r.o.name, r.o.value)
	default:
		h, err = newLockHolder(ctx, r.admin, r.client, r.o.name)
	}
	if err != nil {
		return nil, nil, false, err
	}
	held, ok, err = h.acquire(ctx, r.o.wait)
	return h, held, ok, err
}

// release gives NAME up; a failure is only reported: the hold's lease ends it.
func (r *runner) release(h holder) {
	err := h.release()
	if err != nil && !errors.Is(err, aqs.ErrLockLost) {
		r.warnf("giving up %s: %v (it is free when its lease ends)", h, err)
	}
}

// commandEnv returns the command's environment: environ without the variables of an outer
// aqs run's hold, then vars.
func commandEnv(environ, vars []string) []string {
	env := make([]string, 0, len(environ)+len(vars))
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case envName, envToken, envPermit:
			continue
		}
		env = append(env, kv)
	}
	return append(env, vars...)
}

// start starts the command and returns a channel that gets cmd.Wait's result. On Linux the
// command gets a parent-death signal, which follows the OS thread that started it, not the
// process (golang/go#27505): the goroutine that starts it keeps its thread locked until the
// command has exited.
func start(cmd *exec.Cmd) (<-chan error, error) {
	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return exited, nil
}

// Stopping the command for the hold's sake.
//
// The held context is cancelled only once the lease can no longer be trusted, a moment
// before it may end in Redis: too late to give the command a grace period. So the supervisor
// watches the hold's trusted deadline itself. It wakes when the time left of it would drop
// below the grace plus killLead; a renewal that succeeded meanwhile has pushed the deadline on
// (renewals come every third of the lease, and the grace is at most a third), so it only
// sets its timer again. If the deadline has not moved, the renewals are failing: it sends
// SIGTERM to the command's process group, and SIGKILL once only killLead is left, or the
// grace has passed, whichever is first. A hold handed over to a waiter may start with a short
// lease, which the engine extends halfway through (see internal/acquire/hold.go): until the
// deadline has moved once, the supervisor waits for SIGTERM until less than 3/8 of that first
// lease is left, and for SIGKILL until less than 1/4, so that only a late extension stops the
// command. The deadline it keeps is the last one it read, a
// lower bound of the real one, so that a hold that ended meanwhile (whose deadline reads as
// zero) is still killed in time. A hold found lost (broken by aqs unlock --force, taken by
// another) gets SIGTERM at once and SIGKILL after the grace. A stop once begun is carried
// through, even should a renewal succeed again.

// supervisor watches the running command and its hold.
type supervisor struct {
	r           *runner
	cmd         *exec.Cmd
	h           holder
	held        context.Context
	grace, lead time.Duration
	trusted     time.Time     // the trusted deadline last read: a lower bound of the hold's
	first       time.Time     // the trusted deadline when the command started
	firstLease  time.Duration // how much of it was left then
	termAt      time.Time     // when the command was sent SIGTERM for the hold's sake; zero before
	killed      bool          // sent SIGKILL for the hold's sake
	failing     bool          // stopping because the renewals failed (not because the hold was lost)
	why         string        // why it is being stopped
}

// expiring reports whether the command was stopped because the renewals failed and the hold
// has not been renewed since, and how long its trusted lease has left.
func (s *supervisor) expiring() (time.Duration, bool) {
	if !s.failing {
		return 0, false
	}
	term, _ := s.leads()
	tu := s.h.trustedUntil()
	if tu.IsZero() {
		return 0, false // ended: its release costs nothing
	}
	left := time.Until(tu)
	return max(left, 0), left <= term
}

// stopping reports whether the command is being stopped for the hold's sake.
func (s *supervisor) stopping() bool { return !s.termAt.IsZero() || s.killed }

// supervise passes the signals on to the command and stops it when the hold needs it, until
// the command exits. It returns cmd.Wait's result, and whether the hold was lost or stopped
// being trusted before the command's exit was seen.
func (s *supervisor) supervise(exited <-chan error, sigs <-chan os.Signal) (error, bool) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	heldDone := s.held.Done()
	for {
		if at, ok := s.next(); ok {
			timer.Reset(time.Until(at))
		} else {
			timer.Stop()
		}
		select {
		case err := <-exited:
			return err, s.stopping() || s.held.Err() != nil
		case sig := <-sigs:
			if !ignoredSignal(sig) {
				_ = signalGroup(s.cmd, sig)
			}
		case <-heldDone:
			heldDone = nil
			if !s.stopping() {
				s.term(fmt.Sprintf("lost %s (%v)", s.h, context.Cause(s.held)))
			}
		case <-timer.C:
			s.check()
		}
	}
}

// leads returns how much of the trusted lease must be left for SIGTERM to be sent, and for
// SIGKILL.
func (s *supervisor) leads() (term, kill time.Duration) {
	term, kill = s.lead+s.grace, s.lead
	if !s.trusted.After(s.first) {
		term, kill = min(term, s.firstLease*3/8), min(kill, s.firstLease/4)
	}
	return term, kill
}

// next returns when the supervisor must look at the hold again, if ever.
func (s *supervisor) next() (time.Time, bool) {
	term, kill := s.leads()
	switch {
	case s.killed:
		return time.Time{}, false
	case s.termAt.IsZero():
		return s.trusted.Add(-term), true
	}
	at := s.termAt.Add(s.grace)
	if k := s.trusted.Add(-kill); k.Before(at) {
		at = k
	}
	return at, true
}

// check reads the hold's trusted deadline and begins or ends the stop the time left calls for.
func (s *supervisor) check() {
	if tu := s.h.trustedUntil(); tu.After(s.trusted) {
		s.trusted = tu
	}
	term, kill := s.leads()
	now := time.Now()
	left := s.trusted.Sub(now)
	if s.termAt.IsZero() {
		if left > term {
			return // renewed meanwhile
		}
		s.failing = true
		s.term(fmt.Sprintf("the lease of %s could not be renewed (%v of it left)", s.h, max(left, 0).Round(time.Millisecond)))
		if s.killed || left > kill {
			return
		}
	}
	if left <= kill || !now.Before(s.termAt.Add(s.grace)) {
		s.kill()
	}
}

// term begins the stop: SIGTERM now (SIGKILL with no grace).
func (s *supervisor) term(why string) {
	s.why = why + ": the command was stopped"
	if s.grace == 0 {
		s.r.warnf("%s: stopping the command (SIGKILL)", why)
		s.kill()
		return
	}
	s.r.warnf("%s: stopping the command (SIGTERM, SIGKILL in %v)", why, s.grace.Round(time.Millisecond))
	s.termAt = time.Now()
	_ = signalGroup(s.cmd, sigTerm)
}

// kill ends the stop: SIGKILL.
func (s *supervisor) kill() {
	if !s.killed && !s.termAt.IsZero() {
		s.r.warnf("the command did not exit within the time left: SIGKILL")
	}
	s.killed = true
	_ = signalGroup(s.cmd, sigKill)
}
