# mcpd: make test is what CI runs.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/cyberos/mcpd/pkg/version.Version=$(VERSION)

.PHONY: all build test gates unit citus-e2e consumers vet fmt-check lint tidy-check darwin completions docs schema bench fuzz clean

# golangci-lint, pinned; installed on first use into bin/tools (the Go build
# cache makes a reinstall after make clean quick). Settings: .golangci.yml.
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT         := bin/tools/golangci-lint-$(GOLANGCI_LINT_VERSION)

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/mcpd ./cmd/mcpd
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/mcpctl ./cmd/mcpctl

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

$(GOLANGCI_LINT):
	@mkdir -p bin/tools
	GOBIN=$(CURDIR)/bin/tools/install $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv bin/tools/install/golangci-lint $@ && rmdir bin/tools/install

lint: $(GOLANGCI_LINT)
	$(GOLANGCI_LINT) run ./...

# go.mod and go.sum are what go mod tidy makes of them.
tidy-check:
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }

# goreleaser ships darwin builds; the code behind build tags must compile.
darwin:
	GOOS=darwin GOARCH=arm64 $(GO) build ./...

# The gates first (cheap, and they fail fast), then every test.
test: gates unit citus-e2e consumers

gates: fmt-check tidy-check vet lint darwin

# cmd/mcpd's tests (real mcpd processes at 200 ms intervals: replicas,
# kills, load) and pkg/simulate's (a real monitor at 100 ms) run after the
# other packages, not beside the Citus clusters of pkg/pgstore and the
# bench harness: on 2 cores a unit run with them side by side had
# heartbeats answered or sent late enough to fail them.
E2E_PKG   := github.com/cyberos/mcpd/cmd/mcpd
UNIT_LATE := $(E2E_PKG) github.com/cyberos/mcpd/pkg/simulate
unit:
	$(GO) test -race -count=1 -timeout 15m $$($(GO) list ./... | grep -vxF $(foreach p,$(UNIT_LATE),-e $(p)))
	$(GO) test -race -count=1 -timeout 15m $(UNIT_LATE)

# The packages whose tests run mcpd against databases of pgtest.NewDB, once
# more with those databases on a Citus coordinator and two workers
# (MCPD_TEST_ENGINE=citus): mcpd on Citus passes what it passes on
# PostgreSQL. pkg/pgstore runs its conformance suite on Citus in unit.
# cmd/mcpd's tests (replicas, load, kills) run alone and one at a time,
# then the others side by side: on 2 cores, with other tests beside them,
# three PostgreSQL nodes per cluster ran late enough to fail tests that a
# quieter machine passes. cmd/mcpd's tests run the mcpd binary, built
# without the race detector in either run, so -race would instrument
# mostly their clients (and the clock-skew test's in-process replica;
# unit runs them all with -race): without it they took 274 s instead of
# 333 s here. The other four run mcpd's code in the test process, with
# -race.
CITUS_E2E := ./pkg/alert ./pkg/board ./pkg/daemon ./pkg/mcpserve
citus-e2e:
	MCPD_TEST_ENGINE=citus $(GO) test -count=1 -parallel 1 -timeout 15m $(E2E_PKG)
	MCPD_TEST_ENGINE=citus $(GO) test -race -count=1 -timeout 15m $(CITUS_E2E)

# ToolHive's own registry client reads mcpd (docs/consumers.md): a module of
# its own, so that ToolHive's dependencies stay out of mcpd's go.mod and
# binaries. It builds mcpd's packages from this tree (a replace), so -mod=mod
# lets a dependency that mcpd gained reach its go.sum without a failure; run
# go mod tidy there to keep the change.
CONSUMERS := internal/consumers/toolhive
consumers:
	cd $(CONSUMERS) && $(GO) vet -mod=mod ./... && $(GO) test -mod=mod -race -count=1 -timeout 15m ./...

clean:
	rm -rf bin dist

# Generated from mcpctl's and mcpd's command trees and committed; the tests of
# pkg/cli and pkg/daemon fail when they are stale.
completions:
	$(GO) run ./cmd/mcpctl-docs -completions completions

docs:
	rm -f docs/cli/*.md docs/man/*.1
	$(GO) run ./cmd/mcpctl-docs -markdown docs/cli -man docs/man

# migrations/schema.sql: the schema after every migration, dumped with
# pg_dump --schema-only from a migrated test database and normalised; the
# migrations package's tests fail when it is stale.
schema:
	$(GO) test -count=1 -run '^TestSchemaSQLUpToDate$$' ./migrations -args -write-schema

# Local release build (no publishing) into dist/; needs goreleaser v2:
#   go install github.com/goreleaser/goreleaser/v2@v2.17.0
.PHONY: release-snapshot
release-snapshot:
	goreleaser release --snapshot --clean --skip=publish

# The benchmark harness of docs/performance.md: starts its own durable
# PostgreSQL (and etcd when installed), builds and starts mcpd against it,
# prints the results table and writes it as JSON to BENCH_OUT; about 12
# minutes on 2 cores. Smaller runs: make bench BENCH_FLAGS='-tenants 100 -duration 5s'.
# The fleet loads (-fleet) run with their anchors, a plain net/http server
# and pgbench at the fleets' rates, in the same run (-anchors=false skips);
# the closed loop with the floor (net/http doing a held heartbeat's work).
BENCH_OUT      ?= docs/bench-latest.json
BENCH_PROFILES ?= /tmp/mcpd-bench-profiles
BENCH_FLAGS    ?=
bench:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/mcpd ./cmd/mcpd
	$(GO) run ./cmd/mcpd-bench -mcpd bin/mcpd -out $(BENCH_OUT) -profile-dir $(BENCH_PROFILES) $(BENCH_FLAGS)

# Fuzz every target for FUZZTIME each (make fuzz FUZZTIME=1m); make test runs
# their seed corpora only.
FUZZTIME ?= 30s
FUZZ_TARGETS := \
	pkg/api:FuzzPostBodies pkg/api:FuzzRegisterFields pkg/api:FuzzRegisterBody pkg/api:FuzzListQueries \
	pkg/api:FuzzAuthorization pkg/api:FuzzDecodeCursor pkg/api:FuzzCursorRoundTrip \
	pkg/auth:FuzzVerify pkg/auth:FuzzObjectMembers

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$name ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) ./$$pkg; \
	done

# The long variants of the reliability tests (docs/reliability.md): 5,000
# servers for minutes, longer outages, more servers. Their figures are the
# lines with FIGURE.
.PHONY: reliability
reliability:
	MCPD_LONG=1 $(GO) test -count=1 -timeout 60m -v \
		-run 'Test(DatabaseOutage|SIGKILL|ReplicaKilled|SlowDatabase|ClockSkewed|LoadWithoutFalseAlarms|HostileInput|NoSecretInLogs)' \
		./cmd/mcpd/
