package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// Fault 7: a server that stalls or refuses while a blocking call needs it.
//
// Every blocking call of every primitive returns by its context's deadline, within
// deadlineSlack, whatever the server does, with go-redis's default options (which do not
// honour a context's deadline on the socket): the server stopped with SIGSTOP (connections
// open, nothing answered) or killed (connections refused), before the call (its first round
// trip hangs) or while it waits in the queue behind another Client's hold (its give-up hangs).
// A stopped server is then resumed: the call's attempt, which ran late, and its queue entry
// are given up in the background, so that the primitive ends up free once the other Client
// releases, with nobody left in its queue.

// deadlineSlack is how late after its deadline a call may return: the engine's patience and
// grace (37.5ms), and the scheduling of a 2-core machine running the whole suite under -race
// (a call once returned 58ms late there, with its give-up abandoned in time).
const deadlineSlack = 100 * time.Millisecond

// callDeadline is the deadline of the calls that meet a fault.
const callDeadline = 600 * time.Millisecond

func TestBlockingCallsReturnByTheirDeadlineWhenRedisStallsOrRefuses(t *testing.T) {
	type op struct{ kind, op string }
	ops := []op{
		{kindReentrant, opExclusive}, {kindFair, opExclusive}, {kindRWLock, opExclusive},
		{kindRWLock, opRead}, {kindCounting, "1"}, {kindLeased, "1"}, {kindMulti, opExclusive},
		{kindElection, opExclusive},
	}
	var kinds []string
	for _, o := range ops {
		kinds = append(kinds, o.kind+"/"+o.op)
	}
	forEachKind(t, kinds, func(t *testing.T, name string) {
		var o op
		for _, x := range ops {
			if x.kind+"/"+x.op == name {
				o = x
			}
		}
		for _, fault := range []string{"stopped", "refusing"} {
			for _, phase := range []string{"before the call", "while it waits"} {
				t.Run(fault+"/"+phase, func(t *testing.T) {
					deadlineCase(t, o.kind, o.op, fault, phase == "while it waits")
				})
			}
		}
	})
}

// deadlineCase runs one call of op on a primitive of kind into fault, before the call or while
// it waits behind another Client's hold.
func deadlineCase(t *testing.T, kind, op, fault string, waiting bool) {
	srv := redistest.NewServer(t)
	ctx := context.Background()
	cfg := primConfig{kind: kind, name: redistest.Name(t), waiterTimeout: time.Second, permits: 1}
	client := func() *prim {
		c, err := aqs.New(ctx, srv.Client(t))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		p, err := newPrim(ctx, c, cfg)
		require.NoError(t, err)
		return p
	}
	holder, caller := client(), client()
	var hold *held
	if waiting {
		var err error
		hold, err = holder.acquire(ctx, exclusiveOp(kind))
		require.NoError(t, err)
	}
	cctx, cancel := context.WithTimeout(ctx, callDeadline)
	defer cancel()
	deadline, _ := cctx.Deadline()
	done := make(chan error, 1)
	fail := func() {
		if fault == "stopped" {
			require.NoError(t, srv.Pause())
		} else {
			require.NoError(t, srv.Kill())
		}
	}
	if !waiting {
		fail()
	}
	go func() {
		h, err := caller.acquire(cctx, op)
		if err == nil {
			err = fmt.Errorf("acquired: %v", h.Release())
		}
		done <- err
	}()
	if waiting {
		// Queued behind the other Client's hold: its entry is in the queue's deadlines.
		require.Eventually(t, func() bool {
			n, err := srv.Client(t).ZCard(ctx, caller.key+":d").Result()
			return err == nil && n >= 1
		}, 5*time.Second, time.Millisecond, "the call queued")
		fail()
	}
	select {
	case err := <-done:
		late := time.Since(deadline)
		t.Logf("returned %v after its deadline: %v", late.Round(time.Millisecond), err)
		assert.LessOrEqual(t, late, deadlineSlack, "returned %v after its deadline", late)
		assert.True(t, errors.Is(err, context.DeadlineExceeded), "the call's error is its context's: %v", err)
	case <-time.After(callDeadline + 10*time.Second):
		t.Fatalf("the call did not return by its deadline, nor 10s after it")
	}
	if fault == "refusing" {
		return // the dataset is gone with the server
	}
	require.NoError(t, srv.Resume())
	if hold != nil {
		require.NoError(t, hold.Release())
	}
	// Nothing of the call is left: the primitive is free and its queue empty, once the
	// background clean-up (bounded) has run.
	assert.Eventually(t, func() bool {
		free, err := caller.free(ctx)
		if err != nil || !free {
			return false
		}
		n, err := srv.Client(t).ZCount(ctx, caller.key+":d", fmt.Sprint(time.Now().UnixMilli()), "+inf").Result()
		return err == nil && n == 0
	}, 10*time.Second, 10*time.Millisecond, "the call left something held or queued")
}
