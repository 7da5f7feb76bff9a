package fair_test

import (
	"testing"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/testkit/condtest"
	"github.com/redis/go-redis/v9"
)

// condKind is the fair lock for the conditions' suite.
var condKind = condtest.Kind{
	New: func(c *aqs.Client, name string) (condtest.Lock, error) { return fair.New(c, name) },
	Cond: func(l condtest.Lock, name string) (condtest.Cond, error) {
		return l.(*fair.Lock).NewCondition(name)
	},
	Deadlines: func(l condtest.Lock) string { return l.(*fair.Lock).Keys()[2] },
}

func TestCondition(t *testing.T) { condtest.Run(t, condKind) }

// newCond returns the condition "c" of l.
func newCond(t testing.TB, l *fair.Lock) *fair.Condition {
	t.Helper()
	c, err := l.NewCondition("c")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// assertCondFree checks that the lock is free and nobody waits, on the lock or the condition.
func assertCondFree(t testing.TB, rdb redis.UniversalClient, l *fair.Lock, c *fair.Condition) {
	t.Helper()
	condtest.Free(t, condKind, rdb, l, c)
}

// condWaiting waits until n waiters wait on the condition c.
func condWaiting(t testing.TB, rdb redis.UniversalClient, c *fair.Condition, n int64) {
	t.Helper()
	condtest.Waiting(t, rdb, c, n)
}
