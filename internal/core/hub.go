package core

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The pub/sub hub.
//
// Waiters never poll. A waiter registers with the hub for the primitive's channel before the
// attempt whose failure makes it wait, and Wait returns only once Redis has confirmed the
// subscription: a release that happens after that attempt is published to a channel we are
// already subscribed to, so no wakeup can be lost between "attempt failed" and "start waiting".
//
// One subscription per channel per Client serves every local waiter of it, and one
// connection serves every channel (on Redis Cluster, one per hash slot, with sharded pub/sub, so
// a message travels only inside its shard). The hub knows messages, not primitives; a message
// says whom to wake:
//
//	"1"       wake one waiter: the longest-waiting local one that has no wakeup pending. A waiter
//	          that leaves with an unused wakeup passes it on, so a wakeup is never swallowed by a
//	          waiter that gave up.
//	"*"       wake every local waiter of the channel, to look again.
//	tags      anything else is a list of tags separated by spaces: wake the waiters registered
//	          with one of them, marked tagged (a grant addressed to them).
//
// When the connection breaks, every waiter on it is woken to re-check (it may have missed a
// message), and go-redis resubscribes on reconnect; a subscription confirmed again also wakes
// every waiter of the channel. Beyond that, each waiter's only fallback is a timer bounded by
// the remaining lease its last attempt reported.
//
// On Redis Cluster a shard channel lives on the master of its slot. When a resharding moves the
// slot, that master ends the subscription itself (an unsubscribe nobody asked for), and a
// subscription sent to a node that no longer owns the slot is refused (MOVED). Either way the
// connection's channels move to a new connection, which go-redis opens to the slot's owner
// after reloading its slot map, and every waiter of them is woken to re-check.
//
// A channel stays subscribed for Config.Linger after its last waiter left, so that a lock
// contended in bursts does not pay a SUBSCRIBE round trip each time; then it is unsubscribed,
// and a connection with no channel left is closed.

type chanState int

const (
	subscribing chanState = iota
	subscribed
	unsubscribing
)

// Hub shares subscriptions among the local waiters of one Client.
type Hub struct {
	rt     *Runtime
	mu     sync.Mutex
	conns  map[int]*hubConn
	chans  map[string]*hubChan
	closed bool
	wg     sync.WaitGroup
}

type hubConn struct {
	ps      *redis.PubSub
	slot    int
	chans   int
	closed  bool
	backoff time.Duration // the receive loop's first pause after an error, when not the least
	breaks  int           // how many times the connection broke (see audit in hub_audit.go)
}

type hubChan struct {
	name    string
	conn    *hubConn
	state   chanState
	ready   chan struct{} // closed once the subscription is confirmed
	waiters []*Waiter
	idle    *time.Timer
	// orphans handles grants to hold ids of this Client's that it no longer uses (see
	// orphan.go): the last one a Wait or Join gave.
	orphans *Orphans
	moved   bool // moved to a new connection by rehome, not confirmed there yet
}

// Waiter is one local waiter registered on a channel. C receives its wakeups.
type Waiter struct {
	hub    *Hub
	ch     *hubChan
	tag    string
	C      chan struct{}
	done   bool
	tagged bool // a message addressed to this waiter's tag arrived
	looked bool // a wakeup to look again arrived (not a message addressed to it)
	// group are the waiters on the other channels of a WaitAll (sharing C and the tag); each
	// of them has no group of its own.
	group []*Waiter
}

func newHub(rt *Runtime) *Hub {
	h := &Hub{rt: rt, conns: make(map[int]*hubConn), chans: make(map[string]*hubChan)}
	h.wg.Add(1)
	go h.audit()
	return h
}

// Wait registers a waiter on channel with the given tag (may be empty) and returns once the
// subscription is confirmed by Redis. orphans, when not nil, is the primitive's handling of
// grants on channel to hold ids of this Client that it no longer uses (see orphan.go). On
// error (ctx done, Client closed) nothing stays registered. The caller must Close the waiter.
func (h *Hub) Wait(ctx context.Context, channel, tag string, orphans *Orphans) (*Waiter, error) {
	return h.WaitAll(ctx, []string{channel}, tag, orphans)
}

// WaitAll is Wait for one waiter on several channels (a multi-name lock's, granted each name
// on the name's channel): the waiter is woken by a message on any of them, answers to tag on
// each, and is registered once every subscription is confirmed. orphans, when not nil, is
// every channel's handling of grants to unused hold ids.
func (h *Hub) WaitAll(ctx context.Context, channels []string, tag string, orphans *Orphans) (*Waiter, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	var w *Waiter
	ws := newWaiters(len(channels))
	readies := make([]chan struct{}, 0, len(channels))
	for i, channel := range channels {
		c := h.chans[channel]
		if c == nil {
			conn, isNew := h.connFor(channel)
			c = &hubChan{name: channel, conn: conn, state: subscribing, ready: make(chan struct{})}
			h.chans[channel] = c
			conn.chans++
			if isNew {
				h.wg.Add(1) // under h.mu, so that close's Wait cannot miss it
			}
			// Sent from a goroutine of its own, so that Wait returns by ctx's deadline even
			// when the server stalls (a new connection's handshake waits for the server). An
			// error is a broken connection: go-redis keeps the channel in its set and
			// subscribes again on reconnect, and the confirmation then arrives as usual.
			go func(conn *hubConn, channel string, start bool) {
				_ = h.subscribe(ctx, conn, channel)
				if start {
					h.receive(conn)
				}
			}(conn, channel, isNew)
		}
		w = h.add(w, &ws[i], c, tag, orphans)
		if i == 0 {
			grouped(w, len(channels)-1)
		}
		readies = append(readies, c.ready)
	}
	h.mu.Unlock()

	for _, ready := range readies {
		select {
		case <-ready:
		case <-ctx.Done():
			w.Close()
			return nil, context.Cause(ctx)
		case <-h.rt.closed:
			w.Close()
			return nil, ErrClosed
		}
	}
	return w, nil
}

// add registers w, a new waiter, on c, with h.mu held: alone, or, when lead is not nil, as
// one of lead's group (it shares lead's channel C and tag; lead.group has room for it). It
// returns the group's lead.
func (h *Hub) add(lead, w *Waiter, c *hubChan, tag string, orphans *Orphans) *Waiter {
	if c.idle != nil {
		c.idle.Stop() // kept, to be Reset when the channel is idle again
	}
	if orphans != nil {
		c.orphans = orphans
	}
	*w = Waiter{hub: h, ch: c, tag: tag}
	if lead == nil {
		w.C = make(chan struct{}, 1)
		lead = w
	} else {
		w.C = lead.C
		lead.group = append(lead.group, w)
	}
	c.waiters = append(c.waiters, w)
	return lead
}

// newWaiters returns n waiters to register, made at once.
func newWaiters(n int) []Waiter { return make([]Waiter, n) }

// grouped makes room in lead for a group of n more waiters.
func grouped(lead *Waiter, n int) {
	if n > 0 {
		lead.group = make([]*Waiter, 0, n)
	}
}

// Join registers a waiter on channel only if the hub is already subscribed to it, which costs
// no round trip; otherwise it returns nil and the caller uses Wait when it must wait. orphans
// is as for Wait. The caller must Close a returned waiter.
func (h *Hub) Join(channel, tag string, orphans *Orphans) *Waiter {
	return h.JoinAll([]string{channel}, tag, orphans)
}

// JoinAll is Join for one waiter on several channels (see WaitAll): it registers only if the
// hub is subscribed to every one of them.
func (h *Hub) JoinAll(channels []string, tag string, orphans *Orphans) *Waiter {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	for _, channel := range channels {
		if c := h.chans[channel]; c == nil || c.state != subscribed {
			return nil
		}
	}
	var w *Waiter
	ws := newWaiters(len(channels))
	for i, channel := range channels {
		w = h.add(w, &ws[i], h.chans[channel], tag, orphans)
		if i == 0 {
			grouped(w, len(channels)-1)
		}
	}
	return w
}

// Close unregisters the waiter (with its group), passing on a wakeup it did not use.
// Idempotent.
func (w *Waiter) Close() {
	h := w.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.done {
		return
	}
	pending := false
	select {
	case <-w.C:
		pending = true
	default:
	}
	// A wakeup of a group came from one of its channels, which one is not known: each
	// channel gets one (a waiter woken for nothing looks again, and waits on).
	w.leave(pending)
	for _, m := range w.group {
		m.leave(pending)
	}
}

// leave takes w off its channel, with h.mu held, passing a pending wakeup on.
func (w *Waiter) leave(pending bool) {
	h := w.hub
	w.done = true
	c := w.ch
	for i, x := range c.waiters {
		if x == w {
			c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
			break
		}
	}
	if pending {
		c.wakeOne()
	}
	if len(c.waiters) == 0 && c.state == subscribed && !h.closed {
		h.startIdle(c)
	}
}

// connFor returns the connection for channel's slot, creating its PubSub (not yet connected).
func (h *Hub) connFor(channel string) (*hubConn, bool) {
	slot := 0
	if h.rt.Sharded {
		slot = Slot(channel)
	}
	if c := h.conns[slot]; c != nil {
		return c, false
	}
	var ps *redis.PubSub
	if h.rt.Sharded {
		ps = h.rt.Redis.SSubscribe(h.rt.ctx)
	} else {
		ps = h.rt.Redis.Subscribe(h.rt.ctx)
	}
	c := &hubConn{ps: ps, slot: slot}
	h.conns[slot] = c
	return c, true
}

func (h *Hub) subscribe(ctx context.Context, conn *hubConn, channel string) error {
	ctx = context.WithoutCancel(ctx)
	if h.rt.Sharded {
		return conn.ps.SSubscribe(ctx, channel)
	}
	return conn.ps.Subscribe(ctx, channel)
}

func (h *Hub) unsubscribe(conn *hubConn, channel string) error {
	if h.rt.Sharded {
		return conn.ps.SUnsubscribe(h.rt.ctx, channel)
	}
	return conn.ps.Unsubscribe(h.rt.ctx, channel)
}

// receive reads one connection until it is closed.
func (h *Hub) receive(conn *hubConn) {
	defer h.wg.Done()
	backoff := max(conn.backoff, 10*time.Millisecond)
	for {
		msg, err := conn.ps.Receive(h.rt.ctx)
		h.mu.Lock()
		if conn.closed || h.closed {
			h.mu.Unlock()
			return
		}
		var refused redis.Error
		if err != nil && errors.As(err, &refused) {
			// The server refused a subscription: on Redis Cluster, sent to a node that no
			// longer owns the slot (MOVED). Move to a connection to the owner.
			h.rehome(conn, backoff)
			return
		}
		if err != nil {
			again := h.connBroken(conn)
			h.mu.Unlock()
			for _, ch := range again {
				_ = h.subscribe(h.rt.ctx, conn, ch)
			}
			select {
			case <-time.After(backoff):
			case <-h.rt.closed:
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 10 * time.Millisecond
		var resubscribe string
		switch m := msg.(type) {
		case *redis.Message:
			if c := h.chans[m.Channel]; c != nil && c.conn == conn {
				h.deliver(c, m.Payload)
			}
		case *redis.Subscription:
			var dropped bool
			if resubscribe, dropped = h.confirmed(conn, m); dropped {
				h.rehome(conn, 0)
				return
			}
		}
		closeConn := conn.chans == 0
		if closeConn {
			conn.closed = true
			delete(h.conns, conn.slot)
		}
		h.mu.Unlock()
		if resubscribe != "" {
			_ = h.subscribe(h.rt.ctx, conn, resubscribe)
		}
		if closeConn {
			_ = conn.ps.Close()
			return
		}
	}
}

// confirmed handles a (un)subscribe confirmation; it returns a channel to subscribe again, or
// dropped when the server ended a subscription nobody asked it to end (see rehome).
func (h *Hub) confirmed(conn *hubConn, m *redis.Subscription) (resubscribe string, dropped bool) {
	c := h.chans[m.Channel]
	if c == nil || c.conn != conn {
		return "", false
	}
	switch m.Kind {
	case "subscribe", "ssubscribe":
		switch c.state {
		case subscribing:
			c.state = subscribed
			close(c.ready)
			if c.moved {
				// Subscribed anew on another connection (rehome): a message may have been
				// missed, a grant to a hold id no longer in use among them (see orphan.go).
				c.moved = false
				h.sweep(c.orphans, c.name)
			}
			if len(c.waiters) == 0 {
				h.startIdle(c)
			}
		case subscribed:
			// Subscribed again after a reconnect: a message may have been missed, a grant
			// to a hold id no longer in use among them (see orphan.go).
			c.wakeAll()
			h.sweep(c.orphans, c.name)
		}
	case "unsubscribe", "sunsubscribe":
		if c.state != unsubscribing {
			return "", true
		}
		if len(c.waiters) > 0 {
			c.state = subscribing
			return c.name, false
		}
		h.drop(c)
	}
	return "", false
}

// rehome moves the channels of conn, whose subscriptions the server ended or refused (a shard
// channel's slot moved to another master), to a new connection, and closes conn; called with
// h.mu held by conn's receive loop, which returns after it. After pause (a refusal: give the
// new slot map a moment), go-redis, its slot map reloaded, opens the new connection to the
// slot's owner. Channels without waiters are dropped; every waiter is woken to re-check, as a
// message may have been missed meanwhile.
func (h *Hub) rehome(conn *hubConn, pause time.Duration) {
	conn.closed = true
	if h.conns[conn.slot] == conn {
		delete(h.conns, conn.slot)
	}
	var fresh *hubConn
	var channels []string
	for _, c := range h.chans {
		if c.conn != conn {
			continue
		}
		c.wakeAll()
		if c.idle != nil {
			c.idle.Stop()
			c.idle = nil
		}
		if len(c.waiters) == 0 {
			delete(h.chans, c.name)
			continue
		}
		if fresh == nil {
			fresh, _ = h.connFor(c.name)
			fresh.backoff = min(2*pause, time.Second) // a server that keeps refusing is not hammered
			h.wg.Add(1)                               // under h.mu, so that close's Wait cannot miss it
		}
		if c.state == subscribed {
			c.ready = make(chan struct{}) // closed once confirmed anew (Wait waits on it)
		}
		c.moved = true
		c.state = subscribing
		c.conn = fresh
		fresh.chans++
		channels = append(channels, c.name)
	}
	h.mu.Unlock()
	_ = conn.ps.Close()
	if fresh == nil {
		return
	}
	if cc, ok := h.rt.Redis.(*redis.ClusterClient); ok {
		cc.ReloadState(h.rt.ctx)
	}
	go func() {
		if pause > 0 {
			select {
			case <-time.After(pause):
			case <-h.rt.closed:
			}
		}
		for _, ch := range channels {
			_ = h.subscribe(h.rt.ctx, fresh, ch)
		}
		h.receive(fresh)
	}()
}

// connBroken wakes every waiter on a broken connection to re-check. A channel that was being
// unsubscribed is no longer in go-redis's set, so it is not subscribed again on reconnect: it
// is dropped, or, when waiters came back meanwhile, returned to be subscribed afresh.
func (h *Hub) connBroken(conn *hubConn) (resubscribe []string) {
	conn.breaks++
	for _, c := range h.chans {
		if c.conn != conn {
			continue
		}
		c.wakeAll()
		if c.state == unsubscribing {
			if len(c.waiters) > 0 {
				c.state = subscribing
				resubscribe = append(resubscribe, c.name)
			} else {
				h.drop(c)
			}
		}
	}
	return resubscribe
}

func (h *Hub) drop(c *hubChan) {
	delete(h.chans, c.name)
	c.conn.chans--
}

func (h *Hub) startIdle(c *hubChan) {
	if c.idle != nil {
		// The channel's timer, stopped when a waiter came: one per channel, not one per
		// idle period. A run of it that was on its way when stopped finds waiters, or finds
		// the channel idle again and ends its linger early: harmless.
		c.idle.Reset(h.rt.Cfg.Linger)
		return
	}
	c.idle = time.AfterFunc(h.rt.Cfg.Linger, func() {
		h.mu.Lock()
		if h.closed || h.chans[c.name] != c || len(c.waiters) > 0 || c.state != subscribed {
			h.mu.Unlock()
			return
		}
		c.state = unsubscribing
		c.ready = make(chan struct{})
		c.idle = nil
		h.mu.Unlock()
		_ = h.unsubscribe(c.conn, c.name)
	})
}

func (h *Hub) close() {
	h.mu.Lock()
	h.closed = true
	conns := make([]*hubConn, 0, len(h.conns))
	for _, c := range h.conns {
		c.closed = true
		conns = append(conns, c)
	}
	for _, c := range h.chans {
		if c.idle != nil {
			c.idle.Stop()
		}
	}
	h.conns = map[int]*hubConn{}
	h.chans = map[string]*hubChan{}
	h.mu.Unlock()
	for _, c := range conns {
		_ = c.ps.Close()
	}
	h.wg.Wait()
}

// Deliver hands a message to the local waiters of channel as if it had arrived from Redis (a
// script's grant to a waiter of the caller's own Client, which the script returned instead of
// publishing, is told this way). Without waiters on the
// channel it is dropped, as a published message would be.
func (h *Hub) Deliver(channel, payload string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c := h.chans[channel]; c != nil {
		h.deliver(c, payload)
	}
}

// Channels reports how many channels the hub is subscribed to or subscribing (for tests).
func (h *Hub) Channels() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.chans)
}

// deliver hands a message to c's waiters, with h.mu held. A tag no waiter answers to is a
// grant to a hold id this Client may no longer use: see orphan.go.
func (h *Hub) deliver(c *hubChan, payload string) {
	switch payload {
	case "1":
		c.wakeOne()
	case "*":
		c.wakeAll()
	default:
		for tags := payload; tags != ""; {
			tag, rest, _ := strings.Cut(tags, " ")
			found := false
			for _, w := range c.waiters {
				if w.tag == tag {
					w.tagged = true
					w.wake()
					found = true
				}
			}
			if !found {
				h.giveBack(c.orphans, c.name, tag)
			}
			tags = rest
		}
	}
}

func (c *hubChan) wakeOne() {
	for _, w := range c.waiters {
		select {
		case w.C <- struct{}{}:
			w.looked = true
			return
		default:
		}
	}
}

func (c *hubChan) wakeAll() {
	for _, w := range c.waiters {
		w.looked = true
		w.wake()
	}
}

func (w *Waiter) wake() {
	select {
	case w.C <- struct{}{}:
	default:
	}
}

// Waiters reports how many local waiters are registered (for tests).
func (h *Hub) Waiters() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.chans {
		n += len(c.waiters)
	}
	return n
}

// Tagged reports whether a message addressed to the waiter's tag has arrived (a grant), as
// opposed to a wakeup to look again.
func (w *Waiter) Tagged() bool {
	w.hub.mu.Lock()
	defer w.hub.mu.Unlock()
	tagged := w.tagged
	for _, m := range w.group {
		tagged = tagged || m.tagged
	}
	return tagged
}

// TaggedOn reports whether a message addressed to the waiter's tag has arrived on each of
// the channels parts names (by their index in WaitAll's channels), since it registered or its
// tag was last set.
func (w *Waiter) TaggedOn(parts []int) bool {
	w.hub.mu.Lock()
	defer w.hub.mu.Unlock()
	for _, i := range parts {
		m := w
		if i > 0 {
			if i > len(w.group) {
				return false
			}
			m = w.group[i-1]
		}
		if !m.tagged {
			return false
		}
	}
	return true
}

// Looked reports whether a wakeup to look again (not a message addressed to the waiter's
// tag) has come, on any of its channels, since it registered or its tag was last set: a
// waiter that counts its grants (TaggedOn) looks again then, since such a wakeup may share
// one signal of C with a grant.
func (w *Waiter) Looked() bool {
	w.hub.mu.Lock()
	defer w.hub.mu.Unlock()
	looked := w.looked
	for _, m := range w.group {
		looked = looked || m.looked
	}
	return looked
}

// SetTag changes the tag the waiter answers to (a waiter that had to start over under a new
// hold id) and forgets any earlier tagged message and wakeup to look again.
func (w *Waiter) SetTag(tag string) {
	w.hub.mu.Lock()
	defer w.hub.mu.Unlock()
	w.tag, w.tagged, w.looked = tag, false, false
	for _, m := range w.group {
		m.tag, m.tagged, m.looked = tag, false, false
	}
}
