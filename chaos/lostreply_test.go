package chaos_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/scripts"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/reentrant"
	"github.com/redaqs/aqs/semaphore"
)

// Replies lost on the way back. go-redis runs a command again when its connection broke after
// the command was sent (Options.MaxRetries), so a script or SET that ran, but whose reply was
// lost, runs twice. The proxy drops exactly one reply.

// behindAProxy returns the shared server, a proxy in front of it, and an aqs Client (watchdog
// timeout 3s) on a go-redis client through the proxy with opt (its Addr set here).
func behindAProxy(t *testing.T, opt *redis.Options) (*redistest.Server, *proxy, *aqs.Client) {
	t.Helper()
	srv := redistest.Single(t)
	px := newProxy(t, srv.Addr())
	opt.Addr = px.Addr()
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	c, err := aqs.New(context.Background(), rdb, aqs.WithWatchdogTimeout(3*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return srv, px, c
}

// A Lock whose first attempt (SET NX) ran but lost its reply finds, on the retry, the key held
// by its own hold id: the lock is its own, at once, with a lease counted from the first
// attempt (it was lost on the spot, and its Unlock failed with ErrLockLost, before the fix in
// reentrant/lock.go).
func TestLockWhoseFirstAttemptLostItsReplyHoldsTheLock(t *testing.T) {
	ctx := context.Background()
	srv, px, c := behindAProxy(t, &redis.Options{})
	l, err := reentrant.New(c, redistest.Name(t))
	require.NoError(t, err)
	defer srv.Client(t).Del(ctx, l.Key())
	px.DropNextReply()
	start := time.Now()
	held, err := l.Lock(ctx)
	took := time.Since(start)
	require.NoError(t, err)
	assert.Less(t, took, time.Second, "Lock waited for its own orphaned attempt")
	require.NoError(t, held.Err(), "the hold is trusted")
	require.NoError(t, l.Unlock(held))
	n, _ := srv.Client(t).Exists(ctx, l.Key()).Result()
	assert.Zero(t, n, "the lock is free after the one Unlock")
}

// A counting semaphore's calls whose reply is lost, with go-redis's retries (they run twice)
// and without them (the caller's call fails, or retries on its own): no permit is taken or
// given back twice, and none is lost.
func TestCountingCallsWhoseReplyIsLostCountEachPermitOnce(t *testing.T) {
	for _, retries := range []int{0, -1} { // go-redis's default (3), and none
		t.Run(map[int]string{0: "go-redis retries", -1: "no retries"}[retries], func(t *testing.T) {
			ctx := context.Background()
			srv, px, c := behindAProxy(t, &redis.Options{MaxRetries: retries})
			s, err := semaphore.New(c, redistest.Name(t))
			require.NoError(t, err)
			defer srv.Client(t).Del(ctx, s.Keys()...)
			ok, err := s.TrySetPermits(ctx, 3)
			require.NoError(t, err)
			require.True(t, ok)
			available := func() int {
				n, err := s.Available(ctx)
				require.NoError(t, err)
				return n
			}

			px.DropNextReply()
			ok, err = s.TryAcquire(ctx, 1)
			if retries == 0 {
				require.NoError(t, err)
				require.True(t, ok)
				assert.Equal(t, 2, available(), "the acquisition ran twice and took one permit")
			} else {
				require.Error(t, err, "the reply was lost")
				// Its permit, taken by the script, is given back in the background.
				require.Eventually(t, func() bool { return available() == 3 }, 5*time.Second,
					10*time.Millisecond, "the permit of the failed call came back")
				ok, err = s.TryAcquire(ctx, 1)
				require.NoError(t, err)
				require.True(t, ok)
			}

			px.DropNextReply()
			require.NoError(t, s.Release(ctx, 1), "the release is sent again until it is known")
			assert.Equal(t, 3, available(), "one permit back, not two")
		})
	}
}

// The fair lock, likewise: a Lock whose first attempt (SET NX) ran but lost its reply finds
// the lock its own on the retry, trusted, and one Unlock frees it.
func TestFairLockWhoseFirstAttemptLostItsReplyHoldsTheLock(t *testing.T) {
	ctx := context.Background()
	srv, px, c := behindAProxy(t, &redis.Options{})
	l, err := fair.New(c, redistest.Name(t))
	require.NoError(t, err)
	defer srv.Client(t).Del(ctx, l.Keys()...)
	for _, call := range []string{"SET NX", "fair_acquire", "fair_acquire, subscribed"} {
		if call == "fair_acquire, subscribed" {
			// A waiter of this Client leaves the hub subscribed to the Client's grant channel
			// (it lingers): the next Lock skips the SET NX and tries in its waiting loop.
			first, err := l.Lock(ctx)
			require.NoError(t, err)
			got := make(chan context.Context, 1)
			go func() {
				h, err := l.Lock(ctx)
				assert.NoError(t, err)
				got <- h
			}()
			require.Eventually(t, func() bool {
				return srv.Client(t).ZCard(ctx, l.Key()+":d").Val() == 1
			}, 5*time.Second, 5*time.Millisecond, "the waiter never queued")
			require.NoError(t, l.Unlock(first))
			require.NoError(t, l.Unlock(<-got))
		}
		px.DropNextReply()
		var held context.Context
		if call == "SET NX" {
			held, err = l.Lock(ctx)
		} else {
			held, err = l.Lock(ctx, aqs.WithFencingToken()) // no SET NX: the script first
		}
		require.NoError(t, err, call)
		select { // the watchdog would end a hold whose lease it counted from too early
		case <-held.Done():
			t.Fatalf("%s: the hold was lost: %v", call, context.Cause(held))
		case <-time.After(300 * time.Millisecond):
		}
		require.NoError(t, l.Unlock(held), call)
		n, _ := srv.Client(t).Exists(ctx, l.Key()).Result()
		assert.Zero(t, n, "%s: the lock is free after the one Unlock", call)
	}
}

// A release whose reply is lost reports success and releases once. go-redis does not send a
// release again (a second run would find the hold gone and report it lost); the Client does:
// the second send finds the hold gone, while its lease was still running, which only the first
// send can have done (the counting semaphore's release, and the leased semaphore's partial
// one, which leave nothing to find gone, answer from a key of the call's own instead). Every
// primitive's release, with every shape of release: the rwlock's read release by plain
// commands and by script (a re-entered hold), the leased semaphore's partial release.
// Afterwards the primitive is free: nothing was released twice either.
func TestReleaseWhoseReplyIsLostSucceedsAndReleasesOnce(t *testing.T) {
	for _, tc := range []struct {
		kind, op string
		shape    string
		command  string // in the release's command, and in no other
	}{
		{kindReentrant, opExclusive, "", scripts.LockRelease.SHA()},
		{kindFair, opExclusive, "", scripts.LockRelease.SHA()},
		{kindMulti, opExclusive, "", scripts.MultiRelease.SHA()},
		{kindRWLock, opExclusive, "", scripts.RWWriteRelease.SHA()},
		{kindRWLock, opRead, "plain commands", "zrem"},
		{kindRWLock, opRead, "re-entered", scripts.RWReadRelease.SHA()},
		{kindCounting, "1", "", scripts.SemRelease.SHA()},
		{kindLeased, "1", "", scripts.LSemRelease.SHA()},
		{kindLeased, "2", "part", scripts.LSemRelease.SHA()},
	} {
		t.Run(tc.kind+" "+tc.op+" "+tc.shape, func(t *testing.T) {
			ctx := context.Background()
			srv, px, c := behindAProxy(t, &redis.Options{})
			p, err := newPrim(ctx, c, primConfig{kind: tc.kind, name: redistest.Name(t),
				waiterTimeout: 5 * time.Second, permits: 3})
			require.NoError(t, err)
			defer srv.Client(t).Del(ctx, p.keys...)
			h, err := p.acquire(ctx, tc.op)
			require.NoError(t, err)
			release := h.Release
			switch tc.shape {
			case "re-entered":
				again, err := p.rw.RLock(h.ctx)
				require.NoError(t, err)
				require.NoError(t, p.rw.RUnlock(again))
			case "part":
				permit := h.permit
				release = func() error { return p.ls.ReleasePart(ctx, permit, 1) }
			}

			px.DropReplyTo(tc.command)
			require.NoError(t, release(), "the release ran, and its second send says so")
			require.Equal(t, 1, px.Dropped(), "the release's reply was dropped")
			if tc.shape == "part" {
				assert.Equal(t, 1, h.permit.Permits(), "one of the two permits given back")
				n, err := p.ls.Available(ctx)
				require.NoError(t, err)
				assert.Equal(t, 2, n, "one permit back, not two")
				require.NoError(t, h.Release())
			}
			free, err := p.free(ctx)
			require.NoError(t, err)
			assert.True(t, free, "free after the release")
		})
	}
}
