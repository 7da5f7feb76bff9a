package core

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Following the master.
//
// A subscription lives on one connection, opened once to the server that was the master at
// the time; the Client's calls go wherever the Redis client sends them now. After a failover
// the two can differ with nothing broken: go-redis's failover client moves its command
// connections to the new master when Sentinel announces the switch, but not its pub/sub
// connections, and a controlled failover (SENTINEL FAILOVER) leaves the old master running,
// as a master still, until Sentinel turns it into a replica some ten seconds later. Until
// then every grant and wakeup is published on the new master and heard by nobody, and the
// waiters wait for their fallback timers.
//
// So while a connection has waiters, the hub checks every auditEvery that the server its
// calls go to knows the subscription: PUBSUB NUMSUB (SHARDNUMSUB on Redis Cluster, on the
// master of the slot) of one of its channels, a grant channel of this Client's own when it has
// one. A count of 0 for a channel confirmed before the question was sent, on a connection that
// did not break meanwhile, means the subscription is on another server: the connection's
// channels move to a new connection, which the Redis client opens to the current master, and
// every waiter of them looks again (see rehome). A shared channel (a latch's) may be counted
// for other Clients' subscriptions, so only a count of 0 tells; a grant channel is this
// Client's alone. A question that fails tells nothing: a failure of the server itself is the
// connection's own concern (see receive).

// auditEvery is how often the hub checks that its subscriptions are on the server its calls
// go to, while it has waiters: a failover that leaves the old connection open delays the
// waiters' wakeups by about this much, and a Client with waiters costs one command to each
// server this often.
const auditEvery = 500 * time.Millisecond

// audit checks the subscriptions every auditEvery until the runtime closes (see above).
func (h *Hub) audit() {
	defer h.wg.Done()
	t := time.NewTicker(auditEvery)
	defer t.Stop()
	for {
		select {
		case <-h.rt.closed:
			return
		case <-t.C:
		}
		for _, p := range h.probes() {
			h.check(p)
		}
	}
}

// probe is one connection's question: the channel to count, and the connection's count of
// breaks when it was asked.
type probe struct {
	conn    *hubConn
	channel string
	breaks  int
}

// probes returns a question per connection that has waiters on a confirmed subscription.
func (h *Hub) probes() []probe {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	by := map[*hubConn]int{}
	var ps []probe
	for _, c := range h.chans {
		if c.state != subscribed || len(c.waiters) == 0 || c.conn.closed {
			continue
		}
		own := strings.HasSuffix(c.name, h.rt.ID)
		i, seen := by[c.conn]
		switch {
		case !seen:
			by[c.conn] = len(ps)
			ps = append(ps, probe{conn: c.conn, channel: c.name, breaks: c.conn.breaks})
		case own:
			ps[i].channel = c.name
		}
	}
	return ps
}

// check asks the server the Client's calls go to how many subscribers p's channel has, and
// moves p's connection when it has none (see above).
func (h *Hub) check(p probe) {
	ctx, cancel := context.WithTimeout(h.rt.ctx, auditEvery)
	defer cancel()
	n, err := h.subscribers(ctx, p.channel)
	if err != nil || n > 0 {
		return
	}
	h.mu.Lock()
	c := h.chans[p.channel]
	if h.closed || p.conn.closed || p.conn.breaks != p.breaks || c == nil || c.conn != p.conn || c.state != subscribed {
		h.mu.Unlock()
		return // changed meanwhile: the count may be of a moment without the subscription
	}
	h.rt.Logger().Warn("aqs: the server the calls go to does not know this Client's subscription: subscribing again",
		"channel", p.channel)
	// rehome releases h.mu; the connection's receive loop finds it closed and returns.
	h.rehome(p.conn, 0)
}

// subscribers returns the number of subscribers of channel on the server that the Client's
// calls to its slot go to.
func (h *Hub) subscribers(ctx context.Context, channel string) (int64, error) {
	var cmd *redis.Cmd
	if cc, ok := h.rt.Redis.(*redis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, channel)
		if err != nil {
			return 0, err
		}
		cmd = node.Do(ctx, "PUBSUB", "SHARDNUMSUB", channel)
	} else {
		cmd = h.rt.Redis.Do(ctx, "PUBSUB", "NUMSUB", channel)
	}
	r, err := cmd.Slice()
	if err != nil {
		return 0, err
	}
	if len(r) != 2 {
		return 0, fmt.Errorf("aqs: PUBSUB NUMSUB replied %v", r)
	}
	n, ok := r[1].(int64)
	if !ok {
		return 0, fmt.Errorf("aqs: PUBSUB NUMSUB replied %v", r)
	}
	return n, nil
}
