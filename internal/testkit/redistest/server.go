package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/internal/redisproc"
)

// Server is one redis-server process listening on 127.0.0.1, with no
// persistence: every start begins with an empty dataset. Its methods are
// safe for concurrent use. Its address never changes, across Restart too.
// Only servers from NewServer may be killed, restarted or stopped by a test;
// the shared ones belong to every test of the binary.
type Server struct {
	bin     string
	dir     string   // private temporary directory: log, nodes.conf; removed by Stop
	args    []string // fixed at creation so that Restart reproduces the first start
	port    int
	busPort int // cluster bus port; 0 for a server outside a cluster

	mu      sync.Mutex
	proc    *process // nil when no process is running
	stopped bool
}

// process is one run of redis-server.
type process struct {
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd.Wait has returned
	waitErr error         // cmd.Wait's result; read only after exited is closed
	killed  atomic.Bool   // kill was called: an exit after it is expected
	served  atomic.Bool   // it answered: an exit now, not killed, is a death to report
}

// kill SIGKILLs the process and returns once it has exited. Killing a process
// that already exited is a no-op.
func (p *process) kill() {
	p.killed.Store(true)
	_ = p.cmd.Process.Kill() // fails only if the process is already gone
	<-p.exited
}

// bindAttempts is how many port choices startServer tries. A port picked
// free can be taken by someone else before redis-server binds it.
const bindAttempts = 5

// errPortInUse marks a start that failed because the port was taken.
var errPortInUse = errors.New("port in use")

// startServer starts a server on fresh free ports, as a cluster node if
// cluster is set, with extra appended to its command line, and waits until it
// answers PING. On failure nothing is left running and its directory is gone.
func startServer(cluster bool, extra ...string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	for attempt := 1; ; attempt++ {
		s := &Server{bin: bin, dir: dir}
		if err = s.configure(cluster, extra); err == nil {
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

// configure picks free ports and builds the command line.
func (s *Server) configure(cluster bool, extra []string) error {
	n := 1
	if cluster {
		// An explicit bus port, because the default port+10000 can exceed
		// 65535 for ports from the ephemeral range.
		n = 2
	}
	ports, err := freePorts(n)
	if err != nil {
		return fmt.Errorf("redistest: picking free ports: %w", err)
	}
	s.port = ports[0]
	s.args = []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--protected-mode", "no",
		"--daemonize", "no",
		"--dir", s.dir,
	}
	if cluster {
		s.busPort = ports[1]
		s.args = append(s.args,
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
			// Short enough that a killed node is noticed quickly, long
			// enough that a busy -race run is not mistaken for a failure.
			"--cluster-node-timeout", "2000",
			"--cluster-port", strconv.Itoa(s.busPort),
			// Without it a node that never received a MEET does not know
			// its own IP, and nodes disagree in CLUSTER SLOTS.
			"--cluster-announce-ip", "127.0.0.1",
		)
	}
	s.args = append(s.args, extra...)
	return nil
}

// freePorts returns n distinct loopback ports that were free a moment ago.
// All listeners are held open together so the ports differ.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// start runs redis-server and waits until it answers PING; s.mu must be
// held. On failure the process is gone and the error quotes its log.
func (s *Server) start() error {
	logPath := filepath.Join(s.dir, "redis.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("redistest: %w", err)
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	err = startProcess(cmd)
	logFile.Close() // the child has its own descriptor
	if err != nil {
		return fmt.Errorf("redistest: starting %s: %w", s.bin, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		if p.served.Load() && !p.killed.Load() {
			// Nobody here stopped it: say why it went, before Stop removes its log.
			fmt.Fprintf(os.Stderr, "redistest: redis-server on %s exited on its own (%v)\n--- tail of %s ---\n%s\n",
				s.Addr(), p.waitErr, logPath, redisproc.LogTail(logPath, 2048))
		}
		close(p.exited)
	}()

	err = s.waitReady(p)
	if err == nil {
		p.served.Store(true)
		s.proc = p
		return nil
	}
	p.kill()
	tail := redisproc.LogTail(logPath, 4096)
	if strings.Contains(tail, "Address already in use") {
		err = fmt.Errorf("%w: %w", errPortInUse, err)
	}
	return fmt.Errorf("redistest: redis-server on %s did not start: %w\n--- tail of %s ---\n%s",
		s.Addr(), err, logPath, tail)
}

// waitReady polls PING until it succeeds, p exits, or readyTimeout passes.
func (s *Server) waitReady(p *process) error {
	err := waitFor(readyTimeout, p.exited, func(ctx context.Context) error {
		return redisproc.PingPID(ctx, s.Addr(), p.cmd.Process.Pid)
	})
	if errors.Is(err, errAborted) {
		return fmt.Errorf("exited before answering PING (%v)", p.waitErr)
	}
	return err
}

// Addr returns the server's address, "127.0.0.1:port".
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Options returns new client options for the server; the caller may change
// them.
func (s *Server) Options() *redis.Options {
	return &redis.Options{Addr: s.Addr()}
}

// Client returns a new client of the server, closed in t.Cleanup.
func (s *Server) Client(t testing.TB) *redis.Client {
	c := redis.NewClient(s.Options())
	t.Cleanup(func() { c.Close() })
	return c
}

// Kill SIGKILLs the server and returns once the process has exited; its
// dataset is lost. Kill fails, changing nothing, if the server was already
// killed and not restarted, or was stopped.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return fmt.Errorf("redistest: Kill: server %s is not running", s.Addr())
	}
	s.proc.kill()
	s.proc = nil
	return nil
}

// Pause stops the server's process with SIGSTOP: it keeps its connections and its data, and
// answers nothing until Resume (a server that stalls: a long fork, a swapped-out host). Pause
// fails, changing nothing, if the server is not running.
func (s *Server) Pause() error { return s.signal("Pause", syscall.SIGSTOP) }

// Resume lets a paused server run again with SIGCONT.
func (s *Server) Resume() error { return s.signal("Resume", syscall.SIGCONT) }

func (s *Server) signal(op string, sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return fmt.Errorf("redistest: %s: server %s is not running", op, s.Addr())
	}
	return s.proc.cmd.Process.Signal(sig)
}

// Restart starts the server again on the same address and command line and
// returns once it answers PING. Nothing is persisted, so the dataset is
// empty. Restart fails, leaving the server as it was, if the server is still
// running or was stopped; it fails with the server down, and may be tried
// again, if the new process cannot start (for instance because another
// process took the port meanwhile).
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return fmt.Errorf("redistest: Restart: server %s was stopped", s.Addr())
	}
	if s.proc != nil {
		select {
		case <-s.proc.exited: // died on its own; starting again is what the caller wants
			s.proc = nil
		default:
			return fmt.Errorf("redistest: Restart: server %s is still running; Kill it first", s.Addr())
		}
	}
	return s.start()
}

// Stop kills the server, if running, and removes its directory. It is
// idempotent; after Stop the server cannot be restarted.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.stopped = true
	if s.proc != nil {
		// SIGKILL, not SHUTDOWN: there is nothing to save, and it is quick.
		s.proc.kill()
		s.proc = nil
	}
	os.RemoveAll(s.dir)
	untrack(s)
}
