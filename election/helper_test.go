package election_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/election"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// Helpers of the tests in this process, then the role of the child processes
// (process_test.go) and the fenced witness that leaders write to.

// candidatesQueued returns how many entries the election's queue has (its deadlines zset),
// live or not.
func candidatesQueued(t testing.TB, rdb redis.UniversalClient, e *election.Election) int64 {
	t.Helper()
	n, err := rdb.ZCard(context.Background(), e.Keys()[2]).Result()
	require.NoError(t, err)
	return n
}

// awaitCandidates waits, bounded, until the election's queue has n entries.
func awaitCandidates(t testing.TB, rdb redis.UniversalClient, e *election.Election, n int64) {
	t.Helper()
	require.Eventually(t, func() bool { return candidatesQueued(t, rdb, e) == n }, 10*time.Second,
		2*time.Millisecond, "the queue of %q never had %d entries", e.Name(), n)
}

// campaign is a Campaign's outcome.
type campaign struct {
	lead context.Context
	err  error
}

// campaignAsync runs Campaign in a goroutine of its own and returns its outcome's channel.
func campaignAsync(ctx context.Context, e *election.Election, value string) <-chan campaign {
	out := make(chan campaign, 1)
	go func() {
		lead, err := e.Campaign(ctx, value)
		out <- campaign{lead, err}
	}()
	return out
}

// led waits, bounded, for a campaign's outcome, which must be leadership.
func led(t testing.TB, c <-chan campaign, within time.Duration) context.Context {
	t.Helper()
	select {
	case r := <-c:
		require.NoError(t, r.err, "Campaign")
		return r.lead
	case <-time.After(within):
		t.Fatalf("the candidate did not lead within %v", within)
	}
	return nil
}

// assertWaiting checks that a campaign has not returned, within a moment.
func assertWaiting(t testing.TB, c <-chan campaign, what string) {
	t.Helper()
	select {
	case r := <-c:
		t.Fatalf("%s: Campaign returned (%v) while it should wait", what, r.err)
	case <-time.After(50 * time.Millisecond):
	}
}

// tokenOf returns a leading context's fencing token.
func tokenOf(t testing.TB, lead context.Context) int64 {
	t.Helper()
	tok, err := aqs.FencingToken(lead)
	require.NoError(t, err)
	return tok
}

// leaderIs checks that the election's leader, read in Redis, is want.
func leaderIs(t testing.TB, e *election.Election, want election.Leadership) {
	t.Helper()
	l, ok, err := e.Leader(context.Background())
	require.NoError(t, err)
	require.True(t, ok, "nobody leads; want %+v", want)
	assert.Equal(t, want, l)
}

// noLeader checks that nobody leads the election.
func noLeader(t testing.TB, e *election.Election) {
	t.Helper()
	l, ok, err := e.Leader(context.Background())
	require.NoError(t, err)
	assert.False(t, ok, "%+v leads", l)
}

// assertNothingLeft checks that the election's lock is free with nobody queued (its lock key,
// queue and deadlines are gone) and that none of the test's keys lacks a TTL: the leader
// record may stay until its lease ends, and must expire.
func assertNothingLeft(t testing.TB, rdb redis.UniversalClient, e *election.Election) {
	t.Helper()
	ctx := context.Background()
	for _, k := range e.Keys()[:3] {
		n, err := rdb.Exists(ctx, k).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "key %s is left", k)
	}
	redistest.AssertNoKeyWithoutTTL(t, rdb, e.Name(), e.Keys()[0])
}

// ---- The fenced witness ----------------------------------------------------------------

// fencedWrite is the witness that leaders write to, in Redis: a store that checks fencing
// tokens. It keeps the greatest token it accepted a write with (KEYS[1]), appends each
// accepted write to a list (KEYS[2]) and counts the writes it refused (KEYS[3]) because their
// token was below the greatest. Every key expires a minute after its last write.
//
// ARGV[1] the writer's fencing token, ARGV[2] the entry to append. Replies 1 accepted, 0
// refused.
var fencedWrite = redis.NewScript(`
local t = tonumber(ARGV[1])
local max = tonumber(redis.call('GET', KEYS[1]) or '0')
if t < max then
  redis.call('INCR', KEYS[3])
  redis.call('PEXPIRE', KEYS[3], 60000)
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', 60000)
redis.call('RPUSH', KEYS[2], ARGV[2])
redis.call('PEXPIRE', KEYS[2], 60000)
return 1
`)

// occupy and vacate are the witness of "at most one leader": a leader occupies it (KEYS[1],
// its entry) as it begins to act and vacates it before it resigns. Occupying it while someone
// else's entry is there is an overlap, counted in KEYS[2]. occupy's write is fenced as
// fencedWrite's is: a token below the greatest seen (KEYS[3]) is a stale write, counted in
// KEYS[4]. ARGV[1] the token, ARGV[2] the entry. Replies {overlap, stale} (0 or 1 each).
var occupy = redis.NewScript(`
local overlap, stale = 0, 0
local there = redis.call('GET', KEYS[1])
if there and there ~= ARGV[2] then
  overlap = 1
  redis.call('INCR', KEYS[2])
  redis.call('PEXPIRE', KEYS[2], 60000)
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', 60000)
local max = tonumber(redis.call('GET', KEYS[3]) or '0')
if tonumber(ARGV[1]) < max then
  stale = 1
  redis.call('INCR', KEYS[4])
  redis.call('PEXPIRE', KEYS[4], 60000)
else
  redis.call('SET', KEYS[3], ARGV[1], 'PX', 60000)
end
return {overlap, stale}
`)

// vacate: ARGV[1] the entry; the occupant is removed only when it is that entry.
var vacate = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
end
return 0
`)

// witnessKeys are the witness's keys for the election whose lock key is lockKey, in its slot.
type witnessKeys struct{ max, writes, refused, occupant, overlaps, stale string }

func witnessOf(lockKey string) witnessKeys {
	w := lockKey + ":witness:"
	return witnessKeys{max: w + "max", writes: w + "writes", refused: w + "refused", occupant: w + "occupant",
		overlaps: w + "overlaps", stale: w + "stale"}
}

func (w witnessKeys) all() []string {
	return []string{w.max, w.writes, w.refused, w.occupant, w.overlaps, w.stale}
}

// write sends a fenced write (fencedWrite) and reports whether it was accepted.
func (w witnessKeys) write(ctx context.Context, rdb redis.Scripter, token int64, entry string) (bool, error) {
	n, err := fencedWrite.Run(ctx, rdb, []string{w.max, w.writes, w.refused}, token, entry).Int()
	return n == 1, err
}

// counter reads a counter of the witness (0 when it was never counted).
func (w witnessKeys) counter(t testing.TB, rdb redis.UniversalClient, key string) int {
	t.Helper()
	n, err := rdb.Get(context.Background(), key).Int()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	require.NoError(t, err)
	return n
}

// ---- The candidate process -------------------------------------------------------------

// Roles of the child processes.
//
// The multi-process tests (process_test.go) run this test binary again in roleCandidate, as
// redistest.RegisterRole describes: a process with one aqs Client (with the parameters'
// watchdog timeout) and the election of the parameters' name, whose candidates campaign as the
// parent tells them, each in a goroutine of its own:
//
//	child:  "ready <client id> <pid>"          connected, scripts loaded
//	parent: "hold <k> <value>"                 candidate k campaigns, and leads until told
//	parent: "write <k> <value> <every ms>"     candidate k campaigns; once it leads it writes
//	                                           to the fenced witness every so often, each write
//	                                           after a check of its leading context's Err
//	child:  "lead <k> <unix ns> <token>"       k leads: Campaign returned then
//	child:  "wrote <k> <n> <unix ns> <1|0>"    k's write n, accepted (1) or refused (0) by the
//	                                           witness; the time is when its check of Err passed
//	child:  "lost <k> <unix ns> <cause>"       k's leadership ended while it led, without a
//	                                           Resign: "locklost" for aqs.ErrLockLost, else the
//	                                           cause's text; a writer says so after its last
//	                                           "wrote", as its check of Err finds it
//	parent: "resign <k>"                       k stops writing and resigns
//	child:  "resigned <k> <unix ns>"           the time is when Resign was called
//	parent: "churn <k> <span ms> <work ms>"    candidate k campaigns, occupies the witness of
//	                                           "at most one leader", works, vacates it and
//	                                           resigns, again and again until span is over
//	child:  "churned <k> <leads> <overlaps> <stale>"   what it saw
//	child:  "failed <k> <error>"               a call of k failed (also on stderr)
//	parent: "end"                              exit once every candidate is done
//
// The times are the child's wall clock, the clock of every process of the machine. At EOF on
// stdin the child exits on the spot, leading and queued as it is, as a crash would.

var roleCandidate = redistest.RegisterRole("candidate", runCandidate)

// candidateParams are roleCandidate's parameters.
type candidateParams struct {
	Name          string        // the election's
	WaiterTimeout time.Duration // election.WithWaiterTimeout
	Watchdog      time.Duration // the Client's watchdog timeout: how long a dead leader leads
}

// The protocol's words.
const (
	lineReady    = "ready"
	lineHold     = "hold"
	lineWrite    = "write"
	lineLead     = "lead"
	lineWrote    = "wrote"
	lineLost     = "lost"
	lineResign   = "resign"
	lineResigned = "resigned"
	lineChurn    = "churn"
	lineChurned  = "churned"
	lineFailed   = "failed"
	lineEnd      = "end"
)

// campaignTimeout bounds any one Campaign of a child: only a stuck child waits that long, the
// tests' own bounds are shorter.
const campaignTimeout = time.Minute

// candidate is the state of one child.
type candidate struct {
	env *redistest.ChildEnv
	rdb redis.UniversalClient
	c   *aqs.Client
	e   *election.Election
	w   witnessKeys
	wg  sync.WaitGroup

	mu     sync.Mutex
	leads  map[int]*leader // by candidate number
	failed bool
}

// leader is a candidate of a child that leads.
type leader struct {
	lead   context.Context
	stop   chan struct{}      // closed by "resign": a writer stops writing
	done   chan struct{}      // closed once the writer stopped
	cancel context.CancelFunc // of the context it campaigned with
}

func runCandidate(env *redistest.ChildEnv, p candidateParams) error {
	rdb, c, err := env.Client(aqs.WithWatchdogTimeout(p.Watchdog))
	if err != nil {
		return err
	}
	defer rdb.Close()
	var opts []election.Option
	if p.WaiterTimeout > 0 {
		opts = append(opts, election.WithWaiterTimeout(p.WaiterTimeout))
	}
	e, err := election.New(c, p.Name, opts...)
	if err != nil {
		return err
	}
	x := &candidate{env: env, rdb: rdb, c: c, e: e, w: witnessOf(e.Keys()[0]), leads: map[int]*leader{}}
	env.Println(lineReady, c.ID(), os.Getpid())
	for line := range env.Lines() {
		f := strings.Fields(line)
		if len(f) == 1 && f[0] == lineEnd {
			x.wg.Wait()
			if x.failed {
				return errors.New("a candidate failed")
			}
			return nil
		}
		if err := x.do(f); err != nil {
			return fmt.Errorf("%q: %w", line, err)
		}
	}
	panic("unreachable: the parent's lines end only with the process")
}

// do runs one command of the parent; an error is a malformed command.
func (x *candidate) do(f []string) error {
	if len(f) < 2 {
		return errors.New("too short")
	}
	k, err := strconv.Atoi(f[1])
	if err != nil {
		return err
	}
	switch {
	case f[0] == lineHold && len(f) == 3:
		x.wg.Add(1)
		go func() {
			defer x.wg.Done()
			x.campaign(k, f[2], 0)
		}()
	case f[0] == lineWrite && len(f) == 4:
		ms, err := strconv.Atoi(f[3])
		if err != nil || ms <= 0 {
			return fmt.Errorf("bad period %q", f[3])
		}
		x.wg.Add(1)
		go func() {
			defer x.wg.Done()
			x.campaign(k, f[2], time.Duration(ms)*time.Millisecond)
		}()
	case f[0] == lineResign && len(f) == 2:
		x.mu.Lock()
		l := x.leads[k]
		delete(x.leads, k)
		x.mu.Unlock()
		if l == nil {
			return fmt.Errorf("candidate %d does not lead", k)
		}
		close(l.stop)
		<-l.done
		at := time.Now()
		err := x.e.Resign(l.lead)
		l.cancel()
		if err != nil {
			x.fail(k, fmt.Errorf("resign: %w", err))
			return nil
		}
		x.env.Println(lineResigned, k, at.UnixNano())
	case f[0] == lineChurn && len(f) == 4:
		span, err1 := strconv.Atoi(f[2])
		work, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil {
			return errors.New("bad durations")
		}
		x.wg.Add(1)
		go func() {
			defer x.wg.Done()
			x.churn(k, time.Duration(span)*time.Millisecond, time.Duration(work)*time.Millisecond)
		}()
	default:
		return errors.New("unknown command")
	}
	return nil
}

// campaign is candidate k: it campaigns and, once it leads, writes to the witness every
// period (0: never) until it is told to resign or its leadership ends.
func (x *candidate) campaign(k int, value string, period time.Duration) {
	// The bound applies to the campaign only, as ctx does.
	ctx, cancel := context.WithCancel(context.Background())
	bound := time.AfterFunc(campaignTimeout, cancel)
	lead, err := x.e.Campaign(ctx, value)
	bound.Stop()
	if err != nil {
		cancel()
		x.fail(k, fmt.Errorf("campaign: %w", err))
		return
	}
	l := &leader{lead: lead, stop: make(chan struct{}), done: make(chan struct{}), cancel: cancel}
	x.mu.Lock()
	x.leads[k] = l // before "lead": the parent may send "resign" at once
	x.mu.Unlock()
	tok, err := aqs.FencingToken(lead)
	if err != nil {
		x.fail(k, fmt.Errorf("token: %w", err))
	}
	x.env.Println(lineLead, k, time.Now().UnixNano(), tok)
	defer close(l.done)
	if period == 0 {
		go func() { // the end of the leadership, unless a Resign ended it
			<-lead.Done()
			if cause := context.Cause(lead); !errors.Is(cause, aqs.ErrReleased) {
				x.lost(k, cause)
			}
			cancel()
		}()
		return
	}
	// A writer reports the end of its leadership itself, after its last write; ctx, the
	// leading context's parent, is cancelled after the Resign ("resign") or then.
	tick := time.NewTicker(period)
	defer tick.Stop()
	for n := 1; ; n++ {
		// The leader's check before each act of leadership (see Campaign).
		if lead.Err() != nil {
			x.lost(k, context.Cause(lead))
			cancel()
			return
		}
		checked := time.Now()
		ok, err := x.w.write(context.Background(), x.rdb, tok, fmt.Sprintf("%d:%d:%d", k, n, tok))
		if err != nil {
			x.fail(k, fmt.Errorf("write %d: %w", n, err))
			return
		}
		x.env.Println(lineWrote, k, n, checked.UnixNano(), b2i(ok))
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
	}
}

// churn is candidate k of the witness of "at most one leader": it leads, occupies the
// witness, works, vacates it and resigns, again and again until span is over.
func (x *candidate) churn(k int, span, work time.Duration) {
	var leads, overlaps, stale int
	ctx := context.Background()
	for end := time.Now().Add(span); time.Now().Before(end); {
		cctx, cancel := context.WithTimeout(ctx, campaignTimeout)
		lead, err := x.e.Campaign(cctx, strconv.Itoa(k))
		if err != nil {
			cancel()
			x.fail(k, fmt.Errorf("campaign: %w", err))
			return
		}
		leads++
		tok, err := aqs.FencingToken(lead)
		entry := fmt.Sprintf("%s:%d", x.c.ID(), leads)
		if err == nil && lead.Err() == nil {
			var r []int64
			r, err = occupy.Run(ctx, x.rdb, []string{x.w.occupant, x.w.overlaps, x.w.max, x.w.stale}, tok, entry).Int64Slice()
			if err == nil {
				overlaps += int(r[0])
				stale += int(r[1])
				time.Sleep(work) // the work done while leading
				err = vacate.Run(ctx, x.rdb, []string{x.w.occupant}, entry).Err()
			}
		}
		if rerr := x.e.Resign(lead); err == nil {
			err = rerr
		}
		cancel()
		if err != nil {
			x.fail(k, err)
			return
		}
	}
	x.env.Println(lineChurned, k, leads, overlaps, stale)
}

func (x *candidate) lost(k int, cause error) {
	word := strings.ReplaceAll(fmt.Sprint(cause), " ", "_")
	if errors.Is(cause, aqs.ErrLockLost) {
		word = "locklost"
	}
	x.env.Println(lineLost, k, time.Now().UnixNano(), word)
}

func (x *candidate) fail(k int, err error) {
	fmt.Fprintf(os.Stderr, "candidate (pid %d): %d: %v\n", os.Getpid(), k, err)
	x.env.Println(lineFailed, k, strings.ReplaceAll(err.Error(), "\n", " "))
	x.mu.Lock()
	x.failed = true
	x.mu.Unlock()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
