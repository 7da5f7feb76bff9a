package redistest

//lint:file-ignore SA1019 go-redis's ClusterClient routes by CLUSTER SLOTS (which Redis 7 deprecates for CLUSTER SHARDS), so the harness checks the cluster as that command shows it.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
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

const (
	clusterSize = 3
	slotCount   = 16384
)

// RedisCluster is a Redis Cluster of three masters without replicas, the
// i-th of Addrs owning the i-th third of the slots. Its methods are safe for
// concurrent use. It is named RedisCluster, not Cluster, because the
// function Cluster already takes that name.
type RedisCluster struct {
	nodes []*Server
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

// startCluster starts and forms a cluster. On failure nothing is left
// running.
func startCluster() (*RedisCluster, error) {
	c := &RedisCluster{}
	for range clusterSize {
		s, err := startServer(true)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.nodes = append(c.nodes, s)
	}
	if err := c.form(); err != nil {
		c.Stop()
		return nil, fmt.Errorf("redistest: forming cluster %v: %w", c.Addrs(), err)
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
	for _, s := range c.nodes[1:] {
		// The bus port must be given: it is not the default port+10000.
		if err := clients[0].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", s.port, s.busPort).Err(); err != nil {
			return fmt.Errorf("CLUSTER MEET %s from %s: %w", s.Addr(), c.nodes[0].Addr(), err)
		}
	}
	return waitFor(clusterTimeout, nil, func(ctx context.Context) error {
		for i, cl := range clients {
			if err := c.agrees(ctx, cl); err != nil {
				return fmt.Errorf("node %s: %w", c.nodes[i].Addr(), err)
			}
		}
		return nil
	})
}

// agrees reports whether the node behind cl sees the cluster as ok and as
// formed: every slot served by its assigned owner.
func (c *RedisCluster) agrees(ctx context.Context, cl *redis.Client) error {
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
		owner := c.nodes[i]
		_, last := slotRange(i)
		if r.End > last || len(r.Nodes) == 0 || r.Nodes[0].Addr != owner.Addr() {
			return fmt.Errorf("CLUSTER SLOTS has %d-%d at %v, want %s", r.Start, r.End, r.Nodes, owner.Addr())
		}
		covered += r.End - r.Start + 1
	}
	if covered != slotCount {
		return fmt.Errorf("CLUSTER SLOTS covers %d of %d slots", covered, slotCount)
	}
	return nil
}

// Addrs returns the addresses of the masters, node i owning the i-th third
// of the slots.
func (c *RedisCluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Options returns new cluster client options seeded with every master; the
// caller may change them.
func (c *RedisCluster) Options() *redis.ClusterOptions {
	return &redis.ClusterOptions{Addrs: c.Addrs()}
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
		t.Fatalf("redistest: cluster client of %v: %v", c.Addrs(), err)
	}
	return cc
}

// Stop stops every node; it is idempotent.
func (c *RedisCluster) Stop() {
	for _, s := range c.nodes {
		s.Stop()
	}
}

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

// MoveSlot moves slot, with its keys, to node to (an index of Addrs), as a resharding does:
// the target imports it, the owner migrates it and its keys, then every node is told the new
// owner. It returns once every node reports the new owner. On failure it calls t.Fatal.
func (c *RedisCluster) MoveSlot(t testing.TB, slot, to int) {
	t.Helper()
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
}
