// Package scripts holds every Lua script of aqs and the one loader that runs them.
//
// Each script is a .lua file in this folder, embedded at build time, whose header names its
// KEYS, ARGV and replies. Scripts run with EVALSHA; when the server answers NOSCRIPT (a restart,
// a failover to a replica that never saw the script, a SCRIPT FLUSH) the loader falls back to
// EVAL, which also puts the script back into the server's cache, so callers never see the miss.
// Load preloads every script on every master at start, so that the first call of each script
// is already an EVALSHA.
//
// No script receives a client clock: deadlines are computed inside the script from TIME.
package scripts

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed *.lua
var files embed.FS

// Script is one embedded Lua script.
type Script struct {
	name string
	src  string
	sha  string
}

// Name is the script's file name without ".lua".
func (s *Script) Name() string { return s.name }

// Source is the script's Lua text.
func (s *Script) Source() string { return s.src }

// SHA is the hex SHA1 of the source, as SCRIPT LOAD reports it.
func (s *Script) SHA() string { return s.sha }

var all []*Script

func mustLoad(name string) *Script {
	src := expand(name)
	sum := sha1.Sum([]byte(src))
	s := &Script{name: name, src: src, sha: hex.EncodeToString(sum[:])}
	all = append(all, s)
	return s
}

// expand returns the text of a .lua file with every line "--@include NAME" replaced by the
// text of NAME.lua: shared fragments (the fair queue's cleanup and hand-off) are written once
// and sent as part of each script that uses them.
func expand(name string) string {
	b, err := files.ReadFile(name + ".lua")
	if err != nil {
		panic("scripts: " + err.Error())
	}
	lines := strings.SplitAfter(string(b), "\n")
	for i, line := range lines {
		if inc, ok := strings.CutPrefix(strings.TrimSpace(line), "--@include "); ok {
			lines[i] = expand(strings.TrimSpace(inc))
		}
	}
	return strings.Join(lines, "")
}

// The scripts. Each file's header is its contract.
var (
	LockAcquire      = mustLoad("lock_acquire")
	LockReenter      = mustLoad("lock_reenter")
	LockToken        = mustLoad("lock_token")
	LockRelease      = mustLoad("lock_release")
	LockForceRelease = mustLoad("lock_force_release")
	LockRenew        = mustLoad("lock_renew")
	LockInfo         = mustLoad("lock_info")

	FairAcquire      = mustLoad("fair_acquire")
	FairRelease      = mustLoad("fair_release")
	FairGiveUp       = mustLoad("fair_give_up")
	FairHeartbeat    = mustLoad("fair_heartbeat")
	FairForceRelease = mustLoad("fair_force_release")
)

// All returns every script, in a fixed order.
func All() []*Script { return append([]*Script(nil), all...) }

// Run runs the script with EVALSHA, falling back to EVAL on NOSCRIPT.
func (s *Script) Run(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	cmd := c.EvalSha(ctx, s.sha, keys, args...)
	if IsNoScript(cmd.Err()) {
		cmd = c.Eval(ctx, s.src, keys, args...)
	}
	return cmd
}

// Queue adds an EVALSHA of the script to a pipeline. After the pipeline has run, pass the
// returned command to Retry: it re-runs the call with EVAL if the server had lost the script.
func (s *Script) Queue(ctx context.Context, p redis.Pipeliner, keys []string, args ...any) *Queued {
	return &Queued{script: s, keys: keys, args: args, Cmd: p.EvalSha(ctx, s.sha, keys, args...)}
}

// Queued is a script call waiting in a pipeline.
type Queued struct {
	script *Script
	keys   []string
	args   []any
	Cmd    *redis.Cmd
}

// Retry re-runs the call with EVAL when the pipelined EVALSHA met NOSCRIPT, and returns the
// command that holds the final reply.
func (q *Queued) Retry(ctx context.Context, c redis.Scripter) *redis.Cmd {
	if IsNoScript(q.Cmd.Err()) {
		q.Cmd = c.Eval(ctx, q.script.src, q.keys, q.args...)
	}
	return q.Cmd
}

// IsNoScript reports whether err is the server's NOSCRIPT reply.
func IsNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// Load puts every script into the script cache of every master: every shard of a
// *redis.ClusterClient, or the one server of any other client. It checks that the server
// computes the same SHA1 as the loader.
func Load(ctx context.Context, c redis.UniversalClient) error {
	load := func(ctx context.Context, node redis.Scripter) error {
		for _, s := range all {
			sha, err := node.ScriptLoad(ctx, s.src).Result()
			if err != nil {
				return fmt.Errorf("load script %s: %w", s.name, err)
			}
			if sha != s.sha {
				return fmt.Errorf("load script %s: server computed SHA %s, expected %s", s.name, sha, s.sha)
			}
		}
		return nil
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return load(ctx, node)
		})
	}
	return load(ctx, c)
}
