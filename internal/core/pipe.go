package core

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Auto-pipelining.
//
// The calls of one Client's primitives share round trips to Redis. A call made while fewer
// than pipeLanes round trips of the Client are on their way to its server is sent at once, on
// its own, exactly as go-redis sends any command: a lone call waits for no timer and for no
// other call. A call made while pipeLanes round trips are on their way joins the server's
// queue; when one of those round trips ends, everything queued goes to Redis as one pipeline
// (one write, one read, on one connection of go-redis's pool), sent by the first call of the
// queue. So under load a Client keeps at most pipeLanes round trips on their way per server,
// however many calls it makes, and each round trip carries the calls that arrived during the
// one before: the client's cost of a call (the syscalls of a round trip) is shared by them.
//
// Order. A queue is sent in the order its calls joined it. Calls on their way at the same time
// have no order between them, as with any pool of connections; a goroutine waits for each
// reply before it makes its next call, so its release reaches Redis before its next
// acquisition.
//
// Retries. A pipeline whose connection broke is sent again by go-redis, as a whole, as any
// pipeline is, unless one of its calls must not be sent twice (scripts.NoRetry): go-redis then
// sends none again, and the pipe sends the other calls again itself, as go-redis would have
// sent each of them alone. The call that must not be sent twice reports the broken connection,
// as it would alone.
//
// Deadlines. A call in a pipeline waits for its reply as it would for a call of its own: until
// the reply comes when the Redis client does not honour context deadlines (go-redis's read
// timeout bounds it, and the engine bounds the caller: see deadline.go), and until its context
// ends otherwise. A caller that stops waiting leaves its call in the pipeline if the pipeline
// was written already, and its reply is dropped when it comes.
//
// Redis Cluster. Each master has its own queue and its own round trips: a pipeline goes to one
// server, through the cluster client, which follows redirections.
//
// With a Redis client that honours context deadlines, a call whose context can end joins a
// pipeline only when it is one command replying with a *redis.Cmd (every script, and Do);
// others are sent on their own. With one that does not, such a call whose deadline comes
// before the longest the client could take (see deadline.go) is sent by a goroutine of its
// own, a copy of it, and the caller returns by its deadline with the context's error while
// the copy goes on (its reply dropped): a call outside the engine (a latch's TrySetCount, a
// read) keeps its deadline when the server stalls or a failover is under way. The engine's
// calls come with contexts without a deadline (see internal/acquire/call.go).

// pipeLanes is how many round trips of a Client may be on their way to one server before its
// calls are pipelined. One would send every call of a loaded Client through one pipeline at a
// time, and the client's work between two of them (reading one pipeline's replies, writing
// the next) would leave Redis idle; two keep one pipeline in Redis while the client works on
// the other.
const pipeLanes = 2

// Pipe is a Client's auto-pipeline (see above). It sends commands as redis.Scripter and
// Process do.
type Pipe struct {
	rdb      redis.UniversalClient
	cluster  *redis.ClusterClient
	honours  bool
	maxBlock time.Duration // without honours: the longest a call can take, 0 unbounded
	lanes    int

	one   lane // the server of a client that is not a cluster client
	nodes sync.Map

	stats pipeStats
}

type pipeStats struct {
	alone, batches, batched, resent atomic.Int64
}

// PipeStats counts what a Pipe sent.
type PipeStats struct {
	Alone   int64 // calls sent on their own
	Batches int64 // pipelines sent
	Batched int64 // calls sent in those pipelines
	Resent  int64 // calls of a broken pipeline sent again by the pipe (see Retries above)
}

// lane is one server's queue.
type lane struct {
	mu    sync.Mutex
	busy  int // round trips on their way
	queue []*queued
}

// queued is a call waiting in a queue: one command, or several that go in one round trip
// (ProcessAll).
type queued struct {
	ctx context.Context
	// cmds is what the pipeline sends: the caller's commands, or, for a caller that may stop
	// waiting, a copy of its command, so that it never races with the reply.
	cmds []redis.Cmder
	// next receives nil when the replies are in, or the pipeline to send when this call is
	// the first of it.
	next chan []*queued
}

func newPipe(rdb redis.UniversalClient, honours bool, maxBlock time.Duration) *Pipe {
	p := &Pipe{rdb: rdb, honours: honours, maxBlock: maxBlock, lanes: pipeLanes}
	p.cluster, _ = rdb.(*redis.ClusterClient)
	return p
}

// Stats returns what the pipe sent so far.
func (p *Pipe) Stats() PipeStats {
	return PipeStats{Alone: p.stats.alone.Load(), Batches: p.stats.batches.Load(),
		Batched: p.stats.batched.Load(), Resent: p.stats.resent.Load()}
}

// Queued returns how many calls wait in the pipe's queues.
func (p *Pipe) Queued() int {
	n := p.one.queued()
	p.nodes.Range(func(_, l any) bool {
		n += l.(*lane).queued()
		return true
	})
	return n
}

func (l *lane) queued() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queue)
}

// Process sends cmd (see above) and returns its error.
func (p *Pipe) Process(ctx context.Context, cmd redis.Cmder) error {
	return p.ProcessAll(ctx, cmd)
}

// ProcessAll sends cmds, all keyed in one slot, in one round trip (see above), and returns
// the first error of theirs.
func (p *Pipe) ProcessAll(ctx context.Context, cmds ...redis.Cmder) error {
	if !p.honours && len(cmds) == 1 && ctx.Done() != nil {
		if d, ok := ctx.Deadline(); ok && (p.maxBlock == 0 || time.Until(d) < p.maxBlock) {
			if c, ok := unwrap(cmds[0]).(*redis.Cmd); ok {
				return p.detached(ctx, cmds[0], c)
			}
		}
	}
	l := p.lane(ctx, cmds[0])
	if l == nil {
		return p.alone(ctx, cmds)
	}
	l.mu.Lock()
	if l.busy < p.lanes {
		l.busy++
		l.mu.Unlock()
		err := p.alone(ctx, cmds)
		p.free(l)
		return err
	}
	if !p.honours || ctx.Done() == nil {
		q := queuedPool.Get().(*queued)
		q.ctx, q.cmds = ctx, append(q.cmds, cmds...) // a copy: cmds stays the caller's (on its stack)
		l.queue = append(l.queue, q)
		l.mu.Unlock()
		if batch := <-q.next; batch != nil {
			p.send(l, batch)
		}
		clear(q.cmds)
		*q = queued{next: q.next, cmds: q.cmds[:0]} // its next is empty again: every send to it was received
		queuedPool.Put(q)
		return firstErr(cmds)
	}
	// The caller may stop waiting (see Deadlines above).
	c, ok := unwrap(cmds[0]).(*redis.Cmd)
	if len(cmds) > 1 || !ok {
		l.mu.Unlock()
		return p.alone(ctx, cmds)
	}
	var wire redis.Cmder = redis.NewCmd(ctx, c.Args()...)
	if cmds[0].NoRetry() {
		wire = noRetry{wire}
	}
	q := &queued{ctx: ctx, cmds: []redis.Cmder{wire}, next: make(chan []*queued, 1)}
	l.queue = append(l.queue, q)
	l.mu.Unlock()

	if err := p.await(ctx, l, q); err != nil {
		c.SetErr(err)
		return err
	}
	reply := unwrap(wire).(*redis.Cmd)
	c.SetVal(reply.Val())
	c.SetErr(reply.Err())
	return c.Err()
}

// detached sends a copy of cmd (whose reply is c) from a goroutine of its own, and returns by
// ctx's deadline (see the top of this file).
func (p *Pipe) detached(ctx context.Context, cmd redis.Cmder, c *redis.Cmd) error {
	copied := redis.NewCmd(ctx, c.Args()...)
	switch strings.ToLower(c.Name()) {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
		copied.SetFirstKeyPos(3)
	}
	var wire redis.Cmder = copied
	if cmd.NoRetry() {
		wire = noRetry{wire}
	}
	done := make(chan struct{})
	go func() {
		_ = p.ProcessAll(context.WithoutCancel(ctx), wire)
		close(done)
	}()
	select {
	case <-done:
		c.SetVal(copied.Val())
		c.SetErr(copied.Err())
		return c.Err()
	case <-ctx.Done():
		c.SetErr(ctx.Err())
		return ctx.Err()
	}
}

var queuedPool = sync.Pool{New: func() any { return &queued{next: make(chan []*queued, 1)} }}

func firstErr(cmds []redis.Cmder) error {
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return err
		}
	}
	return nil
}

// await waits for q's replies until ctx ends; when q is the first call of its pipeline, the
// pipeline is sent on a goroutine of its own, which the caller may stop waiting for.
func (p *Pipe) await(ctx context.Context, l *lane, q *queued) error {
	select {
	case batch := <-q.next:
		if batch == nil {
			return nil
		}
		sent := make(chan struct{})
		go func() {
			p.send(l, batch)
			close(sent)
		}()
		select {
		case <-sent:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	case <-ctx.Done():
		p.leave(l, q)
		return ctx.Err()
	}
}

// alone sends cmds on their own.
func (p *Pipe) alone(ctx context.Context, cmds []redis.Cmder) error {
	p.stats.alone.Add(1)
	if len(cmds) == 1 {
		err := p.rdb.Process(ctx, cmds[0])
		p.reroute(err)
		return err
	}
	pipe := p.rdb.Pipeline()
	for _, c := range cmds {
		_ = pipe.Process(ctx, c)
	}
	_, err := pipe.Exec(ctx)
	p.reroute(err)
	return err
}

// reroute makes a cluster client reload its slot map, in the background, when err says that
// a node could not be reached, no longer serves the slot, or sees the cluster down (see
// misrouted): after a master's death the cluster client would otherwise send the slot's calls
// to the dead node until a MOVED reply or its periodic reload, and none comes from a node that
// cannot be reached. go-redis reloads once at a time, at most every 200ms, so a burst of
// failed calls costs one reload.
func (p *Pipe) reroute(err error) {
	if p.cluster != nil && misrouted(err) {
		p.cluster.ReloadState(context.Background())
	}
}

func unwrap(c redis.Cmder) redis.Cmder {
	for {
		u, ok := c.(interface{ Unwrap() redis.Cmder })
		if !ok {
			return c
		}
		c = u.Unwrap()
	}
}

// leave takes q, whose caller stopped waiting, out of l's queue. When q was taken into a
// pipeline already, that pipeline is sent anyway, in the background when q is its first call.
func (p *Pipe) leave(l *lane, q *queued) {
	l.mu.Lock()
	for i, o := range l.queue {
		if o == q {
			l.queue = append(l.queue[:i:i], l.queue[i+1:]...)
			l.mu.Unlock()
			return
		}
	}
	l.mu.Unlock()
	go func() {
		if batch := <-q.next; batch != nil {
			p.send(l, batch)
		}
	}()
}

// send sends batch, whose first call is the caller's, as one pipeline, hands the lane on, and
// wakes the batch's other callers.
func (p *Pipe) send(l *lane, batch []*queued) {
	ctx := context.WithoutCancel(batch[0].ctx)
	pipe := p.rdb.Pipeline()
	once := false
	n := 0
	for _, q := range batch {
		for _, c := range q.cmds {
			_ = pipe.Process(ctx, c)
			once = once || c.NoRetry()
			n++
		}
	}
	_, err := pipe.Exec(ctx)
	p.reroute(err)
	p.stats.batches.Add(1)
	p.stats.batched.Add(int64(n))
	if once {
		// go-redis sent none of them again: send again, each on its own, the calls whose
		// reply did not come and that go-redis would have sent again.
		for _, q := range batch {
			for _, c := range q.cmds {
				if !c.NoRetry() && resendable(c.Err()) {
					p.stats.resent.Add(1)
					c.SetErr(nil)
					_ = p.rdb.Process(ctx, c)
				}
			}
		}
	}
	p.free(l)
	for _, q := range batch[1:] {
		q.next <- nil
	}
}

// resendable reports whether err says that a pipeline's connection broke before the call's
// reply was read.
func resendable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var re redis.Error
	return !errors.As(err, &re)
}

// free ends a round trip of l: the queue, if any, goes as the next pipeline, sent by its first
// call.
func (p *Pipe) free(l *lane) {
	l.mu.Lock()
	if len(l.queue) == 0 {
		l.busy--
		l.mu.Unlock()
		return
	}
	batch := l.queue
	l.queue = nil
	l.mu.Unlock()
	batch[0].next <- batch
}

// lane returns the queue of the server that serves cmd's key; nil when it is not known (the
// command is then sent on its own, and go-redis reports why it cannot be).
func (p *Pipe) lane(ctx context.Context, cmd redis.Cmder) *lane {
	if p.cluster == nil {
		return &p.one
	}
	key := firstKey(cmd)
	node, err := p.cluster.MasterForKey(ctx, key)
	if err != nil {
		return nil
	}
	addr := node.Options().Addr
	if l, ok := p.nodes.Load(addr); ok {
		return l.(*lane)
	}
	l, _ := p.nodes.LoadOrStore(addr, &lane{})
	return l.(*lane)
}

// firstKey returns the key a command is routed by: a script's first key, or a command's first
// argument.
func firstKey(cmd redis.Cmder) string {
	args := cmd.Args()
	pos := 1
	switch strings.ToLower(cmd.Name()) {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
		pos = 3
	}
	if len(args) <= pos {
		return ""
	}
	s, _ := args[pos].(string)
	return s
}

// noRetry is a command that go-redis does not send again after a broken connection.
type noRetry struct{ redis.Cmder }

func (noRetry) NoRetry() bool { return true }

func (n noRetry) Unwrap() redis.Cmder { return n.Cmder }

// The pipe as a redis.Scripter, so that scripts run through it.

// Eval sends EVAL.
func (p *Pipe) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return p.eval(ctx, "eval", script, keys, args)
}

// EvalSha sends EVALSHA.
func (p *Pipe) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return p.eval(ctx, "evalsha", sha1, keys, args)
}

// EvalRO sends EVAL_RO.
func (p *Pipe) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return p.eval(ctx, "eval_ro", script, keys, args)
}

// EvalShaRO sends EVALSHA_RO.
func (p *Pipe) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return p.eval(ctx, "evalsha_ro", sha1, keys, args)
}

// ScriptExists is the Redis client's.
func (p *Pipe) ScriptExists(ctx context.Context, hashes ...string) *redis.BoolSliceCmd {
	return p.rdb.ScriptExists(ctx, hashes...)
}

// ScriptLoad is the Redis client's.
func (p *Pipe) ScriptLoad(ctx context.Context, script string) *redis.StringCmd {
	return p.rdb.ScriptLoad(ctx, script)
}

func (p *Pipe) eval(ctx context.Context, name, payload string, keys []string, args []any) *redis.Cmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, name, payload, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, args...)
	cmd := redis.NewCmd(ctx, a...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	_ = p.Process(ctx, cmd)
	return cmd
}
