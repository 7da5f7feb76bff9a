package redistest

import (
	"io"
	"net"
	"sync"
	"time"
)

// linkProxy stands between a replica and its master (see WithReplicationDelay): what the
// replica sends goes through at once, what the master sends is held for delay, as on a slow
// network. cut drops every connection and everything still held, as the loss of the master's
// host would: data in flight never arrives.
type linkProxy struct {
	l      net.Listener
	target string
	delay  time.Duration

	mu    sync.Mutex
	conns []net.Conn
	isCut bool // after cut, new connections are refused
	wg    sync.WaitGroup
}

// chunk is one read from the master, with the time it may be passed on.
type chunk struct {
	data []byte
	due  time.Time
}

func newLinkProxy(target string, delay time.Duration) (*linkProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &linkProxy{l: l, target: target, delay: delay}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is where the replica connects.
func (p *linkProxy) Addr() string { return p.l.Addr().String() }

func (p *linkProxy) accept() {
	defer p.wg.Done()
	for {
		down, err := p.l.Accept()
		if err != nil {
			return // closed
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			down.Close()
			continue
		}
		p.mu.Lock()
		if p.isCut {
			p.mu.Unlock()
			down.Close()
			up.Close()
			continue
		}
		p.conns = append(p.conns, down, up)
		p.wg.Add(3)
		p.mu.Unlock()
		held := make(chan chunk, 1<<14)
		go func() { // replica to master: at once
			defer p.wg.Done()
			_, _ = io.Copy(up, down)
			up.Close()
		}()
		go func() { // master to proxy: stamp each read with the time it may go on
			defer p.wg.Done()
			defer close(held)
			for {
				buf := make([]byte, 32<<10)
				n, err := up.Read(buf)
				if n > 0 {
					held <- chunk{data: buf[:n], due: time.Now().Add(p.delay)}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() { // proxy to replica: each chunk once its delay has passed
			defer p.wg.Done()
			defer down.Close()
			timer := time.NewTimer(time.Hour)
			defer timer.Stop()
			broken := false
			for c := range held { // drained to the end, so that the reader never blocks
				if broken {
					continue
				}
				if wait := time.Until(c.due); wait > 0 {
					// The delay is what this proxy simulates, not a stand-in for a condition.
					timer.Reset(wait)
					<-timer.C
				}
				if _, err := down.Write(c.data); err != nil {
					broken = true
					up.Close() // the replica is gone: stop reading the master
				}
			}
		}()
	}
}

// cut closes every connection at once, dropping what is held, and refuses new ones.
func (p *linkProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isCut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// close cuts and stops the proxy, and returns once its goroutines have ended.
func (p *linkProxy) close() {
	p.cut()
	p.l.Close()
	p.wg.Wait()
}
