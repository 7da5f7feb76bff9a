package redistest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The parent's side of a child process: a role started by Role.Start (roles.go says how a
// child is chosen, and why none outlives the test binary).

// childTimeout bounds how long t.Cleanup waits for a child to exit after SIGKILL.
const childTimeout = 10 * time.Second

// Child is this test binary run again as a child process in a role, killed in t.Cleanup at the
// latest. Its methods are for the test's goroutine.
type Child struct {
	label  string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr lockedBuffer
	lines  chan string   // stdout lines, closed at EOF
	quit   chan struct{} // closed in t.Cleanup: stop passing lines on
	exited chan struct{} // closed once cmd.Wait returned
	err    error         // cmd.Wait's error, set before exited is closed
	merged bool          // the lines go to Merge
	killed bool          // by Kill
}

// startChild runs this test binary again with the extra environment entries env, which must
// hold the child's spec (see Role.Start).
func startChild(t testing.TB, label string, env ...string) *Child {
	t.Helper()
	c := &Child{label: label, lines: make(chan string, 16), quit: make(chan struct{}), exited: make(chan struct{})}
	// -test.run=^$: should TestMain not hand over to Main, the child runs no test either.
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stderr = &c.stderr
	var err error
	c.stdin, err = c.cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := c.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, c.cmd.Start())
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case c.lines <- sc.Text():
			case <-c.quit: // nobody reads any more: read on to EOF
			}
		}
		close(c.lines)
		c.err = c.cmd.Wait() // only after every read, as StdoutPipe requires
		close(c.exited)
	}()
	t.Cleanup(func() {
		_ = c.stdin.Close()
		_ = c.cmd.Process.Kill() // fails only when it has exited already
		close(c.quit)
		select {
		case <-c.exited:
		case <-time.After(childTimeout):
			t.Errorf("%s (pid %d) did not exit after SIGKILL", c.label, c.cmd.Process.Pid)
		}
		if t.Failed() {
			t.Logf("%s (pid %d) stderr:\n%s", c.label, c.cmd.Process.Pid, c.stderr.String())
		}
	})
	return c
}

// Label returns the child's label, for the caller's own failure messages.
func (c *Child) Label() string { return c.label }

// Send writes one line to the child's stdin.
func (c *Child) Send(t testing.TB, line string) {
	t.Helper()
	_, err := fmt.Fprintln(c.stdin, line)
	require.NoError(t, err, "%s: writing %q", c.label, line)
}

// Expect waits, at most within, for the child's next stdout line, which must start with
// prefix, and returns the rest of it. A child that exits first fails the test with its exit
// status and stderr, since the missing line alone would not say why.
func (c *Child) Expect(t testing.TB, prefix string, within time.Duration) string {
	t.Helper()
	if c.merged {
		t.Fatalf("%s: Expect on a child whose lines go to Merge", c.label)
	}
	select {
	case line, ok := <-c.lines:
		if !ok {
			<-c.exited
			t.Fatalf("%s exited (%v) before printing %q; stderr:\n%s", c.label, c.err, prefix, c.stderr.String())
		}
		if !strings.HasPrefix(line, prefix) {
			t.Fatalf("%s printed %q, want a line starting with %q", c.label, line, prefix)
		}
		return strings.TrimPrefix(line, prefix)
	case <-time.After(within):
		t.Fatalf("%s printed no %q within %v", c.label, prefix, within)
	}
	return ""
}

// Wait waits, at most within, for the child to exit and returns cmd.Wait's error. The child is
// to print nothing more: a line it prints meanwhile fails the test, unless its lines go to
// Merge, whose reader decides what a line means.
func (c *Child) Wait(t testing.TB, within time.Duration) error {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	var lines <-chan string
	if !c.merged {
		lines = c.lines
	}
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				lines = nil // EOF; Wait follows
				continue
			}
			t.Errorf("%s printed unexpected %q", c.label, line)
		case <-c.exited:
			return c.err
		case <-timer.C:
			t.Fatalf("%s did not exit within %v", c.label, within)
		}
	}
}

// Kill sends the child SIGKILL, the crash that no cleanup code of the child can soften, and
// waits, at most within, for it to exit. The exit error is returned for the caller to check
// that the signal, not the child, ended it.
func (c *Child) Kill(t testing.TB, within time.Duration) *exec.ExitError {
	t.Helper()
	require.NoError(t, c.cmd.Process.Kill())
	c.killed = true
	var exit *exec.ExitError
	require.ErrorAs(t, c.Wait(t, within), &exit)
	return exit
}

// Killed reports whether Kill was called, so that a test addressing all its children can pass
// over the dead ones.
func (c *Child) Killed() bool { return c.killed }

// ChildLine is one stdout line of a child, as Merge passes it on.
type ChildLine struct {
	Child *Child
	Text  string
}

// Merge passes the stdout lines of children on to one channel, for a test that serves
// several children at once and cannot know which one speaks next. From then on the lines are
// the channel's alone: Expect refuses the children and Wait does not read their lines. Each
// child's lines keep their order. The channel is never closed; a child at EOF simply sends
// nothing more.
func Merge(children ...*Child) <-chan ChildLine {
	out := make(chan ChildLine, 16)
	for _, c := range children {
		c.merged = true
		go func() {
			for line := range c.lines {
				select {
				case out <- ChildLine{c, line}:
				case <-c.quit: // nobody reads any more; the child's reader reads on to EOF
					return
				}
			}
		}()
	}
	return out
}

// lockedBuffer is a bytes.Buffer safe for the copying goroutine of exec and the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
