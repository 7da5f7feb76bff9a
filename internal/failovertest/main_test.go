package failovertest

import (
	"os"
	"testing"

	"github.com/redaqs/aqs/internal/testkit/redistest"
)

func TestMain(m *testing.M) {
	if os.Getenv(envServeChild) != "" {
		os.Exit(serveChild()) // a process of TestEveryPrimitiveServesAgainAfterAFailover's load
	}
	os.Exit(redistest.Main(m))
}
