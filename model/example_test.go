package model_test

import (
	"fmt"

	"github.com/redaqs/aqs/model"
)

// A hold is re-entered, outlives a rival's attempt, and expires exactly at
// its deadline; the next hold gets a larger fencing token.
func ExampleReentrant() {
	var m model.Reentrant

	r := m.Acquire(0, "alice", 100)
	fmt.Println("alice:", r.Acquired, r.Token, r.Count)

	r = m.Acquire(10, "alice", 100) // re-entry: same token, lease now ends at 110
	fmt.Println("alice again:", r.Acquired, r.Token, r.Count)

	r = m.Acquire(60, "bob", 100)
	fmt.Println("bob at 60:", r.Acquired, "remaining", r.Remaining)

	r = m.Acquire(110, "bob", 100) // alice's lease ends at 110
	fmt.Println("bob at 110:", r.Acquired, r.Token, r.Count)

	_, err := m.Release(120, "alice")
	fmt.Println("alice releases:", err)
	// Output:
	// alice: true 1 1
	// alice again: true 1 2
	// bob at 60: false remaining 50
	// bob at 110: true 2 1
	// alice releases: model: lock not held by this owner
}

// Waiters are served in arrival order: a newcomer cannot pass them even when
// the lock is free, a release hands the lock straight to the live head (for
// no longer than that waiter would stay live without renewing it), the head
// of a free lock takes it with its next heartbeat, and a waiter that stops
// heartbeating loses its place.
func ExampleFair() {
	m := model.NewFair(50) // waiters stay live 50 ms after their last attempt or heartbeat

	fmt.Println("alice:", m.Attempt(0, "alice", 100, true).Acquired)
	fmt.Println("bob:", m.Attempt(1, "bob", 100, true).Queued)
	fmt.Println("carol:", m.Attempt(2, "carol", 100, true).Queued)
	fmt.Println("queue:", m.Queue(2))

	m.Heartbeat(40, "carol") // live until 90; bob sends no heartbeat: dead at 51
	r, _ := m.Release(60, "alice", true)
	fmt.Println("alice releases, granted:", r.Granted)
	ms, _ := m.RemainingLease(60)
	fmt.Println("carol's grant lasts until her liveness deadline:", ms, "ms")
	m.Renew(61, "carol", 100) // carol has the grant: she extends it to her lease
	ms, _ = m.RemainingLease(61)
	fmt.Println("carol renews:", ms, "ms")

	m.Attempt(61, "bob", 100, true) // bob is back, behind everyone
	fmt.Println("queue:", m.Queue(61))

	m.Heartbeat(100, "bob")
	m.Heartbeat(140, "bob")

	// carol's lease ends at 161 with nobody releasing: the free lock is
	// reserved for bob, the head, and a newcomer is refused.
	fmt.Println("dave at 161:", m.Attempt(161, "dave", 100, false).Acquired)
	// bob's next heartbeat takes the lock: he is no longer waiting.
	fmt.Println("bob heartbeats at 170, still waiting:", m.Heartbeat(170, "bob"))
	holder, _, _ := m.Holder(170)
	fmt.Println("holder:", holder)
	// Output:
	// alice: true
	// bob: true
	// carol: true
	// queue: [bob carol]
	// alice releases, granted: carol
	// carol's grant lasts until her liveness deadline: 30 ms
	// carol renews: 100 ms
	// queue: [bob]
	// dave at 161: false
	// bob heartbeats at 170, still waiting: false
	// holder: bob
}

// Readers and writers wait in one queue and are served in arrival order:
// the readers at the head together, a writer alone once the readers ahead
// of it are gone; in the fair mode a newcomer queues behind them.
func ExampleRW() {
	m := model.NewRW(50, true) // fair; waiters stay live 50 ms after their last attempt or heartbeat

	fmt.Println("r1:", m.ReadAttempt(0, "r1", 100, "", true).Status)
	fmt.Println("w1:", m.WriteAttempt(1, "w1", 100, true).Status)
	fmt.Println("r2:", m.ReadAttempt(2, "r2", 100, "", true).Status) // behind w1, though only readers hold

	r, _ := m.ReadRelease(10, "r1", true)
	fmt.Println("r1 releases, granted:", r.Grants)
	ms, _ := m.RemainingWrite(10)
	fmt.Println("w1's grant lasts until its liveness deadline:", ms, "ms")

	r, _ = m.WriteRelease(20, "w1", true)
	fmt.Println("w1 releases, granted:", r.Grants)
	// Output:
	// r1: acquired
	// w1: queued
	// r2: queued
	// r1 releases, granted: [w1]
	// w1's grant lasts until its liveness deadline: 41 ms
	// w1 releases, granted: [r2]
}

// Requests for several names join every queue they need at once, in one arrival order: a
// request for {a, b} reserves b, which is free, while it waits for a, so a later request for
// b alone waits behind it; the release of a completes it.
func ExampleMulti() {
	m := model.NewMulti(50) // waiters stay live 50 ms after their last attempt or heartbeat

	alice := model.MultiRequest{Hold: "alice", Names: []string{"a"}, Lease: 100, Fair: true}
	cart := model.MultiRequest{Hold: "cart", Names: []string{"a", "b"}, Lease: 100}
	bob := model.MultiRequest{Hold: "bob", Names: []string{"b"}, Lease: 100, Fair: true}
	fmt.Println("alice:", m.Attempt(0, alice, true).Status)
	fmt.Println("cart:", m.Attempt(1, cart, true).Status)
	fmt.Println("b is reserved for:", m.Owner(1, "b"))
	fmt.Println("bob:", m.Attempt(2, bob, true).Status)

	r, _ := m.Release(10, "alice")
	fmt.Println("alice releases, granted:", r.Granted)
	fmt.Println("cart:", m.AttemptAgain(11, "cart", true).Status)
	r, _ = m.Release(20, "cart")
	fmt.Println("cart releases, granted:", r.Granted)
	// Output:
	// alice: acquired
	// cart: queued
	// b is reserved for: cart
	// bob: queued
	// alice releases, granted: [cart]
	// cart: acquired
	// cart releases, granted: [bob]
}
