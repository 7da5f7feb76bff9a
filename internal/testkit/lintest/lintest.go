// Package lintest records histories of concurrent runs of aqs's primitives (the locks, the
// read-write lock, the semaphores, the latch) against a real Redis and checks them for
// linearizability with porcupine; the tests of each primitive, and the fault tests (package
// chaos), use it.
//
// Several goroutines on Clients run random operations on a few locks (or semaphores) for a
// short time; every operation is recorded with its input, its output and the times taken just
// before the library call and just after it returned. Calls that wait (a wait bound, a context
// that reaches its deadline or is cancelled) are recorded as two steps, their join and their
// end (see fair.go and wait.go). The history is then checked against a sequential
// specification with the primitive's queue. The default watchdog renews every hold, so expiry
// is out of play.
package lintest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// Locker is what RunLocks needs of a lock: reentrant.Lock and fair.Lock have it.
type Locker interface {
	Lock(ctx context.Context, opts ...aqs.LockOption) (context.Context, error)
	TryLock(ctx context.Context, opts ...aqs.TryLockOption) (context.Context, bool, error)
	Unlock(ctx context.Context) error
}

// Lock operations of the history.
const (
	linTry     = iota // TryLock (or Lock) with a fresh context: a new holder
	linReenter        // TryLock with the top held context of the worker: re-entry
	linUnlock         // Unlock of the worker's top held context
	linStale          // Unlock of a context whose hold was released already
)

// lockInput is an operation: its kind, the hold it concerns (an id unique to one
// acquisition of a fresh context, shared by its re-entries), for linTry how it waits (a
// TryLock with a wait bound, a Lock until its context ends, see wait.go), and the Client that
// made the call (HandOffLockModel hands a lock only among one Client's holds).
type lockInput struct {
	key    int // which of the run's locks
	op     int
	hold   int
	wait   Wait
	client int
}

// lockOutput is an operation's result: ok for TryLock; for Unlock, notOwner when it failed
// with aqs.ErrNotOwner (any other error fails the test before the check).
type lockOutput struct {
	ok       bool
	notOwner bool
}

// lockState is the lock's sequential state: its holder (0 when free) and hold count.
type lockState struct {
	holder int
	count  int
}

// LockModel is the sequential specification of an exclusive reentrant lock: a free lock is taken by any TryLock, a held one
// by none but re-entry of its holder; Unlock by the holder counts down, by anyone else it is
// ErrNotOwner and changes nothing.
var LockModel = porcupine.Model{
	Partition: partitionByKey,
	Init:      func() any { return lockState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(lockState), input.(lockInput), output.(lockOutput)
		switch in.op {
		case linTry:
			if s.count == 0 {
				return out.ok, lockState{holder: in.hold, count: 1}
			}
			return !out.ok, s
		case linReenter:
			if s.holder == in.hold && s.count > 0 {
				return out.ok, lockState{holder: s.holder, count: s.count + 1}
			}
			return false, s
		default: // linUnlock, linStale
			if s.holder == in.hold && s.count > 0 {
				if out.notOwner {
					return false, s
				}
				if s.count == 1 {
					return true, lockState{}
				}
				return true, lockState{holder: s.holder, count: s.count - 1}
			}
			return out.notOwner, s
		}
	},
	Equal: func(a, b any) bool { return a.(lockState) == b.(lockState) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(lockInput), output.(lockOutput)
		switch in.op {
		case linTry:
			return fmt.Sprintf("lock%d %s(h%d, %v) -> %v", in.key, lockCall(in.wait), in.hold, in.wait, out.ok)
		case linReenter:
			return fmt.Sprintf("lock%d TryLock(held h%d) -> %v", in.key, in.hold, out.ok)
		case linUnlock:
			return fmt.Sprintf("lock%d Unlock(h%d) -> notOwner=%v", in.key, in.hold, out.notOwner)
		default:
			return fmt.Sprintf("lock%d Unlock(released h%d) -> notOwner=%v", in.key, in.hold, out.notOwner)
		}
	},
	DescribeState: func(state any) string {
		s := state.(lockState)
		if s.count == 0 {
			return "free"
		}
		return fmt.Sprintf("h%d ×%d", s.holder, s.count)
	},
}

// lockCall names the call that made an acquisition that waits as w: TryLock, or Lock for a
// call that waits until its context ends.
func lockCall(w Wait) string {
	if w.byContext() {
		return "Lock"
	}
	return "TryLock"
}

// partitionByKey splits a history by lock: the locks are independent objects, so the
// history is linearizable when each lock's is.
func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	var parts [][]porcupine.Operation
	for _, op := range history {
		k := op.Input.(lockInput).key
		for len(parts) <= k {
			parts = append(parts, nil)
		}
		parts[k] = append(parts[k], op)
	}
	return parts
}

// Sizes of a run: goroutines on each of Clients Clients, working on Locks locks, the
// time they run and the operations they record at most in all (before each releases what it
// still holds), so that each lock's history has a few hundred operations.
const (
	Clients   = 3
	Workers   = 2
	Locks     = 3
	RunFor    = 1500 * time.Millisecond
	MaxOps    = 1200
	CheckTime = 10 * time.Second
)

// OwnRedis returns a new go-redis client, closed at the end of the test, to the same shared
// server or cluster as rdb, so that each aqs Client has connections of its own.
func OwnRedis(t *testing.T, rdb redis.UniversalClient) redis.UniversalClient {
	t.Helper()
	switch rdb.(type) {
	case *redis.Client:
		return redistest.Single(t).Client(t)
	case *redis.ClusterClient:
		return redistest.Cluster(t).Client(t)
	}
	t.Fatalf("unexpected redis client %T", rdb)
	return nil
}

// LogLockOutcomes logs how many operations of each kind the history has and how they ended,
// to show the run contended.
func LogLockOutcomes(t *testing.T, history []porcupine.Operation) {
	t.Helper()
	type kind struct{ op, how int }
	won, lost := map[kind]int{}, map[kind]int{}
	for _, op := range history {
		in, out := op.Input.(lockInput), op.Output.(lockOutput)
		k := kind{in.op, in.wait.how}
		if out.ok || ((in.op == linUnlock || in.op == linStale) && !out.notOwner) {
			won[k]++
		} else {
			lost[k]++
		}
	}
	try := func(how int) string {
		return fmt.Sprintf("%d won, %d not", won[kind{linTry, how}], lost[kind{linTry, how}])
	}
	t.Logf("TryLock: %s; TryLock with wait: %s; Lock with a deadline: %s; Lock cancelled meanwhile: %s; "+
		"re-entries: %d; unlocks: %d; unlocks of released holds: %d (ErrNotOwner %d)",
		try(waitNone), try(waitBound), try(waitDeadline), try(waitCancel),
		won[kind{linReenter, 0}], won[kind{linUnlock, 0}],
		won[kind{linStale, 0}]+lost[kind{linStale, 0}], lost[kind{linStale, 0}])
}

// RunLocks runs Workers goroutines on each of clients and returns the history they recorded:
// acquisitions of a fresh context, re-entry, Unlock, and Unlock of a hold released already.
// Without waits an acquisition is a TryLock; with waits, half of them wait (drawWait): a
// TryLock with a wait bound, or a Lock whose context reaches its deadline or is cancelled by
// another goroutine, each after 1-10ms. Then each lock is probed until it is free (see
// settleAll). locks[c][k] is lock k of Client c, clients[c].
func RunLocks(t *testing.T, clients []*aqs.Client, locks [][]Locker, waits bool) []porcupine.Operation {
	var holds atomic.Int64
	return Work(clients, func(w *Worker) {
		mine := locks[w.Client]
		rng := w.Rand
		// held is one held context of a hold. live: its context is not done, so the hold may
		// be re-entered through it (a Lock's held context ends with the caller's context, at
		// its deadline say); cancel ends the caller's context of the hold's first acquisition
		// once the hold is released.
		type held struct {
			ctx    context.Context
			key    int
			hold   int
			live   bool
			cancel context.CancelFunc
		}
		var stack []held    // the worker's held contexts of one lock, innermost last
		var released []held // holds released already, for stale unlocks
		do := func(in lockInput, call func() (lockOutput, error)) bool {
			in.client = w.Client
			return record(t, w, in, call)
		}
		unlock := func(h held, op int) bool {
			return do(lockInput{key: h.key, op: op, hold: h.hold}, func() (lockOutput, error) {
				err := mine[h.key].Unlock(h.ctx)
				if errors.Is(err, aqs.ErrNotOwner) {
					return lockOutput{notOwner: true}, nil
				}
				return lockOutput{}, err
			})
		}
		// acquire makes a new hold of a lock, or not, and records it.
		acquire := func(in lockInput) bool {
			in.client = w.Client
			l := mine[in.key]
			wc := startWait(in.wait, w)
			callAt := w.Now()
			hctx, ok, err := take(l, wc, in.wait)
			retAt := w.Now()
			var live bool
			in.wait, live = wc.ended(callAt)
			if err != nil {
				wc.cancel()
				t.Errorf("worker %d: %+v: %v", w.ID, in, err)
				return false
			}
			w.Record(in, lockOutput{ok: ok}, callAt, retAt)
			if !ok {
				wc.cancel()
				return true
			}
			stack = append(stack, held{hctx, in.key, in.hold, live, wc.cancel})
			return true
		}
		// unlockTop releases the innermost held context.
		unlockTop := func() bool {
			top := stack[len(stack)-1]
			if !unlock(top, linUnlock) {
				return false
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				top.cancel()
				released = append(released, top)
			}
			return true
		}
		for w.More() {
			r := rng.IntN(100)
			switch {
			case len(stack) == 0 && len(released) > 0 && r < 10:
				if !unlock(released[rng.IntN(len(released))], linStale) {
					return
				}
			case len(stack) == 0:
				in := lockInput{key: rng.IntN(len(mine)), op: linTry, hold: int(holds.Add(1)), wait: drawWait(rng, waits)}
				if !acquire(in) {
					return
				}
			case len(stack) < 3 && r < 40 && stack[len(stack)-1].live:
				top := stack[len(stack)-1]
				var hctx context.Context
				if !do(lockInput{key: top.key, op: linReenter, hold: top.hold}, func() (lockOutput, error) {
					var ok bool
					var err error
					hctx, ok, err = mine[top.key].TryLock(top.ctx)
					return lockOutput{ok: ok}, err
				}) {
					return
				}
				if hctx != nil {
					top.ctx = hctx
					stack = append(stack, top)
				}
			default:
				if !unlockTop() {
					return
				}
			}
		}
		// Release what is still held, recorded like the rest.
		for len(stack) > 0 {
			if !unlockTop() {
				return
			}
		}
	}, func(w *Worker) {
		mine := locks[w.Client]
		settleAll(t, len(mine), func(key int) (bool, bool) {
			in := lockInput{key: key, op: linTry, hold: int(holds.Add(1)), client: w.Client}
			unlock := in
			unlock.op = linUnlock
			return probeLock(t, w, mine[key], in, unlock)
		})
	})
}

// probeLock is one probe of settleAll: l taken without wait, recorded as the input try, and
// when won released again, recorded as the input unlock.
func probeLock(t *testing.T, w *Worker, l Locker, try, unlock any) (won, ok bool) {
	var ctx context.Context
	if !record(t, w, try, func() (out lockOutput, err error) {
		ctx, out.ok, err = l.TryLock(context.Background())
		return out, err
	}) {
		return false, false
	}
	if ctx == nil {
		return false, true
	}
	return true, record(t, w, unlock, func() (lockOutput, error) { return lockOutput{}, l.Unlock(ctx) })
}

// Check checks history against model within CheckTime, and logs how many operations it checked
// and how long it took, and how many ends of failed waits were left open (see splitWait). An
// inconclusive check fails the test like an illegal history; an illegal one also writes
// porcupine's visualization to a file kept after the test, whose path is logged.
func Check(t *testing.T, model porcupine.Model, history []porcupine.Operation) {
	t.Helper()
	began := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, history, CheckTime)
	open := 0
	for _, op := range history {
		if op.Return == openEnd {
			open++
		}
	}
	t.Logf("%d operations checked in %v: %s (ends of failed waits left open: %d)", len(history),
		time.Since(began), res, open)
	switch res {
	case porcupine.Ok:
	case porcupine.Unknown:
		t.Fatalf("linearizability check of %d operations inconclusive within %v", len(history), CheckTime)
	default:
		f, err := os.CreateTemp("", "aqs-linearizability-*.html")
		if err != nil {
			t.Fatalf("history is not linearizable; visualization file: %v", err)
		}
		path := f.Name()
		_ = f.Close()
		if err := porcupine.VisualizePath(model, info, path); err != nil {
			t.Fatalf("history is not linearizable; visualization: %v", err)
		}
		t.Logf("visualization: %s", path)
		t.Fatalf("history of %d operations is not linearizable", len(history))
	}
}

// NamedLocker is a lock that RunNamedLocks can name and find the keys of: reentrant.Lock and
// fair.Lock are.
type NamedLocker interface {
	Locker
	Name() string
	Key() string
}

// RunNamedLocks runs RunLocks, with waits, on Locks locks shared by Clients Clients (each
// with a go-redis client of its own to rdb's servers), checks the history, split by
// SplitWaits, against model, and checks that the run left no key without a TTL. client makes
// an aqs Client on a go-redis client; lock makes the lock of a name on a Client, a fresh
// name when name is "".
func RunNamedLocks(t *testing.T, rdb redis.UniversalClient, client func(redis.UniversalClient) *aqs.Client,
	lock func(c *aqs.Client, name string) NamedLocker, model porcupine.Model) {
	t.Helper()
	first := make([]NamedLocker, Locks)
	locks := make([][]Locker, Clients) // [client][key]
	var clients []*aqs.Client
	for ci := range Clients {
		c := client(OwnRedis(t, rdb))
		clients = append(clients, c)
		for k := range Locks {
			name := ""
			if ci > 0 {
				name = first[k].Name()
			}
			l := lock(c, name)
			if ci == 0 {
				first[k] = l
			}
			locks[ci] = append(locks[ci], l)
		}
	}
	history := RunLocks(t, clients, locks, true)
	if t.Failed() {
		return
	}
	LogLockOutcomes(t, history)
	Check(t, model, SplitWaits(history))
	for _, l := range first {
		redistest.AssertNoKeyWithoutTTL(t, rdb, l.Name(), l.Key())
	}
}
