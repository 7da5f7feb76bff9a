// Package redistest runs real redis-server processes for tests: one shared
// single-node server and one shared 3-master Redis Cluster per test binary,
// started on first use, plus dedicated servers for tests that kill or
// restart them.
//
// Every server listens on 127.0.0.1 on a free port, keeps no data on disk,
// and lives in its own temporary directory, which also holds its log. A test
// binary that uses this package should hand its TestMain to Main so the
// servers are stopped and their directories removed at the end:
//
//	func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
//
// Tests never skip for a missing redis-server: Single, Cluster and NewServer
// fail the test with ErrNotInstalled, which names the install command.
//
// The binary is redis-server from PATH, or the redis-server-compatible binary
// that $REDIS_SERVER names (valkey-server, for one): see Binary.
//
// Shared servers are shared by every test of the binary, parallel ones
// included, so tests must keep to their own keys (see Name) and must not
// Kill, Restart or Stop them; NewServer is for that.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/redaqs/aqs/internal/redisproc"
)

// ErrNotInstalled is returned by Binary, and reported by Single, Cluster and
// NewServer, when $REDIS_SERVER is unset and redis-server is not on PATH. It is
// redisproc.ErrNotInstalled, whose message names the install command and the
// variable.
var ErrNotInstalled = redisproc.ErrNotInstalled

const (
	// readyTimeout bounds how long a server may take to answer PING, and a
	// cluster client to load its slot map.
	readyTimeout = 10 * time.Second
	// clusterTimeout bounds how long the cluster nodes may take to agree.
	clusterTimeout = 30 * time.Second
	// pollInterval is the pause between readiness checks.
	pollInterval = 20 * time.Millisecond
)

// Binary reports the path of the server binary the harness runs: the one
// $REDIS_SERVER names when it is set (a path, or a name on PATH), else
// redis-server from PATH. It fails with ErrNotInstalled, or with
// redisproc.ErrBadServerEnv when $REDIS_SERVER names no executable file; the
// error starts with "redistest: ".
func Binary() (string, error) {
	path, err := redisproc.Binary()
	if err != nil {
		return "", fmt.Errorf("redistest: %w", err)
	}
	return path, nil
}

// Main runs the tests of a package and then stops every server the harness
// started, shared or dedicated, removing their directories. It returns the
// exit code of m.Run. Use it as:
//
//	func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
//
// Without Main the servers still die with the test binary on Linux (see
// proc_linux.go), but their temporary directories are left behind.
//
// When every test passed, Main then checks that no goroutine started during
// the run is still alive (see checkLeaks): a Client, PubSub, hub, heartbeat or
// watchdog that a test or the library failed to stop. It prints their stacks
// and returns 1 if there are any.
//
// In a child process started by Role.Start, Main runs the role instead and
// returns its exit code (see RegisterRole): no test, no server, no check.
func Main(m *testing.M) int {
	sealRoles()
	if spec, ok := os.LookupEnv(childSpecEnv); ok {
		return runChild(spec)
	}
	before := goleak.IgnoreCurrent()
	code := m.Run()
	if code == 0 {
		if err := checkKeysExpire(); err != nil {
			fmt.Fprintf(os.Stderr, "redistest: %v\n", err)
			fmt.Println("FAIL") // m.Run printed PASS already
			code = 1
		}
	}
	stopAll()
	if code != 0 {
		return code
	}
	if err := checkLeaks(before); err != nil {
		fmt.Fprintf(os.Stderr, "redistest: goroutines leaked by the tests of this package:\n%v\n", err)
		fmt.Println("FAIL") // m.Run printed PASS already
		return 1
	}
	return code
}

// leakTimeout bounds how long checkLeaks waits for goroutines that are on
// their way out (a closed client's connections, a cluster client's state
// reload) to end.
const leakTimeout = 5 * time.Second

// checkLeaks reports the goroutines alive now that were not alive when before
// was taken, other than the testing package's own and those that live as long
// as the process by design; it waits up to leakTimeout for them to end.
func checkLeaks(before goleak.Option) error {
	opts := []goleak.Option{
		before,
		// The server starter holds its OS thread for the life of the
		// binary (proc_linux.go).
		goleak.IgnoreTopFunction("github.com/redaqs/aqs/internal/testkit/redistest.starter"),
	}
	deadline := time.Now().Add(leakTimeout)
	for {
		err := goleak.Find(opts...) // itself retries for about half a second
		if err == nil || !time.Now().Before(deadline) {
			return err
		}
	}
}

var single struct {
	once sync.Once
	srv  *Server
	err  error
}

// Single returns the shared single-node server of this test binary, starting
// it on first use; concurrent callers wait for that start. If the start
// fails, Single calls t.Fatal, and so does every later call in the binary,
// with the same error, without trying again.
func Single(t testing.TB) *Server {
	t.Helper()
	if _, err := SingleAddr(); err != nil {
		t.Fatal(err)
	}
	return single.srv
}

// SingleAddr returns the address of the shared single-node server, starting it on first
// use, for code that has no testing.TB: runnable examples. It fails as Single does.
func SingleAddr() (string, error) {
	single.once.Do(func() { single.srv, single.err = startServer(false) })
	if single.err != nil {
		return "", single.err
	}
	return single.srv.Addr(), nil
}

var cluster struct {
	once sync.Once
	c    *RedisCluster
	err  error
}

// Cluster returns the shared 3-master Redis Cluster (no replicas) of this
// test binary, starting it on first use; concurrent callers wait. When it
// returns, all 16384 slots are assigned, every node reports cluster_state:ok
// and every node's CLUSTER SLOTS shows the same three masters. If the start
// fails, Cluster calls t.Fatal, and so does every later call in the binary.
func Cluster(t testing.TB) *RedisCluster {
	t.Helper()
	cluster.once.Do(func() { cluster.c, cluster.err = startCluster() })
	if cluster.err != nil {
		t.Fatal(cluster.err)
	}
	return cluster.c
}

// NewServer starts a single-node server for the calling test alone, for tests
// that Kill, Restart or Stop it. It is stopped in t.Cleanup. If the start
// fails, NewServer calls t.Fatal.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s, err := startServer(false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Name returns a name unique to this call, for tests to build their keys
// from: the test's name with every byte other than ASCII letters, digits,
// '_', '-' and '.' replaced by '_', then '-' and 12 random hex digits. It
// holds no ':' and no braces, so callers may add separators and cluster hash
// tags of their own.
func Name(t testing.TB) string {
	var suffix [6]byte
	rand.Read(suffix[:]) // never fails; see crypto/rand.Read
	base := strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9',
			r == '_', r == '-', r == '.':
			return r
		}
		return '_'
	}, t.Name())
	// Long subtest names would make every key long; the suffix keeps
	// truncated names unique.
	const maxBase = 80
	if len(base) > maxBase {
		base = base[:maxBase]
	}
	return base + "-" + hex.EncodeToString(suffix[:])
}

// live holds every server started and not yet stopped, for Main to stop.
var live struct {
	sync.Mutex
	servers map[*Server]struct{}
}

func track(s *Server) {
	live.Lock()
	defer live.Unlock()
	if live.servers == nil {
		live.servers = make(map[*Server]struct{})
	}
	live.servers[s] = struct{}{}
}

func untrack(s *Server) {
	live.Lock()
	defer live.Unlock()
	delete(live.servers, s)
}

func stopAll() {
	live.Lock()
	servers := make([]*Server, 0, len(live.servers))
	for s := range live.servers {
		servers = append(servers, s)
	}
	live.Unlock()
	// Stop untracks, so it runs without the lock held.
	for _, s := range servers {
		s.Stop()
	}
}

// errAborted is returned by waitFor when its abort channel closes.
var errAborted = errors.New("aborted")

// checkTimeout bounds one readiness check, so that a hung check is retried
// and the timeout error reports a real cause rather than the deadline.
const checkTimeout = time.Second

// waitFor calls check every pollInterval until check returns nil, abort is
// closed, or timeout has passed; it may overrun timeout by one checkTimeout.
// It returns nil, errAborted, or check's last error wrapped with the timeout.
func waitFor(timeout time.Duration, abort <-chan struct{}, check func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		select {
		case <-abort:
			return errAborted
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
		err := check(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("not ready after %v: %w", timeout, err)
		}
		select {
		case <-abort:
			return errAborted
		case <-tick.C:
		}
	}
}
