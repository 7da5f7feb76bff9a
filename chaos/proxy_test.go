package chaos_test

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// proxy is a TCP proxy between Clients and Redis, for faults of the network: it forwards bytes
// both ways, can hold every chunk back for a latency, and can cut every connection at once (the
// commands in flight are lost; their callers see a network error).
type proxy struct {
	ln      net.Listener
	target  string
	latency atomic.Int64              // nanoseconds
	drop    atomic.Bool               // drop the next reply (see DropNextReply)
	dropTo  atomic.Value              // string: drop the reply to the next command that contains it (DropReplyTo)
	dropped atomic.Int64              // replies dropped
	held    atomic.Pointer[heldChunk] // the next chunk to hold back (HoldBack)
	stop    chan struct{}             // closed when the proxy closes: chunks held back go nowhere

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	cuts   int
	wg     sync.WaitGroup
}

// newProxy starts a proxy to target on a free loopback port; it is closed in t.Cleanup.
func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, stop: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the address Clients dial.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

// SetLatency delays every chunk, each way, by d from now on (0: none).
func (p *proxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

// DropNextReply makes the proxy drop the next chunk that Redis sends to any Client and cut
// that connection: the command ran, and its caller sees a network error.
func (p *proxy) DropNextReply() { p.drop.Store(true) }

// DropReplyTo makes the proxy drop the reply to the next chunk a Client sends that contains
// text, and cut that connection: the command ran, and its caller sees a network error. Unlike
// DropNextReply, no reply on another connection (a pub/sub message, a new connection's HELLO)
// takes its place.
func (p *proxy) DropReplyTo(text string) { p.dropTo.Store(text) }

// heldChunk is a chunk to hold back (see HoldBack).
type heldChunk struct {
	text    []byte
	caught  chan struct{}
	release chan struct{}
}

// HoldBack makes the proxy hold back the next chunk a Client sends that contains text, and
// every later chunk of that connection, until release is called: caught is closed once the
// chunk is held. The command has not reached Redis while it is held; the Client waits for its
// reply.
func (p *proxy) HoldBack(text string) (caught <-chan struct{}, release func()) {
	h := &heldChunk{text: []byte(text), caught: make(chan struct{}), release: make(chan struct{})}
	p.held.Store(h)
	var once sync.Once
	return h.caught, func() { once.Do(func() { close(h.release) }) }
}

// Dropped returns how many replies the proxy dropped.
func (p *proxy) Dropped() int { return int(p.dropped.Load()) }

// Cut closes every open connection, both sides.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	p.cuts++
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		if !p.track(client, server) {
			return
		}
		p.wg.Add(2)
		var armed atomic.Bool // this connection's next reply is to be dropped (DropReplyTo)
		go p.pipe(client, server, false, &armed)
		go p.pipe(server, client, true, &armed)
	}
}

// track records a connection pair, or closes it and reports false once the proxy is closed.
func (p *proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies from src to dst, each chunk held back by the latency, until either side fails;
// then it closes both. replies tells the direction from Redis to a Client; armed is shared by
// the two directions of one connection.
func (p *proxy) pipe(src, dst net.Conn, replies bool, armed *atomic.Bool) {
	defer p.wg.Done()
	defer func() {
		src.Close()
		dst.Close()
		p.mu.Lock()
		delete(p.conns, src)
		delete(p.conns, dst)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := time.Duration(p.latency.Load()); d > 0 {
				time.Sleep(d) // the injected latency
			}
			if h := p.held.Load(); !replies && h != nil && bytes.Contains(buf[:n], h.text) && p.held.CompareAndSwap(h, nil) {
				close(h.caught)
				select {
				case <-h.release:
				case <-p.stop:
					return
				}
			}
			if text, _ := p.dropTo.Load().(string); !replies && text != "" &&
				bytes.Contains(buf[:n], []byte(text)) && p.dropTo.CompareAndSwap(text, "") {
				armed.Store(true)
			}
			if replies && (armed.Load() || p.drop.CompareAndSwap(true, false)) {
				p.dropped.Add(1)
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF, reset, or closed by Cut: the other side goes too
		}
	}
}

func (p *proxy) close() {
	p.mu.Lock()
	if !p.closed {
		close(p.stop)
	}
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}
