// Package lintest records histories of concurrent runs of aqs's locks against a real Redis and
// checks them for linearizability with porcupine; the tests of each primitive use it.
//
// Several goroutines on Clients runs random operations on a few locks for a short time; every
// operation is recorded with its input, its output and the times taken just before the library
// call and just after it returned. The history is then checked against a sequential
// specification. The default watchdog renews every hold, so expiry is out of play.
package lintest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/redistest"
)

// Locker is what RunLocks needs of a lock: reentrant.Lock and fair.Lock have it.
type Locker interface {
	TryLock(ctx context.Context, opts ...aqs.TryLockOption) (context.Context, bool, error)
	Unlock(ctx context.Context) error
}

// Lock operations of the history.
const (
	linTry     = iota // TryLock with a fresh context: a new holder
	linReenter        // TryLock with the top held context of the worker: re-entry
	linUnlock         // Unlock of the worker's top held context
	linStale          // Unlock of a context whose hold was released already
)

// lockInput is an operation: its kind, the hold it concerns (an id unique to one
// acquisition of a fresh context, shared by its re-entries), for linTry the wait, and the
// Client that made the call (HandOffLockModel hands a lock only among one Client's holds).
type lockInput struct {
	key    int // which of the run's locks
	op     int
	hold   int
	wait   time.Duration
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
			return fmt.Sprintf("lock%d TryLock(h%d, wait %v) -> %v", in.key, in.hold, in.wait, out.ok)
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
	type kind struct {
		op   int
		wait bool
	}
	won, lost := map[kind]int{}, map[kind]int{}
	for _, op := range history {
		in, out := op.Input.(lockInput), op.Output.(lockOutput)
		k := kind{in.op, in.wait > 0}
		if out.ok || ((in.op == linUnlock || in.op == linStale) && !out.notOwner) {
			won[k]++
		} else {
			lost[k]++
		}
	}
	t.Logf("TryLock: %d won, %d not; TryLock with wait: %d won, %d not; re-entries: %d; "+
		"unlocks: %d; unlocks of released holds: %d (ErrNotOwner %d)",
		won[kind{linTry, false}], lost[kind{linTry, false}], won[kind{linTry, true}], lost[kind{linTry, true}],
		won[kind{linReenter, false}], won[kind{linUnlock, false}],
		won[kind{linStale, false}]+lost[kind{linStale, false}], lost[kind{linStale, false}])
}

// RunLocks runs Workers goroutines on each Client and returns the history they recorded:
// TryLock of a fresh context (with a wait of 1-10ms half of the time when waits), re-entry,
// Unlock, and Unlock of a hold released already. locks[c][k] is lock k of Client c.
func RunLocks(t *testing.T, locks [][]Locker, waits bool) []porcupine.Operation {
	start := time.Now()
	stop := start.Add(RunFor)
	var (
		ops   atomic.Int64
		mu    sync.Mutex
		hist  []porcupine.Operation
		wg    sync.WaitGroup
		holds atomic.Int64
	)
	record := func(op porcupine.Operation) {
		mu.Lock()
		hist = append(hist, op)
		mu.Unlock()
	}
	for ci, mine := range locks {
		for w := range Workers {
			id := ci*Workers + w
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(id), uint64(start.UnixNano())))
				type held struct {
					ctx  context.Context
					key  int
					hold int
				}
				var stack []held    // the worker's held contexts of one lock, innermost last
				var released []held // holds released already, for stale unlocks
				do := func(in lockInput, call func() (lockOutput, error)) bool {
					in.client = ci
					callAt := time.Since(start).Nanoseconds()
					out, err := call()
					retAt := time.Since(start).Nanoseconds()
					if err != nil {
						t.Errorf("worker %d: %+v: %v", id, in, err)
						return false
					}
					record(porcupine.Operation{ClientId: id, Input: in, Call: callAt, Output: out, Return: retAt})
					return true
				}
				unlock := func(h held) bool {
					return do(lockInput{key: h.key, op: linUnlock, hold: h.hold}, func() (lockOutput, error) {
						err := mine[h.key].Unlock(h.ctx)
						if errors.Is(err, aqs.ErrNotOwner) {
							return lockOutput{notOwner: true}, nil
						}
						return lockOutput{}, err
					})
				}
				for time.Now().Before(stop) && ops.Add(1) <= MaxOps {
					r := rng.IntN(100)
					switch {
					case len(stack) == 0 && len(released) > 0 && r < 10:
						h := released[rng.IntN(len(released))]
						if !do(lockInput{key: h.key, op: linStale, hold: h.hold}, func() (lockOutput, error) {
							err := mine[h.key].Unlock(h.ctx)
							if errors.Is(err, aqs.ErrNotOwner) {
								return lockOutput{notOwner: true}, nil
							}
							return lockOutput{}, err
						}) {
							return
						}
					case len(stack) == 0:
						in := lockInput{key: rng.IntN(Locks), op: linTry, hold: int(holds.Add(1))}
						var opts []aqs.TryLockOption
						if waits && r < 50 {
							in.wait = time.Duration(1+rng.IntN(10)) * time.Millisecond
							opts = append(opts, aqs.WithWait(in.wait))
						}
						var hctx context.Context
						if !do(in, func() (lockOutput, error) {
							var ok bool
							var err error
							hctx, ok, err = mine[in.key].TryLock(context.Background(), opts...)
							return lockOutput{ok: ok}, err
						}) {
							return
						}
						if hctx != nil {
							stack = append(stack, held{hctx, in.key, in.hold})
						}
					case len(stack) < 3 && r < 40:
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
							stack = append(stack, held{hctx, top.key, top.hold})
						}
					default:
						top := stack[len(stack)-1]
						if !unlock(top) {
							return
						}
						stack = stack[:len(stack)-1]
						if len(stack) == 0 {
							released = append(released, top)
						}
					}
				}
				// Release what is still held, recorded like the rest.
				for len(stack) > 0 {
					if !unlock(stack[len(stack)-1]) {
						return
					}
					stack = stack[:len(stack)-1]
				}
			})
		}
	}
	wg.Wait()
	return hist
}

// Check checks history against model within CheckTime. An inconclusive
// check fails the test like an illegal history; an illegal one also writes porcupine's
// visualization to a file kept after the test, whose path is logged.
func Check(t *testing.T, model porcupine.Model, history []porcupine.Operation) {
	t.Helper()
	began := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, history, CheckTime)
	t.Logf("%d operations checked in %v: %s", len(history), time.Since(began), res)
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
	for ci := range Clients {
		c := client(OwnRedis(t, rdb))
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
	history := RunLocks(t, locks, true)
	if t.Failed() {
		return
	}
	LogLockOutcomes(t, history)
	Check(t, model, SplitWaits(history))
	for _, l := range first {
		redistest.AssertNoKeyWithoutTTL(t, rdb, l.Name(), l.Key())
	}
}
