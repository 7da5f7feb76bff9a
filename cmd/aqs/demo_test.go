package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// smallDemo keeps demo runs short under -race: every scenario still runs in several processes
// and the pool still loses a worker process, whose 1s lease the run then waits out. Its jobs
// take 67ms at least, so that the kill, which follows the start of one of them, falls in it
// even on a loaded machine.
var smallDemo = []string{
	"--processes", "2",
	"--buyers", "2", "--tickets", "30",
	"--readers", "2", "--writes", "3",
	"--workers", "2", "--permits", "2", "--jobs", "9", "--job-time", "100ms", "--lease", "1s",
	"--carts", "4", "--skus", "4", "--items", "3", "--batch", "3",
}

// demoArgs returns the demo's command line for scenarios ("all" or a list) at smallDemo's
// size, with a name of the test's own.
func demoArgs(t *testing.T, scenarios string, extra ...string) (name string, args []string) {
	name = redistest.Name(t)
	args = append([]string{"demo", "--name", name, "--scenario", scenarios}, smallDemo...)
	return name, append(args, extra...)
}

// checkRow matches one row of the summary table: its figure, value and check.
func checkRow(what, value, check string) *regexp.Regexp {
	if check != "" {
		check = `\s+` + check
	}
	return regexp.MustCompile(`(?m)^  (?:\w+)?\s+` + regexp.QuoteMeta(what) + `\s+` + value + check + `$`)
}

// assertTicketsOK checks the summary rows of the ticket sales at smallDemo's size.
func assertTicketsOK(t *testing.T, stdout string) {
	t.Helper()
	assert.Regexp(t, checkRow("tickets sold", `30 of 30, 0 left, in \S+ \(\d+/s\), 4 buyers in 2 processes`, "ok"), stdout)
	assert.Regexp(t, checkRow("oversold", `0 \(sales beyond the tickets\), 0 tickets sold twice`, "ok"), stdout)
	assert.Regexp(t, checkRow("FIFO violations", `0 in \d+ visits, \d+ \(served, queued before\) pairs checked`, "ok"), stdout)
	assert.Contains(t, stdout, "sold 30/30")
	assert.Contains(t, stdout, "FIFO violations: a buyer served (given the lock) while a buyer that was already")
}

// assertConfigOK checks the summary rows of the shared configuration at smallDemo's size.
func assertConfigOK(t *testing.T, stdout string) {
	t.Helper()
	assert.Regexp(t, checkRow("reads", `[1-9]\d* in \S+ \(\d+/s\), 4 readers in 2 processes`, ""), stdout)
	assert.Regexp(t, checkRow("writes", `3 of 3, configuration version 3`, "ok"), stdout)
	assert.Regexp(t, checkRow("torn reads", `0`, "ok"), stdout)
	assert.Regexp(t, checkRow("writer's longest wait", `\S+ for the write lock \(mean \S+\)`, ""), stdout)
	assert.Contains(t, stdout, "write  3/3")
}

// assertPoolOK checks the summary rows of the worker pool at smallDemo's size.
func assertPoolOK(t *testing.T, stdout string) {
	t.Helper()
	assert.Regexp(t, checkRow("jobs done", `(9|[1-9]\d+) in \S+ by 4 workers in 2 processes`, ""), stdout)
	assert.Regexp(t, checkRow("highest concurrency", `[12] jobs at once \(K=2\)`, "ok"), stdout)
	assert.Regexp(t, checkRow("killed mid-job", `process 2 \(pid \d+\), by SIGKILL with [12] jobs? in progress`, "ok"), stdout)
	assert.Regexp(t, checkRow("permit back", `\S+ after the kill \(lease 1s; \S+ left at the kill\)`, "ok"), stdout)
	assert.Regexp(t, checkRow("permits at the end", `2 of 2 available`, "ok"), stdout)
	assert.Contains(t, stdout, "SIGKILL to process 2")
}

// assertInventoryOK checks the summary rows of the inventory reservation at smallDemo's size:
// its carts (at 4 SKUs, 8 units in stock each), then its restocking.
func assertInventoryOK(t *testing.T, stdout string) {
	t.Helper()
	assert.Regexp(t, checkRow("carts reserved", `16 of 16: \d+ bought whole, \d+ refused whole \(a SKU sold out\), in \S+, 4 buyers in 2 processes`, "ok"), stdout)
	assert.Regexp(t, checkRow("SKUs oversold", `0 \(units beyond a SKU's stock\); on each of 4 SKUs stock \+ sold = 7, lowest \d+; \d sold out`, "ok"), stdout)
	assert.Regexp(t, checkRow("SKUs held twice at once", `0 in [1-9]\d* holds of a SKU`, "ok"), stdout)
	assert.Regexp(t, checkRow("carts deadlocked", `0: every Lock returned; longest wait \S+`, "ok"), stdout)
	assert.Regexp(t, checkRow("FIFO violations among carts", `0 in 16 carts, \d+ \(cart, cart queued before it on a shared SKU\) pairs checked`, "ok"), stdout)
	assert.Regexp(t, checkRow("carts in one order", `yes: the holders of the 4 SKUs fit one order of the carts; 0 in cycles, 0 misplaced`, "ok"), stdout)
	assert.Regexp(t, checkRow("cart sizes", `1 SKU: \d+, 2: \d+, 3: \d+, 4: \d+`, ""), stdout)
	assert.Regexp(t, checkRow("longest wait for a cart", `\S+ \(cart p\d/b\d#\d\); p50 \S+ of 16 carts`, ""), stdout)
	assert.Contains(t, stdout, "cart 16/16")
	assert.Contains(t, stdout, "FIFO violations among carts: a cart that holds its SKUs while a cart that was already")
	assert.Regexp(t, checkRow("items reserved", `12 of 12 restocked, 0 in stock, in \S+, 4 buyers in 2 processes`, "ok"), stdout)
	assert.Regexp(t, checkRow("oversold", `0 \(beyond the restocked\); 12 reserved \+ 0 in stock = 12 restocked`, "ok"), stdout)
	assert.Regexp(t, checkRow("FIFO violations among waiters", `0 in [1-9]\d* wakes; 0 of [1-9]\d* reservations out of the order of their Waits`, "ok"), stdout)
	assert.Regexp(t, checkRow("left waiting with stock", `0 buyers, 0 items in stock; [1-9]\d* looks? after the last restock`, "ok"), stdout)
	assert.Regexp(t, checkRow("reserved in wait order", `(yes|no); by the first Wait for the item, \d+ of [1-9]\d* overtaken`, ""), stdout)
	assert.Regexp(t, checkRow("waits on the condition", `[1-9]\d*, of which \d+ re-waits; 0 woke without a Signal`, ""), stdout)
	assert.Regexp(t, checkRow("signals", `[1-9]\d* moved a waiter, [01]\d* found none, in \d+ restocks \(Signal per item\)`, ""), stdout)
	assert.Regexp(t, checkRow("longest wait for stock", `\S+ \(buyer p\d/b\d\); \d+ of 12 reservations waited, p50 \S+`, ""), stdout)
	assert.Regexp(t, checkRow("Signal to reservation", `p50 \S+, p99 \S+, max \S+ \(\d+ reservations\)`, ""), stdout)
	assert.Contains(t, stdout, "reserved 12/12")
	assert.NotContains(t, stdout, "STUCK")
}

// assertLeaderOK checks the summary rows of the singleton job at smallDemo's size (3
// candidates, the workers' lease 1s).
func assertLeaderOK(t *testing.T, stdout string) {
	t.Helper()
	assert.Regexp(t, checkRow("leaders", `3 in turn: p\d, p\d, p\d \(the first killed, (\d leaderships? lost, )?the others resigned\)`, ""), stdout)
	assert.Regexp(t, checkRow("two leaders at once", `never: 0 overlaps, 0 stale ticks refused, in [1-9]\d* ticks of 3 tokens`, "ok"), stdout)
	assert.Regexp(t, checkRow("takeover after SIGKILL", `\S+ \(lease 1s\)`, "ok"), stdout)
	assert.Regexp(t, checkRow("hand-off on Resign", `\S+ at most, over 1 resignation`, ""), stdout)
	assert.Regexp(t, checkRow("standbys in arrival order", `process \d, process \d`, "ok"), stdout)
	assert.Regexp(t, checkRow("observed", `3 leaders, in the order they led, by an observer`, "ok"), stdout)
	assert.Regexp(t, `SIGKILL to process \d \(pid \d+\), the leader`, stdout)
}

// workerPIDs returns the pids of the worker processes each scenario announced.
func workerPIDs(t *testing.T, stdout string) [][]int {
	t.Helper()
	var all [][]int
	for _, m := range regexp.MustCompile(`worker processes started and connected: pids ([\d, ]+)`).FindAllStringSubmatch(stdout, -1) {
		var pids []int
		for _, s := range strings.Split(m[1], ", ") {
			pid, err := strconv.Atoi(s)
			require.NoError(t, err)
			pids = append(pids, pid)
		}
		all = append(all, pids)
	}
	return all
}

// assertNoDemoKeys checks that no key of the run named name is left in Redis.
func assertNoDemoKeys(t *testing.T, srv *redistest.Server, name string) {
	t.Helper()
	keys, err := srv.Client(t).Keys(context.Background(), "*"+name+"*").Result()
	require.NoError(t, err)
	assert.Empty(t, keys, "the demo deletes its keys at the end")
}

func TestDemoRunsEveryScenarioAcrossProcessesAndEveryCheckPasses(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	name, args := demoArgs(t, "all", "--redis", srv.Addr())
	code, stdout, stderr := aqsRun(t.Context(), nil, args...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assertTicketsOK(t, stdout)
	assertConfigOK(t, stdout)
	assertPoolOK(t, stdout)
	assertInventoryOK(t, stdout)
	assertLeaderOK(t, stdout)
	assert.Contains(t, stdout, "all 23 checks passed")
	assert.NotContains(t, stdout, "FAILED")
	assert.NotContains(t, stderr, "throwaway")

	// Each scenario ran in processes of its own: 2, 2 readers and a writer, 2, the
	// inventory's 2 cart buyers' then 2 buyers' and a restocker, and 3 candidates.
	pids := workerPIDs(t, stdout)
	require.Len(t, pids, 6)
	seen := map[int]bool{os.Getpid(): true}
	for i, want := range []int{2, 3, 2, 2, 3, 3} {
		assert.Len(t, pids[i], want, "scenario %d", i+1)
		for _, pid := range pids[i] {
			assert.False(t, seen[pid], "pid %d is the test's or another worker's", pid)
			seen[pid] = true
		}
	}
	assertNoDemoKeys(t, srv, name)
}

func TestDemoFindsRedisByFlagOrREDIS_URL(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	for _, tc := range []struct {
		name string
		args []string
		vars map[string]string
	}{
		{"flag URL", []string{"--redis", "redis://" + srv.Addr() + "/0"}, nil},
		{"REDIS_URL", nil, map[string]string{"REDIS_URL": "redis://" + srv.Addr()}},
		{"flag wins over REDIS_URL", []string{"--redis", srv.Addr()}, map[string]string{"REDIS_URL": "redis://127.0.0.1:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name, args := demoArgs(t, "tickets", tc.args...)
			code, stdout, stderr := aqsRun(t.Context(), tc.vars, args...)
			require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			assertTicketsOK(t, stdout)
			assert.Contains(t, stdout, "all 3 checks passed")
			assert.Contains(t, stdout, `fair lock "`+name+`-tickets" (key aqs:{`+name+`-tickets})`)
			assert.NotContains(t, stderr, "throwaway")
			assertNoDemoKeys(t, srv, name)
		})
	}
}

func TestDemoStartsAndStopsAThrowawayServerWithoutAddress(t *testing.T) {
	t.Parallel()
	if _, err := redistest.Binary(); err != nil {
		t.Fatal(err)
	}
	_, args := demoArgs(t, "tickets,pool")
	code, stdout, stderr := aqsRun(t.Context(), nil, args...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assertTicketsOK(t, stdout)
	assertPoolOK(t, stdout)
	assert.Contains(t, stdout, "all 7 checks passed")

	m := regexp.MustCompile(`started a throwaway redis-server on (127\.0\.0\.1:\d+)`).FindStringSubmatch(stderr)
	require.NotNil(t, m, "stderr announces the server:\n%s", stderr)
	assert.Contains(t, stdout, "on Redis at "+m[1], "the workers use it too")
	assert.Contains(t, stderr, "stopped the throwaway redis-server on "+m[1])
	conn, err := net.DialTimeout("tcp", m[1], time.Second)
	if err == nil {
		conn.Close()
	}
	assert.Error(t, err, "the throwaway server is gone when the command returns")
}

func TestDemoWithoutRedisServerOnPathNamesTheInstallCommand(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("REDIS_SERVER", "")
	code, _, stderr := aqsRun(t.Context(), nil, "demo")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "redis-server not found on PATH")
	assert.Contains(t, stderr, "apt-get install -y redis-server")
	assert.Contains(t, stderr, "set REDIS_SERVER")
}

// A $REDIS_SERVER that names no executable file fails the demo with a message naming it; it is
// not silently replaced by redis-server from PATH.
func TestDemoWithABadRedisServerNamesIt(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "no-such-server")
	t.Setenv("REDIS_SERVER", bad)
	code, _, stderr := aqsRun(t.Context(), nil, "demo")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "REDIS_SERVER names no executable file")
	assert.Contains(t, stderr, bad)
	assert.NotContains(t, stderr, "throwaway")
}

// cancelWriter collects what is written to it and calls cancel once it has seen want.
type cancelWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	want   string
	cancel context.CancelFunc
}

func (w *cancelWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.cancel()
	}
	return len(p), nil
}

func (w *cancelWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func TestDemoInterruptedStopsItsWorkersAndDeletesItsKeys(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// Interrupted in the middle of the config scenario, whose readers would read until the
	// writer's 1000 writes are done.
	stdout := &cancelWriter{want: "write  1/1000", cancel: cancel}
	var stderr bytes.Buffer
	name, args := demoArgs(t, "config", "--redis", srv.Addr(), "--writes", "1000")
	code := run(ctx, args, &env{stdout: stdout, stderr: &stderr, getenv: func(string) string { return "" }, worker: testWorkers})
	require.Equal(t, 130, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr.String())
	assert.Contains(t, stderr.String(), "aqs demo: interrupted")

	pids := workerPIDs(t, stdout.String())
	require.Len(t, pids, 1)
	require.Len(t, pids[0], 3)
	for _, pid := range pids[0] {
		// The demo waited for them: they are gone, not even zombies.
		assert.True(t, errors.Is(syscall.Kill(pid, 0), syscall.ESRCH), "worker pid %d is still there", pid)
	}
	assertNoDemoKeys(t, srv, name)
}

func TestDemoCommandLineErrorsExitWithStatus2(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"--scenario", "tickets,nope"}, `unknown scenario "nope"`},
		{[]string{"--processes", "0"}, "--processes must be at least 1"},
		{[]string{"--tickets", "0"}, "--tickets must be at least 1"},
		{[]string{"--items", "0"}, "--items must be at least 1"},
		{[]string{"--batch", "-1"}, "--batch must be at least 1"},
		{[]string{"--carts", "0"}, "--carts must be at least 1"},
		{[]string{"--skus", "0"}, "--skus must be at least 1"},
		{[]string{"--candidates", "0"}, "--candidates must be at least 1"},
		{[]string{"--candidates", "1"}, "leader: --candidates must be at least 2, not 1"},
		{[]string{"--cart-deadline", "0s"}, "--cart-deadline must be positive and under 30s, not 0s"},
		{[]string{"--cart-deadline", "30s"}, "--cart-deadline must be positive and under 30s, not 30s"},
		{[]string{"--scenario", "inventory,stock"}, `unknown scenario "stock"`},
		{[]string{"--lease", "10ms"}, "--lease must be at least 30ms"},
		{[]string{"--job-time", "0s"}, "--job-time must be positive"},
		{[]string{"--processes", "1"}, "the workers outside the killed process must be at least --permits 3"},
		{[]string{"--workers", "1", "--processes", "3"}, "the workers outside the killed process must be at least --permits 3"},
	} {
		code, _, stderr := aqsRun(t.Context(), nil, append([]string{"demo"}, tc.args...)...)
		assert.Equal(t, 2, code, "%q", tc.args)
		assert.Contains(t, stderr, tc.stderr, "%q", tc.args)
	}
	// One process is enough without the pool.
	var cfg demoConfig
	cfg.processes, cfg.buyers, cfg.tickets, cfg.readers, cfg.writes, cfg.workers, cfg.permits, cfg.jobs = 1, 1, 1, 1, 1, 1, 3, 1
	cfg.items, cfg.batch, cfg.carts, cfg.skus, cfg.cartDeadline, cfg.candidates = 1, 1, 1, 1, time.Second, 1
	cfg.jobTime, cfg.lease = time.Millisecond, time.Second
	assert.NoError(t, cfg.check("tickets,config,inventory"))
}

func TestSummaryFailsWhenACheckFails(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := printSummary(&out, []scenarioRows{{"tickets", []summaryRow{
		checkedRow("tickets sold", true, "10 of 10"),
		checkedRow("oversold", false, "2").withNote("sold beyond the tickets."),
		figureRow("rate", "5/s"),
	}}})
	require.Error(t, err)
	assert.Regexp(t, checkRow("oversold", "2", "FAILED"), out.String())
	assert.Regexp(t, checkRow("tickets sold", "10 of 10", "ok"), out.String())
	assert.Contains(t, out.String(), "1 of 2 checks FAILED")
	assert.Contains(t, out.String(), "  oversold: sold beyond the tickets.")

	out.Reset()
	require.NoError(t, printSummary(&out, []scenarioRows{{"pool", []summaryRow{checkedRow("permit back", true, "1s")}}}))
	assert.Contains(t, out.String(), "all 1 checks passed")
}

// TestFIFOCheckSeesAWaiterQueuedBeforeTheBuyer shows that the ticket sales' FIFO check is not
// vacuous: a buyer whose number was taken while another buyer waited in the fair queue, and
// that is checked while that one still waits, counts one violation; once that one is served,
// the same check counts none.
func TestFIFOCheckSeesAWaiterQueuedBeforeTheBuyer(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	rdb := srv.Client(t)
	ctx := t.Context()
	newLock := func(name string) *fair.Lock {
		c, err := aqs.New(ctx, srv.Client(t))
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		l, err := fair.New(c, name)
		require.NoError(t, err)
		return l
	}
	name := redistest.Name(t)
	holder, waiter := newLock(name), newLock(name)
	k := ticketKeysOf(holder)
	lk := holder.Keys()
	t.Cleanup(func() { rdb.Del(context.Background(), append(lk, k.all()...)...) })

	held, err := holder.Lock(ctx)
	require.NoError(t, err)
	waited := make(chan error, 1)
	go func() {
		h, err := waiter.Lock(ctx)
		if err == nil {
			err = waiter.Unlock(h)
		}
		waited <- err
	}()
	require.Eventually(t, func() bool { return rdb.ZCard(ctx, lk[2]).Val() == 1 }, 10*time.Second, time.Millisecond,
		"the waiter is queued")

	r, err := arriveScript.Run(ctx, rdb, []string{k.numbers, lk[1], lk[2]}).Slice()
	require.NoError(t, err)
	require.Len(t, r, 2, "the number, and the waiter queued now")
	assert.Equal(t, int64(1), r[0])
	served := func() []int64 {
		got, err := servedScript.Run(ctx, rdb, []string{lk[2], k.violations, k.pairs, k.sales}, append([]any{"1 1 p1/b1"}, r[1:]...)...).Int64Slice()
		require.NoError(t, err)
		return got
	}
	assert.Equal(t, []int64{1, 1}, served(), "served while the waiter queued before it still waits: a violation")

	require.NoError(t, holder.Unlock(held)) // hands the lock to the waiter
	require.NoError(t, <-waited)
	assert.Equal(t, []int64{0, 0}, served(), "the waiter was served first: no violation")
	v, err := rdb.Get(ctx, k.violations).Int()
	require.NoError(t, err)
	assert.Equal(t, 1, v)
	p, err := rdb.Get(ctx, k.pairs).Int()
	require.NoError(t, err)
	assert.Equal(t, 2, p)
}
