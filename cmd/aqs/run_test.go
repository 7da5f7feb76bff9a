package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/semaphore"
)

// The run tests run aqs run in-process, each run with an aqs.Client of its own as a process
// would have, its stdin a pipe of the test's and its signals sent by the test (env.signals),
// and as a separate process where a real signal or a killed aqs run is the point (this test
// binary run again: see startAqs; a race-enabled binary takes a second or two to start, so
// few tests do). Their commands are real processes, sh scripts; those that must hold until
// the test says so read their stdin, which is aqs run's. Scripts record what happens in an
// events file (appends of one short line are atomic), from which the tests check the order
// across runs.

// asAqsEnv makes this test binary run as aqs with its arguments as the command line (see
// TestMain).
const asAqsEnv = "AQS_TEST_AS_AQS"

// runWithin bounds every wait of these tests for something that happens within seconds.
const runWithin = 30 * time.Second

// aqsProc is an aqs run started by a test, in-process (startRun) or as a process (startAqs).
type aqsProc struct {
	what   string
	stdin  io.WriteCloser
	lines  chan string // its stdout, line by line; closed at its end
	stderr syncBuffer
	signal func(os.Signal) error
	exited chan struct{}
	code   int // its exit status (-1 when a signal killed the process), set before exited is closed
}

// startRun runs aqs run with args in-process. Its stdin is a pipe the test may write to and
// close; its signals are those the test sends with signal.
func startRun(t *testing.T, args ...string) *aqsProc {
	t.Helper()
	p := &aqsProc{what: "aqs run " + strings.Join(args, " "), lines: make(chan string, 1024), exited: make(chan struct{})}
	// An *os.File, which the command gets as it is: with any other reader, exec would copy it
	// to the command, and its Wait would wait for the copy, until the test closes the pipe.
	stdin, w, err := os.Pipe()
	require.NoError(t, err)
	p.stdin = w
	sigs := make(chan os.Signal, 8)
	p.signal = func(s os.Signal) error { sigs <- s; return nil }
	out := &lineSplitter{lines: p.lines}
	e := &env{stdin: stdin, stdout: out, stderr: &p.stderr, getenv: func(string) string { return "" },
		signals: func(c chan<- os.Signal, _ ...os.Signal) func() {
			stop, done := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				for {
					select {
					case s := <-sigs:
						c <- s
					case <-stop:
						return
					}
				}
			}()
			return func() { close(stop); <-done }
		}}
	go func() {
		p.code = run(context.Background(), append([]string{"run"}, args...), e)
		stdin.Close()
		out.flush()
		close(p.lines)
		close(p.exited)
	}()
	t.Cleanup(func() {
		w.Close()
		select {
		case <-p.exited:
			if t.Failed() {
				t.Logf("%s: exit status %d; stderr:\n%s", p.what, p.code, p.stderr.String())
			}
		case <-time.After(runWithin):
			t.Errorf("%s did not end; stderr:\n%s", p.what, p.stderr.String())
		}
	})
	return p
}

// startAqs starts this test binary as aqs with the command line args. The process is killed,
// if it is still running, at the end of the test.
func startAqs(t *testing.T, args ...string) (*aqsProc, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asAqsEnv+"=1")
	p := &aqsProc{what: "aqs " + strings.Join(args, " "), lines: make(chan string, 1024), exited: make(chan struct{}),
		signal: func(s os.Signal) error { return cmd.Process.Signal(s) }}
	cmd.Stderr = &p.stderr
	var err error
	p.stdin, err = cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		_ = cmd.Wait() // after every read, as StdoutPipe requires
		p.code = cmd.ProcessState.ExitCode()
		close(p.lines)
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stdin.Close()
		_ = cmd.Process.Kill()
		select {
		case <-p.exited:
		case <-time.After(runWithin):
			t.Errorf("aqs process %d did not end", cmd.Process.Pid)
		}
	})
	return p, cmd
}

// expect waits for the next line of stdout and checks that it starts with prefix.
func (p *aqsProc) expect(t *testing.T, prefix string) string {
	t.Helper()
	select {
	case line, ok := <-p.lines:
		require.True(t, ok, "%s ended before printing %q; stderr:\n%s", p.what, prefix, p.stderr.String())
		require.True(t, strings.HasPrefix(line, prefix), "got %q, want %q...", line, prefix)
		return line
	case <-time.After(runWithin):
		t.Fatalf("no line %q within %v; stderr:\n%s", prefix, runWithin, p.stderr.String())
		return ""
	}
}

// wait waits for the run to end and returns its exit status.
func (p *aqsProc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.exited:
		t.Logf("%s: exit status %d; stderr:\n%s", p.what, p.code, p.stderr.String())
		return p.code
	case <-time.After(runWithin):
		t.Fatalf("%s did not exit within %v; stderr:\n%s", p.what, runWithin, p.stderr.String())
		return 0
	}
}

// lineSplitter passes what is written to it on as lines.
type lineSplitter struct {
	mu    sync.Mutex
	buf   []byte
	lines chan<- string
}

func (w *lineSplitter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.lines <- string(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}

// flush passes on a last line with no newline.
func (w *lineSplitter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.lines <- string(w.buf)
		w.buf = nil
	}
}

// syncBuffer is a bytes.Buffer safe for exec's copying goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// eventsFile returns a fresh events file for the scripts of a test, quoted for sh.
func eventsFile(t *testing.T) (path, quoted string) {
	path = filepath.Join(t.TempDir(), "events")
	require.NoError(t, os.WriteFile(path, nil, 0o644))
	return path, "'" + path + "'"
}

// events returns the lines of an events file.
func events(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.Fields(strings.ReplaceAll(string(b), " ", "_"))
}

// waitEvents waits until the events file holds n lines that start with prefix, and returns
// its lines.
func waitEvents(t *testing.T, path, prefix string, n int) []string {
	t.Helper()
	var lines []string
	require.Eventually(t, func() bool {
		lines = events(t, path)
		c := 0
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				c++
			}
		}
		return c >= n
	}, runWithin, 5*time.Millisecond, "waiting for %d events %s...", n, prefix)
	return lines
}

// requireFree checks that nothing is at name: no holder, no waiter, no key.
func requireFree(t *testing.T, srv *redistest.Server, name string) {
	t.Helper()
	_, err := inspectName(t.Context(), srv.Client(t), "aqs", name)
	require.True(t, isNothing(err), "something is at %s: %v", name, err)
}

// requireNoLeader checks that the election name has no leader, no holder and no candidate
// (its former leader's record may stay until its lease would have ended).
func requireNoLeader(t *testing.T, srv *redistest.Server, name string) {
	t.Helper()
	st, err := inspectName(t.Context(), srv.Client(t), "aqs", name)
	if isNothing(err) {
		return
	}
	require.NoError(t, err)
	assert.False(t, st.Held, "held: %+v", st.Holders)
	assert.Nil(t, st.Leader)
	assert.Empty(t, st.Waiters)
}

func TestRunCommandLineErrorsExitWith125AndTouchNothing(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	r := []string{"--redis", srv.Addr()}
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{nil, "missing NAME"},
		{[]string{"--", "true"}, "missing NAME"},
		{[]string{name}, "missing -- between NAME and the command"},
		{[]string{name, "true"}, "missing -- between NAME and the command"},
		{[]string{name, "--"}, "missing the command after --"},
		{[]string{name, "--", ""}, "empty command after --"},
		{[]string{"", "--", "true"}, "empty NAME"},
		{[]string{name, "other", "--", "true"}, `unexpected argument "other" before --`},
		{[]string{"--permits", "0", name, "--", "true"}, "--permits must be at least 1"},
		{[]string{"--permits", "-2", name, "--", "true"}, "--permits must be at least 1"},
		{[]string{"--wait", "-1s", name, "--", "true"}, "--wait -1s is negative"},
		{[]string{"--wait", "soon", name, "--", "true"}, "not a duration"},
		{[]string{"--lease", "-1s", name, "--", "true"}, "--lease -1s is below 30ms"},
		{[]string{"--lease", "10ms", name, "--", "true"}, "--lease 10ms is below 30ms"},
		{[]string{"--grace", "-1s", name, "--", "true"}, "--grace -1s is negative"},
		{[]string{"--grace", "11s", name, "--", "true"}, "--grace 11s is more than a third of --lease 30s"},
		{[]string{"--lease", "3s", "--grace", "1001ms", name, "--", "true"}, "--grace 1.001s is more than a third of --lease 3s"},
		{[]string{"--nope", name, "--", "true"}, "flag provided but not defined"},
		{[]string{"--elect", "--permits", "2", name, "--", "true"}, "--elect and --permits exclude each other"},
		{[]string{"--value", "v", name, "--", "true"}, "--value is the leader's: give --elect"},
		{[]string{"--elect", "--wait", "0", name, "--", "true"}, "--wait 0 does not go with --elect"},
	} {
		args := append(append([]string{"run"}, r...), tc.args...)
		code, stdout, stderr := aqsRun(t.Context(), nil, args...)
		assert.Equal(t, exitRunFailed, code, "%q", tc.args)
		assert.Contains(t, stderr, tc.stderr, "%q", tc.args)
		assert.Empty(t, stdout, "%q: the command is not run", tc.args)
	}
	for _, tc := range []struct {
		args   []string
		vars   map[string]string
		stderr string
	}{
		{[]string{"run", name, "--", "true"}, nil, "no Redis address: give --redis host:port or set REDIS_URL"},
		{[]string{"run", "--redis", "localhost", name, "--", "true"}, nil, `bad Redis address "localhost"`},
		{[]string{"run", name, "--", "true"}, map[string]string{"REDIS_URL": "http://x:1"}, "bad Redis URL"},
		{[]string{"run", "--prefix", "a{b", "--redis", srv.Addr(), name, "--", "true"}, nil, "--prefix"},
	} {
		code, _, stderr := aqsRun(t.Context(), tc.vars, tc.args...)
		assert.Equal(t, exitRunFailed, code, "%q", tc.args)
		assert.Contains(t, stderr, tc.stderr, "%q", tc.args)
	}
	requireFree(t, srv, name)

	code, _, stderr := aqsRun(t.Context(), nil, "run", "-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, stderr, "Usage: aqs run [flags] NAME -- command [args...]")
	for _, s := range []string{"-permits K", "-elect", "-value value", "-wait duration", "-lease lease", "-grace duration", "-redis address", "-prefix prefix",
		"75 ", "76 ", "125 ", "126 ", "127 ", "128+N", "AQS_FENCING_TOKEN", "AQS_PERMIT_ID", "AQS_NAME"} {
		assert.Contains(t, stderr, s)
	}
}

func TestRunPassesTheCommandsExitStatusAndEnvironmentThrough(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	run := func(args ...string) (int, string, string) {
		return aqsRun(t.Context(), nil, append([]string{"run", "--redis", srv.Addr(), name, "--"}, args...)...)
	}
	code, stdout, stderr := run("sh", "-c", `echo "$AQS_NAME $AQS_FENCING_TOKEN"; echo "to stderr" >&2`)
	require.Equal(t, 0, code, stderr)
	words := strings.Fields(stdout)
	require.Len(t, words, 2, stdout)
	assert.Equal(t, name, words[0])
	_, err := strconv.ParseInt(words[1], 10, 64)
	require.NoError(t, err, "the fencing token: %q", words[1])
	assert.Equal(t, "to stderr\n", stderr, "the command's stderr, and nothing of aqs run's")

	for _, tc := range []struct {
		script string
		code   int
	}{
		{"exit 0", 0},
		{"exit 3", 3},
		{"exit 76", 76},
		{"kill -KILL $$", 128 + 9},
		{"kill -TERM $$", 128 + 15},
	} {
		code, _, stderr := run("sh", "-c", tc.script)
		assert.Equal(t, tc.code, code, "%s: %s", tc.script, stderr)
	}
	requireFree(t, srv, name)
}

func TestRunCommandEnvironmentHoldsThisHoldsVariablesOnly(t *testing.T) {
	t.Parallel()
	// An aqs run inside another's command: the outer hold's variables do not leak in.
	outer := []string{"HOME=/root", "AQS_NAME=outer", "AQS_FENCING_TOKEN=7", "AQS_PERMIT_ID=x:1", "AQS_NAMES=kept"}
	assert.Equal(t, []string{"HOME=/root", "AQS_NAMES=kept", "AQS_PERMIT_ID=y:2", "AQS_NAME=inner"},
		commandEnv(outer, []string{"AQS_PERMIT_ID=y:2", "AQS_NAME=inner"}))
}

// semaphoreKeys returns the keys of the leased semaphore name.
func semaphoreKeys(t *testing.T, srv *redistest.Server, name string) []string {
	c := newAdminClient(t, srv)
	l, err := semaphore.NewLeased(c, name)
	require.NoError(t, err)
	return l.Keys()
}

func TestRunReportsACommandThatCannotStartWithoutTakingTheName(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(plain, []byte("echo hi\n"), 0o644))
	for _, tc := range []struct {
		cmd    string
		code   int
		stderr string
	}{
		{"no-such-command-" + name, exitNotFound, "executable file not found"},
		{filepath.Join(dir, "missing"), exitNotFound, "no such file"},
		{plain, exitCannotExecute, "permission denied"},
		{dir, exitCannotExecute, "is a directory"},
	} {
		code, stdout, stderr := aqsRun(t.Context(), nil, "run", "--redis", srv.Addr(), name, "--", tc.cmd)
		assert.Equal(t, tc.code, code, tc.cmd)
		assert.Contains(t, stderr, tc.stderr, tc.cmd)
		assert.Empty(t, stdout, tc.cmd)
	}
	requireFree(t, srv, name)
}

func TestRunNotAcquiredWithinTheWaitExits75AndLeavesTheQueue(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	l, err := fair.New(newAdminClient(t, srv), name)
	require.NoError(t, err)
	held, err := l.Lock(t.Context())
	require.NoError(t, err)
	for _, wait := range []string{"0", "150ms"} {
		code, stdout, stderr := aqsRun(t.Context(), nil, "run", "--redis", srv.Addr(), "--wait", wait, name, "--", "echo", "ran")
		assert.Equal(t, exitNotAcquired, code, wait)
		assert.Empty(t, stdout, wait)
		assert.Contains(t, stderr, fmt.Sprintf("lock %q", name), wait)
		st := stateOf(t, srv, name)
		assert.Empty(t, st.Waiters, "%s: nothing left in the queue", wait)
		assert.Len(t, st.Holders, 1, wait)
	}
	require.NoError(t, l.Unlock(held))
	code, stdout, stderr := aqsRun(t.Context(), nil, "run", "--redis", srv.Addr(), "--wait", "0", name, "--", "echo", "ran")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "ran\n", stdout)

	// A permit, the same way.
	sname := redistest.Name(t)
	s, err := semaphore.NewLeased(newAdminClient(t, srv), sname)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Client(t).Del(context.Background(), s.Keys()...) })
	_, err = s.TrySetPermits(t.Context(), 1)
	require.NoError(t, err)
	p, err := s.Acquire(t.Context(), 1)
	require.NoError(t, err)
	code, _, stderr = aqsRun(t.Context(), nil, "run", "--redis", srv.Addr(), "--permits", "1", "--wait", "100ms", sname, "--", "true")
	assert.Equal(t, exitNotAcquired, code, stderr)
	assert.Contains(t, stderr, fmt.Sprintf("a permit of leased semaphore %q not acquired within 100ms", sname))
	require.NoError(t, s.Release(t.Context(), p))
	assert.Empty(t, stateOf(t, srv, sname).Waiters)
}

func TestRunPermitsSetTheSizeOnceAndRefuseAnother(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	keys := semaphoreKeys(t, srv, name)
	t.Cleanup(func() { srv.Client(t).Del(context.Background(), keys...) })
	code, stdout, stderr := aqsRun(t.Context(), nil, "run", "--redis", srv.Addr(), "--permits", "2", name, "--", "sh", "-c", `echo "$AQS_PERMIT_ID"`)
	require.Equal(t, 0, code, stderr)
	assert.Regexp(t, `^\S+:\d+\n$`, stdout)
	st := stateOf(t, srv, name)
	assert.Equal(t, &permitCounts{Set: true, Total: 2, Available: 2}, st.Permits)

	code, stdout, stderr = aqsRun(t.Context(), nil, "run", "--redis", srv.Addr(), "--permits", "3", name, "--", "echo", "ran")
	assert.Equal(t, exitRunFailed, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, fmt.Sprintf("leased semaphore %q has 2 permits, not 3: give --permits 2", name))
	assert.Equal(t, st.Permits, stateOf(t, srv, name).Permits, "unchanged")

	// A lock's name is no semaphore's, nor the other way round.
	code, _, stderr = aqsRun(t.Context(), nil, "run", "--redis", srv.Addr(), name, "--", "echo", "ran")
	assert.Equal(t, exitRunFailed, code)
	assert.Contains(t, stderr, name+" is a leased semaphore, not a lock")
	lname := redistest.Name(t)
	l, err := fair.New(newAdminClient(t, srv), lname)
	require.NoError(t, err)
	held, err := l.Lock(t.Context())
	require.NoError(t, err)
	code, _, stderr = aqsRun(t.Context(), nil, "run", "--redis", srv.Addr(), "--permits", "2", lname, "--", "echo", "ran")
	assert.Equal(t, exitRunFailed, code)
	assert.Contains(t, stderr, lname+" is a lock, not a leased semaphore")
	require.NoError(t, l.Unlock(held))
}

// interval is one run of a command: its start and end events' positions in the events file.
type interval struct {
	id         string
	start, end int
}

// intervals parses events "start_ID", "end_ID" into the intervals of each ID, in start order.
func intervals(t *testing.T, lines []string) []interval {
	t.Helper()
	var out []interval
	open := map[string]int{}
	for i, l := range lines {
		kind, id, ok := strings.Cut(l, "_")
		require.True(t, ok, "event %q", l)
		switch kind {
		case "start":
			_, dup := open[id]
			require.False(t, dup, "%s started twice", id)
			open[id] = len(out)
			out = append(out, interval{id: id, start: i, end: -1})
		case "end":
			j, ok := open[id]
			require.True(t, ok, "%s ended before it started", id)
			out[j].end = i
			delete(open, id)
		}
	}
	require.Empty(t, open, "started and never ended")
	return out
}

// maxOverlap returns the most intervals running at once.
func maxOverlap(lines []string, ivs []interval) int {
	most, now := 0, 0
	starts, ends := map[int]bool{}, map[int]bool{}
	for _, iv := range ivs {
		starts[iv.start], ends[iv.end] = true, true
	}
	for i := range lines {
		if starts[i] {
			now++
		}
		if ends[i] {
			now--
		}
		most = max(most, now)
	}
	return most
}

func TestRunTwoContendersNeverOverlapAndTheirTokensIncrease(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	path, file := eventsFile(t)
	// Each command's run lasts a little, so that overlapping runs would show.
	script := `echo "start $AQS_FENCING_TOKEN" >> ` + file + `; sleep 0.05; echo "end $AQS_FENCING_TOKEN" >> ` + file
	const runs = 4
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for range runs {
				assert.Equal(t, 0, startRun(t, "--redis", srv.Addr(), name, "--", "sh", "-c", script).wait(t))
			}
		})
	}
	wg.Wait()
	lines := events(t, path)
	ivs := intervals(t, lines)
	require.Len(t, ivs, 2*runs, "%q", lines)
	assert.Equal(t, 1, maxOverlap(lines, ivs), "%q", lines)
	var last int64
	for _, iv := range ivs {
		token, err := strconv.ParseInt(iv.id, 10, 64)
		require.NoError(t, err, iv.id)
		assert.Greater(t, token, last, "tokens increase from hold to hold: %q", lines)
		last = token
	}
	requireFree(t, srv, name)
}

func TestRunServesWaitingRunsInArrivalOrder(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	path, file := eventsFile(t)
	run := func(id string) *aqsProc {
		// The command holds the lock until its stdin (aqs run's) ends.
		return startRun(t, "--redis", srv.Addr(), name, "--", "sh", "-c",
			`echo "start `+id+`" >> `+file+`; echo holding; read x; echo "end `+id+`" >> `+file)
	}
	first := run("A")
	first.expect(t, "holding")
	ids := []string{"B", "C", "D", "E"}
	var procs []*aqsProc
	for i, id := range ids {
		p := run(id)
		procs = append(procs, p)
		waitState(t, srv, name, id+" queued", waitingN(i+1))
		p.stdin.Close() // its command runs straight through once it has the lock
	}
	first.stdin.Close()
	assert.Equal(t, 0, first.wait(t))
	for _, p := range procs {
		assert.Equal(t, 0, p.wait(t))
	}
	lines := events(t, path)
	ivs := intervals(t, lines)
	var order []string
	for _, iv := range ivs {
		order = append(order, iv.id)
	}
	assert.Equal(t, append([]string{"A"}, ids...), order, "%q", lines)
	assert.Equal(t, 1, maxOverlap(lines, ivs), "%q", lines)
	requireFree(t, srv, name)
}

func TestRunPermitsLetAtMostKCommandsRunAtOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	keys := semaphoreKeys(t, srv, name)
	t.Cleanup(func() { srv.Client(t).Del(context.Background(), keys...) })
	path, file := eventsFile(t)
	var procs []*aqsProc
	for range 4 {
		procs = append(procs, startRun(t, "--redis", srv.Addr(), "--permits", "2", name, "--", "sh", "-c",
			`echo "start $AQS_PERMIT_ID" >> `+file+`; read x; echo "end $AQS_PERMIT_ID" >> `+file))
	}
	// Two commands hold their permits until their stdin ends; the other two wait.
	waitState(t, srv, name, "two waiting", waitingN(2))
	lines := waitEvents(t, path, "start", 2)
	assert.Len(t, stateOf(t, srv, name).Holders, 2)
	assert.Len(t, lines, 2, "%q", lines)
	for _, p := range procs {
		p.stdin.Close()
	}
	for _, p := range procs {
		assert.Equal(t, 0, p.wait(t))
	}
	lines = events(t, path)
	ivs := intervals(t, lines)
	require.Len(t, ivs, 4, "%q", lines)
	assert.Equal(t, 2, maxOverlap(lines, ivs), "%q", lines)
	assert.Equal(t, int64(2), stateOf(t, srv, name).Permits.Available)
}

// trapScript is a command that prints "ready" once it traps SIGTERM, SIGINT and SIGHUP, then
// waits; trapped, it prints "trapped NAME" and exits 0. Its sleep runs in the background,
// where wait returns as soon as a trapped signal comes (a foreground sleep would delay the
// trap until it ends, should the signal come before it started).
const trapScript = `trap 'echo "trapped $AQS_NAME"; kill $! 2>/dev/null; exit 0' TERM INT HUP; ` +
	`sleep 30 </dev/null >/dev/null 2>&1 & echo ready; wait; echo "not stopped"`

func TestRunPassesSignalsOnToTheCommandAndExitsWithItsStatus(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGTSTP} {
		t.Run(signalName(sig), func(t *testing.T) {
			t.Parallel()
			name := redistest.Name(t)
			p := startRun(t, "--redis", srv.Addr(), name, "--", "sh", "-c", trapScript)
			p.expect(t, "ready")
			require.NoError(t, p.signal(sig))
			if sig == syscall.SIGTSTP {
				// Ignored: nothing reaches the command, which is stopped for good below.
				require.NoError(t, p.signal(syscall.SIGTERM))
			}
			p.expect(t, "trapped "+name)
			assert.Equal(t, 0, p.wait(t), "the command's status")
			requireFree(t, srv, name)
		})
	}
}

func TestRunAsAProcessPassesSIGTERMOnToTheCommand(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	p, _ := startAqs(t, "run", "--redis", srv.Addr(), name, "--", "sh", "-c", trapScript)
	p.expect(t, "ready")
	require.NoError(t, p.signal(syscall.SIGTERM))
	p.expect(t, "trapped "+name)
	assert.Equal(t, 0, p.wait(t), "the command's status")
	requireFree(t, srv, name)
}

func TestRunInterruptedWhileWaitingDoesNotRunTheCommandAndLeavesTheQueue(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	l, err := fair.New(newAdminClient(t, srv), name)
	require.NoError(t, err)
	held, err := l.Lock(t.Context())
	require.NoError(t, err)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		p := startRun(t, "--redis", srv.Addr(), name, "--", "echo", "ran")
		waitState(t, srv, name, "queued", waitingN(1))
		require.NoError(t, p.signal(sig))
		assert.Equal(t, 128+int(sig), p.wait(t))
		_, ran := <-p.lines
		assert.False(t, ran, "the command did not run")
		assert.Contains(t, p.stderr.String(), fmt.Sprintf("interrupted by %s while waiting for lock %q: the command was not run", signalName(sig), name))
		assert.Empty(t, stateOf(t, srv, name).Waiters)
	}
	require.NoError(t, l.Unlock(held))
}

// alive reports whether the process pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, after, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(after, "Z")
}

func TestRunKilledFreesTheNameWithinTheLeaseAndKillsItsCommand(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	const lease = time.Second
	first, cmd := startAqs(t, "run", "--redis", srv.Addr(), "--lease", lease.String(), name, "--", "sh", "-c", `echo "ready $$"; exec sleep 30`)
	pid, err := strconv.Atoi(strings.TrimPrefix(first.expect(t, "ready "), "ready "))
	require.NoError(t, err)
	second := startRun(t, "--redis", srv.Addr(), name, "--", "echo", "second")
	waitState(t, srv, name, "second queued", waitingN(1))

	require.NoError(t, cmd.Process.Kill())
	killed := time.Now()
	second.expect(t, "second")
	took := time.Since(killed)
	t.Logf("the second run got %s %v after the first was killed (lease %v)", name, took, lease)
	assert.Less(t, took, lease+time.Second, "within about the lease")
	assert.Equal(t, 0, second.wait(t))
	first.wait(t)
	if runtime.GOOS == "linux" {
		// The command got SIGKILL with aqs run (a parent-death signal).
		require.Eventually(t, func() bool { return !alive(pid) }, runWithin, 5*time.Millisecond, "the command %d outlived aqs run", pid)
	}
}

// cutProxy is a TCP proxy to Redis that can be cut: every connection closed, and new ones
// refused, as when the network to Redis fails.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

// newCutProxy starts a proxy to target on a free loopback port; it is cut at the end of the
// test.
func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(p.cut)
	return p
}

func (p *cutProxy) Addr() string { return p.ln.Addr().String() }

func (p *cutProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // cut
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Go(func() { io.Copy(s, c); s.Close(); c.Close() })
		p.wg.Go(func() { io.Copy(c, s); s.Close(); c.Close() })
	}
}

// cut closes the listener and every connection, and waits for the copies to end.
func (p *cutProxy) cut() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func TestRunStopsTheCommandBeforeAnotherHolderStartsWhenRenewalsFail(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	const term = `trap 'echo "term" >> "$EVENTS"; exit 0' TERM`
	for _, tc := range []struct {
		name string
		trap string   // the command's reaction to SIGTERM
		hold []string // the first run's flags for what it holds
		what string
	}{
		{"SIGTERM", term, nil, "lock %q"},
		{"SIGKILL", `trap '' TERM`, nil, "lock %q"}, // ignored, by sleep too: SIGKILL ends them
		{"elect", term, []string{"--elect"}, "the leadership of election %q"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name := redistest.Name(t)
			path, file := eventsFile(t)
			proxy := newCutProxy(t, srv.Addr())
			// A lease of 2s keeps the test short, and its grace (600ms) leaves a trapped command
			// time to run on a busy machine.
			args := append([]string{"--redis", proxy.Addr(), "--lease", "2s", "--grace", "600ms"}, tc.hold...)
			first := startRun(t, append(args, name, "--", "sh", "-c",
				`EVENTS=`+file+`; `+tc.trap+`; echo "start $AQS_FENCING_TOKEN" >> `+file+`; echo ready; `+
					`while :; do echo alive >> `+file+`; sleep 0.05; done`)...)
			first.expect(t, "ready")
			second := startRun(t, append(tc.hold, "--redis", srv.Addr(), name, "--", "sh", "-c", `echo "second $AQS_FENCING_TOKEN" >> `+file)...)
			waitState(t, srv, name, "second queued", waitingN(1))

			proxy.cut()
			assert.Equal(t, exitLockLost, first.wait(t))
			assert.Contains(t, first.stderr.String(), fmt.Sprintf("the lease of "+tc.what+" could not be renewed", name))
			assert.Equal(t, 0, second.wait(t))

			lines := events(t, path)
			last := -1
			for i, l := range lines {
				if l == "alive" {
					last = i
				}
			}
			i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "second_") })
			require.GreaterOrEqual(t, i, 0, "%q", lines)
			require.Greater(t, i, last, "the first command still ran when the second started: %q", lines)
			assert.Equal(t, i, len(lines)-1, "%q", lines)
			if tc.name != "SIGKILL" {
				assert.Contains(t, lines, "term", "the command had its grace")
			} else {
				assert.Contains(t, first.stderr.String(), "SIGKILL")
			}
			t1, err := strconv.ParseInt(strings.TrimPrefix(lines[0], "start_"), 10, 64)
			require.NoError(t, err, lines[0])
			t2, err := strconv.ParseInt(strings.TrimPrefix(lines[i], "second_"), 10, 64)
			require.NoError(t, err, lines[i])
			assert.Greater(t, t2, t1, "tokens increase")
		})
	}
}

func TestRunStopsTheCommandWhenTheLockIsForciblyUnlocked(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	p := startRun(t, "--redis", srv.Addr(), "--lease", "2s", name, "--", "sh", "-c", trapScript)
	p.expect(t, "ready")
	unlockYes(t, srv, name)
	p.expect(t, "trapped "+name)
	assert.Equal(t, exitLockLost, p.wait(t))
	assert.Contains(t, p.stderr.String(), fmt.Sprintf("lost lock %q (aqs: lock lost): stopping the command (SIGTERM, SIGKILL in ", name))
	requireFree(t, srv, name)
}

func TestRunElectRunsTheCommandWhileLeadingAndCandidatesLeadInTurn(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	run := func(value string) *aqsProc {
		// The command leads until its stdin (aqs run's) ends.
		return startRun(t, "--redis", srv.Addr(), "--elect", "--value", value, name, "--", "sh", "-c",
			`echo "leading $AQS_FENCING_TOKEN"; read x || true`)
	}
	first := run("first")
	t1, err := strconv.ParseInt(strings.TrimPrefix(first.expect(t, "leading "), "leading "), 10, 64)
	require.NoError(t, err)
	st := stateOf(t, srv, name)
	require.NotNil(t, st.Leader)
	assert.Equal(t, "first", st.Leader.Value)
	assert.Equal(t, t1, st.Leader.Token, "the command's token is the leader's")

	second := run("second")
	waitState(t, srv, name, "second queued", waitingN(1))
	// Another candidate, and the fair lock of the name, wait behind them.
	for _, args := range [][]string{{"--elect"}, nil} {
		code, stdout, stderr := aqsRun(t.Context(), nil, append(append([]string{"run", "--redis", srv.Addr(), "--wait", "100ms"}, args...),
			name, "--", "echo", "ran")...)
		assert.Equal(t, exitNotAcquired, code, "%q: %s", args, stderr)
		assert.Empty(t, stdout)
	}

	first.stdin.Close()
	assert.Equal(t, 0, first.wait(t))
	t2, err := strconv.ParseInt(strings.TrimPrefix(second.expect(t, "leading "), "leading "), 10, 64)
	require.NoError(t, err)
	assert.Greater(t, t2, t1, "every later leader's token is greater")
	assert.Equal(t, "second", stateOf(t, srv, name).Leader.Value)
	second.stdin.Close()
	assert.Equal(t, 0, second.wait(t))
	requireNoLeader(t, srv, name)
}

func TestRunElectStopsTheCommandWhenTheLeadershipIsForciblyEnded(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name := redistest.Name(t)
	p := startRun(t, "--redis", srv.Addr(), "--lease", "2s", "--elect", name, "--", "sh", "-c", trapScript)
	p.expect(t, "ready")
	host, err := os.Hostname()
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("%s:%d", host, os.Getpid()), stateOf(t, srv, name).Leader.Value, "the default value")
	unlockYes(t, srv, name)
	p.expect(t, "trapped "+name)
	assert.Equal(t, exitLockLost, p.wait(t))
	assert.Contains(t, p.stderr.String(), fmt.Sprintf("lost the leadership of election %q (aqs: lock lost): stopping the command", name))
	requireNoLeader(t, srv, name)
}
