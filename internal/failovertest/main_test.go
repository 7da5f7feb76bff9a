package failovertest

import (
	"os"
	"testing"

	"github.com/redaqs/aqs/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
