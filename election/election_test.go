package election_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/election"
)

func TestCampaignLeadsAndResignHandsOn(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		c1, c2 := newClient(t, rdb), newClient(t, rdb)
		e1 := newElection(t, c1)
		e2, err := election.New(c2, e1.Name())
		require.NoError(t, err)

		_, ok, err := e1.Leader(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "nobody campaigned yet")

		obs, stop := context.WithCancel(ctx)
		defer stop()
		changes := e2.Observe(obs)

		lead1, err := e1.Campaign(ctx, "one")
		require.NoError(t, err)
		t1, err := aqs.FencingToken(lead1)
		require.NoError(t, err)
		l, ok, err := e2.Leader(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, election.Leadership{Value: "one", Token: t1, Client: c1.ID()}, l)
		assert.Equal(t, l, next(t, changes))

		require.NoError(t, e1.Proclaim(lead1, "one, again"))
		assert.Equal(t, election.Leadership{Value: "one, again", Token: t1, Client: c1.ID()}, next(t, changes))

		second := make(chan context.Context, 1)
		go func() {
			lead2, err := e2.Campaign(ctx, "two")
			assert.NoError(t, err)
			second <- lead2
		}()
		select {
		case <-second:
			t.Fatal("a second candidate led while the first did")
		case <-time.After(50 * time.Millisecond):
		}
		require.NoError(t, e1.Resign(lead1))
		assert.ErrorIs(t, context.Cause(lead1), aqs.ErrReleased)
		lead2 := <-second
		t2, err := aqs.FencingToken(lead2)
		require.NoError(t, err)
		assert.Greater(t, t2, t1)
		assert.Equal(t, election.Leadership{Value: "two", Token: t2, Client: c2.ID()}, next(t, changes))
		assert.ErrorIs(t, e1.Proclaim(lead1, "stale"), aqs.ErrNotOwner)
		require.NoError(t, e2.Resign(lead2))
		_, ok, err = e1.Leader(ctx)
		require.NoError(t, err)
		assert.False(t, ok)
		stop()
		for range changes {
		}
	})
}

// next returns the next change an observer reports, bounded.
func next(t *testing.T, changes <-chan election.Leadership) election.Leadership {
	t.Helper()
	select {
	case l, ok := <-changes:
		require.True(t, ok, "the observer's channel closed")
		return l
	case <-time.After(5 * time.Second):
		t.Fatal("no change observed")
		return election.Leadership{}
	}
}
