package acquire_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// slowReplies is a go-redis hook that, while on, hands every reply to the caller delay after
// the server sent it: the command ran in Redis at once, and its reply is late.
type slowReplies struct {
	on    atomic.Bool
	delay time.Duration
}

func (s *slowReplies) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *slowReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if s.on.Load() {
			time.Sleep(s.delay) // the reply on its way, not a wait for a condition
		}
		return err
	}
}

func (s *slowReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if s.on.Load() {
			time.Sleep(s.delay)
		}
		return err
	}
}

// A blocking call whose context reaches its deadline while its round trip is on its way
// leaves nothing behind when it returns: its first attempt took the free lock in Redis, and the
// call gives the lock back before it returns, rather than in the background after it returned
// (where another caller would find the lock held by a call that reported failure). Each reply
// comes 10ms after the command ran; the deadline is 3ms away.
func TestCallEndedDuringItsRoundTripLeavesNothingWhenItReturns(t *testing.T) {
	srv := redistest.Single(t)
	rdb := srv.Client(t)
	slow := &slowReplies{delay: 10 * time.Millisecond}
	rdb.AddHook(slow)
	admin := srv.Client(t)
	l := fairLock(t, newClient(t, rdb), 0)
	for round := range 5 {
		slow.on.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Millisecond)
		_, err := lock(ctx, l)
		cancel()
		n, xerr := admin.Exists(context.Background(), l.Keys()...).Result()
		slow.on.Store(false)
		require.ErrorIs(t, err, context.DeadlineExceeded, "round %d", round)
		require.NoError(t, xerr)
		assert.Zero(t, n, "round %d: keys of the lock left when the failed call returned", round)
		// Whatever was left goes in the background; the next round starts on a free lock.
		require.Eventually(t, func() bool {
			n, err := admin.Exists(context.Background(), l.Keys()...).Result()
			return err == nil && n == 0
		}, 5*time.Second, time.Millisecond)
	}
}
