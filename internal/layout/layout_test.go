package layout_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/layout"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/reentrant"
	"github.com/redaqs/aqs/rwlock"
	"github.com/redaqs/aqs/semaphore"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// A hold id as the library makes them: a Client id (a UUID) and a sequence number.
const (
	clientA = "123e4567-e89b-12d3-a456-426614174000"
	holdA   = clientA + ":42"
	holdB   = "223e4567-e89b-12d3-a456-426614174000:7"
)

func TestParseLockValueReadsEveryFieldInAnyOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    string
		want layout.LockValue
	}{
		{holdA, layout.LockValue{Hold: holdA, Count: 1}},
		{holdA + " n3", layout.LockValue{Hold: holdA, Count: 3}},
		{holdA + " t1795342940984674", layout.LockValue{Hold: holdA, Count: 1, Token: 1795342940984674}},
		{holdA + " w", layout.LockValue{Hold: holdA, Count: 1, Queued: true}},
		{holdA + " w e1700000000000", layout.LockValue{Hold: holdA, Count: 1, Queued: true, LeaseEnd: 1700000000000}},
		{holdA + " t5 n2 w e1700000000", layout.LockValue{Hold: holdA, Count: 2, Token: 5, Queued: true, LeaseEnd: 1700000000}},
		{holdA + " n2 w t5 e1", layout.LockValue{Hold: holdA, Count: 2, Token: 5, Queued: true, LeaseEnd: 1}},
		{holdA + "  n2", layout.LockValue{Hold: holdA, Count: 2}},
	} {
		got, err := layout.ParseLockValue(tc.v)
		if assert.NoError(t, err, tc.v) {
			assert.Equal(t, tc.want, got, tc.v)
		}
	}
}

func TestParseLockValueRefusesWhatAqsDidNotWrite(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		"",
		"hello",
		clientA,                                  // no sequence
		clientA + ":",                            // nothing after the colon
		"123e4567_e89b-12d3-a456-426614174000:1", // not a UUID
		holdA + " x",
		holdA + " nx",
		holdA + " t",
		holdA + " e",
		holdA + " n2.5",
		// The former layout's turns (Client ids of waiters) and reservation: gone.
		clientA + ":r w r223e4567-e89b-12d3-a456-426614174000",
	} {
		_, err := layout.ParseLockValue(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestParseMemberReadsEachKind(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind layout.MemberKind
		m    string
		want layout.Member
	}{
		{layout.LockMember, holdA + " 30000", layout.Member{Hold: holdA, Lease: 30000}},
		{layout.LockMember, layout.LockMemberOf(holdB, 1500), layout.Member{Hold: holdB, Lease: 1500}},
		{layout.RWMember, holdA + " 30000 s", layout.Member{Hold: holdA, Lease: 30000, Shared: true}},
		{layout.RWMember, holdA + " 10000 x", layout.Member{Hold: holdA, Lease: 10000}},
		{layout.CountingMember, holdA + " 2", layout.Member{Hold: holdA, Permits: 2}},
		{layout.LeasedMember, holdA + " 2 10000", layout.Member{Hold: holdA, Permits: 2, Lease: 10000}},
	} {
		got, err := layout.ParseMember(tc.kind, tc.m)
		if assert.NoError(t, err, tc.m) {
			assert.Equal(t, tc.want, got, tc.m)
		}
	}
}

func TestParseMemberRefusesMalformedMembers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind layout.MemberKind
		m    string
	}{
		{layout.LockMember, ""},
		{layout.LockMember, holdA},
		{layout.LockMember, holdA + " 30000 x"}, // a read-write lock's
		{layout.LockMember, holdA + " lease"},
		{layout.LockMember, "someone 30000"},
		{layout.RWMember, holdA + " 30000"}, // a lock's
		{layout.RWMember, holdA + " 30000 r"},
		{layout.RWMember, holdA + " 30000 S"},
		{layout.RWMember, holdA + " long s"},
		{layout.RWMember, holdA + " 30000 s extra"},
		{layout.CountingMember, holdA + " 2 10000"}, // a leased semaphore's
		{layout.CountingMember, holdA + " two"},
		{layout.LeasedMember, holdA + " 2"},   // a counting semaphore's
		{layout.LeasedMember, holdA + " 2 x"}, // a read-write lock's, sort of
		{layout.LeasedMember, holdA + " x 10000"},
		{layout.LeasedMember, clientA + " 2 10000"}, // no sequence
	} {
		_, err := layout.ParseMember(tc.kind, tc.m)
		assert.Error(t, err, "kind %d: %q", tc.kind, tc.m)
	}
}

func TestParseSemHashTakesTheGateOffAndTellsTheKindsField(t *testing.T) {
	t.Parallel()
	gated := func(avail int64) string { return strconv.FormatInt(avail-layout.Gate, 10) }
	for _, tc := range []struct {
		what string
		f    map[string]string
		want layout.SemHash
	}{
		{"counting, nobody queued", map[string]string{"t": "3", "a": "1"},
			layout.SemHash{Set: true, Total: 3, Avail: 1, HasA: true}},
		{"counting, gated while the queue may hold entries", map[string]string{"t": "3", "a": gated(1), "q": "1"},
			layout.SemHash{Set: true, Total: 3, Avail: 1, Queued: true, HasA: true}},
		{"counting, gated, nothing available", map[string]string{"t": "3", "a": gated(0), "q": "1"},
			layout.SemHash{Set: true, Total: 3, Avail: 0, Queued: true, HasA: true}},
		{"counting, never set, a failed decrement left in a", map[string]string{"a": "-2"},
			layout.SemHash{Avail: -2, HasA: true}},
		{"counting set to 0: t alone", map[string]string{"t": "0"},
			layout.SemHash{Set: true}},
		{"leased", map[string]string{"t": "2", "u": "2"},
			layout.SemHash{Set: true, Total: 2, Leased: 2, HasU: true}},
		{"leased, queued", map[string]string{"t": "2", "u": "0", "q": "1"},
			layout.SemHash{Set: true, Total: 2, Avail: layout.Gate, Queued: true, HasU: true}},
	} {
		got, err := layout.ParseSemHash(tc.f)
		if assert.NoError(t, err, tc.what) {
			assert.Equal(t, tc.want, got, tc.what)
		}
	}
	for _, bad := range []map[string]string{
		nil,
		{},
		{"u": "1"},                    // neither t nor a
		{"q": "1"},                    // neither t nor a
		{"t": "3", "other": "1"},      // a foreign field
		{"t": "3", "a": "1", "w": ""}, // a foreign field
		{"t": "three"},
		{"t": "3", "a": "1.5"},
		{"t": "3", "q": "yes"},
	} {
		_, err := layout.ParseSemHash(bad)
		assert.Error(t, err, "%v", bad)
	}
}

func TestHoldIdsScoresAndChannels(t *testing.T) {
	t.Parallel()
	assert.True(t, layout.LooksLikeHold(holdA))
	for _, s := range []string{"", clientA, clientA + ":", "123e4567e89b-12d3-a456-426614174000:1", "x"} {
		assert.False(t, layout.LooksLikeHold(s), "%q", s)
	}
	assert.Equal(t, clientA, layout.ClientOf(holdA))
	assert.Equal(t, "short", layout.ClientOf("short"))
	assert.Equal(t, "aqs:{n}:c:"+clientA, layout.GrantChannel("aqs:{n}", clientA))
	for s, want := range map[string]int64{"1700000000123": 1700000000123, "1.700000000123e+12": 1700000000123, "-5": -5} {
		got, ok := layout.ParseScore(s)
		if assert.True(t, ok, s) {
			assert.Equal(t, want, got, s)
		}
	}
	_, ok := layout.ParseScore("soon")
	assert.False(t, ok)
}

// What the scripts write, read with layout: the tests below take each primitive through its
// public API into a state with holders and queued waiters, and parse what Redis holds.

const within = 10 * time.Second

// newClient returns an aqs Client on rdb, closed at the end of the test.
var newClient = redistest.NewClient

// inBackground runs f in the background; the channel gets its error.
func inBackground(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

func await(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		require.NoError(t, err, what)
	case <-time.After(within):
		t.Fatalf("%s: still blocked after %v", what, within)
	}
}

// queueOf waits until the queue at base lists n members, then returns them, in order, with
// their liveness deadlines; each must be in the future.
func queueOf(t *testing.T, rdb redis.UniversalClient, base string, n int) []string {
	t.Helper()
	ctx := t.Context()
	var q []string
	require.Eventually(t, func() bool {
		var err error
		q, err = rdb.LRange(ctx, base+layout.QueueSuffix, 0, -1).Result()
		return err == nil && len(q) == n
	}, within, 2*time.Millisecond, "waiting for %d queued at %s", n, base)
	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	for _, m := range q {
		d, err := rdb.ZScore(ctx, base+layout.DeadlineSuffix, m).Result()
		require.NoError(t, err, "%q is in the deadlines", m)
		assert.Greater(t, int64(d), now.UnixMilli(), "%q is live", m)
	}
	return q
}

// grants subscribes to the grant channel of client's waiters at base.
func grants(t *testing.T, rdb *redis.Client, base, client string) <-chan *redis.Message {
	t.Helper()
	sub := rdb.Subscribe(t.Context(), layout.GrantChannel(base, client))
	t.Cleanup(func() { sub.Close() })
	_, err := sub.Receive(t.Context()) // the subscription is in place
	require.NoError(t, err)
	return sub.Channel()
}

// heard waits for a message on ch that names hold.
func heard(t *testing.T, ch <-chan *redis.Message, hold string) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case m := <-ch:
			if strings.Contains(" "+m.Payload+" ", " "+hold+" ") {
				return
			}
		case <-deadline:
			t.Fatalf("no grant of %s heard", hold)
		}
	}
}

// exclusive is what the reentrant and the fair lock share.
type exclusive interface {
	Lock(context.Context, ...aqs.LockOption) (context.Context, error)
	Unlock(context.Context) error
	Key() string
}

func TestTheLockScriptsWriteWhatLayoutDescribes(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	rdb := srv.Client(t)
	for _, kind := range []struct {
		name string
		open func(*aqs.Client, string) (exclusive, error)
	}{
		{"reentrant", func(c *aqs.Client, n string) (exclusive, error) { return reentrant.New(c, n) }},
		{"fair", func(c *aqs.Client, n string) (exclusive, error) { return fair.New(c, n) }},
	} {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			name := redistest.Name(t)
			a, b := newClient(t, rdb), newClient(t, rdb)
			la, err := kind.open(a, name)
			require.NoError(t, err)
			lb, err := kind.open(b, name)
			require.NoError(t, err)
			held, err := la.Lock(ctx, aqs.WithFencingToken())
			require.NoError(t, err)
			inner, err := la.Lock(held)
			require.NoError(t, err)
			token, err := aqs.FencingToken(held)
			require.NoError(t, err)

			// A hold alone: "<hold> n2 t<token>", the key's TTL its lease.
			v, err := rdb.Get(ctx, la.Key()).Result()
			require.NoError(t, err)
			lv, err := layout.ParseLockValue(v)
			require.NoError(t, err, v)
			assert.Equal(t, a.ID(), layout.ClientOf(lv.Hold))
			assert.Equal(t, layout.LockValue{Hold: lv.Hold, Count: 2, Token: token}, lv, v)

			// A waiter of another Client queues "<hold> <lease>", and marks the value (w), which
			// records the lease end (e) from then on.
			granted := grants(t, rdb, la.Key(), b.ID())
			var heldB context.Context
			ch := inBackground(func() (err error) { heldB, err = lb.Lock(ctx, aqs.WithLease(20*time.Second)); return err })
			q := queueOf(t, rdb, la.Key(), 1)
			m, err := layout.ParseMember(layout.LockMember, q[0])
			require.NoError(t, err, q[0])
			assert.Equal(t, b.ID(), layout.ClientOf(m.Hold))
			assert.Equal(t, layout.LockMemberOf(m.Hold, 20000), q[0])
			var marked layout.LockValue
			require.Eventually(t, func() bool {
				v, err := rdb.Get(ctx, la.Key()).Result()
				require.NoError(t, err)
				marked, err = layout.ParseLockValue(v)
				require.NoError(t, err, v)
				return marked.Queued && marked.LeaseEnd != 0
			}, within, 2*time.Millisecond, "the value marked w, its lease end recorded")
			assert.Equal(t, lv.Hold, marked.Hold)
			assert.Equal(t, int64(2), marked.Count)
			assert.Equal(t, token, marked.Token)
			now, err := rdb.Time(ctx).Result()
			require.NoError(t, err)
			assert.Greater(t, marked.LeaseEnd, now.UnixMilli(), "the recorded lease end is ahead")

			// The release hands the lock to the queue's head, told on its Client's channel.
			require.NoError(t, la.Unlock(inner))
			require.NoError(t, la.Unlock(held))
			heard(t, granted, m.Hold)
			await(t, ch, "b's Lock")
			v, err = rdb.Get(ctx, la.Key()).Result()
			require.NoError(t, err)
			lv, err = layout.ParseLockValue(v)
			require.NoError(t, err, v)
			assert.Equal(t, m.Hold, lv.Hold, "the head's hold holds")
			assert.Equal(t, int64(1), lv.Count)
			require.NoError(t, lb.Unlock(heldB))
		})
	}
}

func TestTheReadWriteLockScriptsWriteWhatLayoutDescribes(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	rdb := srv.Client(t)
	ctx := t.Context()
	name := redistest.Name(t)
	cr, cw, cr2 := newClient(t, rdb), newClient(t, rdb), newClient(t, rdb)
	open := func(c *aqs.Client) *rwlock.Lock {
		l, err := rwlock.New(c, name)
		require.NoError(t, err)
		return l
	}
	lr, lw, lr2 := open(cr), open(cw), open(cr2)
	base := lr.Key()

	// A reader, re-entered: in r scored by its lease end, and in rn with one re-entry.
	r0, err := lr.RLock(ctx)
	require.NoError(t, err)
	r0b, err := lr.RLock(r0)
	require.NoError(t, err)
	readers, err := rdb.ZRangeWithScores(ctx, base+layout.ReadersSuffix, 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, readers, 1)
	reader := readers[0].Member.(string)
	assert.Equal(t, cr.ID(), layout.ClientOf(reader))
	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	assert.Greater(t, int64(readers[0].Score), now.UnixMilli())
	re, err := rdb.HGetAll(ctx, base+layout.ReentriesSuffix).Result()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{reader: "1"}, re)

	// A writer waits, then a reader behind it (the fair mode: it does not pass the writer):
	// one queue, "<hold> <lease> x" then "<hold> <lease> s".
	grantsW := grants(t, rdb, base, cw.ID())
	var heldW, heldR2 context.Context
	chW := inBackground(func() (err error) {
		heldW, err = lw.Lock(ctx, aqs.WithLease(20*time.Second), aqs.WithFencingToken())
		return err
	})
	queueOf(t, rdb, base, 1)
	chR2 := inBackground(func() (err error) { heldR2, err = lr2.RLock(ctx); return err })
	q := queueOf(t, rdb, base, 2)
	w, err := layout.ParseMember(layout.RWMember, q[0])
	require.NoError(t, err, q[0])
	assert.Equal(t, layout.Member{Hold: w.Hold, Lease: 20000}, w, "a writer")
	assert.Equal(t, cw.ID(), layout.ClientOf(w.Hold))
	r2, err := layout.ParseMember(layout.RWMember, q[1])
	require.NoError(t, err, q[1])
	assert.True(t, r2.Shared, "a reader")
	assert.Positive(t, r2.Lease)
	assert.Equal(t, cr2.ID(), layout.ClientOf(r2.Hold))
	for _, kind := range []layout.MemberKind{layout.LockMember, layout.CountingMember, layout.LeasedMember} {
		_, err := layout.ParseMember(kind, q[0])
		assert.Error(t, err, "a read-write lock's member is of no other kind (%d)", kind)
	}

	// The last reader leaves: the writer at the head gets the write side, a lock value.
	require.NoError(t, lr.RUnlock(r0b))
	require.NoError(t, lr.RUnlock(r0))
	heard(t, grantsW, w.Hold)
	await(t, chW, "the writer's Lock")
	v, err := rdb.Get(ctx, base).Result()
	require.NoError(t, err)
	lv, err := layout.ParseLockValue(v)
	require.NoError(t, err, v)
	assert.Equal(t, w.Hold, lv.Hold)
	assert.Equal(t, int64(1), lv.Count)
	token, err := lw.Token(heldW)
	require.NoError(t, err)
	assert.Equal(t, token, lv.Token)
	assert.Equal(t, []string{q[1]}, queueOf(t, rdb, base, 1), "the reader still waits")

	require.NoError(t, lw.Unlock(heldW))
	await(t, chR2, "the second reader's RLock")
	require.NoError(t, lr2.RUnlock(heldR2))
}

func TestTheSemaphoreScriptsWriteWhatLayoutDescribes(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	rdb := srv.Client(t)

	t.Run("counting", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		name := redistest.Name(t)
		a, b := newClient(t, rdb), newClient(t, rdb)
		sa, err := semaphore.New(a, name)
		require.NoError(t, err)
		sb, err := semaphore.New(b, name)
		require.NoError(t, err)
		t.Cleanup(func() { rdb.Del(context.Background(), sa.Keys()...) })
		_, err = sa.TrySetPermits(ctx, 3)
		require.NoError(t, err)
		require.NoError(t, sa.Acquire(ctx, 2))
		hash := func() layout.SemHash {
			f, err := rdb.HGetAll(ctx, sa.Key()).Result()
			require.NoError(t, err)
			h, err := layout.ParseSemHash(f)
			require.NoError(t, err, f)
			return h
		}
		assert.Equal(t, layout.SemHash{Set: true, Total: 3, Avail: 1, HasA: true}, hash())

		// A waiter for 2: "<hold> 2", and the gate on a (taken off by ParseSemHash).
		grantsB := grants(t, rdb, sa.Key(), b.ID())
		ch := inBackground(func() error { return sb.Acquire(ctx, 2) })
		q := queueOf(t, rdb, sa.Key(), 1)
		m, err := layout.ParseMember(layout.CountingMember, q[0])
		require.NoError(t, err, q[0])
		assert.Equal(t, layout.Member{Hold: m.Hold, Permits: 2}, m)
		assert.Equal(t, b.ID(), layout.ClientOf(m.Hold))
		assert.Equal(t, layout.SemHash{Set: true, Total: 3, Avail: 1, Queued: true, HasA: true}, hash())

		require.NoError(t, sa.Release(ctx, 2))
		heard(t, grantsB, m.Hold)
		await(t, ch, "b's Acquire")
		require.NoError(t, sb.Release(ctx, 2))
		h := hash()
		assert.Equal(t, int64(3), h.Avail)
		assert.True(t, h.HasA)
	})

	t.Run("leased", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		name := redistest.Name(t)
		a, b := newClient(t, rdb), newClient(t, rdb)
		sa, err := semaphore.NewLeased(a, name)
		require.NoError(t, err)
		sb, err := semaphore.NewLeased(b, name)
		require.NoError(t, err)
		t.Cleanup(func() { rdb.Del(context.Background(), sa.Keys()...) })
		_, err = sa.TrySetPermits(ctx, 3)
		require.NoError(t, err)
		p, err := sa.Acquire(ctx, 2)
		require.NoError(t, err)
		f, err := rdb.HGetAll(ctx, sa.Key()).Result()
		require.NoError(t, err)
		h, err := layout.ParseSemHash(f)
		require.NoError(t, err, f)
		assert.Equal(t, layout.SemHash{Set: true, Total: 3, Leased: 2, HasU: true}, h)
		permits, err := rdb.ZRange(ctx, sa.Key()+layout.PermitsSuffix, 0, -1).Result()
		require.NoError(t, err)
		assert.Equal(t, []string{p.ID()}, permits)
		counts, err := rdb.HGetAll(ctx, sa.Key()+layout.PermitCountsSuffix).Result()
		require.NoError(t, err)
		assert.Equal(t, map[string]string{p.ID(): "2"}, counts)

		// A waiter for 2 with a lease of 10s: "<hold> 2 10000".
		grantsB := grants(t, rdb, sa.Key(), b.ID())
		var pb *semaphore.Permit
		ch := inBackground(func() (err error) { pb, err = sb.Acquire(ctx, 2, aqs.WithLease(10*time.Second)); return err })
		q := queueOf(t, rdb, sa.Key(), 1)
		m, err := layout.ParseMember(layout.LeasedMember, q[0])
		require.NoError(t, err, q[0])
		assert.Equal(t, layout.Member{Hold: m.Hold, Permits: 2, Lease: 10000}, m)
		assert.Equal(t, b.ID(), layout.ClientOf(m.Hold))
		_, err = layout.ParseMember(layout.RWMember, q[0])
		assert.Error(t, err, "a leased semaphore's member is not a read-write lock's")

		require.NoError(t, sa.Release(ctx, p))
		heard(t, grantsB, m.Hold)
		await(t, ch, "b's Acquire")
		assert.Equal(t, m.Hold, pb.ID(), "a permit's id is its hold id")
		require.NoError(t, sb.Release(ctx, pb))
	})
}

// docs/DESIGN.md's key table names every key suffix of this package, so that the table a
// maintainer reads is the layout the code writes.
func TestTheDesignKeyTableNamesEverySuffix(t *testing.T) {
	doc, err := os.ReadFile("../../docs/DESIGN.md")
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(doc), "## Key layout")
	require.True(t, ok, "docs/DESIGN.md has no key layout section")
	table, _, _ = strings.Cut(table, "\n## ")
	for name, suffix := range map[string]string{
		"QueueSuffix": layout.QueueSuffix, "DeadlineSuffix": layout.DeadlineSuffix,
		"ReadersSuffix": layout.ReadersSuffix, "ReentriesSuffix": layout.ReentriesSuffix,
		"GrantsSuffix": layout.GrantsSuffix, "PermitsSuffix": layout.PermitsSuffix,
		"PermitCountsSuffix": layout.PermitCountsSuffix, "OnceSuffix": layout.OnceSuffix,
		"AttemptSuffix": layout.AttemptSuffix, "ReleaseSuffix": layout.ReleaseSuffix,
		"WaiterSuffix": layout.WaiterSuffix, "ConditionSuffix": layout.ConditionSuffix,
		"ReleasedPermitsSuffix": layout.ReleasedPermitsSuffix,
	} {
		assert.Contains(t, table, "`"+suffix, "the key table does not name %s (%q)", name, suffix)
	}
	// And the keys the functions give are the table's, in the scripts' order.
	assert.Equal(t, []string{"b", "b:q", "b:d"}, layout.LockKeys("b"))
	assert.Equal(t, []string{"b", "b:r", "b:rn", "b:q", "b:d"}, layout.RWKeys("b"))
	assert.Equal(t, []string{"b", "b:q", "b:d", "b:g"}, layout.CountingKeys("b"))
	assert.Equal(t, []string{"b", "b:q", "b:d", "b:p", "b:pn"}, layout.LeasedKeys("b"))
	assert.Equal(t, []string{"b:w:a%3Ab%25", "b:w:a%3Ab%25:d"}, layout.ConditionKeys("b", "a:b%"))
}
