package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/election"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/latch"
	"github.com/redaqs/aqs/multilock"
	"github.com/redaqs/aqs/rwlock"
	"github.com/redaqs/aqs/semaphore"
)

// The top tests build their primitives under a key prefix of their own, so that aqs top, which
// shows every name under the prefix, sees theirs alone on the shared servers. They delete the
// prefix's keys at the end.

// topPrefix returns a key prefix unique to the test, whose keys are deleted at its end, after
// the cleanups registered later (the Clients' Close) have run.
func topPrefix(t *testing.T, rdb redis.UniversalClient) string {
	t.Helper()
	prefix := "top-" + redistest.Name(t)
	t.Cleanup(func() {
		ctx := context.Background()
		del := func(ctx context.Context, node *redis.Client) error {
			iter := node.Scan(ctx, 0, core.GlobEscape(prefix)+":*", 1000).Iterator()
			for iter.Next(ctx) {
				if err := node.Del(ctx, iter.Val()).Err(); err != nil {
					return err
				}
			}
			return iter.Err()
		}
		var err error
		switch c := rdb.(type) {
		case *redis.ClusterClient:
			err = c.ForEachMaster(ctx, del)
		case *redis.Client:
			err = del(ctx, c)
		}
		assert.NoError(t, err, "deleting the keys of prefix %s", prefix)
	})
	return prefix
}

// newTopClient returns an aqs.Client with the prefix, closed at the end of the test.
func newTopClient(t *testing.T, rdb redis.UniversalClient, prefix string, opts ...aqs.Option) *aqs.Client {
	t.Helper()
	c, err := aqs.New(t.Context(), rdb, append([]aqs.Option{aqs.WithKeyPrefix(prefix)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// waiters runs blocking acquisitions in the background: they end when the test does (their
// context is cancelled before the Clients close), and the test waits for them.
type waiters struct {
	ctx context.Context
	wg  sync.WaitGroup
}

func newWaiters(t *testing.T) *waiters {
	ctx, cancel := context.WithCancel(context.Background())
	w := &waiters{ctx: ctx}
	t.Cleanup(func() { cancel(); w.wg.Wait() })
	return w
}

func (w *waiters) start(f func(ctx context.Context) error) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		_ = f(w.ctx) // fails with the context's cancellation at the end of the test
	}()
}

// awaitQueue waits until name has n live waiters.
func awaitQueue(t *testing.T, rdb redis.UniversalClient, prefix, name string, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		st, err := inspectName(t.Context(), rdb, prefix, name)
		return err == nil && len(st.Waiters) == n
	}, inspWithin, 5*time.Millisecond, "waiting for %d waiters at %s", n, name)
}

// topScenario is what buildScenario made: the names, and the Clients that hold and wait.
type topScenario struct {
	names              []string // every name, in the order top must list them
	holder, w1, w2, w3 *aqs.Client
	locks              int // the plain held locks
}

// Names of the scenario besides the plain locks "lock-NNN". Two have escapes in their keys,
// one of them with a hash tag of its own, and the multi-lock's share the tag {cart-1}.
const (
	pctName    = "pct%7D}{"
	taggedName = "a{b{c}d"
	cartA      = "{cart-1}:a"
	cartB      = "{cart-1}:b"
)

// buildScenario builds, under prefix: locks plain fair locks held; fair locks q3, q2, q1 with
// 3, 2 and 1 waiters; a counting semaphore with 2 of 3 permits taken and a waiter; a leased
// semaphore with 1 of 2 permits leased; a read-write lock with two readers and one with a
// writer and a waiting reader; a multi-lock of two names; an election with a leader; a latch;
// and two locks whose names need escaping.
func buildScenario(t *testing.T, rdb redis.UniversalClient, prefix string, locks int) *topScenario {
	t.Helper()
	ctx := t.Context()
	s := &topScenario{locks: locks}
	s.holder = newTopClient(t, rdb, prefix)
	s.w1, s.w2, s.w3 = newTopClient(t, rdb, prefix), newTopClient(t, rdb, prefix), newTopClient(t, rdb, prefix)
	w := newWaiters(t) // registered after the Clients: its cleanup runs before they close
	hold := func(name string) {
		l, err := fair.New(s.holder, name)
		require.NoError(t, err)
		_, ok, err := l.TryLock(ctx)
		require.NoError(t, err)
		require.True(t, ok, name)
	}
	for i := range locks {
		hold(fmt.Sprintf("lock-%03d", i))
	}
	hold(pctName)
	hold(taggedName)

	for n, name := range map[int]string{3: "q3", 2: "q2", 1: "q1"} {
		hold(name)
		for i, c := range []*aqs.Client{s.w1, s.w2, s.w3}[:n] {
			l, err := fair.New(c, name)
			require.NoError(t, err)
			w.start(func(ctx context.Context) error { _, err := l.Lock(ctx); return err })
			awaitQueue(t, rdb, prefix, name, i+1) // in the order w1, w2, w3
		}
	}

	sem, err := semaphore.New(s.holder, "sem")
	require.NoError(t, err)
	ok, err := sem.TrySetPermits(ctx, 3)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = sem.TryAcquire(ctx, 2)
	require.NoError(t, err)
	require.True(t, ok)
	semW, err := semaphore.New(s.w1, "sem")
	require.NoError(t, err)
	w.start(func(ctx context.Context) error { return semW.Acquire(ctx, 2) })
	awaitQueue(t, rdb, prefix, "sem", 1)

	pool, err := semaphore.NewLeased(s.holder, "pool")
	require.NoError(t, err)
	ok, err = pool.TrySetPermits(ctx, 2)
	require.NoError(t, err)
	require.True(t, ok)
	_, err = pool.Acquire(ctx, 1)
	require.NoError(t, err)

	for _, c := range []*aqs.Client{s.holder, s.w1} {
		l, err := rwlock.New(c, "cfg-r")
		require.NoError(t, err)
		_, err = l.RLock(ctx)
		require.NoError(t, err)
	}
	writer, err := rwlock.New(s.holder, "cfg-w")
	require.NoError(t, err)
	_, err = writer.Lock(ctx)
	require.NoError(t, err)
	reader, err := rwlock.New(s.w2, "cfg-w")
	require.NoError(t, err)
	w.start(func(ctx context.Context) error { _, err := reader.RLock(ctx); return err })
	awaitQueue(t, rdb, prefix, "cfg-w", 1)

	ml, err := multilock.New(s.holder, []string{cartA, cartB})
	require.NoError(t, err)
	_, err = ml.Lock(ctx)
	require.NoError(t, err)

	e, err := election.New(s.holder, "leader")
	require.NoError(t, err)
	_, err = e.Campaign(ctx, "node-1")
	require.NoError(t, err)

	gate, err := latch.New(s.holder, "gate")
	require.NoError(t, err)
	ok, err = gate.TrySetCount(ctx, 2)
	require.NoError(t, err)
	require.True(t, ok)

	// Longest queue first, then by name.
	rest := []string{pctName, taggedName, "pool", "cfg-r", cartA, cartB, "leader", "gate"}
	for i := range locks {
		rest = append(rest, fmt.Sprintf("lock-%03d", i))
	}
	slices.Sort(rest)
	s.names = append([]string{"q3", "q2", "cfg-w", "q1", "sem"}, rest...)
	return s
}

// topJSON runs aqs top --once --json with the extra flags and decodes its output.
func topJSON(t *testing.T, addr, prefix string, extra ...string) *topView {
	t.Helper()
	args := append([]string{"top", "--redis", addr, "--prefix", prefix, "--once", "--json"}, extra...)
	code, stdout, stderr := aqsRun(t.Context(), nil, args...)
	require.Equal(t, 0, code, "stderr:\n%s", stderr)
	var v topView
	require.NoError(t, json.Unmarshal([]byte(stdout), &v), stdout)
	return &v
}

func rowNames(rows []topRow) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.Name)
	}
	return out
}

func findRow(t *testing.T, v *topView, name string) topRow {
	t.Helper()
	for _, r := range v.Rows {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no row %q among %q", name, rowNames(v.Rows))
	return topRow{}
}

func findClient(t *testing.T, v *topView, c *aqs.Client) topClient {
	t.Helper()
	for _, x := range v.Clients {
		if x.Client == c.ID() {
			return x
		}
	}
	t.Fatalf("no Client %s in %+v", c.ID(), v.Clients)
	return topClient{}
}

// commandLog records the commands a go-redis client sends, by the address of the node that
// was sent them (cluster nodes) or "" (the client itself).
type commandLog struct {
	mu   sync.Mutex
	cmds map[string][]string
}

type commandHook struct {
	log  *commandLog
	addr string
}

func (h commandHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h commandHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.log.add(h.addr, cmd)
		return next(ctx, cmd)
	}
}

func (h commandHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.log.add(h.addr, c)
		}
		return next(ctx, cmds)
	}
}

func (l *commandLog) add(addr string, cmd redis.Cmder) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cmds[addr] = append(l.cmds[addr], strings.ToLower(cmd.Name()))
}

// hookedClient returns a client of the same server(s) as rdb whose commands are logged.
func hookedClient(t *testing.T, rdb redis.UniversalClient) (redis.UniversalClient, *commandLog) {
	log := &commandLog{cmds: map[string][]string{}}
	var c redis.UniversalClient
	switch x := rdb.(type) {
	case *redis.ClusterClient:
		cc := redis.NewClusterClient(x.Options())
		cc.AddHook(commandHook{log: log})
		cc.OnNewNode(func(n *redis.Client) { n.AddHook(commandHook{log: log, addr: n.Options().Addr}) })
		c = cc
	case *redis.Client:
		sc := redis.NewClient(x.Options())
		sc.AddHook(commandHook{log: log, addr: x.Options().Addr})
		c = sc
	}
	t.Cleanup(func() { c.Close() })
	return c, log
}

// testTopScenario checks aqs top --once against the scenario, and that it finds the names with
// SCAN on every master, never KEYS.
func testTopScenario(t *testing.T, rdb redis.UniversalClient, addr string, masters []string) {
	prefix := topPrefix(t, rdb)
	s := buildScenario(t, rdb, prefix, 200)
	total := len(s.names)

	v := topJSON(t, addr, prefix, "--limit", "1000")
	assert.Equal(t, prefix, v.Prefix)
	assert.Equal(t, total, v.Names)
	assert.Equal(t, s.names, rowNames(v.Rows))
	assert.Zero(t, v.MoreRows)
	assert.InDelta(t, time.Now().UnixMilli(), v.ServerTimeMS, float64(time.Minute.Milliseconds()))

	holder, w1, w2, w3 := s.holder.ID(), s.w1.ID(), s.w2.ID(), s.w3.ID()
	for _, name := range []string{"lock-000", "lock-199", pctName, taggedName, cartA, cartB} {
		r := findRow(t, v, name)
		assert.Equal(t, primLock, r.Kind, name)
		assert.True(t, r.Held, name)
		assert.Equal(t, 1, r.Holds, name)
		assert.Equal(t, []string{holder}, r.HolderClients, name)
		assert.Zero(t, r.Queue, name)
		if assert.NotNil(t, r.LeaseLeftMS, name) {
			assert.Positive(t, *r.LeaseLeftMS, name)
			assert.LessOrEqual(t, *r.LeaseLeftMS, topDefaultLease.Milliseconds(), name)
		}
	}
	for name, ws := range map[string][]string{"q3": {w1, w2, w3}, "q2": {w1, w2}, "q1": {w1}} {
		r := findRow(t, v, name)
		assert.Equal(t, primLock, r.Kind, name)
		assert.Equal(t, len(ws), r.Queue, name)
		if assert.NotNil(t, r.Head, name) {
			assert.Equal(t, w1, r.Head.Client, name) // w1 queued first
			assert.Positive(t, r.Head.DeadlineInMS, name)
		}
		assert.Nil(t, r.OldestWaitMS, "--once has seen no waiter before: %s", name)
	}
	sem := findRow(t, v, "sem")
	assert.Equal(t, primSemaphore, sem.Kind)
	assert.Equal(t, &topPermits{Taken: 2, Total: 3}, sem.Permits)
	assert.Empty(t, sem.HolderClients, "counting permits have no owner")
	assert.Equal(t, 1, sem.Queue)
	pool := findRow(t, v, "pool")
	assert.Equal(t, primLeased, pool.Kind)
	assert.Equal(t, &topPermits{Taken: 1, Total: 2}, pool.Permits)
	assert.Equal(t, []string{holder}, pool.HolderClients)
	cfgR := findRow(t, v, "cfg-r")
	assert.Equal(t, primRW, cfgR.Kind)
	assert.Equal(t, 2, cfgR.Holds)
	assert.ElementsMatch(t, []string{holder, w1}, cfgR.HolderClients)
	cfgW := findRow(t, v, "cfg-w")
	assert.Equal(t, primRW, cfgW.Kind)
	assert.Equal(t, []string{holder}, cfgW.HolderClients)
	assert.Equal(t, 1, cfgW.Queue)
	leader := findRow(t, v, "leader")
	assert.Equal(t, "election", leader.Kind)
	if assert.NotNil(t, leader.Leader) {
		assert.Equal(t, "node-1", leader.Leader.Value)
		assert.Positive(t, leader.Leader.Token)
	}
	gate := findRow(t, v, "gate")
	assert.Equal(t, "latch", gate.Kind)
	if assert.NotNil(t, gate.Count) {
		assert.EqualValues(t, 2, *gate.Count)
	}

	// The Clients: the holder's holds (every lock, the leased permit, a read hold, the
	// writer, the multi-lock's two names, the leadership), and the waiters'.
	want := map[string][2]int{
		holder: {s.locks + 2 + 3 + 1 + 1 + 1 + 2 + 1, 0},
		w1:     {1, 3 + 1}, // a read hold of cfg-r; waits in q3, q2, q1 and sem
		w2:     {0, 2 + 1}, // waits in q3, q2 and cfg-w
		w3:     {0, 1},
	}
	require.Len(t, v.Clients, len(want))
	for _, c := range []*aqs.Client{s.holder, s.w1, s.w2, s.w3} {
		x := findClient(t, v, c)
		assert.Equal(t, want[c.ID()], [2]int{x.Holds, x.Waits}, c.ID())
		assert.False(t, x.Stale, "a live Client: %+v", x)
		if assert.NotNil(t, x.LastSeenMS) {
			assert.GreaterOrEqual(t, *x.LastSeenMS, int64(0))
			if x.Holds == 0 { // derived from its waiters' deadlines alone
				assert.LessOrEqual(t, *x.LastSeenMS, core.DefaultWaiterTimeout.Milliseconds())
			}
		}
	}
	assert.Equal(t, holder, v.Clients[0].Client, "the Client with the most holds and waits comes first")

	// Text, with --limit: the first rows in order, then how many more.
	const limit = 7
	code, stdout, stderr := aqsRun(t.Context(), nil, "top", "--redis", addr, "--prefix", prefix, "--once", "--limit", fmt.Sprint(limit))
	require.Equal(t, 0, code, "stderr:\n%s", stderr)
	lines := strings.Split(stdout, "\n")
	assert.Contains(t, lines[0], fmt.Sprintf("aqs top: prefix %q at %s", prefix, addr))
	assert.Contains(t, lines[0], fmt.Sprintf(": %d names, 4 Clients (0 stale)", total))
	require.Greater(t, len(lines), 3+limit, stdout)
	assert.Regexp(t, `^NAME +KIND +HELD +HOLDERS +QUEUE +OLDEST WAIT +LEASE LEFT *$`, lines[2])
	var shown []string
	for _, l := range lines[3 : 3+limit] {
		shown = append(shown, strings.Fields(l)[0])
	}
	assert.Equal(t, s.names[:limit], shown)
	assert.Equal(t, fmt.Sprintf("(%d more names: --limit)", total-limit), lines[3+limit])
	assert.Regexp(t, `(?m)^q3 +lock +1 +`+holder[:8]+` +3 +- +[0-9.]+m?s *$`, stdout)
	assert.Regexp(t, `(?m)^sem +semaphore +2/3 +- +1 +- +- *$`, stdout)
	assert.Regexp(t, `(?m)^cfg-w +rwlock +w +`+holder[:8]+` +1 +- +[0-9.]+m?s *$`, stdout)
	assert.Regexp(t, `(?m)^CLIENT +HOLDS +WAITS +LAST SEEN +STATUS *$`, stdout)
	assert.Regexp(t, `(?m)^`+w1+` +1 +4 +[0-9.]+m?s ago +live *$`, stdout)
	assert.NotContains(t, stdout, "STALE")

	// What top sends: SCAN on every master, never KEYS.
	hooked, log := hookedClient(t, rdb)
	hv, err := newTopWatch().refresh(t.Context(), hooked, topConfig{prefix: prefix, limit: 1000,
		lease: topDefaultLease, waiterTimeout: core.DefaultWaiterTimeout})
	require.NoError(t, err)
	assert.Equal(t, total, hv.Names)
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, m := range masters {
		assert.Contains(t, log.cmds[m], "scan", "master %s was not scanned", m)
	}
	for addr, cmds := range log.cmds {
		assert.NotContains(t, cmds, "keys", addr)
	}
}

func TestTopShowsEveryNameOfAScenarioSortedByQueueLength(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	testTopScenario(t, srv.Client(t), srv.Addr(), []string{srv.Addr()})
}

func TestTopShowsEveryNameOfAScenarioOnARedisCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.Cluster(t)
	testTopScenario(t, cl.Client(t), cl.Addrs()[0], cl.Addrs())
}

// A Client that stops renewing (closed without releasing: what a killed process leaves) shows
// as stale once its holds missed two renewals, while a Client that lives does not.
func TestTopMarksAClientThatStoppedRenewingStale(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	rdb := srv.Client(t)
	prefix := topPrefix(t, rdb)
	const watchdog = 6 * time.Second // renewed every 2s; stale 4s after the last renewal
	dead := newTopClient(t, rdb, prefix, aqs.WithWatchdogTimeout(watchdog))
	alive := newTopClient(t, rdb, prefix, aqs.WithWatchdogTimeout(watchdog))
	for c, name := range map[*aqs.Client]string{dead: "gone", alive: "here"} {
		l, err := fair.New(c, name)
		require.NoError(t, err)
		_, err = l.Lock(t.Context())
		require.NoError(t, err)
	}
	flags := []string{"--lease", watchdog.String()}
	v := topJSON(t, srv.Addr(), prefix, flags...)
	require.Len(t, v.Clients, 2)
	assert.False(t, findClient(t, v, dead).Stale)
	assert.False(t, findClient(t, v, alive).Stale)

	require.NoError(t, dead.Close()) // its lock stays until its lease ends
	var last *topView
	require.Eventually(t, func() bool {
		last = topJSON(t, srv.Addr(), prefix, flags...)
		return len(last.Clients) == 2 && findClient(t, last, dead).Stale
	}, 2*watchdog, 50*time.Millisecond, "the closed Client never showed as stale")
	assert.False(t, findClient(t, last, alive).Stale, "the live Client shows as stale: %+v", last.Clients)
	d := findClient(t, last, dead)
	if assert.NotNil(t, d.LastSeenMS) {
		assert.Greater(t, *d.LastSeenMS, (2 * watchdog / 3).Milliseconds())
	}
	assert.Equal(t, dead.ID(), last.Clients[0].Client, "stale Clients come first")
	row := findRow(t, last, "gone")
	assert.Equal(t, []string{dead.ID()}, row.HolderClients)
	if assert.NotNil(t, row.LeaseLeftMS) {
		assert.Less(t, *row.LeaseLeftMS, (watchdog / 3).Milliseconds())
	}

	// The same in text, while its lock is still there (it ends at most a third of the lease
	// after the Client went stale): its line says STALE and the headline counts it.
	code, stdout, stderr := aqsRun(t.Context(), nil, append([]string{"top", "--redis", srv.Addr(), "--prefix", prefix, "--once"}, flags...)...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "2 Clients (1 stale)")
	assert.Regexp(t, `(?m)^`+dead.ID()+` +1 +0 +[0-9.]+s ago +STALE$`, stdout)
	assert.Regexp(t, `(?m)^`+alive.ID()+` +1 +0 +[0-9.]+m?s ago +live$`, stdout)
}

// topBuffer is a bytes.Buffer that a test reads while the command writes it.
type topBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *topBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *topBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Live mode, to a pipe: plain tables one after the other, no terminal escape; the oldest wait
// grows from "-" as top keeps seeing the waiter; a cancelled context (Ctrl-C) ends it with
// status 0.
func TestTopLiveRefreshesUntilInterrupted(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	rdb := srv.Client(t)
	prefix := topPrefix(t, rdb)
	a, b := newTopClient(t, rdb, prefix), newTopClient(t, rdb, prefix)
	w := newWaiters(t)
	la, err := fair.New(a, "busy")
	require.NoError(t, err)
	_, err = la.Lock(t.Context())
	require.NoError(t, err)
	lb, err := fair.New(b, "busy")
	require.NoError(t, err)
	w.start(func(ctx context.Context) error { _, err := lb.Lock(ctx); return err })
	awaitQueue(t, rdb, prefix, "busy", 1)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errOut topBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"top", "--redis", srv.Addr(), "--prefix", prefix, "--interval", "100ms"},
			&env{stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }})
	}()
	require.Eventually(t, func() bool { return strings.Count(out.String(), "aqs top:") >= 4 },
		inspWithin, 10*time.Millisecond, "output:\n%s", out.String())
	cancel()
	select {
	case code := <-done:
		assert.Equal(t, 0, code, "stderr: %s", errOut.String())
	case <-time.After(inspWithin):
		t.Fatal("aqs top did not end when its context was cancelled")
	}
	text := out.String()
	assert.NotContains(t, text, "\x1b[", "no terminal escape to a pipe")
	frames := strings.Split(text, "aqs top:")[1:]
	require.GreaterOrEqual(t, len(frames), 4)
	assert.Regexp(t, `(?m)^busy +lock +1 +`+a.ID()[:8]+` +1 +- +`, frames[0], "first look: no wait seen yet")
	assert.Regexp(t, `(?m)^busy +lock +1 +`+a.ID()[:8]+` +1 +≥[0-9.]+m?s +`, frames[len(frames)-1])
	// The oldest wait only grows while the same waiter is at the head.
	var prev time.Duration
	for _, f := range frames[1:] {
		m := regexpFind(t, `(?m)^busy +lock +1 +\S+ +1 +≥(\S+) `, f)
		require.NotEmpty(t, m, "frame:\n%s", f)
		d, err := time.ParseDuration(m)
		require.NoError(t, err, m)
		assert.GreaterOrEqual(t, d, prev)
		prev = d
	}
	assert.Positive(t, prev)
}

func regexpFind(t *testing.T, re, s string) string {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(s)
	if m == nil {
		return ""
	}
	return m[1]
}

func TestTopRefusesBadInput(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	for _, tc := range []struct {
		args   []string
		vars   map[string]string
		code   int
		stderr string
	}{
		{[]string{"top", "--once"}, nil, 2, "no Redis address"},
		{[]string{"top", "--once", "--redis", "localhost"}, nil, 2, `bad Redis address "localhost"`},
		{[]string{"top", "--once", "--redis", "127.0.0.1:1"}, nil, 1, "cannot reach Redis at 127.0.0.1:1: connection refused"},
		{[]string{"top", "--once"}, map[string]string{"REDIS_URL": "127.0.0.1:1"}, 1, "connection refused"},
		{[]string{"top", "--once", "--redis", srv.Addr(), "--limit", "0"}, nil, 2, "--limit must be at least 1, not 0"},
		{[]string{"top", "--once", "--redis", srv.Addr(), "--interval", "0s"}, nil, 2, "--interval must be at least 10ms"},
		{[]string{"top", "--once", "--redis", srv.Addr(), "--lease", "-1s"}, nil, 2, "--lease must be positive"},
		{[]string{"top", "--once", "--redis", srv.Addr(), "--waiter-timeout", "0s"}, nil, 2, "--waiter-timeout must be positive"},
		{[]string{"top", "--json", "--redis", srv.Addr()}, nil, 2, "give --once with it"},
		{[]string{"top", "--once", "--redis", srv.Addr(), "--prefix", "a{b"}, nil, 2, "--prefix: "},
		{[]string{"top", "--once", "--redis", srv.Addr(), "--nope"}, nil, 2, "flag provided but not defined: -nope"},
		{[]string{"top", "--once", "--redis", srv.Addr(), "extra"}, nil, 2, `unexpected argument "extra"`},
		{[]string{"top", "--once", "--limit", "x"}, nil, 2, `invalid value "x" for flag -limit`},
	} {
		code, stdout, stderr := aqsRun(t.Context(), tc.vars, tc.args...)
		assert.Equal(t, tc.code, code, "%q: %s", tc.args, stderr)
		assert.Contains(t, stderr, tc.stderr, "%q", tc.args)
		assert.Empty(t, stdout, "%q", tc.args)
	}
	code, _, stderr := aqsRun(t.Context(), nil, "top", "-h")
	assert.Equal(t, 0, code)
	for _, s := range []string{"SCAN (never KEYS)", "-once", "-json", "-limit N", "-interval", "-lease", "-waiter-timeout",
		"deadline less the waiter timeout", "lease end less the lease", "does not store when a waiter joined"} {
		assert.Contains(t, stderr, s)
	}
}

// An empty prefix shows no names and no Clients.
func TestTopOfAnEmptyPrefix(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	prefix := topPrefix(t, srv.Client(t))
	v := topJSON(t, srv.Addr(), prefix)
	assert.Zero(t, v.Names)
	assert.Empty(t, v.Rows)
	assert.Empty(t, v.Clients)
	code, stdout, _ := aqsRun(t.Context(), nil, "top", "--redis", srv.Addr(), "--prefix", prefix, "--once")
	assert.Equal(t, 0, code)
	assert.Contains(t, stdout, ": 0 names, 0 Clients (0 stale)")
}

// nameOfKey inverts internal/core's BaseKey exactly, for every key of a name, and takes no
// key that no name would give.
func TestTopDecodesNamesFromKeys(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"orders", "a%b", "%7B", "%257D", "x}y", "x{y", "{t}rest", "a{b{c}d", "{}", "}{", "{cart-1}:sku-2", "a b\n", "é"} {
		base, err := core.BaseKey("aqs", name)
		require.NoError(t, err)
		for _, suffix := range []string{"", ":q", ":d", ":w:cond", ":x:id", ":e"} {
			got, ok := nameOfKey("aqs", base+suffix)
			assert.True(t, ok, "%q", base+suffix)
			assert.Equal(t, name, got, "%q", base+suffix)
		}
		_, ok := nameOfKey("other", base)
		assert.False(t, ok, "%q under another prefix", base)
	}
	for _, key := range []string{"aqs:{x", "aqs:x}", "aqs:{a%7bb}", "aqs:{%zz}", "aqs:{ab}junk", "aqs:{t}{", "aqs:{t}{x}", "aqs:{}", "aqs:{a}{b}", "aqsx:{a}"} {
		_, ok := nameOfKey("aqs", key)
		assert.False(t, ok, "%q", key)
	}
}

// SCAN's pattern takes the prefix literally: a prefix with glob characters matches the keys of
// no other prefix.
func TestTopScanTakesThePrefixLiterally(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	rdb := srv.Client(t)
	base := topPrefix(t, rdb)
	keys := map[string]string{base + "*": "star", base + "Z": "zed", base + "?": "what", base + "[Z]": "class", base + `\`: "slash"}
	for p, name := range keys {
		key := p + ":{" + name + "}"
		t.Cleanup(func() { rdb.Del(context.Background(), key) })
		require.NoError(t, rdb.Set(t.Context(), key, "x", time.Minute).Err())
	}
	for p, name := range keys {
		var matched []string
		iter := rdb.Scan(t.Context(), 0, core.GlobEscape(p)+":{*", 1000).Iterator()
		for iter.Next(t.Context()) {
			matched = append(matched, iter.Val())
		}
		require.NoError(t, iter.Err())
		assert.Equal(t, []string{p + ":{" + name + "}"}, matched, "prefix %q", p)
		names, err := scanNames(t.Context(), rdb, p)
		require.NoError(t, err)
		assert.Equal(t, []string{name}, names, "prefix %q", p)
	}
}

// A waiter whose process was killed (SIGKILL: an aqs run waiting for the name) shows as stale
// once it missed two heartbeats, while the queue still lists it, and the Client that holds
// does not.
func TestTopMarksAKilledWaiterStaleBeforeTheQueueDropsIt(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	rdb := srv.Client(t)
	prefix := topPrefix(t, rdb)
	holder := newTopClient(t, rdb, prefix)
	l, err := fair.New(holder, "busy")
	require.NoError(t, err)
	_, err = l.Lock(t.Context())
	require.NoError(t, err)
	// aqs run waits with the default waiter timeout: a heartbeat every third of it.
	_, cmd := startAqs(t, "run", "--redis", srv.Addr(), "--prefix", prefix, "busy", "--", "true")
	awaitQueue(t, rdb, prefix, "busy", 1)
	v := topJSON(t, srv.Addr(), prefix)
	head := findRow(t, v, "busy").Head
	require.NotNil(t, head)
	waiter := topClient{}
	for _, c := range v.Clients {
		if c.Client == head.Client {
			waiter = c
		}
	}
	assert.Equal(t, 1, waiter.Waits)
	assert.False(t, waiter.Stale, "%+v", waiter)

	require.NoError(t, cmd.Process.Kill())
	var last *topView
	require.Eventually(t, func() bool {
		last = topJSON(t, srv.Addr(), prefix)
		return len(last.Clients) == 2 && last.Clients[0].Client == head.Client && last.Clients[0].Stale
	}, 2*core.DefaultWaiterTimeout, 50*time.Millisecond, "the killed waiter never showed as stale")
	assert.Equal(t, 1, findRow(t, last, "busy").Queue, "stale while still queued")
	assert.False(t, findClient(t, last, holder).Stale)
	if seen := last.Clients[0].LastSeenMS; assert.NotNil(t, seen) {
		assert.Greater(t, *seen, (2 * core.DefaultWaiterTimeout / 3).Milliseconds())
	}
}

// A key at a name that no aqs primitive would write is listed with kind "?" and the reason; a
// name with only a call's own record (no primitive's key) is not listed.
func TestTopListsAForeignKeyAndSkipsANameWithNothingAtIt(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	rdb := srv.Client(t)
	prefix := topPrefix(t, rdb)
	require.NoError(t, rdb.Set(t.Context(), prefix+":{junk}", "hello", time.Minute).Err())
	require.NoError(t, rdb.Set(t.Context(), prefix+":{gone}:x:call", "1", time.Minute).Err())
	v := topJSON(t, srv.Addr(), prefix)
	assert.Equal(t, 1, v.Names)
	require.Len(t, v.Rows, 1)
	r := v.Rows[0]
	assert.Equal(t, "junk", r.Name)
	assert.Equal(t, "?", r.Kind)
	assert.Contains(t, r.Error, "not an aqs primitive")
	code, stdout, _ := aqsRun(t.Context(), nil, "top", "--redis", srv.Addr(), "--prefix", prefix, "--once")
	assert.Equal(t, 0, code)
	assert.Regexp(t, `(?m)^junk +\? +- +- +0 +- +-$`, stdout)
}
