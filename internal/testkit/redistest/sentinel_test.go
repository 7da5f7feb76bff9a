package redistest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestSentinelFailoverPromotesTheReplica checks the harness end to end: a write through the
// failover client reaches the replica, the master is killed, the sentinels promote the
// replica, and the same client then reads the write from it and writes to it.
func TestSentinelFailoverPromotesTheReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := NewSentinel(t)
	c := g.Client(t)
	key := Name(t)
	if err := c.Set(ctx, key, "before", 0).Err(); err != nil {
		t.Fatalf("SET through the failover client: %v", err)
	}
	if n, err := c.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v; want the replica's acknowledgement", n, err)
	}
	took, err := g.Failover()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("replica %s promoted %v after the master %s was killed", g.ReplicaAddr(), took, g.MasterAddr())
	var got string
	err = waitFor(readyTimeout, nil, func(ctx context.Context) error { // the client follows the switch
		got, err = c.Get(ctx, key).Result()
		return err
	})
	if err != nil || got != "before" {
		t.Fatalf("GET after the failover = %q, %v; want %q", got, err, "before")
	}
	if err := c.Set(ctx, key, "after", 0).Err(); err != nil {
		t.Fatalf("SET after the failover: %v", err)
	}
	if g.Master() != g.ReplicaAddr() {
		t.Fatalf("the master after the failover is %s, not the replica %s", g.Master(), g.ReplicaAddr())
	}
	direct := redis.NewClient(&redis.Options{Addr: g.Master()})
	defer direct.Close()
	if got, err := direct.Get(ctx, key).Result(); err != nil || got != "after" {
		t.Fatalf("GET on the promoted replica = %q, %v; want %q", got, err, "after")
	}
}

// TestSentinelDelayedLinkLosesWhatIsInFlight checks WithReplicationDelay: a write the
// replica has not received when the master is killed is gone after the failover, and WAIT
// reports that it was not acknowledged.
func TestSentinelDelayedLinkLosesWhatIsInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := NewSentinel(t, WithReplicationDelay(time.Second))
	c := g.Client(t)
	key := Name(t)
	if err := c.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if n, err := c.Wait(ctx, 1, 100*time.Millisecond).Result(); err != nil || n != 0 {
		t.Fatalf("WAIT 1 within 100ms of a 1s link = %d, %v; want 0", n, err)
	}
	if _, err := g.Failover(); err != nil {
		t.Fatal(err)
	}
	err := waitFor(readyTimeout, nil, func(ctx context.Context) error {
		err := c.Get(ctx, key).Err()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		return errors.Join(errors.New("GET after the failover found the key"), err)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSentinelSwitchOverKeepsTheOldMasterAsAReplica checks the controlled failover of a group
// of two replicas: a replica is promoted, Master follows it, and the old master, still
// running, ends as a replica of the new one beside the other replica.
func TestSentinelSwitchOverKeepsTheOldMasterAsAReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := NewSentinel(t, WithReplicas(2))
	c := g.Client(t)
	key := Name(t)
	if err := c.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if n, err := c.Wait(ctx, 2, 5*time.Second).Result(); err != nil || n != 2 {
		t.Fatalf("WAIT 2 = %d, %v; want both replicas' acknowledgement", n, err)
	}
	took, err := g.SwitchOver()
	if err != nil {
		t.Fatal(err)
	}
	if g.Master() == g.MasterAddr() {
		t.Fatalf("the master is still %s after the switch-over", g.Master())
	}
	t.Logf("%s promoted %v after SENTINEL FAILOVER", g.Master(), took)
	if _, err := g.WaitReplicas(2); err != nil {
		t.Fatal(err)
	}
	old := redis.NewClient(&redis.Options{Addr: g.MasterAddr()})
	defer old.Close()
	role, err := old.Do(ctx, "ROLE").Slice()
	if err != nil || len(role) == 0 || role[0] != "slave" {
		t.Fatalf("ROLE on the old master = %v, %v; want a replica", role, err)
	}
	if got, err := old.Get(ctx, key).Result(); err != nil || got != "v" {
		t.Fatalf("GET on the old master = %q, %v; want %q", got, err, "v")
	}
}
