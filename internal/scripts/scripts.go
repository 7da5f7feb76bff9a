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
	"regexp"
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

// expand returns the text of a .lua file with its lines "--@include NAME" replaced, at the
// first of them, by the definitions of each NAME.lua (and of what it includes) that the
// script uses: shared fragments (the lock value's parsing, the fair queue's cleanup and
// hand-off) are written once and sent as part of each script that uses them. Definitions the
// script never reaches are left out, because each one that is sent costs a closure on every
// run of the script.
func expand(name string) string {
	body, defs := split(name)
	used := referenced(body)
	var keep func(string)
	keep = func(ident string) {
		for _, d := range defs {
			if d.name == ident && !d.kept {
				d.kept = true
				for id := range referenced(d.text) {
					keep(id)
				}
			}
		}
	}
	for id := range used {
		keep(id)
	}
	var out strings.Builder
	written := false // the definitions go once, where the first include line is
	for _, line := range strings.SplitAfter(body, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--@include ") {
			if !written {
				for _, d := range defs {
					if d.kept {
						out.WriteString(d.text)
					}
				}
				written = true
			}
			continue
		}
		out.WriteString(line)
	}
	return out.String()
}

// definition is one top-level statement of a fragment: a local function with the comment
// above it, or a local variable.
type definition struct {
	name, text string
	kept       bool
}

var defStart = regexp.MustCompile(`^local (?:function )?([A-Za-z_][A-Za-z0-9_]*)`)

// split returns a file's own text and the definitions of the fragments it includes, in
// order (a fragment's own includes first).
func split(name string) (body string, defs []*definition) {
	b, err := files.ReadFile(name + ".lua")
	if err != nil {
		panic("scripts: " + err.Error())
	}
	body = string(b)
	seen := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if inc, ok := strings.CutPrefix(strings.TrimSpace(line), "--@include "); ok {
			for _, d := range fragment(strings.TrimSpace(inc)) {
				if !seen[d.name] { // a fragment included by two others comes once
					seen[d.name] = true
					defs = append(defs, d)
				}
			}
		}
	}
	return body, defs
}

// fragment returns the definitions of a fragment file and of the fragments it includes.
func fragment(name string) []*definition {
	body, defs := split(name)
	var comment strings.Builder
	var cur *definition
	for _, line := range strings.SplitAfter(body, "\n") {
		switch {
		case cur != nil:
			cur.text += line
			if strings.HasPrefix(line, "end") {
				cur = nil
			}
		case strings.HasPrefix(line, "--"):
			comment.WriteString(line)
		case strings.TrimSpace(line) == "":
			comment.Reset() // a file header, not a definition's comment
		default:
			m := defStart.FindStringSubmatch(line)
			if m == nil {
				panic(fmt.Sprintf("scripts: %s.lua: not a local definition: %q", name, line))
			}
			d := &definition{name: m[1], text: comment.String() + line}
			comment.Reset()
			defs = append(defs, d)
			if strings.HasPrefix(line, "local function ") {
				cur = d
			}
		}
	}
	return defs
}

var identifier = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

// referenced returns the identifiers that Lua code uses, comments left aside.
func referenced(code string) map[string]bool {
	ids := map[string]bool{}
	for _, line := range strings.Split(code, "\n") {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i]
		}
		for _, id := range identifier.FindAllString(line, -1) {
			ids[id] = true
		}
	}
	return ids
}

// The scripts. Each file's header is its contract.
var (
	LockAcquire   = mustLoad("lock_acquire")
	LockRelease   = mustLoad("lock_release")
	LockGiveUp    = mustLoad("lock_give_up")
	LockHeartbeat = mustLoad("lock_heartbeat")
	// A Condition of an exclusive lock (see cond_wait.lua).
	CondWait   = mustLoad("cond_wait")
	CondSignal = mustLoad("cond_signal")
	CondPoll   = mustLoad("cond_poll")
	CondLeave  = mustLoad("cond_leave")
	CondBeat   = mustLoad("cond_beat")
	// A Condition of a read-write lock's write side.
	RWCondWait       = mustLoad("rw_cond_wait")
	RWCondSignal     = mustLoad("rw_cond_signal")
	RWCondBeat       = mustLoad("rw_cond_beat")
	LockForceRelease = mustLoad("lock_force_release")
	LockReenter      = mustLoad("lock_reenter")
	LockToken        = mustLoad("lock_token")
	LockRenew        = mustLoad("lock_renew")
	LockInfo         = mustLoad("lock_info")

	RWWriteAcquire = mustLoad("rw_write_acquire")
	RWWriteRelease = mustLoad("rw_write_release")
	RWReadAcquire  = mustLoad("rw_read_acquire")
	RWReadRelease  = mustLoad("rw_read_release")
	RWReadReenter  = mustLoad("rw_read_reenter")
	RWReadRenew    = mustLoad("rw_read_renew")
	RWServe        = mustLoad("rw_serve")
	RWHeartbeat    = mustLoad("rw_heartbeat")
	RWGiveUp       = mustLoad("rw_give_up")
	RWForceRelease = mustLoad("rw_force_release")
	RWInfo         = mustLoad("rw_info")

	SemAcquire   = mustLoad("sem_acquire")
	SemTry       = mustLoad("sem_try")
	SemUnsure    = mustLoad("sem_unsure")
	SemRelease   = mustLoad("sem_release")
	SemGiveUp    = mustLoad("sem_give_up")
	SemHeartbeat = mustLoad("sem_heartbeat")
	SemSet       = mustLoad("sem_set")
	SemDrain     = mustLoad("sem_drain")
	SemForce     = mustLoad("sem_force")

	LSemAcquire   = mustLoad("lsem_acquire")
	LSemRelease   = mustLoad("lsem_release")
	LSemRenew     = mustLoad("lsem_renew")
	LSemHeartbeat = mustLoad("lsem_heartbeat")
	LSemGiveUp    = mustLoad("lsem_give_up")
	LSemAvailable = mustLoad("lsem_available")

	LatchSet       = mustLoad("latch_set")
	LatchCountDown = mustLoad("latch_count_down")
	LatchAwait     = mustLoad("latch_await")
	LatchBeat      = mustLoad("latch_beat")
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

// RunInt runs the script as Run does, and decodes its integer reply (DecodeInt).
func (s *Script) RunInt(ctx context.Context, c redis.Scripter, keys []string, args ...any) (int64, error) {
	v, err := s.Run(ctx, c, keys, args...).Result()
	if err != nil {
		return 0, err
	}
	return DecodeInt(v)
}

// RunOnce runs the script as Run does, except that go-redis does not send it again when the
// connection broke after it was sent (Options.MaxRetries): an error that Redis did not reply
// then means that the outcome is unknown (the script may have run). For calls whose second
// run would answer differently from the first, and whose callers settle an unknown outcome
// themselves.
func (s *Script) RunOnce(ctx context.Context, c Processor, keys []string, args ...any) *redis.Cmd {
	cmd := runOnce(ctx, c, "evalsha", s.sha, keys, args)
	if IsNoScript(cmd.Err()) {
		cmd = runOnce(ctx, c, "eval", s.src, keys, args)
	}
	return cmd
}

func runOnce(ctx context.Context, c Processor, name, payload string, keys []string, args []any) *redis.Cmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, name, payload, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, args...)
	cmd := redis.NewCmd(ctx, a...)
	cmd.SetFirstKeyPos(3)
	_ = c.Process(ctx, NoRetry{cmd})
	return cmd
}

// Processor sends a command: a go-redis client, or a Client's pipe (core.Pipe).
type Processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// NoRetry is a command that go-redis does not send again after a broken connection.
type NoRetry struct{ redis.Cmder }

// NoRetry tells go-redis not to retry the command.
func (NoRetry) NoRetry() bool { return true }

// Unwrap returns the command.
func (n NoRetry) Unwrap() redis.Cmder { return n.Cmder }

// Queue adds an EVALSHA of the script to a pipeline. After the pipeline has run, pass the
// returned command to Retry: it re-runs the call with EVAL if the server had lost the script.
func (s *Script) Queue(ctx context.Context, p redis.Pipeliner, keys []string, args ...any) *Call {
	return &Call{script: s, keys: keys, args: args, Cmd: p.EvalSha(ctx, s.sha, keys, args...)}
}

// Call is a script call waiting in a pipeline.
type Call struct {
	script *Script
	keys   []string
	args   []any
	Cmd    *redis.Cmd
}

// Retry re-runs the call with EVAL when the pipelined EVALSHA met NOSCRIPT, and returns the
// command that holds the final reply.
func (q *Call) Retry(ctx context.Context, c redis.Scripter) *redis.Cmd {
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
