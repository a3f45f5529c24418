# dshfs — thin targets; everything real lives in Go code and .ci/run.
GO          ?= go
STATICCHECK ?= $(shell $(GO) env GOPATH)/bin/staticcheck
STATICCHECK_VERSION := v0.8.2
PKGS        := ./...
FUZZTIME    ?= 30s
BENCHTIME   ?= 1s

.PHONY: all build test lint fuzz bench stress tools

all: build test lint

build:
	$(GO) build -o bin/dshfs ./cmd/dshfs

# The test command of the README and of CI: race detector on, every package.
test:
	$(GO) test -race -count=1 $(PKGS)

tools:
	test -x $(STATICCHECK) || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

lint: tools
	test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)

# Run each fuzz target for FUZZTIME; crashers land in testdata/fuzz as regression cases.
fuzz:
	$(GO) test ./versionstore -run '^$$' -fuzz '^FuzzApplyLiteralEdit$$' -fuzztime $(FUZZTIME)
	$(GO) test ./toolapi -run '^$$' -fuzz '^FuzzWindow$$' -fuzztime $(FUZZTIME)
	$(GO) test ./unix-socket -run '^$$' -fuzz '^FuzzDecodeToolResult$$' -fuzztime $(FUZZTIME)
	$(GO) test ./unix-socket -run '^$$' -fuzz '^FuzzDecodeToolRequest$$' -fuzztime $(FUZZTIME)
	$(GO) test ./unix-socket -run '^$$' -fuzz '^FuzzAppendString$$' -fuzztime $(FUZZTIME)
	$(GO) test ./unix-socket -run '^$$' -fuzz '^FuzzReadHead$$' -fuzztime $(FUZZTIME)

# Benchmarks: compare against baselines measured in the same run (see BENCHMARKS.md).
bench:
	$(GO) test ./versionstore ./toolapi ./udiff -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME)
	$(GO) test ./unix-socket -run '^$$' -bench SocketLatency -benchtime 1x
	$(GO) test ./integration -run '^$$' -bench Overhead -benchtime 1x -timeout 30m -v

# 30 s of shell writers and tool actors on one mount, plus the in-process races.
stress:
	DSHFS_STRESS=30s $(GO) test -race -count=1 -run 'Concurrent' ./integration
	$(GO) test -race -count=20 -run 'Concurrent' ./versionstore ./toolapi
