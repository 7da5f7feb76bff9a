package rwlock_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/redaqs/aqs/internal/lintest"
	"github.com/redaqs/aqs/internal/redistest"
	"github.com/redaqs/aqs/internal/scripts"
	"github.com/redaqs/aqs/model"
	"github.com/redaqs/aqs/rwlock"
)

// The model-versus-Redis state machine of the read-write lock: the same operations (write and
// read attempts with and without waiting, downgrades, re-entries, releases, a waiting writer's
// heartbeat and giving up, forced release) go to the lock's scripts on Redis and to model.RW,
// in the fair and the non-fair mode, and every reply, every wake message published and the
// writer, readers, waiting writers and readers-waiting flag after each step are compared.
//
// Leases are an hour and the writer timeout ten, and no time passes in the model: expiry is
// covered by lock_test.go and process_test.go (a reader's own lease ending), the model's
// rapid tests cover it against the model.

const (
	smLease   = int64(time.Hour / time.Millisecond)
	smTimeout = 10 * smLease
)

type rwMachine struct {
	rdb     redis.UniversalClient
	ps      *redis.PubSub
	rch     string
	wch     string
	keys    []string // w, r, rn, ww, rw
	pub     string
	m       *model.RW
	client  string
	seq     int
	writers []string // write slots: a hold id each, fresh once its hold is over
	readers []string // read slots
	checks  *int
}

func (s *rwMachine) newHold() string {
	s.seq++
	return fmt.Sprintf("%s:%d", s.client, s.seq)
}

func (s *rwMachine) run(t *rapid.T, sc *scripts.Script, keys []string, args ...any) int64 {
	r, err := sc.Run(context.Background(), s.rdb, keys, args...).Int64()
	if err != nil {
		t.Fatalf("%s: %v", sc.Name(), err)
	}
	return r
}

// wakes returns the wake messages published since the last call: the PING's reply comes
// after every message published before it reached Redis.
func (s *rwMachine) wakes(t *rapid.T) (readers, writer bool) {
	ctx := context.Background()
	if err := s.ps.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		msg, err := s.ps.ReceiveTimeout(ctx, 5*time.Second)
		if err != nil {
			t.Fatalf("waiting for the pong: %v", err)
		}
		switch m := msg.(type) {
		case *redis.Message:
			switch m.Channel {
			case s.rch:
				readers = true
			case s.wch:
				writer = true
			}
		case *redis.Pong:
			return readers, writer
		}
	}
}

func (s *rwMachine) writeSlot(t *rapid.T) int {
	return rapid.IntRange(0, len(s.writers)-1).Draw(t, "writer")
}

func (s *rwMachine) readSlot(t *rapid.T) int {
	return rapid.IntRange(0, len(s.readers)-1).Draw(t, "reader")
}

// holding reports whether a write slot's hold is the writer, or a read slot's a reader.
func (s *rwMachine) writing(i int) bool {
	h, _, ok := s.m.Writer(0)
	return ok && h == s.writers[i]
}

func (s *rwMachine) reading(i int) bool { return s.m.ReaderCount(0, s.readers[i]) > 0 }

func (s *rwMachine) writeAttempt(t *rapid.T) {
	i := s.writeSlot(t)
	if s.writing(i) {
		t.Skip("the slot holds: it re-enters instead")
	}
	wait := rapid.Bool().Draw(t, "wait")
	r := s.run(t, scripts.RWWriteAcquire, s.keys[:4], s.writers[i], smLease, smTimeout, flag(wait), "0")
	want := s.m.WriteAttempt(0, s.writers[i], smLease, wait)
	if (r >= 1) != want.Acquired {
		t.Fatalf("write attempt by %s (wait %v): redis %d, model %+v", s.writers[i], wait, r, want)
	}
	s.noWakes(t, "write attempt")
}

func (s *rwMachine) readAttempt(t *rapid.T) {
	i := s.readSlot(t)
	if s.reading(i) {
		t.Skip("the slot holds: it re-enters instead")
	}
	wait := rapid.Bool().Draw(t, "wait")
	writer := ""
	if h, _, ok := s.m.Writer(0); ok && rapid.Bool().Draw(t, "downgrade") {
		writer = h
	}
	margin := "0"
	if wait {
		margin = fmt.Sprint(smTimeout)
	}
	r := s.run(t, scripts.RWReadAcquire, []string{s.keys[0], s.keys[1], s.keys[4]},
		s.readers[i], smLease, writer, flag(s.m.Fair()), margin)
	want := s.m.ReadAttempt(0, s.readers[i], smLease, writer, wait)
	if (r >= 1) != want.Acquired {
		t.Fatalf("read attempt by %s (wait %v, writer %q): redis %d, model %+v", s.readers[i], wait, writer, r, want)
	}
	s.noWakes(t, "read attempt")
}

func (s *rwMachine) readReenter(t *rapid.T) {
	i := s.readSlot(t)
	r := s.run(t, scripts.RWReadReenter, s.keys[1:3], s.readers[i], 0)
	if want := s.m.ReadReenter(0, s.readers[i]); (r == 1) != want {
		t.Fatalf("read re-entry by %s: redis %d, model %v", s.readers[i], r, want)
	}
}

func (s *rwMachine) writeReenter(t *rapid.T) {
	i := s.writeSlot(t)
	r := s.run(t, scripts.LockReenter, s.keys[:1], s.writers[i], 0)
	if want := s.m.WriteReenter(0, s.writers[i]); (r == 1) != want {
		t.Fatalf("write re-entry by %s: redis %d, model %v", s.writers[i], r, want)
	}
}

func (s *rwMachine) readRelease(t *rapid.T) {
	i := s.readSlot(t)
	last := rapid.Bool().Draw(t, "last")
	// The real lock tells the script whether the hold was ever re-entered; the count in rn
	// says the same, and the script must clean it up either way when told so.
	// No time passes: a live reader's lease is known to run (the fast path), and a
	// non-reader's release is refused either way.
	trusted := rapid.Bool().Draw(t, "trusted")
	r := s.run(t, scripts.RWReadRelease, s.keys[:3], s.readers[i], flag(last), s.pub, "1", flag(trusted))
	want, err := s.m.ReadRelease(0, s.readers[i], last)
	switch {
	case err != nil && r != -1:
		t.Fatalf("read release by non-reader %s: redis %d", s.readers[i], r)
	case err == nil:
		// An ended hold replies -2 instead of 0 when a writer waits and none holds.
		got := r
		if r == -2 {
			got = 0
		}
		if int64(want.Count) != got || (want.Count == 0 && (r == -2) != s.writerWaitsUnheld()) {
			t.Fatalf("read release by %s (last %v): redis %d, model %+v, writer waits unheld %v",
				s.readers[i], last, r, want, s.writerWaitsUnheld())
		}
	}
	readers, writer := s.wakes(t)
	if readers || writer != want.WakeWriter {
		t.Fatalf("read release by %s: woke readers %v writer %v, model %+v", s.readers[i], readers, writer, want)
	}
	if !s.reading(i) {
		s.readers[i] = s.newHold()
	}
}

func (s *rwMachine) writeRelease(t *rapid.T) {
	i := s.writeSlot(t)
	last := rapid.Bool().Draw(t, "last")
	r := s.run(t, scripts.RWWriteRelease, s.keys, s.writers[i], flag(last), s.pub)
	want, err := s.m.WriteRelease(0, s.writers[i], last)
	switch {
	case err != nil && r != -1:
		t.Fatalf("write release by non-writer %s: redis %d", s.writers[i], r)
	case err == nil && int64(want.Count) != r:
		t.Fatalf("write release by %s (last %v): redis %d, model %+v", s.writers[i], last, r, want)
	}
	readers, writer := s.wakes(t)
	if readers != want.WakeReaders || writer != want.WakeWriter {
		t.Fatalf("write release by %s: woke readers %v writer %v, model %+v", s.writers[i], readers, writer, want)
	}
	if !s.writing(i) && !slices.Contains(s.m.WaitingWriters(0), s.writers[i]) {
		s.writers[i] = s.newHold()
	}
}

func (s *rwMachine) heartbeat(t *rapid.T) {
	i := s.writeSlot(t)
	r := s.run(t, scripts.RWWriterHeartbeat, []string{s.keys[0], s.keys[3]}, s.writers[i], smTimeout)
	if want := s.m.WriterHeartbeat(0, s.writers[i]); (r == 1) != want {
		t.Fatalf("heartbeat of %s: redis %d, model %v", s.writers[i], r, want)
	}
	s.noWakes(t, "heartbeat")
}

func (s *rwMachine) giveUp(t *rapid.T) {
	i := s.writeSlot(t)
	if s.writing(i) {
		t.Skip("a holder does not give up")
	}
	r := s.run(t, scripts.RWWriterGiveUp, []string{s.keys[0], s.keys[3], s.keys[4]}, s.writers[i], s.pub)
	want := s.m.WriterGiveUp(0, s.writers[i])
	readers, writer := s.wakes(t)
	if (r == 1) != want || readers != want || writer {
		t.Fatalf("give up by %s: redis %d, woke readers %v writer %v, model %v", s.writers[i], r, readers, writer, want)
	}
	s.writers[i] = s.newHold()
}

func (s *rwMachine) force(t *rapid.T) {
	r := s.run(t, scripts.RWForceRelease, s.keys, s.pub, "")
	if want := s.m.ForceRelease(0); (r == 1) != want {
		t.Fatalf("force release: redis %d, model held %v", r, want)
	}
	s.wakes(t) // a forced release wakes everyone, whatever waits
	for i := range s.readers {
		s.readers[i] = s.newHold()
	}
	for i := range s.writers {
		if !slices.Contains(s.m.WaitingWriters(0), s.writers[i]) {
			s.writers[i] = s.newHold()
		}
	}
}

// writerWaitsUnheld reports whether, in the model, a live writer waits and none holds.
func (s *rwMachine) writerWaitsUnheld() bool {
	_, _, held := s.m.Writer(0)
	return !held && len(s.m.WaitingWriters(0)) > 0
}

func (s *rwMachine) noWakes(t *rapid.T, op string) {
	if readers, writer := s.wakes(t); readers || writer {
		t.Fatalf("%s published a wake (readers %v, writer %v)", op, readers, writer)
	}
}

func (s *rwMachine) check(t *rapid.T) {
	*s.checks++
	ctx := context.Background()
	res, err := scripts.RWInfo.Run(ctx, s.rdb, []string{s.keys[0], s.keys[1], s.keys[3]}).Slice()
	if err != nil {
		t.Fatal(err)
	}
	holder, _ := res[0].(string)
	want, count, held := s.m.Writer(0)
	if holder != want || (held && res[1].(int64) != int64(count)) {
		t.Fatalf("writer: redis %q %v, model %q %d", holder, res[1], want, count)
	}
	now := fmt.Sprint(time.Now().UnixMilli())
	readers, err := s.rdb.ZRangeByScore(ctx, s.keys[1], &redis.ZRangeBy{Min: "(" + now, Max: "+inf"}).Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(readers)
	if fmt.Sprint(readers) != fmt.Sprint(s.m.Readers(0)) {
		t.Fatalf("readers: redis %v, model %v", readers, s.m.Readers(0))
	}
	for _, h := range readers {
		extra, err := s.rdb.HGet(ctx, s.keys[2], h).Int()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		if extra+1 != s.m.ReaderCount(0, h) {
			t.Fatalf("reader %s: redis count %d, model %d", h, extra+1, s.m.ReaderCount(0, h))
		}
	}
	waiting, err := s.rdb.ZRangeByScore(ctx, s.keys[3], &redis.ZRangeBy{Min: "(" + now, Max: "+inf"}).Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(waiting)
	if fmt.Sprint(waiting) != fmt.Sprint(s.m.WaitingWriters(0)) {
		t.Fatalf("waiting writers: redis %v, model %v", waiting, s.m.WaitingWriters(0))
	}
	if flagged := s.rdb.Exists(ctx, s.keys[4]).Val() == 1; flagged != s.m.ReadersWaiting() {
		t.Fatalf("readers-waiting flag: redis %v, model %v", flagged, s.m.ReadersWaiting())
	}
}

func runRWMachine(t *testing.T, rdb redis.UniversalClient) {
	c := newClient(t, rdb)
	_, cluster := rdb.(*redis.ClusterClient)
	pub := "PUBLISH"
	if cluster {
		pub = "SPUBLISH"
	}
	checks, runs := 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		runs++
		fair := rapid.Bool().Draw(rt, "fair")
		var opts []rwlock.Option
		if !fair {
			opts = append(opts, rwlock.WithNonFair())
		}
		l, err := rwlock.New(c, fmt.Sprintf("%s-%d", t.Name(), runs), opts...)
		if err != nil {
			rt.Fatal(err)
		}
		ctx := context.Background()
		s := &rwMachine{rdb: rdb, keys: l.Keys(), pub: pub, m: model.NewRW(smTimeout, fair),
			client: uuid.NewString(), rch: l.Key() + ":rch", wch: l.Key() + ":wch", checks: &checks}
		if cluster {
			s.ps = rdb.(*redis.ClusterClient).SSubscribe(ctx, s.rch, s.wch)
		} else {
			s.ps = rdb.Subscribe(ctx, s.rch, s.wch)
		}
		defer s.ps.Close()
		for range 2 {
			if _, err := s.ps.ReceiveTimeout(ctx, 5*time.Second); err != nil { // the confirmations
				rt.Fatal(err)
			}
		}
		for range 3 {
			s.writers = append(s.writers, s.newHold())
			s.readers = append(s.readers, s.newHold())
		}
		defer rdb.Del(ctx, s.keys...)
		rt.Repeat(map[string]func(*rapid.T){
			"writeAttempt": s.writeAttempt,
			"readAttempt":  s.readAttempt,
			"readReenter":  s.readReenter,
			"writeReenter": s.writeReenter,
			"readRelease":  s.readRelease,
			"writeRelease": s.writeRelease,
			"heartbeat":    s.heartbeat,
			"giveUp":       s.giveUp,
			"force":        s.force,
			"":             s.check,
		})
		redistest.AssertNoKeyWithoutTTL(lintest.InRapid(t, rt), rdb, l.Name(), l.Key())
	})
	if runs < 100 {
		t.Fatalf("only %d runs", runs)
	}
	t.Logf("%d runs, %d state checks", runs, checks)
}

func TestRWLockAgreesWithModel(t *testing.T) {
	topologies(t, runRWMachine)
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
