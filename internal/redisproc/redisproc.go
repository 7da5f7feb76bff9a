// Package redisproc holds the small pieces shared by everything that runs a redis-server
// process of its own: the test harness (internal/testkit/redistest) and the aqs command's throwaway
// server.
package redisproc

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
)

// Ping sends PING over a plain TCP connection and checks for +PONG. It is used to wait for a
// starting server: unlike a go-redis client it neither retries nor logs refused dials.
func Ping(ctx context.Context, addr string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	reply, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if reply != "+PONG\r\n" {
		return fmt.Errorf("PING replied %q", strings.TrimSpace(reply))
	}
	return nil
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
