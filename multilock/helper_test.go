package multilock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/multilock"
)

// Roles of the child processes.
//
// The multi-process tests (process_test.go) run this test binary again in roleTaker, as
// redistest.RegisterRole describes: a process with one aqs Client that takes multi-locks and
// fair locks as the parent tells it, each acquisition in a goroutine of its own:
//
//	child:  "ready"                        connected, scripts loaded
//	parent: "hold <k> <kind> <name> …"     take acquisition k and keep it; kind "multi" is
//	                                       the multi-lock on the names, "fair" the fair lock
//	                                       of the one name
//	parent: "join <k> <kind> <name> …"     take acquisition k and release it at once
//	child:  "got <k> <unix ns>"            k holds; the time is when Lock returned
//	child:  "rel <k> <unix ns>"            k released; the time is when Unlock was called
//	child:  "failed <k> <error>"           k's Lock or Unlock failed (also on stderr)
//	parent: "release <k>"                  release the held k
//	parent: "end"                          exit once the joins are done
//
// The times are the child's wall clock, which is the clock of every process of the machine
// and of Redis: a hold cannot have begun after its "got" time, nor ended before its "rel"
// time. The child exits with redistest.ExitOK when every acquisition and release succeeded,
// redistest.ExitFailed otherwise; at EOF on stdin it exits on the spot, holding and queued
// for whatever it holds and waits for, as a crash would.

// roleTaker is the process of acquisitions above.
var roleTaker = redistest.RegisterRole("taker", runTaker)

// takerParams are roleTaker's parameters.
type takerParams struct {
	WaiterTimeout time.Duration // the locks' WithWaiterTimeout
	Watchdog      time.Duration // the Client's watchdog timeout: the lease of its holds
}

// The protocol's words.
const (
	lineReady   = "ready"
	lineHold    = "hold"
	lineJoin    = "join"
	lineGot     = "got"
	lineRel     = "rel"
	lineFailed  = "failed"
	lineRelease = "release"
	lineEnd     = "end"
	kindMulti   = "multi"
	kindFair    = "fair"
)

// takerTimeout bounds one acquisition of a child: only a stuck child waits that long, the
// tests' bounds are shorter.
const takerTimeout = time.Minute

// locker is what a child takes: a multi-lock or a fair lock.
type locker interface {
	Lock(ctx context.Context, opts ...aqs.LockOption) (context.Context, error)
	Unlock(ctx context.Context) error
}

// taking is one acquisition of a child.
type taking struct {
	l      locker
	held   context.Context
	cancel context.CancelFunc // of the context it was taken with
}

// taker is the state of one child.
type taker struct {
	env *redistest.ChildEnv
	c   *aqs.Client
	p   takerParams
	wg  sync.WaitGroup

	mu     sync.Mutex
	holds  map[int]*taking // held acquisitions, by number
	failed bool
}

// runTaker is roleTaker.
func runTaker(env *redistest.ChildEnv, p takerParams) error {
	rdb, c, err := env.Client(aqs.WithWatchdogTimeout(p.Watchdog))
	if err != nil {
		return err
	}
	defer rdb.Close()
	x := &taker{env: env, c: c, p: p, holds: map[int]*taking{}}
	env.Println(lineReady)
	for cmd := range env.Lines() {
		if cmd == lineEnd {
			x.wg.Wait()
			if x.failed {
				return errors.New("an acquisition or release failed")
			}
			return nil
		}
		if err := x.do(strings.Fields(cmd)); err != nil {
			return fmt.Errorf("command %q: %w", cmd, err)
		}
	}
	panic("unreachable: the parent's lines end only with the process")
}

// do runs one command of the parent; an error is a command out of the protocol.
func (x *taker) do(f []string) error {
	if len(f) < 2 {
		return errors.New("too short")
	}
	k, err := strconv.Atoi(f[1])
	if err != nil {
		return err
	}
	switch {
	case (f[0] == lineHold || f[0] == lineJoin) && len(f) >= 4:
		l, err := x.newLocker(f[2], f[3:])
		if err != nil {
			return err
		}
		x.wg.Go(func() { x.take(k, l, f[0] == lineJoin) })
	case f[0] == lineRelease && len(f) == 2:
		x.mu.Lock()
		h := x.holds[k]
		delete(x.holds, k)
		x.mu.Unlock()
		if h == nil {
			return fmt.Errorf("acquisition %d is not held", k)
		}
		x.release(k, h)
	default:
		return errors.New("unknown command")
	}
	return nil
}

// newLocker returns the lock of kind on names.
func (x *taker) newLocker(kind string, names []string) (locker, error) {
	switch kind {
	case kindMulti:
		return multilock.New(x.c, names, multilock.WithWaiterTimeout(x.p.WaiterTimeout))
	case kindFair:
		if len(names) != 1 {
			return nil, fmt.Errorf("a fair lock has one name, not %d", len(names))
		}
		return fair.New(x.c, names[0], fair.WithWaiterTimeout(x.p.WaiterTimeout))
	}
	return nil, fmt.Errorf("unknown kind %q", kind)
}

// take takes l as acquisition k; a join releases it at once, a hold keeps it.
func (x *taker) take(k int, l locker, join bool) {
	// The bound is on the wait only: the held context, a child of ctx, lives on.
	ctx, cancel := context.WithCancel(context.Background())
	bound := time.AfterFunc(takerTimeout, cancel)
	held, err := l.Lock(ctx)
	bound.Stop()
	if err != nil {
		cancel()
		x.fail(k, fmt.Errorf("lock: %w", err))
		return
	}
	h := &taking{l: l, held: held, cancel: cancel}
	if !join { // before "got": the parent may send "release" at once
		x.mu.Lock()
		x.holds[k] = h
		x.mu.Unlock()
	}
	x.env.Println(lineGot, k, time.Now().UnixNano())
	if join {
		x.release(k, h)
	}
}

// release releases acquisition k.
func (x *taker) release(k int, h *taking) {
	at := time.Now()
	err := h.l.Unlock(h.held)
	h.cancel()
	if err != nil {
		x.fail(k, fmt.Errorf("unlock: %w", err))
		return
	}
	x.env.Println(lineRel, k, at.UnixNano())
}

// fail reports acquisition k's failure.
func (x *taker) fail(k int, err error) {
	fmt.Fprintf(os.Stderr, "taker (pid %d): acquisition %d: %v\n", os.Getpid(), k, err)
	x.env.Println(lineFailed, k, strings.ReplaceAll(err.Error(), "\n", " "))
	x.mu.Lock()
	x.failed = true
	x.mu.Unlock()
}
