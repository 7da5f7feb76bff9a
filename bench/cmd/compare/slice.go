package main

import (
	"context"
	"fmt"
	"math/rand/v2"
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
	// Names, when above 0, makes a lock's goroutines take at every acquisition one of Names
	// locks, Key:0 … Key:Names-1, at random (the many-names scenarios), and hold it for Sleep
	// nanoseconds of sleep (a critical section that waits on I/O) instead of the busy work.
	Names int   `json:"names,omitempty"`
	Sleep int64 `json:"sleep,omitempty"`
	// Cart, with Names, makes a lock's goroutines take at every acquisition a cart of those
	// names (carts.go), held for the busy work as a lock on one name is.
	Cart bool `json:"cart,omitempty"`
	// IO is how many round trips to Redis the critical section makes after its work (a GET
	// each, on the application's own client): a critical section that reads what the lock
	// guards.
	IO int `json:"io,omitempty"`
}

// sliceResult is what one process's goroutines did in one slice.
type sliceResult struct {
	Ops      int64   `json:"ops"`             // acquisitions or operations completed before stop
	Counts   []int64 `json:"counts"`          // the same, per goroutine
	Waits    []int64 `json:"waits"`           // ns from a Lock call to the acquisition, completed waits
	Cut      []int64 `json:"cut"`             // ns, waits cut off at stop
	Repeats  int64   `json:"repeats"`         // acquisitions before stop by the goroutine that held it last
	Failures int64   `json:"failures"`        // Lock calls that failed before stop, and failed releases
	Cmds     int64   `json:"cmds,omitempty"`  // commands of the row's counted client (impl.trips) in the slice
	Trips    int64   `json:"trips,omitempty"` // the round trips that carried them
	CPU      int64   `json:"cpu"`             // ns of CPU this process spent over the window (cpu.go)
	Wakes    int64   `json:"wakes"`           // this process's wake-ups over the window
	FirstErr string  `json:"first_err,omitempty"`
	server   *usage  // the redis-server's usage over the window, when measured (cpu.go)
}

// merge adds another process's result of the same slice.
func (r *sliceResult) merge(o sliceResult) {
	r.Ops += o.Ops
	r.Counts = append(r.Counts, o.Counts...)
	r.Waits = append(r.Waits, o.Waits...)
	r.Cut = append(r.Cut, o.Cut...)
	r.Repeats += o.Repeats
	r.Failures += o.Failures
	r.Cmds += o.Cmds
	r.Trips += o.Trips
	r.CPU += o.CPU
	r.Wakes += o.Wakes
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
func runSlice(p *procImpls, im *impl, sp sliceSpec, wit *witness, work time.Duration) sliceResult {
	start, stop := time.Unix(0, sp.Start), time.Unix(0, sp.Stop)
	workers := make([]worker, sp.Goroutines)
	var acquire []acquireFunc
	hold := func() { spin(work) }
	if sp.IO > 0 {
		data := sp.Key + ":data"
		hold = func() {
			spin(work)
			for range sp.IO {
				_ = p.app.Get(context.Background(), data).Err()
			}
		}
	}
	if sp.Names > 0 && !sp.Cart {
		hold = func() { time.Sleep(time.Duration(sp.Sleep)) }
		if sp.Sleep <= 0 {
			hold = func() {}
		}
	}
	namesWit := wit
	if sp.Names > 0 {
		wit = nil // many holders at once, of different names: the witness is for one lock
	}
	if im.locks != nil || im.carts != nil {
		var err error
		switch {
		case sp.Cart:
			// A holder of a cart reports its names to the witness's marks.
			acquire, err = cartLocks(im, sp.Key, sp.Names, sp.Goroutines, namesWit)
		case sp.Names > 0:
			acquire, err = manyLocks(im, sp.Key, sp.Names, sp.Goroutines)
		default:
			acquire, err = im.locks(sp.Key, sp.Goroutines)
		}
		if err != nil {
			return sliceResult{Failures: 1, FirstErr: err.Error()}
		}
	}
	time.Sleep(time.Until(start))
	var cmds0, trips0 int64
	if im.trips != nil {
		cmds0, trips0 = im.trips.cmds.Load(), im.trips.trips.Load()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	used0 := selfUsage()
	used := make(chan usage, 1)
	timer := time.AfterFunc(time.Until(stop), func() {
		used <- selfUsage()
		cancel()
	})
	defer timer.Stop()

	var wg sync.WaitGroup
	for g := range workers {
		w := &workers[g]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if im.op != nil {
				runOps(im, sp.Key+":"+strconv.FormatInt(sp.IDBase+int64(g), 10), stop, hold, w)
			} else {
				runLock(ctx, acquire[g], sp.IDBase+int64(g), stop, wit, hold, w)
			}
		}()
	}
	wg.Wait()
	used1 := <-used

	res := sliceResult{Counts: make([]int64, len(workers)), CPU: used1.cpu - used0.cpu, Wakes: used1.wakes - used0.wakes}
	if im.trips != nil {
		res.Cmds, res.Trips = im.trips.cmds.Load()-cmds0, im.trips.trips.Load()-trips0
	}
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

// runOps is a floor row's goroutine: im's op on its own key, as fast as it can, until stop.
func runOps(im *impl, key string, stop time.Time, hold func(), w *worker) {
	per := max(im.per, 1)
	for time.Now().Before(stop) {
		if err := im.op(key, hold); err != nil {
			w.fail(err)
			continue
		}
		if time.Now().Before(stop) {
			w.count += per
		}
	}
}

// manyLocks returns the acquire functions of n goroutines, each of which takes, at every
// call, one of names locks named key:0 … key:names-1, chosen at random.
func manyLocks(im *impl, key string, names, n int) ([]acquireFunc, error) {
	per := make([][]acquireFunc, names) // [name][goroutine]
	for j := range per {
		var err error
		if per[j], err = im.locks(key+":"+strconv.Itoa(j), n); err != nil {
			return nil, err
		}
	}
	out := make([]acquireFunc, n)
	for g := range out {
		rng := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano()))) // goroutine g's own
		out[g] = func(ctx context.Context) (func() error, error) { return per[rng.IntN(names)][g](ctx) }
	}
	return out, nil
}

// runLock is a lock's goroutine: Lock, critical section, Unlock, until stop. A Lock call that
// fails before stop (redsync gives up after its tries) is counted and called again, and the
// wait runs on: it is what a caller that insists on the lock sees.
//
// The witness (nil in the many-names scenarios) sees every critical section; hold is it.
func runLock(ctx context.Context, acquire acquireFunc, id int64, stop time.Time, wit *witness, hold func(), w *worker) {
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
				// Its length at stop, not at the return: how long a library takes to notice
				// the cancellation is no part of the wait.
				w.cut = append(w.cut, int64(min(time.Since(t0), stop.Sub(t0))))
				return
			}
			w.fail(err)
		}
		t1 := time.Now()
		w.waits = append(w.waits, int64(t1.Sub(t0)))

		// The critical section.
		before := t1.Before(stop)
		if wit != nil {
			if !wit.inside.CompareAndSwap(0, 1) {
				wit.overlaps.Add(1)
			}
			if wit.last.Swap(id) == id && before {
				// Before stop every goroutine is still looping (none leaves before stop), so
				// the others were waiting or about to, and this one took the lock again.
				w.repeats++
			}
		}
		if before {
			w.count++
		}
		hold()
		if wit != nil {
			wit.inside.Store(0)
		}

		if err := release(); err != nil {
			w.fail(fmt.Errorf("release: %w", err))
		}
	}
}
