package aqs_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	_ "github.com/redaqs/aqs/fair" // registers the fair lock's drill
	"github.com/redaqs/aqs/internal/testkit/redistest"
	_ "github.com/redaqs/aqs/semaphore" // registers the semaphore's drill
)

// findings returns the report's findings of check.
func findings(r *aqs.Report, check string) []aqs.Finding {
	var out []aqs.Finding
	for _, f := range r.Findings {
		if f.Check == check {
			out = append(out, f)
		}
	}
	return out
}

// only returns the one finding of check, failing the test when there is not exactly one.
func only(t *testing.T, r *aqs.Report, check string) aqs.Finding {
	t.Helper()
	fs := findings(r, check)
	require.Len(t, fs, 1, "findings of %s in %+v", check, r.Findings)
	return fs[0]
}

// userClient returns a client of s logged in as user (password "pw"), after creating the user
// with the given ACL rules.
func userClient(t *testing.T, s *redistest.Server, user string, rules ...string) *redis.Client {
	t.Helper()
	admin := s.Client(t)
	args := []any{"ACL", "SETUSER", user, "reset", "on", ">pw"}
	for _, r := range rules {
		args = append(args, r)
	}
	require.NoError(t, admin.Do(context.Background(), args...).Err())
	opts := s.Options()
	opts.Username, opts.Password = user, "pw"
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// noScratchKeys asserts that nothing of Verify's is left on the server.
func noScratchKeys(t *testing.T, rdb redis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var keys []string
	scan := func(ctx context.Context, c *redis.Client) error {
		k, _, err := c.Scan(ctx, 0, "*aqs-verify-*", 10000).Result()
		mu.Lock()
		keys = append(keys, k...)
		mu.Unlock()
		return err
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		require.NoError(t, cc.ForEachMaster(ctx, scan))
	} else {
		require.NoError(t, scan(ctx, rdb.(*redis.Client)))
	}
	assert.Empty(t, keys, "scratch keys left behind")
}

func TestVerifyPassesASafeServerAndLeavesNothing(t *testing.T) {
	s := redistest.NewServer(t)
	rdb := s.Client(t)
	ctx := context.Background()
	// Persistence as the library would have it: AOF, fsync always.
	require.NoError(t, rdb.ConfigSet(ctx, "appendfsync", "always").Err())
	require.NoError(t, rdb.ConfigSet(ctx, "appendonly", "yes").Err())

	r, err := aqs.VerifyServer(ctx, rdb)
	require.NoError(t, err)
	assert.Equal(t, aqs.Pass, r.Worst(), "%+v", r.Findings)
	assert.False(t, r.Failed())
	assert.Equal(t, "aqs", r.Prefix)
	assert.Equal(t, "single server", r.Topology)
	assert.Regexp(t, `^(Redis|Valkey) \d+\.\d+`, r.Server)
	for _, check := range []string{aqs.CheckServer, aqs.CheckTopology, aqs.CheckEviction, aqs.CheckPersistence,
		aqs.CheckReplication, aqs.CheckScripts, aqs.CheckACL, aqs.CheckLatency, aqs.CheckClock} {
		f := only(t, r, check)
		assert.Equal(t, aqs.Pass, f.Severity, "%s: %s", check, f.Summary)
		assert.Empty(t, f.Fix, check)
		assert.Empty(t, f.Server, check)
	}
	drills := findings(r, aqs.CheckDrill)
	require.Len(t, drills, 2, "%+v", drills)
	assert.True(t, strings.HasPrefix(drills[0].Summary, "fair lock: "), drills[0].Summary)
	assert.True(t, strings.HasPrefix(drills[1].Summary, "semaphore: "), drills[1].Summary)
	for _, d := range drills {
		assert.Equal(t, aqs.Pass, d.Severity, d.Summary)
	}
	n, err := rdb.DBSize(ctx).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "keys left on a server that had none")
}

func TestVerifyFailsAServerThatEvictsKeys(t *testing.T) {
	s := redistest.NewServer(t)
	rdb := s.Client(t)
	ctx := context.Background()
	for _, policy := range []string{"allkeys-lru", "volatile-ttl", "volatile-lfu", "allkeys-random"} {
		require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "100mb").Err())
		require.NoError(t, rdb.ConfigSet(ctx, "maxmemory-policy", policy).Err())
		r, err := aqs.VerifyServer(ctx, rdb)
		require.NoError(t, err)
		f := only(t, r, aqs.CheckEviction)
		assert.Equal(t, aqs.Fail, f.Severity, policy)
		assert.Contains(t, f.Summary, policy)
		assert.Contains(t, f.Fix, "noeviction")
		assert.True(t, r.Failed(), policy)
	}
	// An evicting policy without a limit evicts nothing yet.
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "0").Err())
	r, err := aqs.VerifyServer(ctx, rdb)
	require.NoError(t, err)
	assert.Equal(t, aqs.Warn, only(t, r, aqs.CheckEviction).Severity)
	assert.False(t, r.Failed(), "%+v", r.Findings)
	noScratchKeys(t, rdb)
}

func TestNewWarnsWhenTheServerMayEvictKeys(t *testing.T) {
	s := redistest.NewServer(t)
	rdb := s.Client(t)
	ctx := context.Background()
	newLogged := func() string {
		var buf bytes.Buffer
		c, err := aqs.New(ctx, rdb, aqs.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
		require.NoError(t, err)
		require.NoError(t, c.Close())
		return buf.String()
	}
	assert.NotContains(t, newLogged(), "evict", "a noeviction server")

	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err())
	assert.NotContains(t, newLogged(), "evict", "no maxmemory: nothing is evicted")

	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "100mb").Err())
	log := newLogged()
	assert.Contains(t, log, "level=WARN")
	assert.Contains(t, log, "evict")
	assert.Contains(t, log, "maxmemory-policy=allkeys-lru")
	assert.Contains(t, log, "server="+s.Addr())

	// A user that may read neither INFO nor CONFIG gets no warning, and New works.
	u := userClient(t, s, "noinfo", "~*", "&*", "+@all", "-info", "-config")
	c, err := aqs.New(ctx, u)
	require.NoError(t, err)
	require.NoError(t, c.Close())
}

func TestVerifyWithWaitRefused(t *testing.T) {
	s := redistest.NewServer(t)
	rdb := userClient(t, s, "nowait", "~*", "&*", "+@all", "-wait")
	ctx := context.Background()

	r, err := aqs.VerifyServer(ctx, rdb)
	require.NoError(t, err)
	f := only(t, r, aqs.CheckReplication)
	assert.Equal(t, aqs.Warn, f.Severity, f.Summary)
	assert.Contains(t, f.Summary, "WAIT is refused")
	assert.Contains(t, f.Fix, "ACL SETUSER nowait +wait")
	assert.False(t, r.Failed(), "%+v", r.Findings)

	// A user that counts on WithReplicaSync cannot have it.
	r, err = aqs.VerifyServer(ctx, rdb, aqs.WithReplicaSync(1, 100*time.Millisecond))
	require.NoError(t, err)
	f = only(t, r, aqs.CheckReplication)
	assert.Equal(t, aqs.Fail, f.Severity, f.Summary)
	assert.Contains(t, f.Summary, "WithReplicaSync(1, 100ms) needs WAIT")
	assert.Contains(t, f.Fix, "+wait")
	noScratchKeys(t, s.Client(t))
}

func TestVerifyWithoutScriptPermission(t *testing.T) {
	s := redistest.NewServer(t)
	rdb := userClient(t, s, "noscript", "~*", "&*", "+@all", "-@scripting")
	ctx := context.Background()

	_, err := aqs.New(ctx, rdb)
	require.Error(t, err, "New with a user who may not load scripts")

	r, err := aqs.VerifyServer(ctx, rdb)
	require.NoError(t, err)
	assert.True(t, r.Failed())
	f := only(t, r, aqs.CheckScripts)
	assert.Equal(t, aqs.Fail, f.Severity)
	assert.Contains(t, f.Summary, "NOPERM")
	assert.Contains(t, f.Fix, "ACL SETUSER noscript +evalsha +eval +script|load")
	assert.Equal(t, aqs.Fail, only(t, r, aqs.CheckACL).Severity)
	d := only(t, r, aqs.CheckDrill)
	assert.Equal(t, aqs.Skip, d.Severity, d.Summary)
	assert.Equal(t, aqs.Fail, r.Worst(), "Skip does not count over Fail")
	n, err := s.Client(t).DBSize(ctx).Result()
	require.NoError(t, err)
	assert.Zero(t, n)
}

func TestVerifyACLMustCoverThePrefix(t *testing.T) {
	s := redistest.NewServer(t)
	ctx := context.Background()
	// A user of the keys and channels under "app:" only, refused ZADD everywhere.
	rdb := userClient(t, s, "app", "~app:*", "&app:*", "+@all", "-zadd")

	r, err := aqs.VerifyServer(ctx, rdb, aqs.WithKeyPrefix("app"))
	require.NoError(t, err)
	f := only(t, r, aqs.CheckACL)
	assert.Equal(t, aqs.Fail, f.Severity, f.Summary)
	assert.Contains(t, f.Summary, "ZADD")
	assert.NotContains(t, f.Summary, "HSET", "only what is refused is named")
	assert.Equal(t, "ACL SETUSER app ~app:* &app:* +zadd", f.Fix)
	for _, d := range findings(r, aqs.CheckDrill) {
		assert.Equal(t, aqs.Fail, d.Severity, d.Summary)
		assert.Contains(t, d.Fix, "acl")
	}

	// With ZADD allowed, the prefix "app" passes, and the default prefix "aqs" does not: its
	// keys and channels are outside the user's.
	require.NoError(t, s.Client(t).Do(ctx, "ACL", "SETUSER", "app", "+zadd").Err())
	r, err = aqs.VerifyServer(ctx, rdb, aqs.WithKeyPrefix("app"))
	require.NoError(t, err)
	assert.Equal(t, aqs.Pass, only(t, r, aqs.CheckACL).Severity)
	for _, d := range findings(r, aqs.CheckDrill) {
		assert.Equal(t, aqs.Pass, d.Severity, d.Summary)
	}
	r, err = aqs.VerifyServer(ctx, rdb)
	require.NoError(t, err)
	f = only(t, r, aqs.CheckACL)
	assert.Equal(t, aqs.Fail, f.Severity)
	assert.Contains(t, f.Fix, "~aqs:* &aqs:*")
	noScratchKeys(t, s.Client(t))
}

func TestVerifyOfAReplicaAndOfReplicaSync(t *testing.T) {
	master, replica := redistest.NewServer(t), redistest.NewServer(t)
	ctx := context.Background()
	mc, rc := master.Client(t), replica.Client(t)
	// The full sync at once, not after the default 5s that waits for more replicas.
	require.NoError(t, mc.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err())
	host, port, _ := strings.Cut(master.Addr(), ":")
	require.NoError(t, rc.Do(ctx, "REPLICAOF", host, port).Err())
	require.Eventually(t, func() bool {
		n, err := mc.Do(ctx, "WAIT", 1, 10).Int()
		return err == nil && n == 1
	}, 10*time.Second, 10*time.Millisecond, "the replica never attached")

	// Pointed at the replica: nothing can be written.
	r, err := aqs.VerifyServer(ctx, rc)
	require.NoError(t, err)
	f := only(t, r, aqs.CheckTopology)
	assert.Equal(t, aqs.Fail, f.Severity)
	assert.Contains(t, f.Summary, "READONLY")

	// The master, replicated asynchronously: a failover can lose an acquisition.
	r, err = aqs.VerifyServer(ctx, mc)
	require.NoError(t, err)
	assert.Equal(t, "a master with 1 replicas", r.Topology)
	f = only(t, r, aqs.CheckReplication)
	assert.Equal(t, aqs.Warn, f.Severity)
	assert.Contains(t, f.Fix, "aqs.WithReplicaSync(1, ")

	// With the policy, the drill's acquisitions wait for the replica.
	r, err = aqs.VerifyServer(ctx, mc, aqs.WithReplicaSync(1, time.Second))
	require.NoError(t, err)
	assert.Equal(t, aqs.Pass, only(t, r, aqs.CheckReplication).Severity)
	for _, d := range findings(r, aqs.CheckDrill) {
		assert.Equal(t, aqs.Pass, d.Severity, d.Summary)
	}
	r, err = aqs.VerifyServer(ctx, mc, aqs.WithReplicaSync(2, 50*time.Millisecond))
	require.NoError(t, err)
	f = only(t, r, aqs.CheckReplication)
	assert.Equal(t, aqs.Fail, f.Severity)
	assert.Contains(t, f.Summary, "1 replicas are connected")
	noScratchKeys(t, mc)
}

func TestVerifyOnRedisCluster(t *testing.T) {
	c := redistest.Cluster(t)
	rdb := c.Client(t)
	r, err := aqs.VerifyServer(context.Background(), rdb)
	require.NoError(t, err)
	assert.Equal(t, "Redis Cluster, 3 masters", r.Topology)
	assert.False(t, r.Failed(), "%+v", r.Findings)
	f := only(t, r, aqs.CheckTopology)
	assert.Equal(t, aqs.Pass, f.Severity)
	assert.Contains(t, f.Summary, "every slot is served")
	// The masters agree, so each check is one finding for all of them.
	e := only(t, r, aqs.CheckEviction)
	assert.Empty(t, e.Server)
	assert.Contains(t, e.Summary, "(all 3 masters)")
	assert.Equal(t, aqs.Pass, only(t, r, aqs.CheckACL).Severity)
	for _, d := range findings(r, aqs.CheckDrill) {
		assert.Equal(t, aqs.Pass, d.Severity, d.Summary)
	}
	noScratchKeys(t, rdb)
}

func TestVerifyUsesTheClientsConfiguration(t *testing.T) {
	s := redistest.NewServer(t)
	ctx := context.Background()
	rdb := userClient(t, s, "app", "~app:*", "&app:*", "+@all")
	c := redistest.NewClient(t, rdb, aqs.WithKeyPrefix("app"))
	r, err := aqs.Verify(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, "app", r.Prefix)
	assert.Equal(t, aqs.Pass, only(t, r, aqs.CheckACL).Severity)
	assert.False(t, r.Failed(), "%+v", r.Findings)
}

func TestVerifyBadInput(t *testing.T) {
	ctx := context.Background()
	_, err := aqs.Verify(ctx, nil)
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	_, err = aqs.VerifyServer(ctx, nil)
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	rdb := redistest.Single(t).Client(t)
	_, err = aqs.VerifyServer(ctx, rdb, nil)
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
	_, err = aqs.VerifyServer(ctx, rdb, aqs.WithKeyPrefix("{x}"))
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)

	c, err := aqs.New(ctx, rdb)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	_, err = aqs.Verify(ctx, c)
	assert.ErrorIs(t, err, aqs.ErrClosed)

	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = aqs.VerifyServer(done, rdb)
	assert.ErrorIs(t, err, context.Canceled)

	// A server that does not answer: an error, not a report.
	gone := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer gone.Close()
	_, err = aqs.VerifyServer(ctx, gone)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "PING")
	assert.False(t, errors.Is(err, aqs.ErrInvalidArgument))
}

func TestSeverityText(t *testing.T) {
	for _, s := range []aqs.Severity{aqs.Pass, aqs.Warn, aqs.Fail, aqs.Skip} {
		b, err := s.MarshalText()
		require.NoError(t, err)
		var back aqs.Severity
		require.NoError(t, back.UnmarshalText(b))
		assert.Equal(t, s, back)
	}
	assert.Error(t, new(aqs.Severity).UnmarshalText([]byte("fine")))
	_, err := aqs.Severity(9).MarshalText()
	assert.Error(t, err)
}

func TestVerifyThroughSentinel(t *testing.T) {
	g := redistest.NewSentinel(t)
	rdb := g.Client(t)
	r, err := aqs.VerifyServer(context.Background(), rdb)
	require.NoError(t, err)
	assert.False(t, r.Failed(), "%+v", r.Findings)
	assert.Regexp(t, `^a master with \d+ replicas$`, r.Topology)
	assert.Equal(t, aqs.Pass, only(t, r, aqs.CheckTopology).Severity)
	f := only(t, r, aqs.CheckReplication)
	assert.Equal(t, aqs.Warn, f.Severity, "replicated asynchronously: %s", f.Summary)
	for _, d := range findings(r, aqs.CheckDrill) {
		assert.Equal(t, aqs.Pass, d.Severity, d.Summary)
	}
	noScratchKeys(t, rdb)
}

func TestVerifyReturnsByItsDeadlineWhenRedisStalls(t *testing.T) {
	s := redistest.NewServer(t)
	rdb := s.Client(t)
	pingRE := regexp.MustCompile(`cmdstat_ping:calls=(\d+)`)
	pings := func() (int, error) {
		info, err := rdb.Info(context.Background(), "commandstats").Result()
		if m := pingRE.FindStringSubmatch(info); err == nil && m != nil {
			return strconv.Atoi(m[1])
		}
		return 0, err
	}
	// The server stops answering once Verify has begun: after its first PING, with its checks
	// (some 70 round trips and the clock's 300ms) still to come.
	before, err := pings()
	require.NoError(t, err)
	paused, returned := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(paused)
		for {
			n, err := pings()
			select {
			case <-returned:
				return
			default:
			}
			if assert.NoError(t, err) && n == before {
				continue
			}
			assert.NoError(t, s.Pause())
			return
		}
	}()
	t.Cleanup(func() { <-paused; _ = s.Resume() })

	const deadline = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	r, err := aqs.VerifyServer(ctx, rdb)
	took := time.Since(start)
	close(returned)
	assert.Nil(t, r, "no report of findings the deadline made")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, took, deadline+250*time.Millisecond, "Verify returned %v after its deadline", took-deadline)
}
