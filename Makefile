# The one task runner: the README's commands and CI (.ci/run) call these targets.
#   make serve   install everything, start memoryd on ~/.memoryd, 127.0.0.1:50051
#   make test    install everything, then lint, type-check, buf lint/breaking, and run every test
#   make bench   the benchmarks in bench/ (figures for the README's performance section)
#   make probes  the long hostile-client probes: 36,000 fuzzed calls, 20 SIGKILL rounds
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TOOLS := $(CURDIR)/.tools
BUF_VERSION := 1.75.0
GRPCURL_VERSION := v1.9.3
GHZ_VERSION := v0.120.0
PY_SOURCES := server scripts tests bench clients/python/memoryd_client/__init__.py

.PHONY: serve test install tools lint typecheck buf-lint buf-breaking protos pytest bench probes clean

serve: install
	$(BIN)/memoryd serve

test: install tools lint typecheck buf-lint buf-breaking pytest

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --constraint constraints.txt --editable '.[dev]'
	touch $@

tools: $(TOOLS)/bin/grpcurl $(TOOLS)/bin/buf

$(TOOLS)/bin/grpcurl:
	GOBIN=$(TOOLS)/bin GOFLAGS=-mod=mod go install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)

$(TOOLS)/bin/buf:
	mkdir -p $(TOOLS)/npm $(TOOLS)/bin
	npm install --silent --no-audit --no-fund --prefix $(TOOLS)/npm @bufbuild/buf@$(BUF_VERSION)
	ln -sf $(TOOLS)/npm/node_modules/.bin/buf $@

lint: install
	$(BIN)/ruff check $(PY_SOURCES)
	$(BIN)/ruff format --check $(PY_SOURCES)

typecheck: install
	$(BIN)/mypy

buf-lint: tools
	$(TOOLS)/bin/buf lint

# Against the last commit: a change to protos/ in the working tree must not break the contract.
buf-breaking: tools
	if git rev-parse --verify --quiet HEAD >/dev/null; then \
		$(TOOLS)/bin/buf breaking --against '.git#ref=HEAD'; fi

# Regenerate clients/python/memoryd_client/v1 from protos/ (the tests fail when it is stale).
protos: install
	$(BIN)/python scripts/gen_protos.py

pytest: install tools
	PATH="$(TOOLS)/bin:$$PATH" $(BIN)/pytest

# Benchmarks (scripts, not tests): ghz drives the gRPC load. Figures go in the README.
bench: install $(TOOLS)/bin/ghz
	$(BIN)/python bench/run_all.py

# The probes that `make test` runs briefly (tests/test_rpc_fuzz.py, tests/test_crash_recovery.py),
# run long: every unary RPC fuzzed 1,500 times, then 20 rounds of SIGKILL under mixed load.
probes: install
	$(BIN)/python scripts/fuzz_rpcs.py --examples 1500
	$(BIN)/python scripts/crash_rounds.py --rounds 20

$(TOOLS)/bin/ghz:
	GOBIN=$(TOOLS)/bin GOFLAGS=-mod=mod go install github.com/bojand/ghz/cmd/ghz@$(GHZ_VERSION)

clean:
	rm -rf $(VENV) $(TOOLS) .mypy_cache .ruff_cache .pytest_cache .hypothesis
