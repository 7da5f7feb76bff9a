package aqs

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/scripts"
)

// nodeFacts is what one master says about itself.
type nodeFacts struct {
	addr       string
	info       map[string]string // INFO's fields
	infoErr    error
	config     map[string]string // CONFIG GET appendfsync and save; nil when refused
	evict      core.EvictionFacts
	evictOK    bool
	evictErr   error
	waitErr    error             // WAIT 0 1
	loadErr    error             // SCRIPT LOAD of every script
	cluster    map[string]string // CLUSTER INFO's fields, on Redis Cluster
	clusterErr error
	rtts       []time.Duration // PING round trips
	rttErr     error
	clock      clockFacts
}

// clockFacts compares the server's clock with the local one over an interval.
type clockFacts struct {
	server, local time.Duration // how far each clock moved
	slack         time.Duration // the round trips around the two TIME calls: the measure's error
	back          bool          // the server's clock went back
	err           error
}

// Round trips and the clock.
const (
	verifyPings = 10
	// clockSpan is how long the clock check watches the server's clock move.
	clockSpan = 300 * time.Millisecond
)

// gather reads every master's facts, concurrently on Redis Cluster.
func (v *verifier) gather(ctx context.Context) ([]*nodeFacts, error) {
	var mu sync.Mutex
	var facts []*nodeFacts
	err := eachMaster(ctx, v.rdb, func(ctx context.Context, n node) {
		f := v.nodeFacts(ctx, n)
		mu.Lock()
		facts = append(facts, f)
		mu.Unlock()
	})
	if err != nil {
		return nil, err
	}
	if len(facts) == 0 {
		return nil, fmt.Errorf("no master found")
	}
	byAddr(facts)
	wctx, cancel := context.WithTimeout(ctx, verifyStepTimeout)
	defer cancel()
	if u, err := v.rdb.Do(wctx, "ACL", "WHOAMI").Text(); err == nil {
		v.user = u
	}
	return facts, nil
}

func (v *verifier) nodeFacts(ctx context.Context, n node) *nodeFacts {
	f := &nodeFacts{addr: n.addr}
	step := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, verifyStepTimeout) }

	sctx, cancel := step()
	info, err := n.c.Info(sctx).Result()
	cancel()
	if err == nil {
		f.info = core.ParseInfo(info)
	}
	f.infoErr = err

	sctx, cancel = step()
	f.evict, f.evictErr = core.ReadEviction(sctx, n.c)
	f.evictOK = f.evictErr == nil
	cfg := map[string]string{}
	for _, k := range []string{"appendfsync", "save"} {
		m, err := n.c.ConfigGet(sctx, k).Result()
		if err != nil {
			cfg = nil
			break
		}
		cfg[k] = m[k]
	}
	f.config = cfg
	cancel()

	sctx, cancel = step()
	// WAIT 0 with a 1ms timeout returns at once; only whether it is allowed matters here.
	f.waitErr = n.c.Do(sctx, "WAIT", 0, 1).Err()
	cancel()

	sctx, cancel = step()
	f.loadErr = scripts.LoadNode(sctx, n.c)
	cancel()

	if v.cluster {
		sctx, cancel = step()
		ci, err := n.c.ClusterInfo(sctx).Result()
		cancel()
		if err == nil {
			f.cluster = core.ParseInfo(ci)
		}
		f.clusterErr = err
	}

	for range verifyPings {
		sctx, cancel = step()
		start := time.Now()
		err := n.c.Ping(sctx).Err()
		d := time.Since(start)
		cancel()
		if err != nil {
			f.rttErr = err
			break
		}
		f.rtts = append(f.rtts, d)
	}

	f.clock = readClock(ctx, n)
	return f
}

// readClock reads the server's clock twice, clockSpan apart by the local monotonic clock.
func readClock(ctx context.Context, n node) clockFacts {
	read := func() (server time.Time, sent, got time.Time, err error) {
		sctx, cancel := context.WithTimeout(ctx, verifyStepTimeout)
		defer cancel()
		sent = time.Now()
		server, err = n.c.Time(sctx).Result()
		return server, sent, time.Now(), err
	}
	s0, sent0, got0, err := read()
	if err != nil {
		return clockFacts{err: err}
	}
	t := time.NewTimer(clockSpan)
	select {
	case <-ctx.Done():
		t.Stop()
		return clockFacts{err: ctx.Err()}
	case <-t.C:
	}
	s1, sent1, got1, err := read()
	if err != nil {
		return clockFacts{err: err}
	}
	// The server read its clock somewhere within each call's round trip.
	mid0 := sent0.Add(got0.Sub(sent0) / 2)
	mid1 := sent1.Add(got1.Sub(sent1) / 2)
	return clockFacts{
		server: s1.Sub(s0),
		local:  mid1.Sub(mid0),
		slack:  got0.Sub(sent0) + got1.Sub(sent1),
		back:   s1.Before(s0),
	}
}

// describe names the server software and the topology.
func (v *verifier) describe(facts []*nodeFacts) (server, topology string) {
	names := map[string]bool{}
	for _, f := range facts {
		if n := serverName(f.info); n != "" {
			names[n] = true
		}
	}
	list := make([]string, 0, len(names))
	for n := range names {
		list = append(list, n)
	}
	sort.Strings(list)
	server = strings.Join(list, ", ")
	if v.cluster {
		return server, fmt.Sprintf("Redis Cluster, %d masters", len(facts))
	}
	f := facts[0]
	switch role := f.info["role"]; {
	case role == "master" && f.info["connected_slaves"] != "" && f.info["connected_slaves"] != "0":
		return server, fmt.Sprintf("a master with %s replicas", f.info["connected_slaves"])
	case role == "master":
		return server, "single server"
	case role != "":
		return server, "a " + role
	}
	return server, "unknown (INFO refused)"
}

// serverName returns "Valkey 8.0.1" or "Redis 7.0.15" from INFO's fields; "" when unknown.
func serverName(info map[string]string) string {
	if v := info["valkey_version"]; v != "" {
		return "Valkey " + v
	}
	if info["server_name"] == "valkey" {
		return "Valkey " + info["redis_version"]
	}
	if v := info["redis_version"]; v != "" {
		return "Redis " + v
	}
	return ""
}

// version parses "7.0.15" into its major and minor numbers.
func version(s string) (major, minor int, ok bool) {
	parts := strings.SplitN(s, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return major, minor, err1 == nil && err2 == nil
}

func (v *verifier) serverFinding(f *nodeFacts) Finding {
	if f.infoErr != nil {
		return Finding{Severity: Warn, Summary: "INFO is refused, so the server and its version are unknown: " + f.infoErr.Error(),
			Fix: "check by hand that it is Redis 7.0 or later, or Valkey 7.2 or later; grant the user +info to let aqs verify check"}
	}
	name := serverName(f.info)
	valkey := strings.HasPrefix(name, "Valkey")
	ver := strings.TrimPrefix(strings.TrimPrefix(name, "Valkey "), "Redis ")
	major, minor, ok := version(ver)
	switch {
	case !ok:
		return Finding{Severity: Warn, Summary: fmt.Sprintf("unrecognised server version %q", ver),
			Fix: "check by hand that it is Redis 7.0 or later, or Valkey 7.2 or later"}
	case valkey && (major < 7 || major == 7 && minor < 2), !valkey && major < 7:
		return Finding{Severity: Fail, Summary: name + ": aqs needs Redis 7.0 or later, or Valkey 7.2 or later (sharded pub/sub, scripts' commands)",
			Fix: "upgrade the server"}
	}
	return Finding{Severity: Pass, Summary: name + " (aqs needs Redis 7.0 or Valkey 7.2, or later)"}
}

// topologyFindings checks that each server is a master and, on Redis Cluster, that every
// slot is served.
func (v *verifier) topologyFindings(ctx context.Context, facts []*nodeFacts) []Finding {
	if !v.cluster {
		f := facts[0]
		role := f.info["role"]
		switch {
		case f.infoErr != nil:
			return []Finding{{Check: CheckTopology, Severity: Warn, Summary: "INFO is refused: whether the server is a master is unknown",
				Fix: "grant the user +info"}}
		case role != "master":
			return []Finding{{Check: CheckTopology, Severity: Fail,
				Summary: fmt.Sprintf("the server is a %s: it refuses every write (READONLY)", role),
				Fix:     "connect to the master, or through Sentinel (redis.NewFailoverClient) so that the client follows failovers"}}
		}
		return []Finding{{Check: CheckTopology, Severity: Pass, Summary: "the server is a master"}}
	}
	var out []Finding
	bad := false
	for _, f := range facts {
		switch {
		case f.clusterErr != nil:
			bad = true
			out = append(out, Finding{Check: CheckTopology, Severity: Fail, Server: f.addr,
				Summary: "CLUSTER INFO fails: " + f.clusterErr.Error(), Fix: "grant the user +cluster|info, and check the node"})
		case f.cluster["cluster_state"] != "ok" || f.cluster["cluster_slots_fail"] != "0" && f.cluster["cluster_slots_fail"] != "":
			bad = true
			out = append(out, Finding{Check: CheckTopology, Severity: Fail, Server: f.addr,
				Summary: fmt.Sprintf("cluster_state:%s, cluster_slots_fail:%s: calls on some names fail (CLUSTERDOWN)",
					f.cluster["cluster_state"], f.cluster["cluster_slots_fail"]),
				Fix: "restore the failed masters, or fail over to their replicas"})
		}
	}
	// Every slot served: the masters' slot ranges, as the client sees them, cover 0..16383.
	sctx, cancel := context.WithTimeout(ctx, verifyStepTimeout)
	defer cancel()
	slots, err := v.rdb.ClusterSlots(sctx).Result()
	if err != nil {
		return append(out, Finding{Check: CheckTopology, Severity: Fail, Summary: "CLUSTER SLOTS fails: " + err.Error(),
			Fix: "grant the user +cluster|slots: the client routes by it"})
	}
	covered := make([]bool, 16384)
	for _, s := range slots {
		for i := s.Start; i <= s.End && i < len(covered); i++ {
			covered[i] = true
		}
	}
	missing := 0
	for _, c := range covered {
		if !c {
			missing++
		}
	}
	if missing > 0 {
		return append(out, Finding{Check: CheckTopology, Severity: Fail,
			Summary: fmt.Sprintf("%d of 16384 slots are served by no master: names in them cannot be used", missing),
			Fix:     "assign the slots (valkey-cli/redis-cli --cluster fix)"})
	}
	if !bad {
		out = append(out, Finding{Check: CheckTopology, Severity: Pass,
			Summary: fmt.Sprintf("every slot is served; %d masters, cluster_state:ok", len(facts))})
	}
	return out
}

func (v *verifier) evictionFinding(f *nodeFacts) Finding {
	e := f.evict
	switch {
	case !f.evictOK:
		return Finding{Severity: Warn, Summary: "maxmemory-policy cannot be read (INFO memory and CONFIG GET refused): " + f.evictErr.Error(),
			Fix: "check by hand that maxmemory-policy is noeviction, or that maxmemory is 0"}
	case e.Evicts():
		return Finding{Severity: Fail,
			Summary: fmt.Sprintf("maxmemory %d bytes with maxmemory-policy %s: under memory pressure the server evicts keys, a lock's among them (%s), and a second holder gets in",
				e.MaxMemory, e.Policy, evictsWhat(e.Policy)),
			Fix: "CONFIG SET maxmemory-policy noeviction, and maxmemory-policy noeviction in the server's configuration file (a full server then refuses writes, which the library reports as errors)"}
	case core.EvictingPolicy(e.Policy):
		return Finding{Severity: Warn,
			Summary: fmt.Sprintf("maxmemory-policy %s, with no maxmemory: nothing is evicted today, but setting maxmemory later would let the server evict lock keys", e.Policy),
			Fix:     "CONFIG SET maxmemory-policy noeviction, and in the configuration file"}
	}
	limit := "no maxmemory"
	if e.MaxMemory > 0 {
		limit = fmt.Sprintf("maxmemory %d bytes", e.MaxMemory)
	}
	return Finding{Severity: Pass, Summary: "maxmemory-policy noeviction (" + limit + "): keys are never evicted"}
}

// evictsWhat says which keys a policy evicts.
func evictsWhat(policy string) string {
	if strings.HasPrefix(policy, "volatile") {
		return "it evicts keys with an expiry, which every lease has"
	}
	return "it evicts any key"
}

func (v *verifier) persistenceFinding(f *nodeFacts) Finding {
	if f.infoErr != nil {
		return Finding{Severity: Warn, Summary: "INFO is refused: persistence unknown", Fix: "grant the user +info"}
	}
	fsync := "unknown"
	if f.config != nil {
		fsync = f.config["appendfsync"]
	}
	if f.info["aof_enabled"] == "1" {
		what := map[string]string{
			"always":   "a restart keeps every acknowledged write",
			"everysec": "a crash can lose about the last second of writes; a lock taken in it is lost, and its holder learns so at its next renewal",
			"no":       "the operating system decides when writes reach the disk, so a crash can lose more than a second of them",
		}[fsync]
		if what == "" {
			what = "the fsync policy is unknown (CONFIG GET refused)"
		}
		return Finding{Severity: Pass, Summary: "AOF on, appendfsync " + fsync + ": " + what}
	}
	snap := "no RDB snapshots either"
	switch {
	case f.config == nil:
		snap = "RDB snapshots unknown (CONFIG GET refused)"
	case f.config["save"] != "":
		snap = fmt.Sprintf("RDB snapshots (save %q)", f.config["save"])
	}
	restart := "a restart empties the server"
	if f.config != nil && f.config["save"] != "" {
		restart = "a restart goes back to the last snapshot"
	}
	return Finding{Severity: Warn,
		Summary: fmt.Sprintf("no AOF, %s: %s; every lock, permit and queue taken since is gone while its holders go on, each learning it at its next renewal (a third of the lease), and until then a new caller can get in; fencing tokens still only increase", snap, restart),
		Fix:     "CONFIG SET appendonly yes, and appendonly yes in the configuration file (appendfsync everysec loses at most about a second at a crash, always nothing); or replicas with failover"}
}

func (v *verifier) replicationFinding(f *nodeFacts) Finding {
	n := -1
	if f.infoErr == nil {
		n, _ = strconv.Atoi(f.info["connected_slaves"])
	}
	want := v.cfg.SyncReplicas
	user := v.user
	if user == "" {
		user = "<user>"
	}
	if want > 0 {
		switch {
		case f.waitErr != nil:
			return Finding{Severity: Fail, Summary: fmt.Sprintf("WithReplicaSync(%d, %v) needs WAIT, which is refused: %v", want, v.cfg.SyncTimeout, f.waitErr),
				Fix: "ACL SETUSER " + user + " +wait"}
		case n >= 0 && n < want:
			return Finding{Severity: Fail, Summary: fmt.Sprintf("WithReplicaSync(%d, %v), but %d replicas are connected: every acquisition fails with ErrReplicaSync", want, v.cfg.SyncTimeout, n),
				Fix: fmt.Sprintf("attach %d more replicas, or ask WithReplicaSync for at most %d", want-n, n)}
		}
		return Finding{Severity: Pass, Summary: fmt.Sprintf("%d replicas connected; WithReplicaSync(%d, %v) makes every acquisition wait for %d of them, so a failover to one of them keeps it", n, want, v.cfg.SyncTimeout, want)}
	}
	switch {
	case f.waitErr != nil:
		return Finding{Severity: Warn, Summary: fmt.Sprintf("WAIT is refused (%v): aqs.WithReplicaSync cannot be used by this user", f.waitErr),
			Fix: "ACL SETUSER " + user + " +wait, if acquisitions are to survive a failover"}
	case n < 0:
		return Finding{Severity: Warn, Summary: "INFO is refused: the replicas are unknown", Fix: "grant the user +info"}
	case n == 0:
		return Finding{Severity: Pass, Summary: "no replicas, so no failover can lose an acquisition (WithReplicaSync would need at least one)"}
	}
	return Finding{Severity: Warn,
		Summary: fmt.Sprintf("%d replicas, replicated asynchronously: a failover can lose a lock reported as acquired, and a second holder get in", n),
		Fix:     fmt.Sprintf("aqs.WithReplicaSync(%d, 100*time.Millisecond) makes every acquisition wait until the replicas have it (WAIT is allowed)", n)}
}

func (v *verifier) scriptsFinding(f *nodeFacts) Finding {
	if f.loadErr != nil {
		fix := "check the server's scripting (lua) and the error"
		if strings.Contains(f.loadErr.Error(), "NOPERM") {
			u := v.user
			if u == "" {
				u = "<user>"
			}
			fix = "ACL SETUSER " + u + " +evalsha +eval +script|load (or +@scripting): every call of the library runs a script"
		}
		return Finding{Severity: Fail, Summary: "the library's scripts cannot be loaded: " + f.loadErr.Error(), Fix: fix}
	}
	return Finding{Severity: Pass, Summary: fmt.Sprintf("all %d scripts load and compile", len(scripts.All()))}
}

func (v *verifier) latencyFinding(f *nodeFacts) Finding {
	if len(f.rtts) == 0 {
		return Finding{Severity: Warn, Summary: fmt.Sprintf("PING fails: %v", f.rttErr), Fix: "check the network"}
	}
	d := append([]time.Duration(nil), f.rtts...)
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	med, max := d[len(d)/2], d[len(d)-1]
	s := fmt.Sprintf("round trip p50 %v, max %v over %d PINGs", round(med), round(max), len(d))
	// Renewals go every third of the lease; a round trip near a tenth of it eats the margin
	// a renewal has against a slow reply.
	if limit := v.cfg.WatchdogTimeout / 10; max > limit {
		return Finding{Severity: Warn, Summary: s + fmt.Sprintf(": above a tenth of the watchdog timeout (%v), so slow replies can make holders lose leases", v.cfg.WatchdogTimeout),
			Fix: "run the service nearer the server, or a longer aqs.WithWatchdogTimeout"}
	}
	return Finding{Severity: Pass, Summary: s}
}

func (v *verifier) clockFinding(f *nodeFacts) Finding {
	c := f.clock
	switch {
	case c.err != nil:
		return Finding{Severity: Warn, Summary: "TIME fails: " + c.err.Error(), Fix: "grant the user +time (the scripts call it too)"}
	case c.back:
		return Finding{Severity: Fail, Summary: fmt.Sprintf("the server's clock went back %v in %v: leases, deadlines and fencing tokens are timed by it", round(-c.server), round(c.local)),
			Fix: "keep the server's clock monotonic: slew it (chrony, ntpd -x) rather than step it"}
	}
	off := c.server - c.local
	if off < 0 {
		off = -off
	}
	s := fmt.Sprintf("the server's clock moved %v while the local one moved %v", round(c.server), round(c.local))
	if off > c.slack+c.local/10 {
		return Finding{Severity: Warn, Summary: s + ": they disagree by more than 10%, so leases last longer or shorter than asked",
			Fix: "check the server's time synchronisation"}
	}
	return Finding{Severity: Pass, Summary: s}
}

// round rounds d for a report: to the microsecond below a millisecond, else to 0.1ms.
func round(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(100 * time.Microsecond)
}
