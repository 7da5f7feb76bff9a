package election

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/internal/layout"
)

// observeIdle is how long an observer's subscription may stay silent before the observer
// pings it, and then how long the ping may go unanswered before the observer takes the
// connection for dead and subscribes again on a new one: a connection cut without a reset (a
// network partition, a stopped server) is noticed within twice this. With each ping the
// observer also checks that the server its Client's calls go to knows its subscription (see
// listen): a failover that left the subscription on the old master, running still, is noticed
// within this.
const observeIdle = 3 * time.Second

// Observe returns a channel that receives the election's leaders as they change: the current
// leader first (when there is one), then each new leader and each value a leader proclaims, in
// the order they happened. It never receives the same Token and Value twice in a row. The
// channel holds one Leadership: a receiver that falls behind finds the latest change, not
// every change it missed. Times without a leader are not reported; Leader tells them.
//
// Changes come from a subscription: Redis publishes each one and nobody polls. Observe keeps
// one connection of its own for it. When the subscription breaks (a connection cut, a
// failover), or is found on another server than the one the Client's calls go to (a
// controlled failover leaves the old master running, its connections open), Observe
// subscribes again and reads the current leader, so that a leader that began meanwhile is
// reported; what changed in between and was replaced is not. Redis errors are retried until
// ctx is done. The channel is closed when ctx is done or the Client is
// closed, and Observe leaves nothing running after that.
func (e *Election) Observe(ctx context.Context) <-chan Leadership {
	out := make(chan Leadership, 1)
	if ctx.Err() != nil || !e.rt.Go(func(rctx context.Context) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(rctx, cancel)
		defer stop()
		o := observer{e: e, out: out, mark: e.keys[1] + ":o:" + e.rt.NewHoldID()}
		o.run(ctx)
		close(out)
	}) {
		close(out)
	}
	return out
}

// observer is one Observe's state: the last change it delivered, and what its receiver has.
type observer struct {
	e   *Election
	out chan Leadership
	// mark is a channel of this observer's own, in the slot of the election's channel, which
	// nobody publishes on: the server that counts a subscriber of it has the subscription.
	mark string
	last Leadership
	rev  int64 // the last change's revision of the record (see elect_lead.lua)
	seen bool

	sent    Leadership // the last change sent on out
	pending bool       // sent may still be in out
	took    Leadership // the last change the receiver took
	taken   bool       // took is set
}

// run subscribes, and subscribes again whenever the subscription is lost, until ctx is done.
func (o *observer) run(ctx context.Context) {
	pause := 50 * time.Millisecond
	for ctx.Err() == nil {
		if o.listen(ctx) {
			pause = 50 * time.Millisecond
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// listen keeps one subscription until ctx is done or the subscription is lost, and reports
// whether it was ever confirmed.
func (o *observer) listen(ctx context.Context) (confirmed bool) {
	e := o.e
	channel := e.keys[1]
	var ps *redis.PubSub
	if e.rt.Sharded {
		ps = e.rt.Redis.SSubscribe(ctx, channel, o.mark)
	} else {
		ps = e.rt.Redis.Subscribe(ctx, channel, o.mark)
	}
	// ReceiveTimeout does not watch its context: closing the PubSub is what ends a receive.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer func() {
		if stop() {
			_ = ps.Close()
		}
	}()
	pinged, errs := false, 0
	for ctx.Err() == nil {
		msg, err := ps.ReceiveTimeout(ctx, observeIdle)
		if err != nil {
			var ne net.Error
			switch {
			case ctx.Err() != nil:
				return confirmed
			case errors.As(err, &ne) && ne.Timeout():
				if pinged {
					return confirmed // the ping went unanswered: a new connection
				}
				pinged = true
				_ = ps.Ping(ctx)
				if confirmed && !o.known(ctx) {
					// The subscription is on another server than the one the Client's calls
					// go to, where the changes are published: after a controlled failover,
					// go-redis moves its command connections to the new master, not this
					// one, and the old master, running still, answers the ping. A new
					// connection goes to the current master.
					return confirmed
				}
			case errors.As(err, new(redis.Error)):
				// Redis refused the subscription (NOPERM, LOADING, MOVED to another node): the
				// connection works but subscribes to nothing, and go-redis does not subscribe
				// again on it. A new one is opened, after run's pause, to the slot's owner.
				o.reloadSlots()
				return confirmed
			default:
				// go-redis reconnects and subscribes again by itself on the next receive; a
				// connection that keeps failing is given up and opened anew.
				if errs++; errs >= 3 {
					return confirmed
				}
				select {
				case <-ctx.Done():
				case <-time.After(time.Duration(errs) * 100 * time.Millisecond):
				}
			}
			continue
		}
		pinged, errs = false, 0
		switch m := msg.(type) {
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				// Confirmed, the first time or again after a reconnection: what was published
				// while not subscribed is read instead (once, with the election's channel).
				confirmed = true
				if m.Channel == channel {
					o.catchUp(ctx)
				}
			default:
				// Unsubscribed by the server (Redis Cluster moved the channel's slot): a new
				// subscription finds the slot's owner.
				o.reloadSlots()
				return confirmed
			}
		case *redis.Message:
			if l, rev, ok := parseChange(m.Payload); ok && m.Channel == channel {
				o.deliver(l, rev)
			}
		}
	}
	return confirmed
}

// known reports whether the server that the Client's calls to the election's slot go to has
// this observer's subscription: whether it counts a subscriber of o.mark. A question that
// fails tells nothing, and is taken for yes: a failure of the server is the subscription's
// own concern (see listen).
func (o *observer) known(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, observeIdle)
	defer cancel()
	var counts map[string]int64
	var err error
	if cc, ok := o.e.rt.Redis.(*redis.ClusterClient); ok {
		node, nerr := cc.MasterForKey(ctx, o.mark)
		if nerr != nil {
			return true
		}
		counts, err = node.PubSubShardNumSub(ctx, o.mark).Result()
	} else {
		counts, err = o.e.rt.Redis.PubSubNumSub(ctx, o.mark).Result()
	}
	if err != nil {
		return true
	}
	n, ok := counts[o.mark]
	return !ok || n > 0
}

// reloadSlots has go-redis reload its Redis Cluster slot map, which a moved slot left stale:
// a new subscription is then sent to the slot's owner (as the Client's hub does).
func (o *observer) reloadSlots() {
	if cc, ok := o.e.rt.Redis.(*redis.ClusterClient); ok {
		cc.ReloadState(context.Background())
	}
}

// catchUp reads the current leader, retrying until it has it or ctx is done.
func (o *observer) catchUp(ctx context.Context) {
	pause := 50 * time.Millisecond
	for ctx.Err() == nil {
		l, rev, ok, err := o.e.read(ctx)
		if err == nil {
			if ok {
				o.deliver(l, rev)
			}
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// deliver sends a change that is newer than the last one delivered, replacing one the
// receiver has not taken yet. Changes are ordered by the leader's token, then by the record's
// revision within one leadership.
func (o *observer) deliver(l Leadership, rev int64) {
	if o.seen && (l.Token < o.last.Token || l.Token == o.last.Token && rev <= o.rev) {
		return
	}
	same := o.seen && l.Token == o.last.Token && l.Value == o.last.Value
	o.last, o.rev, o.seen = l, rev, true
	if same {
		return
	}
	// Only this goroutine sends: once out is empty, whether the receiver took the change sent
	// last is known.
	select {
	case <-o.out:
		// The receiver fell behind: the latest change replaces the one it has not taken.
	default:
		if o.pending {
			o.took, o.taken = o.sent, true
		}
	}
	o.pending = false
	if o.taken && l.Token == o.took.Token && l.Value == o.took.Value {
		return // the change replaced brought back what the receiver has
	}
	o.out <- l
	o.sent, o.pending = l, true
}

// parseChange parses a published change, "<token> <revision> <hold> <value>".
func parseChange(p string) (Leadership, int64, bool) {
	t, rest, ok1 := strings.Cut(p, " ")
	r, rest, ok2 := strings.Cut(rest, " ")
	hold, value, ok3 := strings.Cut(rest, " ")
	token, err1 := strconv.ParseInt(t, 10, 64)
	rev, err2 := strconv.ParseInt(r, 10, 64)
	if !ok1 || !ok2 || !ok3 || err1 != nil || err2 != nil {
		return Leadership{}, 0, false
	}
	return Leadership{Value: value, Token: token, Client: layout.ClientOf(hold)}, rev, true
}
