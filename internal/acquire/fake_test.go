package acquire_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/acquire"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/scripts"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// The engine against a rule set of its own: mutex is an exclusive lock whose state lives in
// this process, as AQS's Javadoc Mutex is a lock on AbstractQueuedSynchronizer, so that what
// the engine does with each reply is seen directly, without Redis's scripts. Only the
// Client's hub uses Redis here: a waiter subscribes to its grant channel, and the mutex tells
// it of a grant as a script's PUBLISH would, through the hub.

// mutex is the rule set: a holder and a FIFO queue of hold ids.
type mutex struct {
	t      *testing.T
	q      *acquire.Queue
	grants string

	mu       sync.Mutex
	holder   string
	queue    []string
	attempts []string // the hold id of every attempt, in order
	wait     time.Duration
	lose     bool        // grants are not told: the waiter must find them by an attempt
	refuse   error       // attempts fail with this refusal
	drop     map[int]int // attempt number -> reply Dropped to it
}

func newMutex(t *testing.T) *mutex {
	c, err := aqs.New(context.Background(), redistest.Single(t).Client(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	rt := core.RuntimeOf(c)
	name := redistest.Name(t)
	m := &mutex{t: t, grants: "fake:{" + name + "}:c:" + rt.ID, wait: time.Minute, drop: map[int]int{}}
	// A waiter timeout of an hour: no heartbeat starts, since a mutex has no script for it.
	m.q = acquire.New(rt, acquire.Config{Grants: m.grants, WaiterTimeout: time.Hour, Name: name, Key: "fake:{" + name + "}"})
	return m
}

// call makes one call of the engine on the mutex: block, or wait up to wait (0: not at all).
func (m *mutex) call(ctx context.Context, block bool, wait time.Duration) (context.Context, bool, error) {
	won, ok, err := m.q.Acquire(ctx, &acquire.Call{
		Rules: m, Block: block, Wait: wait, Primitive: "mutex",
		Hold: &acquire.HoldSpec{Key: m.q.Runtime().ID + ":mutex", Lease: time.Hour, Release: m.unlock},
	})
	return won.Held, ok, err
}

func (m *mutex) unlock(held context.Context) error {
	return acquire.Unlock(m.q, held, m.q.Runtime().ID+":mutex", acquire.Op{Kind: "mutex", Verb: "unlock", Name: "m"},
		func(_ context.Context, e acquire.Ending) (scripts.Release, error) {
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.holder != e.Hold.ID {
				return scripts.Release{Kind: scripts.NotHeld}, nil
			}
			return scripts.Release{Kind: m.handOff()}, nil
		})
}

// handOff frees the lock and grants it to the queue's head, with m.mu held.
func (m *mutex) handOff() scripts.ReleaseKind {
	m.holder = ""
	if len(m.queue) == 0 {
		return scripts.Freed
	}
	m.holder, m.queue = m.queue[0], m.queue[1:]
	if !m.lose {
		m.q.Runtime().Hub.Deliver(m.grants, m.holder)
	}
	return scripts.HandedRemote
}

func (m *mutex) state() (string, []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.holder, slices.Clone(m.queue)
}

func (m *mutex) Fast(_ context.Context, hold string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.holder == "" && len(m.queue) == 0 {
		m.holder = hold
		return true, nil
	}
	return false, nil
}

func (m *mutex) Attempt(_ context.Context, hold string, t acquire.Try) (scripts.Attempt, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.attempts = append(m.attempts, hold)
	switch {
	case m.refuse != nil:
		return scripts.Attempt{}, acquire.Refuse(m.refuse)
	case m.drop[len(m.attempts)] > 0:
		m.queue = slices.DeleteFunc(m.queue, func(h string) bool { return h == hold })
		return scripts.Attempt{Status: scripts.Dropped}, nil
	case m.holder == hold:
		return scripts.Attempt{Status: scripts.Granted}, nil
	case m.holder == "" && (len(m.queue) == 0 || m.queue[0] == hold):
		m.queue = slices.DeleteFunc(m.queue, func(h string) bool { return h == hold })
		m.holder = hold
		return scripts.Attempt{Status: scripts.Acquired}, nil
	case !t.Join:
		return scripts.Attempt{Status: scripts.Busy}, nil
	}
	if !slices.Contains(m.queue, hold) {
		m.queue = append(m.queue, hold)
	}
	return scripts.Attempt{Status: scripts.Queued, Wait: m.wait, QueueLen: len(m.queue)}, nil
}

func (m *mutex) GiveUp(_ context.Context, hold string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queue = slices.DeleteFunc(m.queue, func(h string) bool { return h == hold })
	if m.holder == hold {
		m.handOff()
	}
	return nil
}

func (m *mutex) Beat(string) *core.Beat { m.t.Error("a mutex's waiter has no heartbeat"); return nil }

func (m *mutex) Confirm(context.Context, string) error { return nil }

func (m *mutex) Undo(ctx context.Context, hold string) error { return m.GiveUp(ctx, hold) }

func (m *mutex) Clear(ctx context.Context, hold string, _ error) error { return m.GiveUp(ctx, hold) }

// One call's outcome, for each reply the rule set can give: what the call returns, and what it
// leaves in the rule set's state (nothing but its own hold, when it holds).
func TestEngineAgainstAMutex(t *testing.T) {
	errRefused := errors.New("refused")
	for _, tc := range []struct {
		name    string
		setup   func(m *mutex) // before the call, with the lock held by "other" when busy
		busy    bool
		block   bool
		wait    time.Duration
		ctx     time.Duration // a deadline for the call's context; 0: none
		ok      bool
		err     error // matched with errors.Is
		queued  []string
		holdIDs int // distinct hold ids of the call's attempts (a dropped waiter rejoins)
	}{
		{name: "uncontended, the fast way", block: true, ok: true},
		{name: "uncontended, no wait: one full attempt", ok: true, holdIDs: 1},
		{name: "busy, no wait", busy: true, holdIDs: 1},
		{name: "busy, a wait bound", busy: true, wait: 30 * time.Millisecond, holdIDs: 1},
		{name: "busy, until the deadline", busy: true, block: true, ctx: 30 * time.Millisecond,
			err: context.DeadlineExceeded, holdIDs: 1},
		{name: "a refusal", busy: true, block: true, setup: func(m *mutex) { m.refuse = errRefused },
			err: errRefused, holdIDs: 1},
		{name: "dropped, then free: a new hold id", setup: func(m *mutex) { m.drop[1] = 1 }, ok: true, holdIDs: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMutex(t)
			if tc.busy {
				m.holder = "other"
			}
			if tc.setup != nil {
				tc.setup(m)
			}
			deadline := 10 * time.Second // no case waits that long: a bound on a broken one
			if tc.ctx > 0 {
				deadline = tc.ctx
			}
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			held, ok, err := m.call(ctx, tc.block, tc.wait)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.ok, ok)
			holder, queue := m.state()
			if tc.ok {
				require.NotNil(t, held)
				assert.NotEqual(t, "other", holder)
				assert.NotEmpty(t, holder)
				require.NoError(t, m.unlock(held))
				holder, queue = m.state()
			}
			if tc.busy {
				assert.Equal(t, "other", holder, "the call changed the holder")
			} else {
				assert.Empty(t, holder, "the call left the lock held")
			}
			assert.Empty(t, queue, "the call left itself queued")
			assert.Len(t, uniq(m.attempts), tc.holdIDs, "attempts %v", m.attempts)
			assert.Zero(t, m.q.Runtime().Deferred(), "a clean-up was left to run")
		})
	}
}

func uniq(xs []string) []string {
	s := slices.Clone(xs)
	slices.Sort(s)
	return slices.Compact(s)
}

// Waiters are served in the order they queued, each told of its grant by the release that
// made it; and a waiter whose grant message is lost finds its grant by the attempt its last
// reply's bound makes it send.
func TestEngineServesAMutexInOrder(t *testing.T) {
	for _, lose := range []bool{false, true} {
		t.Run(fmt.Sprintf("grants lost %v", lose), func(t *testing.T) {
			m := newMutex(t)
			m.lose = lose
			if lose {
				m.wait = 20 * time.Millisecond // the bound after which a waiter looks again
			}
			held, ok, err := m.call(context.Background(), true, 0)
			require.NoError(t, err)
			require.True(t, ok)
			const n = 4
			got := make(chan int, n)
			for i := range n {
				go func() {
					h, _, err := m.call(context.Background(), true, 0)
					if !assert.NoError(t, err) {
						got <- -1
						return
					}
					got <- i
					assert.NoError(t, m.unlock(h))
				}()
				require.Eventually(t, func() bool { _, q := m.state(); return len(q) == i+1 }, 5*time.Second, time.Millisecond)
			}
			require.NoError(t, m.unlock(held))
			for i := range n {
				assert.Equal(t, i, <-got, "served out of order")
			}
			require.Eventually(t, func() bool { h, q := m.state(); return h == "" && len(q) == 0 }, 5*time.Second, time.Millisecond)
		})
	}
}
