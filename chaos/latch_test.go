package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/scripts"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/latch"
)

// The count-down latch under the faults. It is no lock (nothing is held, so there is nothing
// for a witness to see overlap), and is not one of the primitives of prim_test.go: what the
// faults can break is when its waiters return, and how many times a count-down counts.

// kindLatch names the latch among the kinds of the linearizability runs (lin_test.go).
const kindLatch = "latch"

// Waiters of one latch on two Clients, which reach Redis through the proxy, while the pub/sub
// connections are killed on the server every 50ms and the proxy cuts every connection every
// cutEvery: the wake message of the CountDown that makes the count 0 may be lost, and so may
// the commands and replies of the waiters and of the count-downs in flight. Each round sets a
// new latch to 3 (through a Client of its own, straight to Redis), starts waiters on both
// Clients, and once every one is registered with its Client's hub counts down three times,
// through the proxied Clients in turn, a pause apart so that the faults act on the waiting.
// The rounds end in three ways, in turn:
//
//   - the last CountDown through a proxied Client, as the others;
//   - the last CountDown from the direct Client just after the proxy cut every connection, so
//     that its message is published while no pub/sub connection of the waiters' Clients is up:
//     the waiters find the count 0 by the look their Client makes them take once it has
//     subscribed again;
//   - the count set to 0 by a plain SET, which publishes nothing: a wake message lost with no
//     reconnection to make up for it. The faults pause from the pause before it until the
//     round ends, so that no reconnection makes the waiters look: only their heartbeat (a
//     third of their waiter timeout) finds the count 0, with no attempt after the SET (which
//     the go-redis clients' hook counts).
//
// No Await may return nil before the last step began (a count-down whose reply was lost and
// that counted twice would do that), and every one must return nil soon after it (a waiter
// whose message was lost and that nothing woke would not). An Await that fails (a cut made one
// of its commands fail) is called again, as a caller would, and counted; an ErrNotSet is a
// failure, the latch being set all along.
func TestLatchWaitersReturnOnlyOnceTheCountIsZeroThroughCutsAndPubSubKills(t *testing.T) {
	rounds := scale(6, 45)
	const (
		count         = 3
		perClient     = 3
		killEvery     = 50 * time.Millisecond
		cutEvery      = 300 * time.Millisecond
		waiterTimeout = 300 * time.Millisecond
		between       = 100 * time.Millisecond // a pause between count-downs, for the faults to act
		// within bounds how late after the last CountDown returned a waiter may return: its
		// heartbeat comes every 100ms; the rest is room for a loaded machine and for a waiter
		// whose command a cut made fail, called again.
		within = 5 * time.Second
	)
	ctx := context.Background()
	srv := redistest.NewServer(t)
	admin := srv.Client(t)
	px := newProxy(t, srv.Addr())
	client := func(rdb redis.UniversalClient) *aqs.Client {
		c, err := aqs.New(ctx, rdb)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	direct := client(srv.Client(t))
	var proxied []*aqs.Client
	attempts := &latchAttempts{}
	for range 2 {
		rdb := redis.NewClient(&redis.Options{Addr: px.Addr()})
		rdb.AddHook(attempts)
		t.Cleanup(func() { rdb.Close() })
		proxied = append(proxied, client(rdb))
	}

	stop, done := make(chan struct{}), make(chan struct{})
	var quiet atomic.Bool // the faults pause
	var kills, cuts int
	go func() {
		defer close(done)
		killTick, cutTick := time.NewTicker(killEvery), time.NewTicker(cutEvery)
		defer killTick.Stop()
		defer cutTick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-killTick.C:
				if quiet.Load() {
					continue
				}
				n, err := admin.ClientKillByFilter(ctx, "TYPE", "pubsub").Result()
				if err != nil {
					t.Errorf("CLIENT KILL: %v", err)
				}
				kills += int(n)
			case <-cutTick.C:
				if quiet.Load() {
					continue
				}
				px.Cut()
				cuts++
			}
		}
	}()
	faultsStopped := false
	stopFaults := func() {
		if !faultsStopped {
			faultsStopped = true
			close(stop)
			<-done
		}
	}
	t.Cleanup(stopFaults)

	var (
		mu      sync.Mutex
		errs    []string
		waiters int
		// Rounds ended by a SET in which no waiter attempted after it: their heartbeat found 0.
		byHeartbeat int
		// The rounds' endings, and for each the latest return after the last step returned.
		endings = []string{"a CountDown through the proxy", "a CountDown just after a cut", "a SET to 0"}
		latest  = make([]time.Duration, len(endings))
	)
	for round := range rounds {
		name := redistest.Name(t)
		open := func(c *aqs.Client) *latch.Latch {
			l, err := latch.New(c, name, latch.WithWaiterTimeout(waiterTimeout), latch.WithExpiry(time.Minute))
			require.NoError(t, err)
			return l
		}
		set := open(direct)
		ok, err := set.TrySetCount(ctx, count)
		require.NoError(t, err)
		require.True(t, ok)
		latches := []*latch.Latch{open(proxied[0]), open(proxied[1])}

		waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		returnedAt := make(chan time.Time, 2*perClient)
		var wg sync.WaitGroup
		for _, l := range latches {
			for range perClient {
				wg.Go(func() {
					for {
						err := l.Await(waitCtx)
						if err == nil {
							returnedAt <- time.Now()
							return
						}
						mu.Lock()
						errs = append(errs, err.Error())
						mu.Unlock()
						if waitCtx.Err() != nil || errors.Is(err, latch.ErrNotSet) {
							t.Errorf("round %d: Await: %v", round, err)
							return
						}
					}
				})
			}
		}
		for _, c := range proxied {
			hub := core.RuntimeOf(c).Hub
			require.Eventually(t, func() bool { return hub.Waiters() == perClient }, 10*time.Second, time.Millisecond,
				"round %d: the waiters of a Client never all registered", round)
		}

		var lastAt, lastDone time.Time
		var before int64 // attempts sent before the last step
		for i := 1; i <= count; i++ {
			if i == count && round%len(endings) == 2 {
				quiet.Store(true)
			}
			time.Sleep(between) // a pause for the faults to act on the waiters, not a wait for a condition
			if i < count {
				require.NoError(t, latches[i%2].CountDown(ctx), "round %d: CountDown %d", round, i)
				continue
			}
			lastAt = time.Now()
			before = attempts.n.Load()
			switch round % len(endings) {
			case 0:
				err = latches[i%2].CountDown(ctx)
			case 1:
				px.Cut()
				err = set.CountDown(ctx)
			default:
				err = admin.SetArgs(ctx, set.Key(), "0", redis.SetArgs{KeepTTL: true}).Err()
			}
			require.NoError(t, err, "round %d: the last step", round)
			lastDone = time.Now()
		}
		for range 2 * perClient {
			select {
			case at := <-returnedAt:
				assert.False(t, at.Before(lastAt), "round %d: an Await returned %v before the last step began",
					round, lastAt.Sub(at))
				e := round % len(endings)
				latest[e] = max(latest[e], at.Sub(lastDone))
				waiters++
			case <-time.After(within):
				t.Errorf("round %d: a waiter has not returned %v after %s", round, within, endings[round%len(endings)])
			}
		}
		if round%len(endings) == 2 && attempts.n.Load() == before {
			byHeartbeat++
		}
		quiet.Store(false)
		cancel()
		wg.Wait()
		n, err := set.Count(ctx)
		require.NoError(t, err)
		assert.Zero(t, n, "round %d: the count after %d count-downs", round, count)
		admin.Del(ctx, set.Key())
		if t.Failed() {
			break
		}
	}
	stopFaults()
	var ends []string
	for e, name := range endings {
		ends = append(ends, fmt.Sprintf("after %s %v", name, latest[e].Round(time.Millisecond)))
	}
	t.Logf("SUMMARY latch waiters through cuts and pub/sub kills: %d rounds of %d waiters on 2 Clients, "+
		"a count of %d; %d returned, none before the last step; the latest %s; rounds ended by a SET with "+
		"no attempt after it: %d of %d; %d pub/sub connections killed, %d cuts; failed Awaits called again: "+
		"%d (%s)", rounds, 2*perClient, count, waiters, strings.Join(ends, ", "), byHeartbeat,
		rounds/len(endings), kills, cuts, len(errs), errorSample(errs, 3))
}

// latchAttempts is a go-redis hook that counts the Await attempts (runs of the latch's attempt
// script) sent, so that a test can tell whether a waiter returned after an attempt or on its
// heartbeat alone.
type latchAttempts struct{ n atomic.Int64 }

func (h *latchAttempts) count(cmd redis.Cmder) {
	if args := cmd.Args(); len(args) > 1 && args[0] == "evalsha" && args[1] == scripts.LatchAwait.SHA() {
		h.n.Add(1)
	}
}

func (h *latchAttempts) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *latchAttempts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h *latchAttempts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.count(cmd)
		}
		return next(ctx, cmds)
	}
}

// A CountDown whose reply is lost counts once: go-redis sends it again (its retries), or the
// latch does (without them), and the second run of the script finds the key of the call's own
// that the first left, and answers as it did. A TrySetCount whose reply is lost, sent again by
// go-redis, reports that it set the count, not that a count was there.
func TestLatchCallsWhoseReplyIsLostCountOnce(t *testing.T) {
	for _, retries := range []int{0, -1} { // go-redis's default (3), and none
		t.Run(map[int]string{0: "go-redis retries", -1: "no retries"}[retries], func(t *testing.T) {
			ctx := context.Background()
			srv, px, c := behindAProxy(t, &redis.Options{MaxRetries: retries})
			l, err := latch.New(c, redistest.Name(t), latch.WithExpiry(time.Minute))
			require.NoError(t, err)
			defer srv.Client(t).Del(ctx, l.Key())
			count := func() int {
				n, err := l.Count(ctx)
				require.NoError(t, err)
				return n
			}

			px.DropReplyTo(scripts.LatchSet.SHA())
			ok, err := l.TrySetCount(ctx, 3)
			require.Equal(t, 1, px.Dropped(), "the set's reply was dropped")
			if retries == 0 {
				require.NoError(t, err)
				assert.True(t, ok, "the second run reports the count its first run set")
			} else {
				require.Error(t, err, "the reply was lost, and nothing sent it again")
			}
			require.Equal(t, 3, count(), "the count was set")

			for want := 2; want >= 0; want-- {
				px.DropReplyTo(scripts.LatchCountDown.SHA())
				require.NoError(t, l.CountDown(ctx), "the count-down is sent again until it is known")
				require.Equal(t, 4-want, px.Dropped(), "the count-down's reply was dropped")
				require.Equal(t, want, count(), "one count-down, not two")
			}
			ok, err = l.TryAwait(ctx)
			require.NoError(t, err)
			assert.True(t, ok, "at 0")
			t.Logf("SUMMARY latch lost replies (%s): the set and 3 count-downs each lost its reply; the count "+
				"went 3, 2, 1, 0", map[int]string{0: "go-redis retries", -1: "no retries"}[retries])
		})
	}
}
