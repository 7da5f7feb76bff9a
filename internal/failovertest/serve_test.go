package failovertest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs/election"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/reentrant"
	"github.com/redaqs/aqs/rwlock"
	"github.com/redaqs/aqs/semaphore"
)

// Every primitive serves again after a failover.
//
// Three kinds of failover (failoverKinds): a controlled Sentinel failover (SENTINEL FAILOVER)
// of a master with one replica, the death of a Sentinel master with two replicas (SIGKILL),
// and the death of a Redis Cluster master (3 masters, a replica each), whose node is started
// again after the promotion and rejoins as a replica; each with the replica-sync policy off
// and on (WithReplicaSync(1, serveSyncTimeout)).
//
// A run starts a Redis deployment of one kind and serveChildren processes,
// each with its own Client, whose workers use every primitive on one name each (see
// serve_child_test.go): reentrant and fair locks, both sides of a read-write lock, counting
// and leased semaphores of servePermits permits, latches, a fair lock's Condition, and an
// election, whose candidates campaign, lead briefly and resign, with a watchdog timeout of
// serveWatchdog and a deadline of serveDeadline on every call (an election's campaign), with
// or without the replica-sync policy. Each child also observes the election for the whole
// run (Observe). After serveBefore of load the master is lost, and the load
// goes on for serveAfter past the promotion (past the moment replicas can acknowledge again,
// with the policy); then the children stop, each releasing what it holds.
//
// Each run checks, per primitive:
//   - it serves again: a call started after the promotion acquires within serveWithin of it
//     (with the policy, of the moment a replica can acknowledge again: before, nothing can be
//     acquired); without the policy, within the lease of a hold lost with the old master
//     (serveWatchdog) and serveSlack;
//   - every call returns by its deadline, give or take serveSlack, whatever the servers do;
//   - with the policy, nothing overlaps (two holders of a lock, a writer beside anyone, more
//     permits held than the semaphore has, two leaders), and a call refused for want of
//     acknowledgement is refused within about two replica-sync timeouts (it does not wait for
//     its deadline);
//   - afterwards nothing is held or queued, live, in Redis (nor does the election have a
//     leader, or a leader record that does not expire).
//
// The bounds on serving again (the first point, and the refusal's in the third) are for one
// failover. When the sentinels fail over again, on their own, while the load goes on (their
// configuration epoch at the end is above the one at the promotion), the run logs so and
// checks only the rest (see check).
//
// A leader's leadership lasts from its Campaign's return to its Resign, or to the moment its
// leading context ended with aqs.ErrLockLost (each leader checks the context's Err before it
// resigns, as before any act of leadership). Without the policy, a failover that loses the
// leader's hold lets the next candidate lead while the former leader's context is still live,
// until its renewal finds the hold gone: those overlaps are allowed, as for the locks, and only
// the fencing token tells the two leaders apart. The election is also checked for its
// observers: every child's observer received a leader whose Campaign returned after the
// promotion (its subscription followed the new master), and each received strictly greater
// tokens, one leader after the other (nobody proclaims).
//
// A counting semaphore is checked for late calls and, with the policy after a master's death,
// overlaps only (see check).
//
// It logs per primitive the time from the promotion to the first acquisition, the longest
// call refused for want of acknowledgement, the errors by kind and the overlaps, and how far
// the election's observers lag: the time from the first Campaign that returned after the
// promotion until every child's observer had received a leader that campaigned after the
// promotion (a little below zero when they heard of that leader before its Campaign returned).
// AQS_FAILOVER_RUNS=n repeats each case n times and logs p50 and max over the runs (make
// failover); AQS_SERVE_DETAILS=1 logs the first of each distinct error after the failover.

const (
	serveChildren = 3
	serveBefore   = 2 * time.Second
	serveAfter    = 6 * time.Second
	// serveWithin is the bound: the watchdog timeout (the lease of a hold lost with
	// the old master) and 3s.
	serveWithin = serveWatchdog + 3*time.Second
	serveSlack  = 750 * time.Millisecond
	// serveRefused bounds a call refused for want of acknowledgement, with the policy: before
	// its deadline, so that the refusal, not the deadline, ends it (its attempt's WAIT, the
	// probe's first wait and WAIT, and room for a machine loaded by two CPU-bound processes
	// besides the tests: a refusal came 2.54s after the call there, and 2.89s once every
	// child also ran the election's candidates and observer under make test).
	serveRefused = serveDeadline - 50*time.Millisecond
)

var allPrims = []string{pReentrant, pFair, pWrite, pRead, pCounting, pLeased, pLatch, pCond, pElection}

// deployment is one Redis deployment under test, with its failover.
type deployment struct {
	target redistest.Target          // how children reach it
	rdb    redis.UniversalClient     // the parent's client
	names  map[string]string         // the primitives' names
	fail   func() (time.Time, error) // loses the master; returns the moment of the promotion
	// acks returns when, after the promotion, a replica could acknowledge again (it waits
	// for it).
	acks func() (time.Time, error)
	// epoch, when not nil, returns the deployment's failover count (Sentinel's configuration
	// epoch): a run compares it after the promotion and at its end.
	epoch func() (int64, error)
}

// failoverKind starts a deployment of one kind.
type failoverKind struct {
	label string
	start func(t *testing.T) *deployment
	// split: the old master keeps taking writes for a moment after the promotion (a
	// controlled failover: SENTINEL FAILOVER does not stop it), and what its clients wrote
	// there is lost, acknowledged by replicas or not.
	split bool
}

func failoverKinds() []failoverKind {
	sentinel := func(t *testing.T, replicas int, switchOver bool) *deployment {
		g := redistest.NewSentinel(t, redistest.WithReplicas(replicas))
		d := &deployment{target: redistest.Target{Sentinels: g.SentinelAddrs()},
			rdb: g.Client(t), names: primNames(redistest.Name(t), nil)}
		d.fail = func() (time.Time, error) {
			var err error
			if switchOver {
				_, err = g.SwitchOver()
			} else {
				_, err = g.Failover()
			}
			return time.Now(), err
		}
		d.acks = func() (time.Time, error) {
			_, err := g.WaitReplicas(1)
			return time.Now(), err
		}
		d.epoch = g.Epoch
		return d
	}
	return []failoverKind{
		// The group: one replica. With the policy on, nothing can be acquired until
		// Sentinel turns the old master into the new one's replica, some ten seconds later.
		{"sentinel switch-over", func(t *testing.T) *deployment { return sentinel(t, 1, true) }, true},
		// Two replicas, so that the new master has one at once, as the policy needs.
		{"sentinel kill", func(t *testing.T) *deployment { return sentinel(t, 2, false) }, false},
		{"cluster kill", func(t *testing.T) *deployment {
			cl := redistest.NewClusterWithReplicas(t)
			rdb := redis.NewClusterClient(cl.Options())
			t.Cleanup(func() { rdb.Close() })
			// Every name on shard 0, which loses its master.
			d := &deployment{target: redistest.Target{Cluster: cl.AllAddrs()}, rdb: rdb,
				names: primNames(redistest.Name(t), func(name string) bool { return cl.MasterOf("aqs:{"+name+"}") == 0 })}
			d.fail = func() (time.Time, error) {
				if err := cl.KillMaster(0); err != nil {
					return time.Time{}, err
				}
				_, err := cl.WaitPromoted(0)
				return time.Now(), err
			}
			d.acks = func() (time.Time, error) {
				// The killed node rejoins, as the new master's replica.
				err := cl.RestartKilled(0)
				return time.Now(), err
			}
			return d
		}, false},
	}
}

// primNames names each primitive after base; with on, only names that on accepts.
func primNames(base string, on func(string) bool) map[string]string {
	names := map[string]string{}
	for _, p := range []string{pReentrant, pFair, "rwlock", pCounting, pLeased, pLatch, pCond, pElection} {
		for i := 0; ; i++ {
			n := base + "-" + p + "-" + strconv.Itoa(i)
			if on == nil || on(n) {
				names[p] = n
				break
			}
		}
	}
	return names
}

func TestEveryPrimitiveServesAgainAfterAFailover(t *testing.T) {
	runs := 1
	if s := os.Getenv("AQS_FAILOVER_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "AQS_FAILOVER_RUNS")
		runs = n
	}
	for _, k := range failoverKinds() {
		for _, policy := range []bool{false, true} {
			label := k.label + ", policy off"
			if policy {
				label = k.label + ", policy on"
			}
			t.Run(label, func(t *testing.T) {
				if runs == 1 {
					// One run of each case, as make test runs them: side by side. The
					// figures of several (make failover) come from one case at a time, so
					// that the cases do not slow each other down.
					t.Parallel()
				}
				var all []*serveRun
				for i := range runs {
					t.Run(strconv.Itoa(i), func(t *testing.T) {
						r := runServe(t, k, policy)
						all = append(all, r)
						r.check(t)
						t.Logf("%s\n%s", label, r.table())
					})
				}
				if runs > 1 {
					t.Logf("%s, %d runs:\n%s", label, runs, summary(all))
				}
			})
		}
	}
}

// serveRun is what one run saw.
type serveRun struct {
	policy             bool
	split              bool // see failoverKind.split
	failedAt, promoted time.Time
	acks               time.Time // with the policy: when a replica could acknowledge again
	children           []string  // the children's labels
	calls              []call
	observed           map[string][]observation // by child: what its election observer received
	left               []string                 // what was found held or queued afterwards
	// again says that the sentinels failed over again, on their own, during the load after
	// the promotion (their epoch went from epochs[0] to epochs[1]).
	again  bool
	epochs [2]int64
}

func runServe(t *testing.T, k failoverKind, policy bool) *serveRun {
	ctx := context.Background()
	d := k.start(t)
	r := &serveRun{policy: policy, split: k.split, observed: map[string][]observation{}}
	setPermits(t, d)

	var children []*redistest.Child
	for i := range serveChildren {
		children = append(children, roleServe.Start(t, "load "+strconv.Itoa(i), d.target,
			serveParams{ID: strconv.Itoa(i), Names: d.names, Sync: policy}))
		r.children = append(r.children, children[i].Label())
	}
	lines := redistest.Merge(children...)
	var mu sync.Mutex // r.calls, until read is closed
	read := make(chan struct{})
	ready := make(chan struct{})
	go func() {
		defer close(read)
		for ended, started := 0, 0; ended < len(children); {
			l := <-lines
			switch l.Text {
			case "READY": // a child's first line: its load starts
				if started++; started == len(children) {
					close(ready)
				}
				continue
			case "END": // a child's last line
				ended++
				continue
			}
			if strings.HasPrefix(l.Text, "O ") {
				o, err := parseObservation(l.Text)
				if err != nil {
					t.Errorf("%s: %v", l.Child.Label(), err)
					continue
				}
				mu.Lock()
				r.observed[l.Child.Label()] = append(r.observed[l.Child.Label()], o)
				mu.Unlock()
				continue
			}
			c, err := parseCall(l.Text)
			if err != nil {
				t.Errorf("%s: %v", l.Child.Label(), err)
				continue
			}
			mu.Lock()
			r.calls = append(r.calls, c)
			mu.Unlock()
		}
	}()

	select {
	case <-ready:
	case <-time.After(time.Minute):
		t.Fatal("the children did not all start")
	}
	time.Sleep(serveBefore) // the load before the failover: a pause, not a wait for a condition
	r.failedAt = time.Now()
	var err error
	r.promoted, err = d.fail()
	require.NoError(t, err)
	if d.epoch != nil {
		r.epochs[0], err = d.epoch()
		require.NoError(t, err)
	}
	r.acks = r.promoted
	whole := make(chan struct{})
	if policy {
		close(whole)
		r.acks, err = d.acks()
		require.NoError(t, err)
	} else {
		// The deployment is made whole again all the same (the cluster's killed node
		// rejoins), so that runs end alike; without the policy no call waits for it, but the
		// run does before it ends (the wait is bounded), so that it is not left polling
		// servers that are stopped.
		go func() {
			defer close(whole)
			_, _ = d.acks()
		}()
	}
	time.Sleep(time.Until(r.acks.Add(serveAfter)))
	for _, c := range children {
		c.Send(t, "stop")
	}
	for _, c := range children {
		require.NoError(t, c.Wait(t, 30*time.Second), "%s", c.Label())
	}
	if d.epoch != nil {
		r.epochs[1], err = d.epoch()
		require.NoError(t, err)
		r.again = r.epochs[1] > r.epochs[0]
	}
	select {
	case <-read:
	case <-time.After(10 * time.Second):
		t.Fatal("the children's lines did not all come")
	}
	<-whole
	r.left = leftBehind(t, ctx, d)
	return r
}

// setPermits sets the semaphores' permits before the load.
func setPermits(t *testing.T, d *deployment) {
	ctx := context.Background()
	c := newClient(t, d.rdb)
	cs, err := semaphore.New(c, d.names[pCounting])
	require.NoError(t, err)
	_, err = cs.TrySetPermits(ctx, servePermits)
	require.NoError(t, err)
	ls, err := semaphore.NewLeased(c, d.names[pLeased])
	require.NoError(t, err)
	_, err = ls.TrySetPermits(ctx, servePermits)
	require.NoError(t, err)
}

// leftBehind returns what is held, or queued and live, of the primitives after the load: at
// once when nothing is, else what is still there after a while (background clean-ups, a
// waiter's deadline).
func leftBehind(t *testing.T, ctx context.Context, d *deployment) []string {
	c := newClient(t, d.rdb)
	var left []string
	var lastErr error
	look := func() bool {
		left, lastErr = nil, nil
		note := func(what string, err error) {
			if err != nil {
				lastErr = err
			}
			if what != "" {
				left = append(left, what)
			}
		}
		for _, p := range []string{pReentrant, pFair, pCond, pElection} {
			var locked bool
			var err error
			if p == pReentrant {
				var l *reentrant.Lock
				if l, err = reentrant.New(c, d.names[p]); err == nil {
					locked, err = l.IsLocked(ctx)
				}
			} else {
				// The election's candidates queue on the fair lock of its name.
				var l *fair.Lock
				if l, err = fair.New(c, d.names[p]); err == nil {
					locked, err = l.IsLocked(ctx)
				}
			}
			note(cond(locked, p+" locked"), err)
		}
		if e, err := election.New(c, d.names[pElection]); err == nil {
			l, ok, err := e.Leader(ctx)
			note(cond(ok, fmt.Sprintf("election: %+v leads", l)), err)
			// The leader record outlives the last leadership until its lease's expiry.
			record := e.Keys()[len(e.Keys())-1]
			ttl, err := d.rdb.PTTL(ctx, record).Result()
			note(cond(ttl == -1, "election: the leader record "+record+" does not expire"), err)
		} else {
			note("", err)
		}
		if rw, err := rwlock.New(c, d.names["rwlock"]); err == nil {
			in, err := rw.Info(ctx)
			note(cond(in.Writer != "" || in.Readers > 0, fmt.Sprintf("rwlock held: %+v", in)), err)
		} else {
			note("", err)
		}
		if cs, err := semaphore.New(c, d.names[pCounting]); err == nil {
			n, err := cs.Available(ctx)
			note(cond(n != servePermits, fmt.Sprintf("counting semaphore: %d of %d permits available", n, servePermits)), err)
		} else {
			note("", err)
		}
		if ls, err := semaphore.NewLeased(c, d.names[pLeased]); err == nil {
			n, err := ls.Available(ctx)
			note(cond(n != servePermits, fmt.Sprintf("leased semaphore: %d of %d permits available", n, servePermits)), err)
		} else {
			note("", err)
		}
		for p, name := range d.names {
			key := "aqs:{" + name + "}"
			for _, q := range []string{key + ":d", key + ":w:ready:d"} {
				live, err := d.rdb.ZCount(ctx, q, "("+strconv.FormatInt(time.Now().UnixMilli(), 10), "+inf").Result()
				note(cond(live > 0, fmt.Sprintf("%s: %d live waiters in %s", p, live, q)), err)
			}
		}
		return len(left) == 0 && lastErr == nil
	}
	for deadline := time.Now().Add(15 * time.Second); !look() && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond) // looks again: the state in Redis, not a condition of this process
	}
	if lastErr != nil {
		left = append(left, "could not look: "+lastErr.Error())
	}
	return left
}

func cond(b bool, s string) string {
	if b {
		return s
	}
	return ""
}

func parseCall(s string) (call, error) {
	f := strings.SplitN(s, " ", 9)
	if len(f) < 8 || f[0] != "C" {
		return call{}, fmt.Errorf("unexpected line %q", s)
	}
	var ns [3]int64
	for i := range ns {
		n, err := strconv.ParseInt(f[3+i], 10, 64)
		if err != nil {
			return call{}, fmt.Errorf("line %q: %w", s, err)
		}
		ns[i] = n
	}
	c := call{prim: f[1], worker: f[2], start: time.Unix(0, ns[0]), end: time.Unix(0, ns[2]), class: f[6]}
	if ns[1] != 0 {
		c.acq = time.Unix(0, ns[1])
	}
	c.lost = c.class == "lost"
	if f[7] != "-" {
		c.value = f[7]
	}
	if len(f) == 9 {
		c.detail = f[8]
	}
	return c, nil
}

func parseObservation(s string) (observation, error) {
	f := strings.SplitN(s, " ", 4)
	if len(f) != 4 || f[0] != "O" {
		return observation{}, fmt.Errorf("unexpected line %q", s)
	}
	at, err1 := strconv.ParseInt(f[1], 10, 64)
	token, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return observation{}, fmt.Errorf("unexpected line %q", s)
	}
	return observation{at: time.Unix(0, at), token: token, value: f[3]}, nil
}

// primFigures are one primitive's in one run.
type primFigures struct {
	first    time.Duration // from the promotion (with the policy, from acks) to the first acquisition
	served   bool
	errs     map[string]int
	overlaps int
	late     []call        // calls that returned later than their deadline and the slack
	syncMax  time.Duration // the longest call refused for want of acknowledgement
	syncLong call          // that call
	acquired int
}

func (r *serveRun) primFigures(prim string) primFigures {
	f := primFigures{errs: map[string]int{}}
	ref := r.acks
	var held []call
	for _, c := range r.calls {
		if c.prim != prim {
			continue
		}
		if c.end.Sub(c.start) > serveDeadline+serveSlack && (c.acq.IsZero() || c.acq.Sub(c.start) > serveDeadline+serveSlack) {
			f.late = append(f.late, c)
		}
		if c.acq.IsZero() {
			if !c.end.Before(r.failedAt) {
				f.errs[c.class]++
			}
			if c.class == eSync && c.end.Sub(c.start) > f.syncMax {
				f.syncMax, f.syncLong = c.end.Sub(c.start), c
			}
			continue
		}
		f.acquired++
		held = append(held, c)
		if !c.start.Before(ref) && (!f.served || c.acq.Sub(ref) < f.first) {
			f.first, f.served = c.acq.Sub(ref), true
		}
	}
	f.overlaps = overlaps(prim, held, r.calls)
	return f
}

// overlaps counts the acquisitions that went past what prim allows at once: for a lock, each
// hold that began while another was held; for a semaphore, each that began while its permits
// were all held; for the read-write lock's sides, each write hold that began while a reader or
// writer held, and each read hold that began while a writer held.
func overlaps(prim string, held []call, all []call) int {
	limit := 1
	switch prim {
	case pLatch, pCond:
		return 0 // nothing is held
	case pCounting, pLeased:
		limit = servePermits
	case pRead:
		// Readers conflict with writers only.
		var writers []call
		for _, c := range all {
			if c.prim == pWrite && !c.acq.IsZero() {
				writers = append(writers, c)
			}
		}
		n := 0
		for _, rd := range held {
			for _, w := range writers {
				if rd.acq.Before(w.end) && w.acq.Before(rd.end) {
					n++
					break
				}
			}
		}
		return n
	case pWrite:
		for _, c := range all {
			if c.prim == pRead && !c.acq.IsZero() {
				held = append(held, c)
			}
		}
	}
	type edge struct {
		at    time.Time
		delta int
		write bool
	}
	var edges []edge
	for _, c := range held {
		edges = append(edges, edge{c.acq, 1, c.prim != pRead}, edge{c.end, -1, c.prim != pRead})
	}
	sort.Slice(edges, func(i, j int) bool {
		if !edges[i].at.Equal(edges[j].at) {
			return edges[i].at.Before(edges[j].at)
		}
		return edges[i].delta < edges[j].delta // an end before a start at the same instant
	})
	n, in, writers := 0, 0, 0
	for _, e := range edges {
		in += e.delta
		if e.write {
			writers += e.delta
		}
		if e.delta > 0 {
			switch {
			case prim == pWrite && e.write && in > 1:
				n++
			case prim == pWrite && !e.write && writers > 0:
				// counted from the read side
			case prim != pWrite && in > limit:
				n++
			}
		}
	}
	return n
}

// observers returns, per child, when its election observer first received a leader whose
// Campaign returned after the promotion (the zero time when it never did), and the
// observations that did not bring a strictly greater token than the one before.
func (r *serveRun) observers() (followed map[string]time.Time, unordered []string) {
	acquired := map[string]time.Time{} // a campaign's value: its Campaign's return
	for _, c := range r.calls {
		if c.prim == pElection && !c.acq.IsZero() {
			acquired[c.value] = c.acq
		}
	}
	followed = map[string]time.Time{}
	for _, child := range r.children {
		followed[child] = time.Time{}
		var last int64
		for i, o := range r.observed[child] {
			if i > 0 && o.token <= last {
				unordered = append(unordered, fmt.Sprintf("%s: token %d (%s) after %d", child, o.token, o.value, last))
			}
			last = o.token
			if acq, ok := acquired[o.value]; ok && acq.After(r.promoted) && followed[child].IsZero() {
				followed[child] = o.at
			}
		}
	}
	return followed, unordered
}

// observedAgain returns the time from the first Campaign that returned after the promotion
// until the last child's observer received a leader that campaigned after the promotion;
// false when one never did.
func (r *serveRun) observedAgain() (time.Duration, bool) {
	followed, _ := r.observers()
	var last time.Time
	for _, at := range followed {
		if at.IsZero() {
			return 0, false
		}
		if at.After(last) {
			last = at
		}
	}
	var first time.Time
	for _, c := range r.calls {
		if c.prim == pElection && c.acq.After(r.promoted) && (first.IsZero() || c.acq.Before(first)) {
			first = c.acq
		}
	}
	return last.Sub(first), true
}

func (r *serveRun) check(t *testing.T) {
	// The bounds on serving again are for one failover. When the sentinels fail over again
	// on their own during the load (a second promotion: with the policy, the new master may
	// have no replica left, and nothing can be acquired), the calls follow the masters, and
	// a call queued on one that became a replica waits for its deadline. Then only what holds
	// through any number of failovers is checked: no call returns after its deadline, no
	// overlap with the policy, the observers' order, nothing left behind. The table shows
	// the rest.
	live := !r.again
	if r.again {
		t.Logf("the sentinels failed over again during the load (configuration epoch %d after the promotion, %d at the end): the bounds on serving again are not checked",
			r.epochs[0], r.epochs[1])
	}
	followed, unordered := r.observers()
	for _, child := range r.children {
		assert.True(t, !live || !followed[child].IsZero(),
			"election: the observer of %s received no leader that campaigned after the promotion", child)
	}
	assert.Empty(t, unordered, "election: observers received a token not greater than the one before")
	for _, p := range allPrims {
		f := r.primFigures(p)
		if !assert.Empty(t, f.late, "%s: calls that returned after their deadline", p) {
			for _, c := range f.late {
				t.Logf("%s: %s started %v after the promotion, returned %v later: %s %s", p, c.worker,
					c.start.Sub(r.promoted).Round(time.Millisecond), c.end.Sub(c.start).Round(time.Millisecond), c.class, c.detail)
			}
		}
		if r.policy && live {
			if !assert.LessOrEqual(t, f.syncMax, serveRefused, "%s: a call refused for want of acknowledgement", p) {
				c := f.syncLong
				t.Logf("%s: %s started %v after the promotion: %s", p, c.worker, c.start.Sub(r.promoted).Round(time.Millisecond), c.detail)
			}
		}
		if p == pCounting {
			// Its permits are counts without owners or leases: a failover that loses an
			// acquisition or a release changes their number for good (a controlled
			// failover, in which the old master takes writes for a moment after the
			// promotion, does with the policy too), so whether it serves again, and what
			// it leaves, is logged, not checked; with the policy, nothing may overlap
			// after a master's death.
			if r.policy && !r.split {
				assert.Zero(t, f.overlaps, "%s: overlaps with the policy on", p)
			}
			continue
		}
		if live {
			assert.True(t, f.served, "%s: no call after the promotion acquired", p)
		}
		if f.served && live {
			assert.LessOrEqual(t, f.first, serveWithin, "%s: the first acquisition after the promotion", p)
			if !r.policy {
				// What the failover left held is held by the old master's holds, whose
				// leases end within the watchdog timeout of the promotion.
				assert.LessOrEqual(t, f.first, serveWatchdog+serveSlack,
					"%s: the first acquisition after the promotion, without the policy", p)
			}
		}
		if r.policy {
			assert.Zero(t, f.overlaps, "%s: overlaps with the policy on", p)
		}
	}
	var left []string
	for _, l := range r.left {
		if !strings.HasPrefix(l, "counting semaphore:") {
			left = append(left, l)
		}
	}
	assert.Empty(t, left, "held or queued after the load")
	if len(left) < len(r.left) {
		t.Logf("left behind: %v", r.left)
	}
}

func (r *serveRun) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "failover took %v; replicas acknowledge %v after the promotion\n",
		r.promoted.Sub(r.failedAt).Round(time.Millisecond), r.acks.Sub(r.promoted).Round(time.Millisecond))
	if r.again {
		fmt.Fprintf(&b, "the sentinels failed over again during the load: configuration epoch %d after the promotion, %d at the end\n",
			r.epochs[0], r.epochs[1])
	}
	fmt.Fprintf(&b, "%-14s %10s %9s %9s %12s %s\n", "primitive", "first acq", "acquired", "overlaps", "refused max", "errors after the failover")
	for _, p := range allPrims {
		f := r.primFigures(p)
		first := "never"
		if f.served {
			first = f.first.Round(time.Millisecond).String()
		}
		fmt.Fprintf(&b, "%-14s %10s %9d %9d %12s %s\n", p, first, f.acquired, f.overlaps,
			f.syncMax.Round(time.Millisecond), errsString(f.errs))
	}
	again := "never, by one of them"
	if d, ok := r.observedAgain(); ok {
		again = d.Round(time.Millisecond).String()
	}
	fmt.Fprintf(&b, "the election's observers lag the first leader after the promotion by %s\n", again)
	if os.Getenv("AQS_SERVE_DETAILS") != "" {
		seen := map[string]bool{}
		for _, c := range r.calls {
			if c.detail == "" || c.end.Before(r.failedAt) {
				continue
			}
			k := c.prim + ": " + c.detail
			if len(k) > 200 {
				k = k[:200]
			}
			if !seen[k] {
				seen[k] = true
				fmt.Fprintf(&b, "  %v after the promotion: %s\n", c.end.Sub(r.promoted).Round(time.Millisecond), k)
			}
		}
		for _, p := range allPrims {
			if c := r.primFigures(p).syncLong; c.detail != "" {
				fmt.Fprintf(&b, "  %s: the longest refusal, %v from %v after the promotion: %s\n", p,
					c.end.Sub(c.start).Round(time.Millisecond), c.start.Sub(r.promoted).Round(time.Millisecond), c.detail)
			}
		}
	}
	return b.String()
}

func errsString(m map[string]int) string {
	var parts []string
	for _, k := range []string{eSync, eDeadline, eLost, eRedis} {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// summary is the table of several runs: p50 and max of the first acquisition, errors and
// overlaps summed.
func summary(runs []*serveRun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-14s %10s %10s %9s %s\n", "primitive", "p50", "max", "overlaps", "errors after the failover")
	for _, p := range allPrims {
		var firsts []time.Duration
		errs := map[string]int{}
		ov, never := 0, 0
		for _, r := range runs {
			f := r.primFigures(p)
			if f.served {
				firsts = append(firsts, f.first)
			} else {
				never++
			}
			for k, v := range f.errs {
				errs[k] += v
			}
			ov += f.overlaps
		}
		slices.Sort(firsts)
		p50, mx := "-", "-"
		if len(firsts) > 0 {
			p50 = firsts[len(firsts)/2].Round(time.Millisecond).String()
			mx = firsts[len(firsts)-1].Round(time.Millisecond).String()
		}
		if never > 0 {
			mx += fmt.Sprintf(" (never %d)", never)
		}
		fmt.Fprintf(&b, "%-14s %10s %10s %9d %s\n", p, p50, mx, ov, errsString(errs))
	}
	var agains []time.Duration
	never := 0
	for _, r := range runs {
		if d, ok := r.observedAgain(); ok {
			agains = append(agains, d)
		} else {
			never++
		}
	}
	slices.Sort(agains)
	if len(agains) > 0 {
		fmt.Fprintf(&b, "the election's observers lag the first leader after the promotion by p50 %v, max %v",
			agains[len(agains)/2].Round(time.Millisecond), agains[len(agains)-1].Round(time.Millisecond))
	}
	if never > 0 {
		fmt.Fprintf(&b, " (never %d)", never)
	}
	b.WriteString("\n")
	return b.String()
}
