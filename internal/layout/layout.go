// Package layout is the storage layout of aqs in Redis, parsed in one Go place: the names of
// every primitive's keys and channels, the exclusive lock's value, the queue's members. The
// Lua scripts (internal/scripts) write what this package reads; the library and the aqs
// command (inspect, force-unlock) read it only through here.
package layout

// Key suffixes: every key of a primitive is its base key "<prefix>:{<name>}" (see
// internal/core/keys.go) followed by one of these, all in the base key's slot.
const (
	// QueueSuffix is the wait queue's list (every primitive that queues).
	QueueSuffix = ":q"
	// DeadlineSuffix is the wait queue's zset of liveness deadlines.
	DeadlineSuffix = ":d"
	// GrantsSuffix is the counting semaphore's zset of grants not yet collected.
	GrantsSuffix = ":g"
)

// GrantChannel is the channel on which a Client's waiters of the primitive at base hear of
// grants: "<base>:c:<Client id>", whose messages are hold ids separated by spaces (or "*",
// wake every waiter to look again).
func GrantChannel(base, client string) string { return base + ":c:" + client }
