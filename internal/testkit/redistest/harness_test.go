package redistest

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/internal/redisproc"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func TestSingleAnswersPing(t *testing.T) {
	t.Parallel()
	if err := Single(t).Client(t).Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}
}

func TestSingleIsSharedByParallelCallers(t *testing.T) {
	got := make([]*Server, 8)
	t.Run("callers", func(t *testing.T) {
		for i := range got {
			t.Run(strconv.Itoa(i), func(t *testing.T) {
				t.Parallel()
				got[i] = Single(t)
			})
		}
	})
	for i, s := range got {
		if s != got[0] {
			t.Fatalf("caller %d got server %s, caller 0 got %s", i, s.Addr(), got[0].Addr())
		}
	}
}

func TestEveryClusterNodeSeesAllSlotsOnThreeMasters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := Cluster(t)
	for _, addr := range c.Addrs() {
		node := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { node.Close() })
		//lint:ignore SA1019 go-redis's ClusterClient routes by CLUSTER SLOTS, so the test checks that view
		slots, err := node.ClusterSlots(ctx).Result()
		if err != nil {
			t.Fatalf("CLUSTER SLOTS on %s: %v", addr, err)
		}
		covered, masters := 0, map[string]bool{}
		for _, r := range slots {
			covered += r.End - r.Start + 1
			masters[r.Nodes[0].Addr] = true
		}
		if covered != 16384 || len(masters) != 3 {
			t.Fatalf("node %s: %d slots on masters %v, want 16384 on 3", addr, covered, masters)
		}
	}
}

func TestClusterClientRoutesKeysToEveryMaster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := Cluster(t)
	cc := c.Client(t)
	name := Name(t)
	for i, addr := range c.Addrs() {
		first, last := slotRange(i)
		key := ""
		for n := 0; key == ""; n++ {
			k := name + ":" + strconv.Itoa(n)
			slot, err := cc.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				t.Fatalf("CLUSTER KEYSLOT: %v", err)
			}
			if int(slot) >= first && int(slot) <= last {
				key = k
			}
		}
		if err := cc.Set(ctx, key, addr, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		if got, err := cc.Get(ctx, key).Result(); err != nil || got != addr {
			t.Fatalf("GET %s through the cluster client = %q, %v; want %q", key, got, err, addr)
		}
		node := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { node.Close() })
		if got, err := node.Get(ctx, key).Result(); err != nil || got != addr {
			t.Fatalf("GET %s on its owner %s = %q, %v; want %q", key, addr, got, err, addr)
		}
	}
}

func TestKillThenRestartServesAnEmptyDatasetOnTheSameAddr(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := NewServer(t)
	addr := s.Addr()
	opts := s.Options()
	opts.MaxRetries = -1 // the PING after Kill is meant to fail; fail it once
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	key := Name(t)
	if err := c.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if err := s.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING succeeded after Kill")
	}
	if err := s.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if s.Addr() != addr {
		t.Fatalf("Addr after Restart = %s, want %s", s.Addr(), addr)
	}
	if err := c.Get(ctx, key).Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after Restart: err = %v, want redis.Nil", err)
	}
}

func TestRestartOfRunningServerFails(t *testing.T) {
	t.Parallel()
	s := NewServer(t)
	if err := s.Restart(); err == nil {
		t.Fatal("Restart of a running server succeeded")
	}
	if err := s.Client(t).Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING after refused Restart: %v", err)
	}
}

func TestStopIsIdempotentAndFinal(t *testing.T) {
	t.Parallel()
	s := NewServer(t)
	s.Stop()
	s.Stop()
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Fatalf("directory %s after Stop: %v, want it gone", s.dir, err)
	}
	if err := s.Kill(); err == nil {
		t.Fatal("Kill after Stop succeeded")
	}
	if err := s.Restart(); err == nil {
		t.Fatal("Restart after Stop succeeded")
	}
}

func TestStartFailureQuotesTheServerLog(t *testing.T) {
	t.Parallel()
	s, err := startServer(false, "--no-such-directive", "yes")
	if err == nil {
		s.Stop()
		t.Fatal("start with a bad directive succeeded")
	}
	if errors.Is(err, errPortInUse) || !strings.Contains(err.Error(), "no-such-directive") {
		t.Fatalf("error does not quote the log: %v", err)
	}
}

func TestStartOnTakenPortReportsPortInUse(t *testing.T) {
	t.Parallel()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{bin: bin, dir: t.TempDir()}
	if err := s.configure(false, nil); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s.mu.Lock()
	err = s.start()
	s.mu.Unlock()
	if !errors.Is(err, errPortInUse) {
		t.Fatalf("start on a taken port: %v, want errPortInUse", err)
	}
}

func TestNameIsUniqueAndKeySafe(t *testing.T) {
	t.Run("a b/{tag}:x", func(t *testing.T) {
		a, b := Name(t), Name(t)
		if a == b {
			t.Fatalf("Name returned %q twice", a)
		}
		if strings.ContainsAny(a, "{}: /") {
			t.Fatalf("Name = %q, holds a brace, colon, space or slash", a)
		}
		if !strings.HasPrefix(a, "TestNameIsUniqueAndKeySafe_a_b__tag__x-") {
			t.Fatalf("Name = %q, does not start with the test's name", a)
		}
	})
}

// Not parallel: it changes PATH for the whole binary. Parallel tests run only
// after every sequential top-level test has finished.
func TestMissingBinaryNamesTheInstallCommand(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv(redisproc.ServerEnv, "")
	if _, err := Binary(); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("Binary: %v, want ErrNotInstalled", err)
	}
	_, err := startServer(false)
	if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "apt-get install -y redis-server") ||
		!strings.Contains(err.Error(), redisproc.ServerEnv) {
		t.Fatalf("startServer: %v, want ErrNotInstalled naming the install command and %s", err, redisproc.ServerEnv)
	}
}

// $REDIS_SERVER chooses the binary, and one it names that is not there fails the start with
// an error that names the variable, whatever PATH holds. Not parallel: it changes the
// environment.
func TestServerEnvChoosesTheBinary(t *testing.T) {
	real, err := Binary()
	require.NoError(t, err)

	// A wrapper of another name, so that the server that answers can only have been started
	// through the variable.
	wrapper := filepath.Join(t.TempDir(), "other-server")
	require.NoError(t, os.WriteFile(wrapper, []byte("#!/bin/sh\nexec "+strconv.Quote(real)+" \"$@\"\n"), 0o755))
	t.Setenv(redisproc.ServerEnv, wrapper)
	got, err := Binary()
	require.NoError(t, err)
	require.Equal(t, wrapper, got)
	s := NewServer(t)
	require.Equal(t, wrapper, s.bin)
	require.NoError(t, s.Client(t).Ping(context.Background()).Err())

	for _, bad := range []string{filepath.Join(t.TempDir(), "missing"), t.TempDir(), "no-such-server-binary"} {
		t.Setenv(redisproc.ServerEnv, bad)
		_, err := startServer(false)
		require.ErrorIs(t, err, redisproc.ErrBadServerEnv, "%s=%q", redisproc.ServerEnv, bad)
		require.ErrorContains(t, err, bad)
		require.NotErrorIs(t, err, ErrNotInstalled)
	}
}

// A server whose port another server holds is not taken for ready because that other server
// answers PING: the check asks the answering server for its process id.
func TestPingPIDTellsAnotherProcessServingThePort(t *testing.T) {
	s := NewServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, redisproc.PingPID(ctx, s.Addr(), s.proc.cmd.Process.Pid))
	err := redisproc.PingPID(ctx, s.Addr(), s.proc.cmd.Process.Pid+1)
	require.ErrorContains(t, err, "not")
}

// The shared server is the binary Binary names ($REDIS_SERVER's, when set): the version the
// binary prints is the one the server reports. Valkey reports its own version as
// valkey_version, and as redis_version the Redis version it is compatible with.
func TestSingleRunsTheChosenBinary(t *testing.T) {
	t.Parallel()
	bin, err := Binary()
	require.NoError(t, err)
	out, err := exec.Command(bin, "--version").Output()
	require.NoError(t, err)
	m := regexp.MustCompile(`\bv=(\S+)`).FindSubmatch(out)
	require.NotNil(t, m, "%s --version printed %q", bin, out)

	info, err := Single(t).Client(t).InfoMap(context.Background(), "server").Result()
	require.NoError(t, err)
	got, ok := info["Server"]["valkey_version"]
	if !ok {
		got = info["Server"]["redis_version"]
	}
	require.Equal(t, string(m[1]), got, "the version %s prints, and the one the shared server reports", bin)
	t.Logf("%s: %s", bin, strings.TrimSpace(string(out)))
}
