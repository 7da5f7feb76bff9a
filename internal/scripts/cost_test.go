//go:build callgrind

package scripts_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/internal/redisproc"
	"github.com/redaqs/aqs/internal/scripts"
)

// The hot paths' cost in Redis instructions: each scenario drives the scripts of one
// contended hand-off (or uncontended cycle) cycles times against a redis-server run under
// valgrind's callgrind, and logs the instructions the server executed per cycle (the counters
// zeroed after a warm-up, dumped after the cycles). The figures are what a change to the
// scripts is judged by (a closure made on every run shows here, not in a latency benchmark).
// It is built only with the tag callgrind (make callgrind), and needs valgrind; AQS_CALLGRIND
// sets the number of cycles (2000 when unset); with AQS_CALLGRIND_DIR set to a folder, the
// dumps (one a scenario, in order) are kept there:
//
//	AQS_CALLGRIND=2000 go test -tags callgrind -count=1 -run TestHotPathInstructions -v ./internal/scripts/
//
// The server's cron runs once a second (hz 1), so that its work adds little to the figures.
func TestHotPathInstructions(t *testing.T) {
	cycles := 2000
	if v := os.Getenv("AQS_CALLGRIND"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "AQS_CALLGRIND")
		require.Positive(t, n, "AQS_CALLGRIND")
		cycles = n
	}
	_, err := exec.LookPath("valgrind")
	require.NoError(t, err, "valgrind is not installed (Debian: apt-get install valgrind)")
	cg := startCallgrind(t)
	for _, sc := range costScenarios {
		t.Run(sc.name, func(t *testing.T) {
			ctx := context.Background()
			run := sc.setup(t, ctx, cg.rdb)
			for range 50 {
				run()
			}
			require.NoError(t, cg.rdb.ConfigResetStat(ctx).Err())
			cg.control(t, "-z")
			for range cycles {
				run()
			}
			ir := cg.dump(t)
			t.Logf("COST %-22s %9.0f instructions per cycle (%d cycles)", sc.name, float64(ir)/float64(cycles), cycles)
			t.Logf("     %-22s commands per cycle: %s", sc.name, commandsPerCycle(t, ctx, cg.rdb, cycles))
		})
	}
}

// callgrind is a redis-server run under callgrind.
type callgrind struct {
	cmd   *exec.Cmd
	rdb   *redis.Client
	out   string // the callgrind output file; dumps are out.1, out.2, ...
	dumps int
}

func startCallgrind(t *testing.T) *callgrind {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	dir := t.TempDir()
	out := filepath.Join(dir, "cg")
	if keep := os.Getenv("AQS_CALLGRIND_DIR"); keep != "" {
		out = filepath.Join(keep, "cg") // the dumps are kept there, for callgrind_annotate
	}
	bin, err := redisproc.Binary()
	require.NoError(t, err)
	cmd := exec.Command("valgrind", "--tool=callgrind", "--callgrind-out-file="+out,
		bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--hz", "1", "--dynamic-hz", "no", "--dir", dir)
	cmd.Stdout, cmd.Stderr = nil, nil
	require.NoError(t, cmd.Start())
	cg := &callgrind{cmd: cmd, out: out}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	cg.rdb = redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), ReadTimeout: time.Minute})
	t.Cleanup(func() { _ = cg.rdb.Close() })
	require.Eventually(t, func() bool { return cg.rdb.Ping(context.Background()).Err() == nil },
		time.Minute, 100*time.Millisecond, "redis-server under callgrind did not answer")
	require.NoError(t, scripts.Load(context.Background(), cg.rdb))
	return cg
}

func (cg *callgrind) control(t *testing.T, op string) {
	t.Helper()
	b, err := exec.Command("callgrind_control", op, strconv.Itoa(cg.cmd.Process.Pid)).CombinedOutput()
	require.NoError(t, err, "callgrind_control %s: %s", op, b)
}

// dump dumps the counters (which zeroes them) and returns the instructions counted.
func (cg *callgrind) dump(t *testing.T) int64 {
	t.Helper()
	cg.control(t, "-d")
	cg.dumps++
	b, err := os.ReadFile(fmt.Sprintf("%s.%d", cg.out, cg.dumps))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "summary: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no summary line in the callgrind dump")
	return 0
}

// commandsPerCycle returns the commands the server ran per cycle since its stats were reset,
// those the scripts called included: "pexpire 2.00 zadd 1.00 ...".
func commandsPerCycle(t *testing.T, ctx context.Context, c *redis.Client, cycles int) string {
	t.Helper()
	info, err := c.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	var out []string
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, _ := strconv.Atoi(calls)
		out = append(out, fmt.Sprintf("%s %.2f", strings.TrimPrefix(name, "cmdstat_"), float64(n)/float64(cycles)))
	}
	return strings.Join(out, " ")
}

// costScenario sets up one primitive and returns one cycle of its scripts, which checks the
// replies that say it took the path it measures.
type costScenario struct {
	name  string
	setup func(t *testing.T, ctx context.Context, c *redis.Client) func()
}

// costClient is one Client id and its holds.
type costClient struct {
	id  string
	seq int
}

// multiKeys returns the keys of n names sharing a hash tag, as multilock passes them.
func multiKeys(base string, n int) []string {
	var keys []string
	for i := range n {
		keys = append(keys, lockKeys(fmt.Sprintf("%s:{t}%d", base, i))...)
	}
	return keys
}

func newCostClient() *costClient { return &costClient{id: uuid.NewString()} }

func (c *costClient) hold() string {
	c.seq++
	return fmt.Sprintf("%s:%d", c.id, c.seq)
}

func evalsha(t *testing.T, ctx context.Context, c *redis.Client, s *scripts.Script, keys []string, args ...any) []any {
	t.Helper()
	r, err := c.EvalSha(ctx, s.SHA(), keys, args...).Slice()
	require.NoError(t, err, s.Name())
	return r
}

func wantStatus(t *testing.T, r []any, status int64, what string) {
	t.Helper()
	require.NotEmpty(t, r, what)
	require.Equal(t, status, r[0], "%s: %v", what, r)
}

const costWait = 600000 // leases and waiter timeouts (ms): longer than any run

// trivial is the cheapest script, the floor of a script call.
var trivial = redis.NewScript("return 1")

var costScenarios = []costScenario{
	// The floors: a PING, and the cheapest strictly FIFO hand-off.
	{"floor-ping", func(t *testing.T, ctx context.Context, c *redis.Client) func() {
		return func() { require.NoError(t, c.Ping(ctx).Err()) }
	}},
	// The cheapest script call, and one with the release's keys and arguments (a contended
	// fair release's: three keys, seven arguments) that does nothing with them.
	{"floor-evalsha", func(t *testing.T, ctx context.Context, c *redis.Client) func() {
		require.NoError(t, trivial.Load(ctx, c).Err())
		return func() { require.NoError(t, trivial.EvalSha(ctx, c, nil).Err()) }
	}},
	{"floor-evalsha-args", func(t *testing.T, ctx context.Context, c *redis.Client) func() {
		require.NoError(t, trivial.Load(ctx, c).Err())
		keys := lockKeys("cost:fe:{l}")
		a := newCostClient()
		return func() {
			require.NoError(t, trivial.EvalSha(ctx, c, keys, a.hold(), "1", "PUBLISH", costWait, "", "0", a.hold()+" "+strconv.Itoa(costWait)).Err())
		}
	}},
	// The minimal correct lock cycle: SET NX PX, and a script that deletes the key if it still
	// holds the token.
	{"floor-lock-cycle", func(t *testing.T, ctx context.Context, c *redis.Client) func() {
		del := redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
		require.NoError(t, del.Load(ctx, c).Err())
		a := newCostClient()
		return func() {
			h := a.hold()
			require.NoError(t, c.SetNX(ctx, "cost:floor:{l}", h, costWait*time.Millisecond).Err())
			n, err := del.EvalSha(ctx, c, []string{"cost:floor:{l}"}, h).Int()
			require.NoError(t, err)
			require.Equal(t, 1, n)
		}
	}},
	// The FIFO floor's two commands, RPUSH of the token and BLPOP taking it, with the token
	// already there: the blocked waiter's wake-up is left out, so the floor's cost is a lower
	// bound.
	{"floor-fifo-handoff", func(t *testing.T, ctx context.Context, c *redis.Client) func() {
		const key = "cost:fifo"
		return func() {
			require.NoError(t, c.RPush(ctx, key, "t").Err())
			require.NoError(t, c.BLPop(ctx, 0, key).Err())
		}
	}},
	{"lock-uncontended", func(t *testing.T, ctx context.Context, c *redis.Client) func() {
		keys := lockKeys("cost:lu:{l}")
		a := newCostClient()
		return func() {
			h := a.hold()
			wantStatus(t, evalsha(t, ctx, c, scripts.LockAcquire, keys, h, costWait, costWait, "1", "0", "1", "0", "PUBLISH"), 1, "acquire")
			wantStatus(t, evalsha(t, ctx, c, scripts.LockRelease, keys, h, "1", "PUBLISH"), 1, "release")
		}
	}},
	// A contended hand-off: the holder's Client arrives with a new hold (joining behind the
	// waiter of the other Client), then the holder releases, handing the lock to that waiter.
	{"lock-handoff", func(t *testing.T, ctx context.Context, c *redis.Client) func() {
		keys := lockKeys("cost:lh:{l}")
		holder, waiter := newCostClient(), newCostClient()
		h := holder.hold()
		wantStatus(t, evalsha(t, ctx, c, scripts.LockAcquire, keys, h, costWait, costWait, "1", "0", "1", "0", "PUBLISH"), 1, "first")
		wantStatus(t, evalsha(t, ctx, c, scripts.LockAcquire, keys, waiter.hold(), costWait, costWait, "1", "0", "1", "0", "PUBLISH"), 3, "second")
		return func() {
			next := holder.hold()
			wantStatus(t, evalsha(t, ctx, c, scripts.LockAcquire, keys, next, costWait, costWait, "1", "0", "1", "0", "PUBLISH"), 3, "arrival")
			wantStatus(t, evalsha(t, ctx, c, scripts.LockRelease, keys, h, "1", "PUBLISH", costWait, "", "0"), 3, "release")
			h = fmt.Sprintf("%s:%d", waiter.id, waiter.seq)
			holder, waiter = waiter, holder
		}
	}},
	// The reentrant lock's local hand-off past a waiter of another Client.
	{"lock-local-handoff", func(t *testing.T, ctx context.Context, c *redis.Client) func() {
		keys := lockKeys("cost:ll:{l}")
		a := newCostClient()
		h := a.hold()
		wantStatus(t, evalsha(t, ctx, c, scripts.LockAcquire, keys, h, costWait, costWait, "1", "0", "1", "0", "PUBLISH"), 1, "first")
		wantStatus(t, evalsha(t, ctx, c, scripts.LockAcquire, keys, newCostClient().hold(), costWait, costWait, "1", "0", "1", "0", "PUBLISH"), 3, "other")
		return func() {
			next := a.hold()
			wantStatus(t, evalsha(t, ctx, c, scripts.LockRelease, keys, h, "1", "PUBLISH", costWait, next+" "+strconv.Itoa(costWait), "0"), 2, "release")
			h = next
		}
	}},
	// A release with a rider of the releasing Client, which joins before the hand-off to the
	// head, a waiter of the other Client.
	{"lock-riders", func(t *testing.T, ctx context.Context, c *redis.Client) func() {
		keys := lockKeys("cost:lr:{l}")
		holder, waiter := newCostClient(), newCostClient()
		h := holder.hold()
		wantStatus(t, evalsha(t, ctx, c, scripts.LockAcquire, keys, h, costWait, costWait, "1", "0", "1", "0", "PUBLISH"), 1, "first")
		wantStatus(t, evalsha(t, ctx, c, scripts.LockAcquire, keys, waiter.hold(), costWait, costWait, "1", "0", "1", "0", "PUBLISH"), 3, "second")
		return func() {
			rider := holder.hold()
			wantStatus(t, evalsha(t, ctx, c, scripts.LockRelease, keys, h, "1", "PUBLISH", costWait, "", "0",
				rider+" "+strconv.Itoa(costWait)), 3, "release")
			h = fmt.Sprintf("%s:%d", waiter.id, waiter.seq)
			holder, waiter = waiter, holder
		}
	}},
	// A multi-lock of three names, uncontended: acquire and release.
	{"multi-uncontended-3", func(t *testing.T, ctx context.Context, c *redis.Client) func() {
		keys := multiKeys("cost:mu", 3)
		a := newCostClient()
		return func() {
			h := a.hold()
			wantStatus(t, evalsha(t, ctx, c, scripts.MultiAcquire, keys, h, costWait, costWait, "1", "1", "PUBLISH", "0"), 1, "acquire")
			wantStatus(t, evalsha(t, ctx, c, scripts.MultiRelease, keys, h, "PUBLISH"), 1, "release")
		}
	}},
	// A contended multi-lock of three names: the holder's Client arrives with a new hold of
	// the same names (joining every queue behind the waiter of the other Client), then the
	// holder releases, handing every name to that waiter, which holds on the grants alone.
	{"multi-handoff-3", func(t *testing.T, ctx context.Context, c *redis.Client) func() {
		keys := multiKeys("cost:mh", 3)
		holder, waiter := newCostClient(), newCostClient()
		h := holder.hold()
		wantStatus(t, evalsha(t, ctx, c, scripts.MultiAcquire, keys, h, costWait, costWait, "1", "1", "PUBLISH", "0"), 1, "first")
		wantStatus(t, evalsha(t, ctx, c, scripts.MultiAcquire, keys, waiter.hold(), costWait, costWait, "1", "1", "PUBLISH", "0"), 3, "second")
		return func() {
			next := holder.hold()
			wantStatus(t, evalsha(t, ctx, c, scripts.MultiAcquire, keys, next, costWait, costWait, "1", "1", "PUBLISH", "0"), 3, "arrival")
			wantStatus(t, evalsha(t, ctx, c, scripts.MultiRelease, keys, h, "PUBLISH"), 1, "release")
			h = fmt.Sprintf("%s:%d", waiter.id, waiter.seq)
			holder, waiter = waiter, holder
		}
	}},
	// A contended counting semaphore of one permit: an arrival joins, a release grants the
	// head.
	{"sem-handoff", func(t *testing.T, ctx context.Context, c *redis.Client) func() {
		keys := []string{"cost:s:{s}", "cost:s:{s}:q", "cost:s:{s}:d", "cost:s:{s}:g"}
		a, b := newCostClient(), newCostClient()
		wantStatus(t, evalsha(t, ctx, c, scripts.SemSet, keys, "set", 1, "PUBLISH", a.id, "c"), 0, "set")
		wantStatus(t, evalsha(t, ctx, c, scripts.SemAcquire, keys, a.hold(), 1, costWait, "1", "PUBLISH", "0"), 1, "first")
		wantStatus(t, evalsha(t, ctx, c, scripts.SemAcquire, keys, b.hold(), 1, costWait, "1", "PUBLISH", "0"), 3, "second")
		return func() {
			wantStatus(t, evalsha(t, ctx, c, scripts.SemAcquire, keys, a.hold(), 1, costWait, "1", "PUBLISH", "0"), 3, "arrival")
			wantStatus(t, evalsha(t, ctx, c, scripts.SemRelease, keys, 1, "PUBLISH", a.id), 0, "release")
			a, b = b, a
		}
	}},
	{"sem-uncontended", func(t *testing.T, ctx context.Context, c *redis.Client) func() {
		keys := []string{"cost:su:{s}", "cost:su:{s}:q", "cost:su:{s}:d", "cost:su:{s}:g"}
		a := newCostClient()
		wantStatus(t, evalsha(t, ctx, c, scripts.SemSet, keys, "set", 1, "PUBLISH", a.id, "c"), 0, "set")
		return func() {
			wantStatus(t, evalsha(t, ctx, c, scripts.SemAcquire, keys, a.hold(), 1, costWait, "1", "PUBLISH", "0"), 1, "acquire")
			wantStatus(t, evalsha(t, ctx, c, scripts.SemRelease, keys, 1, "PUBLISH", a.id), 0, "release")
		}
	}},
	// A contended leased semaphore of one permit: an arrival joins, the holder's release
	// hands its place to the head.
	{"lsem-handoff", func(t *testing.T, ctx context.Context, c *redis.Client) func() {
		keys := []string{"cost:p:{s}", "cost:p:{s}:q", "cost:p:{s}:d", "cost:p:{s}:p", "cost:p:{s}:pn"}
		a, b := newCostClient(), newCostClient()
		wantStatus(t, evalsha(t, ctx, c, scripts.SemSet, keys, "set", 1, "PUBLISH", a.id, "l"), 0, "set")
		h := a.hold()
		wantStatus(t, evalsha(t, ctx, c, scripts.LSemAcquire, keys, h, 1, costWait, costWait, "1", "PUBLISH", "0"), 1, "first")
		wantStatus(t, evalsha(t, ctx, c, scripts.LSemAcquire, keys, b.hold(), 1, costWait, costWait, "1", "PUBLISH", "0"), 3, "second")
		return func() {
			next := a.hold()
			wantStatus(t, evalsha(t, ctx, c, scripts.LSemAcquire, keys, next, 1, costWait, costWait, "1", "PUBLISH", "0"), 3, "arrival")
			wantStatus(t, evalsha(t, ctx, c, scripts.LSemRelease, keys, h, 0, "PUBLISH", a.id, "1"), 0, "release")
			h = fmt.Sprintf("%s:%d", b.id, b.seq)
			a, b = b, a
		}
	}},
	{"lsem-uncontended", func(t *testing.T, ctx context.Context, c *redis.Client) func() {
		keys := []string{"cost:pu:{s}", "cost:pu:{s}:q", "cost:pu:{s}:d", "cost:pu:{s}:p", "cost:pu:{s}:pn"}
		a := newCostClient()
		wantStatus(t, evalsha(t, ctx, c, scripts.SemSet, keys, "set", 1, "PUBLISH", a.id, "l"), 0, "set")
		return func() {
			h := a.hold()
			wantStatus(t, evalsha(t, ctx, c, scripts.LSemAcquire, keys, h, 1, costWait, costWait, "1", "PUBLISH", "0"), 1, "acquire")
			wantStatus(t, evalsha(t, ctx, c, scripts.LSemRelease, keys, h, 0, "PUBLISH", a.id, "1"), 0, "release")
		}
	}},
	// A read-write lock passed between a writer and a reader of two Clients: a reader arrives
	// while the writer holds, the writer's release grants it; a writer arrives while it
	// reads, its release grants the writer.
	{"rw-handoff", func(t *testing.T, ctx context.Context, c *redis.Client) func() {
		keys := []string{"cost:rw:{w}", "cost:rw:{w}:r", "cost:rw:{w}:rn", "cost:rw:{w}:q", "cost:rw:{w}:d"}
		wc, rc := newCostClient(), newCostClient()
		wh := wc.hold()
		wantStatus(t, evalsha(t, ctx, c, scripts.RWWriteAcquire, keys, wh, costWait, costWait, "1", "0", "PUBLISH", "1"), 1, "first")
		return func() {
			rh := rc.hold()
			wantStatus(t, evalsha(t, ctx, c, scripts.RWReadAcquire, keys, rh, costWait, "", "1", costWait, "1", "PUBLISH", "1"), 3, "read arrival")
			wantStatus(t, evalsha(t, ctx, c, scripts.RWWriteRelease, keys, wh, "1", "PUBLISH"), 1, "write release")
			wh = wc.hold()
			wantStatus(t, evalsha(t, ctx, c, scripts.RWWriteAcquire, keys, wh, costWait, costWait, "1", "0", "PUBLISH", "1"), 3, "write arrival")
			wantStatus(t, evalsha(t, ctx, c, scripts.RWReadRelease, keys, rh, "1", "PUBLISH", "0", "1"), 1, "read release")
		}
	}},
	{"rw-write-uncontended", func(t *testing.T, ctx context.Context, c *redis.Client) func() {
		keys := []string{"cost:rwu:{w}", "cost:rwu:{w}:r", "cost:rwu:{w}:rn", "cost:rwu:{w}:q", "cost:rwu:{w}:d"}
		a := newCostClient()
		return func() {
			h := a.hold()
			wantStatus(t, evalsha(t, ctx, c, scripts.RWWriteAcquire, keys, h, costWait, costWait, "1", "0", "PUBLISH", "1"), 1, "acquire")
			wantStatus(t, evalsha(t, ctx, c, scripts.RWWriteRelease, keys, h, "1", "PUBLISH"), 1, "release")
		}
	}},
	{"rw-read-uncontended", func(t *testing.T, ctx context.Context, c *redis.Client) func() {
		keys := []string{"cost:rr:{w}", "cost:rr:{w}:r", "cost:rr:{w}:rn", "cost:rr:{w}:q", "cost:rr:{w}:d"}
		rc := newCostClient()
		return func() {
			rh := rc.hold()
			wantStatus(t, evalsha(t, ctx, c, scripts.RWReadAcquire, keys, rh, costWait, "", "1", costWait, "1", "PUBLISH", "1"), 1, "acquire")
			wantStatus(t, evalsha(t, ctx, c, scripts.RWReadRelease, keys, rh, "1", "PUBLISH", "0", "1"), 1, "release")
		}
	}},
}
