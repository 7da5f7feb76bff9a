package core

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/internal/scripts"
)

// Heartbeats.
//
// A waiter in a queue in Redis (the fair lock's) must show that it is alive, or a waiter
// whose process died would stall everyone behind it. One goroutine per Client sends the
// heartbeats of all its waiters: it sleeps until the earliest beat is due, then sends every
// beat due within the next half interval in one pipeline (go-redis splits it by node on
// Redis Cluster), so a Client with many waiters costs one round trip per master per round,
// not one per waiter. The reply of each beat goes back to its waiter (still queued, handed the
// lock, dropped). Liveness deadlines are computed by the scripts from server time.

// Beat is one waiter's heartbeat.
type Beat struct {
	Keys     []string
	Script   *scripts.Script
	Args     []any
	Interval time.Duration
	// OnReply receives each reply with the time its pipeline was sent; err is a Redis error.
	OnReply func(reply int64, sentAt time.Time, err error)

	next time.Time
}

type heart struct {
	mu    sync.Mutex
	beats map[*Beat]struct{}
	next  time.Time // when the heartbeat goroutine wakes next (under mu)
	wake  chan struct{}
	done  chan struct{}
}

func newHeart() *heart {
	return &heart{beats: map[*Beat]struct{}{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// StartBeat registers a heartbeat, first due one interval from now, and returns the function
// that stops it.
func (rt *Runtime) StartBeat(b *Beat) (stop func()) {
	h := rt.heart
	h.mu.Lock()
	b.next = time.Now().Add(b.Interval)
	h.beats[b] = struct{}{}
	// Wake the goroutine only when this beat is due before it would wake anyway: on a busy
	// lock, waiters come and go with every acquisition, all with the same interval.
	early := b.next.Before(h.next)
	if early {
		h.next = b.next
	}
	h.mu.Unlock()
	if early {
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
	return func() {
		h.mu.Lock()
		delete(h.beats, b)
		h.mu.Unlock()
	}
}

func (rt *Runtime) beat() {
	h := rt.heart
	defer close(h.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		h.mu.Lock()
		var due []*Beat
		now := time.Now()
		next := now.Add(time.Hour)
		for b := range h.beats {
			if !b.next.After(now.Add(b.Interval / 2)) {
				due = append(due, b)
				b.next = now.Add(b.Interval)
			}
			if b.next.Before(next) {
				next = b.next
			}
		}
		h.next = next
		h.mu.Unlock()
		if len(due) > 0 {
			rt.sendBeats(due)
		}
		timer.Reset(time.Until(next))
		select {
		case <-rt.closed:
			return
		case <-h.wake:
			if !timer.Stop() {
				<-timer.C
			}
		case <-timer.C:
		}
	}
}

func (rt *Runtime) sendBeats(due []*Beat) {
	ctx, cancel := context.WithTimeout(rt.ctx, due[0].Interval)
	defer cancel()
	queued := make([]*scripts.Call, len(due))
	sentAt := time.Now()
	_, err := rt.Redis.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, b := range due {
			queued[i] = b.Script.Queue(ctx, p, b.Keys, b.Args...)
		}
		return nil
	})
	rt.Pipe.reroute(err)
	for i, b := range due {
		r, err := queued[i].Retry(ctx, rt.Redis).Int64()
		b.OnReply(r, sentAt, err)
	}
}
