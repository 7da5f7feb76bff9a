package election_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/election"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// Tests across OS processes: a leader killed with SIGKILL, a leader stopped with SIGSTOP past
// its lease, and processes that lead and resign over and over under the witness of "at most
// one leader". The children are this test binary run again in roleCandidate (helper_test.go
// describes the protocol).
//
// The bounds are correctness bounds, not figures of speed: a dead or stopped leader's
// successor must not lead before the leader's lease ends in Redis (read right after the
// signal), and must lead within the watchdog timeout (the lease) and processTolerance of it.
// The figures are logged in a SUMMARY line; AQS_ELECTION_RUNS sets how many runs the kill and
// stop tests make (processRuns by default; make election-failover runs 20), and when it is set
// the witness of "at most one leader" runs 20s instead of 3s.

const (
	// processWatchdog is the children's watchdog timeout: the lease of their leaderships,
	// renewed until the signal.
	processWatchdog = time.Second
	// processTolerance is what a takeover may take beyond the lease: the standby's next look
	// (the remaining lease its last attempt reported, or a heartbeat), round trips, and the
	// scheduling of a loaded two-core machine under -race.
	processTolerance = 1500 * time.Millisecond
	// processRuns is how many runs the kill and stop tests make unless AQS_ELECTION_RUNS says.
	processRuns = 3
	// stopNotice bounds how long a resumed leader may take to report its leadership lost: its
	// watchdog timer is overdue once the process runs again.
	stopNotice = 2 * time.Second
)

// runs returns how many runs the kill and stop tests make.
func runs(t *testing.T) int {
	t.Helper()
	s := os.Getenv("AQS_ELECTION_RUNS")
	if s == "" {
		return processRuns
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, "AQS_ELECTION_RUNS")
	require.Positive(t, n, "AQS_ELECTION_RUNS")
	return n
}

// A leader killed with SIGKILL leads until its lease ends in Redis, and not a moment longer
// than the watchdog timeout and the tolerance: the standby of another process, queued
// behind it, leads then, with a greater token, and Leader reports it.
func TestKilledLeaderIsSucceededByAStandbyWithinTheWatchdogTimeout(t *testing.T) {
	n := runs(t)
	x := startCandidates(t, redistest.Single(t).Client(t), 0)
	leader := x.start(t, "leader 0")
	k := x.send(t, leader, lineHold, "leader-0")
	prev, prevK := x.await(t, lineLead, k, 30*time.Second), k
	var takeovers []time.Duration
	launched := x.launch(t, "leader 1")
	for r := 1; r <= n; r++ {
		standby := x.ready(t, launched)
		if r < n {
			launched = x.launch(t, fmt.Sprintf("leader %d", r+1)) // it starts during the takeover
		}
		ks := x.send(t, standby, lineHold, fmt.Sprintf("leader-%d", r))
		awaitCandidates(t, x.rdb, x.e, 1)

		hold := x.holder(t)
		killed := x.kill(t, leader)
		end, ok := x.leaseEnd(t, hold)
		require.True(t, ok, "run %d: the dead leader's lock passed on at once after the kill", r)
		got := x.await(t, lineLead, ks, processWatchdog+processTolerance+5*time.Second)
		at := got.time(t, 0)
		assertNotBefore(t, at, end, fmt.Sprintf("run %d: the standby led", r))
		takeover := at.Sub(killed)
		assert.Less(t, takeover, processWatchdog+processTolerance, "run %d: takeover after the kill", r)
		takeovers = append(takeovers, takeover)
		token := got.int(t, 1)
		assert.Greater(t, token, prev.int(t, 1), "run %d: the new leader's token is greater", r)
		leaderIs(t, x.e, election.Leadership{Value: fmt.Sprintf("leader-%d", r), Token: token, Client: standby.id})
		leader, prev, prevK = standby, got, ks
	}
	x.resign(t, leader, prevK)
	x.end(t)
	assertNothingLeft(t, x.rdb, x.e)
	t.Logf("SUMMARY kill -9 of the leader: %d runs, watchdog timeout %v; takeover (the kill to the standby's "+
		"Campaign returning) p50 %v, max %v", n, processWatchdog, percentile(takeovers, 50).Round(time.Millisecond),
		slices.Max(takeovers).Round(time.Millisecond))
}

// A leader stopped with SIGSTOP loses its leadership when its lease ends: a standby of
// another process leads then and writes to a store that checks fencing tokens. Resumed with
// SIGCONT, the former leader, which checks its leading context's Err before each write,
// writes nothing more once it runs again (a write whose check passed before the stop may go
// out, and the store refuses it), and its leading context ends with aqs.ErrLockLost.
func TestStoppedLeaderNeverWritesAfterItsSuccessorOnceResumed(t *testing.T) {
	const every = 20 * time.Millisecond // a leader's writes
	n := runs(t)
	x := startCandidates(t, redistest.Single(t).Client(t), 0)
	w := witnessOf(x.e.Keys()[0])
	t.Cleanup(func() { x.rdb.Del(context.Background(), w.all()...) })
	leader := x.start(t, "leader 0")
	kl := x.send(t, leader, lineWrite, "leader-0", strconv.Itoa(int(every/time.Millisecond)))
	x.await(t, lineLead, kl, 30*time.Second)
	var takeovers, notices []time.Duration
	late := 0
	launched := x.launch(t, "leader 1")
	for r := 1; r <= n; r++ {
		standby := x.ready(t, launched)
		if r < n {
			launched = x.launch(t, fmt.Sprintf("leader %d", r+1)) // it starts during the takeover
		}
		ks := x.send(t, standby, lineWrite, fmt.Sprintf("leader-%d", r), strconv.Itoa(int(every/time.Millisecond)))
		awaitCandidates(t, x.rdb, x.e, 1)

		// Stopped right after one of its writes, as it waits for the next: the likeliest
		// place, as for any process that spends its time between its acts.
		from := len(x.log)
		x.awaitNew(t, lineWrote, kl, from, 5*time.Second)
		hold := x.holder(t)
		stopped := x.signal(t, leader, syscall.SIGSTOP)
		end, ok := x.leaseEnd(t, hold)
		require.True(t, ok, "run %d: the stopped leader's lock passed on at once", r)
		got := x.await(t, lineLead, ks, processWatchdog+processTolerance+5*time.Second)
		at := got.time(t, 0)
		assertNotBefore(t, at, end, fmt.Sprintf("run %d: the standby led", r))
		takeover := at.Sub(stopped)
		assert.Less(t, takeover, processWatchdog+processTolerance, "run %d: takeover after the stop", r)
		takeovers = append(takeovers, takeover)
		first := x.awaitNew(t, lineWrote, ks, from, 5*time.Second)
		require.Equal(t, "1", first.f[2], "run %d: the new leader's first write is accepted", r)

		resumed := x.signal(t, leader, syscall.SIGCONT)
		lost := x.await(t, lineLost, kl, stopNotice)
		assert.Equal(t, "locklost", lost.f[1], "run %d: the resumed leader's leading context ends with aqs.ErrLockLost", r)
		notices = append(notices, lost.time(t, 0).Sub(resumed))
		// The writer's lines come in order: every write it sent is logged before its "lost".
		// A write whose check passed before the stop took effect (a process can stop
		// anywhere) goes out once it runs again, and the store refuses it if the new leader
		// wrote meanwhile: one at most, since the next check finds the lease untrusted.
		refusedNow := 0
		for _, e := range x.log[from:] {
			if e.word != lineWrote || e.k != kl {
				continue
			}
			if e.time(t, 1).After(resumed) {
				t.Errorf("run %d: the resumed leader's check of Err passed after SIGCONT: %v", r, e)
			}
			if e.f[2] == "0" {
				refusedNow++
			}
		}
		assert.LessOrEqual(t, refusedNow, 1, "run %d: late writes of the stopped leader", r)
		late += refusedNow
		x.kill(t, leader)
		leader, kl = standby, ks
	}
	x.resign(t, leader, kl)
	x.end(t)

	// The store's own account: the writes it accepted are in token order, and no former
	// leader's write comes after a successor's.
	writes, err := x.rdb.LRange(context.Background(), w.writes, 0, -1).Result()
	require.NoError(t, err)
	var last int64
	for _, entry := range writes {
		f := strings.Split(entry, ":")
		require.Len(t, f, 3, "entry %q", entry)
		tok, err := strconv.ParseInt(f[2], 10, 64)
		require.NoError(t, err)
		require.GreaterOrEqual(t, tok, last, "the store accepted a write of a former leader after its successor's")
		last = tok
	}
	refused := w.counter(t, x.rdb, w.refused)
	assert.Equal(t, late, refused, "the store refused the stopped leaders' late writes, and no other")
	assertNothingLeft(t, x.rdb, x.e)
	t.Logf("SUMMARY SIGSTOP of the leader: %d runs, watchdog timeout %v; a standby led (from the stop) p50 %v, "+
		"max %v; resumed leaders reported ErrLockLost max %v after SIGCONT, with no check of Err passed after it; "+
		"late writes (checked before the stop, sent after the successor's) refused by the store %d of %d; "+
		"%d writes accepted, in token order",
		n, processWatchdog, percentile(takeovers, 50).Round(time.Millisecond), slices.Max(takeovers).Round(time.Millisecond),
		slices.Max(notices).Round(time.Millisecond), refused, late, len(writes))
}

// Processes whose candidates lead briefly and resign, over and over, for a few seconds: the
// witness of "at most one leader" in Redis never finds two leaders at once, nor a write with
// a token below one it saw, and every candidate leads.
func TestAtMostOneLeaderAmongProcessesThatLeadAndResign(t *testing.T) {
	const (
		processes  = 4
		perProcess = 2
		work       = 2 * time.Millisecond
	)
	span := 3 * time.Second
	if os.Getenv("AQS_ELECTION_RUNS") != "" {
		span = 20 * time.Second
	}
	x := startCandidates(t, redistest.Single(t).Client(t), 2*time.Second)
	w := witnessOf(x.e.Keys()[0])
	t.Cleanup(func() { x.rdb.Del(context.Background(), w.all()...) })
	var launched []*redistest.Child
	for p := range processes {
		launched = append(launched, x.launch(t, fmt.Sprintf("process %d", p)))
	}
	var ks []int
	for _, l := range launched {
		child := x.ready(t, l)
		for range perProcess {
			ks = append(ks, x.send(t, child, lineChurn, strconv.Itoa(int(span/time.Millisecond)),
				strconv.Itoa(int(work/time.Millisecond))))
		}
	}
	var leads, overlaps, stale []int
	for _, k := range ks {
		e := x.await(t, lineChurned, k, span+30*time.Second)
		leads = append(leads, e.intAt(t, 0))
		overlaps = append(overlaps, e.intAt(t, 1))
		stale = append(stale, e.intAt(t, 2))
	}
	x.end(t)
	total := 0
	for i, n := range leads {
		assert.Positive(t, n, "candidate %d never led", ks[i])
		total += n
	}
	assert.Zero(t, sum(overlaps), "overlaps seen by the candidates")
	assert.Zero(t, sum(stale), "stale writes seen by the candidates")
	assert.Zero(t, w.counter(t, x.rdb, w.overlaps), "overlaps counted in Redis")
	assert.Zero(t, w.counter(t, x.rdb, w.stale), "stale writes counted in Redis")
	assertNothingLeft(t, x.rdb, x.e)
	t.Logf("SUMMARY at most one leader: %d processes × %d candidates for %v, work %v: %d leaderships (per "+
		"candidate min %d, max %d); overlaps %d, stale writes %d", processes, perProcess, span, work, total,
		slices.Min(leads), slices.Max(leads), sum(overlaps), sum(stale))
}

// ---- The parent's side -----------------------------------------------------------------

// candidates is the children of one test, all on one election, with the test's own Client
// on it.
type candidates struct {
	rdb    redis.UniversalClient
	e      *election.Election // the test's own
	params candidateParams
	events chan event
	done   chan struct{}
	log    []event
	next   int // the last candidate number given
	procs  []*proc
}

// proc is one child.
type proc struct {
	*redistest.Child
	id  string // its aqs Client's id
	pid int
}

// event is one line of a child.
type event struct {
	p    *proc
	word string
	k    int
	f    []string // the fields after k
}

func (e event) String() string { return fmt.Sprintf("%s: %s %d %v", e.p.Label(), e.word, e.k, e.f) }

// time returns field i of the event, a time in unix ns.
func (e event) time(t testing.TB, i int) time.Time { return time.Unix(0, e.int(t, i)) }

// int returns field i of the event, an integer.
func (e event) int(t testing.TB, i int) int64 {
	t.Helper()
	require.Greater(t, len(e.f), i, "%v", e)
	n, err := strconv.ParseInt(e.f[i], 10, 64)
	require.NoError(t, err, "%v", e)
	return n
}

func (e event) intAt(t testing.TB, i int) int { return int(e.int(t, i)) }

// startCandidates returns the set-up of children on a new election on rdb: their Clients
// have the watchdog timeout processWatchdog, their election the waiter timeout given (0: the
// default).
func startCandidates(t *testing.T, rdb redis.UniversalClient, waiterTimeout time.Duration) *candidates {
	t.Helper()
	x := &candidates{rdb: rdb, e: newElection(t, newClient(t, rdb)), events: make(chan event, 64), done: make(chan struct{})}
	x.params = candidateParams{Name: x.e.Name(), WaiterTimeout: waiterTimeout, Watchdog: processWatchdog}
	t.Cleanup(func() { close(x.done) })
	return x
}

// start starts a child and waits until it is ready.
func (x *candidates) start(t *testing.T, label string) *proc {
	t.Helper()
	return x.ready(t, x.launch(t, label))
}

// launch starts a child, for ready to wait for: a child takes a while to start (most of it
// the race detector's), which a test spends waiting for something else.
func (x *candidates) launch(t *testing.T, label string) *redistest.Child {
	t.Helper()
	return roleCandidate.Start(t, label, redistest.TargetOf(t, x.rdb), x.params)
}

// ready waits until a launched child is ready, and from then on logs its lines.
func (x *candidates) ready(t *testing.T, ch *redistest.Child) *proc {
	t.Helper()
	f := strings.Fields(ch.Expect(t, lineReady+" ", 30*time.Second))
	require.Len(t, f, 2, "%s: ready %v", ch.Label(), f)
	pid, err := strconv.Atoi(f[1])
	require.NoError(t, err)
	p := &proc{Child: ch, id: f[0], pid: pid}
	lines := redistest.Merge(ch)
	go func() {
		for {
			select {
			case l := <-lines:
				e := event{p: p}
				f := strings.Fields(l.Text)
				if len(f) > 0 {
					e.word = f[0]
				}
				if len(f) > 1 {
					e.k, _ = strconv.Atoi(f[1])
					e.f = f[2:]
				}
				select {
				case x.events <- e:
				case <-x.done:
					return
				}
			case <-x.done:
				return
			}
		}
	}()
	x.procs = append(x.procs, p)
	return p
}

// send has p start a new candidate with the command word and its arguments, and returns the
// candidate's number.
func (x *candidates) send(t *testing.T, p *proc, word string, args ...string) int {
	t.Helper()
	x.next++
	p.Send(t, strings.Join(append([]string{word, strconv.Itoa(x.next)}, args...), " "))
	return x.next
}

// resign has p's candidate k resign, and waits until it did.
func (x *candidates) resign(t *testing.T, p *proc, k int) {
	t.Helper()
	p.Send(t, fmt.Sprintf("%s %d", lineResign, k))
	x.await(t, lineResigned, k, 10*time.Second)
}

// pump reads the children's lines into the log until cond holds, failing the test when it
// does not within d, or when a child reports a failure.
func (x *candidates) pump(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for !cond() {
		select {
		case e := <-x.events:
			x.log = append(x.log, e)
			if e.word == lineFailed {
				t.Fatalf("%v", e)
			}
		case <-timer.C:
			t.Fatalf("%s: not within %v; log: %v", what, d, x.log)
		}
	}
}

// find returns the first logged line word of candidate k at or after index from.
func (x *candidates) find(word string, k, from int) (event, bool) {
	for _, e := range x.log[from:] {
		if e.word == word && e.k == k {
			return e, true
		}
	}
	return event{}, false
}

// await waits for the line word of candidate k and returns it.
func (x *candidates) await(t *testing.T, word string, k int, d time.Duration) event {
	t.Helper()
	return x.awaitNew(t, word, k, 0, d)
}

// awaitNew waits for a line word of candidate k logged at or after index from.
func (x *candidates) awaitNew(t *testing.T, word string, k, from int, d time.Duration) event {
	t.Helper()
	x.pump(t, d, fmt.Sprintf("%s %d", word, k), func() bool { _, ok := x.find(word, k, from); return ok })
	e, _ := x.find(word, k, from)
	return e
}

// kill kills p with SIGKILL and returns when the signal was sent.
func (x *candidates) kill(t *testing.T, p *proc) time.Time {
	t.Helper()
	at := time.Now()
	exit := p.Kill(t, 10*time.Second)
	require.Equal(t, -1, exit.ExitCode(), "%s ended by a signal: %v", p.Label(), exit)
	return at
}

// signal sends p a signal (SIGSTOP, SIGCONT) and returns when it was sent.
func (x *candidates) signal(t *testing.T, p *proc, sig syscall.Signal) time.Time {
	t.Helper()
	at := time.Now()
	require.NoError(t, syscall.Kill(p.pid, sig), "%s: %v", p.Label(), sig)
	return at
}

// end tells the live children that no more candidates come, and checks that they exit
// cleanly.
func (x *candidates) end(t *testing.T) {
	t.Helper()
	for _, p := range x.procs {
		if !p.Killed() {
			p.Send(t, lineEnd)
		}
	}
	for _, p := range x.procs {
		if !p.Killed() {
			require.NoError(t, p.Wait(t, 30*time.Second), "%s", p.Label())
		}
	}
}

// holder returns the hold id of the election's lock holder.
func (x *candidates) holder(t *testing.T) string {
	t.Helper()
	v, err := x.rdb.Get(context.Background(), x.e.Keys()[0]).Result()
	require.NoError(t, err, "the election's lock is held")
	hold, _, _ := strings.Cut(v, " ")
	return hold
}

// leaseEnd returns when hold's lease of the election's lock ends, by the server's clock: the
// lease end its value records, or else its key's expiry. It reports false when hold no longer
// has the lock.
func (x *candidates) leaseEnd(t *testing.T, hold string) (time.Time, bool) {
	t.Helper()
	ctx := context.Background()
	key := x.e.Keys()[0]
	v, err := x.rdb.Get(ctx, key).Result()
	if err == redis.Nil {
		return time.Time{}, false
	}
	require.NoError(t, err)
	f := strings.Fields(v)
	if f[0] != hold {
		return time.Time{}, false
	}
	for _, field := range f[1:] {
		if ms, ok := strings.CutPrefix(field, "e"); ok {
			n, err := strconv.ParseInt(ms, 10, 64)
			require.NoError(t, err, "value %q", v)
			return time.UnixMilli(n), true
		}
	}
	pttl, err := x.rdb.PTTL(ctx, key).Result()
	require.NoError(t, err)
	now, err := x.rdb.Time(ctx).Result()
	require.NoError(t, err)
	return now.Add(pttl), true
}

// assertNotBefore checks that at is not before from (at millisecond precision: Redis keeps
// time in milliseconds).
func assertNotBefore(t *testing.T, at, from time.Time, what string) {
	t.Helper()
	assert.False(t, at.Truncate(time.Millisecond).Before(from.Truncate(time.Millisecond)), "%s %v before it could",
		what, from.Sub(at))
}

// percentile returns the p-th percentile of ds (nearest rank).
func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(i-1, 0)]
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}
