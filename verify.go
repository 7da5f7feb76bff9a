package aqs

import (
	"context"
	"encoding"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/internal/core"
)

// Verifying a deployment.
//
// The library's promises rest on assumptions about the server that nothing in its calls can
// check: that keys are never evicted, that the ACL user may run the scripts on the prefix, what
// a restart or a failover loses. Verify checks them against the deployment itself, the way an
// operator would, and explains each finding with its fix. It reads the server's own reports
// (INFO, CONFIG GET where allowed, CLUSTER INFO), runs every command the scripts use on scratch
// keys of the prefix, and ends with a drill: two Clients of its own contend on scratch names of
// the primitives the program links (each primitive's package registers its drill). It writes
// only under the scratch names "aqs-verify-<random>…" of the prefix and deletes them before
// it returns.

// Severity says what a finding means for the library's guarantees.
type Severity int

// The severities, from the best.
const (
	// Pass: as the library assumes.
	Pass Severity = iota
	// Warn: the guarantees hold, with a limit worth knowing (a restart or a failover that can
	// lose acquisitions), or something could not be checked.
	Warn
	// Fail: a guarantee does not hold on this deployment, or the library cannot work on it.
	Fail
	// Skip: not checked, because an earlier finding keeps the check from running.
	Skip
)

var severityNames = [...]string{"pass", "warn", "fail", "skip"}

// String returns "pass", "warn", "fail" or "skip".
func (s Severity) String() string {
	if s < 0 || int(s) >= len(severityNames) {
		return fmt.Sprintf("Severity(%d)", int(s))
	}
	return severityNames[s]
}

// MarshalText encodes s as its String.
func (s Severity) MarshalText() ([]byte, error) {
	if s < 0 || int(s) >= len(severityNames) {
		return nil, fmt.Errorf("aqs: bad severity %d", int(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText decodes a String of a Severity.
func (s *Severity) UnmarshalText(b []byte) error {
	for i, n := range severityNames {
		if n == string(b) {
			*s = Severity(i)
			return nil
		}
	}
	return fmt.Errorf("aqs: unknown severity %q", b)
}

var (
	_ encoding.TextMarshaler   = Severity(0)
	_ encoding.TextUnmarshaler = (*Severity)(nil)
)

// The checks a Report's findings come from, in the order Verify reports them.
const (
	CheckServer      = "server"      // server software and version
	CheckTopology    = "topology"    // single server or Cluster; every slot served; a master
	CheckEviction    = "eviction"    // maxmemory and maxmemory-policy
	CheckPersistence = "persistence" // AOF, RDB snapshots: what a restart loses
	CheckReplication = "replication" // replicas, WAIT, and what WithReplicaSync needs
	CheckScripts     = "scripts"     // every script loads (SCRIPT LOAD) and compiles
	CheckACL         = "acl"         // the scripts' commands on the prefix's keys, pub/sub
	CheckLatency     = "latency"     // round trips
	CheckClock       = "clock"       // the server clock's progress
	CheckDrill       = "drill"       // two Clients contend on scratch names
)

// Finding is one result of Verify.
type Finding struct {
	Check    string   `json:"check"`    // one of the Check constants
	Severity Severity `json:"severity"` // what it means for the guarantees
	// Server is the master's address when the finding is about one master of several (Redis
	// Cluster); empty when it holds for the whole deployment.
	Server  string `json:"server,omitempty"`
	Summary string `json:"summary"`       // what was found, and what it means
	Fix     string `json:"fix,omitempty"` // what to change; empty on a pass
}

// Report is what Verify found.
type Report struct {
	Server   string    `json:"server"`   // e.g. "Redis 7.0.15", "Valkey 8.0.1"; "" when unknown
	Topology string    `json:"topology"` // e.g. "single server", "Redis Cluster, 3 masters"
	Prefix   string    `json:"prefix"`   // the key prefix checked
	Findings []Finding `json:"findings"` // in the order of the Check constants
}

// Failed reports whether a finding is a Fail: a guarantee does not hold on the deployment.
func (r *Report) Failed() bool { return r.Worst() == Fail }

// Worst returns the most serious severity among the findings, Skip counting as Pass.
func (r *Report) Worst() Severity {
	w := Pass
	for _, f := range r.Findings {
		if f.Severity != Skip && f.Severity > w {
			w = f.Severity
		}
	}
	return w
}

// Verify checks the deployment client runs on, with client's key prefix and replica-sync
// policy, and returns what it found (see VerifyServer for the checks). It does not use
// client's own calls: its drill runs two Clients of its own, which it closes before it
// returns.
func Verify(ctx context.Context, client *Client) (*Report, error) {
	if client == nil {
		return nil, core.Invalid("nil client")
	}
	if err := client.rt.Check(); err != nil {
		return nil, err
	}
	return verify(ctx, client.rt.Redis, client.rt.Cfg)
}

// VerifyServer checks the deployment rdb reaches for a Client that New would make with opts,
// without making one: it works where New fails (a user without script permission), and says
// why. It checks, on every master:
//
//   - the server and its version (Redis 7.0 or later, Valkey 7.2 or later);
//   - the topology: a master, not a replica; on Redis Cluster, every slot served;
//   - eviction: maxmemory with any policy but noeviction lets the server evict a lock's key, and
//     a second holder get in (Fail);
//   - persistence: what a restart loses;
//   - replication: the replicas, whether WAIT is allowed, and what WithReplicaSync needs;
//   - that every script loads, and that the ACL lets the user run every command the scripts
//     use on the prefix's keys, publish, and subscribe to the prefix's channels;
//   - the round trip, and that the server's clock moves forward at the pace of the local one;
//
// then runs a drill: two Clients contend on scratch names of each primitive the program
// links (the fair lock: mutual exclusion and FIFO order across the Clients; the semaphore: at
// most its permits at once).
//
// It returns an error only when it could not run: a nil rdb or a bad option (ErrInvalidArgument),
// a server that does not answer PING, or ctx done before it finished (it returns by ctx's
// deadline, even while the server stalls). Everything else is a finding; a server that stalls
// or fails midway makes findings that say so. It writes only under scratch names
// "aqs-verify-<random>…" of the prefix, and deletes them before it returns; keys it could not
// delete (DEL refused, or ctx ended first) expire on their own, within a minute at the
// default watchdog timeout.
func VerifyServer(ctx context.Context, rdb redis.UniversalClient, opts ...Option) (*Report, error) {
	if rdb == nil {
		return nil, core.Invalid("nil redis client")
	}
	cfg := core.DefaultConfig()
	for _, o := range opts {
		if o == nil {
			return nil, core.Invalid("nil option")
		}
		if err := o.(option)(&cfg); err != nil {
			return nil, err
		}
	}
	return verify(ctx, rdb, cfg)
}

// node is one master Verify checks.
type node struct {
	addr string // host:port; "" for the one server of a non-cluster client
	c    redis.UniversalClient
}

// eachMaster runs f on every master of rdb, concurrently on Redis Cluster.
func eachMaster(ctx context.Context, rdb redis.UniversalClient, f func(ctx context.Context, n node)) error {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			f(ctx, node{addr: c.Options().Addr, c: c})
			return nil
		})
	}
	f(ctx, node{c: rdb})
	return nil
}

// verifyStepTimeout bounds each step of Verify that talks to the server, so that a stalled
// server makes findings rather than a hang.
const verifyStepTimeout = 5 * time.Second

// verify runs the checks in a goroutine of their own, so that it returns by ctx's deadline
// even while a stalled server keeps a call of theirs waiting for its read timeout: that call
// ends in the background, and the checks after it, their ctx done, send nothing. The drill's
// Clients are closed there; the scratch keys it could not sweep then expire within a minute.
func verify(ctx context.Context, rdb redis.UniversalClient, cfg core.Config) (*Report, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type result struct {
		r   *Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := verifyAll(ctx, rdb, cfg)
		done <- result{r, err}
	}()
	select {
	case res := <-done:
		return res.r, res.err
	case <-ctx.Done():
		return nil, fmt.Errorf("aqs: verify: cut short: %w", context.Cause(ctx))
	}
}

func verifyAll(ctx context.Context, rdb redis.UniversalClient, cfg core.Config) (*Report, error) {
	pctx, cancel := context.WithTimeout(ctx, verifyStepTimeout)
	err := rdb.Ping(pctx).Err()
	cancel()
	if err != nil {
		return nil, fmt.Errorf("aqs: verify: the server does not answer PING: %w", err)
	}
	_, cluster := rdb.(*redis.ClusterClient)
	v := &verifier{rdb: rdb, cfg: cfg, cluster: cluster, scratch: "aqs-verify-" + uuid.NewString()[:8]}
	r := &Report{Prefix: cfg.Prefix}

	facts, err := v.gather(ctx)
	if err != nil {
		return nil, fmt.Errorf("aqs: verify: %w", err)
	}
	r.Server, r.Topology = v.describe(facts)
	add := func(check string, per func(f *nodeFacts) Finding) {
		r.Findings = append(r.Findings, merge(check, facts, per)...)
	}
	add(CheckServer, v.serverFinding)
	r.Findings = append(r.Findings, v.topologyFindings(ctx, facts)...)
	add(CheckEviction, v.evictionFinding)
	add(CheckPersistence, v.persistenceFinding)
	add(CheckReplication, v.replicationFinding)
	add(CheckScripts, v.scriptsFinding)
	scriptsOK := true
	for _, f := range facts {
		scriptsOK = scriptsOK && f.loadErr == nil
	}
	acl := v.aclFinding(ctx)
	r.Findings = append(r.Findings, acl)
	add(CheckLatency, v.latencyFinding)
	add(CheckClock, v.clockFinding)
	r.Findings = append(r.Findings, v.drill(ctx, scriptsOK, acl.Severity == Fail)...)
	if err := ctx.Err(); err != nil {
		// Findings made after ctx ended would blame the server for the caller's deadline.
		return nil, fmt.Errorf("aqs: verify: cut short: %w", context.Cause(ctx))
	}
	return r, nil
}

// verifier holds what one Verify call shares between its checks.
type verifier struct {
	rdb     redis.UniversalClient
	cfg     core.Config
	cluster bool
	scratch string // the stem of every scratch name
	user    string // the ACL user, when ACL WHOAMI answers
}

// merge makes one finding of check per master, and folds them into one without a Server
// when every master gave the same.
func merge(check string, facts []*nodeFacts, per func(f *nodeFacts) Finding) []Finding {
	out := make([]Finding, 0, len(facts))
	same := true
	for _, f := range facts {
		x := per(f)
		x.Check = check
		x.Server = f.addr
		if len(out) > 0 && (x.Severity != out[0].Severity || x.Summary != out[0].Summary || x.Fix != out[0].Fix) {
			same = false
		}
		out = append(out, x)
	}
	if same && len(out) > 0 {
		one := out[0]
		one.Server = ""
		if len(out) > 1 {
			one.Summary = fmt.Sprintf("%s (all %d masters)", one.Summary, len(out))
		}
		return []Finding{one}
	}
	return out
}

// drill runs every registered drill with two Clients of Verify's own on scratch names, then
// deletes whatever the drills left under them.
func (v *verifier) drill(ctx context.Context, scriptsOK, aclFailed bool) []Finding {
	drills := core.Drills()
	if len(drills) == 0 {
		return []Finding{{Check: CheckDrill, Severity: Skip,
			Summary: "no primitive's package is linked into this program, so there is nothing to drill"}}
	}
	if !scriptsOK {
		return []Finding{{Check: CheckDrill, Severity: Skip, Summary: "not run: the scripts do not load (see the " + CheckScripts + " finding)"}}
	}
	cfg := v.cfg
	cfg.Logger, cfg.LoggerSet = slog.New(slog.DiscardHandler), true
	cfg.Observe = nil
	var clients [2]*Client
	for i := range clients {
		nctx, cancel := context.WithTimeout(ctx, verifyStepTimeout)
		rt, err := core.NewRuntime(nctx, v.rdb, cfg)
		cancel()
		if err != nil {
			for _, c := range clients[:i] {
				c.Close()
			}
			return []Finding{{Check: CheckDrill, Severity: Fail, Summary: "a Client cannot be made: " + err.Error(),
				Fix: "see the findings above"}}
		}
		clients[i] = &Client{rt: rt}
	}
	var out []Finding
	for i, d := range drills {
		name := fmt.Sprintf("%s-%d", v.scratch, i)
		dctx, cancel := context.WithTimeout(ctx, 3*verifyStepTimeout)
		start := time.Now()
		summary, err := d.Run(dctx, clients[0], clients[1], name)
		cancel()
		f := Finding{Check: CheckDrill, Severity: Pass,
			Summary: fmt.Sprintf("%s: %s (%v)", d.Primitive, summary, time.Since(start).Round(time.Millisecond))}
		if err != nil {
			f.Severity = Fail
			f.Summary = fmt.Sprintf("%s: %v", d.Primitive, err)
			f.Fix = drillFix(err, aclFailed)
		}
		out = append(out, f)
	}
	for _, c := range clients {
		c.Close()
	}
	if left, err := v.sweep(ctx); err != nil {
		out = append(out, Finding{Check: CheckDrill, Severity: Warn,
			Summary: fmt.Sprintf("the drills' scratch keys %s:{%s-*} could not all be deleted: %v", v.cfg.Prefix, v.scratch, err),
			Fix:     "delete them by hand; those with an expiry go by themselves within a minute"})
	} else if left > 0 {
		out[len(out)-1].Summary += fmt.Sprintf("; %d scratch keys deleted", left)
	}
	return out
}

// drillFix says what to do about a drill that failed, the ACL check having failed or not.
func drillFix(err error, aclFailed bool) string {
	var rs *ReplicaSyncError
	msg := err.Error()
	switch {
	case errors.As(err, &rs):
		return "the replicas did not acknowledge in time: see the " + CheckReplication + " finding"
	// The servers word a refusal inside a script differently (Redis: "NOPERM …" or "… can't
	// run this command …", Valkey: "ACL failure in script …"), hence the check's own verdict
	// first.
	case aclFailed, strings.Contains(msg, "NOPERM"), strings.Contains(msg, "can't run this command"),
		strings.Contains(msg, "ACL failure"), strings.Contains(msg, "no permissions"):
		return "the ACL refuses it: see the " + CheckACL + " finding"
	case errors.Is(err, context.DeadlineExceeded):
		return "the server did not answer in time: see the " + CheckLatency + " finding, and verify again"
	}
	return "report it: the library broke a promise on this deployment (https://github.com/redaqs/aqs/issues)"
}

// sweep deletes every key under the scratch names, on every master, and returns how many it
// deleted.
func (v *verifier) sweep(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, verifyStepTimeout)
	defer cancel()
	match := core.GlobEscape(v.cfg.Prefix+":{"+v.scratch) + "*"
	var mu sync.Mutex
	deleted := 0
	var firstErr error
	err := eachMaster(ctx, v.rdb, func(ctx context.Context, n node) {
		var keys []string
		it := n.c.Scan(ctx, 0, match, 100).Iterator()
		for it.Next(ctx) {
			keys = append(keys, it.Val())
		}
		err := it.Err()
		for _, k := range keys {
			// One key a call: on Redis Cluster a multi-key DEL must stay in one slot.
			if e := n.c.Del(ctx, k).Err(); e != nil && err == nil {
				err = e
			}
		}
		mu.Lock()
		defer mu.Unlock()
		deleted += len(keys)
		if err != nil && firstErr == nil {
			firstErr = err
		}
	})
	if err == nil {
		err = firstErr
	}
	return deleted, err
}

// byAddr orders the masters' facts by address, so that reports list them in a stable order.
func byAddr(facts []*nodeFacts) {
	sort.Slice(facts, func(i, j int) bool { return facts[i].addr < facts[j].addr })
}
