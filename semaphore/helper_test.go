package semaphore_test

import "github.com/redaqs/aqs/internal/redistest"

// helperEnv names the role of a helper process (see process_test.go).
const helperEnv = "AQS_SEM_HELPER"

func runHelperProcess() int { return redistest.ExitBadEnv }
