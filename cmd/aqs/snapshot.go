package main

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs/internal/core"
)

// Reading a name.
//
// One read-only script (inspect.lua) returns, in one atomic snapshot, the server time and the
// type, TTL and contents of the name's base key and of every companion key any primitive
// keeps beside it (README.md, "Keys, Redis Cluster and Sentinel"). Which primitive is there is
// then told from which keys exist and what they hold: a string lock value, the read-write
// lock's keys, a semaphore's hash. The lock value is parsed as internal/scripts/_lock_value.lua
// parses it, and lease ends and deadlines, stored in server time, are turned into durations
// with the server time of the same snapshot, so the client's clock plays no part.
//
// Some primitives look alike in Redis. A reentrant lock and a fair lock hold the same value
// while nobody queues for the fair one, and so does a read-write lock's writer while no reader
// holds or waits and no writer waits: that is kind "lock". A reentrant lock whose waiters marked
// it, a fair lock with a queue (or the lease end its queue makes it record) and a read-write
// lock with readers or waiters are told apart.

//go:embed inspect.lua
var inspectLua string

var inspectScript = redis.NewScript(inspectLua)

// companions are the suffixes of the keys inspect.lua reads after the base key, and the type
// each must have: the fair lock's and the semaphores' queue (q, d), the read-write lock's
// readers, re-entries, waiting writers and readers-waiting flag (r, rn, ww, rw), the counting
// semaphore's grant records (g) and the leased semaphore's permits (p, pn).
var companions = []struct{ suffix, typ string }{
	{":q", "list"}, {":d", "zset"},
	{":r", "zset"}, {":rn", "hash"}, {":ww", "zset"}, {":rw", "string"},
	{":g", "zset"},
	{":p", "zset"}, {":pn", "hash"},
}

// rwWaiting is the read-write lock's marker value while writers wait and none holds (WAITING in
// internal/scripts/_rw.lua).
const rwWaiting = "00000000-0000-0000-0000-000000000000:0"

// semGate is GATE in internal/scripts/_csem.lua: the counting semaphore's available permits
// are kept that much lower while its queue may hold entries.
const semGate = 1 << 50

// The kinds of primitive, as the JSON's "kind" names them.
const (
	primLock      = "lock"           // reentrant, fair, or a read-write lock's writer alone
	primReentrant = "reentrant-lock" // a reentrant lock whose waiters marked it
	primFair      = "fair-lock"
	primRW        = "rwlock"
	primSemaphore = "semaphore" // counting
	primLeased    = "leased-semaphore"
)

// primTitle names a kind in text.
var primTitle = map[string]string{
	primLock:      "lock",
	primReentrant: "reentrant lock",
	primFair:      "fair lock",
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
// JSON object of this shape, which is stable: fields may be added, none is removed or changes
// meaning. Durations are milliseconds measured on the server's clock at the snapshot.
type nameState struct {
	// Name is the name given, Key its base key "<prefix>:{<escaped name>}".
	Name string `json:"name"`
	Key  string `json:"key"`
	// Kind is "lock" (a reentrant or fair lock, or a read-write lock's writer alone: they look
	// alike then), "reentrant-lock", "fair-lock", "rwlock", "semaphore" (counting) or
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
	// Waiters are the live waiters recorded in Redis: the fair lock's and the semaphores' queue
	// in the order they will be served, the read-write lock's waiting writers.
	Waiters []waitInfo `json:"waiters"`
	// UnlistedWaiters: some waiters are not recorded one by one (a reentrant lock's waiters
	// mark the lock; a read-write lock's waiting readers set a flag).
	UnlistedWaiters bool `json:"unlisted_waiters"`
	// StaleEntries counts entries whose time passed (dead waiters, queue entries of waiters
	// that gave up, readers and permits whose lease ran out): they are dropped the next time
	// the primitive is used there, and count for nothing meanwhile.
	StaleEntries int `json:"stale_entries"`
	// Permits is present for the semaphores only.
	Permits *permitCounts `json:"permits,omitempty"`
	// ReservedFor is set while a reentrant lock is free but reserved, for a moment, for the
	// waiters of this Client, whose turn it is (see internal/scripts/lock_release.lua).
	ReservedFor string `json:"reserved_for,omitempty"`
	// Turns are the Clients, other than the holder's, whose waiters wait for the reentrant
	// lock, in the order they will get their turns.
	Turns []string `json:"turns,omitempty"`
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
	// Position is 1 for the waiter served next, 2 for the one after...; absent (0) for a
	// read-write lock's waiting writers, which are not ordered: any of them may win.
	Position int `json:"position,omitempty"`
	// Hold is the waiter's hold id, Client its client id.
	Hold   string `json:"hold"`
	Client string `json:"client"`
	// Mode is "exclusive" (fair lock), "write" (read-write lock) or "acquire" (semaphores).
	Mode string `json:"mode"`
	// Permits is the number of permits asked for (semaphores only).
	Permits int64 `json:"permits,omitempty"`
	// LeaseMS is the lease the hold will have (fair lock, leased semaphore).
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
	rw := has(":r", ":rn", ":ww", ":rw")
	switch s.base.typ {
	case "none":
		switch {
		case rw:
			s.rwlock(r)
			return r, nil
		case has(":p", ":pn"):
			s.leased(r, nil)
			return r, nil
		case has(":g"):
			s.counting(r, nil)
			return r, nil
		case has(":q", ":d"):
			s.exclusive(r, nil)
			return r, nil
		}
		return nil, &errNothing{name: s.name, key: s.base.key}
	case "string":
		v := s.base.str
		if v != rwWaiting {
			lv, ok := parseLockValue(v)
			if !ok {
				return nil, s.foreign()
			}
			if !rw {
				s.exclusive(r, &lv)
				return r, nil
			}
		}
		s.rwlock(r)
		return r, nil
	case "hash":
		f := s.base.pairs()
		if !semaphoreHash(f) {
			return nil, s.foreign()
		}
		_, counting := f["a"]
		_, leased := f["u"]
		t, _ := strconv.ParseInt(f["t"], 10, 64)
		if leased || has(":p", ":pn") || (!counting && !has(":g") && t > 0) {
			s.leased(r, f)
			return r, nil
		}
		s.counting(r, f)
		return r, nil
	}
	return nil, s.foreign()
}

// foreign is the error for a base key that no primitive would hold.
func (s *nameSnapshot) foreign() error {
	return &errForeign{name: s.name, key: s.base.key, typ: s.base.typ}
}

// semaphoreHash reports whether a hash's fields are a semaphore's: t, a, u and q, integers.
func semaphoreHash(f map[string]string) bool {
	if _, ok := f["t"]; !ok {
		if _, ok := f["a"]; !ok {
			return false
		}
	}
	for k, v := range f {
		switch k {
		case "t", "a", "u", "q":
			if _, err := strconv.ParseInt(v, 10, 64); err != nil {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// lockValue is an exclusive lock's value, "<hold> [n<count>] [t<token>] [w] [r<Client ids>] [e<ms>]" (see
// internal/scripts/_lock_value.lua).
type lockValue struct {
	hold   string
	count  int64
	token  *int64
	marked bool     // w: a waiter marked the lock (reentrant), or its queue is not empty (fair)
	remote bool     // r: waiters of other Clients than the holder's wait (reentrant)
	turns  []string // their Clients, in the order of their turns
	// end (e) is the holder's lease end, server ms, which only the fair lock records (while
	// its queue is not empty).
	end *int64
}

// parseLockValue parses a lock value, or reports that aqs did not write it: its hold id must
// start with a UUID ('-' at byte 9, ':' at 37), as looks_ours checks.
func parseLockValue(v string) (lockValue, bool) {
	if len(v) < 38 || v[8] != '-' || v[36] != ':' {
		return lockValue{}, false
	}
	lv := lockValue{hold: v, count: 1}
	sp := strings.IndexByte(v[37:], ' ')
	if sp < 0 {
		return lv, true
	}
	lv.hold = v[:37+sp]
	for _, f := range strings.Fields(v[37+sp:]) {
		n, err := strconv.ParseInt(f[1:], 10, 64)
		switch {
		case f == "w":
			lv.marked = true
		case f[0] == 'r' && len(f)%36 == 1:
			lv.remote = true
			for i := 1; i < len(f); i += 36 {
				lv.turns = append(lv.turns, f[i:i+36])
			}
		case f[0] == 'n' && err == nil:
			lv.count = n
		case f[0] == 't' && err == nil:
			lv.token = &n
		case f[0] == 'e' && err == nil:
			lv.end = &n
		default:
			return lockValue{}, false
		}
	}
	return lv, true
}

// clientOfHold returns the client id of a hold id.
func clientOfHold(hold string) string {
	if len(hold) > 36 {
		return hold[:36]
	}
	return hold
}

// exclusive reads a reentrant or fair lock; lv is nil when the key is missing.
func (s *nameSnapshot) exclusive(r *nameState, lv *lockValue) {
	queue := s.comp[":q"].exists() || s.comp[":d"].exists()
	switch {
	case queue || (lv != nil && lv.end != nil):
		r.Kind = primFair
	case lv != nil && (lv.marked || lv.remote):
		r.Kind = primReentrant
		r.UnlistedWaiters = true
	default:
		r.Kind = primLock
	}
	if lv != nil {
		r.Turns = lv.turns
	}
	if lv != nil && strings.HasSuffix(lv.hold, ":r") {
		// A reservation, not a hold: the lock is free for that Client's waiters.
		r.ReservedFor = clientOfHold(lv.hold)
		lv = nil
	}
	if lv != nil {
		if h, ok := s.holderOf(*lv, "exclusive"); ok {
			r.Held = true
			r.Holders = append(r.Holders, h)
		}
	}
	s.queue(r, "exclusive")
}

// holderOf returns the hold of a lock value, or false when its recorded lease end passed (the
// lock is free then, its key kept for the queue, as live_value says).
func (s *nameSnapshot) holderOf(lv lockValue, mode string) (holdInfo, bool) {
	h := holdInfo{Hold: lv.hold, Client: clientOfHold(lv.hold), Mode: mode, Count: lv.count, Token: lv.token,
		LeaseRemainingMS: s.base.pttl}
	if lv.end != nil {
		h.LeaseRemainingMS = *lv.end - s.now
		if h.LeaseRemainingMS <= 0 {
			return holdInfo{}, false
		}
	}
	return h, true
}

// queue reads the fair lock's or a semaphore's queue: the list q in arrival order, the live
// ones being those whose deadline in d is still ahead.
func (s *nameSnapshot) queue(r *nameState, mode string) {
	deadlines := s.comp[":d"].pairs()
	pos := 0
	for _, m := range s.comp[":q"].list {
		d, ok := parseZScore(deadlines[m])
		if !ok || d <= s.now {
			r.StaleEntries++ // gave up (a ghost), or dead
			continue
		}
		w, ok := parseQueueMember(m, mode)
		if !ok {
			r.StaleEntries++
			continue
		}
		pos++
		w.Position = pos
		w.DeadlineInMS = d - s.now
		r.Waiters = append(r.Waiters, w)
	}
}

// parseQueueMember parses a queue member: "<hold> <lease ms>" (fair lock), "<hold> <n>" (counting
// semaphore) or "<hold> <n> <lease ms>" (leased semaphore).
func parseQueueMember(m, mode string) (waitInfo, bool) {
	f := strings.Fields(m)
	if len(f) < 2 || len(f) > 3 {
		return waitInfo{}, false
	}
	w := waitInfo{Hold: f[0], Client: clientOfHold(f[0]), Mode: mode}
	nums := make([]int64, len(f)-1)
	for i, x := range f[1:] {
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return waitInfo{}, false
		}
		nums[i] = n
	}
	switch {
	case mode == "exclusive":
		w.LeaseMS = nums[0]
	case len(nums) == 2:
		w.Permits, w.LeaseMS = nums[0], nums[1]
	default:
		w.Permits = nums[0]
	}
	return w, true
}

// rwlock reads a read-write lock.
func (s *nameSnapshot) rwlock(r *nameState) {
	r.Kind = primRW
	if s.base.typ == "string" && s.base.str != rwWaiting {
		lv, _ := parseLockValue(s.base.str) // checked by classify
		if h, ok := s.holderOf(lv, "write"); ok {
			r.Held = true
			r.Holders = append(r.Holders, h)
		}
	}
	reentries := s.comp[":rn"].pairs()
	for _, e := range zsetEntries(s.comp[":r"]) {
		if e.score <= s.now {
			r.StaleEntries++
			continue
		}
		extra, _ := strconv.ParseInt(reentries[e.member], 10, 64)
		r.Held = true
		r.Holders = append(r.Holders, holdInfo{Hold: e.member, Client: clientOfHold(e.member), Mode: "read",
			Count: 1 + extra, LeaseRemainingMS: e.score - s.now})
	}
	for _, e := range zsetEntries(s.comp[":ww"]) {
		if e.score <= s.now {
			r.StaleEntries++
			continue
		}
		r.Waiters = append(r.Waiters, waitInfo{Hold: e.member, Client: clientOfHold(e.member), Mode: "write",
			DeadlineInMS: e.score - s.now})
	}
	r.UnlistedWaiters = s.comp[":rw"].exists()
}

// counting reads a counting semaphore; f is its hash (nil when missing).
func (s *nameSnapshot) counting(r *nameState, f map[string]string) {
	r.Kind = primSemaphore
	p := &permitCounts{}
	if t, ok := f["t"]; ok {
		p.Set = true
		p.Total, _ = strconv.ParseInt(t, 10, 64)
		a, _ := strconv.ParseInt(f["a"], 10, 64)
		if _, gated := f["q"]; gated {
			a += semGate
		}
		p.Available = min(max(a, 0), p.Total) // bounded, whatever a foreign write left there
		p.Taken = p.Total - p.Available
	}
	r.Permits = p
	r.Held = p.Taken > 0
	s.queue(r, "acquire")
}

// leased reads a leased semaphore; f is its hash (nil when missing).
func (s *nameSnapshot) leased(r *nameState, f map[string]string) {
	r.Kind = primLeased
	p := &permitCounts{}
	counts := s.comp[":pn"].pairs()
	for _, e := range zsetEntries(s.comp[":p"]) {
		if e.score <= s.now {
			r.StaleEntries++
			continue
		}
		n := int64(1)
		if c, err := strconv.ParseInt(counts[e.member], 10, 64); err == nil {
			n = c
		}
		p.Taken += n
		r.Holders = append(r.Holders, holdInfo{Hold: e.member, Client: clientOfHold(e.member), Mode: "permit",
			Count: 1, Permits: n, LeaseRemainingMS: e.score - s.now})
	}
	if t, ok := f["t"]; ok {
		p.Set = true
		p.Total, _ = strconv.ParseInt(t, 10, 64)
		p.Available = max(p.Total-p.Taken, 0)
	}
	r.Permits = p
	r.Held = p.Taken > 0
	s.queue(r, "acquire")
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
		if sc, ok := parseZScore(k.list[i+1]); ok {
			out = append(out, zentry{member: k.list[i], score: sc})
		}
	}
	return out
}

// parseZScore reads a zset score (server ms, an integer that Redis may print as a double).
func parseZScore(s string) (int64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false
	}
	return int64(f), true
}
