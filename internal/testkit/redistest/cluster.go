package redistest

//lint:file-ignore SA1019 go-redis's ClusterClient routes by CLUSTER SLOTS (which Redis 7 deprecates for CLUSTER SHARDS), so the harness checks the cluster as that command shows it.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/redisproc"
)

// How the cluster is formed, without redis-cli.
//
// redis-cli --cluster create does three things, and startCluster does them
// with plain commands: give each node a distinct config epoch (so the nodes
// need not first resolve an epoch collision), assign each node a contiguous
// third of the slots with CLUSTER ADDSLOTSRANGE, and introduce the nodes to
// node 0 with CLUSTER MEET; gossip then tells every node about every other.
// Gossip is asynchronous, and a go-redis ClusterClient that loads its slot
// map from a node with a partial view sends commands to the wrong node, so
// startCluster returns only when every node reports cluster_state:ok and
// lists exactly the assigned owner for every slot.
//
// With replicas, node 0 also meets the three replicas, and each replica is
// told CLUSTER REPLICATE with its master's id once gossip has taught it that
// id (before, the command fails with "Unknown node"). A replica is listed in
// CLUSTER SLOTS only once it has synchronised, and can be promoted only once
// its link is up, so startCluster also waits for every replica's
// master_link_status:up.
//
// Valkey (like Redis from 7.2) also gives each shard an id, which a node
// writes in its nodes.conf for every node it knows; a replica takes its
// master's id, and the other nodes learn that by gossip, some time after
// CLUSTER REPLICATE. Until a node has learnt it, its nodes.conf gives a
// replica an id of its own beside the master's, and Valkey 8.0 refuses to
// start from such a file ("corrupted cluster config file"): a node killed
// then would never come back. So startCluster also waits until every node's
// CLUSTER SHARDS lists each master with its replica, and nothing else, in one
// shard of its own. A node rewrites its nodes.conf when it learns an id,
// before it replies to the next command, so from then every node can be
// restarted from its file. Redis 7.0, which has no shard ids, lists a
// replica in its master's shard as soon as it knows whose replica it is.
//
// How a shard fails over. A shard is a master and its replica; the harness
// records which of the two is the master, since every failover swaps them.
// After a SIGKILL the other nodes mark the master PFAIL once it has not
// answered for the node timeout (2s), and FAIL once a majority of masters
// agree by gossip; the replica then waits 500ms plus up to 500ms at random
// before asking the masters for their votes, and takes the slots with a new
// config epoch when two of the three grant them. WaitPromoted waits for the
// result to reach every live node, so a kill costs about three to four
// seconds before the shard serves again. CLUSTER FAILOVER (SwitchOver) skips
// the detection: the master pauses its clients until the replica has caught
// up, and the replica takes over at once, in well under a second; the old
// master, still running, then learns the new config epoch and follows the
// new master as its replica. A killed master that is restarted loads its
// nodes.conf, finds by gossip that its slots now belong to a newer epoch, and
// likewise becomes the new master's replica; having no persistence, it then
// loads the dataset with a full resynchronisation.

const (
	clusterSize = 3
	slotCount   = 16384
)

// RedisCluster is a Redis Cluster of three shards, the i-th of Addrs
// starting as the master of the i-th third of the slots. A cluster from
// Cluster or NewCluster has no replicas; one from NewClusterWithReplicas
// gives each master one replica and can lose a master (KillMaster) or be
// switched over (SwitchOver). Its methods are safe for concurrent use. It is
// named RedisCluster, not Cluster, because the function Cluster already
// takes that name.
type RedisCluster struct {
	nodes    []*Server // the masters the cluster started with, nodes[i] owning the i-th third
	replicas []*Server // replicas[i] started as the replica of nodes[i]; nil without replicas

	mu     sync.Mutex
	shards []shard     // the current roles in each shard
	moved  map[int]int // slot to shard, for the slots MoveSlot moved
}

// shard is the recorded state of one shard: the servers behind its slots.
type shard struct {
	master, replica *Server // replica is nil without replicas
	// down is the server KillMaster killed and RestartKilled has not started
	// again, nil if none: the master until WaitPromoted, the replica after.
	down *Server
}

// slotRange returns the first and last slot owned by node i.
func slotRange(i int) (first, last int) {
	return i * slotCount / clusterSize, (i+1)*slotCount/clusterSize - 1
}

// slotOwner returns the node that owns slot.
func slotOwner(slot int) int {
	for i := range clusterSize - 1 {
		if _, last := slotRange(i); slot <= last {
			return i
		}
	}
	return clusterSize - 1
}

// startCluster starts and forms a cluster without replicas. On failure
// nothing is left running.
func startCluster() (*RedisCluster, error) { return startShards(false) }

// startShards starts and forms a cluster, with one replica per master if
// withReplicas is set. On failure nothing is left running.
func startShards(withReplicas bool) (*RedisCluster, error) {
	c := &RedisCluster{}
	var extra []string
	if withReplicas {
		// For masters and replicas alike, since a failover swaps them.
		extra = []string{
			// Else a replica's first sync waits 5s for more replicas to join it.
			"--repl-diskless-sync-delay", "0",
			// CLUSTER SLOTS lists a replica only once its replication offset
			// is not 0, and on an idle master only the master's PING to its
			// replicas moves the offset: every 10s by default.
			"--repl-ping-replica-period", "1",
		}
	}
	start := func(dst *[]*Server) error {
		s, err := startServer(true, extra...)
		if err != nil {
			return err
		}
		*dst = append(*dst, s)
		return nil
	}
	for range clusterSize {
		if err := start(&c.nodes); err != nil {
			c.Stop()
			return nil, err
		}
		if withReplicas {
			if err := start(&c.replicas); err != nil {
				c.Stop()
				return nil, err
			}
		}
	}
	for i, m := range c.nodes {
		sh := shard{master: m}
		if withReplicas {
			sh.replica = c.replicas[i]
		}
		c.shards = append(c.shards, sh)
	}
	if err := c.form(); err != nil {
		// The nodes' logs go with them: their tails say why one stopped answering.
		var tails strings.Builder
		for _, s := range c.all() {
			fmt.Fprintf(&tails, "\n--- tail of %s's log ---\n%s", s.Addr(), redisproc.LogTail(filepath.Join(s.dir, "redis.log"), 1024))
		}
		c.Stop()
		return nil, fmt.Errorf("redistest: forming cluster %v: %w%s", c.AllAddrs(), err, tails.String())
	}
	return c, nil
}

// form joins the fresh nodes into one cluster and waits until they agree.
func (c *RedisCluster) form() error {
	clients := make([]*redis.Client, len(c.nodes))
	for i, s := range c.nodes {
		clients[i] = redis.NewClient(s.Options())
		defer clients[i].Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	for i, cl := range clients {
		if err := cl.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fmt.Errorf("CLUSTER SET-CONFIG-EPOCH on %s: %w", c.nodes[i].Addr(), err)
		}
		first, last := slotRange(i)
		if err := cl.ClusterAddSlotsRange(ctx, first, last).Err(); err != nil {
			return fmt.Errorf("CLUSTER ADDSLOTSRANGE on %s: %w", c.nodes[i].Addr(), err)
		}
	}
	for _, s := range c.all()[1:] {
		// The bus port must be given: it is not the default port+10000.
		if err := clients[0].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", s.port, s.busPort).Err(); err != nil {
			return fmt.Errorf("CLUSTER MEET %s from %s: %w", s.Addr(), c.nodes[0].Addr(), err)
		}
	}
	for i, r := range c.replicas {
		id, err := clients[i].Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			return fmt.Errorf("CLUSTER MYID on %s: %w", c.nodes[i].Addr(), err)
		}
		rc := redis.NewClient(r.Options())
		defer rc.Close()
		// Retried, because the replica knows the master's id only once gossip
		// has reached it.
		err = waitFor(clusterTimeout, nil, func(ctx context.Context) error {
			return rc.Do(ctx, "CLUSTER", "REPLICATE", id).Err()
		})
		if err != nil {
			return fmt.Errorf("CLUSTER REPLICATE %s on %s: %w", c.nodes[i].Addr(), r.Addr(), err)
		}
	}
	want := make([]expect, clusterSize)
	links := map[*Server]*Server{}
	for i, m := range c.nodes {
		want[i] = expect{masters: []*Server{m}}
		if c.replicas != nil {
			want[i].replica = c.replicas[i]
			links[c.replicas[i]] = m
		}
	}
	if err := c.await(want, links); err != nil {
		return err
	}
	groups := make([][]*Server, clusterSize)
	for i, m := range c.nodes {
		groups[i] = []*Server{m}
		if c.replicas != nil {
			groups[i] = append(groups[i], c.replicas[i])
		}
	}
	return c.awaitShards(groups)
}

// awaitShards waits up to clusterTimeout until every node lists in CLUSTER
// SHARDS exactly the shards of groups, each shard with exactly the nodes of
// one group.
func (c *RedisCluster) awaitShards(groups [][]*Server) error {
	want := make([]string, len(groups))
	for i, g := range groups {
		want[i] = shardKey(g)
	}
	slices.Sort(want)
	all := c.all()
	clients := make(map[*Server]*redis.Client, len(all))
	for _, s := range all {
		clients[s] = redis.NewClient(s.Options())
		defer clients[s].Close()
	}
	return waitFor(clusterTimeout, nil, func(ctx context.Context) error {
		for _, s := range all {
			shards, err := clients[s].ClusterShards(ctx).Result()
			if err != nil {
				return fmt.Errorf("node %s: CLUSTER SHARDS: %w", s.Addr(), err)
			}
			got := make([]string, len(shards))
			for i, sh := range shards {
				addrs := make([]string, len(sh.Nodes))
				for j, n := range sh.Nodes {
					addrs[j] = net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))
				}
				got[i] = addrKey(addrs)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				return fmt.Errorf("node %s: CLUSTER SHARDS has the shards %v, want %v", s.Addr(), got, want)
			}
		}
		return nil
	})
}

// shardKey names the shard of the servers in group by their addresses (see
// addrKey).
func shardKey(group []*Server) string {
	addrs := make([]string, len(group))
	for i, s := range group {
		addrs[i] = s.Addr()
	}
	return addrKey(addrs)
}

// addrKey names a shard by the addresses of its nodes, in any order: the
// addresses sorted, joined by "+".
func addrKey(addrs []string) string {
	addrs = slices.Clone(addrs)
	slices.Sort(addrs)
	return strings.Join(addrs, "+")
}

// expect is what a node must show in CLUSTER SLOTS for the slots of one
// shard.
type expect struct {
	masters []*Server // the node listed first must be one of these
	replica *Server   // if set, the only other node listed; if nil, the others are not checked
}

// check reports whether nodes, as CLUSTER SLOTS lists them for a range, are
// as e says.
func (e expect) check(nodes []redis.ClusterNode) error {
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr
	}
	var masters []string
	for _, m := range e.masters {
		masters = append(masters, m.Addr())
	}
	if len(addrs) == 0 || !contains(masters, addrs[0]) {
		return fmt.Errorf("served by %v, want first one of %v", addrs, masters)
	}
	if e.replica != nil && (len(addrs) != 2 || addrs[1] != e.replica.Addr()) {
		return fmt.Errorf("served by %v, want %s then the replica %s", addrs, addrs[0], e.replica.Addr())
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// sees checks that the node behind cl reports cluster_state:ok and serves
// every slot, each shard's within the shard's third and as want says.
func sees(ctx context.Context, cl *redis.Client, want []expect) error {
	info, err := cl.ClusterInfo(ctx).Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return errors.New("cluster_state is not ok")
	}
	slots, err := cl.ClusterSlots(ctx).Result()
	if err != nil {
		return err
	}
	covered := 0
	for _, r := range slots {
		i := slotOwner(r.Start)
		if _, last := slotRange(i); r.End > last {
			return fmt.Errorf("CLUSTER SLOTS has %d-%d, which spans two shards", r.Start, r.End)
		}
		if err := want[i].check(r.Nodes); err != nil {
			return fmt.Errorf("CLUSTER SLOTS has %d-%d %w", r.Start, r.End, err)
		}
		covered += r.End - r.Start + 1
	}
	if covered != slotCount {
		return fmt.Errorf("CLUSTER SLOTS covers %d of %d slots", covered, slotCount)
	}
	return nil
}

// linkedTo checks that the node behind cl is a replica of master whose
// replication link is up.
func linkedTo(ctx context.Context, cl *redis.Client, master *Server) error {
	info, err := cl.Info(ctx, "replication").Result()
	if err != nil {
		return err
	}
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = v
		}
	}
	if fields["role"] != "slave" || fields["master_port"] != strconv.Itoa(master.port) {
		return fmt.Errorf("role %s of master port %q, want a replica of %s", fields["role"], fields["master_port"], master.Addr())
	}
	if fields["master_link_status"] != "up" {
		return fmt.Errorf("master_link_status is %s", fields["master_link_status"])
	}
	return nil
}

// await waits up to clusterTimeout until every live node (every node but
// those KillMaster killed and RestartKilled did not restart) sees the
// cluster as want says (see sees), and every replica of links (replica to
// master) is linked to its master.
func (c *RedisCluster) await(want []expect, links map[*Server]*Server) error {
	all := c.all()
	clients := make(map[*Server]*redis.Client, len(all))
	for _, s := range all {
		clients[s] = redis.NewClient(s.Options())
		defer clients[s].Close()
	}
	return waitFor(clusterTimeout, nil, func(ctx context.Context) error {
		for _, s := range c.live() {
			if err := sees(ctx, clients[s], want); err != nil {
				return fmt.Errorf("node %s: %w", s.Addr(), err)
			}
		}
		for r, m := range links {
			if err := linkedTo(ctx, clients[r], m); err != nil {
				return fmt.Errorf("node %s: %w", r.Addr(), err)
			}
		}
		return nil
	})
}

// all returns every server of the cluster: the masters it started with, then
// their replicas.
func (c *RedisCluster) all() []*Server {
	return append(append([]*Server(nil), c.nodes...), c.replicas...)
}

// live returns the servers of the cluster that are not recorded as down.
func (c *RedisCluster) live() []*Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	var live []*Server
	for _, s := range c.all() {
		down := false
		for _, sh := range c.shards {
			down = down || sh.down == s
		}
		if !down {
			live = append(live, s)
		}
	}
	return live
}

// Addrs returns the addresses of the masters the cluster started with, node
// i owning the i-th third of the slots. After a failover in shard i, Addrs()[i]
// is its replica (or down), but the addresses remain valid seeds.
func (c *RedisCluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// AllAddrs returns the addresses of every node: Addrs, then, for a cluster
// with replicas, the replica each of them started with, in the same order.
func (c *RedisCluster) AllAddrs() []string {
	var addrs []string
	for _, s := range c.all() {
		addrs = append(addrs, s.Addr())
	}
	return addrs
}

// Options returns new cluster client options seeded with every node (see
// AllAddrs), so that a client can load the slot map whichever node is down;
// the caller may change them.
func (c *RedisCluster) Options() *redis.ClusterOptions {
	return &redis.ClusterOptions{Addrs: c.AllAddrs()}
}

// Client returns a new cluster client, closed in t.Cleanup, that has loaded
// the slot map and pinged every master. If it cannot, Client calls t.Fatal.
func (c *RedisCluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(c.Options())
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.Ping(ctx).Err()
	})
	if err != nil {
		t.Fatalf("redistest: cluster client of %v: %v", c.AllAddrs(), err)
	}
	return cc
}

// Stop stops every node; it is idempotent.
func (c *RedisCluster) Stop() {
	for _, s := range c.all() {
		s.Stop()
	}
}

// StartCluster starts a cluster without replicas for a program that is not a test (bench's
// comparator), which must Stop it: it returns once every node reports cluster_state:ok and
// lists the same owner for every slot. On failure nothing is left running. On Linux the nodes
// die with the program (proc_linux.go), but only Stop removes their directories.
func StartCluster() (*RedisCluster, error) { return startCluster() }

// NewCluster starts a cluster for the calling test alone, for tests that move slots; it is
// stopped in t.Cleanup. If the start fails, NewCluster calls t.Fatal.
func NewCluster(t testing.TB) *RedisCluster {
	t.Helper()
	c, err := startCluster()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// NewClusterWithReplicas starts a cluster of three masters, each with one
// replica, for the calling test alone, for tests that kill or switch over
// masters; it is stopped in t.Cleanup. When it returns, every node reports
// cluster_state:ok, every node's CLUSTER SLOTS lists, for each third of the
// slots, its master then that master's replica, every replica's
// replication link is up, and every node's CLUSTER SHARDS lists each master
// with its replica in a shard of their own, so that any node killed from
// then on can start again from its nodes.conf. If the start fails,
// NewClusterWithReplicas calls t.Fatal.
func NewClusterWithReplicas(t testing.TB) *RedisCluster {
	t.Helper()
	c, err := startShards(true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// MasterOf returns the shard (0, 1 or 2) whose master serves key: the one
// that owns the key's hash slot, hash tags included. A slot moved by MoveSlot
// belongs to the shard it was moved to.
func (c *RedisCluster) MasterOf(key string) int {
	slot := core.Slot(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	if to, ok := c.moved[slot]; ok {
		return to
	}
	return slotOwner(slot)
}

// MasterAddr returns the address of the master of shard i as last recorded:
// Addrs()[i] until a failover of the shard, its replica after one (after
// KillMaster, only once WaitPromoted has seen the promotion).
func (c *RedisCluster) MasterAddr(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.shards[i].master.Addr()
}

// ReplicaAddr returns the address of the replica of shard i as last recorded
// (see MasterAddr), or "" for a cluster without replicas.
func (c *RedisCluster) ReplicaAddr(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shards[i].replica == nil {
		return ""
	}
	return c.shards[i].replica.Addr()
}

// shardLocked returns shard i for an operation op that needs replicas; c.mu
// must be held.
func (c *RedisCluster) shardLocked(op string, i int) (*shard, error) {
	if c.replicas == nil {
		return nil, fmt.Errorf("redistest: %s: the cluster has no replicas; use NewClusterWithReplicas", op)
	}
	if i < 0 || i >= clusterSize {
		return nil, fmt.Errorf("redistest: %s: no shard %d", op, i)
	}
	return &c.shards[i], nil
}

// KillMaster SIGKILLs the master of shard i and returns once it has exited;
// its dataset is lost, and what its replica had not received with it. The
// cluster then promotes the replica by itself: WaitPromoted waits for that.
// KillMaster fails, changing nothing, on a cluster without replicas, or if a
// server of shard i is already down (the shard would be lost).
func (c *RedisCluster) KillMaster(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	sh, err := c.shardLocked("KillMaster", i)
	if err != nil {
		return err
	}
	if sh.down != nil {
		return fmt.Errorf("redistest: KillMaster: server %s of shard %d is already down; RestartKilled first", sh.down.Addr(), i)
	}
	if err := sh.master.Kill(); err != nil {
		return err
	}
	sh.down = sh.master
	return nil
}

// WaitPromoted waits until the replica of shard i is the master of the
// shard's slots as every live node sees it, and every live node reports
// cluster_state:ok with all slots served, and returns the time since the
// call. It then records the replica as the shard's master, and the old
// master (down, if KillMaster killed it) as its replica. It fails after
// clusterTimeout (30s), or at once if the replica is down.
func (c *RedisCluster) WaitPromoted(i int) (time.Duration, error) {
	start := time.Now()
	c.mu.Lock()
	sh, err := c.shardLocked("WaitPromoted", i)
	if err != nil {
		c.mu.Unlock()
		return 0, err
	}
	old, next, down := sh.master, sh.replica, sh.down
	c.mu.Unlock()
	if next == down {
		return 0, fmt.Errorf("redistest: WaitPromoted: the replica %s of shard %d is down", next.Addr(), i)
	}
	if err := c.awaitPromoted(i, old, next); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// awaitPromoted waits until next, old's replica in shard i, is the master of
// the shard as every live node sees it (see WaitPromoted), then records the
// swap.
func (c *RedisCluster) awaitPromoted(i int, old, next *Server) error {
	want := make([]expect, clusterSize)
	for j := range want {
		if j == i {
			want[j] = expect{masters: []*Server{next}}
		} else {
			// Either server: another shard may be failing over meanwhile.
			want[j] = expect{masters: []*Server{c.nodes[j], c.replicas[j]}}
		}
	}
	if err := c.await(want, nil); err != nil {
		return fmt.Errorf("redistest: promotion of %s to master of shard %d in place of %s: %w",
			next.Addr(), i, old.Addr(), err)
	}
	c.mu.Lock()
	c.shards[i].master, c.shards[i].replica = next, old
	c.mu.Unlock()
	return nil
}

// RestartKilled starts again, on the same address, the server of shard i
// that KillMaster killed, once WaitPromoted has seen its replacement. It
// comes back with its cluster identity (its nodes.conf survives in its
// directory) and an empty dataset, learns that its slots have moved to the
// new master, and becomes its replica. RestartKilled returns once that
// replica's link is up and every live node lists, for the shard's slots, the
// new master then that replica. It fails if no server of shard i is down or
// the promotion has not been seen yet.
func (c *RedisCluster) RestartKilled(i int) error {
	c.mu.Lock()
	sh, err := c.shardLocked("RestartKilled", i)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	master, down := sh.master, sh.down
	c.mu.Unlock()
	switch {
	case down == nil:
		return fmt.Errorf("redistest: RestartKilled: no server of shard %d is down", i)
	case down == master:
		// Restarted now, it would come back as the master of its slots with
		// an empty dataset, and its replica would copy that.
		return fmt.Errorf("redistest: RestartKilled: shard %d has not failed over from %s; WaitPromoted first", i, down.Addr())
	}
	// Without it the server would start as a new node, outside the cluster.
	if _, err := os.Stat(filepath.Join(down.dir, "nodes.conf")); err != nil {
		return fmt.Errorf("redistest: RestartKilled: cluster config of %s: %w", down.Addr(), err)
	}
	if err := down.Restart(); err != nil {
		return err
	}
	c.mu.Lock()
	c.shards[i].down = nil
	c.mu.Unlock()
	if err := c.awaitReplica(i, master, down); err != nil {
		return fmt.Errorf("redistest: RestartKilled: %w", err)
	}
	return nil
}

// awaitReplica waits until replica is linked to master, the master of shard
// i, and every live node lists the shard's slots at master then replica.
func (c *RedisCluster) awaitReplica(i int, master, replica *Server) error {
	want := make([]expect, clusterSize)
	for j := range want {
		if j == i {
			want[j] = expect{masters: []*Server{master}, replica: replica}
		} else {
			want[j] = expect{masters: []*Server{c.nodes[j], c.replicas[j]}}
		}
	}
	if err := c.await(want, map[*Server]*Server{replica: master}); err != nil {
		return fmt.Errorf("%s as replica of %s in shard %d: %w", replica.Addr(), master.Addr(), i, err)
	}
	return nil
}

// SwitchOver makes the replica of shard i its master in a controlled
// failover (CLUSTER FAILOVER sent to the replica, what an operator runs for
// maintenance): the master stops accepting writes until the replica has
// caught up, so nothing acknowledged is lost, then the replica takes over
// and the old master becomes its replica. SwitchOver returns the time from
// the request until every live node saw the promotion (see WaitPromoted),
// but returns itself only once the old master is linked as the new replica
// and every live node lists both, so that the shard can fail over again. It
// fails if a server of shard i is down.
func (c *RedisCluster) SwitchOver(i int) (time.Duration, error) {
	c.mu.Lock()
	sh, err := c.shardLocked("SwitchOver", i)
	if err != nil {
		c.mu.Unlock()
		return 0, err
	}
	old, next, down := sh.master, sh.replica, sh.down
	c.mu.Unlock()
	if down != nil {
		return 0, fmt.Errorf("redistest: SwitchOver: server %s of shard %d is down", down.Addr(), i)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	rc := redis.NewClient(next.Options())
	err = rc.Do(ctx, "CLUSTER", "FAILOVER").Err()
	rc.Close()
	if err != nil {
		return 0, fmt.Errorf("redistest: CLUSTER FAILOVER on %s: %w", next.Addr(), err)
	}
	if err := c.awaitPromoted(i, old, next); err != nil {
		return 0, err
	}
	took := time.Since(start)
	if err := c.awaitReplica(i, next, old); err != nil {
		return 0, fmt.Errorf("redistest: SwitchOver: %w", err)
	}
	return took, nil
}

// MoveSlot moves slot, with its keys, to node to (an index of Addrs), as a resharding does:
// the target imports it, the owner migrates it and its keys, then every node is told the new
// owner. It returns once every node reports the new owner. It is for clusters without
// replicas (NewCluster). On failure it calls t.Fatal.
func (c *RedisCluster) MoveSlot(t testing.TB, slot, to int) {
	t.Helper()
	if c.replicas != nil {
		// The failover methods check each shard against its third of the slots.
		t.Fatal("redistest: MoveSlot: not supported on a cluster with replicas")
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	clients := make([]*redis.Client, len(c.nodes))
	ids := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		clients[i] = redis.NewClient(s.Options())
		defer clients[i].Close()
		id, err := clients[i].Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatalf("redistest: CLUSTER MYID on %s: %v", s.Addr(), err)
		}
		ids[i] = id
	}
	from := -1
	slots, err := clients[to].ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatalf("redistest: CLUSTER SLOTS: %v", err)
	}
	for _, r := range slots {
		if r.Start <= slot && slot <= r.End && len(r.Nodes) > 0 {
			for i, s := range c.nodes {
				if s.Addr() == r.Nodes[0].Addr {
					from = i
				}
			}
		}
	}
	if from < 0 || from == to {
		t.Fatalf("redistest: slot %d is owned by node %d, cannot move it to node %d", slot, from, to)
	}
	do := func(i int, args ...any) {
		if err := clients[i].Do(ctx, args...).Err(); err != nil {
			t.Fatalf("redistest: %v on %s: %v", args, c.nodes[i].Addr(), err)
		}
	}
	do(to, "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[from])
	do(from, "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to])
	for {
		keys, err := clients[from].ClusterGetKeysInSlot(ctx, slot, 100).Result()
		if err != nil {
			t.Fatalf("redistest: CLUSTER GETKEYSINSLOT: %v", err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", "127.0.0.1", c.nodes[to].port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		do(from, args...)
	}
	// The new owner first, then the old one (which then ends the slot's shard channel
	// subscriptions), then the rest.
	order := []int{to, from}
	for i := range c.nodes {
		if i != to && i != from {
			order = append(order, i)
		}
	}
	for _, i := range order {
		do(i, "CLUSTER", "SETSLOT", slot, "NODE", ids[to])
	}
	err = waitFor(clusterTimeout, nil, func(ctx context.Context) error {
		for i, cl := range clients {
			slots, err := cl.ClusterSlots(ctx).Result()
			if err != nil {
				return err
			}
			ok := false
			for _, r := range slots {
				if r.Start <= slot && slot <= r.End && len(r.Nodes) > 0 && r.Nodes[0].Addr == c.nodes[to].Addr() {
					ok = true
				}
			}
			if !ok {
				return fmt.Errorf("node %s does not yet see slot %d at %s", c.nodes[i].Addr(), slot, c.nodes[to].Addr())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("redistest: moving slot %d: %v", slot, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.moved == nil {
		c.moved = make(map[int]int)
	}
	c.moved[slot] = to
}
