# mcpd: make test is what CI runs.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/cyberos/mcpd/pkg/version.Version=$(VERSION)

.PHONY: all build test vet fmt-check completions docs bench fuzz clean

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/mcpd ./cmd/mcpd
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/mcpctl ./cmd/mcpctl

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

test: fmt-check vet
	$(GO) test -race -count=1 -timeout 15m ./...

clean:
	rm -rf bin dist

# Generated from mcpctl's command tree and committed; pkg/cli's tests fail
# when they are stale.
completions:
	$(GO) run ./pkg/cli/gen -completions completions

docs:
	rm -f docs/cli/*.md docs/man/*.1
	$(GO) run ./pkg/cli/gen -markdown docs/cli -man docs/man

# Local release build (no publishing) into dist/; needs goreleaser v2:
#   go install github.com/goreleaser/goreleaser/v2@v2.17.0
.PHONY: release-snapshot
release-snapshot:
	goreleaser release --snapshot --clean --skip=publish
