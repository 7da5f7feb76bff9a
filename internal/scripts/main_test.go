package scripts_test

import (
	"os"
	"testing"

	"github.com/redaqs/aqs/internal/testkit/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
