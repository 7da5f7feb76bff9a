package chaos_test

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// Fault 2: a holder stalled past its lease.
//
// A process takes the primitive with a fixed lease (aqs.WithLease) and a fencing token, writes
// to a storage that checks fencing tokens, and is stopped with SIGSTOP. Its lease runs out,
// another process takes the primitive and writes with its own token. Then the stalled process
// runs again (SIGCONT) and at once sends the write it was about to make: a late write that
// raced past every check the holder could make. The storage must refuse it, since its token is
// below the one it has seen, and the stalled holder's held context must end with
// aqs.ErrLockLost: its local lease deadline has passed. The leased semaphore has no fencing
// tokens; for it only the held context is checked. The counting semaphore has no lease.

const (
	stallLease = 500 * time.Millisecond
	// stallNotice bounds how long the resumed holder may take to report its held context
	// done: its watchdog timer is overdue once the process runs again.
	stallNotice = 2 * time.Second
)

// fencedStore is a storage that checks fencing tokens: it keeps the highest token it has
// accepted a write with and refuses a write with a lower one.
type fencedStore struct {
	mu       sync.Mutex
	highest  int64
	accepted int
	refused  int
}

// write applies a write with token and reports whether it was accepted.
func (s *fencedStore) write(token int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.highest {
		s.refused++
		return false
	}
	s.highest = token
	s.accepted++
	return true
}

func TestStalledHolderIsFencedOff(t *testing.T) {
	rounds := scale(2, 8)
	forEachKind(t, []string{kindReentrant, kindFair, kindRWLock, kindLeased, kindMulti}, func(t *testing.T, kind string) {
		srv := redistest.Single(t)
		c := newCast(t, srv.Addr(), primConfig{kind: kind, name: redistest.Name(t),
			waiterTimeout: time.Second, permits: 1}, time.Second)
		c.witness = "" // the stalled holder and the next one overlap in time: fencing is the check
		other := c.start(t, "other")
		store := &fencedStore{}
		fenced := kind != kindLeased
		op := exclusiveOp(kind)
		var lateAccepted, lateWrites, lostSeen int
		var takeovers, notices []time.Duration
		for r := 0; r < rounds; r++ {
			stalled := c.start(t, fmt.Sprintf("round %d stalled holder", r))
			ka := c.hold(t, stalled, op, stallLease)
			got := c.await(t, "got", ka, 30*time.Second)
			if fenced {
				require.True(t, store.write(c.writeToken(t, stalled, ka)), "round %d: the holder's write in its lease", r)
			}
			stoppedAt := time.Now()
			c.signal(t, stalled, syscall.SIGSTOP)

			kb := c.hold(t, other, op, 0)
			gotB := c.await(t, "got", kb, stallLease+10*time.Second)
			takeovers = append(takeovers, time.Unix(0, gotB.ns).Sub(time.Unix(0, got.ns)))
			if fenced {
				require.True(t, store.write(c.writeToken(t, other, kb)), "round %d: the new holder's write", r)
			}

			c.signal(t, stalled, syscall.SIGCONT)
			resumed := time.Now()
			if fenced {
				lateWrites++
				if store.write(c.writeToken(t, stalled, ka)) {
					lateAccepted++
					t.Errorf("round %d: the stalled holder's late write was accepted", r)
				}
			}
			lost := c.await(t, "lost", ka, stallNotice)
			assert.Equal(t, []string{strconv.FormatInt(lost.ns, 10), "locklost"}, lost.rest,
				"round %d: the stalled holder's held context ends with aqs.ErrLockLost", r)
			if len(lost.rest) == 2 && lost.rest[1] == "locklost" {
				lostSeen++
			}
			notices = append(notices, time.Unix(0, lost.ns).Sub(resumed))
			t.Logf("round %d: stopped %v after the acquisition, for %v; taken over %v after it",
				r, stoppedAt.Sub(time.Unix(0, got.ns)).Round(time.Millisecond),
				resumed.Sub(stoppedAt).Round(time.Millisecond), takeovers[r].Round(time.Millisecond))

			other.Send(t, fmt.Sprintf("release %d", kb))
			c.await(t, "rel", kb, 10*time.Second)
			c.kill(t, stalled)
		}
		c.end(t)
		c.awaitFree(t, 5*time.Second)
		count(c.overlaps, lateWrites, lateAccepted)
		assert.Zero(t, c.overlaps, "overlaps")
		assert.Empty(t, c.failures, "failures")
		t.Logf("SUMMARY stall %s: %d rounds, lease %v; taken over after the acquisition max %v; held "+
			"context done with ErrLockLost %d/%d times, max %v after SIGCONT; late writes %d, accepted %d "+
			"(storage: %d accepted, %d refused); overlaps %d",
			kind, rounds, stallLease, slices.Max(takeovers).Round(time.Millisecond), lostSeen, rounds,
			slices.Max(notices).Round(time.Millisecond), lateWrites, lateAccepted, store.accepted, store.refused, c.overlaps)
		assert.Zero(t, lateAccepted, "late writes accepted")
	})
}

// writeToken has a's acquisition k send its write and returns the write's token.
func (c *cast) writeToken(t *testing.T, a *actor, k int) int64 {
	t.Helper()
	// A "write" line carries k: mark older ones, to await this one.
	for i := range c.log {
		if c.log[i].word == "write" && c.log[i].k == k {
			c.log[i].word = "write-seen"
		}
	}
	a.Send(t, fmt.Sprintf("write %d", k))
	e := c.await(t, "write", k, 5*time.Second)
	return e.ns
}
