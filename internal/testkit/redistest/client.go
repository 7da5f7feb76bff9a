package redistest

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redaqs/aqs"
)

// NewClient returns an aqs Client on rdb with opts, closed at the end of the test: the one
// helper every package's tests use for it.
func NewClient(t testing.TB, rdb redis.UniversalClient, opts ...aqs.Option) *aqs.Client {
	t.Helper()
	c, err := aqs.New(context.Background(), rdb, opts...)
	if err != nil {
		t.Fatalf("aqs.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
