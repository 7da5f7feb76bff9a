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
	// The source and the SHA as command arguments, boxed once.
	srcArg, shaArg any
}

// Name is the script's file name without ".lua".
func (s *Script) Name() string { return s.name }

// Source is the script's Lua text.
func (s *Script) Source() string { return s.src }

// SHA is the hex SHA1 of the source, as SCRIPT LOAD reports it.
func (s *Script) SHA() string { return s.sha }

var all []*Script

func mustLoad(name string) *Script {
	src := expand(files, name)
	sum := sha1.Sum([]byte(src))
	s := &Script{name: name, src: src, sha: hex.EncodeToString(sum[:])}
	s.srcArg, s.shaArg = s.src, s.sha
	all = append(all, s)
	return s
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
	// The multi-name lock (package multilock), on the exclusive locks' keys.
	MultiAcquire   = mustLoad("multi_acquire")
	MultiRelease   = mustLoad("multi_release")
	MultiGiveUp    = mustLoad("multi_give_up")
	MultiHeartbeat = mustLoad("multi_heartbeat")
	MultiRenew     = mustLoad("multi_renew")
	MultiToken     = mustLoad("multi_token")
	// The leader election (package election), on the fair lock's keys.
	ElectLead     = mustLoad("elect_lead")
	ElectProclaim = mustLoad("elect_proclaim")
	ElectLeader   = mustLoad("elect_leader")

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
	LSemReleaseID = mustLoad("lsem_release_id")
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
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, evalsha, s.shaArg, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	return s.RunOnceArgs(ctx, c, append(a, args...))
}

// Args returns the start of a command line of the script that RunOnceArgs takes: EVALSHA, its
// SHA and keys (boxed already, as a value that sends the same keys on every call keeps them),
// with room for n arguments, which the caller appends.
func (s *Script) Args(keys []any, n int) []any {
	a := make([]any, 0, 3+len(keys)+n)
	a = append(a, evalsha, s.shaArg, len(keys))
	return append(a, keys...)
}

// RunOnceArgs is RunOnce with the command line a that Args started. It may change a.
func (s *Script) RunOnceArgs(ctx context.Context, c Processor, a []any) *redis.Cmd {
	cmd := runOnce(ctx, c, a)
	if IsNoScript(cmd.Err()) {
		a[0], a[1] = eval, s.srcArg
		cmd = runOnce(ctx, c, a)
	}
	return cmd
}

// The command names and payloads of a script's call, boxed once: a string put into an
// interface value is copied to the heap each time.
var evalsha, eval any = "evalsha", "eval"

func runOnce(ctx context.Context, c Processor, a []any) *redis.Cmd {
	cmd := &OnceCmd{Cmd: *redis.NewCmd(ctx, a...)}
	cmd.SetFirstKeyPos(3)
	_ = c.Process(ctx, cmd)
	return &cmd.Cmd
}

// OnceCmd is a command that go-redis does not send again after a broken connection, in one
// allocation with the command it marks.
type OnceCmd struct{ redis.Cmd }

// NoRetry tells go-redis not to retry the command.
func (*OnceCmd) NoRetry() bool { return true }

// Unwrap returns the command.
func (c *OnceCmd) Unwrap() redis.Cmder { return &c.Cmd }

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
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return LoadNode(ctx, node)
		})
	}
	return LoadNode(ctx, c)
}

// LoadNode loads every script on one server, stopping at the first that fails.
func LoadNode(ctx context.Context, node redis.Scripter) error {
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
