package failovertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/reentrant"
	"github.com/redaqs/aqs/rwlock"
	"github.com/redaqs/aqs/semaphore"
)

// Acquisitions lost at a failover.
//
// A run starts a Sentinel group whose replica receives the replication stream
// replicationDelay late (a replica in another zone), and a Client on it, with or without the
// replica-sync policy. Workers take and release every primitive from small pools of names:
// reentrant and fair locks, read-write locks in both modes (write and read holds), counting
// and leased semaphores of semPermits permits each, every hold lasting 5 to 25 milliseconds.
// While some of each are held, the master's host is lost (SIGKILL, and the replication data
// in flight dropped: redistest.KillMaster), and the sentinels promote the replica. A hold
// that spans the kill is kept until the run ends, its holder still believing it holds: a
// lock's or a leased permit's holder until its held context is done, a counting semaphore's
// until it releases (counting permits have no owner to be told of a loss).
//
// After the promotion, challengers take what they can get at once of every name through a
// second Client: a lock, a read-write lock's write side and then its read side, a
// semaphore's permits one at a time until refused. A challenger's acquisition that, counted
// with the holds whose holders still believe, goes past what the name allows (a second holder
// of a lock or of a write side, a reader beside a writer, more permits than the semaphore
// has) shows holds that were lost at the failover: as many of them, oldest first, as bring
// the name back within its limit are counted lost. A semaphore's holds take one permit
// each, so for a semaphore that is the number of permits over the limit. The challengers' Client runs without the policy: the promoted
// replica has no replica of its own to acknowledge anything, and what is measured is whether
// the holds reported before the kill are still in Redis.
//
// Without the policy an acquisition is reported as soon as the master has it, so holds taken
// less than replicationDelay before the kill are lost. With it, an acquisition is reported
// only once the replica acknowledged it: none is lost, of any primitive. The test asserts
// the latter, and that no name went past its limit before the kill; it logs the figures of
// each primitive.
//
// AQS_FAILOVER_RUNS=n repeats each mode n times (default 1) and logs the totals:
//
//	AQS_FAILOVER_RUNS=10 go test -race -count=1 -run TestFailover -v -timeout 30m ./internal/failovertest/

const (
	replicationDelay = 30 * time.Millisecond
	lockPool         = 16 // names per kind of lock: more than its workers, so that many are free at any time
	// rwPool is smaller, so that readers often share a name and writers wait for them.
	rwPool = 8
	// semPool names of semPermits permits each: 8 permits for 6 workers, so that some wait.
	semPool        = 4
	semPermits     = 2
	workersPerKind = 6
	workerWait     = 200 * time.Millisecond
	// minHeldAtKill is how many holds of each kind the run waits for before killing the
	// master, so that the kill always lands on held names of every kind.
	minHeldAtKill = 2
	// minAcquired is how many acquisitions of each kind the workers make before the kill.
	minAcquired  = 100
	challengeFor = time.Second
	// writer is a read-write lock's limit, and the weight of its write hold: a writer
	// fills the name, a reader (weight 1) leaves room for other readers.
	writer = 1 << 20
)

func TestFailoverLosesNoAcquisitionWithReplicaSync(t *testing.T) {
	runs := 1
	if s := os.Getenv("AQS_FAILOVER_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "AQS_FAILOVER_RUNS")
		require.Positive(t, n, "AQS_FAILOVER_RUNS")
		runs = n
	}
	var totals [2]figures
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
					for _, k := range got.kinds {
						assert.Zero(t, k.overlapsBefore, "%s: past its limit before the kill", k.label)
						assert.Positive(t, k.heldAtKill, "%s: no hold spanned the kill", k.label)
						if len(mode.opts) > 0 {
							assert.Zero(t, k.lost, "%s: acquisitions lost at the failover with the policy on", k.label)
						}
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

// figures is what one run (or several) counted.
type figures struct {
	kinds    []tally       // per kind, in the order of primitives
	failover time.Duration // summed over runs
	runs     int
}

func (a *figures) add(b figures) {
	if a.kinds == nil {
		a.kinds = make([]tally, len(b.kinds))
	}
	for i, k := range b.kinds {
		a.kinds[i].add(k)
	}
	a.failover += b.failover
	a.runs += b.runs
}

func (a figures) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "a failover took %v on average", (a.failover / time.Duration(max(a.runs, 1))).Round(time.Millisecond))
	for _, k := range a.kinds {
		fmt.Fprintf(&s, "\n\t%s", k)
	}
	return s.String()
}

// tally is what one run (or several) counted of one kind.
type tally struct {
	label          string
	acquired       int           // acquisitions reported to the workers before the kill
	heldAtKill     int           // holds that spanned the kill
	lost           int           // holds a challenger took the place of while their holders believed (a semaphore's: permits over the limit)
	overlapsBefore int           // acquisitions past the name's limit before the kill: a plain bug
	syncErrors     int           // acquisitions refused for too few acknowledgements (policy on)
	acquiring      time.Duration // the acquisitions' time before the kill, summed
}

func (a *tally) add(b tally) {
	a.label = b.label
	a.acquired += b.acquired
	a.heldAtKill += b.heldAtKill
	a.lost += b.lost
	a.overlapsBefore += b.overlapsBefore
	a.syncErrors += b.syncErrors
	a.acquiring += b.acquiring
}

func (a tally) String() string {
	return fmt.Sprintf("%s: %d acquisitions before the kill (%v each on average), %d held across it, "+
		"%d of those lost at the failover (%d refused for want of acknowledgement)",
		a.label, a.acquired, (a.acquiring / time.Duration(max(a.acquired, 1))).Round(100*time.Microsecond),
		a.heldAtKill, a.lost, a.syncErrors)
}

// kind is one primitive under test: its pool of names, as seen through one Client.
type kind struct {
	label string
	names int
	limit int // the weight of the holds one name allows at once
	// acquire is a worker's acquisition of name i, waiting up to workerWait.
	acquire func(i int) (hold, bool, error)
	// tries are a challenger's attempts on name i, in order, none of which waits. With
	// repeat, each is made again until refused (a semaphore's permits, one at a time).
	tries  []func(i int) (hold, bool, error)
	repeat bool
}

// hold is one acquisition.
type hold struct {
	// held is done once its holder knows it lost the hold; nil: the holder believes until it
	// releases (a counting semaphore's permits).
	held    context.Context
	weight  int // against the name's limit
	release func() error
}

// primitives returns every kind under test, on c; with set, it sets the semaphores' permits.
func primitives(t *testing.T, c *aqs.Client, base string, set bool) []kind {
	ctx := context.Background()
	name := func(prefix string, i int) string { return base + "-" + prefix + strconv.Itoa(i) }
	re := make([]*reentrant.Lock, lockPool)
	fl := make([]*fair.Lock, lockPool)
	for i := range lockPool {
		var err error
		re[i], err = reentrant.New(c, name("re", i))
		require.NoError(t, err)
		fl[i], err = fair.New(c, name("fa", i))
		require.NoError(t, err)
	}
	rwf := make([]*rwlock.Lock, rwPool)
	rwn := make([]*rwlock.Lock, rwPool)
	for i := range rwPool {
		var err error
		rwf[i], err = rwlock.New(c, name("wf", i))
		require.NoError(t, err)
		rwn[i], err = rwlock.New(c, name("wn", i), rwlock.WithNonFair())
		require.NoError(t, err)
	}
	cs := make([]*semaphore.Semaphore, semPool)
	ls := make([]*semaphore.Leased, semPool)
	for i := range semPool {
		var err error
		cs[i], err = semaphore.New(c, name("sc", i))
		require.NoError(t, err)
		ls[i], err = semaphore.NewLeased(c, name("sl", i))
		require.NoError(t, err)
		if set {
			_, err = cs[i].TrySetPermits(ctx, semPermits)
			require.NoError(t, err)
			_, err = ls[i].TrySetPermits(ctx, semPermits)
			require.NoError(t, err)
		}
	}

	counting := func(i int, o ...aqs.WaitOption) (hold, bool, error) {
		ok, err := cs[i].TryAcquire(ctx, 1, o...)
		if !ok {
			return hold{}, false, err
		}
		return hold{weight: 1, release: func() error { return cs[i].Release(ctx, 1) }}, true, nil
	}
	leased := func(i int, o ...aqs.TryOption) (hold, bool, error) {
		p, ok, err := ls[i].TryAcquire(ctx, 1, o...)
		if !ok {
			return hold{}, false, err
		}
		return hold{held: p.Context(), weight: 1, release: func() error { return ls[i].Release(ctx, p) }}, true, nil
	}
	return []kind{
		lockKind("reentrant lock", func(i int, o ...aqs.TryLockOption) (context.Context, bool, error) {
			return re[i].TryLock(ctx, o...)
		}, func(i int, held context.Context) error { return re[i].Unlock(held) }),
		lockKind("fair lock", func(i int, o ...aqs.TryLockOption) (context.Context, bool, error) {
			return fl[i].TryLock(ctx, o...)
		}, func(i int, held context.Context) error { return fl[i].Unlock(held) }),
		rwKind("read-write lock, fair", rwf),
		rwKind("read-write lock, non-fair", rwn),
		{label: "counting semaphore", names: semPool, limit: semPermits, repeat: true,
			acquire: func(i int) (hold, bool, error) { return counting(i, aqs.WithWait(workerWait)) },
			tries:   []func(int) (hold, bool, error){func(i int) (hold, bool, error) { return counting(i) }}},
		{label: "leased semaphore", names: semPool, limit: semPermits, repeat: true,
			acquire: func(i int) (hold, bool, error) { return leased(i, aqs.WithWait(workerWait)) },
			tries:   []func(int) (hold, bool, error){func(i int) (hold, bool, error) { return leased(i) }}},
	}
}

// lockKind is a kind of lock: one holder at a time.
func lockKind(label string, try func(i int, o ...aqs.TryLockOption) (context.Context, bool, error),
	unlock func(i int, held context.Context) error) kind {
	attempt := func(i int, o ...aqs.TryLockOption) (hold, bool, error) {
		held, ok, err := try(i, o...)
		if !ok {
			return hold{}, false, err
		}
		return hold{held: held, weight: 1, release: func() error { return unlock(i, held) }}, true, nil
	}
	return kind{label: label, names: lockPool, limit: 1,
		acquire: func(i int) (hold, bool, error) { return attempt(i, aqs.WithWait(workerWait)) },
		tries:   []func(int) (hold, bool, error){func(i int) (hold, bool, error) { return attempt(i) }}}
}

// rwKind is a kind of read-write lock: workers take the write side or the read side, half
// and half; challengers try the write side, then the read side.
func rwKind(label string, ls []*rwlock.Lock) kind {
	ctx := context.Background()
	write := func(i int, o ...aqs.TryLockOption) (hold, bool, error) {
		held, ok, err := ls[i].TryLock(ctx, o...)
		if !ok {
			return hold{}, false, err
		}
		return hold{held: held, weight: writer, release: func() error { return ls[i].Unlock(held) }}, true, nil
	}
	read := func(i int, o ...aqs.TryOption) (hold, bool, error) {
		held, ok, err := ls[i].TryRLock(ctx, o...)
		if !ok {
			return hold{}, false, err
		}
		return hold{held: held, weight: 1, release: func() error { return ls[i].RUnlock(held) }}, true, nil
	}
	return kind{label: label, names: len(ls), limit: writer,
		acquire: func(i int) (hold, bool, error) {
			if rand.IntN(2) == 0 {
				return write(i, aqs.WithWait(workerWait))
			}
			return read(i, aqs.WithWait(workerWait))
		},
		tries: []func(int) (hold, bool, error){
			func(i int) (hold, bool, error) { return write(i) },
			func(i int) (hold, bool, error) { return read(i) },
		}}
}

// slot is name i of kind k.
type slot struct{ k, i int }

// belief is one hold as its holder sees it.
type belief struct {
	hold
	frozen bool // spanned the kill: kept until the run ends
	lost   bool // counted already
}

// believes reports whether the holder still believes it holds, and the hold was not counted
// lost already.
func (o *belief) believes() bool { return !o.lost && (o.held == nil || o.held.Err() == nil) }

// board records who believes it holds what.
type board struct {
	mu      sync.Mutex
	limits  []int // per kind
	holders map[slot][]*belief
	killed  bool
	t       []tally // per kind
}

func newBoard(kinds []kind) *board {
	b := &board{holders: map[slot][]*belief{}, t: make([]tally, len(kinds))}
	for i, k := range kinds {
		b.limits = append(b.limits, k.limit)
		b.t[i].label = k.label
	}
	return b
}

// took records an acquisition of s, which took d. When it takes s past its limit, it counts
// an overlap before the kill, or after it the believers it displaced, oldest first.
func (b *board) took(s slot, h hold, d time.Duration) *belief {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := &b.t[s.k]
	over := h.weight - b.limits[s.k]
	for _, o := range b.holders[s] {
		if o.believes() {
			over += o.weight
		}
	}
	if over > 0 && !b.killed {
		t.overlapsBefore++
	}
	for _, o := range b.holders[s] {
		if over <= 0 || !b.killed {
			break
		}
		if o.believes() {
			o.lost = true
			t.lost++
			over -= o.weight
		}
	}
	me := &belief{hold: h}
	if !b.killed {
		t.acquired++
		t.acquiring += d
	}
	b.holders[s] = append(b.holders[s], me)
	return me
}

// release ends a worker's belief; it reports whether the hold spanned the kill, in which
// case the belief is kept instead.
func (b *board) release(s slot, me *belief) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.killed && !me.frozen {
		me.frozen = true
		b.t[s.k].heldAtKill++
		return true
	}
	b.drop(s, me)
	return false
}

// drop forgets a belief; b.mu is held.
func (b *board) drop(s slot, me *belief) {
	hs := b.holders[s]
	for i, o := range hs {
		if o == me {
			b.holders[s] = append(hs[:i], hs[i+1:]...)
			return
		}
	}
}

// released ends a challenger's belief.
func (b *board) released(s slot, me *belief) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.drop(s, me)
}

// refused counts an acquisition of kind k refused for too few acknowledgements.
func (b *board) refused(k int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.t[k].syncErrors++
}

// kill reports whether every kind has minHeldAtKill holds now and minAcquired acquisitions
// made; if so, the kill is on from then: every later release sees it.
func (b *board) kill() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	held := make([]int, len(b.t))
	for s, hs := range b.holders {
		held[s.k] += len(hs)
	}
	for k := range b.t {
		if held[k] < minHeldAtKill || b.t[k].acquired < minAcquired {
			return false
		}
	}
	b.killed = true
	return true
}

func failoverRun(t *testing.T, opts []aqs.Option) figures {
	g := redistest.NewSentinel(t, redistest.WithReplicationDelay(replicationDelay))
	fo := g.FailoverOptions()
	fo.DialTimeout = 200 * time.Millisecond // the dead master's address fails fast
	rdb := newFailoverClient(t, fo)
	c := newClient(t, rdb, opts...)
	base := redistest.Name(t)
	kinds := primitives(t, c, base, true)
	b := newBoard(kinds)
	end := make(chan struct{})
	var stop atomic.Bool

	var wg sync.WaitGroup
	for k, kd := range kinds {
		for range workersPerKind {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					s := slot{k, rand.IntN(kd.names)}
					start := time.Now()
					h, ok, err := kd.acquire(s.i)
					if err != nil {
						if errors.Is(err, aqs.ErrReplicaSync) {
							b.refused(k)
						}
						continue // the master is gone, or too few acknowledgements
					}
					if !ok {
						continue
					}
					me := b.took(s, h, time.Since(start))
					// The hold's work; a sleep is what the workload is, not a wait for a condition.
					time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond)
					if b.release(s, me) {
						<-end // held across the kill: keep believing until the run ends
					}
					_ = h.release()
				}
			}()
		}
	}

	// Kill once every kind has holds; bounded polling of that condition.
	require.Eventually(t, b.kill, 20*time.Second, time.Millisecond,
		"never %d holds of every kind at once after %d acquisitions of each", minHeldAtKill, minAcquired)
	stop.Store(true)
	require.NoError(t, g.KillMaster())
	took, err := g.WaitPromoted()
	require.NoError(t, err)

	// Challengers, through a Client without the policy (see the comment at the top).
	crdb := newFailoverClient(t, g.FailoverOptions())
	cc := newClient(t, crdb)
	challengers := primitives(t, cc, base, false)
	deadline := time.Now().Add(challengeFor)
	tick := time.NewTicker(5 * time.Millisecond) // a round of challenges every 5ms
	defer tick.Stop()
	for ; time.Now().Before(deadline); <-tick.C {
		for k, kd := range challengers {
			for i := range kd.names {
				s := slot{k, i}
				for _, try := range kd.tries {
					var got []*belief
					// limit+1 permits are past the limit whoever else believes: no need to
					// take more.
					for len(got) <= kd.limit {
						h, ok, err := try(i)
						if err != nil || !ok {
							break // not switched over yet, or taken in Redis
						}
						got = append(got, b.took(s, h, 0))
						if !kd.repeat {
							break
						}
					}
					for _, me := range got {
						_ = me.release()
						b.released(s, me)
					}
				}
			}
		}
	}
	close(end)
	wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	return figures{kinds: b.t, failover: took, runs: 1}
}

// newFailoverClient returns a go-redis failover client, closed at the end of the test.
func newFailoverClient(t *testing.T, o *redis.FailoverOptions) *redis.Client {
	c := redis.NewFailoverClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}
