// Package layout is the storage layout of aqs in Redis, in one Go place: the names of every
// primitive's keys and channels, the exclusive lock's value, the queue's members, the
// semaphores' hash. The Lua scripts (internal/scripts) write what this package describes; the
// library and the aqs command (inspect, force-unlock) read it only through here.
//
// Every key of a primitive is its base key "<prefix>:{<name>}" (internal/core/keys.go)
// followed by a suffix, all in the base key's hash slot:
//
//	primitive            base key           suffixes
//	reentrant, fair lock the lock value     :q :d (the queue), :w:<condition> and its :d
//	read-write lock      the writer's value :r (readers) :rn (their re-entries) :q :d,
//	                                        :w:<condition> and its :d
//	counting semaphore   its hash           :q :d :g (grants not yet collected), and a call's
//	                                        own :a:<id> (an attempt's outcome) :b:<hold> (a
//	                                        waiter's grant) :r:<id> (a release's outcome)
//	leased semaphore     its hash           :q :d :p (permits) :pn (their counts) :pr (permits
//	                                        released by id), and a release's own :x:<id>
//	count-down latch     its count          none (its channel: LatchChannel); a count-down's
//	                                        own :x:<id>
//
// The functions below give each primitive's keys in the order of its scripts' KEYS.
package layout

import (
	"fmt"
	"strconv"
	"strings"
)

// Key suffixes.
const (
	// QueueSuffix is the wait queue's list of members, in arrival order (every primitive that
	// queues).
	QueueSuffix = ":q"
	// DeadlineSuffix is the wait queue's zset of members scored by their liveness deadline
	// (server ms): a member without a score is a ghost, one whose deadline passed is dead.
	DeadlineSuffix = ":d"
	// ReadersSuffix is the read-write lock's zset of read holds scored by their lease end.
	ReadersSuffix = ":r"
	// ReentriesSuffix is the read-write lock's hash of read holds re-entered: hold -> the
	// re-entries (a hold absent holds once).
	ReentriesSuffix = ":rn"
	// GrantsSuffix is the counting semaphore's zset of queue members granted permits, scored by
	// the waiter's liveness deadline at the grant: the fallback for a lost grant message.
	GrantsSuffix = ":g"
	// PermitsSuffix is the leased semaphore's zset of permits scored by their lease end.
	PermitsSuffix = ":p"
	// PermitCountsSuffix is the leased semaphore's hash of permits holding more than one
	// permit: id -> permits.
	PermitCountsSuffix = ":pn"
	// ReleasedPermitsSuffix is the leased semaphore's zset of permits released by their id
	// (Leased.ReleaseID), scored by the lease end each had: until then its holder learns that
	// it was released, not lost.
	ReleasedPermitsSuffix = ":pr"
	// OnceSuffix, followed by a call id, names a key of one release call's own, "<base>:x:<id>",
	// where a leased semaphore's partial release keeps its reply for 10s, so that a second
	// run of the same call (after a lost reply) answers as the first did
	// (internal/scripts/_once.lua).
	OnceSuffix = ":x:"
	// AttemptSuffix, ReleaseSuffix and WaiterSuffix, followed by a call id or a hold id, name
	// the counting semaphore's keys of one call's own: an attempt's outcome, a release's
	// outcome (each kept for a while, so that a run again answers as the first did), and a
	// waiter's grant record.
	AttemptSuffix = ":a:"
	ReleaseSuffix = ":r:"
	WaiterSuffix  = ":b:"
	// ConditionSuffix, followed by a condition's escaped name (see ConditionKeys), names a
	// condition's waiters (a list), beside the lock's keys.
	ConditionSuffix = ":w:"
	// ElectionSuffix names an election's leader record, beside the lock's keys: a hash of the
	// leader's hold id, fencing token, revision and value (internal/scripts/elect_lead.lua).
	// The same name is the channel its changes are published on.
	ElectionSuffix = ":e"
)

// LockKeys returns the exclusive lock's keys: the lock value, the queue list, the deadlines.
func LockKeys(base string) []string {
	return []string{base, base + QueueSuffix, base + DeadlineSuffix}
}

// RWKeys returns the read-write lock's keys: the writer's value, the readers, their
// re-entries, the queue list, the deadlines.
func RWKeys(base string) []string {
	return []string{base, base + ReadersSuffix, base + ReentriesSuffix, base + QueueSuffix, base + DeadlineSuffix}
}

// CountingKeys returns the counting semaphore's keys: its hash, the queue list, the
// deadlines, the grants.
func CountingKeys(base string) []string {
	return []string{base, base + QueueSuffix, base + DeadlineSuffix, base + GrantsSuffix}
}

// LeasedKeys returns the leased semaphore's keys: its hash, the queue list, the deadlines,
// the permits, their counts.
func LeasedKeys(base string) []string {
	return []string{base, base + QueueSuffix, base + DeadlineSuffix, base + PermitsSuffix, base + PermitCountsSuffix}
}

// ConditionKeys returns the keys of the condition named name of the lock at base: its
// waiters' list and their deadlines. ':' and '%' in the name are escaped, so that no
// condition's list is another's deadlines.
func ConditionKeys(base, name string) []string {
	esc := strings.NewReplacer("%", "%25", ":", "%3A").Replace(name)
	w := base + ConditionSuffix + esc
	return []string{w, w + DeadlineSuffix}
}

// GrantChannel is the channel on which a Client's waiters of the primitive at base hear of
// grants: "<base>:c:<Client id>". A message is the granted hold ids separated by spaces, or
// "*": every waiter looks again.
func GrantChannel(base, client string) string { return base + ":c:" + client }

// LatchChannel is the channel on which the waiters of the latch at base, of every Client,
// hear that its count reached 0: "<base>:c", one message "*" (every waiter looks again).
func LatchChannel(base string) string { return base + ":c" }

// Hold ids.
//
// A hold id is "<Client id>:<sequence>": the Client id a UUID (36 bytes), the sequence a
// decimal number, fresh for every hold of the Client. A leased permit's id is its hold id.

// LooksLikeHold reports whether s has the shape of a hold id: '-' at byte 9 and ':' at byte 37
// after the 36 bytes of a UUID, as the scripts' looks_ours checks before they write over a
// value.
func LooksLikeHold(s string) bool { return len(s) > 37 && s[8] == '-' && s[36] == ':' }

// HoldsIn returns the hold id of an exclusive lock's value (see ParseLockValue), or none for
// a value that is not one.
func HoldsIn(v string) []string {
	hold, _, _ := strings.Cut(v, " ")
	if !LooksLikeHold(hold) {
		return nil
	}
	return []string{hold}
}

// HoldID returns the hold id of a Client's seq-th hold.
func HoldID(client string, seq uint64) string { return client + ":" + strconv.FormatUint(seq, 10) }

// ClientOf returns the Client id of a hold id.
func ClientOf(hold string) string {
	if len(hold) > 36 {
		return hold[:36]
	}
	return hold
}

// LockValue is an exclusive lock's value (the reentrant and fair locks' key, the read-write
// lock's writer): "<hold> [n<count>] [t<token>] [w] [e<ms>]", the fields in any order but e
// last (internal/scripts/_lock_value.lua).
type LockValue struct {
	// Hold is the holder's hold id.
	Hold string
	// Count is the hold count: 1, plus one per re-entry not yet released.
	Count int64
	// Token is the fencing token, 0 until one was assigned.
	Token int64
	// Queued (w) marks a lock whose queue may hold waiters: its release hands it off.
	Queued bool
	// LeaseEnd (e) is the holder's lease end in server ms, recorded while the queue is not
	// empty (the key then outlives the lease, kept for the queue's head); 0 when not recorded:
	// the key's TTL is the lease.
	LeaseEnd int64
}

// ParseLockValue parses a lock value; it fails for a value aqs did not write.
func ParseLockValue(v string) (LockValue, error) {
	if !LooksLikeHold(v) {
		return LockValue{}, fmt.Errorf("not an aqs lock value: %q", v)
	}
	lv := LockValue{Hold: v, Count: 1}
	sp := strings.IndexByte(v[37:], ' ')
	if sp < 0 {
		return lv, nil
	}
	lv.Hold = v[:37+sp]
	for _, f := range strings.Fields(v[37+sp:]) {
		if f == "w" {
			lv.Queued = true
			continue
		}
		n, err := strconv.ParseInt(f[1:], 10, 64)
		switch {
		case err != nil:
			return LockValue{}, fmt.Errorf("not an aqs lock value: %q", v)
		case f[0] == 'n':
			lv.Count = n
		case f[0] == 't':
			lv.Token = n
		case f[0] == 'e':
			lv.LeaseEnd = n
		default:
			return LockValue{}, fmt.Errorf("not an aqs lock value: %q", v)
		}
	}
	return lv, nil
}

// MemberKind is the kind of a queue's members, which depends on the primitive.
type MemberKind int

// The kinds of queue members.
const (
	// LockMember: "<hold id> <lease ms>" (the reentrant and fair locks).
	LockMember MemberKind = iota
	// RWMember: "<hold id> <lease ms> s" (a reader) or "... x" (a writer).
	RWMember
	// CountingMember: "<hold id> <permits>".
	CountingMember
	// LeasedMember: "<hold id> <permits> <lease ms>".
	LeasedMember
)

// Member is a queue member.
type Member struct {
	Hold string
	// Lease is the lease in ms the waiter will have (0 for a counting semaphore's).
	Lease int64
	// Permits is the permits a semaphore's waiter asks for (0 for a lock's).
	Permits int64
	// Shared: a read-write lock's reader (false for a writer, and for every other kind).
	Shared bool
}

// LockMemberOf returns the lock queue member of hold, with the lease it will have.
func LockMemberOf(hold string, lease int64) string {
	return hold + " " + strconv.FormatInt(lease, 10)
}

// LockMemberMs is LockMemberOf with the lease in ms as the scripts take it.
func LockMemberMs(hold, lease string) string { return hold + " " + lease }

// WriterMemberOf returns the read-write lock's queue member of a writer's hold, with the
// lease (ms, as the scripts take it) it will have.
func WriterMemberOf(hold, lease string) string { return hold + " " + lease + " x" }

// CountingMemberOf returns the counting semaphore's queue member of hold, asking n permits.
func CountingMemberOf(hold string, n int) string { return hold + " " + strconv.Itoa(n) }

// ParseMember parses a queue member of the given kind.
func ParseMember(kind MemberKind, m string) (Member, error) {
	f := strings.Fields(m)
	want := map[MemberKind]int{LockMember: 2, RWMember: 3, CountingMember: 2, LeasedMember: 3}[kind]
	if len(f) != want || !LooksLikeHold(f[0]) {
		return Member{}, fmt.Errorf("not a queue member: %q", m)
	}
	x := Member{Hold: f[0]}
	num := func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }
	var err error
	switch kind {
	case LockMember:
		x.Lease, err = num(f[1])
	case RWMember:
		x.Lease, err = num(f[1])
		switch f[2] {
		case "s":
			x.Shared = true
		case "x":
		default:
			err = fmt.Errorf("mode %q", f[2])
		}
	case CountingMember:
		x.Permits, err = num(f[1])
	case LeasedMember:
		x.Permits, err = num(f[1])
		if err == nil {
			x.Lease, err = num(f[2])
		}
	}
	if err != nil {
		return Member{}, fmt.Errorf("not a queue member: %q: %w", m, err)
	}
	return x, nil
}

// Gate is GATE of internal/scripts/_csem.lua: while waiters may be queued (the q field set),
// the counting semaphore's available permits are kept that much lower in its a field.
const Gate = 1 << 50

// SemHash is a semaphore's hash: t the total permits (absent: never set), a the available
// permits (counting, less Gate while q is set), u the permits leased out (leased, counting
// permits whose lease ran out but were not yet dropped), q set while the queue may hold
// entries.
type SemHash struct {
	Set    bool
	Total  int64
	Avail  int64 // counting: a with the gate taken off
	Leased int64 // leased: u
	Queued bool
	// HasA and HasU report whether the a and the u field are there: only a counting
	// semaphore writes a, only a leased one u. A hash of t alone may be either: a counting
	// semaphore set to 0 permits, or a leased one given permits by AddPermits and never
	// acquired since.
	HasA, HasU bool
}

// ParseSemHash parses a semaphore's hash fields; it fails for a hash aqs did not write.
func ParseSemHash(f map[string]string) (SemHash, error) {
	var h SemHash
	if _, ok := f["t"]; !ok {
		if _, ok := f["a"]; !ok {
			return h, fmt.Errorf("not a semaphore's hash")
		}
	}
	for k, v := range f {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return SemHash{}, fmt.Errorf("not a semaphore's hash: field %s = %q", k, v)
		}
		switch k {
		case "t":
			h.Set, h.Total = true, n
		case "a":
			h.Avail, h.HasA = n, true
		case "u":
			h.Leased, h.HasU = n, true
		case "q":
			h.Queued = true
		default:
			return SemHash{}, fmt.Errorf("not a semaphore's hash: field %s", k)
		}
	}
	if h.Queued {
		h.Avail += Gate
	}
	return h, nil
}

// ParseScore reads a zset score: server ms, an integer that Redis may print as a double.
func ParseScore(s string) (int64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false
	}
	return int64(f), true
}
