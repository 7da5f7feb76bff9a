package failovertest

import (
	"os"
	"testing"

	"github.com/redaqs/aqs/internal/testkit/redistest"
)

// TestMain runs the tests, or, in a child process, a process of
// TestEveryPrimitiveServesAgainAfterAFailover's load (serve_child_test.go).
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
