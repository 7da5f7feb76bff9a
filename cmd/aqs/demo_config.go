package main

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redaqs/aqs/rwlock"
)

// Shared configuration with the read-write lock.
//
// A configuration lives in a Redis hash: fields a and b, which must always be equal, and a
// version. Readers in several processes read it again and again, each read under the read
// lock (an HMGET, then a moment of using it), and check that a equals b. One writer, in a
// process of its own, updates it now and then under the write lock: it sets a, takes a moment,
// sets b, and increments the version; a reader that got in during a write would see a and b
// unequal, a torn read. The lock is fair (the default): once the writer waits, new readers
// queue behind it, so its wait is the time the readers holding then take to finish.

// The roles of the configuration's worker processes.
//
// roleReaders runs Goroutines readers until "stop". Events: "reads <n>", the process's reads so
// far, every progressEvery; "torn <reader> <a> <b>" for a torn read; at the end "done <reads>
// <torn reads> <longest wait for the read lock in µs>".
//
// roleWriter makes Writes updates, one every writeEvery. Events: "write <i> <version> <wait for
// the write lock in µs> <readers holding when it asked>"; at the end "done <writes>".
const (
	roleReaders = "readers"
	roleWriter  = "writer"
)

const (
	// writeEvery is the pause between the writer's updates: an occasional writer.
	writeEvery = 250 * time.Millisecond
	// writeWork is the pause between the writer's two HSETs: the window in which a reader that
	// got in would see half a write.
	writeWork = 2 * time.Millisecond
	// readWork is how long a reader uses the configuration while it holds the read lock.
	readWork = time.Millisecond
	// progressEvery is how often a reader process reports its reads.
	progressEvery = 250 * time.Millisecond
)

// configKeyOf returns the key of the configuration hash.
func configKeyOf(lock *rwlock.Lock) string { return demoKeyStem(lock.Key()) + "config" }

// runConfig is the parent side of the shared configuration: it sets the hash up, runs the
// readers and the writer to the end, and checks what they saw.
func runConfig(ctx context.Context, d *demoRun) ([]summaryRow, error) {
	name := d.cfg.name + "-config"
	lock, err := rwlock.New(d.client, name)
	if err != nil {
		return nil, err
	}
	key := configKeyOf(lock)
	keys := append(lock.Keys(), key)
	if err := d.rdb.Del(ctx, keys...).Err(); err != nil {
		return nil, err
	}
	defer d.deleteKeys(ctx, keys)
	if err := setUpConfig(ctx, d, lock, name, key); err != nil {
		return nil, err
	}
	f, err := d.startFleet(ctx, configSpecs(d, name))
	if err != nil {
		return nil, err
	}
	defer f.stop()
	t, err := watchConfig(ctx, d, f)
	if err != nil {
		return nil, err
	}
	version, err := d.rdb.HGet(ctx, key, "version").Int()
	if err != nil {
		return nil, err
	}
	return t.verdict(d.cfg, version), nil
}

// setUpConfig writes the configuration's first version and says what the run will do.
func setUpConfig(ctx context.Context, d *demoRun, lock *rwlock.Lock, name, key string) error {
	cfg := d.cfg
	if err := d.rdb.HSet(ctx, key, "a", 0, "b", 0, "version", 0).Err(); err != nil {
		return err
	}
	d.printf("  configuration hash %s (fields a and b, always equal, and version); read-write lock %q (key %s)\n",
		key, name, lock.Key())
	d.printf("  %d processes x %d readers read it under the read lock; 1 writer process updates it under the\n"+
		"  write lock every %v (a, then b %v later), %d times\n", cfg.processes, cfg.readers, writeEvery, writeWork,
		cfg.writes)
	return nil
}

// configSpecs returns the configuration's worker processes: the reader processes, then the
// writer, last.
func configSpecs(d *demoRun, name string) []workerSpec {
	cfg := d.cfg
	specs := make([]workerSpec, cfg.processes+1)
	for i := range cfg.processes {
		specs[i] = d.spec(roleReaders, name, i+1, cfg.readers)
	}
	specs[cfg.processes] = d.spec(roleWriter, name, cfg.processes+1, 1)
	specs[cfg.processes].Writes = cfg.writes
	return specs
}

// configTally is what the configuration's workers reported.
type configTally struct {
	readsSoFar             map[*workerProc]int64
	writes                 int
	longestWait, totalWait time.Duration
	reads, torn            int64
	longestRead            time.Duration
	readTime               time.Duration // from the start to the stop
}

// watchConfig reads the workers' events until every process has exited, stopping the readers
// when the writer is done, and returns their tally.
func watchConfig(ctx context.Context, d *demoRun, f *fleet) (*configTally, error) {
	t := &configTally{readsSoFar: map[*workerProc]int64{}}
	writer := f.procs[d.cfg.processes]
	for f.live > 0 {
		ev, _, err := f.next(ctx, nil)
		if err != nil {
			return nil, err
		}
		if err := t.take(d, f, writer, ev); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// take counts one event of the configuration's workers, reporting progress.
func (t *configTally) take(d *demoRun, f *fleet, writer *workerProc, ev workerEvent) error {
	w := ev.words
	switch {
	case w == nil:
		if err := f.exited(ev.p); err != nil {
			return err
		}
		if ev.p == writer {
			t.readTime = time.Since(d.start)
			f.broadcast(lineStop)
		}
	case w[0] == "reads" && len(w) == 2:
		t.readsSoFar[ev.p], _ = strconv.ParseInt(w[1], 10, 64)
	case w[0] == "torn" && len(w) == 4:
		d.progress("TORN READ by reader %s: a=%s b=%s", w[1], w[2], w[3])
	case w[0] == "write" && len(w) == 5:
		t.writes++
		wait := micros(w[3])
		t.totalWait += wait
		t.longestWait = max(t.longestWait, wait)
		d.progress("write %2s/%d  version %-2s  waited %v for the write lock, behind %s readers  reads so far %d",
			w[1], d.cfg.writes, w[2], wait.Round(10*time.Microsecond), w[4], t.readsNow())
	case w[0] == lineDone && ev.p == writer && len(w) == 2:
		ev.p.done = true
		d.progress("the writer is done: stopping the readers")
	case w[0] == lineDone && len(w) == 4:
		ev.p.done = true
		n, _ := strconv.ParseInt(w[1], 10, 64)
		torn, _ := strconv.ParseInt(w[2], 10, 64)
		t.reads += n
		t.torn += torn
		t.readsSoFar[ev.p] = n
		t.longestRead = max(t.longestRead, micros(w[3]))
	default:
		return fmt.Errorf("worker %s printed %q", ev.p, strings.Join(w, " "))
	}
	return nil
}

// readsNow returns the reads the reader processes reported so far.
func (t *configTally) readsNow() (n int64) {
	for _, r := range t.readsSoFar {
		n += r
	}
	return n
}

// verdict returns the configuration's summary rows, given the version the hash ended at.
func (t *configTally) verdict(cfg demoConfig, version int) []summaryRow {
	meanWait := time.Duration(0)
	if t.writes > 0 {
		meanWait = t.totalWait / time.Duration(t.writes)
	}
	return []summaryRow{
		figureRow("reads", "%d in %v (%.0f/s), %d readers in %d processes", t.reads, t.readTime.Round(time.Millisecond),
			perSecond(t.reads, t.readTime), cfg.processes*cfg.readers, cfg.processes),
		checkedRow("writes", t.writes == cfg.writes && version == cfg.writes, "%d of %d, configuration version %d",
			t.writes, cfg.writes, version),
		checkedRow("torn reads", t.torn == 0, "%d", t.torn).withNote(fmt.Sprintf("a read (under the read lock) that found "+
			"the fields a and b unequal: the writer sets them one after the other, %v apart, under the write lock, "+
			"so a reader that got in during a write would see half of it.", writeWork)),
		figureRow("writer's longest wait", "%v for the write lock (mean %v)", t.longestWait.Round(10*time.Microsecond),
			meanWait.Round(10*time.Microsecond)),
		figureRow("readers' longest wait", "%v for the read lock", t.longestRead.Round(10*time.Microsecond)).
			withNote("new readers queue behind a waiting writer, so a reader may wait for the readers before it " +
				"and the writer."),
	}
}

// micros parses a count of microseconds.
func micros(s string) time.Duration {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.Duration(n) * time.Microsecond
}

// perSecond returns n per second of d, or 0 for no time.
func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// runReaders is the worker side of the readers.
func runReaders(ctx context.Context, w *worker) error {
	lock, err := rwlock.New(w.client, w.spec.Name)
	if err != nil {
		return err
	}
	key := configKeyOf(lock)
	var t readerTally
	finished := make(chan struct{})
	reported := reportReads(w, &t.reads, finished)
	var wg sync.WaitGroup
	for g := 1; g <= w.spec.Goroutines; g++ {
		label := goroutineLabel(w.spec.Proc, "r", g)
		wg.Go(func() { readConfig(w, lock, key, label, &t) })
	}
	wg.Wait()
	close(finished)
	<-reported
	if t.first != nil {
		return t.first
	}
	w.out.println(lineDone, t.reads.Load(), t.torn.Load(), time.Duration(t.longest.Load()).Microseconds())
	return nil
}

// readerTally is what the readers of one process count, together.
type readerTally struct {
	reads, torn atomic.Int64
	longest     atomic.Int64 // ns

	mu    sync.Mutex
	first error // the first reader's failure
}

// fail records a reader's failure; the first one is the process's.
func (t *readerTally) fail(err error) {
	t.mu.Lock()
	t.first = cmp.Or(t.first, err)
	t.mu.Unlock()
}

// reportReads prints the process's reads every progressEvery until finished is closed, and
// closes the channel it returns when it has stopped.
func reportReads(w *worker, reads *atomic.Int64, finished <-chan struct{}) <-chan struct{} {
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				w.out.println("reads", reads.Load())
			case <-finished:
				return
			}
		}
	}()
	return reported
}

// readConfig is one reader: it reads the configuration under the read lock, again and again,
// until the stop, counting its reads and torn reads in t.
func readConfig(w *worker, lock *rwlock.Lock, key, label string, t *readerTally) {
	for w.stop.Err() == nil {
		asked := time.Now()
		held, err := lock.RLock(w.stop)
		if err != nil {
			if w.stop.Err() == nil {
				t.fail(err)
			}
			return
		}
		wait := time.Since(asked)
		for old := t.longest.Load(); int64(wait) > old && !t.longest.CompareAndSwap(old, int64(wait)); old = t.longest.Load() {
		}
		v, err := w.rdb.HMGet(held, key, "a", "b").Result()
		if err == nil {
			time.Sleep(readWork) // the reader uses the configuration
		}
		// The read runs under the held context, which the stop cancels: a read cut
		// short by it is the end, not a failure.
		cut := err != nil && w.stop.Err() != nil
		if uerr := lock.RUnlock(held); err == nil || cut {
			err = uerr
		}
		if err == nil && cut {
			return
		}
		if err != nil {
			t.fail(err)
			return
		}
		t.reads.Add(1)
		if a, b := fmt.Sprint(v[0]), fmt.Sprint(v[1]); a != b {
			t.torn.Add(1)
			w.out.println("torn", label, a, b)
		}
	}
}

// runWriter is the worker side of the writer.
func runWriter(ctx context.Context, w *worker) error {
	lock, err := rwlock.New(w.client, w.spec.Name)
	if err != nil {
		return err
	}
	key := configKeyOf(lock)
	for i := 1; i <= w.spec.Writes; i++ {
		time.Sleep(writeEvery) // an occasional writer
		info, err := lock.Info(ctx)
		if err != nil {
			return err
		}
		asked := time.Now()
		held, err := lock.Lock(ctx)
		if err != nil {
			return err
		}
		wait := time.Since(asked)
		version, err := write(held, w, key, i)
		if uerr := lock.Unlock(held); err == nil {
			err = uerr
		}
		if err != nil {
			return err
		}
		w.out.println("write", i, version, wait.Microseconds(), info.Readers)
	}
	w.out.println(lineDone, w.spec.Writes)
	return nil
}

// write updates the configuration, holding the write lock, in two steps on purpose; see
// "Shared configuration" above. Every call takes the held context, so it stops as soon as the
// lock is lost.
func write(held context.Context, w *worker, key string, value int) (int64, error) {
	if err := w.rdb.HSet(held, key, "a", value).Err(); err != nil {
		return 0, err
	}
	time.Sleep(writeWork)
	if err := w.rdb.HSet(held, key, "b", value).Err(); err != nil {
		return 0, err
	}
	return w.rdb.HIncrBy(held, key, "version", 1).Result()
}
