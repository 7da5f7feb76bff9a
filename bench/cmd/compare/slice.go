package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// One slice: n goroutines of one process run one implementation from start to stop.
//
// A lock's goroutines loop: Lock, the critical section (witness check, work), Unlock. At stop
// the context of every pending Lock call is cancelled: a polling library may otherwise sleep
// seconds before it notices, and the next implementation would run on a machine still busy
// with this one. A wait cut off that way is recorded at its length so far, a lower bound (the
// table marks a figure that is such a wait with ≥): a goroutine starved through a whole slice
// must show, not vanish.
//
// Counted are the acquisitions (or a floor row's operations) completed before stop, over the
// slice's length, so a slow drain after stop costs nothing and counts nothing.

// sliceSpec says what one process runs in one slice.
type sliceSpec struct {
	Impl       int    `json:"impl"`
	Key        string `json:"key"`
	Goroutines int    `json:"goroutines"`
	IDBase     int64  `json:"id_base"` // goroutine g is IDBase+g in the witness
	Start      int64  `json:"start"`   // Unix nanoseconds
	Stop       int64  `json:"stop"`
}

// sliceResult is what one process's goroutines did in one slice.
type sliceResult struct {
	Ops      int64   `json:"ops"`      // acquisitions or operations completed before stop
	Counts   []int64 `json:"counts"`   // the same, per goroutine
	Waits    []int64 `json:"waits"`    // ns from a Lock call to the acquisition, completed waits
	Cut      []int64 `json:"cut"`      // ns, waits cut off at stop
	Repeats  int64   `json:"repeats"`  // acquisitions before stop by the goroutine that held it last
	Failures int64   `json:"failures"` // Lock calls that failed before stop, and failed releases
	FirstErr string  `json:"first_err,omitempty"`
}

// merge adds another process's result of the same slice.
func (r *sliceResult) merge(o sliceResult) {
	r.Ops += o.Ops
	r.Counts = append(r.Counts, o.Counts...)
	r.Waits = append(r.Waits, o.Waits...)
	r.Cut = append(r.Cut, o.Cut...)
	r.Repeats += o.Repeats
	r.Failures += o.Failures
	if r.FirstErr == "" {
		r.FirstErr = o.FirstErr
	}
}

// worker is one goroutine's share of a slice.
type worker struct {
	count, repeats, failures int64
	waits, cut               []int64
	firstErr                 error
}

func (w *worker) fail(err error) {
	w.failures++
	if w.firstErr == nil {
		w.firstErr = err
	}
}

// runSlice runs one slice in this process; it returns once every goroutine has stopped.
func runSlice(im *impl, sp sliceSpec, wit *witness, work time.Duration) sliceResult {
	start, stop := time.Unix(0, sp.Start), time.Unix(0, sp.Stop)
	workers := make([]worker, sp.Goroutines)
	var acquire []acquireFunc
	if im.locks != nil {
		var err error
		if acquire, err = im.locks(sp.Key, sp.Goroutines); err != nil {
			return sliceResult{Failures: 1, FirstErr: err.Error()}
		}
	}
	time.Sleep(time.Until(start))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	timer := time.AfterFunc(time.Until(stop), cancel)
	defer timer.Stop()

	var wg sync.WaitGroup
	for g := range workers {
		w := &workers[g]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if im.op != nil {
				runOps(im.op, sp.Key+":"+strconv.FormatInt(sp.IDBase+int64(g), 10), stop, w)
			} else {
				runLock(ctx, acquire[g], sp.IDBase+int64(g), stop, wit, work, w)
			}
		}()
	}
	wg.Wait()

	res := sliceResult{Counts: make([]int64, len(workers))}
	for g, w := range workers {
		res.Ops += w.count
		res.Counts[g] = w.count
		res.Waits = append(res.Waits, w.waits...)
		res.Cut = append(res.Cut, w.cut...)
		res.Repeats += w.repeats
		res.Failures += w.failures
		if w.firstErr != nil && res.FirstErr == "" {
			res.FirstErr = w.firstErr.Error()
		}
	}
	return res
}

// runOps is a floor row's goroutine: op on its own key, as fast as it can, until stop.
func runOps(op func(string) error, key string, stop time.Time, w *worker) {
	for time.Now().Before(stop) {
		if err := op(key); err != nil {
			w.fail(err)
			continue
		}
		if time.Now().Before(stop) {
			w.count++
		}
	}
}

// runLock is a lock's goroutine: Lock, critical section, Unlock, until stop. A Lock call that
// fails before stop (redsync gives up after its tries) is counted and called again, and the
// wait runs on: it is what a caller that insists on the lock sees.
func runLock(ctx context.Context, acquire acquireFunc, id int64, stop time.Time, wit *witness, work time.Duration, w *worker) {
	for time.Now().Before(stop) {
		t0 := time.Now()
		var release func() error
		for {
			r, err := acquire(ctx)
			if err == nil {
				release = r
				break
			}
			if ctx.Err() != nil {
				w.cut = append(w.cut, int64(time.Since(t0)))
				return
			}
			w.fail(err)
		}
		t1 := time.Now()
		w.waits = append(w.waits, int64(t1.Sub(t0)))

		// The critical section.
		if !wit.inside.CompareAndSwap(0, 1) {
			wit.overlaps.Add(1)
		}
		before := t1.Before(stop)
		if wit.last.Swap(id) == id && before {
			// Before stop every goroutine is still looping (none leaves before stop), so
			// the others were waiting or about to, and this one took the lock again.
			w.repeats++
		}
		if before {
			w.count++
		}
		spin(work)
		wit.inside.Store(0)

		if err := release(); err != nil {
			w.fail(fmt.Errorf("release: %w", err))
		}
	}
}
