package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Worker processes: the parent side.
//
// A fleet is the worker processes of one scenario. Each child is started by a goroutine that
// keeps its OS thread locked until the child has exited: on Linux the child gets a parent-death
// signal, which follows the thread that started it, not the process (see "A throwaway server"
// in redis.go). It also gets a process group of its own, so that a Ctrl-C in the terminal
// reaches aqs alone, which then kills its workers in order. The same goroutine reads the
// child's stdout and passes each line on as an event, then waits for the child and passes its
// exit on: a process's exit comes after all its lines. The scenario reads the events on its own
// goroutine, which alone touches the processes' state.

const (
	// workerReadyTimeout bounds how long the workers of a scenario may take to start and
	// connect.
	workerReadyTimeout = 30 * time.Second
	// stallTimeout bounds how long a scenario waits with no word from any worker: a demo that
	// hangs says so instead.
	stallTimeout = 30 * time.Second
	// stderrTail is how much of a worker's stderr is kept to show when it fails.
	stderrTail = 4096
)

// workerProc is one worker process, as the scenario sees it.
type workerProc struct {
	n      int // the process's number, from 1
	role   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr tailBuffer
	err    error // cmd.Wait's error, set before the exit event

	killed bool // by the demo, with kill
	done   bool // it printed its "done" line
	exited bool // its exit event came
}

func (p *workerProc) pid() int { return p.cmd.Process.Pid }

func (p *workerProc) String() string { return fmt.Sprintf("process %d (pid %d)", p.n, p.pid()) }

// failure describes a worker that ended without finishing its role.
func (p *workerProc) failure() error {
	status := "exit status 0"
	if p.err != nil {
		status = p.err.Error()
	}
	if !p.done {
		status = "before it was done: " + status
	}
	return fmt.Errorf("worker %s (%s) exited %s; its stderr:\n%s", p, p.role, status,
		strings.TrimRight(p.stderr.String(), "\n"))
}

// workerEvent is one line of a worker, split into words, or its exit (words nil).
type workerEvent struct {
	p     *workerProc
	words []string
}

// fleet is the worker processes of one scenario.
type fleet struct {
	procs  []*workerProc
	live   int // processes whose exit event has not come
	events chan workerEvent
	quit   chan struct{} // closed by stop: nobody reads events any more
	wg     sync.WaitGroup
	idle   *time.Timer
	// metrics takes in the workers' metrics lines (aqs demo --metrics), which next never
	// returns; nil without --metrics.
	metrics *demoMetrics
}

// startFleet starts a worker process for each spec and returns once each has said it is
// ready. On failure nothing is left running.
func startFleet(ctx context.Context, x workerExec, specs []workerSpec) (*fleet, error) {
	f := &fleet{events: make(chan workerEvent, 64), quit: make(chan struct{}), idle: time.NewTimer(stallTimeout)}
	for _, s := range specs {
		if err := f.start(x, s); err != nil {
			f.stop()
			return nil, err
		}
	}
	f.live = len(f.procs)
	ready := 0
	timeout := time.NewTimer(workerReadyTimeout)
	defer timeout.Stop()
	for ready < len(f.procs) {
		select {
		case ev := <-f.events:
			switch {
			case ev.words == nil:
				f.stop()
				return nil, ev.p.failure()
			case ev.words[0] != lineReady:
				f.stop()
				return nil, fmt.Errorf("worker %s printed %q before it was ready", ev.p, strings.Join(ev.words, " "))
			}
			ready++
		case <-ctx.Done():
			f.stop()
			return nil, ctx.Err()
		case <-timeout.C:
			f.stop()
			return nil, fmt.Errorf("%d of %d worker processes not ready within %v", len(f.procs)-ready, len(f.procs),
				workerReadyTimeout)
		}
	}
	return f, nil
}

// start starts one worker process.
func (f *fleet) start(x workerExec, s workerSpec) error {
	cmd, err := x.command(s)
	if err != nil {
		return err
	}
	p := &workerProc{n: s.Proc, role: s.Role, cmd: cmd}
	cmd.Stderr = &p.stderr
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	detach(cmd)
	started := make(chan error, 1)
	f.wg.Go(func() {
		runtime.LockOSThread() // see "Worker processes: the parent side" above
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if words := lineWords(sc.Text()); len(words) > 0 {
				f.pass(workerEvent{p: p, words: words})
			}
		}
		p.err = cmd.Wait() // only after every read, as StdoutPipe requires
		f.pass(workerEvent{p: p})
	})
	if err := <-started; err != nil {
		return fmt.Errorf("starting a worker process (%s): %w", cmd.Path, err)
	}
	f.procs = append(f.procs, p)
	return nil
}

// pass hands an event to the scenario, unless the fleet is stopped.
func (f *fleet) pass(ev workerEvent) {
	select {
	case f.events <- ev:
	case <-f.quit: // nobody reads any more: the reader reads on to EOF
	}
}

// next returns the next event, or ticked when tick fires first (tick may be nil). It fails
// when ctx is done, and when no worker said anything for stallTimeout.
func (f *fleet) next(ctx context.Context, tick <-chan time.Time) (ev workerEvent, ticked bool, err error) {
	f.idle.Reset(stallTimeout)
	for {
		select {
		case ev = <-f.events:
			if ev.words == nil {
				ev.p.exited = true
				f.live--
			} else if ev.words[0] == lineMetrics && f.metrics != nil {
				if err := f.metrics.merge(ev.words[1:]); err != nil {
					return ev, false, fmt.Errorf("worker %s: %w", ev.p, err)
				}
				continue
			}
			return ev, false, nil
		case <-tick:
			return ev, true, nil
		case <-ctx.Done():
			return ev, false, ctx.Err()
		case <-f.idle.C:
			return ev, false, fmt.Errorf("no word from the %d worker processes left for %v", f.live, stallTimeout)
		}
	}
}

// exited checks the exit event of p: an error unless p was killed by the demo or ended its
// role and exited with status 0.
func (f *fleet) exited(p *workerProc) error {
	if p.killed || (p.done && p.err == nil) {
		return nil
	}
	return p.failure()
}

// broadcast sends line to every worker process still running.
func (f *fleet) broadcast(line string) {
	for _, p := range f.procs {
		if !p.exited {
			// A worker that has just exited cannot read it: its exit event tells the rest.
			_, _ = fmt.Fprintln(p.stdin, line)
		}
	}
}

// kill sends p SIGKILL: the crash that no code of the worker can soften. Its exit event
// follows.
func (f *fleet) kill(p *workerProc) error {
	p.killed = true
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing worker %s: %w", p, err)
	}
	return nil
}

// stop ends the fleet: it closes every worker's stdin, kills those still running, and waits
// until they have exited. It is idempotent.
func (f *fleet) stop() {
	select {
	case <-f.quit:
		return
	default:
	}
	for _, p := range f.procs {
		_ = p.stdin.Close()
		_ = p.cmd.Process.Kill() // fails only when it has exited already
	}
	close(f.quit)
	f.wg.Wait()
	f.idle.Stop()
}

// tailBuffer keeps the last stderrTail bytes written to it; safe for exec's copying goroutine
// and the scenario.
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if over := b.buf.Len() - stderrTail; over > 0 {
		b.buf.Next(over)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
