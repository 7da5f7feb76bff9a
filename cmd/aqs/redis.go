package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/internal/redisproc"
)

// redisURLEnv names the environment variable that gives the Redis address when --redis does
// not.
const redisURLEnv = "REDIS_URL"

// addRedisFlag registers the --redis flag every command shares.
func addRedisFlag(fs *flag.FlagSet) *string {
	return fs.String("redis", "", "Redis `address`: host:port, or a redis://, rediss:// or unix:// URL\n"+
		"(default $"+redisURLEnv+"; with neither, a throwaway redis-server is started)")
}

// parseRedisAddr turns host:port or a redis://, rediss:// or unix:// URL into client options.
func parseRedisAddr(addr string) (*redis.Options, error) {
	if strings.Contains(addr, "://") {
		opts, err := redis.ParseURL(addr)
		if err != nil {
			return nil, fmt.Errorf("bad Redis URL %q: %w", addr, err)
		}
		return opts, nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("bad Redis address %q: want host:port or a redis:// URL", addr)
	}
	return &redis.Options{Addr: addr}, nil
}

// redactAddr returns addr fit to print: a URL's password replaced by "xxxxx".
func redactAddr(addr string) string {
	if !strings.Contains(addr, "://") {
		return addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return addr
	}
	return u.Redacted()
}

// redisConn is where a command's clients connect: the address the user gave, or a throwaway
// server started for the command.
type redisConn struct {
	addr   string     // as given, or host:port of the throwaway server
	server *throwaway // nil unless started here
	stderr io.Writer  // where the throwaway server's stop is announced
}

// newClient returns a new client with its own connection pool. Commands that stand for several
// processes (demo's workers) take one each.
func (c *redisConn) newClient() *redis.Client {
	opts, err := parseRedisAddr(c.addr)
	if err != nil {
		panic(err) // checked by connectRedis
	}
	return redis.NewClient(opts)
}

// Close stops the throwaway server, if there is one.
func (c *redisConn) Close() {
	if c.server != nil {
		c.server.Stop()
		fmt.Fprintf(c.stderr, "aqs: stopped the throwaway redis-server on %s\n", c.addr)
	}
}

// connectRedis resolves the Redis address: flagAddr, else $REDIS_URL, else (when throwawayOK)
// a throwaway redis-server started here and announced on stderr. The caller must Close the
// result. It does not contact a given server: the first command reports an unreachable one.
func connectRedis(ctx context.Context, e *env, flagAddr string, throwawayOK bool) (*redisConn, error) {
	addr := flagAddr
	if addr == "" {
		addr = e.getenv(redisURLEnv)
	}
	if addr != "" {
		if _, err := parseRedisAddr(addr); err != nil {
			return nil, usagef("%v", err)
		}
		return &redisConn{addr: addr}, nil
	}
	if !throwawayOK {
		return nil, usagef("no Redis address: give --redis host:port or set %s", redisURLEnv)
	}
	s, err := startThrowaway(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(e.stderr, "aqs: no --redis and no $%s: started a throwaway redis-server on %s; it stops when aqs exits\n",
		redisURLEnv, s.addr)
	return &redisConn{addr: s.addr, server: s, stderr: e.stderr}, nil
}

// A throwaway server.
//
// With no address given, demo runs against a redis-server of its own: from PATH, or the
// redis-server-compatible binary $REDIS_SERVER names (valkey-server, for one), on a free
// loopback port, with no persistence and a temporary directory for its working directory and
// log. It is stopped (SIGKILL: there is nothing to save) and the directory removed when the
// command returns, which main makes sure happens on Ctrl-C and SIGTERM too. On Linux the
// server is also started with a parent-death signal, so that it dies with aqs even when aqs is
// killed outright; that signal follows the OS thread that started the child, not the process
// (golang/go#27505), so the start happens on a goroutine that keeps its thread locked until
// the server has exited. The server runs in its own process group, so a Ctrl-C in the terminal
// reaches aqs alone, which then winds down in order before stopping it.

// errNoRedisServer is returned when no address is given, $REDIS_SERVER is unset and
// redis-server is not on PATH.
var errNoRedisServer = errors.New("redis-server not found on PATH: give --redis host:port (or set " +
	redisURLEnv + "), or install it with: apt-get update && apt-get install -y redis-server, or set " +
	redisproc.ServerEnv + " to the path of a redis-server or valkey-server binary")

const (
	// serverReadyTimeout bounds how long a throwaway server may take to answer PING.
	serverReadyTimeout = 10 * time.Second
	// startAttempts is how many free ports are tried: a port found free may be taken by another
	// process before redis-server binds it.
	startAttempts = 3
)

var errPortInUse = errors.New("port in use")

// throwaway is a redis-server process started by aqs.
type throwaway struct {
	addr     string
	dir      string
	cmd      *exec.Cmd
	exited   chan struct{} // closed when the process has exited
	waitErr  error         // cmd.Wait's result, read after exited is closed
	stopOnce sync.Once
}

// startThrowaway starts a throwaway server and returns once it answers PING. On failure
// nothing is left running or on disk.
func startThrowaway(ctx context.Context) (*throwaway, error) {
	bin, err := redisproc.Binary()
	if errors.Is(err, redisproc.ErrNotInstalled) {
		return nil, errNoRedisServer
	}
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		s, err := launchServer(ctx, bin)
		if err == nil || !errors.Is(err, errPortInUse) || attempt == startAttempts {
			return s, err
		}
	}
}

func launchServer(ctx context.Context, bin string) (*throwaway, error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("picking a free port: %w", err)
	}
	dir, err := os.MkdirTemp("", "aqs-redis-")
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "redis.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	s := &throwaway{
		addr:   net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		dir:    dir,
		exited: make(chan struct{}),
	}
	s.cmd = exec.Command(bin,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--dir", dir,
	)
	s.cmd.Dir = dir
	s.cmd.Stdout = logFile
	s.cmd.Stderr = logFile
	detach(s.cmd)

	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // see "A throwaway server" above
		defer runtime.UnlockOSThread()
		if err := s.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	if err := <-started; err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}

	if err := s.waitReady(ctx); err != nil {
		s.Stop()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		tail := redisproc.LogTail(logPath, 2048)
		if strings.Contains(tail, "Address already in use") {
			err = fmt.Errorf("%w: %w", errPortInUse, err)
		}
		return nil, fmt.Errorf("throwaway redis-server on %s did not start: %w\n--- its log ---\n%s", s.addr, err, tail)
	}
	return s, nil
}

// waitReady polls PING until it succeeds, the server exits, ctx is done or
// serverReadyTimeout passes.
func (s *throwaway) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, serverReadyTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := redisproc.PingPID(ctx, s.addr, s.cmd.Process.Pid)
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("it exited before answering PING (%v)", s.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("no answer to PING within %v: %w", serverReadyTimeout, err)
		case <-tick.C:
		}
	}
}

// Stop kills the server, waits for it to exit and removes its directory. It is idempotent.
func (s *throwaway) Stop() {
	s.stopOnce.Do(func() {
		_ = s.cmd.Process.Kill() // fails only if it has exited already
		<-s.exited
		os.RemoveAll(s.dir)
	})
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
