# Targets for developers and CI. The tests and the demo need redis-server on PATH (on Debian:
# apt-get install -y redis-server); without it they fail with a message that says so.

GO ?= go
# Flags for the demo, e.g. make demo DEMO_FLAGS="--workers 5 --redis localhost:6379".
DEMO_FLAGS ?=

.PHONY: test demo bench vet

test:
	$(GO) test -race -count=1 -timeout 9m ./...
	cd otel && $(GO) test -race -count=1 ./...
	# Every benchmark once, briefly, so that none of them rots (figures: make bench).
	AQS_BENCH_SPAN=100ms $(GO) test -count=1 -run '^$$' -bench . -benchtime 1x ./...

demo:
	$(GO) run ./cmd/aqs demo $(DEMO_FLAGS)

bench:
	$(GO) test -run '^$$' -bench 'Floor|Uncontended|Depth' -benchtime 5000x ./reentrant/ ./fair/
	$(GO) test -run '^$$' -bench . -benchtime 1x ./rwlock/
	$(GO) test -run '^$$' -bench 'Contended' -benchtime 1x ./fair/
	$(GO) test -run '^$$' -bench 'VsFloor' -benchtime 3000x ./semaphore/
	$(GO) test -run '^$$' -bench 'Contended' -benchtime 1x ./semaphore/
	$(GO) test -run '^$$' -bench 'Pipe' -benchtime 1x ./internal/core/

# aqs against redsync, redislock and rueidislock (about 3 minutes; see BENCHMARKS.md). bench/ is
# a module of its own, so users of the library never download those libraries.
.PHONY: bench-compare
bench-compare:
	cd bench && $(GO) run ./cmd/compare

vet:
	$(GO) vet ./...

# The fault tests in full (chaos/): more rounds and longer loads than the short version that
# make test runs; each test logs a SUMMARY line with its figures.
.PHONY: chaos
chaos:
	AQS_CHAOS=full $(GO) test -race -count=1 -timeout 15m -v ./chaos/

# The failover test with more runs (internal/failovertest; make test runs one per mode): the
# figures of the README's "Failover and replica sync".
.PHONY: failover
failover:
	AQS_FAILOVER_RUNS=10 $(GO) test -race -count=1 -run TestFailover -v -timeout 30m ./internal/failovertest/
