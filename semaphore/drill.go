package semaphore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/core"
)

// The drill aqs.Verify runs on the counting semaphore: drillPermits permits, drillCallers
// callers alternately on both Clients, each holding a permit for drillHold. It checks that no
// more than drillPermits held at once, that every caller got one, and that all came back. The
// scratch semaphore expires a minute after the drill, should Verify fail to delete it.
func init() {
	core.RegisterDrill(core.Drill{Primitive: "semaphore", Run: drill})
}

const (
	drillPermits = 2
	drillCallers = 6
	// drillHold is how long each caller keeps its permit: long enough that callers overlap
	// and queue behind each other.
	drillHold = 5 * time.Millisecond
)

func drill(ctx context.Context, a, b any, name string) (string, error) {
	clients := [2]*aqs.Client{a.(*aqs.Client), b.(*aqs.Client)}
	var sems [2]*Semaphore
	for i, c := range clients {
		s, err := New(c, name, WithSize(drillPermits), WithExpiry(time.Minute))
		if err != nil {
			return "", err
		}
		sems[i] = s
	}
	var inUse, most atomic.Int32
	errs := make(chan error, drillCallers)
	var wg sync.WaitGroup
	for i := range drillCallers {
		s := sems[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Acquire(ctx, 1); err != nil {
				errs <- fmt.Errorf("caller %d of %d: %w", i+1, drillCallers, err)
				return
			}
			n := inUse.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			t := time.NewTimer(drillHold)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
			inUse.Add(-1)
			errs <- s.Release(ctx, 1)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return "", err
		}
	}
	if m := most.Load(); m > drillPermits {
		return "", fmt.Errorf("%d callers held permits at once, of %d permits", m, drillPermits)
	}
	avail, err := sems[1].Available(ctx)
	if err != nil {
		return "", err
	}
	if avail != drillPermits {
		return "", fmt.Errorf("%d of %d permits available after every caller released", avail, drillPermits)
	}
	return fmt.Sprintf("%d callers of 2 Clients shared %d permits, at most %d at once, and gave them all back",
		drillCallers, drillPermits, most.Load()), nil
}
