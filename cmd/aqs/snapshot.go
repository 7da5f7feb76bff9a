package main

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/internal/core"
	"github.com/redaqs/aqs/internal/layout"
)

// Reading a name.
//
// One read-only script (inspect.lua) returns, in one atomic snapshot, the server time and the
// type, TTL and contents of the name's base key and of every companion key any primitive
// keeps beside it (internal/layout names them). Which primitive is there is then told from
// which keys exist and what they hold, every value read through internal/layout: a lock
// value, the read-write lock's readers or its queue's read and write members, a semaphore's
// hash. Lease ends and deadlines, stored in server time, are turned into durations with the
// server time of the same snapshot, so the client's clock plays no part.
//
// Some primitives look alike in Redis. A reentrant and a fair lock keep the same value and
// queue, written by the same scripts: kind "lock", whatever the queue holds. So does a
// read-write lock's writer while nothing else of the read-write lock exists (no reader, no
// re-entry, no queue member of its own shape "<hold> <lease> s|x"). A read-write lock with any
// of those, and the two semaphores, are told apart.

//go:embed inspect.lua
var inspectLua string

var inspectScript = redis.NewScript(inspectLua)

// companions are the suffixes of the keys inspect.lua reads after the base key, and the type
// each must have: the queue of every primitive that queues (q, d), the read-write lock's
// readers and their re-entries (r, rn), the counting semaphore's grant records (g) and the
// leased semaphore's permits (p, pn), an election's leader record (e).
var companions = []struct{ suffix, typ string }{
	{layout.QueueSuffix, "list"}, {layout.DeadlineSuffix, "zset"},
	{layout.ReadersSuffix, "zset"}, {layout.ReentriesSuffix, "hash"},
	{layout.GrantsSuffix, "zset"},
	{layout.PermitsSuffix, "zset"}, {layout.PermitCountsSuffix, "hash"},
	{layout.ElectionSuffix, "hash"},
}

// The kinds of primitive, as the JSON's "kind" names them.
const (
	primLock      = "lock"   // reentrant or fair (they look alike), or a read-write lock's writer alone
	primRW        = "rwlock" // a read-write lock with readers, re-entries or a queue of its own
	primSemaphore = "semaphore"
	primLeased    = "leased-semaphore"
)

// primTitle names a kind in text.
var primTitle = map[string]string{
	primLock:      "lock",
	primRW:        "read-write lock",
	primSemaphore: "counting semaphore",
	primLeased:    "leased semaphore",
}

// errNothing reports a name with no key at all.
type errNothing struct{ name, key string }

func (e *errNothing) Error() string {
	return fmt.Sprintf("nothing at %s: no key %s, nor any of its companions (a lock that is free has no key)", e.name, e.key)
}

// errForeign reports a key at the name that no aqs primitive would hold.
type errForeign struct{ name, key, typ string }

func (e *errForeign) Error() string {
	return fmt.Sprintf("%s holds a %s that is not an aqs primitive (key %s)", e.name, e.typ, e.key)
}

// nameState is the state of one name, as aqs inspect prints it. With --json it is printed as one
// JSON object of this shape. This release changes the shape, with the storage layout: the
// kinds "reentrant-lock" and "fair-lock" and the fields reserved_for, turns and
// unlisted_waiters are gone with the mechanisms they described, and a read-write lock's
// waiters are listed one by one, in order, with their positions. This shape is stable from
// now on: fields may be added, none is removed or changes meaning. Durations are milliseconds
// measured on the server's clock at the snapshot.
type nameState struct {
	// Name is the name given, Key its base key "<prefix>:{<escaped name>}".
	Name string `json:"name"`
	Key  string `json:"key"`
	// Kind is "lock" (a reentrant or a fair lock, which look alike, or a read-write lock's
	// writer while nothing else of its lock exists), "rwlock", "semaphore" (counting) or
	// "leased-semaphore".
	Kind string `json:"kind"`
	// ServerTimeMS is the server's clock at the snapshot, in ms since the Unix epoch.
	ServerTimeMS int64 `json:"server_time_ms"`
	// Held: a lock has a holder (a writer or a live reader); a semaphore has permits taken.
	Held bool `json:"held"`
	// Holders are the holds: the lock's holder, the read-write lock's writer or readers, the
	// leased semaphore's live permits. Always empty for a counting semaphore, whose permits
	// have no owner.
	Holders []holdInfo `json:"holders"`
	// Waiters are the live waiters of the queue, in the order it serves them.
	Waiters []waitInfo `json:"waiters"`
	// StaleEntries counts entries whose time passed (dead waiters, queue entries of waiters
	// that gave up, readers and permits whose lease ran out): they are dropped the next time
	// the primitive is used there, and count for nothing meanwhile. A queue entry of another
	// primitive's shape (another kind of primitive used under the same name, or a hand-made
	// write) is counted too: it is no waiter of this one.
	StaleEntries int `json:"stale_entries"`
	// Permits is present for the semaphores only.
	Permits *permitCounts `json:"permits,omitempty"`
	// Leader is present while the lock's holder leads the election of the name (package
	// election): the election's lock is the fair lock of its name.
	Leader *leaderInfo `json:"leader,omitempty"`
}

// leaderInfo is an election's leader: the holder of the lock, as its leader record names it.
type leaderInfo struct {
	// Hold is the leader's hold id (the lock's holder), Token its fencing token, Value the
	// value it campaigned with or last proclaimed.
	Hold  string `json:"hold"`
	Token int64  `json:"token"`
	Value string `json:"value"`
}

// holdInfo is one hold.
type holdInfo struct {
	// Hold is the hold id, "<client id>:<sequence>" (a leased permit's id is one too), and
	// Client its client id, the aqs.Client that took it.
	Hold   string `json:"hold"`
	Client string `json:"client"`
	// Mode is "exclusive" (a lock), "write" or "read" (a read-write lock) or "permit".
	Mode string `json:"mode"`
	// Count is the hold's count of acquisitions: 1, plus one per re-entry. 1 for a permit.
	Count int64 `json:"count"`
	// Permits is the number of permits a leased permit holds; absent otherwise.
	Permits int64 `json:"permits,omitempty"`
	// Token is the fencing token, null until one was asked for (always null for readers and
	// permits, which have none).
	Token *int64 `json:"token"`
	// LeaseRemainingMS is what is left of the lease; -1 when the key has no expiry.
	LeaseRemainingMS int64 `json:"lease_remaining_ms"`
}

// waitInfo is one live waiter.
type waitInfo struct {
	// Position is 1 for the waiter the queue serves next, 2 for the one after... (A reentrant
	// lock's release may first hand the lock to a waiter of its own Client: see package
	// reentrant.)
	Position int `json:"position"`
	// Hold is the waiter's hold id, Client its client id.
	Hold   string `json:"hold"`
	Client string `json:"client"`
	// Mode is what it waits for: "exclusive" (a lock), "read" or "write" (a read-write
	// lock), "acquire" (semaphores).
	Mode string `json:"mode"`
	// Permits is the number of permits asked for (semaphores only).
	Permits int64 `json:"permits,omitempty"`
	// LeaseMS is the lease the hold will have (locks, read-write locks, leased semaphore).
	LeaseMS int64 `json:"lease_ms,omitempty"`
	// DeadlineInMS is how long the waiter stays queued without news from its Client (whose
	// heartbeats push the deadline on, three times per waiter timeout); then it is dropped as
	// dead.
	DeadlineInMS int64 `json:"deadline_in_ms"`
}

// permitCounts are a semaphore's counts.
type permitCounts struct {
	// Set is false while the permits were never set (TrySetPermits, AddPermits): the counts
	// are all 0 then.
	Set bool `json:"set"`
	// Total is the semaphore's permits, Available those free now, Taken = Total - Available:
	// taken (counting) or leased to live permits (leased).
	Total     int64 `json:"total"`
	Available int64 `json:"available"`
	Taken     int64 `json:"taken"`
}

// keySnap is one key of the snapshot.
type keySnap struct {
	key  string
	typ  string // "none" when missing
	pttl int64
	str  string   // a string's value
	list []string // a list's elements, a hash's or zset's flat pairs
}

func (k keySnap) exists() bool { return k.typ != "none" }

// pairs returns a hash's or zset's flat pairs as a map.
func (k keySnap) pairs() map[string]string {
	m := make(map[string]string, len(k.list)/2)
	for i := 0; i+1 < len(k.list); i += 2 {
		m[k.list[i]] = k.list[i+1]
	}
	return m
}

// nameSnapshot is the name's keys and the server time.
type nameSnapshot struct {
	name string
	now  int64
	base keySnap
	comp map[string]keySnap // by suffix
}

// inspectName reads the name and tells what is there; it fails with a *errNothing, a
// *errForeign or a Redis error.
func inspectName(ctx context.Context, rdb redis.Scripter, prefix, name string) (*nameState, error) {
	s, err := readSnapshot(ctx, rdb, prefix, name)
	if err != nil {
		return nil, err
	}
	return s.classify()
}

// readSnapshot runs inspect.lua on the name's keys.
func readSnapshot(ctx context.Context, rdb redis.Scripter, prefix, name string) (*nameSnapshot, error) {
	base, err := core.BaseKey(prefix, name)
	if err != nil {
		return nil, err
	}
	keys := []string{base}
	for _, c := range companions {
		keys = append(keys, base+c.suffix)
	}
	v, err := inspectScript.Run(ctx, rdb, keys).Slice()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", base, err)
	}
	if len(v) != 1+len(keys) {
		return nil, fmt.Errorf("reading %s: unexpected reply of %d elements", base, len(v))
	}
	now, _ := v[0].(int64)
	s := &nameSnapshot{name: name, now: now, comp: map[string]keySnap{}}
	for i, key := range keys {
		ks, err := decodeKey(key, v[i+1])
		if err != nil {
			return nil, err
		}
		if i == 0 {
			s.base = ks
		} else {
			s.comp[companions[i-1].suffix] = ks
		}
	}
	return s, nil
}

// decodeKey reads one {type, pttl, data} element of the script's reply.
func decodeKey(key string, v any) (keySnap, error) {
	e, _ := v.([]any)
	if len(e) != 3 {
		return keySnap{}, fmt.Errorf("reading %s: unexpected reply %v", key, v)
	}
	ks := keySnap{key: key}
	ks.typ, _ = e[0].(string)
	ks.pttl, _ = e[1].(int64)
	switch d := e[2].(type) {
	case string:
		ks.str = d
	case []any:
		ks.list = make([]string, len(d))
		for i, x := range d {
			ks.list[i] = fmt.Sprint(x)
		}
	}
	return ks, nil
}

// classify tells the primitive at the name and reads its state.
func (s *nameSnapshot) classify() (*nameState, error) {
	for _, c := range companions {
		if k := s.comp[c.suffix]; k.exists() && k.typ != c.typ {
			return nil, &errForeign{name: s.name, key: k.key, typ: k.typ}
		}
	}
	has := func(suffixes ...string) bool {
		for _, x := range suffixes {
			if s.comp[x].exists() {
				return true
			}
		}
		return false
	}
	r := &nameState{Name: s.name, Key: s.base.key, ServerTimeMS: s.now, Holders: []holdInfo{}, Waiters: []waitInfo{}}
	shape, queued := s.queueShape()
	rw := has(layout.ReadersSuffix, layout.ReentriesSuffix) || (queued && shape == layout.RWMember)
	switch s.base.typ {
	case "none":
		switch {
		case rw:
			s.rwlock(r, nil)
		case has(layout.PermitsSuffix, layout.PermitCountsSuffix) || (queued && shape == layout.LeasedMember):
			s.leased(r, nil)
		case has(layout.GrantsSuffix):
			s.counting(r, nil)
		case has(layout.QueueSuffix, layout.DeadlineSuffix, layout.ElectionSuffix):
			// A lock's queue outlives its key for a while (waiters that gave up or died), and
			// so does an election's leader record, until the former leader's lease would end.
			s.lock(r, nil)
		default:
			return nil, &errNothing{name: s.name, key: s.base.key}
		}
		return r, nil
	case "string":
		lv, err := layout.ParseLockValue(s.base.str)
		if err != nil {
			return nil, s.foreign()
		}
		if rw {
			s.rwlock(r, &lv)
		} else {
			s.lock(r, &lv)
		}
		return r, nil
	case "hash":
		h, err := layout.ParseSemHash(s.base.pairs())
		if err != nil {
			return nil, s.foreign()
		}
		// Only the leased semaphore writes u, only the counting one a. A hash of t alone is a
		// leased semaphore given permits by AddPermits when t > 0 (a counting semaphore set to
		// more than 0 permits has a), a counting one set to 0 otherwise.
		leased := h.HasU || has(layout.PermitsSuffix, layout.PermitCountsSuffix) || (queued && shape == layout.LeasedMember)
		counting := h.HasA || has(layout.GrantsSuffix) || (queued && shape == layout.LockMember)
		if leased || (!counting && h.Total > 0) {
			s.leased(r, &h)
		} else {
			s.counting(r, &h)
		}
		return r, nil
	}
	return nil, s.foreign()
}

// foreign is the error for a base key that no primitive would hold.
func (s *nameSnapshot) foreign() error {
	return &errForeign{name: s.name, key: s.base.key, typ: s.base.typ}
}

// queueShape tells the kind of the queue's members by their shape, from the first member of
// the list (or of the deadlines) that has one: RWMember for a read-write lock's "<hold>
// <lease> s|x", LeasedMember for a leased semaphore's "<hold> <permits> <lease>", and
// LockMember for "<hold> <number>", which is a lock's or a counting semaphore's (the base key
// tells them apart). queued is false when no member has a known shape.
func (s *nameSnapshot) queueShape() (shape layout.MemberKind, queued bool) {
	var members []string
	members = append(members, s.comp[layout.QueueSuffix].list...)
	for _, e := range zsetEntries(s.comp[layout.DeadlineSuffix]) {
		members = append(members, e.member)
	}
	for _, m := range members {
		for _, k := range []layout.MemberKind{layout.RWMember, layout.LeasedMember, layout.LockMember} {
			if _, err := layout.ParseMember(k, m); err == nil {
				return k, true
			}
		}
	}
	return 0, false
}

// lock reads a reentrant or fair lock (or a read-write lock's writer alone); lv is nil when
// the key is missing.
func (s *nameSnapshot) lock(r *nameState, lv *layout.LockValue) {
	r.Kind = primLock
	if lv != nil {
		if h, ok := s.holderOf(*lv, "exclusive"); ok {
			r.Held = true
			r.Holders = append(r.Holders, h)
			// A leader record counts only while it names the lock's holder (elect_leader.lua).
			if e := s.comp[layout.ElectionSuffix].pairs(); e["h"] == h.Hold {
				t, _ := strconv.ParseInt(e["t"], 10, 64)
				r.Leader = &leaderInfo{Hold: h.Hold, Token: t, Value: e["v"]}
			}
		}
	}
	s.queue(r, layout.LockMember)
}

// holderOf returns the hold of a lock value, or false when its recorded lease end passed (the
// lock is free then, its key kept for the queue, as live_value in _lock_value.lua says).
func (s *nameSnapshot) holderOf(lv layout.LockValue, mode string) (holdInfo, bool) {
	h := holdInfo{Hold: lv.Hold, Client: layout.ClientOf(lv.Hold), Mode: mode, Count: lv.Count,
		LeaseRemainingMS: s.base.pttl}
	if lv.Token != 0 {
		h.Token = &lv.Token
	}
	if lv.LeaseEnd != 0 {
		h.LeaseRemainingMS = lv.LeaseEnd - s.now
		if h.LeaseRemainingMS <= 0 {
			return holdInfo{}, false
		}
	}
	return h, true
}

// queue reads the queue: the list q in arrival order, the live members being those whose
// deadline in d is still ahead, each parsed as a member of the given kind.
func (s *nameSnapshot) queue(r *nameState, kind layout.MemberKind) {
	deadlines := s.comp[layout.DeadlineSuffix].pairs()
	for _, m := range s.comp[layout.QueueSuffix].list {
		d, ok := layout.ParseScore(deadlines[m])
		if !ok || d <= s.now {
			r.StaleEntries++ // gave up (a ghost), or dead
			continue
		}
		x, err := layout.ParseMember(kind, m)
		if err != nil {
			r.StaleEntries++ // not of this primitive's shape: no waiter of it
			continue
		}
		w := waitInfo{Position: len(r.Waiters) + 1, Hold: x.Hold, Client: layout.ClientOf(x.Hold),
			Permits: x.Permits, LeaseMS: x.Lease, DeadlineInMS: d - s.now}
		switch kind {
		case layout.LockMember:
			w.Mode = "exclusive"
		case layout.RWMember:
			w.Mode = "write"
			if x.Shared {
				w.Mode = "read"
			}
		default:
			w.Mode = "acquire"
		}
		r.Waiters = append(r.Waiters, w)
	}
}

// rwlock reads a read-write lock; lv is its writer's value, nil when no writer holds.
func (s *nameSnapshot) rwlock(r *nameState, lv *layout.LockValue) {
	r.Kind = primRW
	if lv != nil {
		if h, ok := s.holderOf(*lv, "write"); ok {
			r.Held = true
			r.Holders = append(r.Holders, h)
		}
	}
	// rn: hold -> re-entries, a hold absent holding once.
	reentries := s.comp[layout.ReentriesSuffix].pairs()
	for _, e := range zsetEntries(s.comp[layout.ReadersSuffix]) {
		if e.score <= s.now {
			r.StaleEntries++
			continue
		}
		extra, _ := strconv.ParseInt(reentries[e.member], 10, 64)
		r.Held = true
		r.Holders = append(r.Holders, holdInfo{Hold: e.member, Client: layout.ClientOf(e.member), Mode: "read",
			Count: 1 + extra, LeaseRemainingMS: e.score - s.now})
	}
	s.queue(r, layout.RWMember)
}

// counting reads a counting semaphore; h is its hash (nil when missing).
func (s *nameSnapshot) counting(r *nameState, h *layout.SemHash) {
	r.Kind = primSemaphore
	p := &permitCounts{}
	if h != nil && h.Set {
		p.Set = true
		p.Total = h.Total
		p.Available = min(max(h.Avail, 0), p.Total) // bounded, whatever a foreign write left there
		p.Taken = p.Total - p.Available
	}
	r.Permits = p
	r.Held = p.Taken > 0
	s.queue(r, layout.CountingMember)
}

// leased reads a leased semaphore; h is its hash (nil when missing).
func (s *nameSnapshot) leased(r *nameState, h *layout.SemHash) {
	r.Kind = primLeased
	p := &permitCounts{}
	// pn: permit id -> permits, for permits holding more than one (absent: one).
	counts := s.comp[layout.PermitCountsSuffix].pairs()
	for _, e := range zsetEntries(s.comp[layout.PermitsSuffix]) {
		if e.score <= s.now {
			r.StaleEntries++
			continue
		}
		n := int64(1)
		if c, err := strconv.ParseInt(counts[e.member], 10, 64); err == nil {
			n = c
		}
		p.Taken += n
		r.Holders = append(r.Holders, holdInfo{Hold: e.member, Client: layout.ClientOf(e.member), Mode: "permit",
			Count: 1, Permits: n, LeaseRemainingMS: e.score - s.now})
	}
	if h != nil && h.Set {
		p.Set = true
		p.Total = h.Total
		p.Available = max(p.Total-p.Taken, 0)
	}
	r.Permits = p
	r.Held = p.Taken > 0
	s.queue(r, layout.LeasedMember)
}

// zentry is one zset entry.
type zentry struct {
	member string
	score  int64
}

// zsetEntries returns a zset's entries in score order, as ZRANGE read them.
func zsetEntries(k keySnap) []zentry {
	var out []zentry
	for i := 0; i+1 < len(k.list); i += 2 {
		if sc, ok := layout.ParseScore(k.list[i+1]); ok {
			out = append(out, zentry{member: k.list[i], score: sc})
		}
	}
	return out
}
