package election_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// pauseOn is a go-redis hook that pauses the server (SIGSTOP) the first time, once armed, a
// command carrying the argument arg is sent, before it is sent.
type pauseOn struct {
	t     *testing.T
	s     *redistest.Server
	arg   string
	armed atomic.Bool
}

func (h *pauseOn) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *pauseOn) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.look(cmd)
		return next(ctx, cmd)
	}
}

func (h *pauseOn) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.look(cmd)
		}
		return next(ctx, cmds)
	}
}

func (h *pauseOn) look(cmd redis.Cmder) {
	for _, a := range cmd.Args() {
		if s, ok := a.(string); ok && s == h.arg && h.armed.CompareAndSwap(true, false) {
			if err := h.s.Pause(); err != nil {
				h.t.Errorf("pausing the server: %v", err)
			}
		}
	}
}

// A campaign whose leader record cannot be written (the server stalls, as in a failover, once
// the lock is granted) fails by its deadline, and gives the lock back: in the background when
// Redis cannot take the release by then, counted as such (core.Runtime.Deferred), and the
// lock is free once the server answers again.
func TestCampaignReturnsByItsDeadlineWhenTheServerStallsAfterTheGrant(t *testing.T) {
	ctx := context.Background()
	s := redistest.NewServer(t)
	rdb := s.Client(t)
	h := &pauseOn{t: t, s: s, arg: "a value only the record carries"}
	rdb.AddHook(h)
	c := newClient(t, rdb)
	e := newElection(t, c)
	deferred := core.RuntimeOf(c).Deferred()

	const deadline = 300 * time.Millisecond
	cctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	h.armed.Store(true)
	start := time.Now()
	type outcome struct {
		err  error
		took time.Duration
	}
	done := make(chan outcome, 1)
	go func() {
		_, err := e.Campaign(cctx, h.arg)
		done <- outcome{err, time.Since(start)}
	}()
	var got outcome
	select {
	case got = <-done:
	case <-time.After(2 * time.Second):
		// Let the campaign end, to report how late it was.
		require.NoError(t, s.Resume())
		got = <-done
		t.Fatalf("Campaign returned %v after its start, past its deadline of %v: %v", got.took, deadline, got.err)
	}
	assert.False(t, h.armed.Load(), "the record was never sent")
	require.ErrorIs(t, got.err, context.DeadlineExceeded)
	assert.Less(t, got.took, deadline+250*time.Millisecond, "Campaign returned past its deadline")
	assert.Greater(t, core.RuntimeOf(c).Deferred(), deferred, "the give-back left to the background is not counted")

	require.NoError(t, s.Resume())
	plain := redis.NewClient(s.Options())
	defer plain.Close()
	l, err := fair.New(newClient(t, plain), e.Name())
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		locked, err := l.IsLocked(ctx)
		return err == nil && !locked
	}, 15*time.Second, 10*time.Millisecond, "the lock was not given back")
	noLeader(t, e)
}
