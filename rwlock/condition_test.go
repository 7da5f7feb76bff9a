package rwlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/condtest"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/rwlock"
)

// condKind is the read-write lock's write side for the conditions' suite.
var condKind = condtest.Kind{
	New: func(c *aqs.Client, name string) (condtest.Lock, error) { return rwlock.New(c, name) },
	Cond: func(l condtest.Lock, name string) (condtest.Cond, error) {
		return l.(*rwlock.Lock).NewCondition(name)
	},
	Deadlines: func(l condtest.Lock) string { return l.(*rwlock.Lock).Keys()[4] },
}

func TestCondition(t *testing.T) { condtest.Run(t, condKind) }

// A signalled writer queues behind the readers queued before the Signal.
func TestConditionSignalledWriterQueuesBehindReaders(t *testing.T) {
	rdb := redistest.Single(t).Client(t)
	ctx := context.Background()
	ls, cs := condtest.Locks(t, condKind, rdb, 1)
	l, c := ls[0].(*rwlock.Lock), cs[0]
	_, out := condtest.StartWait(t, ctx, l, c)
	condtest.Waiting(t, rdb, c, 1)
	w, err := l.Lock(ctx) // another writer holds
	require.NoError(t, err)
	reader := make(chan context.Context, 1)
	go func() {
		h, err := l.RLock(ctx)
		assert.NoError(t, err)
		reader <- h
	}()
	require.Eventually(t, func() bool { return rdb.ZCard(ctx, l.Keys()[4]).Val() == 1 }, 10*time.Second, time.Millisecond)
	ok, err := c.Signal(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, l.Unlock(w))
	r := <-reader // the reader queued first: it reads first
	select {
	case got := <-out:
		t.Fatalf("the signalled writer returned (%v) while a reader queued before it holds", got.Err)
	default:
	}
	require.NoError(t, l.RUnlock(r))
	got := <-out
	require.NoError(t, got.Err)
	require.NoError(t, l.Unlock(got.Held))
	condtest.Free(t, condKind, rdb, l, c)
}
