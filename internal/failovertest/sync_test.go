package failovertest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/election"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/multilock"
	"github.com/redaqs/aqs/reentrant"
	"github.com/redaqs/aqs/rwlock"
	"github.com/redaqs/aqs/semaphore"
)

// newClient returns an aqs Client on rdb, closed at the end of the test.
var newClient = redistest.NewClient

func TestReplicaSyncRejectsBadOptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Single(t).Client(t)
	for _, tc := range []struct {
		name     string
		replicas int
		timeout  time.Duration
	}{
		{"no replicas", 0, time.Second},
		{"negative replicas", -1, time.Second},
		{"no timeout", 1, 0},
		{"negative timeout", 1, -time.Second},
		{"below a millisecond", 1, 500 * time.Microsecond},
		{"not whole milliseconds", 1, 1500 * time.Microsecond},
		{"the default read timeout", 1, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := aqs.New(ctx, rdb, aqs.WithReplicaSync(tc.replicas, tc.timeout))
			assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
		})
	}
	t.Run("not below the client's read timeout", func(t *testing.T) {
		opts := redistest.Single(t).Options()
		opts.ReadTimeout = 100 * time.Millisecond
		short := redis.NewClient(opts)
		t.Cleanup(func() { short.Close() })
		_, err := aqs.New(ctx, short, aqs.WithReplicaSync(1, 100*time.Millisecond))
		assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
		assert.ErrorContains(t, err, "read timeout")
		c, err := aqs.New(ctx, short, aqs.WithReplicaSync(1, 99*time.Millisecond))
		require.NoError(t, err)
		require.NoError(t, c.Close())
	})
}

// A server that refuses WAIT (here an ACL user denied it) cannot serve the policy: New says
// so, rather than the policy being skipped.
func TestReplicaSyncFailsOnAServerThatRefusesWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Single(t)
	user := redistest.Name(t)
	require.NoError(t, srv.Client(t).Do(ctx, "ACL", "SETUSER", user, "on", ">pw", "~*", "&*", "+@all", "-wait").Err())
	opts := srv.Options()
	opts.Username, opts.Password = user, "pw"
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })

	_, err := aqs.New(ctx, rdb, aqs.WithReplicaSync(1, 100*time.Millisecond))
	require.ErrorIs(t, err, aqs.ErrReplicaSync)
	assert.ErrorContains(t, err, "does not accept WAIT")
	assert.ErrorContains(t, err, "NOPERM")
	// Without the policy the same user is fine.
	c, err := aqs.New(ctx, rdb)
	require.NoError(t, err)
	require.NoError(t, c.Close())
}

// Without replicas nothing is ever acknowledged: every kind of acquisition, and an election's
// campaign, fails with a *ReplicaSyncError saying 0 of 1, and is undone. On Redis Cluster this also shows that WAIT
// reaches the master of the key's slot (the shared cluster has no replicas).
func TestReplicaSyncWithoutReplicasUndoesEveryAcquisition(t *testing.T) {
	t.Parallel()
	for _, topo := range []struct {
		name string
		rdb  func(t *testing.T) redis.UniversalClient
	}{
		{"single", func(t *testing.T) redis.UniversalClient { return redistest.Single(t).Client(t) }},
		{"cluster", func(t *testing.T) redis.UniversalClient { return redistest.Cluster(t).Client(t) }},
	} {
		t.Run(topo.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := newClient(t, topo.rdb(t), aqs.WithReplicaSync(1, 20*time.Millisecond))
			name := redistest.Name(t)
			unacked := func(t *testing.T, err error) {
				t.Helper()
				require.ErrorIs(t, err, aqs.ErrReplicaSync)
				var e *aqs.ReplicaSyncError
				require.True(t, errors.As(err, &e), "%v", err)
				assert.Equal(t, 0, e.Acked)
				assert.Equal(t, 1, e.Want)
				assert.NoError(t, e.UndoErr)
				assert.Contains(t, err.Error(), "0 of 1 replicas acknowledged")
			}

			r, err := reentrant.New(c, name+"-r")
			require.NoError(t, err)
			_, err = r.Lock(ctx) // SET NX
			unacked(t, err)
			_, _, err = r.TryLock(ctx) // lock_acquire.lua
			unacked(t, err)
			_, _, err = r.TryLock(ctx, aqs.WithFencingToken())
			unacked(t, err)
			locked, err := r.IsLocked(ctx)
			require.NoError(t, err)
			assert.False(t, locked, "reentrant lock left held")

			f, err := fair.New(c, name+"-f")
			require.NoError(t, err)
			_, err = f.Lock(ctx) // SET NX
			unacked(t, err)
			_, _, err = f.TryLock(ctx) // fair_acquire.lua
			unacked(t, err)
			locked, err = f.IsLocked(ctx)
			require.NoError(t, err)
			assert.False(t, locked, "fair lock left held")

			m, err := multilock.New(c, []string{"{" + name + "-m}:a", "{" + name + "-m}:b"})
			require.NoError(t, err)
			_, err = m.Lock(ctx) // multi_acquire.lua
			unacked(t, err)
			_, _, err = m.TryLock(ctx, aqs.WithFencingToken())
			unacked(t, err)
			for _, k := range m.Keys() {
				n, err := topo.rdb(t).Exists(ctx, k).Result()
				require.NoError(t, err)
				assert.Zero(t, n, "multi-lock key %s left behind", k)
			}

			rw, err := rwlock.New(c, name+"-rw")
			require.NoError(t, err)
			_, err = rw.Lock(ctx)
			unacked(t, err)
			_, err = rw.RLock(ctx)
			unacked(t, err)
			locked, err = rw.IsLocked(ctx)
			require.NoError(t, err)
			assert.False(t, locked, "read-write lock left held")

			s, err := semaphore.New(c, name+"-s")
			require.NoError(t, err)
			_, err = s.TrySetPermits(ctx, 2) // not an acquisition: no WAIT
			require.NoError(t, err)
			unacked(t, s.Acquire(ctx, 1)) // sem_try.lua
			_, err = s.TryAcquire(ctx, 2)
			unacked(t, err)
			n, err := s.Available(ctx)
			require.NoError(t, err)
			assert.Equal(t, 2, n, "counting permits not given back")

			ls, err := semaphore.NewLeased(c, name+"-l")
			require.NoError(t, err)
			_, err = ls.TrySetPermits(ctx, 2)
			require.NoError(t, err)
			_, err = ls.Acquire(ctx, 1)
			unacked(t, err)
			n, err = ls.Available(ctx)
			require.NoError(t, err)
			assert.Equal(t, 2, n, "leased permits not given back")

			// An election: the campaign's hold is refused, so nobody leads, and nothing of the
			// election is left in Redis, its leader record included.
			el, err := election.New(c, name+"-e")
			require.NoError(t, err)
			_, err = el.Campaign(ctx, "unacknowledged")
			unacked(t, err)
			l, leads, err := el.Leader(ctx)
			require.NoError(t, err)
			assert.False(t, leads, "%+v leads", l)
			for _, k := range el.Keys() {
				n, err := topo.rdb(t).Exists(ctx, k).Result()
				require.NoError(t, err)
				assert.Zero(t, n, "election key %s left behind", k)
			}
		})
	}
}

// waitCalls returns how many WAIT commands the server at addr has run.
func waitCalls(t *testing.T, addr string) int {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_wait:calls="); ok {
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			require.NoError(t, err)
			return n
		}
	}
	return 0
}

// With a replica, acquisitions succeed, each followed by one WAIT, and so do grants handed
// over by a release: the waiter confirms its grant with a WAIT of its own before its call
// returns.
func TestReplicaSyncWithAReplicaAcquiresAndConfirmsGrants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := redistest.NewSentinel(t)
	c := newClient(t, g.Client(t), aqs.WithReplicaSync(1, time.Second))
	name := redistest.Name(t)
	waits := func() int { return waitCalls(t, g.MasterAddr()) }

	r, err := reentrant.New(c, name+"-r")
	require.NoError(t, err)
	before := waits()
	held, err := r.Lock(ctx)
	require.NoError(t, err)
	assert.Equal(t, before+1, waits(), "one WAIT for the acquisition")
	require.NoError(t, r.Unlock(held))
	assert.Equal(t, before+1, waits(), "no WAIT for the release")

	// The fair lock: a waiter granted the lock by the holder's release.
	f, err := fair.New(c, name+"-f")
	require.NoError(t, err)
	held, err = f.Lock(ctx)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		h, err := f.Lock(ctx)
		if err == nil {
			err = f.Unlock(h)
		}
		got <- err
	}()
	require.Eventually(t, func() bool {
		in, err := f.Info(ctx)
		return err == nil && in.Locked && queued(t, g, f.Key()+":q") == 1
	}, 10*time.Second, 5*time.Millisecond, "the waiter never queued")
	before = waits()
	require.NoError(t, f.Unlock(held))
	require.NoError(t, <-got)
	assert.GreaterOrEqual(t, waits(), before+1, "the granted waiter ran no WAIT")

	// A multi-lock: one name granted by a fair lock's release, the other free; the waiter
	// confirms the whole hold with a WAIT of its own.
	ml, err := multilock.New(c, []string{"{" + name + "-m}:a", "{" + name + "-m}:b"})
	require.NoError(t, err)
	fa, err := fair.New(c, "{"+name+"-m}:a")
	require.NoError(t, err)
	held, err = fa.Lock(ctx)
	require.NoError(t, err)
	go func() {
		h, err := ml.Lock(ctx)
		if err == nil {
			err = ml.Unlock(h)
		}
		got <- err
	}()
	require.Eventually(t, func() bool { return queued(t, g, fa.Key()+":q") == 1 },
		10*time.Second, 5*time.Millisecond, "the multi-lock waiter never queued")
	before = waits()
	require.NoError(t, fa.Unlock(held))
	require.NoError(t, <-got)
	assert.GreaterOrEqual(t, waits(), before+1, "the multi-lock waiter ran no WAIT")

	// A counting semaphore: permits granted by a release.
	s, err := semaphore.New(c, name+"-s")
	require.NoError(t, err)
	_, err = s.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	require.NoError(t, s.Acquire(ctx, 1))
	done := make(chan error, 1)
	go func() { done <- s.Acquire(ctx, 1) }()
	require.Eventually(t, func() bool { return queued(t, g, s.Key()+":q") == 1 },
		10*time.Second, 5*time.Millisecond, "the semaphore waiter never queued")
	before = waits()
	require.NoError(t, s.Release(ctx, 1))
	require.NoError(t, <-done)
	assert.GreaterOrEqual(t, waits(), before+1, "the granted waiter ran no WAIT")
	require.NoError(t, s.Release(ctx, 1))

	// A leased semaphore: a permit granted by a release.
	ls, err := semaphore.NewLeased(c, name+"-l")
	require.NoError(t, err)
	_, err = ls.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	p, err := ls.Acquire(ctx, 1)
	require.NoError(t, err)
	granted := make(chan *semaphore.Permit, 1)
	go func() {
		p, err := ls.Acquire(ctx, 1)
		assert.NoError(t, err)
		granted <- p
	}()
	require.Eventually(t, func() bool { return queued(t, g, ls.Key()+":q") == 1 },
		10*time.Second, 5*time.Millisecond, "the leased waiter never queued")
	require.NoError(t, ls.Release(ctx, p))
	p = <-granted
	require.NotNil(t, p)
	require.NoError(t, ls.Release(ctx, p))

	// An election: a campaign's hold and its leader record are acknowledged, by a WAIT each,
	// before Campaign returns, so the replica has the record then; so it has the record of a
	// candidate that a resignation made leader.
	el, err := election.New(c, name+"-e")
	require.NoError(t, err)
	replica := redis.NewClient(&redis.Options{Addr: g.ReplicaAddr()})
	defer replica.Close()
	record := el.Keys()[len(el.Keys())-1]
	onReplica := func(value string) {
		t.Helper()
		v, err := replica.HGet(ctx, record, "v").Result()
		require.NoError(t, err, "the leader record on the replica")
		assert.Equal(t, value, v, "the leader's value on the replica")
	}
	before = waits()
	lead, err := el.Campaign(ctx, "first")
	require.NoError(t, err)
	assert.Equal(t, before+2, waits(), "a WAIT for the hold, one for the record")
	onReplica("first")
	next := make(chan context.Context, 1)
	go func() {
		lead, err := el.Campaign(ctx, "second")
		assert.NoError(t, err)
		next <- lead
	}()
	require.Eventually(t, func() bool { return queued(t, g, el.Keys()[0]+":q") == 1 },
		10*time.Second, 5*time.Millisecond, "the candidate never queued")
	before = waits()
	require.NoError(t, el.Resign(lead))
	lead = <-next
	require.NotNil(t, lead)
	assert.GreaterOrEqual(t, waits(), before+2, "the granted candidate's hold and record each had a WAIT")
	onReplica("second")
	require.NoError(t, el.Resign(lead))

	// The cost, logged for the README: uncontended Lock+Unlock of a reentrant lock with and
	// without the policy, on loopback with a direct replication link.
	plain := newClient(t, g.Client(t))
	for _, tc := range []struct {
		name string
		c    *aqs.Client
	}{{"policy off", plain}, {"policy on", c}} {
		l, err := reentrant.New(tc.c, name+"-cost")
		require.NoError(t, err)
		const n = 200
		start := time.Now()
		for range n {
			held, err := l.Lock(ctx)
			require.NoError(t, err)
			require.NoError(t, l.Unlock(held))
		}
		t.Logf("%s: uncontended Lock+Unlock %v", tc.name, (time.Since(start) / n).Round(time.Microsecond))
	}
}

// A waiter granted permits of a counting semaphore that the replicas then fail to acknowledge
// gives them back, and its call is refused by its deadline: the give-back does not wait for
// the replicas (they do not answer), as a release by a caller does for up to 3s.
func TestAGrantTheReplicasDoNotAcknowledgeIsRefusedByTheDeadline(t *testing.T) {
	t.Parallel()
	const syncTimeout = 300 * time.Millisecond
	ctx := context.Background()
	g := redistest.NewSentinel(t)
	name := redistest.Name(t)
	waiter, err := semaphore.New(newClient(t, g.Client(t), aqs.WithReplicaSync(1, syncTimeout)), name)
	require.NoError(t, err)
	// The releaser's Client has no policy: its release grants the permit at once.
	releaser, err := semaphore.New(newClient(t, g.Client(t)), name)
	require.NoError(t, err)
	_, err = releaser.TrySetPermits(ctx, 1)
	require.NoError(t, err)
	require.NoError(t, releaser.Acquire(ctx, 1))

	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		err := waiter.Acquire(ctx, 1)
		if err == nil {
			err = errors.New("acquired")
		}
		got <- err
	}()
	require.Eventually(t, func() bool { return queued(t, g, waiter.Key()+":q") == 1 },
		10*time.Second, 5*time.Millisecond, "the waiter never queued")
	require.NoError(t, g.PauseReplicas())
	t.Cleanup(func() { _ = g.ResumeReplicas() })
	require.NoError(t, releaser.Release(ctx, 1))

	err = <-got
	var se *aqs.ReplicaSyncError
	require.ErrorAs(t, err, &se, "the call ended by its deadline, not by its refusal")
	assert.NoError(t, se.UndoErr)
	n, err := releaser.Available(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the permit granted to the refused waiter was not given back")
	require.NoError(t, g.ResumeReplicas())
}

// queued returns the length of a wait queue list on the group's master.
func queued(t *testing.T, g *redistest.RedisSentinel, key string) int64 {
	c := redis.NewClient(&redis.Options{Addr: g.MasterAddr()})
	defer c.Close()
	n, err := c.LLen(context.Background(), key).Result()
	if err != nil {
		t.Logf("LLEN %s: %v", key, err)
	}
	return n
}
