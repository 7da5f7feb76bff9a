package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
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
	"github.com/redaqs/aqs/internal/scripts"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/multilock"
)

// The multi-lock under the network faults, with overlapping carts: goroutines on three Clients
// that reach Redis through the proxy take carts of 1-4 names among cartPool with the
// multi-lock, and now and then one name with its fair lock (the same lock, in one queue),
// while
//   - the pub/sub connections are killed on the server every killEvery: grant messages are
//     lost, and the hub must subscribe again;
//   - the proxy cuts every connection every cutEvery, with latency every other period:
//     commands and replies are lost in flight, heartbeats and renewals with them;
//   - the proxy drops the reply to one script every dropEvery, taking the multi-lock's scripts
//     (and the fair lock's acquisition) in turn: the script ran, and go-redis sends it again,
//     or the Client does, or the call fails.
//
// The third Client's go-redis client makes no retries, so that its calls fail on a cut rather
// than run again. Each acquisition is a Lock with a deadline (a patient one, or one that gives
// up after a few milliseconds, so that give-ups meet the faults too) or a TryLock.
//
// What must hold: every call ends, a Lock by its deadline at the latest (cartSlack after it);
// no two holders of a name are inside at once (a witness per name, witness_test.go), a hold
// whose held context ends leaving at once, and the fencing tokens of a name's holders increase
// (a fenced storage per name, stall_test.go); the load keeps moving (every worker acquires, and
// the longest time without an acquisition stays bounded); and once the load is over, every
// name is free with no live entry in its queue's deadlines, within the lease and the waiter
// timeout, and a TryLock of every name at once succeeds.
func TestOverlappingCartsThroughCutsPubSubKillsAndLostReplies(t *testing.T) {
	span := scale(4*time.Second, 30*time.Second)
	const (
		clients   = 3
		workers   = 3 // per Client
		cartPool  = 6
		killEvery = 50 * time.Millisecond
		cutEvery  = 400 * time.Millisecond
		dropEvery = 150 * time.Millisecond
		latency   = 10 * time.Millisecond
		watchdog  = time.Second
		// waiterTimeout is short, so that waiters whose heartbeats a cut lost are sometimes
		// taken for dead while alive: they must start over, and never overlap.
		waiterTimeout = time.Second
		patient       = 10 * time.Second      // a patient Lock's deadline
		impatient     = 30 * time.Millisecond // an impatient one's
		work          = 2 * time.Millisecond
		// longWork is the work of one hold in longEvery: beyond a third of the watchdog
		// timeout, so that renewals meet the faults, and waiters wait long enough to beat.
		longWork  = 500 * time.Millisecond
		longEvery = 60
		// cartSlack is how late after its deadline a Lock may return: the deadline is the
		// caller's, so only the scheduling of a loaded two-core machine under -race stands
		// between them.
		cartSlack = 250 * time.Millisecond
		// maxGap bounds the time without any acquisition (see network_test.go).
		maxGap = 5 * time.Second
	)
	ctx := context.Background()
	srv := redistest.NewServer(t)
	admin := srv.Client(t)
	px := newProxy(t, srv.Addr())
	base := redistest.Name(t)
	pool := make([]string, cartPool)
	for i := range pool {
		pool[i] = "{" + base + "}:" + strconv.Itoa(i)
	}
	// One witness per name: a directory of its own.
	dir := t.TempDir()
	witnesses := make([]witness, cartPool)
	for i := range witnesses {
		witnesses[i] = witness{dir: filepath.Join(dir, strconv.Itoa(i))}
		require.NoError(t, os.Mkdir(witnesses[i].dir, 0o755))
	}
	var cs []*aqs.Client
	for i := range clients {
		rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), MaxRetries: []int{0, 0, -1}[i]})
		t.Cleanup(func() { rdb.Close() })
		c, err := aqs.New(ctx, rdb, aqs.WithWatchdogTimeout(watchdog))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		cs = append(cs, c)
	}
	var keys [][]string // each name's lock key, queue and deadlines
	for _, n := range pool {
		l, err := fair.New(cs[0], n)
		require.NoError(t, err)
		keys = append(keys, l.Keys())
	}

	drops := []*scripts.Script{scripts.MultiAcquire, scripts.MultiHeartbeat, scripts.MultiRenew,
		scripts.MultiGiveUp, scripts.MultiRelease, scripts.LockAcquire}
	stop, done := make(chan struct{}), make(chan struct{})
	var kills, cuts, armed int
	dropped := map[string]int{} // replies dropped, by script
	credit := func() {          // the replies dropped since the last arming were the armed script's
		if armed > 0 {
			if n := px.Dropped() - sumOf(dropped); n > 0 {
				dropped[drops[(armed-1)%len(drops)].Name()] += n
			}
		}
	}
	go func() {
		defer close(done)
		killTick, cutTick, dropTick := time.NewTicker(killEvery), time.NewTicker(cutEvery), time.NewTicker(dropEvery)
		defer killTick.Stop()
		defer cutTick.Stop()
		defer dropTick.Stop()
		for {
			select {
			case <-stop:
				px.SetLatency(0)
				px.DropReplyTo("")
				credit()
				return
			case <-killTick.C:
				n, err := admin.ClientKillByFilter(ctx, "TYPE", "pubsub").Result()
				if err != nil {
					t.Errorf("CLIENT KILL: %v", err)
				}
				kills += int(n)
			case <-cutTick.C:
				px.Cut()
				cuts++
				px.SetLatency(time.Duration(cuts%2) * latency)
			case <-dropTick.C:
				credit()
				px.DropReplyTo(drops[armed%len(drops)].SHA())
				armed++
			}
		}
	}()
	stopped := false
	stopFaults := func() {
		if !stopped {
			stopped = true
			close(stop)
			<-done
		}
	}
	t.Cleanup(stopFaults)

	var (
		mu        sync.Mutex // errs, late, last, gap
		errs      []string
		late      []string // calls that returned beyond their deadline and the slack
		latest    time.Duration
		last      = time.Now()
		gap       time.Duration
		overlaps  atomic.Int64
		backwards atomic.Int64 // a name's token below the one of an earlier holder
		stores    = make([]fencedStore, cartPool)
		lost      atomic.Int64
		gaveUp    atomic.Int64 // impatient Locks whose deadline came first
		notFree   atomic.Int64 // TryLocks that found a name taken
		bySize    [5]atomic.Int64
		fairs     atomic.Int64
		perWorker = make([]int64, clients*workers)
		slowest   atomic.Int64 // the longest Unlock, ns
	)
	fail := func(what string, err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, what+": "+err.Error())
	}
	// lock makes the worker's next acquisition; nil when it holds nothing.
	lock := func(w int, c *aqs.Client, rng *rand.Rand) *cartHold {
		cart := rng.Perm(cartPool)[:1+rng.IntN(4)]
		names := make([]string, len(cart))
		for i, k := range cart {
			names[i] = pool[k]
		}
		r := rng.IntN(16)
		bound := patient
		if 4 <= r && r < 6 {
			bound = impatient
		}
		// The deadline is the acquisition's; the held context, a child of lctx, must outlive
		// it, so lctx is cancelled only after the release.
		lctx, cancel := context.WithTimeout(ctx, bound)
		h := &cartHold{cart: cart, cancel: cancel}
		var err error
		var what string
		if r < 2 {
			what = "fair Lock"
			var l *fair.Lock
			if l, err = fair.New(c, names[0], fair.WithWaiterTimeout(waiterTimeout)); err == nil {
				h.cart, h.unlock = cart[:1], l.Unlock
				h.held, err = l.Lock(lctx, aqs.WithFencingToken())
			}
		} else {
			var m *multilock.Lock
			if m, err = multilock.New(c, names, multilock.WithWaiterTimeout(waiterTimeout)); err == nil {
				h.unlock = m.Unlock
				if r < 4 {
					what = fmt.Sprintf("TryLock of %d names", len(names))
					var ok bool
					h.held, ok, err = m.TryLock(lctx, aqs.WithFencingToken())
					if err == nil && !ok {
						notFree.Add(1)
						cancel()
						return nil
					}
				} else {
					what = fmt.Sprintf("Lock of %d names", len(names))
					h.held, err = m.Lock(lctx, aqs.WithFencingToken())
				}
			}
		}
		checkDeadline(lctx, &mu, &late, &latest, cartSlack, fmt.Sprintf("worker %d: %s", w, what))
		if err != nil {
			cancel()
			if bound == impatient && errors.Is(err, context.DeadlineExceeded) {
				gaveUp.Add(1)
			} else {
				fail(what, err)
			}
			return nil
		}
		if r < 2 {
			fairs.Add(1)
		} else {
			bySize[len(names)].Add(1)
		}
		return h
	}

	var wg sync.WaitGroup
	over := make(chan struct{}) // the load is over: the workers stop
	for w := range perWorker {
		c := cs[w%clients]
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 17))
			for {
				select {
				case <-over:
					return
				default:
				}
				h := lock(w, c, rng)
				if h == nil {
					continue
				}
				held, cart := h.held, h.cart
				// Enter the witness of each name, in one order (no waiting, so any would do).
				slices.Sort(cart)
				var leaves []func()
				for _, k := range cart {
					leave, err := witnesses[k].enter(opExclusive)
					if errors.Is(err, errOverlap) {
						overlaps.Add(1)
						t.Logf("overlap on %q: worker %d took %d names at %s; in Redis: %s", pool[k], w, len(cart),
							time.Now().Format("15:04:05.000000"), dump(admin, keys[k]))
					} else if err != nil {
						fail("witness", err)
					}
					if leave != nil {
						leaves = append(leaves, leave)
					}
				}
				// Each name's holders come one after the other, so their tokens increase.
				token, err := aqs.FencingToken(held)
				if err != nil {
					fail("token", err)
				}
				for _, k := range cart {
					if !stores[k].write(token) {
						backwards.Add(1)
						t.Logf("token %d of worker %d refused by the storage of %q", token, w, pool[k])
					}
				}
				// The work under the hold stops when the held context ends, as the contract
				// asks: a lost hold leaves the witness at once.
				d := work
				if rng.IntN(longEvery) == 0 {
					d = longWork
				}
				timer := time.NewTimer(d)
				select {
				case <-timer.C:
				case <-held.Done():
					timer.Stop()
				}
				if errors.Is(context.Cause(held), aqs.ErrLockLost) {
					lost.Add(1)
				}
				for _, leave := range leaves {
					leave()
				}
				began := time.Now()
				if err := h.unlock(held); err != nil {
					fail("Unlock", err)
				}
				took := time.Since(began)
				h.cancel()
				for {
					old := slowest.Load()
					if int64(took) <= old || slowest.CompareAndSwap(old, int64(took)) {
						break
					}
				}
				perWorker[w]++
				now := time.Now()
				mu.Lock()
				gap = max(gap, now.Sub(last))
				last = now
				mu.Unlock()
			}
		})
	}
	time.Sleep(span) // the load's length: the workers and the faults run meanwhile
	close(over)
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(patient + 30*time.Second):
		t.Fatalf("a worker's call never ended")
	}
	stopFaults()

	// Nothing is left held or queued: a hold whose Unlock failed ends with its lease, a waiter
	// that vanished with its Client's connection is dead by the waiter timeout.
	settle := watchdog + waiterTimeout + 5*time.Second
	var left string
	settled := time.Now()
	ok := assertEventually(settle, func() bool {
		left = leftInRedis(admin, cs[0], pool)
		return left == ""
	})
	settledIn := time.Since(settled)
	assert.True(t, ok, "%v after the load: %s; in Redis: %s", settle, left, dump(admin, slices.Concat(keys...)))
	all, err := multilock.New(cs[0], pool)
	require.NoError(t, err)
	held, got, err := all.TryLock(ctx)
	require.NoError(t, err)
	if assert.True(t, got, "a TryLock of every name after the load") {
		require.NoError(t, all.Unlock(held))
	}

	var total int64
	for w, n := range perWorker {
		assert.NotZero(t, n, "worker %d never acquired", w)
		total += n
	}
	assert.Zero(t, overlaps.Load(), "two holders of a name inside at once")
	assert.Zero(t, backwards.Load(), "a name's fencing token went backwards")
	assert.Empty(t, late, "calls that returned beyond their deadline")
	assert.Less(t, gap, maxGap, "longest time without an acquisition")
	count(int(overlaps.Load()), 0, 0)
	sizes := make([]int64, 0, 4)
	for n := 1; n <= 4; n++ {
		sizes = append(sizes, bySize[n].Load())
	}
	t.Logf("SUMMARY carts multilock: %d acquisitions in %v (multi-locks of 1-4 names %v, fair locks %d; per worker "+
		"min %d, max %d), longest time without one %v; overlaps %d, tokens backwards %d, holds lost %d, impatient Locks that gave up %d, "+
		"TryLocks that found a name taken %d; latest Lock return %v after its deadline (slack %v); slowest Unlock %v; "+
		"free %v after the load; %d pub/sub connections killed, %d cuts, %d replies dropped (%d armed: %v); errors %d: %s",
		total, span, sizes, fairs.Load(), slices.Min(perWorker), slices.Max(perWorker), gap.Round(time.Millisecond),
		overlaps.Load(), backwards.Load(), lost.Load(), gaveUp.Load(), notFree.Load(), latest.Round(time.Millisecond), cartSlack,
		time.Duration(slowest.Load()).Round(time.Millisecond), settledIn.Round(time.Millisecond), kills, cuts,
		px.Dropped(), armed, dropped, len(errs), errorSample(errs, 4))
}

// sumOf returns the sum of m's values.
func sumOf(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// cartHold is one acquisition of the carts' load.
type cartHold struct {
	held   context.Context
	unlock func(context.Context) error
	cart   []int              // the indexes of its names
	cancel context.CancelFunc // of the context it was taken with, once it is released
}

// checkDeadline records, under mu, how long after ctx's deadline the call that used it
// returned (now), and, in late, a call that returned more than slack after it.
func checkDeadline(ctx context.Context, mu *sync.Mutex, late *[]string, latest *time.Duration, slack time.Duration, what string) {
	deadline, _ := ctx.Deadline()
	over := time.Since(deadline)
	mu.Lock()
	defer mu.Unlock()
	*latest = max(*latest, over)
	if over > slack {
		*late = append(*late, fmt.Sprintf("%s returned %v after its deadline", what, over))
	}
}

// leftInRedis describes what is held or queued of names: a name held, or a live entry in its
// queue's deadlines; "" when nothing is.
func leftInRedis(admin *redis.Client, c *aqs.Client, names []string) string {
	ctx := context.Background()
	now, err := admin.Time(ctx).Result()
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, n := range names {
		l, err := fair.New(c, n)
		if err != nil {
			return err.Error()
		}
		locked, err := l.IsLocked(ctx)
		if err != nil {
			return err.Error()
		}
		if locked {
			out = append(out, n+" held")
		}
		live, err := admin.ZCount(ctx, l.Keys()[2], fmt.Sprintf("(%d", now.UnixMilli()), "+inf").Result()
		if err != nil {
			return err.Error()
		}
		if live > 0 {
			out = append(out, fmt.Sprintf("%s has %d live waiters", n, live))
		}
	}
	return strings.Join(out, "; ")
}
