package semaphore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/semaphore"
)

// A semaphore made WithSize needs no TrySetPermits, and survives a restart of a Redis
// without persistence: the first call after it sets the size again. A counting permit held
// across the restart is absorbed by its release; a leased one is reported gone.
func TestWithSizeSeedsThePermitsAndSurvivesARestart(t *testing.T) {
	ctx := context.Background()
	srv := redistest.NewServer(t)
	c := newClient(t, srv.Client(t))
	name := redistest.Name(t)
	s, err := semaphore.New(c, name, semaphore.WithSize(2))
	require.NoError(t, err)
	l, err := semaphore.NewLeased(c, name+"-l", semaphore.WithSize(2))
	require.NoError(t, err)

	require.NoError(t, s.Acquire(ctx, 1), "no TrySetPermits needed")
	p, err := l.Acquire(ctx, 1)
	require.NoError(t, err)
	n, err := s.Available(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)

	require.NoError(t, srv.Kill())
	require.NoError(t, srv.Restart()) // no persistence: every key is gone

	require.NoError(t, s.Release(ctx, 1), "a release across the restart is absorbed")
	n, err = s.Available(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the size is set again, all available")
	require.NoError(t, s.Acquire(ctx, 2))
	require.NoError(t, s.Release(ctx, 2))

	assert.Error(t, l.Release(ctx, p), "the leased permit held at the restart is gone")
	q, err := l.Acquire(ctx, 2)
	require.NoError(t, err, "the size is set again")
	require.NoError(t, l.Release(ctx, q))

	_, err = semaphore.New(c, name, semaphore.WithSize(-1))
	assert.ErrorIs(t, err, aqs.ErrInvalidArgument)
}
