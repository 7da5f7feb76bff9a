package semaphore_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/internal/scripts"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// go-redis re-sends a command whose reply a broken connection lost (MaxRetries), so a script
// that ran may run again. A leased acquisition run twice under one hold id leases its permits
// once: the uncontended path and the general one (a hold that attempted before).
func TestALeasedAcquisitionRunTwiceLeasesItsPermitsOnce(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	l := newLeased(t, newClient(t, rdb), 5)
	for i, again := range []string{"0", "1"} {
		hold := "0f8a9c1e-2b3d-4e5f-8a6b-7c8d9e0f1a2b:" + string(rune('1'+i))
		args := []any{hold, 2, 60000, 5000, "0", "PUBLISH", again}
		for run := 1; run <= 2; run++ {
			a := attemptReply(t, scripts.LSemAcquire, rdb, l.Keys(), args...)
			assert.Contains(t, []scripts.Status{scripts.Acquired, scripts.Granted}, a.Status,
				"hold %d, run %d: the permits are the hold's", i+1, run)
		}
		assertAvailable(t, l, 5-2*(i+1), "after hold %d's acquisition ran twice", i+1)
	}
}

// A counting release run twice (go-redis's retry after a lost reply) gives its permits back
// once: permits are not owned, so without the release's own key the second run would let one
// holder too many in. The second run answers what the first did, an error status too.
func TestACountingReleaseRunTwiceGivesItsPermitsBackOnce(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	s := newSem(t, newClient(t, rdb), 2)
	ctx := context.Background()
	for range 2 {
		ok, err := s.TryAcquire(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok)
	}
	release := func(id string) scripts.SemStatus {
		keys := append(s.Keys()[:4:4], s.Key()+":r:"+id)
		return semStatus(t, runTwice(t, rdb, scripts.SemRelease, keys, 1, "PUBLISH", "0f8a9c1e-2b3d-4e5f-8a6b-7c8d9e0f1a2b"))
	}
	assert.Equal(t, scripts.SemOK, release("a:1"))
	assertAvailable(t, s, 1, "one release of one permit, run twice")
	assert.Equal(t, scripts.SemOK, release("a:2"))
	assert.Equal(t, scripts.SemOverRelease, release("a:3"), "an over-release run twice is an over-release twice")
	assertAvailable(t, s, 2)
	redistest.AssertNoKeyWithoutTTL(t, rdb, s.Key()+":r:a:1", s.Key()+":r:a:1")
}

// A counting acquisition run twice (go-redis's retry after a lost reply) takes its permits
// once: the quick attempt (sem_try) and the full one (sem_acquire). Taken twice, the second
// share would be lost for good, and a pool of one permit would hang every Acquire.
func TestACountingAcquisitionRunTwiceTakesItsPermitsOnce(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	s := newSem(t, newClient(t, rdb), 5)
	ctx := context.Background()
	// sem_try answers 1 when it took the permits, 0 when not (it has no typed reply).
	try := func(keys []string, args ...any) any { return runTwice(t, rdb, scripts.SemTry, keys, args...) }
	assert.Equal(t, int64(1), try([]string{s.Key(), s.Key() + ":a:c:1"}, 2))
	assertAvailable(t, s, 3, "sem_try of 2, run twice")

	hold := "0f8a9c1e-2b3d-4e5f-8a6b-7c8d9e0f1a2b:1"
	keys := append(s.Keys()[:4:4], s.Key()+":a:c:2")
	assert.Equal(t, scripts.Acquired,
		attemptStatus(t, runTwice(t, rdb, scripts.SemAcquire, keys, hold, 2, 5000, "1", "PUBLISH", "0")))
	assertAvailable(t, s, 1, "sem_acquire of 2, run twice")

	// A run that took nothing records it: a run again answers the same, and takes nothing even
	// once permits are free; the key expires.
	assert.Equal(t, int64(0), try([]string{s.Key(), s.Key() + ":a:c:3"}, 2))
	require.NoError(t, s.Release(ctx, 2))
	assert.Equal(t, int64(0), try([]string{s.Key(), s.Key() + ":a:c:3"}, 2))
	assertAvailable(t, s, 3)
	redistest.AssertNoKeyWithoutTTL(t, rdb, s.Key()+":a:c:3", s.Key()+":a:c:3")
}

// An acquisition whose reply is lost for good is settled by sem_unsure.lua: it gives back what
// the attempt took, and nothing for an attempt that took nothing (one that queued its hold,
// above all); and an attempt that arrives only after it was settled (a copy delayed in the
// network) takes nothing.
func TestACountingAttemptSettledAsUnsureTakesNothingLater(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	s := newSem(t, newClient(t, rdb), 2)
	ctx := context.Background()
	// sem_unsure answers 1 when the attempt took permits, 0 when not (it has no typed reply).
	unsure := func(once string) any {
		return runTwice(t, rdb, scripts.SemUnsure, []string{once}) // the same answer both times
	}

	// Settled before the attempt ran: the attempt, arriving late, takes nothing.
	once := s.Key() + ":a:c:1"
	assert.Equal(t, int64(0), unsure(once))
	r, err := scripts.SemTry.Run(ctx, rdb, []string{s.Key(), once}, 1).Int64()
	require.NoError(t, err)
	assert.Equal(t, int64(0), r)
	hold := "0f8a9c1e-2b3d-4e5f-8a6b-7c8d9e0f1a2b:1"
	a := attemptReply(t, scripts.SemAcquire, rdb, append(s.Keys()[:4:4], once), hold, 1, 5000, "1", "PUBLISH", "0")
	assert.Equal(t, scripts.Busy, a.Status, "the attempt settled before it ran takes nothing, and does not queue")
	assertAvailable(t, s, 2)

	// Settled after the attempt took a permit: 1, the caller gives it back.
	once = s.Key() + ":a:c:2"
	r, err = scripts.SemTry.Run(ctx, rdb, []string{s.Key(), once}, 1).Int64()
	require.NoError(t, err)
	require.Equal(t, int64(1), r)
	assert.Equal(t, int64(1), unsure(once))

	// Settled after the attempt queued its hold (no permit free): 0, nothing to give back.
	ok, err := s.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	once = s.Key() + ":a:c:3"
	a = attemptReply(t, scripts.SemAcquire, rdb, append(s.Keys()[:4:4], once), hold, 1, 5000, "1", "PUBLISH", "0")
	require.Equal(t, scripts.Queued, a.Status)
	assert.Equal(t, int64(0), unsure(once))
}

// A heartbeat that collected its waiter's grant and runs again (go-redis's retry after lost
// replies) answers 2 again: answering 0 (no record, no queue entry left) would send the
// waiter to join anew, and the permits granted to it would never be used.
func TestACountingHeartbeatRunTwiceReportsTheGrantTwice(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	s := newSem(t, newClient(t, rdb), 1)
	ctx := context.Background()
	ok, err := s.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	hold := "0f8a9c1e-2b3d-4e5f-8a6b-7c8d9e0f1a2b:1"
	queued := attemptReply(t, scripts.SemAcquire, rdb, s.Keys()[:4], hold, 1, 5000, "1", "PUBLISH", "0")
	require.Equal(t, scripts.Queued, queued.Status, "queued behind the holder")
	require.NoError(t, s.Release(ctx, 1)) // granted to the waiter, which hears nothing yet

	keys := append(s.Keys()[:4:4], s.Key()+":b:"+hold)
	for run := 1; run <= 2; run++ {
		v, err := scripts.SemHeartbeat.Run(ctx, rdb, keys, hold, 1, 5000, "PUBLISH").Result()
		require.NoError(t, err)
		b, err := scripts.DecodeBeat(v)
		require.NoError(t, err)
		assert.Equal(t, scripts.BeatGranted, b, "run %d of the heartbeat", run)
	}
	redistest.AssertNoKeyWithoutTTL(t, rdb, s.Key()+":b:"+hold, s.Key()+":b:"+hold)

	// The waiter heard neither reply, and attempts again: the heartbeat's mark tells it that
	// it was granted, and it takes nothing more.
	require.NoError(t, s.Release(ctx, 1)) // a permit free, so that taking one more could pass
	again := attemptReply(t, scripts.SemAcquire, rdb,
		append(s.Keys()[:4:4], s.Key()+":a:c:1", s.Key()+":b:"+hold),
		hold, 1, 5000, "1", "PUBLISH", "1")
	assert.Equal(t, scripts.Granted, again.Status, "granted, as the heartbeat found")
	assertAvailable(t, s, 1, "the waiter took no permit besides its granted one")
}

// A waiter's first attempt that queued it and runs again (go-redis's retry after a lost
// reply) after a release granted it the permits does not queue it a second time: the run
// again answers "queued", as the first run did. Queued twice, the waiter would be granted
// twice, and the second grant's permits, taken for a call that is over, lost for good (the
// chaos package's network test found this under connection cuts).
func TestACountingFirstAttemptRunAgainAfterItsGrantDoesNotQueueAgain(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	s := newSem(t, newClient(t, rdb), 1)
	ctx := context.Background()
	ok, err := s.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	// Another waiter queued first, so that the attempt below takes the contended arrival.
	for i, hold := range []string{"0f8a9c1e-2b3d-4e5f-8a6b-7c8d9e0f1a2b:1", "0f8a9c1e-2b3d-4e5f-8a6b-7c8d9e0f1a2b:2"} {
		keys := append(s.Keys()[:4:4], s.Key()+":a:c:"+hold)
		first := attemptReply(t, scripts.SemAcquire, rdb, keys, hold, 1, 5000, "1", "PUBLISH", "0")
		require.Equal(t, scripts.Queued, first.Status, "waiter %d queued", i+1)
	}
	// Both waiters are granted in turn by releases, the second waiter's grant after its first
	// attempt ran; then that attempt runs again.
	require.NoError(t, s.Release(ctx, 1)) // to waiter 1
	require.NoError(t, s.Release(ctx, 1)) // to waiter 2
	hold := "0f8a9c1e-2b3d-4e5f-8a6b-7c8d9e0f1a2b:2"
	again := attemptReply(t, scripts.SemAcquire, rdb, append(s.Keys()[:4:4], s.Key()+":a:c:"+hold),
		hold, 1, 5000, "1", "PUBLISH", "0")
	assert.Equal(t, scripts.Queued, again.Status, "the run again answers what the first run did")
	n, err := rdb.ZCard(ctx, s.Key()+":d").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "the waiter queued again")

	// Waiter 2 (granted) gives its permit back: the semaphore is whole again.
	require.NoError(t, s.Release(ctx, 1))
	assertAvailable(t, s, 1)
}

// runTwice runs a script twice, as go-redis does after a lost reply, and returns the second
// run's reply.
func runTwice(t *testing.T, rdb redis.UniversalClient, script *scripts.Script, keys []string, args ...any) any {
	t.Helper()
	var v any
	for range 2 {
		var err error
		v, err = script.Run(context.Background(), rdb, keys, args...).Result()
		require.NoError(t, err)
	}
	return v
}

// attemptReply runs an attempt script (sem_acquire, lsem_acquire) once and decodes its reply.
func attemptReply(t *testing.T, script *scripts.Script, rdb redis.UniversalClient, keys []string, args ...any) scripts.Attempt {
	t.Helper()
	v, err := script.Run(context.Background(), rdb, keys, args...).Result()
	require.NoError(t, err)
	return attemptOf(t, v)
}

// attemptOf decodes an attempt script's reply.
func attemptOf(t *testing.T, v any) scripts.Attempt {
	t.Helper()
	a, err := scripts.DecodeAttempt(v)
	require.NoError(t, err)
	return a
}

// attemptStatus decodes an attempt script's reply and returns its status.
func attemptStatus(t *testing.T, v any) scripts.Status {
	t.Helper()
	return attemptOf(t, v).Status
}

// semStatus decodes the reply of a semaphore script that is not an attempt and returns its
// status.
func semStatus(t *testing.T, v any) scripts.SemStatus {
	t.Helper()
	r, err := scripts.DecodeSem(v)
	require.NoError(t, err)
	return r.Status
}

// The same for the leased semaphore: a first attempt that queued its waiter and runs again
// after a release granted it answers that it was granted, rather than queue it a second time,
// which would lease permits again, unused, to the end of their lease once the call is over.
func TestALeasedFirstAttemptRunAgainAfterItsGrantDoesNotQueueAgain(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	l := newLeased(t, newClient(t, rdb), 1)
	ctx := context.Background()
	holder, err := l.Acquire(ctx, 1)
	require.NoError(t, err)
	hold := "0f8a9c1e-2b3d-4e5f-8a6b-7c8d9e0f1a2b:1"
	args := []any{hold, 1, 60000, 5000, "1", "PUBLISH", "0"}
	first := attemptReply(t, scripts.LSemAcquire, rdb, l.Keys(), args...)
	require.Equal(t, scripts.Queued, first.Status, "queued behind the holder")
	// A second waiter, so that the semaphore stays contended (the arrival's own path).
	other := "0f8a9c1e-2b3d-4e5f-8a6b-7c8d9e0f1a2b:2"
	queued := attemptReply(t, scripts.LSemAcquire, rdb, l.Keys(), other, 1, 60000, 5000, "1", "PUBLISH", "0")
	require.Equal(t, scripts.Queued, queued.Status)
	require.NoError(t, l.Release(ctx, holder)) // granted to the first waiter

	again := attemptReply(t, scripts.LSemAcquire, rdb, l.Keys(), args...)
	assert.Equal(t, scripts.Granted, again.Status, "the run again finds the grant")
	members, err := rdb.LRange(ctx, l.Key()+":q", 0, -1).Result()
	require.NoError(t, err)
	for _, m := range members {
		assert.NotContains(t, m, hold, "the waiter queued again")
	}
}

// assertAvailable asserts how many permits a semaphore of either kind has available.
func assertAvailable(t *testing.T, s interface {
	Available(context.Context) (int, error)
}, want int, msgAndArgs ...any) {
	t.Helper()
	n, err := s.Available(context.Background())
	require.NoError(t, err)
	assert.Equal(t, want, n, msgAndArgs...)
}
