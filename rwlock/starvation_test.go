package rwlock_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/internal/scripts"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/rwlock"
)

// Readers no longer starve: readers and writers wait in one queue, served in arrival order
// (see the package doc), so a reader waits at most for the writers queued ahead of it, and a
// stream of readers cannot keep the writers out either. These tests use the public API only,
// each holder in a Client of its own as separate processes would be, and assert progress and
// bounds counted in holds, never timings (the machine is shared and noisy); the waits are
// logged.

// busyWriters runs one goroutine per lock, each taking the write side, holding it for hold
// and releasing it, again and again until ctx ends. began counts the write holds begun. The
// returned function stops them and returns each one's count of holds.
func busyWriters(t *testing.T, locks []*rwlock.Lock, hold time.Duration, began *atomic.Int64) (stop func() []int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	counts := make([]int, len(locks))
	var wg sync.WaitGroup
	for i, l := range locks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				w, err := l.Lock(ctx)
				if ctx.Err() != nil {
					if err == nil {
						assert.NoError(t, l.Unlock(w))
					}
					return
				}
				if !assert.NoError(t, err, "writer %d", i) {
					return
				}
				began.Add(1)
				counts[i]++
				time.Sleep(hold)
				if !assert.NoError(t, l.Unlock(w), "writer %d", i) {
					return
				}
			}
		}()
	}
	var once sync.Once
	stop = func() []int {
		once.Do(func() { cancel(); wg.Wait() })
		return counts
	}
	t.Cleanup(func() { stop() })
	return stop
}

// percentile returns the p-th percentile (0 < p <= 100) of ds, which it sorts.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[(len(ds)*p+99)/100-1]
}

// TestAReaderWaitsForAtMostTheWritersQueuedAheadOfIt: two writers, each in its own Client,
// take the write side back to back (hold 1ms, release, again), so that one of them holds and
// the other is queued almost all the time. A reader in a third Client makes 200 tries; each
// must get in (RLock within 5s) and, from the moment its first attempt is sent until it holds,
// at most the writers queued ahead of it begin a hold, plus one whose grant came just before
// but was seen after, plus one whose join reached Redis while the attempt was on its way: at
// most 3 write holds per try, however long the reader is kept queued otherwise. (The writers'
// turns are 1ms: a loaded machine may delay an attempt between its send and its arrival by as
// much, as it may delay it past a whole turn between the call and the send.) Before the queue, a reader
// retried until it found no writer holding and none waiting, which two busy writers need
// never leave.
func TestAReaderWaitsForAtMostTheWritersQueuedAheadOfIt(t *testing.T) {
	const tries = 200
	srv := redistest.Single(t)
	rdb := srv.Client(t)
	var began atomic.Int64
	readerRDB := srv.Client(t)
	var sent atomic.Int64 // began when the try's first attempt was sent; -1 before it
	readerRDB.AddHook(firstAttemptHook{sent: &sent, began: &began})
	reader := newLock(t, newClient(t, readerRDB))
	var writers []*rwlock.Lock
	for range 2 {
		l, err := rwlock.New(newClient(t, rdb), reader.Name())
		require.NoError(t, err)
		writers = append(writers, l)
	}
	stop := busyWriters(t, writers, time.Millisecond, &began)
	require.Eventually(t, func() bool { return began.Load() >= 10 }, 10*time.Second, time.Millisecond,
		"the writers are busy")

	waits := make([]time.Duration, 0, tries)
	passedBy := make([]int, tries+1) // passedBy[n]: tries during whose wait n write holds began
	worst := 0
	for i := range tries {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		sent.Store(-1)
		start := time.Now()
		r, err := reader.RLock(ctx)
		wait, after, before := time.Since(start), began.Load(), sent.Load()
		if err != nil {
			cancel()
			t.Fatalf("try %d: the reader did not get in within 5s, %d write holds began meanwhile: %v",
				i, after-before, err)
		}
		n := int(after - before)
		passedBy[min(n, tries)]++
		worst = max(worst, n)
		waits = append(waits, wait)
		require.NoError(t, reader.RUnlock(r))
		cancel()
		assert.LessOrEqual(t, n, 3, "try %d: %d write holds began while the reader waited", i, n)
	}
	counts := stop()
	t.Logf("reader's wait over %d tries: p50 %v, p99 %v, max %v; write holds begun during a try: "+
		"0: %d tries, 1: %d, 2: %d, most %d; write holds in all: %v",
		tries, percentile(waits, 50), percentile(waits, 99), percentile(waits, 100),
		passedBy[0], passedBy[1], passedBy[2], worst, counts)
	for i, n := range counts {
		assert.Positive(t, n, "writer %d never got in", i)
	}
	assert.Positive(t, passedBy[1]+passedBy[2], "no try waited for a writer: the test did not contend")
}

// TestReadersAndWritersBothProgressUnderLoad: 32 readers (goroutines over 4 Clients) and 2
// writers (a Client each) take the lock as fast as they can for 5s, each holding it 1ms. Both
// sides make progress: each writer gets in many times while the readers keep the read side
// busy, and the readers, as a whole, many times while the writers keep the write side busy.
func TestReadersAndWritersBothProgressUnderLoad(t *testing.T) {
	const (
		readers  = 32
		clients  = 4
		hold     = time.Millisecond
		duration = 5 * time.Second
	)
	rdb := redistest.Single(t).Client(t)
	base := newLock(t, newClient(t, rdb))
	var readLocks []*rwlock.Lock
	for range clients {
		l, err := rwlock.New(newClient(t, rdb), base.Name())
		require.NoError(t, err)
		readLocks = append(readLocks, l)
	}
	var writeLocks []*rwlock.Lock
	for range 2 {
		l, err := rwlock.New(newClient(t, rdb), base.Name())
		require.NoError(t, err)
		writeLocks = append(writeLocks, l)
	}

	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	type side struct {
		mu    sync.Mutex
		waits []time.Duration
	}
	var rs side
	ws := make([]side, len(writeLocks))
	// loop takes the lock with lock and gives it back with unlock until ctx ends, recording
	// each acquisition's wait in s.
	loop := func(s *side, lock func(context.Context) (context.Context, error), unlock func(context.Context) error) {
		for {
			start := time.Now()
			held, err := lock(ctx)
			if ctx.Err() != nil {
				if err == nil {
					assert.NoError(t, unlock(held))
				}
				return
			}
			if !assert.NoError(t, err) {
				return
			}
			wait := time.Since(start)
			time.Sleep(hold)
			if !assert.NoError(t, unlock(held)) {
				return
			}
			s.mu.Lock()
			s.waits = append(s.waits, wait)
			s.mu.Unlock()
		}
	}
	var wg sync.WaitGroup
	for i := range readers {
		l := readLocks[i%clients]
		wg.Add(1)
		go func() {
			defer wg.Done()
			loop(&rs, func(ctx context.Context) (context.Context, error) { return l.RLock(ctx) }, l.RUnlock)
		}()
	}
	for i, l := range writeLocks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loop(&ws[i], func(ctx context.Context) (context.Context, error) { return l.Lock(ctx) }, l.Unlock)
		}()
	}
	wg.Wait()

	t.Logf("in %v: readers %d acquisitions (wait p99 %v, max %v); writers %d and %d (wait p99 %v and %v, max %v and %v)",
		duration, len(rs.waits), percentile(rs.waits, 99), percentile(rs.waits, 100),
		len(ws[0].waits), len(ws[1].waits), percentile(ws[0].waits, 99), percentile(ws[1].waits, 99),
		percentile(ws[0].waits, 100), percentile(ws[1].waits, 100))
	// Many is far below what an idle machine does (hundreds of holds a second), and far above
	// what a starved side gets (none, or a handful in the gaps).
	assert.GreaterOrEqual(t, len(rs.waits), 100, "the readers starved")
	for i := range ws {
		assert.GreaterOrEqual(t, len(ws[i].waits), 20, "writer %d starved", i)
	}
	info, err := base.Info(context.Background())
	require.NoError(t, err)
	assert.Equal(t, rwlock.Info{}, info, "the lock is free and nobody waits")
	redistest.AssertNoKeyWithoutTTL(t, rdb, base.Name(), base.Key())
}

// firstAttemptHook stores in sent, when it is -1, the count of write holds begun (began) as
// the reader's client sends its first read attempt of a try.
type firstAttemptHook struct{ sent, began *atomic.Int64 }

func (firstAttemptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h firstAttemptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 1 && a[1] == scripts.RWReadAcquire.SHA() {
			h.sent.CompareAndSwap(-1, h.began.Load())
		}
		return next(ctx, cmd)
	}
}

func (firstAttemptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
