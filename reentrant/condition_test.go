package reentrant_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/condtest"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/reentrant"
)

// condKind is the reentrant lock for the conditions' suite.
var condKind = condtest.Kind{
	New: func(c *aqs.Client, name string) (condtest.Lock, error) { return reentrant.New(c, name) },
	Cond: func(l condtest.Lock, name string) (condtest.Cond, error) {
		return l.(*reentrant.Lock).NewCondition(name)
	},
	Deadlines: func(l condtest.Lock) string { return l.(*reentrant.Lock).Keys()[2] },
}

func TestCondition(t *testing.T) { condtest.Run(t, condKind) }

// Wait of a re-entered hold gives up the whole hold: every held context of it ends; the
// lock comes back as a new hold of count 1. A goroutine of the same Client that waited for
// the hold's release (the local hand-off) gets the lock from the Wait's release.
func TestConditionWaitOfAReenteredHoldWithALocalWaiter(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	ctx := context.Background()
	ls, cs := condtest.Locks(t, condKind, rdb, 1)
	l, c := ls[0].(*reentrant.Lock), cs[0]
	outer, err := l.Lock(ctx)
	require.NoError(t, err)
	inner, err := l.Lock(outer)
	require.NoError(t, err)

	local := make(chan context.Context, 1)
	go func() {
		h, err := l.Lock(ctx) // waits for this Client's hold: a local hand-off
		assert.NoError(t, err)
		local <- h
	}()
	require.Eventually(t, func() bool { return l.Boarded() > 0 }, 10*time.Second, time.Millisecond)

	out := make(chan condtest.Result, 1)
	go func() {
		h, err := c.Wait(inner)
		out <- condtest.Result{Held: h, Err: err}
	}()
	h := <-local // the Wait's release handed it the lock
	for _, old := range []context.Context{outer, inner} {
		<-old.Done()
		assert.ErrorIs(t, context.Cause(old), aqs.ErrReleased)
	}
	ok, err := c.Signal(h)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, l.Unlock(h))

	r := <-out
	require.NoError(t, r.Err)
	n, err := l.HoldCount(r.Held)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	require.ErrorIs(t, l.Unlock(outer), aqs.ErrNotOwner)
	require.NoError(t, l.Unlock(r.Held))
	condtest.Free(t, condKind, rdb, l, c)
}
