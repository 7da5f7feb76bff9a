package chaos_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// Fault 3: Redis restarted with no persistence while the primitive is held and waiters are
// queued. Every key is gone at once: the holder must learn of the loss (its held context ends
// with aqs.ErrLockLost at the watchdog's next renewal), the waiters must not hang (each gets
// the primitive or an error within a bound), and new acquisitions must work.
//
// The witness is off: a restart that loses the data lets a waiter in before the holder can
// know, which no client of a non-persistent Redis can prevent; the test measures that window
// (from the first acquisition after the restart to the holder's notice) instead. The counting
// semaphore's holder has no lease to lose, and its permits themselves are gone: the waiters of
// both semaphores get semaphore.ErrNotSet until the test sets the permits again.

const (
	restartLease = 900 * time.Millisecond // the children's watchdog timeout: renewal every 300ms
	// restartNotice bounds the holder's notice after the restart: the next renewal, or the one
	// after a failed one (the watchdog then retries three times as often).
	restartNotice = restartLease + 2*time.Second
	// restartWaiters bounds how long a waiter may go on waiting after the restart.
	restartWaiters = 10 * time.Second
)

func TestRedisRestartWithoutDataReachesHoldersAndWaiters(t *testing.T) {
	rounds := scale(1, 3)
	forEachKind(t, allKinds, func(t *testing.T, kind string) {
		srv := redistest.NewServer(t)
		permits := 1
		c := newCast(t, srv.Addr(), primConfig{kind: kind, name: redistest.Name(t),
			waiterTimeout: time.Second, permits: permits}, restartLease)
		c.witness = ""
		ctx := context.Background()
		var notices, windows, downs []time.Duration
		outcomes := map[string]int{}
		for r := 0; r < rounds; r++ {
			holder := c.start(t, fmt.Sprintf("round %d holder", r))
			waiters := []*actor{c.start(t, fmt.Sprintf("round %d waiter 0", r)),
				c.start(t, fmt.Sprintf("round %d waiter 1", r))}
			op := exclusiveOp(kind)
			kh := c.hold(t, holder, op, 0)
			c.await(t, "got", kh, 30*time.Second)
			var kw []int
			for _, w := range waiters {
				kw = append(kw, c.join(t, w, op, 10*time.Millisecond))
				c.awaitQueuedN(t, w, op, 1)
			}

			down := time.Now()
			require.NoError(t, srv.Kill())
			require.NoError(t, srv.Restart())
			up := time.Now()
			downs = append(downs, up.Sub(down))

			if kind != kindCounting {
				lost := c.await(t, "lost", kh, restartNotice)
				assert.Equal(t, []string{strconv.FormatInt(lost.ns, 10), "locklost"}, lost.rest,
					"round %d: the holder's held context ends with aqs.ErrLockLost", r)
				notices = append(notices, time.Unix(0, lost.ns).Sub(up))
			}
			c.pump(t, restartWaiters, "the waiters' outcomes", func() bool {
				for _, k := range kw {
					if !c.has("rel", k) && !c.has("failed", k) {
						return false
					}
				}
				return true
			})
			for _, k := range kw {
				if e, ok := c.find("got", k); ok {
					outcomes["got"]++
					if l, ok := c.find("lost", kh); ok {
						windows = append(windows, time.Unix(0, l.ns).Sub(time.Unix(0, e.ns)))
					}
				} else {
					e, _ := c.find("failed", k)
					outcomes[errorKind(e)]++
				}
			}

			// New acquisitions work: the test's own, and a child's.
			if kind == kindCounting || kind == kindLeased {
				_, err := c.p.setPermits(ctx)
				require.NoError(t, err)
			}
			actx, cancel := context.WithTimeout(ctx, 10*time.Second)
			h, err := c.p.acquire(actx, op)
			cancel()
			require.NoError(t, err, "round %d: the test's acquisition after the restart", r)
			require.NoError(t, h.Release())
			c.await(t, "rel", c.join(t, waiters[0], op, 0), 10*time.Second)
			c.kill(t, holder)
			c.awaitFree(t, restartLease+5*time.Second)
		}
		c.end(t)
		var noticeText, windowText string = "n/a (no lease)", "n/a"
		if len(notices) > 0 {
			noticeText = fmt.Sprintf("max %v after the restart", slices.Max(notices).Round(time.Millisecond))
		}
		if len(windows) > 0 {
			windowText = "none (the holder knew first)"
			if w := slices.Max(windows); w > 0 {
				windowText = fmt.Sprintf("max %v", w.Round(time.Millisecond))
			}
		}
		t.Logf("SUMMARY restart %s: %d rounds, Redis down max %v; holder told ErrLockLost %s (lease %v); "+
			"waiters' outcomes %v; a waiter got in before the holder knew (the data loss's window) %s; "+
			"new acquisitions worked", kind, rounds, slices.Max(downs).Round(time.Millisecond), noticeText,
			restartLease, outcomes, windowText)
	})
}

// errorKind names a failure line for the summary: "failed: <the error's last words>".
func errorKind(e event) string {
	if len(e.rest) == 0 {
		return "failed"
	}
	w := e.rest
	if len(w) > 3 {
		w = w[len(w)-3:]
	}
	return fmt.Sprint("failed: ", w)
}

// setPermits sets a semaphore's permits again (after a restart lost them).
func (p *prim) setPermits(ctx context.Context) (bool, error) {
	if p.cs != nil {
		return p.cs.TrySetPermits(ctx, p.permits)
	}
	return p.ls.TrySetPermits(ctx, p.permits)
}
