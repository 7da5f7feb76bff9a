package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/election"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/layout"
)

// A singleton job with leader election.
//
// Candidate processes campaign in one election; the leader does the job, a tick every
// leaderTick, written through a fencing-token witness in Redis (tickScript), which refuses a
// tick whose token is below the greatest it has seen and records each token's first and last
// tick in server time. The first leader is killed with SIGKILL a third into its work: its
// lease runs on until the watchdog timeout of its Client (--lease), and then the standby first
// in the queue leads. Every later leader works its share and resigns, handing leadership to the
// next candidate in the same script. The parent observes the election throughout (Observe).
//
// Never two leaders: the witness's intervals of the tokens never overlap, and it refused no
// tick (a refused tick is a leader that acted after a later one began).

// roleCandidate is the role of a candidate process: one goroutine that campaigns, leads for
// the job's time (a tick every leaderTick through the witness), and resigns.
//
// Events: "candidate <client id>" first; "lead <token> <unix ns>" when it leads; "resign
// <ticks> <unix ns>" as it resigns ("lost" or "refused <ticks>" when it stopped leading
// otherwise); then "done".
const roleCandidate = "candidate"

const (
	leaderTick = 20 * time.Millisecond
	// leaderWork is how long a leader works before it resigns; the first leader is killed a
	// third of the way through.
	leaderWork = time.Second
)

// leaderKeys are the demo's keys of the witness, in the election's hash slot.
type leaderKeys struct {
	max     string // the greatest token that ticked
	spans   string // hash: token -> "<first tick ms> <last tick ms> <ticks>"
	refused string // ticks refused for a token below the greatest
}

func leaderKeysOf(e *election.Election) leaderKeys {
	stem := demoKeyStem(e.Keys()[0])
	return leaderKeys{max: stem + "leader-max-token", spans: stem + "leader-spans", refused: stem + "leader-refused"}
}

func (k leaderKeys) all() []string { return []string{k.max, k.spans, k.refused} }

// tickScript is one tick of the job, fenced by the leader's token: a token below the greatest
// one seen is refused, as a resource guarded by fencing tokens would refuse it.
//
// KEYS max, spans, refused. ARGV[1] the token. Reply: 1 done, 0 refused.
var tickScript = redis.NewScript(`
local max = redis.call('GET', KEYS[1])
if max and #ARGV[1] < #max or max and #ARGV[1] == #max and ARGV[1] < max then
  redis.call('INCR', KEYS[3])
  return 0
end
redis.call('SET', KEYS[1], ARGV[1])
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local span = redis.call('HGET', KEYS[2], ARGV[1])
local first, n = now, 0
if span then
  local a, _, c = string.match(span, '(%d+) (%d+) (%d+)')
  first, n = tonumber(a), tonumber(c)
end
redis.call('HSET', KEYS[2], ARGV[1], string.format('%d %d %d', first, now, n + 1))
return 1
`)

// runLeader is the parent side of the singleton job.
func runLeader(ctx context.Context, d *demoRun) ([]summaryRow, error) {
	name := d.cfg.name + "-leader"
	e, err := election.New(d.client, name)
	if err != nil {
		return nil, err
	}
	lk := leaderKeysOf(e)
	keys := append(e.Keys(), lk.all()...)
	if err := d.rdb.Del(ctx, keys...).Err(); err != nil {
		return nil, err
	}
	defer d.deleteKeys(ctx, keys)
	n := d.cfg.candidates
	d.printf("  election %q (keys %s...): %d candidate processes campaign; the leader ticks every %v for %v\n"+
		"  through a fencing-token witness, then resigns; the first leader is killed with SIGKILL a third of\n"+
		"  the way through, and its lease (the Clients' %v watchdog timeout) runs out before a standby leads\n",
		name, e.Keys()[0], n, leaderTick, leaderWork, d.cfg.lease)

	// The parent's observer runs on a goroutine of its own, which only records what it sees.
	obsCtx, stopObs := context.WithCancel(ctx)
	defer stopObs()
	seen := &observedLog{}
	go seen.record(e.Observe(obsCtx))

	specs := make([]workerSpec, n)
	for i := range specs {
		specs[i] = d.spec(roleCandidate, name, i+1, 1)
	}
	f, err := d.startFleet(ctx, specs)
	if err != nil {
		return nil, err
	}
	defer f.stop()
	lw := &leaderWatch{d: d, f: f, e: e, lk: lk, clients: map[string]*workerProc{}}
	if err := lw.run(ctx); err != nil {
		return nil, err
	}
	// Each leader printed "lead" once it led, and the observer hears of each change from
	// Redis, a moment later: wait, bounded, until it heard of the last leader.
	if len(lw.leads) > 0 {
		seen.waitFor(ctx, lw.leads[len(lw.leads)-1].token, 5*time.Second)
	}
	stopObs()
	lw.observed = seen.stop()
	return lw.verdict(ctx)
}

// observedLog records what an observer reports.
type observedLog struct {
	mu      sync.Mutex
	changes []election.Leadership
	grew    chan struct{} // closed and replaced at each change
	done    chan struct{} // closed when the observer's channel closed
}

func (o *observedLog) record(c <-chan election.Leadership) {
	o.mu.Lock()
	o.grew, o.done = make(chan struct{}), make(chan struct{})
	o.mu.Unlock()
	for l := range c {
		o.mu.Lock()
		o.changes = append(o.changes, l)
		close(o.grew)
		o.grew = make(chan struct{})
		o.mu.Unlock()
	}
	close(o.done)
}

// waitFor waits, at most within, until the observer reported token.
func (o *observedLog) waitFor(ctx context.Context, token int64, within time.Duration) {
	bound := time.After(within)
	for {
		o.mu.Lock()
		found := slices.ContainsFunc(o.changes, func(l election.Leadership) bool { return l.Token == token })
		grew := o.grew
		o.mu.Unlock()
		if found || grew == nil {
			return
		}
		select {
		case <-grew:
		case <-bound:
			return
		case <-ctx.Done():
			return
		}
	}
}

// stop waits for the observer's channel to close (its context was cancelled) and returns
// what it reported.
func (o *observedLog) stop() []election.Leadership {
	o.mu.Lock()
	done := o.done
	o.mu.Unlock()
	if done != nil {
		<-done
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.changes
}

// leaderWatch is the parent reading the candidates' events and the observer's changes.
type leaderWatch struct {
	d       *demoRun
	f       *fleet
	e       *election.Election
	lk      leaderKeys
	clients map[string]*workerProc // by aqs Client id

	leads    []leadRecord // in the order they led
	queued   []string     // the standbys' Client ids, in the order they queued
	killedAt time.Time
	victim   *workerProc
	// The workers' clocks (unix ns; one host) at each lead and each resignation, in the order
	// the lines were read: lines of two processes may be read out of their order.
	leadTimes, resignTimes []int64
	takeover               time.Duration // from the kill to the next lead
	lost                   int           // leaderships that ended without Resign, but for the kill
	observed               []election.Leadership
}

type leadRecord struct {
	p     *workerProc
	token int64
}

// run reads events until every candidate has exited; the first leader is killed a third
// of the way through its work.
func (lw *leaderWatch) run(ctx context.Context) error {
	var kill <-chan time.Time
	for lw.f.live > 0 {
		ev, ticked, err := lw.f.next(ctx, kill)
		if err != nil {
			return err
		}
		if ticked {
			kill = nil
			if err := lw.kill(ctx); err != nil {
				return err
			}
			continue
		}
		start, err := lw.take(ctx, ev)
		if err != nil {
			return err
		}
		if start {
			kill = time.After(leaderWork / 3)
		}
	}
	return nil
}

// take handles one event; start reports that the first leader began to lead (the kill is due
// a third of its work later).
func (lw *leaderWatch) take(ctx context.Context, ev workerEvent) (start bool, err error) {
	w := ev.words
	switch {
	case w == nil:
		return false, lw.f.exited(ev.p)
	case w[0] == "candidate" && len(w) == 2:
		lw.clients[w[1]] = ev.p
	case w[0] == "lead" && len(w) == 3:
		token, err := strconv.ParseInt(w[1], 10, 64)
		if err != nil {
			return false, fmt.Errorf("worker %s printed %q", ev.p, strings.Join(w, " "))
		}
		at, _ := strconv.ParseInt(w[2], 10, 64)
		lw.leads = append(lw.leads, leadRecord{ev.p, token})
		lw.leadTimes = append(lw.leadTimes, at)
		switch {
		case len(lw.leads) == 1:
			lw.d.progress("%s leads (token %d)", ev.p, token)
			if err := lw.readQueue(ctx); err != nil {
				return false, err
			}
			lw.victim = ev.p
			return true, nil
		case !lw.killedAt.IsZero() && lw.takeover == 0:
			lw.takeover = time.Since(lw.killedAt)
			lw.d.progress("%s leads (token %d), %v after the kill", ev.p, token, lw.takeover.Round(time.Millisecond))
		default:
			lw.d.progress("%s leads (token %d)", ev.p, token)
		}
	case (w[0] == "lost" || w[0] == "refused") && len(w) == 2:
		lw.lost++
		lw.d.progress("%s stopped leading after %s ticks: its leadership was %s", ev.p, w[1],
			map[string]string{"lost": "lost (its lease no longer trusted)", "refused": "overtaken (a tick refused)"}[w[0]])
	case w[0] == "resign" && len(w) == 3:
		at, _ := strconv.ParseInt(w[2], 10, 64)
		lw.resignTimes = append(lw.resignTimes, at)
		lw.d.progress("%s resigns after %s ticks", ev.p, w[1])
	case w[0] == lineDone && len(w) == 1:
		ev.p.done = true
	default:
		return false, fmt.Errorf("worker %s printed %q", ev.p, strings.Join(w, " "))
	}
	return false, nil
}

// readQueue reads the order in which the standbys queued, while the first leader leads:
// once every candidate has campaigned, the queue holds the others in arrival order.
func (lw *leaderWatch) readQueue(ctx context.Context) error {
	qkey := lw.e.Keys()[1]
	deadline := time.Now().Add(workerReadyTimeout)
	for {
		members, err := lw.d.rdb.LRange(ctx, qkey, 0, -1).Result()
		if err != nil {
			return err
		}
		if len(members) >= lw.d.cfg.candidates-1 || time.Now().After(deadline) {
			// Their "candidate" lines may still be on their way: the ids are matched at the end.
			lw.queued = lw.queued[:0]
			for _, m := range members {
				hold, _, _ := strings.Cut(m, " ")
				lw.queued = append(lw.queued, layout.ClientOf(hold))
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// kill kills the first leader, in the middle of its work.
func (lw *leaderWatch) kill(ctx context.Context) error {
	lw.killedAt = time.Now()
	if err := lw.f.kill(lw.victim); err != nil {
		return err
	}
	// The election's lock is the fair lock of its name: its Info reads the dead leader's lease.
	l, err := fair.New(lw.d.client, lw.e.Name())
	if err != nil {
		return err
	}
	left, err := l.RemainingLease(ctx)
	if err != nil {
		return err
	}
	lw.d.progress("SIGKILL to %s, the leader, in the middle of its work (lease left %v)", lw.victim, left.Round(time.Millisecond))
	return nil
}

// verdict judges the run from the witness and what the watch saw.
func (lw *leaderWatch) verdict(ctx context.Context) ([]summaryRow, error) {
	cfg := lw.d.cfg
	spans, err := lw.d.rdb.HGetAll(ctx, lw.lk.spans).Result()
	if err != nil {
		return nil, err
	}
	refused, err := lw.d.rdb.Get(ctx, lw.lk.refused).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	type span struct {
		token, first, last int64
		ticks              int
	}
	var ss []span
	ticks := 0
	for tok, v := range spans {
		var s span
		s.token, _ = strconv.ParseInt(tok, 10, 64)
		if _, err := fmt.Sscanf(v, "%d %d %d", &s.first, &s.last, &s.ticks); err != nil {
			return nil, fmt.Errorf("witness span %q: %w", v, err)
		}
		ss = append(ss, s)
		ticks += s.ticks
	}
	slices.SortFunc(ss, func(a, b span) int { return int(a.token - b.token) })
	overlaps := 0
	for i := 1; i < len(ss); i++ {
		if ss[i].first <= ss[i-1].last {
			overlaps++
		}
	}
	var order []string
	for _, l := range lw.leads {
		order = append(order, fmt.Sprintf("p%d", l.p.n))
	}
	// The standbys must lead in the order they queued.
	var standbys []*workerProc
	for _, l := range lw.leads[min(1, len(lw.leads)):] {
		standbys = append(standbys, l.p)
	}
	var queued []string
	var queueOrder []*workerProc
	for _, id := range lw.queued {
		queued = append(queued, procName(lw.clients[id]))
		queueOrder = append(queueOrder, lw.clients[id])
	}
	inOrder := len(lw.leads) == cfg.candidates && slices.Equal(standbys, queueOrder)
	// The observer must have seen every leader, in the order they led.
	var seen []int64
	for _, l := range lw.observed {
		if len(seen) == 0 || seen[len(seen)-1] != l.Token {
			seen = append(seen, l.Token)
		}
	}
	var led []int64
	for _, l := range lw.leads {
		led = append(led, l.token)
	}
	limit := 2*cfg.lease + 3*time.Second
	var handOff time.Duration
	// Every leader after the one that took over from the killed one followed a resignation.
	var handOffs []time.Duration
	for i := 2; i < len(lw.leadTimes) && i-2 < len(lw.resignTimes); i++ {
		handOffs = append(handOffs, time.Duration(lw.leadTimes[i]-lw.resignTimes[i-2]))
	}
	if len(handOffs) > 0 {
		handOff = slices.Max(handOffs)
	}
	return []summaryRow{
		figureRow("leaders", "%d in turn: %s (the first killed, %s)", len(lw.leads), strings.Join(order, ", "), endings(lw.lost)),
		checkedRow("two leaders at once", overlaps == 0 && refused == 0 && len(ss) >= len(lw.leads)-lw.lost,
			"never: %d overlaps, %d stale ticks refused, in %d ticks of %d tokens", overlaps, refused, ticks, len(ss)).
			withNote("each tick goes through a script that refuses a token below the greatest it saw and records " +
				"each token's first and last tick in server time; two leaders at once would show as overlapping spans " +
				"or as a refused tick."),
		checkedRow("takeover after SIGKILL", lw.takeover > 0 && lw.takeover <= limit, "%v (lease %v)",
			lw.takeover.Round(time.Millisecond), cfg.lease).
			withNote("from the SIGKILL of the leader to the standby's Campaign returning: the dead leader's lease runs " +
				"out (at most the watchdog timeout), then the first standby in the queue leads."),
		figureRow("hand-off on Resign", "%v at most, over %s", handOff.Round(10*time.Microsecond), plural(len(handOffs), "resignation")).
			withNote("from a leader's Resign to its successor's Campaign returning, by the clocks of their processes."),
		checkedRow("standbys in arrival order", inOrder, "%s", strings.Join(queued, ", ")),
		checkedRow("observed", slices.Equal(seen, led), "%d leaders, in the order they led, by an observer", len(seen)),
	}, nil
}

// runCandidate is the worker side: campaign, lead, work, resign.
func runCandidate(ctx context.Context, w *worker) error {
	e, err := election.New(w.client, w.spec.Name, election.WithWaiterTimeout(w.spec.Lease))
	if err != nil {
		return err
	}
	lk := leaderKeysOf(e)
	w.out.println("candidate", w.client.ID())
	leading, err := e.Campaign(w.stop, fmt.Sprintf("process %d", w.spec.Proc))
	if err != nil {
		return err
	}
	token, err := aqs.FencingToken(leading)
	if err != nil {
		return err
	}
	w.out.println("lead", token, time.Now().UnixNano())
	tok := strconv.FormatInt(token, 10)
	tick := time.NewTicker(leaderTick)
	defer tick.Stop()
	end := time.After(leaderWork)
	ticks := 0
	for {
		// The leader checks its leading context before each act of leadership. A leadership
		// lost (its renewals late on a loaded machine) is no failure of the election: the
		// leader stops, and the witness judges whether it stopped in time.
		if leading.Err() != nil {
			w.out.println("lost", ticks)
			w.out.println(lineDone)
			return nil
		}
		ok, err := tickScript.Run(ctx, w.rdb, []string{lk.max, lk.spans, lk.refused}, tok).Int()
		if err != nil {
			return err
		}
		if ok != 1 {
			// A later leader ticked already: the witness counted it, and the verdict fails.
			w.out.println("refused", ticks)
			w.out.println(lineDone)
			return nil
		}
		ticks++
		select {
		case <-tick.C:
			continue
		case <-end:
		case <-leading.Done():
			continue // the check above says why
		}
		break
	}
	w.out.println("resign", ticks, time.Now().UnixNano())
	if err := e.Resign(leading); err != nil {
		return err
	}
	w.out.println(lineDone)
	return nil
}

// procName names a candidate process, or says that it is not known.
func procName(p *workerProc) string {
	if p == nil {
		return "a candidate"
	}
	return fmt.Sprintf("process %d", p.n)
}

// endings says how the leaderships after the first ended.
func endings(lost int) string {
	if lost == 0 {
		return "the others resigned"
	}
	return fmt.Sprintf("%s lost, the others resigned", plural(lost, "leadership"))
}
