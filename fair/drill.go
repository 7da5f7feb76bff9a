package fair

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/layout"
)

// The drill aqs.Verify runs on the fair lock: a holder on one Client, drillWaiters waiters
// queued one after another alternately on both Clients, then the lock passed down the queue.
// It checks that no two ever held it at once and that they got it in the order they queued.
func init() {
	core.RegisterDrill(core.Drill{Primitive: "fair lock", Run: drill})
}

const drillWaiters = 4

func drill(ctx context.Context, a, b any, name string) (string, error) {
	clients := [2]*aqs.Client{a.(*aqs.Client), b.(*aqs.Client)}
	var locks [2]*Lock
	for i, c := range clients {
		l, err := New(c, name)
		if err != nil {
			return "", err
		}
		locks[i] = l
	}
	held, err := locks[0].Lock(ctx)
	if err != nil {
		return "", fmt.Errorf("the first Lock on a free name: %w", err)
	}
	var inside atomic.Int32 // holders at this moment, as the drill sees them
	var overlap atomic.Bool
	inside.Store(1)
	var mu sync.Mutex
	var order []int
	errs := make(chan error, drillWaiters)
	var wg sync.WaitGroup
	rdb := core.RuntimeOf(clients[0]).Redis
	deadlines := locks[0].Key() + layout.DeadlineSuffix
	for i := range drillWaiters {
		l := locks[(i+1)%2]
		wg.Add(1)
		ended := make(chan struct{})
		go func() {
			defer wg.Done()
			defer close(ended)
			h, err := l.Lock(ctx)
			if err != nil {
				errs <- fmt.Errorf("waiter %d of %d: %w", i+1, drillWaiters, err)
				return
			}
			if inside.Add(1) != 1 {
				overlap.Store(true)
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			inside.Add(-1)
			errs <- l.Unlock(h)
		}()
		// The next waiter joins once this one is in the queue, so that the order is known.
		if err := untilQueued(ctx, ended, rdb, deadlines, int64(i+1)); err != nil {
			inside.Add(-1)
			_ = locks[0].Unlock(held)
			wg.Wait()
			close(errs)
			for werr := range errs {
				if werr != nil {
					return "", werr // the waiter's own failure says more
				}
			}
			return "", fmt.Errorf("waiter %d never queued: %w", i+1, err)
		}
	}
	inside.Add(-1)
	if err := locks[0].Unlock(held); err != nil {
		wg.Wait()
		return "", fmt.Errorf("Unlock: %w", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return "", err
		}
	}
	switch {
	case overlap.Load():
		return "", fmt.Errorf("two holders at once: mutual exclusion broken")
	case len(order) != drillWaiters:
		return "", fmt.Errorf("%d of %d waiters got the lock", len(order), drillWaiters)
	}
	for i, w := range order {
		if w != i {
			return "", fmt.Errorf("waiters got the lock in the order %v, not the order they queued in: FIFO broken", order)
		}
	}
	return fmt.Sprintf("%d waiters of 2 Clients served one at a time, in the order they queued", drillWaiters), nil
}

// untilQueued waits until the queue's deadline zset has n members, or the waiter ended.
func untilQueued(ctx context.Context, ended <-chan struct{}, rdb interface {
	ZCard(context.Context, string) *redis.IntCmd
}, key string, n int64) error {
	for {
		m, err := rdb.ZCard(ctx, key).Result()
		if err != nil {
			return err
		}
		if m >= n {
			return nil
		}
		t := time.NewTimer(time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-ended:
			t.Stop()
			return fmt.Errorf("the waiter ended before it queued")
		case <-t.C:
		}
	}
}
