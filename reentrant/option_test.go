package reentrant_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redaqs/aqs"
	"github.com/redaqs/aqs/internal/testkit/redistest"
	"github.com/redaqs/aqs/reentrant"
)

func TestOptionsAreCheckedAtNew(t *testing.T) {
	c := newClient(t, redistest.Single(t).Client(t))
	name := redistest.Name(t)
	for what, opts := range map[string][]reentrant.Option{
		"zero":                    {{}},
		"WithWaiterTimeout, zero": {reentrant.WithWaiterTimeout(time.Second), {}},
		"WithWaiterTimeout(29ms)": {reentrant.WithWaiterTimeout(29 * time.Millisecond)},
		"WithWaiterTimeout(-1s)":  {reentrant.WithWaiterTimeout(-time.Second)},
	} {
		l, err := reentrant.New(c, name, opts...)
		assert.ErrorIs(t, err, aqs.ErrInvalidArgument, "New(%s)", what)
		assert.Nil(t, l, "New(%s)", what)
	}
	l, err := reentrant.New(c, name, reentrant.WithWaiterTimeout(30*time.Millisecond))
	require.NoError(t, err)
	held, err := l.Lock(context.Background())
	require.NoError(t, err)
	require.NoError(t, l.Unlock(held))
}
