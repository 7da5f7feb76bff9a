package reentrant_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/redistest"
	"github.com/redaqs/aqs/reentrant"
)

// Tests across OS processes. Each child is this test binary run again in a role of
// helper_test.go; see there for the protocol.

func TestProcessesAndGoroutinesNeverOverlapInTheCriticalSection(t *testing.T) {
	const processes, goroutines, rounds = 3, 4, 20
	t.Run("single", func(t *testing.T) {
		srv := redistest.Single(t)
		contendAcrossProcesses(t, srv.Client(t), processes, goroutines, rounds, helperAddrEnv+"="+srv.Addr())
	})
	t.Run("cluster", func(t *testing.T) {
		c := redistest.Cluster(t)
		contendAcrossProcesses(t, c.Client(t), processes, goroutines, rounds,
			helperClusterEnv+"="+strings.Join(c.Addrs(), ","))
	})
}

// contendAcrossProcesses starts the contenders, lets them go at once, and checks the books
// they kept in Redis.
func contendAcrossProcesses(t *testing.T, rdb redis.UniversalClient, processes, goroutines, rounds int, addrEnv string) {
	ctx := context.Background()
	name := redistest.Name(t)
	l, err := reentrant.New(newClient(t, rdb), name)
	require.NoError(t, err)
	keys := keysOf(l)
	t.Cleanup(func() { rdb.Del(ctx, keys.all()...) }) // after the children are gone

	children := make([]*helperChild, processes)
	for i := range children {
		children[i] = startHelper(t, fmt.Sprintf("contender %d", i), roleContend, addrEnv,
			helperLockEnv+"="+name,
			helperGoroutinesEnv+"="+strconv.Itoa(goroutines),
			helperRoundsEnv+"="+strconv.Itoa(rounds))
	}
	for _, c := range children {
		c.expectLine(t, lineReady, 30*time.Second)
	}
	began := time.Now()
	for _, c := range children {
		_, err := fmt.Fprintln(c.stdin, lineGo)
		require.NoError(t, err)
	}
	reported := 0
	for _, c := range children {
		n, err := strconv.Atoi(c.expectLine(t, lineDone+" ", time.Minute))
		require.NoError(t, err)
		reported += n
		require.NoError(t, c.wait(t, 10*time.Second), "%s failed", c.label)
	}
	took := time.Since(began)

	count := func(key string) int {
		t.Helper()
		n, err := rdb.Get(ctx, key).Int()
		if errors.Is(err, redis.Nil) {
			return 0
		}
		require.NoError(t, err)
		return n
	}
	want := processes * goroutines * rounds
	overlaps, completed := count(keys.overlaps), count(keys.completed)
	regressions, switches := count(keys.regressions), count(keys.switches)
	t.Logf("%d processes × %d goroutines × %d rounds: %d critical sections in %v, %d overlaps, "+
		"%d fencing-token regressions, %d hand-overs between processes",
		processes, goroutines, rounds, completed, took.Round(time.Millisecond), overlaps, regressions, switches)
	assert.Zero(t, overlaps, "holders overlapped in the critical section")
	assert.Zero(t, count(keys.inside), "someone is still inside")
	assert.Equal(t, want, completed, "critical sections completed (Redis)")
	assert.Equal(t, want, reported, "critical sections completed (children)")
	assert.Zero(t, regressions, "a holder's fencing token was not above its predecessor's")
	locked, err := l.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked, "the lock is free once every contender is done")

	require.NoError(t, rdb.Del(ctx, keys.all()...).Err())
	t.Run("LeavesNoKeyWithoutTTL", func(t *testing.T) { assertNoKeyWithoutTTL(t, rdb, name, l.Key()) })
}

func TestKillDashNineOfHolderFreesLockWithinWatchdogTimeout(t *testing.T) {
	const (
		timeout = time.Second
		// tolerance covers the acquire round trips and scheduling of a loaded machine under
		// -race; the waiter's wake-up itself is due when the lease ends.
		tolerance = 500 * time.Millisecond
	)
	ctx := context.Background()
	srv := redistest.Single(t)
	rdb := srv.Client(t)
	name := redistest.Name(t)
	holder := startHelper(t, "holder", roleHold, helperAddrEnv+"="+srv.Addr(),
		helperLockEnv+"="+name, helperWatchdogEnv+"="+timeout.String())
	holderToken, err := strconv.ParseInt(holder.expectLine(t, lineHeld+" ", 30*time.Second), 10, 64)
	require.NoError(t, err)

	c := newClient(t, rdb, aqs.WithWatchdogTimeout(timeout))
	l, err := reentrant.New(c, name)
	require.NoError(t, err)
	info, err := l.Info(ctx)
	require.NoError(t, err)
	require.True(t, info.Locked)
	assert.False(t, strings.HasPrefix(info.Holder, c.ID()+":"), "the holder is the child, not us")
	assert.Equal(t, 2, info.HoldCount, "the child re-entered its hold")
	assert.Equal(t, holderToken, info.Token)

	// The child's watchdog keeps the hold past its lease, so what frees it below is the kill.
	_, ok, err := l.TryLock(ctx, aqs.WithWait(timeout+timeout/2))
	require.NoError(t, err)
	require.False(t, ok, "the lock was free while its holder was alive")

	type result struct {
		held context.Context
		err  error
		at   time.Time
	}
	got := make(chan result, 1)
	waitCtx, cancel := context.WithTimeout(ctx, timeout+10*time.Second)
	defer cancel()
	go func() {
		held, err := l.Lock(waitCtx)
		got <- result{held, err, time.Now()}
	}()
	waitForWaiters(t, c, 1)
	select {
	case r := <-got:
		t.Fatalf("the waiter got the lock before the kill: %v", r.err)
	default:
	}

	lease, err := l.RemainingLease(ctx)
	require.NoError(t, err)
	killed := time.Now()
	require.NoError(t, holder.cmd.Process.Kill())
	var exit *exec.ExitError
	require.ErrorAs(t, holder.wait(t, 10*time.Second), &exit)
	assert.Equal(t, -1, exit.ExitCode(), "the holder ended by a signal: %v", exit)

	var r result
	select {
	case r = <-got:
	case <-time.After(timeout + 10*time.Second):
		t.Fatal("the waiter never got the lock")
	}
	require.NoError(t, r.err)
	after := r.at.Sub(killed)
	t.Logf("waiter got the lock %v after kill -9; watchdog timeout %v, lease left at the kill %v",
		after.Round(time.Millisecond), timeout, lease)
	assert.LessOrEqual(t, after, timeout+tolerance, "the dead holder's lock outlived the watchdog timeout")
	token, err := l.Token(r.held)
	require.NoError(t, err)
	assert.Greater(t, token, holderToken, "the new hold is fenced above the dead one")
	require.NoError(t, l.Unlock(r.held))

	t.Run("LeavesNoKeyWithoutTTL", func(t *testing.T) { assertNoKeyWithoutTTL(t, rdb, name, l.Key()) })
}

// assertNoKeyWithoutTTL checks every key whose name contains name, on every master: each must
// expire (a released lock leaves no key at all). A probe key in the lock's slot, set with a TTL
// just before the scan, must be among them, so that a wrong pattern cannot pass unseen.
func assertNoKeyWithoutTTL(t *testing.T, rdb redis.UniversalClient, name, lockKey string) {
	t.Helper()
	probe := lockKey + ":probe"
	require.NoError(t, rdb.Set(context.Background(), probe, "x", time.Minute).Err())
	defer rdb.Del(context.Background(), probe)
	var (
		mu        sync.Mutex
		seen      = map[string]time.Duration{}
		persisted []string
	)
	scan := func(ctx context.Context, node *redis.Client) error {
		iter := node.Scan(ctx, 0, "*"+name+"*", 100).Iterator()
		for iter.Next(ctx) {
			key := iter.Val()
			pttl, err := node.PTTL(ctx, key).Result()
			if err != nil {
				return err
			}
			if pttl == -2 { // gone since the scan saw it
				continue
			}
			mu.Lock()
			seen[key] = pttl
			if pttl == -1 {
				persisted = append(persisted, key)
			}
			mu.Unlock()
		}
		return iter.Err()
	}
	ctx := context.Background()
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		require.NoError(t, c.ForEachMaster(ctx, scan))
	case *redis.Client:
		require.NoError(t, scan(ctx, c))
	default:
		t.Fatalf("unexpected client %T", rdb)
	}
	t.Logf("keys left: %v", seen)
	assert.Contains(t, seen, probe, "the scan did not find the probe key")
	assert.Empty(t, persisted, "keys without a TTL")
}

// helperChild is one helper process (see helper_test.go), killed in t.Cleanup at the latest.
type helperChild struct {
	label  string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // stdout lines, closed at EOF
	stderr lockedBuffer
	exited chan struct{} // closed once Wait returned
	err    error         // Wait's error, set before exited is closed
}

// startHelper runs this test binary in role with the extra environment entries env.
func startHelper(t *testing.T, label, role string, env ...string) *helperChild {
	t.Helper()
	c := &helperChild{label: label, lines: make(chan string, 16), exited: make(chan struct{})}
	// -test.run=^$: should the role not be dispatched, the child runs no test either.
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(append(os.Environ(), helperEnv+"="+role), env...)
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
			c.lines <- sc.Text()
		}
		close(c.lines)
		c.err = c.cmd.Wait() // only after every read, as StdoutPipe requires
		close(c.exited)
	}()
	t.Cleanup(func() {
		_ = c.stdin.Close()
		_ = c.cmd.Process.Kill() // fails only when it has exited already
		// Drain what was not read, so the reader reaches EOF and Wait.
		for range c.lines {
		}
		select {
		case <-c.exited:
		case <-time.After(10 * time.Second):
			t.Errorf("%s (pid %d) did not exit after SIGKILL", c.label, c.cmd.Process.Pid)
		}
		if t.Failed() {
			t.Logf("%s (pid %d) stderr:\n%s", c.label, c.cmd.Process.Pid, c.stderr.String())
		}
	})
	return c
}

// expectLine waits for the child's next stdout line, which must start with prefix, and
// returns the rest of it.
func (c *helperChild) expectLine(t *testing.T, prefix string, within time.Duration) string {
	t.Helper()
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

// wait waits for the child to exit and returns Wait's error. It expects no more output.
func (c *helperChild) wait(t *testing.T, within time.Duration) error {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	lines := c.lines
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
