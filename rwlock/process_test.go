package rwlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/rwlock"
)

// Tests across OS processes. Each child is this test binary run again in a role of
// helper_test.go; see there for the protocol.

func TestReadersAndWritersInThreeProcessesNeverOverlap(t *testing.T) {
	const processes, goroutines, rounds = 3, 4, 16
	t.Run("single", func(t *testing.T) {
		contendAcrossProcesses(t, redistest.Single(t).Client(t), processes, goroutines, rounds, false)
	})
	t.Run("single-nonfair", func(t *testing.T) {
		contendAcrossProcesses(t, redistest.Single(t).Client(t), processes, goroutines, rounds, true)
	})
	t.Run("cluster", func(t *testing.T) {
		contendAcrossProcesses(t, redistest.Cluster(t).Client(t), processes, goroutines, rounds, false)
	})
}

// contendAcrossProcesses starts the contenders, lets them go at once, and checks the books
// they kept in Redis.
func contendAcrossProcesses(t *testing.T, rdb redis.UniversalClient, processes, goroutines, rounds int, nonFair bool) {
	ctx := context.Background()
	name := redistest.Name(t)
	var opts []rwlock.Option
	if nonFair {
		opts = append(opts, rwlock.WithNonFair())
	}
	l, err := rwlock.New(newClient(t, rdb), name, opts...)
	require.NoError(t, err)
	b := booksOf(l)
	t.Cleanup(func() { rdb.Del(ctx, b.all()...) }) // after the children are gone

	children := make([]*redistest.Child, processes)
	for i := range children {
		children[i] = roleContend.Start(t, fmt.Sprintf("contender %d", i), redistest.TargetOf(t, rdb),
			contendParams{Lock: name, NonFair: nonFair, Goroutines: goroutines, Rounds: rounds})
	}
	for _, c := range children {
		c.Expect(t, lineReady, 30*time.Second)
	}
	began := time.Now()
	for _, c := range children {
		c.Send(t, lineGo)
	}
	var reads, writes, violations int
	for _, c := range children {
		var r, w, v int
		line := c.Expect(t, lineDone+" ", 20*time.Second)
		_, err := fmt.Sscanf(line, "%d %d %d", &r, &w, &v)
		require.NoError(t, err, "%s printed %q", c.Label(), line)
		reads, writes, violations = reads+r, writes+w, violations+v
		require.NoError(t, c.Wait(t, 10*time.Second), "%s failed", c.Label())
	}
	took := time.Since(began)

	count := func(key string) int {
		t.Helper()
		n, err := rdb.Get(ctx, key).Int()
		if errors.Is(err, redis.Nil) {
			return 0
		}
		require.NoError(t, err)
		return n
	}
	var wantReads, wantWrites int
	for g := 0; g < goroutines; g++ {
		for i := 0; i < rounds; i++ {
			if isWrite(g, i) {
				wantWrites += processes
			} else {
				wantReads += processes
			}
		}
	}
	t.Logf("%d processes × %d goroutines × %d rounds (non-fair %v): %d reads and %d writes in %v; "+
		"%d overlaps found in Redis; up to %d readers inside at once",
		processes, goroutines, rounds, nonFair, count(b.reads), count(b.writes), took.Round(time.Millisecond),
		count(b.violations), count(b.maxReaders))
	assert.Zero(t, count(b.violations), "a writer overlapped another holder (Redis)")
	assert.Zero(t, violations, "a writer overlapped another holder (children)")
	assert.Zero(t, count(b.insideW), "a writer is still inside")
	assert.Zero(t, count(b.insideR), "a reader is still inside")
	assert.Equal(t, wantReads, count(b.reads), "read holds completed (Redis)")
	assert.Equal(t, wantWrites, count(b.writes), "write holds completed (Redis)")
	assert.Equal(t, wantReads, reads, "read holds completed (children)")
	assert.Equal(t, wantWrites, writes, "write holds completed (children)")
	assert.Greater(t, count(b.maxReaders), 1, "readers never shared the lock")

	info, err := l.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, rwlock.Info{}, info, "the lock is free, with no reader or writer waiting")

	require.NoError(t, rdb.Del(ctx, b.all()...).Err())
	t.Run("LeavesNoKeyWithoutTTL", func(t *testing.T) { redistest.AssertNoKeyWithoutTTL(t, rdb, name, l.Key()) })
}

func TestKillDashNineOfReaderLetsWaitingWriterInWithinItsLease(t *testing.T) {
	const (
		lease = time.Second // the reader's watchdog timeout, and so its lease
		// tolerance covers the retry round trips and scheduling of a loaded machine under
		// -race; the writer's retry itself is due when the dead reader's lease ends.
		tolerance = 1500 * time.Millisecond
	)
	ctx := context.Background()
	srv := redistest.Single(t)
	rdb := srv.Client(t)
	name := redistest.Name(t)
	reader := roleRead.Start(t, "reader", redistest.TargetOf(t, rdb), readParams{Lock: name, Watchdog: lease})
	reader.Expect(t, lineHeld, 30*time.Second)

	l, err := rwlock.New(newClient(t, rdb), name)
	require.NoError(t, err)
	info, err := l.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, info.Readers, "the child holds the read side")

	// The child's watchdog keeps the read hold past its lease, so what frees it below is the
	// kill.
	_, ok, err := l.TryLock(ctx, aqs.WithWait(lease+lease/2))
	require.NoError(t, err)
	require.False(t, ok, "a writer got in while the reader was alive")

	type result struct {
		held context.Context
		err  error
		at   time.Time
	}
	got := make(chan result, 1)
	waitCtx, cancel := context.WithTimeout(ctx, lease+10*time.Second)
	defer cancel()
	go func() {
		held, err := l.Lock(waitCtx)
		got <- result{held, err, time.Now()}
	}()
	require.Eventually(t, func() bool {
		info, err := l.Info(ctx)
		return err == nil && info.Waiters == 1
	}, 5*time.Second, time.Millisecond, "the writer is queued")
	select {
	case r := <-got:
		t.Fatalf("the writer got the lock before the kill: %v", r.err)
	default:
	}

	// The reader's lease end in server time, just before the kill: its score in the zset.
	readers, err := rdb.ZRangeWithScores(ctx, l.Key()+":r", 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, readers, 1, "one read hold")
	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	leaseLeft := time.Duration(int64(readers[0].Score)-now.UnixMilli()) * time.Millisecond

	killed := time.Now()
	exit := reader.Kill(t, 10*time.Second)
	assert.Equal(t, -1, exit.ExitCode(), "the reader ended by a signal: %v", exit)

	var r result
	select {
	case r = <-got:
	case <-time.After(lease + 10*time.Second):
		t.Fatal("the writer never got the lock")
	}
	require.NoError(t, r.err)
	after := r.at.Sub(killed)
	t.Logf("writer got the lock %v after kill -9 of the reader; the reader's lease (watchdog timeout) %v, "+
		"%v of it left at the kill", after.Round(time.Millisecond), lease, leaseLeft)
	assert.Less(t, after, lease+tolerance, "the dead reader held the writer back beyond its lease")
	info, err = l.Info(ctx)
	require.NoError(t, err)
	assert.Zero(t, info.Readers, "the dead reader is gone")
	assert.Zero(t, info.Waiters, "the writer left the queue with its grant")
	require.NoError(t, l.Unlock(r.held))

	t.Run("LeavesNoKeyWithoutTTL", func(t *testing.T) { redistest.AssertNoKeyWithoutTTL(t, rdb, name, l.Key()) })
}
