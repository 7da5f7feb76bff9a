// Package redisproc holds the small pieces shared by everything that runs a redis-server
// process of its own: the test harness (internal/testkit/redistest) and the aqs command's throwaway
// server.
package redisproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// ServerEnv names the environment variable that chooses the server binary to run: a path to
// a redis-server-compatible binary (valkey-server, for one), or a name looked up on PATH.
// Unset or empty, the binary is redis-server from PATH. A relative path is taken from the
// process's working directory, which for go test is the package's directory: give an
// absolute one (make test makes it absolute).
const ServerEnv = "REDIS_SERVER"

// ErrNotInstalled is returned by Binary when ServerEnv is unset and redis-server is not on
// PATH. Its message names the package to install and the variable to set.
var ErrNotInstalled = errors.New("redis-server not found on PATH; install it with: " +
	"apt-get update && apt-get install -y redis-server, or set " + ServerEnv +
	" to the path of a redis-server or valkey-server binary")

// ErrBadServerEnv is returned, wrapped with the variable's value and the reason, by Binary
// when ServerEnv names no executable file.
var ErrBadServerEnv = errors.New(ServerEnv + " names no executable file; set it to the path of " +
	"a redis-server or valkey-server binary, or unset it to use redis-server from PATH")

// Binary returns the server binary to run: the one ServerEnv names when it is set, else
// redis-server from PATH. It fails with ErrBadServerEnv (wrapped) or ErrNotInstalled. The
// binary is run with redis-server's command line, sentinels with `<binary> <config>
// --sentinel`, which Redis and Valkey both accept.
func Binary() (string, error) {
	if name := os.Getenv(ServerEnv); name != "" {
		path, err := exec.LookPath(name)
		if err != nil {
			return "", fmt.Errorf("%w (%s=%q: %v)", ErrBadServerEnv, ServerEnv, name, err)
		}
		return path, nil
	}
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return "", ErrNotInstalled
	}
	return path, nil
}

// Ping sends PING over a plain TCP connection and checks for +PONG. It is used to wait for a
// starting server: unlike a go-redis client it neither retries nor logs refused dials.
func Ping(ctx context.Context, addr string) error { return ping(ctx, addr, -1) }

// PingPID is Ping, and checks that the server answering is the process pid (INFO server's
// process_id): a server that failed to bind its port must not pass for ready because another
// process's server answers on that port.
func PingPID(ctx context.Context, addr string, pid int) error { return ping(ctx, addr, pid) }

// ping is Ping, and PingPID when pid is not negative.
func ping(ctx context.Context, addr string, pid int) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	req := "PING\r\n"
	if pid >= 0 {
		req += "INFO server\r\n"
	}
	if _, err := conn.Write([]byte(req)); err != nil {
		return err
	}
	r := bufio.NewReader(conn)
	reply, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if reply != "+PONG\r\n" {
		return fmt.Errorf("PING replied %q", strings.TrimSpace(reply))
	}
	if pid < 0 {
		return nil
	}
	return servedBy(r, addr, pid)
}

// servedBy reads INFO server's reply from r and checks its process_id against pid.
func servedBy(r *bufio.Reader, addr string, pid int) error {
	head, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if !strings.HasPrefix(head, "$") || err != nil {
		return fmt.Errorf("INFO server replied %q", strings.TrimSpace(head))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			if v != strconv.Itoa(pid) {
				return fmt.Errorf("%s is served by process %s, not %d", addr, v, pid)
			}
			return nil
		}
	}
	return fmt.Errorf("INFO server of %s names no process_id", addr)
}

// LogTail returns the last max bytes of the log at path, or why it cannot.
func LogTail(path string, max int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}
