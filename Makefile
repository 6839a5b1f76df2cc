# froog edge: the Makefile is the interface for people and CI.
GO ?= go
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# REDOCLY lints the OpenAPI document (npm; pinned like staticcheck).
REDOCLY := @redocly/cli@2.77.0
# FUZZTIME is how long `make fuzz` runs each fuzz target.
FUZZTIME ?= 20s
# make test runs two lines of packages side by side (most packages are
# CPU-bound, and two is this machine's cores): the in-process packages,
# one at a time, LONG_PKGS first, in one; in the other e2e (the longest)
# without its VM tests (VM_TESTS, by name: its tinyGuest fails a test
# that boots a VM under another name), then AFTER_E2E. Then, once both have
# ended, the VM phase, so that CPU-heavy VM boots (TCG: minutes of a core
# each) never share the machine with the other tests: an OS image's boot
# beside cmd/froogd ran past its budget (issue #34), and on a machine
# whose TCG is slower (Zen 1: a Debian boot 130 CPU-seconds, not 33) the
# in-process line ran beside the VM phase for 20 minutes and failed
# tests of leases and certificates. e2e's tests mostly
# wait on the processes they start, and so do many of the in-process
# packages': both lines pass -parallel E2E_PARALLEL. The VM phase has
# two lanes: the OS image's packages (OS_PKGS: Debian's boots, the
# longest), both at once (one after the other, deploy's single boot ran
# alone for the phase's last minute on a core and a half: the phase took
# 394 s and 754 CPU-seconds, 364 and 720 at once), and beside them the
# test guest's (TINYVM_PKGS) then e2e's
# VM_TESTS, two at a time (GOMAXPROCS: one test's guest idles while its
# froogd works). One lane after the other left a core idle for minutes
# (the test guest's suite keeps one core busy, the package's install in a
# guest often less): 18 % of the run's CPU time idle, 8 % with two lanes.
# Side by side a TCG guest does less per CPU-second (hostctl/qemu took
# 251 CPU-seconds instead of 137), but the idle core was worth more. The
# driver tells a slow boot from a stalled one by its progress, so boots
# that share the cores take longer, not fail.
# Every package runs, and make test fails if any did.
# -trimpath (go vet's too): the build cache's entries do not depend on
# the checkout's folder, so a fresh clone (CI's) compiles only what
# changed (go vet without it compiles every package of the module again
# in each new clone: 25 s).
OS_PKGS := ./hostctl/qemu/ostest/ ./deploy/
VM_PKGS := $(OS_PKGS) ./hostctl/qemu/...
TINYVM_PKGS = $(filter-out $(shell $(GO) list $(OS_PKGS)),$(shell $(GO) list ./hostctl/qemu/...))
# LONG_PKGS start the in-process line, longest first. AFTER_E2E run in
# e2e's line once e2e has ended, AFTER_E2E_P of them at a time: packages
# that mostly wait (on timers, the processes and servers they start)
# rather than compute: one at a time, they would leave a core idle.
LONG_PKGS := ./api/ ./deploy/image/ ./store/embedded/ ./api/contract/
AFTER_E2E := ./store/pg/ ./edge/ ./desktop/ ./guest/ ./certs/ ./hostctl/ ./hostctl/local/ ./tunnel/
AFTER_E2E_P := 4
VM_TESTS := ^TestQEMU
# SHORT_FLAGS are make test-short's own: the race detector doubles its
# CPU, and make test runs every test with it.
SHORT_FLAGS ?=
E2E_PARALLEL ?= 8
TEST_FLAGS = -race -trimpath -count=1 -timeout $(TEST_TIMEOUT)
# E2E_FLAGS: e2e without the race detector. What it tests runs in the
# froogd and froog binaries it builds, built as shipped (e2e/main_test.go
# says why; FROOG_E2E_RACE=1 builds them with it); its own code is the
# harness, whose race-checked build took 60 of e2e's 475 CPU-seconds.
E2E_FLAGS = -trimpath -count=1 -timeout $(TEST_TIMEOUT)
# TEST_PKGS: the in-process line, every package but e2e, AFTER_E2E and
# VM_PKGS.
TEST_PKGS = $(filter-out $(shell $(GO) list $(VM_PKGS) ./e2e/ $(AFTER_E2E)),$(shell $(GO) list ./...))
# RACE_DEPS: every package the race-checked tests import (but the test
# packages and commands), which make test compiles first, beside go vet,
# with both cores: the in-process line's -p 1 holds its compiles to one
# at a time too, and on a new machine (no build cache) it would compile
# for minutes before its first package ran.
RACE_DEPS = {{if and .GoFiles (not .ForTest) (ne .Name "main")}}{{.ImportPath}}{{end}}
# GORACE: a race-built binary sleeps a second as it exits (the race
# detector's atexit_sleep_ms, for races in what still runs then): every
# test package, and every run of a race-built test binary the tests start
# (froog-desktop's start and stop, and its supervisor, in guest): guest
# took 71 s with it, 22 without.
GORACE ?= atexit_sleep_ms=0
export GORACE
# TEST_TIMEOUT bounds one package's run: VM boots under TCG on a busy
# 2-core machine take minutes, and go test's default of 10 is too tight.
TEST_TIMEOUT ?= 30m
# BENCH_PKGS: the packages with Go benchmarks (building every package's
# test binary for -bench took a minute of make bench).
BENCH_PKGS = $(shell grep -rl --include='*_test.go' '^func Benchmark' . | xargs -n1 dirname | sort -u)

# VERSION is the release's (deploy/version.sh: the tag, or a snapshot
# named by the commit); make build stamps it and the commit into froogd.
VERSION ?= $(shell deploy/version.sh)
LDFLAGS := -X froog.tech/froog/internal/version.stamped=$(VERSION) -X froog.tech/froog/internal/version.revision=$(shell git rev-parse HEAD)

.PHONY: help build run test test-short bench lint fuzz package image generate

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

build: ## build bin/froogd and the froog CLI beside it, bin/froog
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/froogd ./cmd/froogd
	$(GO) build -o bin/froog ./cmd/froog

package: ## build the Debian package dist/froogd_VERSION_amd64.deb (offline, with debhelper)
	VERSION=$(VERSION) GO=$(GO) ./deploy/package.sh

image: ## build the edge/API container image, an OCI layout tarball in dist/ (no Docker daemon)
	VERSION=$(VERSION) GO=$(GO) ./deploy/image.sh

run: build ## start froog on this machine: embedded store, no setup
	./bin/froogd dev

test: ## install what the tests need, then run every test (with the race detector but for e2e's harness): the VM boots in a phase of their own, after the rest
	./deploy/checktree.sh
	./deploy/testdeps.sh
	$(GO) vet -trimpath -tags bench ./... & vet=$$!; \
	$(GO) list -test -deps -f '$(RACE_DEPS)' ./... | xargs $(GO) build -race -trimpath; built=$$?; \
	wait $$vet && exit $$built
	rc=0; \
	$(GO) test $(TEST_FLAGS) -p 1 -parallel $(E2E_PARALLEL) $(LONG_PKGS) $(TEST_PKGS) & inprocess=$$!; \
	$(GO) test $(E2E_FLAGS) -parallel $(E2E_PARALLEL) -skip '$(VM_TESTS)' ./e2e/ || rc=1; \
	$(GO) test $(TEST_FLAGS) -p $(AFTER_E2E_P) -parallel $(E2E_PARALLEL) $(AFTER_E2E) || rc=1; \
	wait $$inprocess || rc=1; \
	echo "make test: the VM phase"; \
	$(GO) test $(TEST_FLAGS) -p 2 $(OS_PKGS) & osimage=$$!; \
	$(GO) test $(TEST_FLAGS) -p 1 $(TINYVM_PKGS) || rc=1; \
	$(GO) test $(E2E_FLAGS) -run '$(VM_TESTS)' ./e2e/ || rc=1; \
	wait $$osimage || rc=1; \
	exit $$rc

test-short: ## the short tier: go test -short, in-process only (no VM, no browser, no froogd binary run), without the race detector (SHORT_FLAGS=-race adds it); a few minutes
	$(GO) test -short -count=1 $(SHORT_FLAGS) ./...

bench: ## run the benchmarks into .bench/ (the edge against nginx, Caddy, frp and chisel, auto-start, desktops, the wall, files), then write docs/performance.md
	./deploy/testdeps.sh --bench
	FROOG_BENCH=1 $(GO) test -tags bench -count=1 -run '^TestEdgeBench$$' -v -timeout 30m .
	FROOG_BENCH=1 FROOG_LOAD=full $(GO) test -tags bench -count=1 -run '^(TestLoad|TestDesktopBench|TestDesktopSoundBench|TestWallBench|TestAutoStartBench|TestFilesBenchQEMU)$$' -v -timeout 40m ./e2e
	FROOG_BENCH=1 $(GO) test -tags bench -count=1 -run '^TestFilesBench$$' -v -timeout 10m ./api
	FROOG_BENCH=1 $(GO) test -tags bench -count=1 -run '^TestInboxBench$$' -v -timeout 10m ./edge
	$(GO) test -tags bench -run '^$$' -bench . -benchtime 500ms -benchmem $(BENCH_PKGS)
	FROOG_BENCH=1 $(GO) test -tags bench -count=1 -run '^TestPerformanceReport$$' .

fuzz: ## run every fuzz target for FUZZTIME each (20s), one at a time; failing inputs land in testdata/fuzz
	FUZZTIME=$(FUZZTIME) GO=$(GO) ./deploy/fuzz.sh

generate: ## regenerate the Go SDK, froog/api.gen.go and models.gen.go, from api/openapi.json (froog's TestGeneratedUpToDate checks it)
	$(GO) generate ./froog/

lint: ## no build outputs in git, gofmt, go vet, staticcheck, and Redocly's lint of api/openapi.json (no warnings)
	./deploy/checktree.sh
	@test -z "$$(gofmt -l .)" || { echo "gofmt would change:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	@out=$$(npx --yes $(REDOCLY) lint api/openapi.json 2>&1); rc=$$?; echo "$$out"; \
	  test $$rc -eq 0 || exit $$rc; \
	  ! echo "$$out" | grep -q 'You have [0-9]* warning' || { echo "redocly: a warning fails the lint"; exit 1; }
