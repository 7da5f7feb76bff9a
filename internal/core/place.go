package core

import (
	"sync"
	"time"
)

// Place is one waiter's place in a wait queue kept in Redis (the fair lock's, a semaphore's),
// kept alive by its Client's batched heartbeats. The heartbeat script replies 1 when the
// waiter is still queued, 2 when what it waits for was granted to it (the fallback for a lost
// grant message), and anything else when it is no longer queued.
type Place struct {
	Hold string
	// Granted receives a signal when a heartbeat found the waiter granted; Dropped when a
	// heartbeat found it no longer queued (its deadline passed: it must join again).
	Granted, Dropped chan struct{}

	stopBeat func()
	mu       sync.Mutex
	since    time.Time // send time of the last heartbeat that found it still queued
}

// Queue starts the heartbeats of a waiter's place: b's OnReply is set here.
func (rt *Runtime) Queue(hold string, b *Beat) *Place {
	p := &Place{Hold: hold, Granted: make(chan struct{}, 1), Dropped: make(chan struct{}, 1)}
	b.OnReply = func(r int64, sentAt time.Time, err error) {
		switch {
		case err != nil:
		case r == 1:
			p.mu.Lock()
			if sentAt.After(p.since) {
				p.since = sentAt
			}
			p.mu.Unlock()
		case r == 2:
			signal(p.Granted)
		default:
			signal(p.Dropped)
		}
	}
	p.stopBeat = rt.StartBeat(b)
	return p
}

// Stop stops the place's heartbeats. A nil Place is fine.
func (p *Place) Stop() {
	if p != nil {
		p.stopBeat()
	}
}

// Since returns the send time of the last heartbeat that found the waiter still queued: a
// grant came after it.
func (p *Place) Since() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.since
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
