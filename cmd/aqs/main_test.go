package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// aqsRun runs the command line in-process with the given environment variables (and no
// others) and returns its exit status, stdout and stderr.
func aqsRun(ctx context.Context, vars map[string]string, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &env{stdout: &stdout, stderr: &stderr, getenv: func(k string) string { return vars[k] }})
	return code, stdout.String(), stderr.String()
}

// small keeps demo runs short under -race.
var small = []string{"--workers", "2", "--goroutines", "3", "--increments", "4"}

// assertSummaryOK checks the summary of a demo of small's size.
func assertSummaryOK(t *testing.T, stdout string) {
	t.Helper()
	assert.Contains(t, stdout, "acquisitions    24 (and 24 re-entries")
	assert.Contains(t, stdout, "final counter   24, expected 24: ok")
	assert.Contains(t, stdout, "fencing tokens  strictly increasing over 24 holds: ok")
	assert.Contains(t, stdout, "24/24  counter=24")
}

func TestDemoRunsToItsSummaryOnTheGivenRedis(t *testing.T) {
	srv := redistest.Single(t)
	for _, tc := range []struct {
		name string
		args []string
		vars map[string]string
	}{
		{"flag host:port", []string{"--redis", srv.Addr()}, nil},
		{"flag URL", []string{"--redis", "redis://" + srv.Addr() + "/0"}, nil},
		{"REDIS_URL", nil, map[string]string{"REDIS_URL": "redis://" + srv.Addr()}},
		{"flag wins over REDIS_URL", []string{"--redis", srv.Addr()}, map[string]string{"REDIS_URL": "redis://127.0.0.1:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name := redistest.Name(t)
			args := append([]string{"demo", "--lock", name}, small...)
			code, stdout, stderr := aqsRun(t.Context(), tc.vars, append(args, tc.args...)...)
			require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			assertSummaryOK(t, stdout)
			assert.Contains(t, stdout, "key aqs:{"+name+"}")
			assert.NotContains(t, stderr, "throwaway")

			n, err := srv.Client(t).Exists(t.Context(), "aqs-demo:"+name+":counter", "aqs-demo:"+name+":last-token").Result()
			require.NoError(t, err)
			assert.Zero(t, n, "the demo's keys are deleted at the end")
		})
	}
}

func TestDemoStartsAndStopsAThrowawayServerWithoutAddress(t *testing.T) {
	if _, err := redistest.Binary(); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := aqsRun(t.Context(), nil, append([]string{"demo"}, small...)...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assertSummaryOK(t, stdout)

	m := regexp.MustCompile(`started a throwaway redis-server on (127\.0\.0\.1:\d+)`).FindStringSubmatch(stderr)
	require.NotNil(t, m, "stderr announces the server:\n%s", stderr)
	assert.Contains(t, stderr, "stopped the throwaway redis-server on "+m[1])
	conn, err := net.DialTimeout("tcp", m[1], time.Second)
	if err == nil {
		conn.Close()
	}
	assert.Error(t, err, "the throwaway server is gone when the command returns")
}

func TestDemoWithoutRedisServerOnPathNamesTheInstallCommand(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	code, _, stderr := aqsRun(t.Context(), nil, "demo")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "redis-server not found on PATH")
	assert.Contains(t, stderr, "apt-get install -y redis-server")
}

func TestDemoStopsWhenInterrupted(t *testing.T) {
	srv := redistest.Single(t)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(300*time.Millisecond, cancel)
	code, _, stderr := aqsRun(ctx, nil, "demo", "--redis", srv.Addr(), "--lock", redistest.Name(t),
		"--increments", "1000000")
	assert.Equal(t, 130, code)
	assert.Contains(t, stderr, "aqs demo: interrupted")
}

func TestCommandLineErrorsExitWithStatus2(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{nil, "Usage: aqs <command>"},
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"demo", "--nope"}, "flag provided but not defined"},
		{[]string{"demo", "extra"}, `unexpected argument "extra"`},
		{[]string{"demo", "--workers", "0"}, "--workers must be at least 1"},
		{[]string{"demo", "--redis", "localhost"}, `bad Redis address "localhost"`},
		{[]string{"demo", "--redis", "http://localhost:6379"}, "bad Redis URL"},
	} {
		code, _, stderr := aqsRun(t.Context(), nil, tc.args...)
		assert.Equal(t, 2, code, "%q", tc.args)
		assert.Contains(t, stderr, tc.stderr, "%q", tc.args)
	}
}

func TestHelpExitsWithStatus0(t *testing.T) {
	t.Parallel()
	code, stdout, _ := aqsRun(t.Context(), nil, "help")
	assert.Equal(t, 0, code)
	assert.Contains(t, stdout, "demo")
	code, _, stderr := aqsRun(t.Context(), nil, "demo", "-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, stderr, "-redis address")
	assert.True(t, strings.Contains(stderr, "REDIS_URL"))
}

func TestParseRedisAddr(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"127.0.0.1:6379":              "127.0.0.1:6379",
		"redis.internal:6380":         "redis.internal:6380",
		"[::1]:6379":                  "[::1]:6379",
		"redis://:secret@host:7000/2": "host:7000",
		"rediss://host":               "host:6379",
		"unix:///run/redis.sock":      "/run/redis.sock",
	} {
		opts, err := parseRedisAddr(addr)
		if assert.NoError(t, err, addr) {
			assert.Equal(t, want, opts.Addr, addr)
		}
	}
	for _, bad := range []string{"", "host", "ftp://host:1", "redis://host:1/notanumber"} {
		_, err := parseRedisAddr(bad)
		assert.Error(t, err, "%q", bad)
	}
}
