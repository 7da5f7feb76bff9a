package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

func TestVerifyPassesASafeServer(t *testing.T) {
	srv := redistest.NewServer(t)
	ctx := context.Background()
	rdb := srv.Client(t)
	require.NoError(t, rdb.ConfigSet(ctx, "appendonly", "yes").Err())

	code, stdout, stderr := aqsRun(ctx, nil, "verify", "--redis", srv.Addr())
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stdout, "aqs verify: "+srv.Addr())
	for _, check := range []string{"server", "topology", "eviction", "persistence", "replication", "scripts", "acl", "latency", "clock"} {
		assert.Regexp(t, "(?m)^PASS  "+check+" ", stdout)
	}
	assert.Regexp(t, "(?m)^PASS  drill +fair lock: ", stdout)
	assert.Regexp(t, "(?m)^PASS  drill +semaphore: ", stdout)
	assert.Contains(t, stdout, "0 fail, 0 warn, 11 pass, 0 skip: the deployment is as the library assumes")
	n, err := rdb.DBSize(ctx).Result()
	require.NoError(t, err)
	assert.Zero(t, n)
}

func TestVerifyReportsAMisconfiguredServerWithExitStatus1(t *testing.T) {
	srv := redistest.NewServer(t)
	ctx := context.Background()
	rdb := srv.Client(t)
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "64mb").Err())
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err())
	require.NoError(t, rdb.Do(ctx, "ACL", "SETUSER", "ops", "on", ">pw", "~*", "&*", "+@all", "-wait").Err())

	code, stdout, stderr := aqsRun(ctx, nil, "verify", "--redis", "redis://ops:pw@"+srv.Addr())
	require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Regexp(t, "(?m)^FAIL  eviction +maxmemory 67108864 bytes with maxmemory-policy allkeys-lru", stdout)
	assert.Regexp(t, "(?m)^ +fix: CONFIG SET maxmemory-policy noeviction", stdout)
	assert.Regexp(t, "(?m)^WARN  replication +WAIT is refused", stdout)
	assert.Contains(t, stdout, "fix: ACL SETUSER ops +wait")
	assert.Contains(t, stdout, "1 fail, 2 warn, 8 pass, 0 skip: a guarantee does not hold")
	for _, line := range strings.Split(stdout, "\n") {
		assert.LessOrEqual(t, len(line), 130, "a line past the width: %q", line)
	}

	// --json: the same report, for scripts; the exit status is still 1.
	code, stdout, stderr = aqsRun(ctx, nil, "verify", "--redis", "redis://ops:pw@"+srv.Addr(), "--json", "--replica-sync", "1")
	require.Equal(t, 1, code, "stderr:\n%s", stderr)
	var r aqs.Report
	require.NoError(t, json.Unmarshal([]byte(stdout), &r), stdout)
	assert.Equal(t, "aqs", r.Prefix)
	assert.True(t, r.Failed())
	var sync *aqs.Finding
	for i := range r.Findings {
		if r.Findings[i].Check == aqs.CheckReplication {
			sync = &r.Findings[i]
		}
	}
	require.NotNil(t, sync)
	assert.Equal(t, aqs.Fail, sync.Severity, "WithReplicaSync cannot work without WAIT")
	assert.Contains(t, stdout, `"severity": "fail"`)
}

func TestVerifyCannotRunExitsWith2(t *testing.T) {
	ctx := context.Background()
	code, _, stderr := aqsRun(ctx, nil, "verify", "--redis", "127.0.0.1:1")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "cannot reach Redis at 127.0.0.1:1")

	code, _, stderr = aqsRun(ctx, nil, "verify", "--redis", redistest.Single(t).Addr(), "--replica-sync", "-1")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "replica sync of -1 replicas")

	code, _, stderr = aqsRun(ctx, nil, "verify", "--redis", redistest.Single(t).Addr(), "extra")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `unexpected argument "extra"`)

	code, _, _ = aqsRun(ctx, nil, "verify")
	assert.Equal(t, 2, code, "no address")
}

func TestVerifyPrintsNoPassword(t *testing.T) {
	srv := redistest.NewServer(t)
	ctx := context.Background()
	require.NoError(t, srv.Client(t).Do(ctx, "ACL", "SETUSER", "ops", "on", ">s3cret", "~*", "&*", "+@all").Err())
	code, stdout, stderr := aqsRun(ctx, nil, "verify", "--redis", "redis://ops:s3cret@"+srv.Addr())
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stdout, "aqs verify: redis://ops:xxxxx@"+srv.Addr())
	assert.NotContains(t, stdout+stderr, "s3cret")

	code, _, stderr = aqsRun(ctx, nil, "verify", "--redis", "redis://ops:s3cret@127.0.0.1:1")
	assert.Equal(t, 2, code)
	assert.NotContains(t, stderr, "s3cret")
	assert.Contains(t, stderr, "redis://ops:xxxxx@127.0.0.1:1")
}
