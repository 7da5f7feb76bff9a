package chaos_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// The test's side of the actors (actor_test.go): a cast of child processes on one primitive,
// whose lines the test reads into one log.

// cast is the actors on one primitive, with the test's own Client on it.
type cast struct {
	cfg      primConfig
	addr     string
	watchdog time.Duration
	witness  string // the witness directory
	rdb      *redis.Client
	c        *aqs.Client
	p        *prim // the test's own

	events chan event
	done   chan struct{}
	log    []event
	next   int // the next acquisition number
	actors []*actor

	overlaps int
	failures []event
}

// actor is one child.
type actor struct {
	*redistest.Child
	id  string // its aqs Client's id: the stem of its hold ids
	pid int
}

// event is one line of a child.
type event struct {
	a    *actor
	at   time.Time // when the test read it
	word string
	k    int
	ns   int64 // the time in the line, if any
	rest []string
}

func (e event) String() string {
	return fmt.Sprintf("%s: %s %d %d %v", e.a.Label(), e.word, e.k, e.ns, e.rest)
}

// newCast sets up the primitive of cfg on the Redis at addr; children get a Client with the
// given watchdog timeout.
func newCast(t *testing.T, addr string, cfg primConfig, watchdog time.Duration) *cast {
	t.Helper()
	c := &cast{cfg: cfg, addr: addr, watchdog: watchdog, witness: t.TempDir(),
		events: make(chan event, 64), done: make(chan struct{})}
	t.Cleanup(func() { close(c.done) })
	c.rdb = redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.rdb.Close() })
	var err error
	c.c, err = aqs.New(context.Background(), c.rdb, aqs.WithWatchdogTimeout(watchdog))
	require.NoError(t, err)
	t.Cleanup(func() { c.c.Close() })
	c.p, err = newPrim(context.Background(), c.c, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.rdb.Del(context.Background(), c.p.keys...) })
	return c
}

// start starts an actor and waits until it is ready.
func (c *cast) start(t *testing.T, label string) *actor {
	t.Helper()
	ch := roleActor.Start(t, label, redistest.Target{Addr: c.addr}, actorParams{Kind: c.cfg.kind, Name: c.cfg.name,
		WaiterTimeout: c.cfg.waiterTimeout, Permits: c.cfg.permits, Watchdog: c.watchdog, Witness: c.witness})
	rest := ch.Expect(t, "ready ", 30*time.Second)
	f := strings.Fields(rest)
	require.Len(t, f, 2, "%s: ready %q", label, rest)
	pid, err := strconv.Atoi(f[1])
	require.NoError(t, err)
	a := &actor{Child: ch, id: f[0], pid: pid}
	lines := redistest.Merge(ch)
	go func() {
		for {
			select {
			case l := <-lines:
				select {
				case c.events <- parseEvent(a, l.Text):
				case <-c.done:
					return
				}
			case <-c.done:
				return
			}
		}
	}()
	c.actors = append(c.actors, a)
	return a
}

func parseEvent(a *actor, line string) event {
	e := event{a: a, at: time.Now()}
	f := strings.Fields(line)
	if len(f) == 0 {
		return e
	}
	e.word = f[0]
	if len(f) > 1 {
		e.k, _ = strconv.Atoi(f[1])
	}
	if len(f) > 2 {
		e.ns, _ = strconv.ParseInt(f[2], 10, 64)
		e.rest = f[2:]
	}
	return e
}

// hold has a take op and keep it (lease 0: the watchdog's); it returns the acquisition's
// number.
func (c *cast) hold(t *testing.T, a *actor, op string, lease time.Duration) int {
	t.Helper()
	c.next++
	a.Send(t, fmt.Sprintf("hold %d %s %d", c.next, op, lease.Milliseconds()))
	return c.next
}

// join has a take op, work for work, and release; it returns the acquisition's number.
func (c *cast) join(t *testing.T, a *actor, op string, work time.Duration) int {
	t.Helper()
	c.next++
	a.Send(t, fmt.Sprintf("join %d %s %d", c.next, op, work.Milliseconds()))
	return c.next
}

// pump reads the children's lines into the log until cond holds, and fails the test when it
// does not within d. Overlaps and failures are counted as they come.
func (c *cast) pump(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for !cond() {
		select {
		case e := <-c.events:
			c.log = append(c.log, e)
			switch e.word {
			case "overlap":
				c.overlaps++
				t.Errorf("overlap: %v", e)
			case "failed":
				c.failures = append(c.failures, e)
			}
		case <-timer.C:
			t.Fatalf("%s: not within %v; log: %v", what, d, c.log)
		}
	}
}

// find returns the logged line word of acquisition k.
func (c *cast) find(word string, k int) (event, bool) {
	for _, e := range c.log {
		if e.word == word && e.k == k {
			return e, true
		}
	}
	return event{}, false
}

// has reports whether the line word of acquisition k was logged.
func (c *cast) has(word string, k int) bool {
	_, ok := c.find(word, k)
	return ok
}

// await waits for the line word of acquisition k (or its failure) and returns it.
func (c *cast) await(t *testing.T, word string, k int, d time.Duration) event {
	t.Helper()
	c.pump(t, d, fmt.Sprintf("%s %d", word, k), func() bool { return c.has(word, k) || c.has("failed", k) })
	if e, ok := c.find("failed", k); ok && word != "failed" {
		t.Fatalf("acquisition %d failed: %v", k, e)
	}
	e, _ := c.find(word, k)
	return e
}

// kill kills a with SIGKILL and returns when it was sent.
func (c *cast) kill(t *testing.T, a *actor) time.Time {
	t.Helper()
	at := time.Now()
	exit := a.Kill(t, 10*time.Second)
	require.Equal(t, -1, exit.ExitCode(), "%s ended by a signal: %v", a.Label(), exit)
	return at
}

// signal sends a live actor a signal (SIGSTOP, SIGCONT).
func (c *cast) signal(t *testing.T, a *actor, sig syscall.Signal) {
	t.Helper()
	p, err := os.FindProcess(a.pid)
	require.NoError(t, err)
	require.NoError(t, p.Signal(sig), "%s: %v", a.Label(), sig)
}

// end tells the live actors to exit once their joins are done and waits for them.
func (c *cast) end(t *testing.T) {
	t.Helper()
	for _, a := range c.actors {
		if !a.Killed() {
			a.Send(t, "end")
		}
	}
	for _, a := range c.actors {
		if !a.Killed() {
			require.NoError(t, a.Wait(t, 30*time.Second), "%s", a.Label())
		}
	}
}

// queuedCount returns how many waiters of actor a are in the primitive's wait queue in
// Redis: every primitive queues its waiters in one list (exact). A waiter of the holder's own
// Client that boarded its hold is not queued yet; the actors here are processes of their own.
func (c *cast) queuedCount(t *testing.T, a *actor, _ string) (n int, exact bool) {
	t.Helper()
	members, err := c.rdb.LRange(context.Background(), c.p.key+":q", 0, -1).Result()
	require.NoError(t, err)
	for _, m := range members {
		if strings.HasPrefix(m, a.id+":") {
			n++
		}
	}
	return n, true
}

// awaitFree waits, bounded, until nobody holds the primitive.
func (c *cast) awaitFree(t *testing.T, d time.Duration) {
	t.Helper()
	var last error
	ok := assertEventually(d, func() bool {
		free, err := c.p.free(context.Background())
		last = err
		return err == nil && free
	})
	require.True(t, ok, "%s %q still held after %v (last error %v)", c.cfg.kind, c.cfg.name, d, last)
}

// assertEventually polls cond every 5ms until it holds or d passed.
func assertEventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}
