package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/semaphore"
)

// A worker pool with the leased-permit semaphore.
//
// Workers in several processes run jobs, each under one permit of a leased semaphore of K
// permits, so at most K jobs run at once across the processes. Each job counts itself in Redis
// when it starts and when it ends (enterScript, leaveScript), which also records the most jobs
// ever found running at once: never above K.
//
// In the middle of the run the last worker process is killed with SIGKILL just after one of
// its jobs started: the crash no code can soften. Its permit stays leased, since nobody
// releases it, until its lease runs out: the workers' Clients have a short watchdog timeout
// (--lease), and the watchdog renews a permit every third of it, so the lease ends at most that
// long after the kill. Meanwhile the workers left run on K-1 permits (fewer if the dead process
// held more); then the permit comes back by itself and they run K jobs again.
//
// Once the dead process is gone, the parent takes its jobs off the running count
// (forgetScript: they no longer run, though their permits are still leased) and marks the
// count as forgotten. From then on a job that starts and finds K jobs running, all outside the
// dead process, proves that the dead worker's permit is back in use: that is the moment the
// summary reports. The workers outside the killed process are at least K (the command line
// ensures it) and keep asking, so the pool fills up as soon as the permit is back.
// The semaphore's waiter timeout is the lease too, so that a waiter of the dead process, had it
// been queued, holds the queue no longer than its permit does.

// rolePool is the role of a worker-pool process: Goroutines workers running jobs until "stop".
//
// Events: "enter <running> <forgotten> <permit id> <worker>" when a job starts, with the jobs
// running then (itself included) and 1 once the killed process's jobs were forgotten, else 0;
// "leave <running> <worker>" when it ends; at the end "done <jobs>".
const rolePool = "pool"

// poolStatusEvery is how often the parent prints the pool's state.
const poolStatusEvery = 500 * time.Millisecond

// poolKeys are the demo's keys of the pool, in the semaphore's hash slot.
type poolKeys struct {
	running   string // jobs running now
	byProcess string // hash: process number -> its jobs running now
	most      string // the most jobs found running at once
	forgotten string // set once the killed process's jobs were taken off running
	done      string // jobs completed
}

func poolKeysOf(sem *semaphore.Leased) poolKeys {
	stem := demoKeyStem(sem.Key())
	return poolKeys{running: stem + "running", byProcess: stem + "running-by-process", most: stem + "most-running",
		forgotten: stem + "forgotten", done: stem + "jobs-done"}
}

func (k poolKeys) all() []string {
	return []string{k.running, k.byProcess, k.most, k.forgotten, k.done}
}

// enterScript counts a job in when it starts.
//
// KEYS running, byProcess, most, forgotten. ARGV[1] the process's number. Reply: {jobs running
// now, this one included; 1 when the killed process's jobs were forgotten already, else 0}.
var enterScript = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
if n > tonumber(redis.call('GET', KEYS[3]) or '0') then
  redis.call('SET', KEYS[3], n)
end
return {n, redis.call('EXISTS', KEYS[4])}
`)

// leaveScript counts a job out when it ends.
//
// KEYS running, byProcess, done. ARGV[1] the process's number. Reply: jobs running now.
var leaveScript = redis.NewScript(`
local n = redis.call('DECR', KEYS[1])
redis.call('HINCRBY', KEYS[2], ARGV[1], -1)
redis.call('INCR', KEYS[3])
return n
`)

// forgetScript takes the jobs of a dead process off the running count.
//
// KEYS running, byProcess, forgotten. ARGV[1] the process's number. Reply: its jobs that were
// running when it died.
var forgetScript = redis.NewScript(`
local n = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
redis.call('DECRBY', KEYS[1], n)
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('SET', KEYS[3], 1)
return n
`)

// atKillScript reads what the process just killed has at the semaphore: how long one
// of its permits has left, and how many of its workers wait in the queue.
//
// KEYS[1] the semaphore's queue (members "<hold id> <n> <lease>"), KEYS[2] its zset of leased
// permits (permit id -> lease end, server ms); see internal/scripts/_lsem.lua. ARGV[1] the
// permit id, ARGV[2] the process's hold id prefix ("<client id>:"). Reply: {ms left, or -1
// when the permit is not leased; queue entries of the process}.
var atKillScript = redis.NewScript(`
local left = -1
local s = redis.call('ZSCORE', KEYS[2], ARGV[1])
if s then
  local t = redis.call('TIME')
  left = math.floor(tonumber(s) - (t[1] * 1000 + t[2] / 1000))
end
local queued = 0
for _, m in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  if string.sub(m, 1, #ARGV[2]) == ARGV[2] then
    queued = queued + 1
  end
end
return {left, queued}
`)

// runPool is the parent side of the worker pool: it sets the semaphore up, runs the workers,
// kills one process in the middle of a job, waits for its permit to come back and for the jobs
// to be done, and judges the run.
func runPool(ctx context.Context, d *demoRun) ([]summaryRow, error) {
	name := d.cfg.name + "-pool"
	sem, err := semaphore.NewLeased(d.client, name)
	if err != nil {
		return nil, err
	}
	pk := poolKeysOf(sem)
	keys := append(sem.Keys(), pk.all()...)
	if err := d.rdb.Del(ctx, keys...).Err(); err != nil {
		return nil, err
	}
	defer d.deleteKeys(ctx, keys)
	if err := setUpPool(ctx, d, sem, name); err != nil {
		return nil, err
	}
	f, err := d.startFleet(ctx, poolSpecs(d, name))
	if err != nil {
		return nil, err
	}
	defer f.stop()
	pw := &poolWatch{d: d, f: f, sem: sem, pk: pk, victim: f.procs[len(f.procs)-1],
		leaseLeft: time.Duration(-1), inProgress: -1}
	if err := pw.run(ctx); err != nil {
		return nil, err
	}
	return pw.verdict(ctx, time.Since(d.start))
}

// poolKillAfter returns the jobs done before the last worker process is killed.
func poolKillAfter(cfg demoConfig) int { return max(cfg.jobs/3, 1) }

// poolRecoveryLimit bounds the wait for the dead worker's permit: its lease ends at most
// cfg.lease after the kill; the rest is for a loaded machine.
func poolRecoveryLimit(cfg demoConfig) time.Duration { return 2*cfg.lease + 3*time.Second }

// setUpPool sets the semaphore's permits and says what the run will do.
func setUpPool(ctx context.Context, d *demoRun, sem *semaphore.Leased, name string) error {
	cfg := d.cfg
	if ok, err := sem.TrySetPermits(ctx, cfg.permits); err != nil || !ok {
		return cmp.Or(err, fmt.Errorf("the permits of %q were set already", name))
	}
	d.printf("  leased semaphore %q with K=%d permits (key %s)\n", name, cfg.permits, sem.Key())
	d.printf("  %d processes x %d workers run jobs of about %v, each under a permit; the workers' Clients\n"+
		"  have a %v watchdog timeout, the lease of a permit whose process dies\n", cfg.processes, cfg.workers,
		cfg.jobTime, cfg.lease)
	d.printf("  after %d jobs, process %d is killed with SIGKILL in the middle of a job; the pool runs on until\n"+
		"  its permit is back and %d jobs are done\n", poolKillAfter(cfg), cfg.processes, cfg.jobs)
	return nil
}

// poolSpecs returns the pool's worker processes.
func poolSpecs(d *demoRun, name string) []workerSpec {
	specs := make([]workerSpec, d.cfg.processes)
	for i := range specs {
		specs[i] = d.spec(rolePool, name, i+1, d.cfg.workers)
		specs[i].JobTime = d.cfg.jobTime
	}
	return specs
}

// poolWatch is the parent reading the pool's events: it tallies them, reports the pool's
// state, kills the victim, and stops the workers when the run is over.
type poolWatch struct {
	d      *demoRun
	f      *fleet
	sem    *semaphore.Leased
	pk     poolKeys
	victim *workerProc // the process killed, the last

	jobsDone, running   int
	killedAt, backAfter time.Duration // since the start; backAfter since the kill
	leaseLeft           time.Duration // of the victim's permit at the kill, -1 before
	inProgress          int           // the victim's jobs at its death, once known; -1 before
	stopping, gaveUp    bool
}

// run reads the events until every process has exited.
func (pw *poolWatch) run(ctx context.Context) error {
	status := time.NewTicker(poolStatusEvery)
	defer status.Stop()
	for pw.f.live > 0 {
		ev, ticked, err := pw.f.next(ctx, status.C)
		if err != nil {
			return err
		}
		if err := pw.take(ctx, ev, ticked); err != nil {
			return err
		}
		if !pw.stopping && pw.backAfter > 0 && pw.jobsDone >= pw.d.cfg.jobs {
			pw.stop(fmt.Sprintf("%d jobs done", pw.jobsDone))
		}
	}
	return nil
}

// stop tells the workers to stop, saying why.
func (pw *poolWatch) stop(why string) {
	pw.d.progress("%s: stopping the workers", why)
	pw.f.broadcast(lineStop)
	pw.stopping = true
}

// take handles one event of the pool's workers, or a tick of the status ticker.
func (pw *poolWatch) take(ctx context.Context, ev workerEvent, ticked bool) error {
	w := ev.words
	switch {
	case ticked:
		pw.status()
	case w == nil:
		if ev.p == pw.victim && ev.p.killed {
			return pw.forget(ctx)
		}
		return pw.f.exited(ev.p)
	case w[0] == "enter" && len(w) == 5:
		return pw.entered(ctx, ev.p, w)
	case w[0] == "leave" && len(w) == 3:
		pw.running, _ = strconv.Atoi(w[1])
		pw.jobsDone++
	case w[0] == lineDone && len(w) == 2:
		ev.p.done = true
	default:
		return fmt.Errorf("worker %s printed %q", ev.p, strings.Join(w, " "))
	}
	return nil
}

// status prints the pool's state, and gives up on the killed worker's permit when it is not
// back within the recovery limit.
func (pw *poolWatch) status() {
	state := ""
	if pw.killedAt > 0 && pw.backAfter == 0 {
		state = ", the killed process's permits still leased"
	}
	pw.d.progress("jobs done %d, running %d of %d%s", pw.jobsDone, pw.running, pw.d.cfg.permits, state)
	limit := poolRecoveryLimit(pw.d.cfg)
	if pw.killedAt > 0 && pw.backAfter == 0 && !pw.stopping && time.Since(pw.d.start)-pw.killedAt > limit {
		pw.gaveUp = true
		pw.stop(fmt.Sprintf("the killed worker's permit is not back %v after the kill", limit))
	}
}

// forget takes the dead victim's jobs off the running count.
func (pw *poolWatch) forget(ctx context.Context) error {
	pk := pw.pk
	n, err := forgetScript.Run(ctx, pw.d.rdb, []string{pk.running, pk.byProcess, pk.forgotten}, pw.victim.n).Int()
	if err != nil {
		return err
	}
	pw.inProgress = n
	pw.d.progress("%s is dead (%v) with %s in progress: nobody releases its permits", pw.victim, pw.victim.err,
		plural(n, "job"))
	return nil
}

// entered handles a job's start: the victim's, once enough jobs are done, is the moment of the
// kill; one that finds K jobs running, all outside the dead process, shows its permit is back.
func (pw *poolWatch) entered(ctx context.Context, p *workerProc, w []string) error {
	k := pw.d.cfg.permits
	pw.running, _ = strconv.Atoi(w[1])
	if p == pw.victim && !pw.victim.killed && pw.jobsDone >= poolKillAfter(pw.d.cfg) {
		if err := pw.kill(ctx, w[3], w[4]); err != nil {
			return err
		}
	}
	if w[2] == "1" && pw.running == k && pw.backAfter == 0 {
		pw.backAfter = time.Since(pw.d.start) - pw.killedAt
		pw.d.progress("%d jobs running again, all outside the killed process: its permit is back, %v after the kill",
			k, pw.backAfter.Round(time.Millisecond))
	}
	return nil
}

// kill kills the victim, whose worker has just started a job on permit, and reads what the
// dead process had at the semaphore.
func (pw *poolWatch) kill(ctx context.Context, permit, worker string) error {
	// The job has just started: the worker is in the middle of it. What the dead process
	// had at the semaphore stays there, to be read after the kill.
	pw.killedAt = time.Since(pw.d.start)
	if err := pw.f.kill(pw.victim); err != nil {
		return err
	}
	client := permit[:strings.LastIndexByte(permit, ':')+1] // a permit id is "<client id>:<n>"
	r, err := atKillScript.Run(ctx, pw.d.rdb, []string{pw.sem.Keys()[1], pw.sem.Keys()[3]}, permit, client).Int64Slice()
	if err != nil {
		return err
	}
	pw.leaseLeft = time.Duration(r[0]) * time.Millisecond
	pw.d.progress("SIGKILL to %s, in the middle of a job of worker %s on permit %s (lease left %v)",
		pw.victim, worker, permit, pw.leaseLeft)
	if r[1] > 0 {
		pw.d.progress("  %s waited in the queue: a permit granted to it stays held until its waiter timeout",
			plural(int(r[1]), "more of its workers"))
	}
	return nil
}

// verdict judges the run, which took elapsed, from what is in Redis and what the watch saw.
func (pw *poolWatch) verdict(ctx context.Context, elapsed time.Duration) ([]summaryRow, error) {
	cfg, k := pw.d.cfg, pw.d.cfg.permits
	most, err := pw.d.rdb.Get(ctx, pw.pk.most).Int()
	if err != nil {
		return nil, err
	}
	done, err := pw.d.rdb.Get(ctx, pw.pk.done).Int()
	if err != nil {
		return nil, err
	}
	available, err := pw.sem.Available(ctx)
	if err != nil {
		return nil, err
	}
	back := checkedRow("permit back", pw.backAfter > 0, "%v after the kill (lease %v; %v left at the kill)",
		pw.backAfter.Round(time.Millisecond), cfg.lease, pw.leaseLeft.Round(time.Millisecond))
	if pw.gaveUp || pw.backAfter == 0 {
		back = checkedRow("permit back", false, "not within %v of the kill (lease %v)", poolRecoveryLimit(cfg), cfg.lease)
	}
	return []summaryRow{
		figureRow("jobs done", "%d in %v by %d workers in %d processes", done, elapsed.Round(time.Millisecond),
			cfg.processes*cfg.workers, cfg.processes),
		checkedRow("highest concurrency", most <= k, "%d jobs at once (K=%d)", most, k).withNote("the most jobs found " +
			"running at once by a job as it started, counted in Redis by a script (INCR on start, DECR on end)."),
		checkedRow("killed mid-job", pw.inProgress > 0, "%s, by SIGKILL with %s in progress", pw.victim,
			plural(max(pw.inProgress, 0), "job")),
		back.withNote("the time from the kill to the first job start that found K jobs running, all of them " +
			"outside the killed process: the dead worker's permit, leased until its lease ran out, is in use " +
			"again (as is any permit granted to a dead worker's place in the queue, held until its waiter " +
			"timeout, here the lease too)."),
		checkedRow("permits at the end", available == k, "%d of %d available", available, k),
	}, nil
}

// runPoolWorkers is the worker side of the pool.
func runPoolWorkers(ctx context.Context, w *worker) error {
	sem, err := semaphore.NewLeased(w.client, w.spec.Name, semaphore.WithWaiterTimeout(w.spec.Lease))
	if err != nil {
		return err
	}
	pw := &poolWorker{worker: w, sem: sem, keys: poolKeysOf(sem)}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		jobs  int
		first error
	)
	for g := 1; g <= w.spec.Goroutines; g++ {
		wg.Go(func() {
			n, err := pw.work(ctx, goroutineLabel(w.spec.Proc, "w", g), g)
			mu.Lock()
			defer mu.Unlock()
			jobs += n
			if first == nil {
				first = err
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	w.out.println(lineDone, jobs)
	return nil
}

// poolWorker is one process's share of the pool.
type poolWorker struct {
	*worker
	sem  *semaphore.Leased
	keys poolKeys
}

// work runs jobs until the parent says stop, and returns how many it ran.
func (pw *poolWorker) work(ctx context.Context, label string, g int) (int, error) {
	for i := 0; ; i++ {
		p, err := pw.sem.Acquire(pw.stop, 1)
		if err != nil {
			if pw.stop.Err() != nil && errors.Is(err, context.Canceled) {
				return i, nil
			}
			return i, err
		}
		// Jobs take from 2/3 to 4/3 of the job time, so that they end at different moments.
		err = pw.job(ctx, p, label, pw.spec.JobTime*time.Duration(2+(g+i)%3)/3)
		if rerr := pw.sem.Release(ctx, p); err == nil {
			err = rerr
		}
		if err != nil {
			return i, err
		}
	}
}

// job runs one job under permit p: it counts itself in, works (a sleep) and counts itself out.
func (pw *poolWorker) job(ctx context.Context, p *semaphore.Permit, label string, d time.Duration) error {
	proc := strconv.Itoa(pw.spec.Proc)
	r, err := enterScript.Run(ctx, pw.rdb, []string{pw.keys.running, pw.keys.byProcess, pw.keys.most, pw.keys.forgotten},
		proc).Int64Slice()
	if err != nil {
		return err
	}
	pw.out.println("enter", r[0], r[1], p.ID(), label)
	work := time.NewTimer(d)
	defer work.Stop()
	select {
	case <-work.C: // the work
	case <-p.Context().Done():
		// The permit's context is a child of the one Acquire waited with, which "stop"
		// cancels: then the job ends early. Any other end is the permit's loss.
		if cause := context.Cause(p.Context()); pw.stop.Err() == nil || errors.Is(cause, aqs.ErrLockLost) {
			return fmt.Errorf("worker %s lost its permit in the middle of a job: %w", label, cause)
		}
	}
	n, err := leaveScript.Run(ctx, pw.rdb, []string{pw.keys.running, pw.keys.byProcess, pw.keys.done}, proc).Int64()
	if err != nil {
		return err
	}
	pw.out.println("leave", n, label)
	return nil
}
