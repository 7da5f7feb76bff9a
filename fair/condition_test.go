package fair_test

import (
	"testing"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/fair"
	"github.com/redaqs/aqs/internal/condtest"
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
