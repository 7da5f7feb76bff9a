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
