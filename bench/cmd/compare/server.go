package main

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
	"time"

	"github.com/redaqs/aqs/internal/redisproc"
)

// The benchmark's own redis-server.
//
// Every implementation talks to one server that this program starts on a free loopback port,
// with no persistence, and kills at the end: the figures must not depend on whatever a system
// Redis holds or does. internal/testkit/redistest starts servers too, but its API is built around
// testing.TB and its shared server is stopped only from a TestMain, so a command would leave
// its directory behind; the few lines below do what a command needs.

// server is one redis-server process.
type server struct {
	addr   string
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// startServer starts redis-server from PATH (or the binary $REDIS_SERVER names) and waits until it answers PING. A port picked
// free can be taken before redis-server binds it, so a start that fails is tried again on
// another port, a few times.
func startServer() (*server, error) {
	bin, err := redisproc.Binary()
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		s, err := tryStart(bin)
		if err == nil || attempt == 5 {
			return s, err
		}
	}
}

func tryStart(bin string) (*server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp("", "aqs-bench-redis-")
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "redis.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, exited: make(chan struct{})}
	s.cmd = exec.Command(bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--protected-mode", "no",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", dir)
	s.cmd.Dir = dir
	s.cmd.Stdout = logFile
	s.cmd.Stderr = logFile
	dieWithParent(s.cmd)
	err = s.cmd.Start()
	logFile.Close()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if err = redisproc.Ping(ctx, s.addr); err == nil {
			return s, nil
		}
		select {
		case <-s.exited:
			err = errors.New("it exited before answering PING")
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
			continue
		}
		tail := redisproc.LogTail(logPath, 2048)
		s.stop()
		if strings.Contains(tail, "Address already in use") {
			return nil, fmt.Errorf("port %d taken: %w", port, err)
		}
		return nil, fmt.Errorf("redis-server on %s did not start: %w\n--- its log ---\n%s", s.addr, err, tail)
	}
}

// stop kills the server, waits for it to exit and removes its directory.
func (s *server) stop() {
	_ = s.cmd.Process.Kill()
	<-s.exited
	os.RemoveAll(s.dir)
}
