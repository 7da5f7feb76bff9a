package failovertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/redistest"
	"github.com/redaqs/aqs/reentrant"
)

// Acquisitions lost at a failover.
//
// A run starts a Sentinel group whose replica receives the replication stream
// replicationDelay late (a replica in another zone), and a Client on it, with or without the
// replica-sync policy. Workers take and release reentrant and fair locks from small pools of
// names, each hold lasting a few milliseconds. While some are held, the master's host is lost
// (SIGKILL, and the replication data in flight dropped: redistest.KillMaster), and the
// sentinels promote the replica. A hold that spans the kill is kept, its holder still
// believing it holds (its held context not done), until the run ends.
//
// After the promotion, challengers try every name with TryLock through a second Client. A
// challenger that gets a lock whose earlier holder still believes it holds makes two holders:
// that earlier acquisition was lost at the failover. The challengers' Client runs without the
// policy: the promoted replica has no replica of its own to acknowledge anything, and what is
// measured is whether the holds reported before the kill are still in Redis.
//
// Without the policy an acquisition is reported as soon as the master has it, so holds taken
// less than replicationDelay before the kill are lost. With it, an acquisition is reported
// only once the replica acknowledged it: none is lost. The test asserts the latter, and that
// the locks never had two holders before the kill; it logs both figures.
//
// AQS_FAILOVER_RUNS=n repeats each mode n times (default 1) and logs the totals:
//
//	AQS_FAILOVER_RUNS=10 go test -race -count=1 -run TestFailover -v -timeout 30m ./internal/failovertest/

const (
	replicationDelay = 30 * time.Millisecond
	poolSize         = 16 // lock names per kind: more than workers, so that many are free at any time
	workersPerKind   = 6
	// minHeldAtKill is how many holds of each kind the run waits for before killing the
	// master, so that the kill always lands on held locks.
	minHeldAtKill = 2
	// minAcquired is how many acquisitions the workers make before the kill.
	minAcquired  = 300
	challengeFor = time.Second
)

func TestFailoverLosesNoAcquisitionWithReplicaSync(t *testing.T) {
	runs := 1
	if s := os.Getenv("AQS_FAILOVER_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "AQS_FAILOVER_RUNS")
		require.Positive(t, n, "AQS_FAILOVER_RUNS")
		runs = n
	}
	var totals [2]tally
	for i, mode := range []struct {
		name string
		opts []aqs.Option
	}{
		{"policy off", nil},
		{"policy on", []aqs.Option{aqs.WithReplicaSync(1, time.Second)}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			for run := range runs {
				t.Run(strconv.Itoa(run), func(t *testing.T) {
					got := failoverRun(t, mode.opts)
					t.Logf("%s: %s", mode.name, got)
					totals[i].add(got)
					assert.Zero(t, got.overlapsBefore, "two holders before the kill")
					assert.Positive(t, got.heldAtKill, "no hold spanned the kill")
					if len(mode.opts) > 0 {
						assert.Zero(t, got.lost, "acquisitions lost at the failover with the policy on")
					}
				})
			}
		})
	}
	t.Cleanup(func() {
		t.Logf("policy off, %d runs: %s", runs, totals[0])
		t.Logf("policy on,  %d runs: %s", runs, totals[1])
	})
}

// tally is what one run (or several) counted.
type tally struct {
	acquired       int           // acquisitions reported to the workers before the kill
	heldAtKill     int           // holds that spanned the kill
	lost           int           // of those, taken by a challenger while their holder still believed
	overlapsBefore int           // two holders before the kill: a plain bug
	syncErrors     int           // acquisitions refused for too few acknowledgements (policy on)
	acquiring      time.Duration // the acquisitions' time before the kill, summed
	failover       time.Duration // summed over runs
	runs           int
}

func (a *tally) add(b tally) {
	a.acquired += b.acquired
	a.heldAtKill += b.heldAtKill
	a.lost += b.lost
	a.overlapsBefore += b.overlapsBefore
	a.syncErrors += b.syncErrors
	a.acquiring += b.acquiring
	a.failover += b.failover
	a.runs += b.runs
}

func (a tally) String() string {
	return fmt.Sprintf("%d acquisitions before the kill (%v each on average), %d held across it, "+
		"%d of those lost at the failover (%d refused for want of acknowledgement; a failover took %v on average)",
		a.acquired, (a.acquiring / time.Duration(max(a.acquired, 1))).Round(100*time.Microsecond),
		a.heldAtKill, a.lost, a.syncErrors, (a.failover / time.Duration(max(a.runs, 1))).Round(time.Millisecond))
}

// belief is one hold as its holder sees it.
type belief struct {
	held   context.Context
	frozen bool // spanned the kill: kept until the run ends
	lost   bool // counted already
}

// board records who believes it holds which lock.
type board struct {
	mu      sync.Mutex
	holders map[string][]*belief
	killed  bool
	t       tally
}

// took records an acquisition of name, which took d, and counts the believers it overlaps.
func (b *board) took(name string, held context.Context, d time.Duration) *belief {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, o := range b.holders[name] {
		if o.held.Err() != nil || o.lost {
			continue // its holder knows it lost it, or it was counted
		}
		if b.killed {
			o.lost = true
			b.t.lost++
		} else {
			b.t.overlapsBefore++
		}
	}
	me := &belief{held: held}
	if !b.killed {
		b.t.acquired++
		b.t.acquiring += d
	}
	b.holders[name] = append(b.holders[name], me)
	return me
}

// release ends a belief; it reports whether the hold spanned the kill.
func (b *board) release(name string, me *belief) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.killed && !me.frozen {
		me.frozen = true
		b.t.heldAtKill++
		return true
	}
	hs := b.holders[name]
	for i, o := range hs {
		if o == me {
			b.holders[name] = append(hs[:i], hs[i+1:]...)
			break
		}
	}
	return false
}

// heldNow counts the current holds of names with the given prefix.
func (b *board) heldNow(prefix string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for name, hs := range b.holders {
		if len(name) >= len(prefix) && name[:len(prefix)] == prefix {
			n += len(hs)
		}
	}
	return n
}

// locker is one kind of lock, by name.
type locker struct {
	prefix  string
	tryLock func(ctx context.Context, name string, opts ...aqs.TryLockOption) (context.Context, bool, error)
	unlock  func(held context.Context, name string) error
}

func lockers(t *testing.T, c *aqs.Client, base string) []locker {
	re := map[string]*reentrant.Lock{}
	fl := map[string]*fair.Lock{}
	for i := range poolSize {
		n := base + "-r" + strconv.Itoa(i)
		l, err := reentrant.New(c, n)
		require.NoError(t, err)
		re[n] = l
		n = base + "-f" + strconv.Itoa(i)
		f, err := fair.New(c, n)
		require.NoError(t, err)
		fl[n] = f
	}
	return []locker{
		{prefix: base + "-r",
			tryLock: func(ctx context.Context, n string, o ...aqs.TryLockOption) (context.Context, bool, error) {
				return re[n].TryLock(ctx, o...)
			},
			unlock: func(h context.Context, n string) error { return re[n].Unlock(h) }},
		{prefix: base + "-f",
			tryLock: func(ctx context.Context, n string, o ...aqs.TryLockOption) (context.Context, bool, error) {
				return fl[n].TryLock(ctx, o...)
			},
			unlock: func(h context.Context, n string) error { return fl[n].Unlock(h) }},
	}
}

func failoverRun(t *testing.T, opts []aqs.Option) tally {
	g := redistest.NewSentinel(t, redistest.WithReplicationDelay(replicationDelay))
	fo := g.FailoverOptions()
	fo.DialTimeout = 200 * time.Millisecond // the dead master's address fails fast
	rdb := newFailoverClient(t, fo)
	c := newClient(t, rdb, opts...)
	base := redistest.Name(t)
	kinds := lockers(t, c, base)
	b := &board{holders: map[string][]*belief{}}
	end := make(chan struct{})
	var stop atomic.Bool
	var syncErrors atomic.Int64

	var wg sync.WaitGroup
	for _, k := range kinds {
		for range workersPerKind {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					name := k.prefix + strconv.Itoa(rand.IntN(poolSize))
					start := time.Now()
					held, ok, err := k.tryLock(context.Background(), name, aqs.WithWait(200*time.Millisecond))
					if err != nil {
						if errorsIsSync(err) {
							syncErrors.Add(1)
						}
						continue // the master is gone, or too few acknowledgements
					}
					if !ok {
						continue
					}
					me := b.took(name, held, time.Since(start))
					// The hold's work; a sleep is what the workload is, not a wait for a condition.
					time.Sleep(time.Duration(1+rand.IntN(5)) * time.Millisecond)
					if b.release(name, me) {
						<-end // held across the kill: keep believing until the run ends
					}
					_ = k.unlock(held, name)
				}
			}()
		}
	}

	// Kill once each kind has holds; bounded polling of that condition.
	require.Eventually(t, func() bool {
		for _, k := range kinds {
			if b.heldNow(k.prefix) < minHeldAtKill {
				return false
			}
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.t.acquired < minAcquired {
			return false
		}
		b.killed = true // under the lock: every later release sees it
		return true
	}, 20*time.Second, time.Millisecond, "holds never reached %d per kind", minHeldAtKill)
	stop.Store(true)
	require.NoError(t, g.KillMaster())
	took, err := g.WaitPromoted()
	require.NoError(t, err)

	// Challengers, through a Client without the policy (see the comment at the top).
	crdb := newFailoverClient(t, g.FailoverOptions())
	cc := newClient(t, crdb)
	challengers := lockers(t, cc, base)
	deadline := time.Now().Add(challengeFor)
	tick := time.NewTicker(5 * time.Millisecond) // a round of challenges every 5ms
	defer tick.Stop()
	for ; time.Now().Before(deadline); <-tick.C {
		for _, k := range challengers {
			for i := range poolSize {
				name := k.prefix + strconv.Itoa(i)
				held, ok, err := k.tryLock(context.Background(), name)
				if err != nil || !ok {
					continue // not switched over yet, or still held in Redis
				}
				b.took(name, held, 0)
				_ = k.unlock(held, name) // its belief ends with its held context

			}
		}
	}
	close(end)
	wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.t.syncErrors = int(syncErrors.Load())
	b.t.failover = took
	b.t.runs = 1
	return b.t
}

// newFailoverClient returns a go-redis failover client, closed at the end of the test.
func newFailoverClient(t *testing.T, o *redis.FailoverOptions) *redis.Client {
	c := redis.NewFailoverClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

func errorsIsSync(err error) bool { return errors.Is(err, aqs.ErrReplicaSync) }
