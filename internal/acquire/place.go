package acquire

import (
	"sync"
	"time"

	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/scripts"
)

// place is one queued waiter's heartbeats (see internal/core/heart.go): the Client sends them
// in batches, and each reply comes back here.
type place struct {
	// granted receives a signal when a heartbeat found what the waiter waits for granted to
	// it; dropped when a heartbeat found it no longer queued (its deadline passed: it must
	// join again).
	granted, dropped chan struct{}

	stopBeat func()
	mu       sync.Mutex
	last     time.Time // send time of the last heartbeat that found the waiter still queued
}

// startPlace starts the heartbeats of a queued hold: b's Interval and OnReply are set here.
func (q *Queue) startPlace(hold string, b *core.Beat) *place {
	p := &place{granted: make(chan struct{}, 1), dropped: make(chan struct{}, 1)}
	b.Interval = q.cfg.WaiterTimeout / 3
	b.OnReply = func(reply int64, sentAt time.Time, err error) {
		if err != nil {
			return
		}
		st, err := scripts.DecodeBeat(reply)
		switch {
		case err != nil:
		case st == scripts.BeatQueued:
			p.mu.Lock()
			if sentAt.After(p.last) {
				p.last = sentAt
			}
			p.mu.Unlock()
		case st == scripts.BeatGranted:
			signal(p.granted)
		default:
			signal(p.dropped)
		}
	}
	p.stopBeat = q.rt.StartBeat(b)
	return p
}

// stop stops the heartbeats. A nil place is fine.
func (p *place) stop() {
	if p != nil {
		p.stopBeat()
	}
}

// since returns the send time of the last heartbeat that found the waiter still queued: a
// grant came after it.
func (p *place) since() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
