package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// The actor: a child process in roleActor (see redistest.RegisterRole) with one aqs Client
// and one primitive, which acquires and releases as the test tells it on stdin and reports on
// stdout:
//
//	child:  "ready <client id> <pid>"        connected, scripts loaded
//	parent: "hold <k> <op> <lease ms>"       acquire op (prim_test.go) and keep it; lease 0: the
//	                                         watchdog's, else aqs.WithLease (locks, leased permits)
//	parent: "join <k> <op> <work ms>"        acquire op, work for work ms, release
//	child:  "got <k> <unix ns> <token>"      acquisition k holds, inside the witness
//	child:  "overlap <k>"                    the witness was taken: mutual exclusion broken
//	child:  "rel <k> <unix ns>"              acquisition k left the witness then and released
//	child:  "lost <k> <unix ns> <cause>"     k's held context ended while held; the cause is
//	                                         "locklost" for aqs.ErrLockLost, else its text
//	child:  "failed <k> <error>"             acquisition or release k failed
//	parent: "release <k>"                    leave the witness and release the held k
//	parent: "write <k>"                      send the storage a write with k's token, whatever
//	                                         the state of its held context (a late write)
//	child:  "write <k> <token>"
//	parent: "end"                            exit once the joins are done
//
// Times are the child's wall clock, comparable across the processes of one machine. Every
// connection is named "chaos-<pid>" (CLIENT LIST), so that the test can see a child waiting
// on a channel. At EOF on stdin the process exits on the spot, holding whatever it holds.

// roleActor is the actor's role.
var roleActor = redistest.RegisterRole("actor", runActor)

// actorParams are roleActor's parameters: its primitive (see primConfig), its Client's
// watchdog timeout, and the witness directory.
type actorParams struct {
	Kind, Name    string
	WaiterTimeout time.Duration
	Permits       int
	Watchdog      time.Duration
	Witness       string
}

// actorTimeout bounds any one acquisition of an actor: only a stuck child lives that long,
// the tests' own bounds are shorter.
const actorTimeout = time.Minute

func runActor(env *redistest.ChildEnv, ap actorParams) error {
	cfg := primConfig{kind: ap.Kind, name: ap.Name, waiterTimeout: ap.WaiterTimeout, permits: ap.Permits}
	w := witness{dir: ap.Witness, permits: cfg.permits}
	rdb := redis.NewClient(&redis.Options{Addr: env.Target.Addr, ClientName: fmt.Sprintf("chaos-%d", os.Getpid())})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := aqs.New(ctx, rdb, aqs.WithWatchdogTimeout(ap.Watchdog),
		aqs.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))))
	if err != nil {
		return err
	}
	p, err := newPrim(ctx, c, cfg)
	if err != nil {
		return err
	}
	a := &player{p: p, w: w, holds: map[int]*actorHold{}}
	a.println("ready", c.ID(), os.Getpid())
	for line := range env.Lines() {
		f := strings.Fields(line)
		if len(f) == 1 && f[0] == "end" {
			a.wg.Wait()
			return nil
		}
		if err := a.do(f); err != nil {
			return fmt.Errorf("%q: %w", line, err)
		}
	}
	panic("unreachable: the parent's lines end only with the process")
}

type player struct {
	p  *prim
	w  witness
	wg sync.WaitGroup

	outMu sync.Mutex
	mu    sync.Mutex
	holds map[int]*actorHold
}

type actorHold struct {
	h      *held
	leave  func()
	cancel context.CancelFunc // of the context the hold was taken with
}

func (a *player) println(args ...any) {
	a.outMu.Lock()
	defer a.outMu.Unlock()
	fmt.Println(args...)
}

// do runs one command; an error is a malformed command.
func (a *player) do(f []string) error {
	if len(f) < 2 {
		return errors.New("too short")
	}
	k, err := strconv.Atoi(f[1])
	if err != nil {
		return err
	}
	switch {
	case f[0] == "hold" && len(f) == 4, f[0] == "join" && len(f) == 4:
		ms, err := strconv.Atoi(f[3])
		if err != nil {
			return err
		}
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.acquire(k, f[2], f[0] == "join", time.Duration(ms)*time.Millisecond)
		}()
	case f[0] == "release":
		a.mu.Lock()
		x := a.holds[k]
		delete(a.holds, k)
		a.mu.Unlock()
		if x == nil {
			return fmt.Errorf("no hold %d", k)
		}
		a.release(k, x)
	case f[0] == "write":
		a.mu.Lock()
		x := a.holds[k]
		a.mu.Unlock()
		if x == nil {
			return fmt.Errorf("no hold %d", k)
		}
		a.println("write", k, x.h.token)
	default:
		return errors.New("unknown command")
	}
	return nil
}

// acquire takes op as acquisition k; a join works for work and releases, a hold keeps it.
func (a *player) acquire(k int, op string, join bool, d time.Duration) {
	// The bound applies to the acquisition only: the held context is a child of ctx, and
	// must not end before the release.
	ctx, cancel := context.WithCancel(context.Background())
	bound := time.AfterFunc(actorTimeout, cancel)
	var opts []aqs.LeaseOption
	if !join && d > 0 {
		opts = append(opts, aqs.WithLease(d))
	}
	h, err := a.p.acquire(ctx, op, opts...)
	bound.Stop()
	if err != nil {
		cancel()
		a.println("failed", k, oneLine(err))
		return
	}
	leave, err := a.w.enter(op)
	switch {
	case errors.Is(err, errOverlap):
		a.println("overlap", k)
	case err != nil:
		a.println("failed", k, "witness:", oneLine(err))
		_ = h.Release()
		cancel()
		return
	}
	x := &actorHold{h: h, leave: leave, cancel: cancel}
	if !join { // before "got": the test may send "write" or "release" at once
		a.mu.Lock()
		a.holds[k] = x
		a.mu.Unlock()
	}
	a.println("got", k, time.Now().UnixNano(), h.token)
	go func() {
		<-h.ctx.Done()
		cause := context.Cause(h.ctx)
		switch {
		case errors.Is(cause, aqs.ErrReleased), errors.Is(cause, context.Canceled) && h.cancel != nil:
		case errors.Is(cause, aqs.ErrLockLost):
			a.println("lost", k, time.Now().UnixNano(), "locklost")
		default:
			a.println("lost", k, time.Now().UnixNano(), oneLine(cause))
		}
	}()
	if !join {
		return
	}
	time.Sleep(d) // the work done under the hold
	a.release(k, x)
}

func (a *player) release(k int, x *actorHold) {
	x.leave()
	at := time.Now()
	err := x.h.Release()
	x.cancel()
	if err != nil {
		a.println("failed", k, "release:", oneLine(err))
		return
	}
	a.println("rel", k, at.UnixNano())
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }
