# dshfs — thin targets; everything real lives in Go code and .ci/run.
GO          ?= go
STATICCHECK ?= $(shell $(GO) env GOPATH)/bin/staticcheck
STATICCHECK_VERSION := v0.8.2
PKGS        := ./...
FUZZTIME    ?= 30s
BENCHTIME   ?= 1s
# make stress's fsx: operations per seed, and how many fresh seeds.
FSX_OPS     ?= 20000
FSX_SEEDS   ?= 2
# make stress's crash images: workloads whose index writes are cut and replayed.
CRASH_SEEDS ?= 100
# make install puts dshfs in $(PREFIX)/bin: /usr/local as root, else ~/.local.
PREFIX      ?= $(if $(filter 0,$(shell id -u)),/usr/local,$(HOME)/.local)
# What --version prints: the checkout's commit ("+dirty" if changed) and its
# time. Without git, dshfs falls back to Go's build information.
VERSION     ?= $(shell v=$$(git describe --tags --always --dirty=+dirty --abbrev=12 2>/dev/null) && \
                 echo "$$v ($$(TZ=UTC git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd))")
LDFLAGS     := $(if $(VERSION),-ldflags "-X 'main.version=$(VERSION)'")

# The S3 server the remote-history tests start (internal/s3test): versitygw,
# pinned, built into the user's cache rather than imported into the module.
VERSITYGW_VERSION := v1.8.0
VERSITYGW_DIR     := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/dshfs/versitygw-$(VERSITYGW_VERSION)

.PHONY: all build install test lint fuzz bench stress tools harness-check pjdfstest s3server xfstests

all: build test lint

build:
	$(GO) build $(LDFLAGS) -o bin/dshfs ./cmd/dshfs

# Builds straight into $(DESTDIR)$(PREFIX)/bin (the checkout is not touched)
# and says if that directory is not on PATH: the harnesses run a bare dshfs.
install:
	mkdir -p $(DESTDIR)$(PREFIX)/bin
	$(GO) build $(LDFLAGS) -o $(DESTDIR)$(PREFIX)/bin/dshfs ./cmd/dshfs
	@echo "installed $(DESTDIR)$(PREFIX)/bin/dshfs"
	@case ":$$PATH:" in *":$(PREFIX)/bin:"*) ;; *) echo "$(PREFIX)/bin is not on PATH: export PATH=\"$(PREFIX)/bin:\$$PATH\"";; esac

# The test command of docs/development.md and of CI: race detector on, every package;
# as root the mount is in kernel passthrough mode, so the mount's own tests and
# the shell-against-tools race run once more without it, and once more over
# FUSE io_uring (where the kernel offers it: Linux 6.14+, root; skipped,
# saying why, elsewhere).
test:
	$(GO) test -race -count=1 $(PKGS)
	DSHFS_TEST_PASSTHROUGH=off $(GO) test -race -count=1 ./fusefs
	DSHFS_TEST_PASSTHROUGH=off $(GO) test -race -count=1 -run 'Concurrent' ./integration
	DSHFS_TEST_TRANSPORT=uring $(GO) test -race -count=1 ./fusefs
	DSHFS_TEST_TRANSPORT=uring $(GO) test -race -count=1 -run 'Concurrent' ./integration

s3server:
	test -x $(VERSITYGW_DIR)/versitygw || (mkdir -p $(VERSITYGW_DIR) && \
	  GOFLAGS= GOBIN=$(VERSITYGW_DIR) $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION))

tools:
	test -x $(STATICCHECK) || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

lint: tools
	test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)

# Each fuzz target, as package:Target, run where it lives for FUZZTIME;
# crashers land in the package's testdata/fuzz as regression cases. go test
# -fuzz with a pattern that matches no target passes silently, so every
# target is looked up with -list first and one that is missing fails.
FUZZ_TARGETS := ./toolapi:FuzzApplyLiteralEdit ./toolapi:FuzzWindow ./toolapi:FuzzDecodeArgs \
                ./internal/quote:FuzzName

fuzz:
	@for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; name=$${t##*:}; \
	  $(GO) test $$pkg -list "^$$name\$$" | grep -qx "$$name" || \
	    { echo "make fuzz: no fuzz target $$name in $$pkg: update FUZZ_TARGETS in the Makefile" >&2; exit 1; }; \
	done
	@for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; name=$${t##*:}; \
	  echo "$(GO) test $$pkg -run '^$$' -fuzz '^$$name\$$' -fuzztime $(FUZZTIME)"; \
	  $(GO) test $$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) || exit 1; \
	done

# Benchmarks: compare against baselines measured in the same run (see BENCHMARKS.md).
bench:
	$(GO) test ./versionstore ./toolapi ./udiff -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME)
	$(GO) test ./unix-socket -run '^$$' -bench SocketLatency -benchtime 1x
	$(GO) test ./integration -run '^$$' -bench Mount -benchtime 1x -timeout 60m -v
	$(GO) test ./integration -run '^$$' -bench CaptureOverhead -benchtime 1x -timeout 30m -v
	$(GO) test ./integration -run '^$$' -bench MCP -benchtime 1x -timeout 10m -v
	$(GO) test ./integration -run '^$$' -bench Branch -benchtime 1x -timeout 30m -v

# 30 s of shell writers and tool actors on one mount, plus the in-process races,
# plus fsx: FSX_OPS random operations through a mount (and in a branch) from each of FSX_SEEDS
# fresh seeds (logged; DSHFS_FSX_SEED=S replays one, see fusefs/fsx_test.go),
# plus CRASH_SEEDS workloads cut at random points (versionstore/crashimage_linux_test.go).
stress:
	DSHFS_STRESS=30s $(GO) test -race -count=1 -run 'Concurrent' ./integration
	DSHFS_STRESS=30s DSHFS_TEST_PASSTHROUGH=off $(GO) test -race -count=1 -run 'Concurrent' ./integration
	$(GO) test -race -count=20 -run 'Concurrent' ./versionstore ./toolapi
	DSHFS_CRASH_SEEDS=$(CRASH_SEEDS) $(GO) test -count=1 -run '^TestCrashImages$$' -timeout 60m ./versionstore
	DSHFS_FSX_OPS=$(FSX_OPS) DSHFS_FSX_SEEDS=$(FSX_SEEDS) $(GO) test -race -count=1 -run '^TestFsx(Branch)?$$' -timeout 60m ./fusefs

# The real Claude Code, Codex and OpenCode (pinned in integration/testdata/harness,
# installed with npm into the user's cache) against a real mount, each model
# played by a local stand-in: what reaches the model is dshfs's text, not JSON.
# Needs node, npm and root or fusermount3; not part of make test.
harness-check:
	bash integration/testdata/harness/run.sh

# The pjdfstest POSIX suite (pjd/pjdfstest, built with autotools into
# ~/.cache/dshfs/pjdfstest) run with prove -r inside a dshfs mount made with
# --allow-other PJDFSTEST_OPTS, inside a branch of that mount with
# PJDFSTEST_MODE=branch, or in a plain directory with PJDFSTEST_MODE=native.
# PJDFSTEST_GIT names a local clone or URL. Root only;
# ~4 minutes; not part of make test. See integration/testdata/pjdfstest/run.sh.
PJDFSTEST_MODE ?= dshfs
PJDFSTEST_OPTS ?=
pjdfstest:
	bash integration/testdata/pjdfstest/run.sh $(PJDFSTEST_MODE) $(PJDFSTEST_OPTS)

# xfstests' generic quick group (FSTYP=fuse) against a dshfs mount and
# against libfuse's C loopback (passthrough_ll) in the same run: both
# tallies and the tests that fail only on dshfs (exit 1 if any). Builds
# xfstests (XFSTESTS_GIT, pinned XFSTESTS_COMMIT) and passthrough_ll
# (LIBFUSE_GIT, the installed libfuse3's tag) into ~/.cache/dshfs/xfstests;
# installs /sbin/mount.fuse.dshfs and /sbin/mount.fuse.passthrough_ll and
# the users fsgqa, fsgqa2 and 123456-fsgqa for the run only. Root only;
# 1-2 hours (XFSTESTS_PARALLEL=1 runs both at once, XFSTESTS_TESTS a list);
# not part of make test. See integration/testdata/xfstests/run.sh and
# docs/xfstests.md.
xfstests:
	bash integration/testdata/xfstests/run.sh
