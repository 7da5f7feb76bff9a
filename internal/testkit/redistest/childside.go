package redistest

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
)

// What a child process started by StartChild uses on its side.

// Exit codes of a child process.
const (
	ExitOK         = 0
	ExitFailed     = 1
	ExitBadEnv     = 2
	ExitParentGone = 3 // stdin reached EOF: the parent is gone or done with the child
)

// StdinLines returns the parent's lines as they come. At EOF the process exits on the spot
// with ExitParentGone, holding whatever it holds, as a crash would: no child outlives the test
// binary (see StartChild).
func StdinLines() <-chan string {
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
		os.Exit(ExitParentGone)
	}()
	return lines
}

// WaitForLine returns a channel that is closed when the parent sends the line want; other
// lines are ignored. At EOF the process exits as with StdinLines.
func WaitForLine(want string) <-chan struct{} {
	got := make(chan struct{})
	lines := StdinLines()
	go func() {
		var once sync.Once
		for line := range lines {
			if line == want {
				once.Do(func() { close(got) })
			}
		}
	}()
	return got
}

// EnvInt reads a positive integer from the environment variable name.
func EnvInt(name string) (int, error) {
	n, err := strconv.Atoi(os.Getenv(name))
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q is not a positive integer", name, os.Getenv(name))
	}
	return n, nil
}

// ChildRedis returns a client of the Redis that the parent named in the environment: a
// cluster when clusterEnv holds its masters (comma-separated), else the single node in
// addrEnv ("host:port").
func ChildRedis(addrEnv, clusterEnv string) (redis.UniversalClient, error) {
	switch addrs, addr := os.Getenv(clusterEnv), os.Getenv(addrEnv); {
	case addrs != "":
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ",")}), nil
	case addr != "":
		return redis.NewClient(&redis.Options{Addr: addr}), nil
	default:
		return nil, fmt.Errorf("neither %s nor %s is set", addrEnv, clusterEnv)
	}
}

// ChildClient connects to the Redis named in the environment (see ChildRedis) and returns an
// aqs Client on it that logs to stderr, with the watchdog timeout in watchdogEnv when that is
// set (time.ParseDuration). The Client is never closed: the process ends with it, and a kill
// must find it running. On error nothing is left open.
func ChildClient(addrEnv, clusterEnv, watchdogEnv string) (redis.UniversalClient, *aqs.Client, error) {
	rdb, err := ChildRedis(addrEnv, clusterEnv)
	if err != nil {
		return nil, nil, err
	}
	opts := []aqs.Option{aqs.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil)))}
	if s := os.Getenv(watchdogEnv); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			rdb.Close()
			return nil, nil, fmt.Errorf("%s: %w", watchdogEnv, err)
		}
		opts = append(opts, aqs.WithWatchdogTimeout(d))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := aqs.New(ctx, rdb, opts...)
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	return rdb, c, nil
}
