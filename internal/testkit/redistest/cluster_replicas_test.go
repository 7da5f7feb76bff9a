package redistest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// writeReplicated sets key to value on its master, found through cc, and waits (WAIT 1 on the
// same connection) until the master's replica has acknowledged the write, so that a failover
// cannot lose it. It checks that the master is the one c records for c.MasterOf(key).
func writeReplicated(t *testing.T, c *RedisCluster, cc *redis.ClusterClient, key, value string) {
	t.Helper()
	ctx := context.Background()
	m, err := cc.MasterForKey(ctx, key)
	if err != nil {
		t.Fatalf("master of %s: %v", key, err)
	}
	if got, want := m.Options().Addr, c.MasterAddr(c.MasterOf(key)); got != want {
		t.Fatalf("the cluster client sends %s to %s, MasterAddr(MasterOf) is %s", key, got, want)
	}
	var wait *redis.Cmd
	_, err = m.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, key, value, 0)
		wait = p.Do(ctx, "WAIT", 1, 5000)
		return nil
	})
	if err != nil {
		t.Fatalf("SET %s then WAIT: %v", key, err)
	}
	if n, err := wait.Int(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 after SET %s = %d, %v; want 1 replica", key, n, err)
	}
}

// assertReplicaOf checks that the node at addr is a replica of master with its link up, and
// that it holds key with value.
func assertReplicaOf(t *testing.T, addr, master, key, value string) {
	t.Helper()
	ctx := context.Background()
	opts := &redis.Options{Addr: addr}
	// A replica answers reads for its slots only on a READONLY connection; otherwise MOVED.
	opts.OnConnect = func(ctx context.Context, cn *redis.Conn) error { return cn.ReadOnly(ctx).Err() }
	node := redis.NewClient(opts)
	t.Cleanup(func() { node.Close() })
	role, err := node.Do(ctx, "ROLE").Slice()
	if err != nil {
		t.Fatalf("ROLE on %s: %v", addr, err)
	}
	if len(role) < 4 || role[0] != "slave" || role[3] != "connected" ||
		net.JoinHostPort(fmt.Sprint(role[1]), fmt.Sprint(role[2])) != master {
		t.Fatalf("ROLE on %s = %v, want a connected replica of %s", addr, role, master)
	}
	if got, err := node.Get(ctx, key).Result(); err != nil || got != value {
		t.Fatalf("GET %s on the replica %s = %q, %v; want %q", key, addr, got, err, value)
	}
}

func TestClusterWithReplicasListsEachMasterThenItsReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := NewClusterWithReplicas(t)
	if n := len(c.AllAddrs()); n != 2*clusterSize {
		t.Fatalf("AllAddrs has %d nodes, want %d", n, 2*clusterSize)
	}
	for i, addr := range c.Addrs() {
		if c.MasterAddr(i) != addr || c.ReplicaAddr(i) == "" || c.ReplicaAddr(i) == addr {
			t.Fatalf("shard %d: master %s, replica %q; want master %s and a replica", i, c.MasterAddr(i), c.ReplicaAddr(i), addr)
		}
	}
	for _, addr := range c.AllAddrs() {
		node := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { node.Close() })
		//lint:ignore SA1019 go-redis's ClusterClient routes by CLUSTER SLOTS, so the test checks that view
		slots, err := node.ClusterSlots(ctx).Result()
		if err != nil {
			t.Fatalf("CLUSTER SLOTS on %s: %v", addr, err)
		}
		covered := 0
		for _, r := range slots {
			i := slotOwner(r.Start)
			if len(r.Nodes) != 2 || r.Nodes[0].Addr != c.MasterAddr(i) || r.Nodes[1].Addr != c.ReplicaAddr(i) {
				t.Fatalf("node %s: slots %d-%d served by %v, want %s then %s", addr, r.Start, r.End, r.Nodes, c.MasterAddr(i), c.ReplicaAddr(i))
			}
			covered += r.End - r.Start + 1
		}
		if covered != slotCount {
			t.Fatalf("node %s: CLUSTER SLOTS covers %d slots", addr, covered)
		}
	}
	cc := c.Client(t)
	for n := range 3 {
		key := Name(t) + ":" + strconv.Itoa(n)
		writeReplicated(t, c, cc, key, "v")
		i := c.MasterOf(key)
		assertReplicaOf(t, c.ReplicaAddr(i), c.MasterAddr(i), key, "v")
	}
}

// Every node of a new cluster can be killed and started again from its nodes.conf, keeping
// its identity: a node's file is never caught half-way through learning the shard ids (Valkey
// refuses to start from one in which a replica's shard id is not its master's). The six are
// killed together, so that every file is the one the node wrote before NewClusterWithReplicas
// returned.
func TestClusterWithReplicasRestartsFromItsNodesConf(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := NewClusterWithReplicas(t)
	ids := map[*Server]string{}
	for _, s := range c.all() {
		id, err := s.Client(t).Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatalf("CLUSTER MYID on %s: %v", s.Addr(), err)
		}
		ids[s] = id
	}
	for _, s := range c.all() {
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range c.all() {
		if err := s.Restart(); err != nil {
			t.Fatalf("restarting %s from its nodes.conf: %v", s.Addr(), err)
		}
		if id, err := s.Client(t).Do(ctx, "CLUSTER", "MYID").Text(); err != nil || id != ids[s] {
			t.Fatalf("CLUSTER MYID on %s after the restart = %q, %v; want %q", s.Addr(), id, err, ids[s])
		}
	}
	// Either node of a shard may lead it now: a replica may have been promoted meanwhile.
	want := make([]expect, clusterSize)
	groups := make([][]*Server, clusterSize)
	for i := range want {
		want[i] = expect{masters: []*Server{c.nodes[i], c.replicas[i]}}
		groups[i] = []*Server{c.nodes[i], c.replicas[i]}
	}
	if err := c.await(want, nil); err != nil {
		t.Fatalf("the restarted cluster: %v", err)
	}
	if err := c.awaitShards(groups); err != nil {
		t.Fatalf("the restarted cluster: %v", err)
	}
}

func TestClusterReplicaTakesOverAKilledMaster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := NewClusterWithReplicas(t)
	key := Name(t)
	i := c.MasterOf(key)
	old, replica := c.MasterAddr(i), c.ReplicaAddr(i)
	writeReplicated(t, c, c.Client(t), key, "v")

	if err := c.KillMaster(i); err != nil {
		t.Fatalf("KillMaster(%d): %v", i, err)
	}
	if err := c.KillMaster(i); err == nil {
		t.Fatal("a second KillMaster of the shard, which would lose it, succeeded")
	}
	if err := c.RestartKilled(i); err == nil {
		t.Fatal("RestartKilled before the promotion, which would empty the shard, succeeded")
	}
	took, err := c.WaitPromoted(i)
	if err != nil {
		t.Fatalf("WaitPromoted(%d): %v", i, err)
	}
	t.Logf("shard %d: master %s killed, replica %s promoted in %v", i, old, replica, took)
	if c.MasterAddr(i) != replica || c.ReplicaAddr(i) != old {
		t.Fatalf("after the promotion shard %d has master %s, replica %s; want %s, %s", i, c.MasterAddr(i), c.ReplicaAddr(i), replica, old)
	}
	// A client that starts now, seeded with the dead master among the others, routes to the
	// promoted replica, which kept the write.
	cc := c.Client(t)
	if m, err := cc.MasterForKey(ctx, key); err != nil || m.Options().Addr != replica {
		t.Fatalf("a new cluster client sends %s to %v (%v), want %s", key, m, err, replica)
	}
	if got, err := cc.Get(ctx, key).Result(); err != nil || got != "v" {
		t.Fatalf("GET %s after the failover = %q, %v; want %q", key, got, err, "v")
	}

	restart := time.Now()
	if err := c.RestartKilled(i); err != nil {
		t.Fatalf("RestartKilled(%d): %v", i, err)
	}
	t.Logf("shard %d: %s restarted and linked as a replica in %v", i, old, time.Since(restart))
	assertReplicaOf(t, old, replica, key, "v")
	// The shard is whole again: it can lose its new master too.
	writeReplicated(t, c, cc, key, "w")
	if err := c.KillMaster(i); err != nil {
		t.Fatalf("KillMaster(%d) again: %v", i, err)
	}
	if took, err = c.WaitPromoted(i); err != nil {
		t.Fatalf("WaitPromoted(%d) again: %v", i, err)
	}
	t.Logf("shard %d: master %s killed, replica %s promoted in %v", i, replica, old, took)
	if got, err := c.Client(t).Get(ctx, key).Result(); err != nil || got != "w" {
		t.Fatalf("GET %s after the second failover = %q, %v; want %q", key, got, err, "w")
	}
}

func TestClusterSwitchOverSwapsRoles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := NewClusterWithReplicas(t)
	cc := c.Client(t)
	key := Name(t)
	i := c.MasterOf(key)
	old, replica := c.MasterAddr(i), c.ReplicaAddr(i)
	writeReplicated(t, c, cc, key, "v")

	start := time.Now()
	took, err := c.SwitchOver(i)
	if err != nil {
		t.Fatalf("SwitchOver(%d): %v", i, err)
	}
	t.Logf("shard %d: switched over from %s to %s in %v; the old master linked as replica after %v",
		i, old, replica, took, time.Since(start))
	if c.MasterAddr(i) != replica || c.ReplicaAddr(i) != old {
		t.Fatalf("after the switch-over shard %d has master %s, replica %s; want %s, %s", i, c.MasterAddr(i), c.ReplicaAddr(i), replica, old)
	}
	assertReplicaOf(t, old, replica, key, "v")
	// The client that loaded its slot map before is redirected (MOVED) to the new master.
	if got, err := cc.Get(ctx, key).Result(); err != nil || got != "v" {
		t.Fatalf("GET %s after the switch-over = %q, %v; want %q", key, got, err, "v")
	}

	// And back, which needs the swap recorded: the request goes to the old master, now the
	// replica. Through a new client: cc reloads its slot map after the MOVED in the
	// background, so it may still name the old master.
	writeReplicated(t, c, c.Client(t), key, "w")
	if took, err = c.SwitchOver(i); err != nil {
		t.Fatalf("second SwitchOver(%d): %v", i, err)
	}
	t.Logf("shard %d: switched over from %s to %s in %v", i, replica, old, took)
	if c.MasterAddr(i) != old || c.ReplicaAddr(i) != replica {
		t.Fatalf("after two switch-overs shard %d has master %s, replica %s; want %s, %s", i, c.MasterAddr(i), c.ReplicaAddr(i), old, replica)
	}
	assertReplicaOf(t, replica, old, key, "w")
}

func TestClusterMasterOfNamesTheShardServingTheKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := Cluster(t)
	cc := c.Client(t)
	name := Name(t)
	seen := map[int]bool{}
	for n := 0; len(seen) < clusterSize; n++ {
		if n == 1000 {
			t.Fatalf("1000 keys fell in shards %v only", seen)
		}
		// A hash tag: the slot is that of the tag alone.
		key := "x:{" + name + ":" + strconv.Itoa(n) + "}:y"
		i := c.MasterOf(key)
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			t.Fatalf("master of %s: %v", key, err)
		}
		if got := m.Options().Addr; got != c.Addrs()[i] {
			t.Fatalf("MasterOf(%q) = %d (%s), the cluster serves it at %s", key, i, c.Addrs()[i], got)
		}
		seen[i] = true
	}
}

func TestClusterWithoutReplicasRefusesToLoseAMaster(t *testing.T) {
	t.Parallel()
	c := Cluster(t) // shared: refusing keeps it whole for every other test
	if err := c.KillMaster(0); err == nil {
		t.Fatal("KillMaster on a cluster without replicas succeeded")
	}
	if _, err := c.SwitchOver(0); err == nil {
		t.Fatal("SwitchOver on a cluster without replicas succeeded")
	}
	if _, err := c.WaitPromoted(0); err == nil {
		t.Fatal("WaitPromoted on a cluster without replicas succeeded")
	}
	if err := c.RestartKilled(0); err == nil {
		t.Fatal("RestartKilled on a cluster without replicas succeeded")
	}
	if err := c.Client(t).Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}
}
