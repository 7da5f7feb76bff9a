package rwlock_test

const helperEnv = "AQS_RWLOCK_HELPER"

func runHelperProcess() int { return 2 }
