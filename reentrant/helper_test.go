package reentrant_test

const helperEnv = "AQS_REENTRANT_HELPER"

func runHelperProcess() int { return 0 }
