package latch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/scripts"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/latch"
	"github.com/redaqs/aqs/model"
)

// The model-versus-Redis state machine: the same operations on a latch in Redis (through two
// Clients) and on model.Latch, comparing every reply, the count after every step, and the
// messages on the latch's channel (exactly one "*" from the CountDown that opens it, none
// otherwise).
//
// Redis keeps real time and the model logical time. The latch's expiry is a minute, far
// longer than a run, so the model's time stands still, except at "expire", which deletes the
// count in Redis (what its expiry does) and moves the model's time past the expiry.

const smExpiry = time.Minute

type latchMachine struct {
	ctx     context.Context
	rdb     redis.UniversalClient
	latches []*latch.Latch // one per Client
	key     string
	channel string
	sub     *redis.PubSub
	publish func(ctx context.Context, channel string, msg any) *redis.IntCmd

	m   *model.Latch
	now model.Time
}

func (s *latchMachine) pick(t *rapid.T) *latch.Latch {
	return s.latches[rapid.IntRange(0, len(s.latches)-1).Draw(t, "client")]
}

// messages returns the messages the latch's channel carried since the last call: it publishes
// a marker of its own and reads up to it (one connection: in order).
func (s *latchMachine) messages(t *rapid.T) []string {
	require.NoError(t, s.publish(s.ctx, s.channel, "marker").Err())
	var out []string
	for {
		msg, err := s.sub.ReceiveTimeout(s.ctx, 5*time.Second)
		require.NoError(t, err)
		m, ok := msg.(*redis.Message)
		require.True(t, ok, "got %T", msg)
		if m.Payload == "marker" {
			return out
		}
		out = append(out, m.Payload)
	}
}

func (s *latchMachine) trySet(t *rapid.T) {
	n := rapid.IntRange(-1, 4).Draw(t, "n")
	ok, err := s.pick(t).TrySetCount(s.ctx, n)
	mok, merr := s.m.TrySetCount(s.now, int64(n), smExpiry.Milliseconds())
	if merr != nil {
		require.ErrorIs(t, err, aqs.ErrInvalidArgument, "TrySetCount(%d)", n)
		return
	}
	require.NoError(t, err)
	require.Equal(t, mok, ok, "TrySetCount(%d)", n)
}

func (s *latchMachine) countDown(t *rapid.T) {
	err := s.pick(t).CountDown(s.ctx)
	_, opened, merr := s.m.CountDown(s.now, smExpiry.Milliseconds())
	if merr != nil {
		require.ErrorIs(t, err, latch.ErrNotSet)
	} else {
		require.NoError(t, err)
	}
	msgs := s.messages(t)
	if opened {
		require.Equal(t, []string{"*"}, msgs, "the CountDown that opened the latch")
	} else {
		require.Empty(t, msgs, "a CountDown that did not open the latch")
	}
}

func (s *latchMachine) tryAwait(t *rapid.T) {
	ok, err := s.pick(t).TryAwait(s.ctx)
	st, _, merr := s.m.Await(s.now, false)
	if merr != nil {
		require.ErrorIs(t, err, latch.ErrNotSet)
		return
	}
	require.NoError(t, err)
	require.Equal(t, st == model.Acquired, ok, "TryAwait (model: %v)", st)
}

// attempt runs the attempt script as a waiting Await does, and compares status and hint.
func (s *latchMachine) attempt(t *rapid.T) {
	join := rapid.Bool().Draw(t, "join")
	flag := "0"
	if join {
		flag = "1"
	}
	v, err := scripts.LatchAwait.Run(s.ctx, s.rdb, []string{s.key}, flag).Result()
	require.NoError(t, err)
	a, err := scripts.DecodeAttempt(v)
	require.NoError(t, err)
	st, hint, merr := s.m.Await(s.now, join)
	if merr != nil {
		require.Equal(t, scripts.NotSet, a.Status)
		return
	}
	require.Equal(t, uint8(st), uint8(a.Status), "attempt (join %v)", join)
	if st != model.Acquired {
		// The model's time stands still; Redis's TTL runs down with the run.
		require.InDelta(t, float64(hint), float64(a.Wait.Milliseconds()), float64((10 * time.Second).Milliseconds()),
			"the attempt's hint")
		require.Positive(t, a.Wait)
	}
}

func (s *latchMachine) beat(t *rapid.T) {
	n, err := scripts.LatchBeat.Run(s.ctx, s.rdb, []string{s.key}).Int64()
	require.NoError(t, err)
	b, err := scripts.DecodeBeat(n)
	require.NoError(t, err)
	require.Equal(t, uint8(s.m.Beat(s.now)), uint8(b), "heartbeat")
}

func (s *latchMachine) expire(t *rapid.T) {
	require.NoError(t, s.rdb.Del(s.ctx, s.key).Err())
	s.now += model.Time(smExpiry.Milliseconds())
}

func (s *latchMachine) check(t *rapid.T) {
	n, err := s.latches[0].Count(s.ctx)
	require.NoError(t, err)
	want := s.m.Count(s.now)
	require.EqualValues(t, want, n, "count")
	require.GreaterOrEqual(t, n, 0, "never below zero")
	pttl := s.rdb.PTTL(s.ctx, s.key).Val()
	if _, _, err := s.m.Await(s.now, false); errors.Is(err, model.ErrLatchNotSet) {
		require.Equal(t, time.Duration(-2), pttl, "a latch not set has no key")
	} else {
		require.Positive(t, pttl, "the count expires")
		require.LessOrEqual(t, pttl, smExpiry)
	}
}

func TestModelVersusRedis(t *testing.T) {
	topologies(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		cs := []*aqs.Client{newClient(t, rdb), newClient(t, rdb)}
		rapid.Check(t, func(rt *rapid.T) {
			name := redistest.Name(t)
			s := &latchMachine{ctx: ctx, rdb: rdb, m: model.NewLatch()}
			for _, c := range cs {
				l, err := latch.New(c, name, latch.WithExpiry(smExpiry))
				require.NoError(rt, err)
				s.latches = append(s.latches, l)
			}
			s.key, s.channel = s.latches[0].Key(), s.latches[0].Key()+":c"
			defer rdb.Del(ctx, s.key)
			// A subscription per run: on a cluster, a PubSub of shard channels serves one slot.
			if cc, ok := rdb.(*redis.ClusterClient); ok {
				s.sub, s.publish = cc.SSubscribe(ctx, s.channel), cc.SPublish
			} else {
				s.sub, s.publish = rdb.Subscribe(ctx, s.channel), rdb.Publish
			}
			defer s.sub.Close()
			_, err := s.sub.ReceiveTimeout(ctx, 5*time.Second) // the confirmation
			require.NoError(rt, err)
			rt.Repeat(map[string]func(*rapid.T){
				"set":       s.trySet,
				"countDown": s.countDown,
				"tryAwait":  s.tryAwait,
				"attempt":   s.attempt,
				"beat":      s.beat,
				"expire":    s.expire,
				"":          s.check,
			})
		})
	})
}
