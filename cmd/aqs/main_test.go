package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"

	"github.com/redaqs/aqs/internal/testkit/redistest"
)

func TestMain(m *testing.M) {
	// The demo's worker processes are this test binary run again (see testWorkers).
	if spec, ok := os.LookupEnv(demoWorkerEnv); ok {
		os.Exit(demoWorkerMain(spec))
	}
	// The aqs processes of the run tests are this test binary run again (see startAqs).
	if _, ok := os.LookupEnv(asAqsEnv); ok {
		redis.SetLogger(quietLogger{})
		os.Exit(mainArgs(os.Args[1:]))
	}
	os.Exit(redistest.Main(m))
}

// testWorkers runs the demo's worker processes from this test binary: TestMain dispatches them,
// and -test.run=^$ keeps one that was not dispatched from running tests.
var testWorkers = workerExec{path: os.Args[0], args: []string{"-test.run=^$"}}

// aqsRun runs the command line in-process with the given environment variables (and no
// others) and returns its exit status, stdout and stderr.
func aqsRun(ctx context.Context, vars map[string]string, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &env{stdout: &stdout, stderr: &stderr, getenv: func(k string) string { return vars[k] },
		worker: testWorkers})
	return code, stdout.String(), stderr.String()
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
