"""Shared fixtures and the test tiers.

Tiers (a marker each, given by the test's top folder under tests/; `make test-<tier>` runs one):
``unit`` (tests/unit: pure logic, no servers), ``integration`` (tests/integration, tests/contract,
tests/k8s: real nats-server and gRPC servers on loopback, service processes, offline kubectl renders),
``system`` (tests/system: whole-system launches, the browser, the k8s local start) and ``heavy``
(tests/heavy: faults under running loops). tests/vllm_backend has none: `make test-vllm` runs it in
its own virtualenv.

Fixtures: a real nats-server per test (temp store, free port), a connected bus, and what is
expensive to build, built once per pytest session in ``test_cache`` (the tiny judge, the tiny
config's cold start).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import yaml

from services.common.bus import EventBus
from services.common.config import ConsumerConfig, FamilyConfig, NatsConfig, RewardServiceConfig, SandboxConfig
from services.common.nats_server import NatsServer, free_port
from services.common.service_start import Started, start_service, wait_serving
from services.env.families.code_family import CodeFamily

TIER_OF_FOLDER = {"unit": "unit", "integration": "integration", "contract": "integration", "k8s": "integration",
                  "system": "system", "heavy": "heavy", "vllm_backend": None}
"""The tier of each top folder under tests/ (None: outside the tiers)."""
TIERS = ("unit", "integration", "system", "heavy")

_TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test with its folder's tier; a tier marker that disagrees with the folder is an error."""
    for item in items:
        try:
            folder = item.path.resolve().relative_to(_TESTS).parts[0]
        except ValueError:  # a test outside tests/ (none today)
            continue
        if folder not in TIER_OF_FOLDER:
            raise pytest.UsageError(f"{item.nodeid}: tests/{folder} has no tier; add it to TIER_OF_FOLDER")
        tier = TIER_OF_FOLDER[folder]
        declared = {m.name for m in item.iter_markers() if m.name in TIERS}
        if declared - {tier}:
            raise pytest.UsageError(f"{item.nodeid} is marked {sorted(declared)} but lies in tests/{folder} "
                                    f"(tier {tier}): move the file or fix the marker")
        if tier is not None:
            item.add_marker(tier)


@pytest.fixture(scope="session")
def test_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the session's expensive builds go, each under a key of what it depends on (as the product's
    cold-start and model caches key theirs). ``RLA_TEST_CACHE=DIR`` keeps them across sessions (a
    developer re-running one tier); unset, every session builds afresh."""
    kept = os.environ.get("RLA_TEST_CACHE")
    if kept:
        Path(kept).mkdir(parents=True, exist_ok=True)
        return Path(kept).resolve()
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="session")
def tiny_judge_dir(test_cache: Path) -> Path:
    """A randomly initialised tiny judge for 4x4 FrozenLake (hidden size 64, prompts cut at 200 chars,
    fields at 120) saved as a Hugging Face directory; built once per session (`tiny_judge` keys it by
    those settings)."""
    from services.offline.bootstrap import tiny_judge

    cfg = RewardServiceConfig(model={"cache_dir": str(test_cache / "models"), "tiny": {"hidden_size": 64}},
                              prompt_chars=200, field_chars=120)
    return Path(tiny_judge(cfg, FamilyConfig(type="gym_text", knobs={"size": 4, "hole_prob": 0.2})))


@pytest.fixture(scope="session")
def tiny_cold(test_cache: Path) -> Path:
    """The cold-start cache of the tiny run config (`tests.launch.TINY`): its policy and judge SFT run
    once per session, whichever system or heavy test starts first (entries keyed by config hash)."""
    return test_cache / "coldstart"


@pytest.fixture(scope="module")
def code_family() -> Iterator[CodeFamily]:
    """The `code` family with its sandbox started (2 workers, 2 s per run); needs root."""
    family = CodeFamily(SandboxConfig(workers=2, timeout_s=2.0))
    family.start()
    yield family
    family.close()


@pytest.fixture
def nats_server() -> Iterator[NatsServer]:
    """A `nats-server -js` on a free loopback port with a temporary JetStream store."""
    with NatsServer() as server:
        yield server


@pytest.fixture
def consumer_config() -> ConsumerConfig:
    """Fast delivery settings for tests (short ack wait and backoff)."""
    return ConsumerConfig(ack_wait_s=1.0, max_deliveries=3, backoff_s=[0.05], fetch_batch=8, fetch_timeout_s=0.3)


@pytest.fixture
async def bus(nats_server: NatsServer, consumer_config: ConsumerConfig) -> AsyncIterator[EventBus]:
    """An `EventBus` connected to ``nats_server`` with every project stream created."""
    b = await EventBus.connect(NatsConfig(url=nats_server.url), consumer_config, name="test")
    await b.ensure_streams()
    yield b
    await b.close()


class ServiceProcess:
    """A service started as `python -m services.<name> --config FILE`, as Kubernetes runs it."""

    def __init__(self, name: str, config_path: Path, address: str) -> None:
        self.name = name
        self.config_path = config_path
        self.address = address
        self.log_path = config_path.with_suffix(f".{name}.log")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 90.0) -> "ServiceProcess":
        """Start the process and wait until its gRPC health check says SERVING."""
        self.proc = start_service(self.name, self.config_path, self.log_path)
        wait_serving([Started(self.name, self.address, self.proc, self.log_path)], timeout_s)
        return self

    def log_messages(self) -> list[dict]:
        """The JSON log lines written so far."""
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line.startswith("{")]

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Send ``sig`` and wait; returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=30)


@pytest.fixture
def spawn_service(tmp_path: Path, nats_server: NatsServer) -> Iterator:
    """Factory: ``spawn_service("env", "yaml text")`` starts a service against ``nats_server``."""
    started: list[ServiceProcess] = []

    def spawn(name: str, config_yaml: str, start: bool = True) -> ServiceProcess:
        port = free_port()
        path = tmp_path / f"{name}-{len(started)}.yaml"
        data = yaml.safe_load(config_yaml) or {}
        data.setdefault("nats", {})["url"] = nats_server.url
        data.setdefault(name, {}).setdefault("server", {})["grpc_port"] = port
        path.write_text(yaml.safe_dump(data))
        svc = ServiceProcess(name, path, f"127.0.0.1:{port}")
        started.append(svc)
        return svc.start() if start else svc

    yield spawn
    for svc in started:
        if svc.proc is not None and svc.proc.poll() is None:
            svc.proc.kill()
            svc.proc.wait()
