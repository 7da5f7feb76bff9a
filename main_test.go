package aqs_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// TestMain starts the test binary's shared redis-server and hands its address to the
// examples in REDIS_URL, where an application's own environment would give its Redis, so that
// the examples' code is the code a user copies.
func TestMain(m *testing.M) {
	addr, err := redistest.SingleAddr()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("REDIS_URL", "redis://"+addr)
	os.Exit(redistest.Main(m))
}
