package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// How the Sentinel group is formed and failed over.
//
// NewSentinel starts a master, one replica of it and three sentinels, all on loopback. The
// sentinels run `redis-server <config> --sentinel`: Sentinel rewrites its configuration file
// as it learns the group (its peers, the replica, a new master), so each one gets a generated
// file in its own directory. Quorum is 2 of 3, so two sentinels must agree that the master is
// down and a majority must elect the leader that promotes the replica.
//
// Timing: a sentinel marks the master subjectively down after sentinelDownAfter without a
// valid reply, and the failover (vote, REPLICAOF NO ONE on the replica, switch-master) takes
// a few hundred milliseconds more on loopback, so a SIGKILLed master is replaced within
// about two seconds. If the sentinels split their votes, the next election starts after
// twice sentinelFailoverTimeout, which sentinelTimeout covers.
//
// Readiness: sentinels find each other through hello messages on the master (every two
// seconds) and the replica through the master's INFO (at once on connect, then every ten
// seconds). NewSentinel therefore waits until the replica's link is up before starting the
// sentinels, and returns only when every sentinel sees the master up, the replica linked and
// both other sentinels: before that, a killed master might not be failed over at all.
//
// The replication link: with WithReplicationDelay the replica reaches the master through a
// proxy of this package that holds what the master sends for the delay before passing it on
// (a replica in another zone). KillMaster then models the loss of the master's host: the
// process is SIGKILLed and the replication data still in flight is dropped. Without a delay
// the replica connects directly, and the kernel still delivers, after the SIGKILL, what the
// master had written to the link, so a failover loses close to nothing.

const (
	// SentinelMasterName is the name under which the sentinels monitor the master.
	SentinelMasterName = "aqs-master"
	sentinelCount      = 3
	sentinelQuorum     = 2
	// sentinelDownAfter is down-after-milliseconds: how long the master may be silent before
	// a sentinel considers it down.
	sentinelDownAfter = 500 * time.Millisecond
	// sentinelFailoverTimeout is failover-timeout: it bounds each failover step, and a failed
	// election is retried after twice this.
	sentinelFailoverTimeout = 2 * time.Second
	// sentinelTimeout bounds how long the group may take to form, and a failover to finish.
	sentinelTimeout = 30 * time.Second
)

// RedisSentinel is a master, its replicas (one unless WithReplicas) and three sentinels
// monitoring them, started for one test by NewSentinel. Its methods are safe for concurrent
// use. It follows the roles through failovers: Master names the current master.
type RedisSentinel struct {
	first, firstReplica *Server // as the group started (MasterAddr, ReplicaAddr)
	sentinels           []*Server
	proxy               *linkProxy // nil without WithReplicationDelay

	mu       sync.Mutex
	master   *Server   // the current master
	replicas []*Server // the servers that are, or will be made, its replicas
	killed   []*Server // killed masters, not restarted yet
}

// SentinelOption configures NewSentinel.
type SentinelOption func(*sentinelConfig)

type sentinelConfig struct {
	delay    time.Duration
	replicas int
}

// WithReplicationDelay makes the replica receive the master's replication stream d late (see
// the comment at the top of sentinel.go); KillMaster then also drops what is in flight. The
// default is a direct link. It needs a single replica.
func WithReplicationDelay(d time.Duration) SentinelOption {
	return func(c *sentinelConfig) { c.delay = d }
}

// WithReplicas starts n replicas (at least 1) instead of one: after a failover, the new
// master still has n-1, which the sentinels attach to it within a second or so.
func WithReplicas(n int) SentinelOption {
	return func(c *sentinelConfig) { c.replicas = n }
}

// NewSentinel starts a Sentinel group for the calling test alone and returns once the
// sentinels agree on the master and see the replicas and each other. Everything is stopped in
// t.Cleanup. If the group cannot be started, NewSentinel calls t.Fatal.
func NewSentinel(t testing.TB, opts ...SentinelOption) *RedisSentinel {
	t.Helper()
	cfg := sentinelConfig{replicas: 1}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.replicas < 1 || cfg.delay > 0 && cfg.replicas != 1 {
		t.Fatalf("redistest: a Sentinel group of %d replicas, with a replication delay of %v", cfg.replicas, cfg.delay)
	}
	g, err := startSentinel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	return g
}

// startSentinel starts and forms a group. On failure nothing is left running.
func startSentinel(cfg sentinelConfig) (*RedisSentinel, error) {
	g := &RedisSentinel{}
	fail := func(err error) (*RedisSentinel, error) {
		g.Stop()
		return nil, err
	}
	// The replica's initial sync would otherwise wait repl-diskless-sync-delay (5s) for more
	// replicas; every server gets it, since a replica becomes the master at the failover.
	noDelay := []string{"--repl-diskless-sync-delay", "0"}
	var err error
	if g.master, err = startServer(false, noDelay...); err != nil {
		return fail(err)
	}
	g.first = g.master
	upstream := g.master.Addr()
	if cfg.delay > 0 {
		if g.proxy, err = newLinkProxy(upstream, cfg.delay); err != nil {
			return fail(fmt.Errorf("redistest: replication proxy: %w", err))
		}
		upstream = g.proxy.Addr()
	}
	host, port, _ := net.SplitHostPort(upstream)
	for range cfg.replicas {
		r, err := startServer(false, append(noDelay, "--replicaof", host, port)...)
		if err != nil {
			return fail(err)
		}
		g.replicas = append(g.replicas, r)
	}
	g.firstReplica = g.replicas[0]
	if err := waitFor(sentinelTimeout, nil, g.replicasLinked); err != nil {
		return fail(fmt.Errorf("redistest: replicas of %s: %w", g.master.Addr(), err))
	}
	for range sentinelCount {
		s, err := startSentinelProcess(g.master.port)
		if err != nil {
			return fail(err)
		}
		g.sentinels = append(g.sentinels, s)
	}
	if err := waitFor(sentinelTimeout, nil, g.agreed); err != nil {
		return fail(fmt.Errorf("redistest: sentinels %v did not agree on master %s: %w",
			g.SentinelAddrs(), g.master.Addr(), err))
	}
	return g, nil
}

// replicasLinked checks that every replica's link to the master is up (its initial sync
// done).
func (g *RedisSentinel) replicasLinked(ctx context.Context) error {
	g.mu.Lock()
	replicas := slices.Clone(g.replicas)
	g.mu.Unlock()
	for _, r := range replicas {
		if err := linked(ctx, r); err != nil {
			return fmt.Errorf("replica %s: %w", r.Addr(), err)
		}
	}
	return nil
}

// linked checks that s is a replica whose link to its master is up.
func linked(ctx context.Context, s *Server) error {
	c := redis.NewClient(s.Options())
	defer c.Close()
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "master_link_status:up") {
		return errors.New("master_link_status is not up")
	}
	return nil
}

// agreed checks that every sentinel sees the master up, every replica linked to it, and both
// other sentinels.
func (g *RedisSentinel) agreed(ctx context.Context) error {
	want := strconv.Itoa(len(g.replicas))
	for _, s := range g.sentinels {
		sc := redis.NewSentinelClient(s.Options())
		err := func() error {
			defer sc.Close()
			m, err := sc.Master(ctx, SentinelMasterName).Result()
			if err != nil {
				return err
			}
			if m["flags"] != "master" || m["num-slaves"] != want ||
				m["num-other-sentinels"] != strconv.Itoa(sentinelCount-1) {
				return fmt.Errorf("flags %q, %s replicas, %s other sentinels",
					m["flags"], m["num-slaves"], m["num-other-sentinels"])
			}
			rs, err := sc.Replicas(ctx, SentinelMasterName).Result()
			if err != nil {
				return err
			}
			for _, r := range rs {
				if r["flags"] != "slave" || r["master-link-status"] != "ok" {
					return fmt.Errorf("replicas %v", rs)
				}
			}
			return nil
		}()
		if err != nil {
			return fmt.Errorf("sentinel %s: %w", s.Addr(), err)
		}
	}
	return nil
}

// startSentinelProcess starts one sentinel monitoring the master on masterPort, on a fresh
// free port, and waits until it answers PING. On failure nothing is left running.
func startSentinelProcess(masterPort int) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redistest-sentinel-")
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	for attempt := 1; ; attempt++ {
		s := &Server{bin: bin, dir: dir}
		if err = s.configureSentinel(masterPort); err == nil {
			s.mu.Lock()
			err = s.start()
			s.mu.Unlock()
		}
		if err == nil {
			track(s)
			return s, nil
		}
		if !errors.Is(err, errPortInUse) || attempt == bindAttempts {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

// configureSentinel picks a free port and writes the sentinel's configuration file. The file
// is written anew on every attempt, so a retry after a taken port starts clean; Restart keeps
// what the sentinel has rewritten into it since.
func (s *Server) configureSentinel(masterPort int) error {
	ports, err := freePorts(1)
	if err != nil {
		return fmt.Errorf("redistest: picking a free port: %w", err)
	}
	s.port = ports[0]
	conf := fmt.Sprintf(`port %d
bind 127.0.0.1
protected-mode no
daemonize no
dir %s
sentinel monitor %s 127.0.0.1 %d %d
sentinel down-after-milliseconds %[3]s %[6]d
sentinel failover-timeout %[3]s %[7]d
sentinel parallel-syncs %[3]s 1
`, s.port, s.dir, SentinelMasterName, masterPort, sentinelQuorum,
		sentinelDownAfter.Milliseconds(), sentinelFailoverTimeout.Milliseconds())
	path := filepath.Join(s.dir, "sentinel.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return fmt.Errorf("redistest: %w", err)
	}
	// The file must come first on the command line.
	s.args = []string{path, "--sentinel"}
	return nil
}

// MasterAddr returns the address of the master the group started with; after a failover it
// is not the master any more (see Master).
func (g *RedisSentinel) MasterAddr() string { return g.first.Addr() }

// ReplicaAddr returns the address of the (first) replica the group started with.
func (g *RedisSentinel) ReplicaAddr() string { return g.firstReplica.Addr() }

// Master returns the address of the current master: the last one promoted (WaitPromoted,
// SwitchOver), or the first.
func (g *RedisSentinel) Master() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.master.Addr()
}

// SentinelAddrs returns the addresses of the three sentinels.
func (g *RedisSentinel) SentinelAddrs() []string {
	addrs := make([]string, len(g.sentinels))
	for i, s := range g.sentinels {
		addrs[i] = s.Addr()
	}
	return addrs
}

// FailoverOptions returns new options of a go-redis failover client of the group; the caller
// may change them.
func (g *RedisSentinel) FailoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{MasterName: SentinelMasterName, SentinelAddrs: g.SentinelAddrs()}
}

// Client returns a new failover client of the group (redis.NewFailoverClient: it asks the
// sentinels for the master and follows a failover), closed in t.Cleanup.
func (g *RedisSentinel) Client(t testing.TB) *redis.Client {
	c := redis.NewFailoverClient(g.FailoverOptions())
	t.Cleanup(func() { c.Close() })
	return c
}

// KillMaster SIGKILLs the current master and returns once it has exited; with
// WithReplicationDelay, what the replica had not received yet is dropped with it. The master
// stays dead until RestartKilled: WaitPromoted waits for the sentinels to promote a replica.
func (g *RedisSentinel) KillMaster() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.proxy != nil {
		g.proxy.cut() // first: nothing more reaches the replica from the dying host
	}
	if err := g.master.Kill(); err != nil {
		return err
	}
	g.killed = append(g.killed, g.master)
	return nil
}

// WaitPromoted waits until every sentinel names one of the replicas as the master and that
// server reports the master role, records it as the master, and returns the time it took. It
// fails after sentinelTimeout.
func (g *RedisSentinel) WaitPromoted() (time.Duration, error) {
	start := time.Now()
	g.mu.Lock()
	old, candidates := g.master, slices.Clone(g.replicas)
	g.mu.Unlock()
	var promoted *Server
	err := waitFor(sentinelTimeout, nil, func(ctx context.Context) error {
		var named string
		for _, s := range g.sentinels {
			sc := redis.NewSentinelClient(s.Options())
			addr, err := sc.GetMasterAddrByName(ctx, SentinelMasterName).Result()
			sc.Close()
			if err != nil {
				return fmt.Errorf("sentinel %s: %w", s.Addr(), err)
			}
			got := net.JoinHostPort(addr[0], addr[1])
			if named != "" && got != named {
				return fmt.Errorf("sentinels name %s and %s", named, got)
			}
			named = got
		}
		promoted = nil
		for _, r := range candidates {
			if r.Addr() == named {
				promoted = r
			}
		}
		if promoted == nil {
			return fmt.Errorf("the sentinels name %s, not a replica", named)
		}
		c := redis.NewClient(promoted.Options())
		defer c.Close()
		role, err := c.Do(ctx, "ROLE").Slice()
		if err != nil {
			return fmt.Errorf("ROLE on %s: %w", named, err)
		}
		if len(role) == 0 || role[0] != "master" {
			return fmt.Errorf("%s has role %v", named, role)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("redistest: failover from %s: %w", old.Addr(), err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.master = promoted
	g.replicas = slices.DeleteFunc(g.replicas, func(s *Server) bool { return s == promoted })
	if !slices.Contains(g.killed, old) {
		g.replicas = append(g.replicas, old) // a controlled failover: Sentinel makes it a replica
	}
	return time.Since(start), nil
}

// Epoch returns the highest configuration epoch the sentinels give the master (SENTINEL MASTER's
// config-epoch): each failover the sentinels carry out raises it by one, so that a test can
// tell whether they failed over again, on their own, while it ran.
func (g *RedisSentinel) Epoch() (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	var epoch int64
	for _, s := range g.sentinels {
		sc := redis.NewSentinelClient(s.Options())
		m, err := sc.Master(ctx, SentinelMasterName).Result()
		sc.Close()
		if err != nil {
			return 0, fmt.Errorf("redistest: SENTINEL MASTER on %s: %w", s.Addr(), err)
		}
		e, err := strconv.ParseInt(m["config-epoch"], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("redistest: SENTINEL MASTER on %s: config-epoch %q", s.Addr(), m["config-epoch"])
		}
		epoch = max(epoch, e)
	}
	return epoch, nil
}

// Failover kills the master and waits for the promotion of a replica (KillMaster, then
// WaitPromoted).
func (g *RedisSentinel) Failover() (time.Duration, error) {
	if err := g.KillMaster(); err != nil {
		return 0, err
	}
	return g.WaitPromoted()
}

// SwitchOver asks a sentinel for a controlled failover (SENTINEL FAILOVER, what an operator
// runs for maintenance) and returns once a replica is promoted (see WaitPromoted), with the
// time since the request. The old master keeps running, a master still, and its clients
// connected, until Sentinel turns it into a replica of the new one: some ten seconds later
// with the sentinels' fixed periods (WaitReplicas waits for it).
func (g *RedisSentinel) SwitchOver() (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	sc := redis.NewSentinelClient(g.sentinels[0].Options())
	err := sc.Failover(ctx, SentinelMasterName).Err()
	sc.Close()
	if err != nil {
		return 0, fmt.Errorf("redistest: SENTINEL FAILOVER on %s: %w", g.sentinels[0].Addr(), err)
	}
	if _, err := g.WaitPromoted(); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// RestartKilled starts the killed masters again, empty, on their addresses; the sentinels
// turn them into replicas of the current master (some ten seconds later: WaitReplicas waits
// for it).
func (g *RedisSentinel) RestartKilled() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for len(g.killed) > 0 {
		s := g.killed[0]
		if err := s.Restart(); err != nil {
			return err
		}
		g.killed = g.killed[1:]
		g.replicas = append(g.replicas, s)
	}
	return nil
}

// WaitReplicas waits until the current master has n replicas whose link is up, and returns
// the time it took; it fails after sentinelTimeout.
func (g *RedisSentinel) WaitReplicas(n int) (time.Duration, error) {
	start := time.Now()
	g.mu.Lock()
	m := g.master
	g.mu.Unlock()
	err := waitFor(sentinelTimeout, nil, func(ctx context.Context) error {
		c := redis.NewClient(m.Options())
		defer c.Close()
		role, err := c.Do(ctx, "ROLE").Slice()
		if err != nil {
			return err
		}
		if len(role) < 3 {
			return fmt.Errorf("ROLE %v", role)
		}
		replicas, _ := role[2].([]any)
		if len(replicas) < n {
			return fmt.Errorf("%d replicas", len(replicas))
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("redistest: %d replicas of %s: %w", n, m.Addr(), err)
	}
	return time.Since(start), nil
}

// PauseReplicas stops every replica with SIGSTOP (see Server.Pause): the master keeps them
// connected, and WAIT finds none acknowledging. ResumeReplicas lets them run again.
func (g *RedisSentinel) PauseReplicas() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.replicas {
		if err := r.Pause(); err != nil {
			return err
		}
	}
	return nil
}

// ResumeReplicas lets the replicas paused by PauseReplicas run again.
func (g *RedisSentinel) ResumeReplicas() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.replicas {
		if err := r.Resume(); err != nil {
			return err
		}
	}
	return nil
}

// Stop stops every process of the group and the proxy; it is idempotent.
func (g *RedisSentinel) Stop() {
	for _, s := range g.sentinels {
		s.Stop()
	}
	g.mu.Lock()
	servers := append([]*Server{g.master}, g.replicas...)
	servers = append(servers, g.killed...)
	g.mu.Unlock()
	for _, s := range servers {
		if s != nil {
			s.Stop()
		}
	}
	if g.proxy != nil {
		g.proxy.close()
	}
}
