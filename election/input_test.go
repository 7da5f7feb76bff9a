package election_test

import (
	"context"
	"errors"
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
)

// Bad input: each test checks what the caller gets and that nothing changed in Redis (see
// docs/BAD_INPUT.md).

// assertNoKey checks that none of the election's keys exists.
func assertNoKey(t *testing.T, rdb redis.UniversalClient, e *election.Election) {
	t.Helper()
	n, err := rdb.Exists(context.Background(), e.Keys()...).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "a key of %v was written", e.Keys())
}

// snapshot returns the values of the election's lock key and leader record, to compare.
func snapshot(t *testing.T, rdb redis.UniversalClient, e *election.Election) [2]any {
	t.Helper()
	ctx := context.Background()
	v, err := rdb.Get(ctx, e.Keys()[0]).Result()
	if !errors.Is(err, redis.Nil) {
		require.NoError(t, err)
	}
	rec, err := rdb.HGetAll(ctx, e.Keys()[3]).Result()
	require.NoError(t, err)
	return [2]any{v, rec}
}

func TestNewRefusesBadArguments(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	c := newClient(t, rdb)
	name := redistest.Name(t)
	for what, call := range map[string]func() (*election.Election, error){
		"nil Client":  func() (*election.Election, error) { return election.New(nil, name) },
		"empty name":  func() (*election.Election, error) { return election.New(c, "") },
		"zero Option": func() (*election.Election, error) { return election.New(c, name, election.Option{}) },
		"WithWaiterTimeout(10ms)": func() (*election.Election, error) {
			return election.New(c, name, election.WithWaiterTimeout(10*time.Millisecond))
		},
		"WithWaiterTimeout(-1s)": func() (*election.Election, error) {
			return election.New(c, name, election.WithWaiterTimeout(-time.Second))
		},
		"WithWaiterTimeout, zero one": func() (*election.Election, error) {
			return election.New(c, name, election.WithWaiterTimeout(time.Second), election.Option{})
		},
	} {
		e, err := call()
		assert.ErrorIs(t, err, aqs.ErrInvalidArgument, what)
		assert.Nil(t, e, what)
	}
	n, err := rdb.Keys(context.Background(), "*"+name+"*").Result()
	require.NoError(t, err)
	assert.Empty(t, n, "keys written")
}

// A context that leads the election already, or one derived from it, campaigns in vain: an
// invalid argument, and the leadership is untouched.
func TestCampaignInALeadingContextIsAnInvalidArgument(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	c := newClient(t, rdb)
	e := newElection(t, c)
	ctx := context.Background()
	lead, err := e.Campaign(ctx, "leader")
	require.NoError(t, err)
	before := snapshot(t, rdb, e)
	derived, cancel := context.WithTimeout(lead, time.Minute)
	defer cancel()
	for what, c := range map[string]context.Context{"leading": lead, "derived": derived} {
		again, err := e.Campaign(c, "again")
		assert.ErrorIs(t, err, aqs.ErrInvalidArgument, what)
		assert.Nil(t, again, what)
	}
	// Through another value of the election on the same Client: the same election.
	same, err := election.New(c, e.Name())
	require.NoError(t, err)
	_, err = same.Campaign(lead, "again")
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "another value of the election")
	assert.Equal(t, before, snapshot(t, rdb, e), "the leadership is untouched")
	assert.Zero(t, candidatesQueued(t, rdb, e))
	require.NoError(t, lead.Err())
	require.NoError(t, e.Resign(lead))
	assertNothingLeft(t, rdb, e)
}

// A value longer than MaxValue is an invalid argument for Campaign and Proclaim, which write
// nothing; a value of MaxValue bytes, of any bytes, and an empty one lead and travel intact.
func TestValueOverMaxValueIsAnInvalidArgument(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	e := newElection(t, newClient(t, rdb))
	ctx := context.Background()
	over := strings.Repeat("v", election.MaxValue+1)
	lead, err := e.Campaign(ctx, over)
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "Campaign")
	assert.Nil(t, lead)
	assertNoKey(t, rdb, e)

	full := strings.Repeat("\x00 \xff", election.MaxValue/3) + strings.Repeat("w", election.MaxValue%3)
	require.Len(t, full, election.MaxValue)
	lead, err = e.Campaign(ctx, full)
	require.NoError(t, err)
	l, ok, err := e.Leader(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	assert.True(t, l.Value == full, "the value of MaxValue bytes travels intact")

	before := snapshot(t, rdb, e)
	assert.ErrorIs(t, e.Proclaim(lead, over), aqs.ErrInvalidArgument, "Proclaim")
	assert.Equal(t, before, snapshot(t, rdb, e), "the value is unchanged")
	require.NoError(t, e.Proclaim(lead, ""))
	l, ok, err = e.Leader(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "", l.Value, "an empty value")
	require.NoError(t, e.Resign(lead))
	assertNothingLeft(t, rdb, e)
}

// A done context fails Campaign with its cause, and nothing is written.
func TestDoneContextFailsCampaignWithItsCauseAndWritesNothing(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	e := newElection(t, newClient(t, rdb))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	withCause, cancelCause := context.WithCancelCause(context.Background())
	cancelCause(errors.New("the caller gave up"))
	expired, cancelExpired := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	cancelExpired() // a no-op on a context already past its deadline
	for what, ctx := range map[string]context.Context{"cancelled": cancelled, "cause": withCause, "deadline": expired} {
		lead, err := e.Campaign(ctx, what)
		assert.ErrorIs(t, err, context.Cause(ctx), what)
		assert.Nil(t, lead, what)
	}
	assertNoKey(t, rdb, e)
}

// Proclaim and Resign through a context that does not lead the election fail with
// aqs.ErrNotOwner and change nothing: a context that never led, one that resigned, one that
// leads another election, and one that leads this election through another Client.
func TestProclaimAndResignOfAContextThatDoesNotLeadAreNotOwner(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	ctx := context.Background()
	c := newClient(t, rdb)
	e := newElection(t, c)
	other := newElection(t, c)
	c2 := newClient(t, rdb)
	e2, err := election.New(c2, e.Name())
	require.NoError(t, err)

	resigned, err := e.Campaign(ctx, "resigned")
	require.NoError(t, err)
	require.NoError(t, e.Resign(resigned))
	otherLead, err := other.Campaign(ctx, "other")
	require.NoError(t, err)
	lead, err := e2.Campaign(ctx, "leader")
	require.NoError(t, err)
	before := snapshot(t, rdb, e)

	for what, c := range map[string]context.Context{
		"never led": ctx, "resigned": resigned, "leads another election": otherLead,
		"leads through another Client": lead,
	} {
		err := e.Proclaim(c, "usurper")
		assert.ErrorIs(t, err, aqs.ErrNotOwner, "Proclaim: %s", what)
		assert.NotErrorIs(t, err, aqs.ErrLockLost, "Proclaim: %s", what)
		assert.ErrorIs(t, e.Resign(c), aqs.ErrNotOwner, "Resign: %s", what)
	}
	assert.Equal(t, before, snapshot(t, rdb, e), "the leadership is untouched")
	require.NoError(t, lead.Err())
	require.NoError(t, otherLead.Err())
	leaderIs(t, e, election.Leadership{Value: "leader", Token: tokenOf(t, lead), Client: c2.ID()})
	require.NoError(t, e2.Resign(lead))
	require.NoError(t, other.Resign(otherLead))
	assertNothingLeft(t, rdb, e)
	assertNothingLeft(t, rdb, other)
}

// The election's keys holding values aqs did not write: the lock key a string of another
// program, the leader record a string. Leader and Campaign fail with aqs.ErrWrongType, and
// the foreign values stay as they were; a failed Campaign leaves nothing of its own.
func TestForeignValuesInTheElectionsKeysAreAWrongType(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	c := newClient(t, rdb)
	ctx := context.Background()

	t.Run("lock key", func(t *testing.T) {
		e := newElection(t, c)
		require.NoError(t, rdb.Set(ctx, e.Keys()[0], "precious", 0).Err())
		t.Cleanup(func() { rdb.Del(context.Background(), e.Keys()[0]) })
		_, _, err := e.Leader(ctx)
		assert.ErrorIs(t, err, aqs.ErrWrongType, "Leader")
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		lead, err := e.Campaign(cctx, "candidate")
		assert.ErrorIs(t, err, aqs.ErrWrongType, "Campaign")
		assert.Nil(t, lead)
		assertForeign(t, rdb, e.Keys()[0], "precious")
		n, err := rdb.Exists(ctx, e.Keys()[1:]...).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "no queue entry, no leader record")
	})

	t.Run("leader record", func(t *testing.T) {
		e := newElection(t, c)
		record := e.Keys()[3]
		require.NoError(t, rdb.Set(ctx, record, "precious", 0).Err())
		t.Cleanup(func() { rdb.Del(context.Background(), record) })
		lead, err := e.Campaign(ctx, "candidate")
		assert.ErrorIs(t, err, aqs.ErrWrongType, "Campaign")
		assert.Nil(t, lead)
		assertForeign(t, rdb, record, "precious")
		n, err := rdb.Exists(ctx, e.Keys()[:3]...).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "the failed campaign gave the lock back, and queued nothing")
	})
}

// assertForeign checks that key still holds value, with no expiry set.
func assertForeign(t *testing.T, rdb redis.UniversalClient, key, value string) {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Result()
	require.NoError(t, err, "key %s", key)
	assert.Equal(t, value, v, "key %s", key)
	pttl, err := rdb.PTTL(context.Background(), key).Result()
	require.NoError(t, err)
	assert.Equal(t, time.Duration(-1), pttl, "no expiry was set on %s", key)
}

// A context that holds the fair lock of the election's name, on the election's Client, is not
// a leader's: its Campaign is an invalid argument, its Proclaim and Resign fail with
// aqs.ErrNotOwner alone, and none of them touches the fair hold, which its Unlock then ends.
func TestFairHoldOfTheNameIsNoLeadership(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	ctx := context.Background()
	c := newClient(t, rdb)
	e := newElection(t, c)
	f, err := fair.New(c, e.Name())
	require.NoError(t, err)
	held, err := f.Lock(ctx)
	require.NoError(t, err)
	before := snapshot(t, rdb, e)

	_, err = e.Campaign(held, "from a fair hold")
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "Campaign")
	require.NoError(t, held.Err(), "Campaign left the fair hold untouched")
	err = e.Proclaim(held, "from a fair hold")
	assert.ErrorIs(t, err, aqs.ErrNotOwner, "Proclaim")
	assert.NotErrorIs(t, err, aqs.ErrLockLost, "Proclaim")
	require.NoError(t, held.Err(), "Proclaim left the fair hold untouched: %v", context.Cause(held))
	err = e.Resign(held)
	assert.ErrorIs(t, err, aqs.ErrNotOwner, "Resign")
	require.NoError(t, held.Err(), "Resign left the fair hold untouched: %v", context.Cause(held))
	assert.Equal(t, before, snapshot(t, rdb, e), "the lock is unchanged, and nobody leads")
	noLeader(t, e)
	assert.Zero(t, candidatesQueued(t, rdb, e))
	require.NoError(t, f.Unlock(held), "the fair hold is still the lock's")
	assertNothingLeft(t, rdb, e)
}
