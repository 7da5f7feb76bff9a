package acquire

import (
	"runtime"
	"time"
	"weak"

	"github.com/redaqs/aqs/internal/core"
)

// One Queue per Client, name and configuration.
//
// A Queue is the local half of a primitive's state: the hold this Client has, the releases on
// their way, the waiters that may take a hand-off. It belongs to the primitive as this Client
// sees it, not to a value: a service builds a value where it needs one (reentrant.New(client,
// "invoice:42") in each request's handler), and goroutines that each built their own value
// of one name must still hand the lock to one another within the Client, and a hold taken
// through one value must be known to the Queue of the value that releases it.
//
// So values find their Queue in the Client's registry (Runtime.Queues), by the key of the
// primitive and the configuration that its local hand-off follows. Values of one name that
// differ in that configuration (a reentrant and a fair lock of one name, or two waiter
// timeouts) keep a Queue each: each follows its own rules, and they meet in Redis as two
// Clients would.
//
// The registry holds its Queues weakly: a Queue lives while something uses it (a value, a
// call on its way, a hold, which keeps its Queue through its Grant's Owner, a release on its
// way), and the registry forgets it once it is collected. Nothing is lost then: a Queue that
// nothing refers to has no hold, no waiter and no release on its way, and the next value of
// that name starts a fresh one, as the first did. A service that touches a million names
// keeps no Queue for the names it no longer uses.

// sharedKey is what values must have in common to share a Queue. The name stands for the
// keys and the grant channel, which are functions of it for a primitive on one Client.
type sharedKey struct {
	kind          string // the primitive: its scripts and the meaning of its keys
	name          string
	waiterTimeout time.Duration
	board         time.Duration
	stay          bool
	streak        int
	waitOnly      bool
}

// Shared returns the Queue of rt for a value of the primitive kind ("reentrant", "fair",
// "rwlock", ...) with configuration cfg: the Queue that every other value of that kind, key
// and configuration on rt uses, made with cfg when there is none.
func Shared(rt *core.Runtime, kind string, cfg Config) *Queue {
	k := keyOf(kind, cfg)
	for {
		if v, ok := rt.Queues.Load(k); ok {
			if q := v.(weak.Pointer[Queue]).Value(); q != nil {
				return q
			}
			// Collected, its entry not yet forgotten: replace it, unless another value did.
			q := New(rt, cfg)
			wp := weak.Make(q)
			if rt.Queues.CompareAndSwap(k, v, wp) {
				forget(rt, k, q, wp)
				return q
			}
			continue
		}
		q := New(rt, cfg)
		wp := weak.Make(q)
		if _, loaded := rt.Queues.LoadOrStore(k, wp); !loaded {
			forget(rt, k, q, wp)
			return q
		}
	}
}

func keyOf(kind string, cfg Config) sharedKey {
	return sharedKey{kind: kind, name: cfg.Name, waiterTimeout: cfg.WaiterTimeout,
		board: cfg.Board, stay: cfg.Stay, streak: cfg.Streak, waitOnly: cfg.WaitOnly}
}

// Find returns the Queue that Shared would return for kind and cfg when rt has one, else nil.
// It reads only cfg's Name and the configuration of its hand-off, so that a value of a name
// whose Queue exists is found before its keys are computed (see Keep).
func Find(rt *core.Runtime, kind string, cfg Config) *Queue {
	if v, ok := rt.Queues.Load(keyOf(kind, cfg)); ok {
		return v.(weak.Pointer[Queue]).Value()
	}
	return nil
}

// Keep makes v the value that q keeps for its primitive, unless q keeps one already, and
// returns the value q keeps. A primitive whose values hold nothing of their own (an exclusive
// lock's) keeps its first value there: New then finds the Queue (Find) and returns that value,
// without computing its keys again. What q keeps lives as long as q.
// Every value kept with one Queue must be of one type.
func (q *Queue) Keep(v any) any {
	q.kept.CompareAndSwap(nil, v)
	return q.kept.Load()
}

// Kept returns the value q keeps (see Keep), or nil.
func (q *Queue) Kept() any { return q.kept.Load() }

// forget removes q's entry from the registry once q is collected, unless a newer Queue
// replaced it.
func forget(rt *core.Runtime, k sharedKey, q *Queue, wp weak.Pointer[Queue]) {
	runtime.AddCleanup(q, func(wp weak.Pointer[Queue]) { rt.Queues.CompareAndDelete(k, wp) }, wp)
}
