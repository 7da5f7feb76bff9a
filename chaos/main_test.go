// Package chaos_test holds the fault tests of aqs: several OS processes (or goroutines behind a
// TCP proxy) work on each primitive while the test kills holders and waiters with SIGKILL,
// stalls a holder past its lease with SIGSTOP, restarts Redis with its data lost, kills the
// pub/sub connections, delays and cuts the connections to Redis, and flushes the script cache.
// Every test checks mutual exclusion with a witness that does not ask Redis (witness_test.go),
// or, for the faults that make no call fail, the linearizability of the histories that
// internal/testkit/lintest records (lin_test.go), and logs one summary line with its figures.
//
// go test runs the short version (about a minute on two cores); AQS_CHAOS=full (make chaos)
// runs more rounds and longer loads.
package chaos_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// TestMain runs the tests, or, in a child process, the actor's role (actor_test.go); a child
// prints no tally, since it counted nothing.
func TestMain(m *testing.M) {
	code := redistest.Main(m)
	tally.Lock()
	if tally.runs > 0 {
		fmt.Printf("chaos: %d runs with a witness or a fenced storage: overlaps %d; late writes %d, accepted %d\n",
			tally.runs, tally.overlaps, tally.lateWrites, tally.lateAccepted)
	}
	tally.Unlock()
	os.Exit(code)
}

// forEachKind runs f for each kind in a subtest of its own, all at once. The subtests are
// started from goroutines rather than marked parallel, so that -parallel (GOMAXPROCS by
// default: 2 on a small machine) does not run them two by two: most of their time is spent
// waiting for leases and timeouts to run out, not computing.
func forEachKind(t *testing.T, kinds []string, f func(t *testing.T, kind string)) {
	var wg sync.WaitGroup
	for _, kind := range kinds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(kind, func(t *testing.T) { f(t, kind) })
		}()
	}
	wg.Wait()
}

// tally adds up the figures that must be 0 across every test of the run.
var tally struct {
	sync.Mutex
	runs, overlaps, lateWrites, lateAccepted int
}

// count adds one run's figures to the tally.
func count(overlaps, lateWrites, lateAccepted int) {
	tally.Lock()
	defer tally.Unlock()
	tally.runs++
	tally.overlaps += overlaps
	tally.lateWrites += lateWrites
	tally.lateAccepted += lateAccepted
}

// full reports whether the full version runs (AQS_CHAOS=full).
func full() bool { return os.Getenv("AQS_CHAOS") == "full" }

// scale returns short in the short version and long in the full one.
func scale[T any](short, long T) T {
	if full() {
		return long
	}
	return short
}
