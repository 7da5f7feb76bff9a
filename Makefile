# Targets for developers and CI. make demo and make test first install what they need when it
# is missing (scripts/deps: redis-server, and the C compiler for -race, from Debian's packages).
# The other targets expect it installed; without redis-server the tests fail with a message
# that says so.

GO ?= go
# The server binary the tests (and the demo's throwaway server) run: redis-server from PATH when
# unset, else this redis-server-compatible binary, e.g. make test
# REDIS_SERVER=/path/to/valkey-server. A path is made absolute here, because go test runs each
# package's tests in that package's directory; a name without a slash is looked up on PATH.
ifneq ($(REDIS_SERVER),)
override REDIS_SERVER := $(if $(findstring /,$(REDIS_SERVER)),$(abspath $(REDIS_SERVER)),$(REDIS_SERVER))
export REDIS_SERVER
endif
# Flags for the demo, e.g. make demo DEMO_FLAGS="--workers 5 --redis localhost:6379".
DEMO_FLAGS ?=

.PHONY: deps test demo bench vet

deps:
	./scripts/deps

test: deps
	$(GO) test -race -count=1 -timeout 9m ./...
	cd otel && $(GO) test -race -count=1 ./...
	# Every benchmark once, briefly, so that none of them rots (figures: make bench).
	AQS_BENCH_SPAN=100ms $(GO) test -count=1 -run '^$$' -bench . -benchtime 1x ./...

demo: deps
	$(GO) run ./cmd/aqs demo $(DEMO_FLAGS)

bench:
	$(GO) test -run '^$$' -bench 'Floor|Uncontended|Depth' -benchtime 5000x ./reentrant/ ./fair/
	$(GO) test -run '^$$' -bench . -benchtime 1x ./rwlock/
	$(GO) test -run '^$$' -bench 'Contended|Condition' -benchtime 1x ./fair/
	$(GO) test -run '^$$' -bench 'VsFloor' -benchtime 3000x ./semaphore/
	$(GO) test -run '^$$' -bench 'Contended' -benchtime 1x ./semaphore/
	$(GO) test -run '^$$' -bench 'Pipe' -benchtime 1x ./internal/core/

# aqs against redsync, redislock and rueidislock, and against the fair peers etcd and ZooKeeper,
# whose servers it first installs when missing (scripts/deps --bench); over 10 minutes: writes
# BENCHMARKS.md and its charts (bench/charts/*.svg). bench/ is a module of its own, so users of
# the library never download those libraries.
.PHONY: bench-compare
bench-compare:
	./scripts/deps --bench
	cd bench && $(GO) run ./cmd/compare -o ../BENCHMARKS.md

vet:
	$(GO) vet ./...
	$(GO) vet -tags callgrind ./internal/scripts/

# The Lua hot paths' cost in Redis instructions per cycle, under valgrind's callgrind (a few
# minutes; needs valgrind): the figures a change to the scripts is judged by.
.PHONY: callgrind
callgrind:
	$(GO) test -tags callgrind -count=1 -run TestHotPathInstructions -v ./internal/scripts/

# The fault tests in full (chaos/): more rounds and longer loads than the short version that
# make test runs; each test logs a SUMMARY line with its figures.
.PHONY: chaos
chaos:
	AQS_CHAOS=full $(GO) test -race -count=1 -timeout 15m -v ./chaos/

# The failover tests with more runs (internal/failovertest; make test runs one per case): the
# figures behind docs/DESIGN.md's "Failover times", per primitive, policy and
# kind of failover (p50 and max over 10 runs).
.PHONY: failover
failover:
	AQS_FAILOVER_RUNS=10 $(GO) test -race -count=1 -run 'TestFailover|TestEveryPrimitiveServesAgain' -v -timeout 60m ./internal/failovertest/

# The election's process tests with more runs (election/process_test.go; make test runs 3):
# the takeover after a leader's kill -9 and after its SIGSTOP, p50 and max over 20 runs, and
# a longer run of the witness of at most one leader, each in a SUMMARY line.
.PHONY: election-failover
election-failover:
	AQS_ELECTION_RUNS=20 $(GO) test -race -count=1 -run 'TestKilledLeader|TestStoppedLeader|TestAtMostOneLeader' -v -timeout 15m ./election/
