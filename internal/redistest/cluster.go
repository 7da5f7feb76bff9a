package redistest

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
