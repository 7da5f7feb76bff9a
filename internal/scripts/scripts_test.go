package scripts_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/scripts"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/reentrant"
)

// The tests of this file flush the script caches of the shared servers. None of them runs in
// parallel, so a test that checks what is cached sees only its own effects; the library's
// own callers are meant not to notice a flush at all, which is what most tests here prove.

// topology is one deployment the scripts run on.
type topology struct {
	rdb     redis.UniversalClient
	masters []*redis.Client // every master; the one server on a single node
	publish string          // the publish command the lock scripts are given
}

// masterFor returns the master that serves key.
func (tp topology) masterFor(t *testing.T, key string) *redis.Client {
	t.Helper()
	cc, ok := tp.rdb.(*redis.ClusterClient)
	if !ok {
		return tp.masters[0]
	}
	m, err := cc.MasterForKey(context.Background(), key)
	require.NoError(t, err)
	return m
}

// flush empties the script cache of every master.
func (tp topology) flush(t *testing.T) {
	t.Helper()
	for _, m := range tp.masters {
		require.NoError(t, m.ScriptFlush(context.Background()).Err(), "SCRIPT FLUSH on %s", m.Options().Addr)
	}
}

// topologies runs f on the shared single node and on the shared cluster.
func topologies(t *testing.T, f func(t *testing.T, tp topology)) {
	t.Run("single", func(t *testing.T) {
		c := redistest.Single(t).Client(t)
		f(t, topology{rdb: c, masters: []*redis.Client{c}, publish: "PUBLISH"})
	})
	t.Run("cluster", func(t *testing.T) {
		cc := redistest.Cluster(t).Client(t)
		var mu sync.Mutex
		var masters []*redis.Client
		require.NoError(t, cc.ForEachMaster(context.Background(), func(_ context.Context, m *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			masters = append(masters, m)
			return nil
		}))
		require.Len(t, masters, 3)
		f(t, topology{rdb: cc, masters: masters, publish: "SPUBLISH"})
	})
}

// keysOnEveryMaster returns one fresh key per master, hash-tagged so that the key's channel
// ("<key>:ch") shares its slot.
func keysOnEveryMaster(t *testing.T, tp topology) []string {
	t.Helper()
	base := redistest.Name(t)
	seen := map[string]bool{}
	var keys []string
	for i := 0; len(keys) < len(tp.masters); i++ {
		require.Less(t, i, 10000, "no key found for every master")
		key := fmt.Sprintf("%s:{%d}", base, i)
		addr := tp.masterFor(t, key).Options().Addr
		if !seen[addr] {
			seen[addr] = true
			keys = append(keys, key)
		}
	}
	return keys
}

// cached reports, for each script, whether m's script cache holds it.
func cached(t *testing.T, m *redis.Client, ss ...*scripts.Script) []bool {
	t.Helper()
	shas := make([]string, len(ss))
	for i, s := range ss {
		shas[i] = s.SHA()
	}
	got, err := m.ScriptExists(context.Background(), shas...).Result()
	require.NoError(t, err)
	return got
}

func repeatBool(b bool, n int) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = b
	}
	return out
}

// holdID returns a fresh hold id in the form the lock scripts accept.
func holdID() string { return uuid.NewString() + ":1" }

// acquireArgs are lock_acquire's ARGV for a new hold with a 60s lease whose fencing token is
// assigned at once; the caller does not wait.
func acquireArgs(hold string) []any { return []any{hold, 60000, 60000, "0", "1", "1"} }

// lockKeys are the lock scripts' KEYS for the lock at key: the value, the queue list, its
// deadlines (one hash tag, so one slot).
func lockKeys(key string) []string { return []string{key, key + ":q", key + ":d"} }

// attemptOf decodes an attempt's reply.
func attemptOf(t *testing.T, cmd *redis.Cmd) scripts.Attempt {
	t.Helper()
	v, err := cmd.Result()
	require.NoError(t, err)
	a, err := scripts.DecodeAttempt(v)
	require.NoError(t, err)
	return a
}

// releaseOf decodes a release's reply.
func releaseOf(t *testing.T, cmd *redis.Cmd) scripts.Release {
	t.Helper()
	v, err := cmd.Result()
	require.NoError(t, err)
	r, err := scripts.DecodeRelease(v)
	require.NoError(t, err)
	return r
}

// reenterArgs are lock_reenter's ARGV for a re-entry that leaves the lease alone.
func reenterArgs(hold string) []any { return []any{hold, 0} }

// releaseArgs are lock_release's ARGV; end is "1" to end the hold, "0" to count one down.
func releaseArgs(hold, end, publish string) []any { return []any{hold, end, publish, 60000, "", "0"} }

// holdCount reads the hold count of the lock at key with lock_info ("" when free).
func holdCount(t *testing.T, tp topology, key string) string {
	t.Helper()
	res, err := scripts.LockInfo.Run(context.Background(), tp.rdb, []string{key}).Slice()
	require.NoError(t, err)
	require.Len(t, res, 4)
	if n, ok := res[1].(int64); ok {
		return strconv.FormatInt(n, 10)
	}
	return ""
}

// isFalsy reports whether a script reply element is Lua false: a nil over RESP2, false over
// RESP3.
func isFalsy(v any) bool { return v == nil || v == false }

func TestScriptsAreTheEmbeddedFilesWithTheSHA1OfTheirSource(t *testing.T) {
	all := scripts.All()
	names := make([]string, len(all))
	for i, s := range all {
		names[i] = s.Name()
		sum := sha1.Sum([]byte(s.Source()))
		assert.Equal(t, hex.EncodeToString(sum[:]), s.SHA(), s.Name())
		assert.True(t, strings.HasPrefix(s.Source(), "-- "+s.Name()+":"),
			"%s starts with its header naming it", s.Name())
	}
	// Every .lua file of the folder but the fragments (_*.lua) is a script, loaded once.
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	var files []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".lua"); ok && !strings.HasPrefix(name, "_") {
			files = append(files, name)
		}
	}
	assert.ElementsMatch(t, files, names)
	assert.Same(t, scripts.LockAcquire, all[0])

	all[0] = nil
	assert.Same(t, scripts.LockAcquire, scripts.All()[0], "All returns a copy")
}

func TestEveryScriptSHAIsWhatScriptLoadReturnsOnEveryMaster(t *testing.T) {
	topologies(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		for _, m := range tp.masters {
			for _, s := range scripts.All() {
				sha, err := m.ScriptLoad(ctx, s.Source()).Result()
				require.NoError(t, err, "SCRIPT LOAD %s on %s", s.Name(), m.Options().Addr)
				assert.Equal(t, sha, s.SHA(), "%s on %s", s.Name(), m.Options().Addr)
			}
		}
	})
}

func TestLoadPutsEveryScriptOnEveryMaster(t *testing.T) {
	topologies(t, func(t *testing.T, tp topology) {
		all := scripts.All()
		tp.flush(t)
		for _, m := range tp.masters {
			require.Equal(t, repeatBool(false, len(all)), cached(t, m, all...), "flushed %s", m.Options().Addr)
		}
		require.NoError(t, scripts.Load(context.Background(), tp.rdb))
		for _, m := range tp.masters {
			assert.Equal(t, repeatBool(true, len(all)), cached(t, m, all...), "after Load on %s", m.Options().Addr)
		}
	})
}

func TestLoadReportsAnUnreachableServer(t *testing.T) {
	srv := redistest.NewServer(t)
	require.NoError(t, srv.Kill())
	opts := srv.Options()
	opts.MaxRetries = -1
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	err := scripts.Load(context.Background(), rdb)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "load script "+scripts.All()[0].Name())
}

// TestRunAnswersCorrectlyAfterScriptFlush flushes every script cache before each call of a
// lock's life: every call must still give the reply its script promises, and the fallback puts
// the script back into the cache of the master that ran it.
func TestRunAnswersCorrectlyAfterScriptFlush(t *testing.T) {
	topologies(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		for _, key := range keysOnEveryMaster(t, tp) {
			m := tp.masterFor(t, key)
			keys := lockKeys(key)
			owner := holdID()

			tp.flush(t)
			require.Equal(t, []bool{false}, cached(t, m, scripts.LockAcquire))
			a := attemptOf(t, scripts.LockAcquire.Run(ctx, tp.rdb, keys, acquireArgs(owner)...))
			require.Equal(t, scripts.Acquired, a.Status)
			tok := a.Token
			require.Positive(t, tok, "acquired, with the fencing token")
			token := strconv.FormatInt(tok, 10)
			assert.Equal(t, []bool{true}, cached(t, m, scripts.LockAcquire), "the EVAL fallback cached the script")

			tp.flush(t)
			res, err := scripts.LockInfo.Run(ctx, tp.rdb, keys).Slice()
			require.NoError(t, err)
			require.Len(t, res, 4)
			assert.Equal(t, owner, res[0])
			assert.Equal(t, int64(1), res[1], "first hold")
			assert.Equal(t, token, res[2])
			pttl, _ := res[3].(int64)
			assert.True(t, pttl > 0 && pttl <= 60000, "pttl %v", res[3])

			tp.flush(t)
			again, err := scripts.LockReenter.Run(ctx, tp.rdb, keys, reenterArgs(owner)...).Int64()
			require.NoError(t, err)
			assert.Equal(t, int64(1), again, "re-entered")
			tp.flush(t)
			kept, err := scripts.LockToken.Run(ctx, tp.rdb, keys, owner).Int64()
			require.NoError(t, err)
			assert.Equal(t, tok, kept, "re-entry keeps the token")
			assert.Equal(t, "2", holdCount(t, tp, key))

			tp.flush(t)
			other := attemptOf(t, scripts.LockAcquire.Run(ctx, tp.rdb, keys, acquireArgs(holdID())...))
			assert.True(t, other.Status == scripts.Busy && other.Wait <= time.Minute,
				"held by another owner for %v more (reply %+v)", other.Wait, other)

			// A first attempt of another hold of the owner's Client that asks (ARGV[7]) is told
			// the lock is held locally, and neither queues nor marks it.
			tp.flush(t)
			sibling := strings.TrimSuffix(owner, ":1") + ":2"
			local := attemptOf(t, scripts.LockAcquire.Run(ctx, tp.rdb, keys, sibling, 60000, 60000, "1", "0", "1", "1"))
			assert.True(t, local.Status == scripts.HeldLocally && local.Wait > 0 && local.Wait <= time.Minute,
				"held by a hold of the same Client (reply %+v)", local)
			queued, err := tp.rdb.ZCard(ctx, keys[2]).Result()
			require.NoError(t, err)
			assert.Zero(t, queued, "not queued")

			tp.flush(t)
			alive, err := scripts.LockRenew.Run(ctx, tp.rdb, keys, owner, 60000).Int64()
			require.NoError(t, err)
			assert.Equal(t, int64(1), alive)

			tp.flush(t)
			r := releaseOf(t, scripts.LockRelease.Run(ctx, tp.rdb, keys, releaseArgs(owner, "0", tp.publish)...))
			assert.Equal(t, scripts.Release{Kind: scripts.Counted, Left: 1}, r, "one hold left")

			tp.flush(t)
			r = releaseOf(t, scripts.LockRelease.Run(ctx, tp.rdb, keys, releaseArgs(owner, "1", tp.publish)...))
			assert.Equal(t, scripts.Freed, r.Kind, "released")

			tp.flush(t)
			res, err = scripts.LockInfo.Run(ctx, tp.rdb, keys).Slice()
			require.NoError(t, err)
			require.Len(t, res, 4)
			assert.True(t, isFalsy(res[0]), "no owner: %v", res[0])
			assert.True(t, isFalsy(res[1]), "no count: %v", res[1])
			assert.True(t, isFalsy(res[2]), "no token: %v", res[2])
			assert.Equal(t, int64(-2), res[3])

			tp.flush(t)
			alive, err = scripts.LockRenew.Run(ctx, tp.rdb, keys, owner, 0).Int64()
			require.NoError(t, err)
			assert.Equal(t, int64(0), alive, "a released hold is not renewed")

			tp.flush(t)
			freed, err := scripts.LockForceRelease.Run(ctx, tp.rdb, keys, tp.publish, "").Int64()
			require.NoError(t, err)
			assert.Equal(t, int64(0), freed, "nothing to force")

			require.NoError(t, tp.rdb.Del(ctx, key).Err())
		}
	})
}

// TestQueuedCallsRecoverFromScriptFlushWithRetry runs pipelines right after a flush: each
// pipelined EVALSHA meets NOSCRIPT, and Retry turns it into the script's real reply.
func TestQueuedCallsRecoverFromScriptFlushWithRetry(t *testing.T) {
	topologies(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		keys := keysOnEveryMaster(t, tp)
		owner := holdID()

		runPipeline := func(queue func(p redis.Pipeliner, key string) *scripts.Call) []*scripts.Call {
			p := tp.rdb.Pipeline()
			qs := make([]*scripts.Call, len(keys))
			for i, key := range keys {
				qs[i] = queue(p, key)
			}
			_, _ = p.Exec(ctx) // the per-command errors are what this test reads
			return qs
		}

		tp.flush(t)
		qs := runPipeline(func(p redis.Pipeliner, key string) *scripts.Call {
			return scripts.LockAcquire.Queue(ctx, p, lockKeys(key), acquireArgs(owner)...)
		})
		for i, q := range qs {
			require.True(t, scripts.IsNoScript(q.Cmd.Err()), "the flush made EVALSHA on %s miss: %v", keys[i], q.Cmd.Err())
			cmd := q.Retry(ctx, tp.rdb)
			assert.Same(t, q.Cmd, cmd, "Retry returns the command holding the final reply")
			a := attemptOf(t, cmd)
			require.Equal(t, scripts.Acquired, a.Status, keys[i])
			assert.Equal(t, "1", holdCount(t, tp, keys[i]))
		}

		// Once a script is cached, a pipeline hits at once and Retry re-runs nothing: each
		// re-entry counts once, not twice.
		for _, key := range keys {
			n, err := scripts.LockReenter.Run(ctx, tp.rdb, []string{key}, reenterArgs(owner)...).Int64()
			require.NoError(t, err)
			require.Equal(t, int64(1), n)
			assert.Equal(t, "2", holdCount(t, tp, key))
		}
		qs = runPipeline(func(p redis.Pipeliner, key string) *scripts.Call {
			return scripts.LockReenter.Queue(ctx, p, []string{key}, reenterArgs(owner)...)
		})
		for i, q := range qs {
			require.NoError(t, q.Cmd.Err(), keys[i])
			first := q.Cmd
			n, err := q.Retry(ctx, tp.rdb).Int64()
			require.NoError(t, err)
			assert.Same(t, first, q.Cmd, "no re-run when EVALSHA hit")
			assert.Equal(t, int64(1), n, "re-entered")
			assert.Equal(t, "3", holdCount(t, tp, keys[i]), "re-entered once, not twice")
		}

		tp.flush(t)
		qs = runPipeline(func(p redis.Pipeliner, key string) *scripts.Call {
			return scripts.LockRelease.Queue(ctx, p, lockKeys(key), releaseArgs(owner, "1", tp.publish)...)
		})
		for _, q := range qs {
			require.True(t, scripts.IsNoScript(q.Cmd.Err()), "flushed again: %v", q.Cmd.Err())
			assert.Equal(t, scripts.Freed, releaseOf(t, q.Retry(ctx, tp.rdb)).Kind, "released")
		}
		for _, key := range keys {
			res, err := scripts.LockInfo.Run(ctx, tp.rdb, []string{key}).Slice()
			require.NoError(t, err)
			assert.True(t, isFalsy(res[0]), "%s is free", key)
			require.NoError(t, tp.rdb.Del(ctx, key).Err())
		}
	})
}

func TestIsNoScriptRecognisesTheServersNoScriptErrorOnly(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Single(t).Client(t)
	key := redistest.Name(t)
	unknown := strings.Repeat("0", 40) // the SHA1 of no script

	t.Run("recognised", func(t *testing.T) {
		assert.True(t, scripts.IsNoScript(rdb.EvalSha(ctx, unknown, []string{key}).Err()), "EVALSHA")

		p := rdb.Pipeline()
		piped := p.EvalSha(ctx, unknown, []string{key})
		_, _ = p.Exec(ctx)
		assert.True(t, scripts.IsNoScript(piped.Err()), "pipelined EVALSHA: %v", piped.Err())

		cc := redistest.Cluster(t).Client(t)
		assert.True(t, scripts.IsNoScript(cc.EvalSha(ctx, unknown, []string{key}).Err()), "EVALSHA on a cluster")
	})

	t.Run("not recognised", func(t *testing.T) {
		wrongType := key + ":string"
		require.NoError(t, rdb.Set(ctx, wrongType, "x", time.Minute).Err())
		canceled, cancel := context.WithCancel(ctx)
		cancel()
		closed := redis.NewClient(redistest.Single(t).Options())
		require.NoError(t, closed.Close())
		down := redistest.NewServer(t)
		require.NoError(t, down.Kill())
		downOpts := down.Options()
		downOpts.MaxRetries = -1
		unreachable := redis.NewClient(downOpts)
		t.Cleanup(func() { _ = unreachable.Close() })

		for name, err := range map[string]error{
			"nil":                            nil,
			"redis.Nil":                      rdb.Get(ctx, key+":missing").Err(),
			"a script that fails to compile": rdb.Eval(ctx, "return (", nil).Err(),
			"an error raised by a script":    rdb.Eval(ctx, "return redis.error_reply('ERR lookalike of NOSCRIPT')", nil).Err(),
			"an unknown command in a script": rdb.Eval(ctx, "return redis.call('NOSUCHCOMMAND')", nil).Err(),
			"WRONGTYPE from a lock script": scripts.LockAcquire.Run(ctx, rdb, lockKeys(wrongType),
				acquireArgs("owner")...).Err(),
			"an unknown command": rdb.Do(ctx, "NOSUCHCOMMAND").Err(),
			"a canceled context": rdb.Ping(canceled).Err(),
			"a closed client":    closed.Ping(ctx).Err(),
			"a refused dial":     unreachable.Ping(ctx).Err(),
			"a plain Go error":   errors.New("boom"),
		} {
			if name != "nil" {
				assert.Error(t, err, name)
			}
			assert.False(t, scripts.IsNoScript(err), "%s: %v", name, err)
		}
	})
}

// TestScriptFlushDuringLockTrafficIsInvisibleToCallers runs lock traffic through the public
// API while another goroutine flushes every script cache over and over: no call fails, and
// the locks still exclude.
func TestScriptFlushDuringLockTrafficIsInvisibleToCallers(t *testing.T) {
	topologies(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := aqs.New(ctx, tp.rdb)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })

		const nLocks, workers, rounds = 3, 8, 20
		base := redistest.Name(t)
		locks := make([]*reentrant.Lock, nLocks)
		inside := make([]atomic.Int32, nLocks)
		for i := range locks {
			locks[i], err = reentrant.New(c, fmt.Sprintf("%s-%d", base, i))
			require.NoError(t, err)
		}

		var flushes atomic.Int64
		trafficDone := make(chan struct{})
		flusherDone := make(chan struct{})
		firstFlush := make(chan struct{})
		go func() {
			defer close(flusherDone)
			for {
				for _, m := range tp.masters {
					if !assert.NoError(t, m.ScriptFlush(ctx).Err()) {
						return
					}
				}
				if flushes.Add(1) == 1 {
					close(firstFlush)
				}
				select {
				case <-trafficDone:
					return
				default:
				}
			}
		}()

		<-firstFlush
		before := flushes.Load()
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for r := range rounds {
					i := (w + r) % nLocks
					l := locks[i]
					held, err := l.Lock(ctx)
					if !assert.NoError(t, err, "Lock %s", l.Name()) {
						return
					}
					assert.Equal(t, int32(1), inside[i].Add(1), "%s excludes", l.Name())
					inner, err := l.Lock(held)
					assert.NoError(t, err, "re-enter %s", l.Name())
					if err == nil {
						assert.NoError(t, l.Unlock(inner), "Unlock inner %s", l.Name())
					}
					inside[i].Add(-1)
					assert.NoError(t, l.Unlock(held), "Unlock %s", l.Name())
				}
			})
		}
		wg.Wait()
		during := flushes.Load() - before
		close(trafficDone)
		<-flusherDone
		assert.Positive(t, during, "the caches were flushed while the locks were in use")
		t.Logf("%d flushes during %d lock cycles", during, workers*rounds)
		for _, l := range locks {
			locked, err := l.IsLocked(ctx)
			require.NoError(t, err)
			assert.False(t, locked, "%s is free at the end", l.Name())
		}
	})
}

// TestWatchdogRenewalSurvivesScriptFlush flushes the caches under a held lock and waits for
// the watchdog to renew the lease anyway: its pipelined renewal met NOSCRIPT and was retried.
func TestWatchdogRenewalSurvivesScriptFlush(t *testing.T) {
	topologies(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		const timeout = 1500 * time.Millisecond // renewed every 500ms
		c, err := aqs.New(ctx, tp.rdb, aqs.WithWatchdogTimeout(timeout))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		l, err := reentrant.New(c, redistest.Name(t))
		require.NoError(t, err)
		m := tp.masterFor(t, l.Key())

		held, err := l.Lock(ctx)
		require.NoError(t, err)
		for range 3 {
			tp.flush(t)
			// PTTL only falls until the watchdog renews the lease.
			last, err := tp.rdb.PTTL(ctx, l.Key()).Result()
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				cur, err := tp.rdb.PTTL(ctx, l.Key()).Result()
				if err != nil || cur <= last {
					last = cur
					return false
				}
				return true
			}, 5*timeout, 5*time.Millisecond, "the lease is renewed after a flush")
			assert.Equal(t, []bool{true}, cached(t, m, scripts.LockRenew),
				"the renewal went through Retry's EVAL, which cached the script again")
			require.NoError(t, held.Err(), "the hold is still trusted")
		}
		require.NoError(t, l.Unlock(held))
	})
}
