"""Real RewardModel servers for the contract suite, started once per module and parametrized.

* ``llm``: the reward service with a tiny random judge (the default backend);
* ``oracle``: the reward service voting the environment's labels;
* ``openai``: the reward service whose judge is THIS project's OpenAI-compatible endpoint — a
  policy service (role rollout) serving the same tiny model on a fixed HTTP port.

Each is a `python -m services.<name>` process against one nats-server, as Kubernetes runs them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from services.common.nats_server import NatsServer, free_port
from tests.conftest import ServiceProcess

VOTES = 3
"""The default m of every server under test (``reward.votes``)."""


@dataclass(frozen=True)
class RewardModelUnderTest:
    """What the contract needs to know about a RewardModel implementation."""

    address: str
    """gRPC host:port."""
    default_votes: int
    """Votes per step when a request says 0."""
    deterministic_oracle: bool
    """Votes are the oracle labels (only the oracle backend)."""


@pytest.fixture(scope="module")
def contract_nats() -> Iterator[NatsServer]:
    with NatsServer() as server:
        yield server


@pytest.fixture(scope="module")
def contract_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("contract")


@pytest.fixture(scope="module")
def tiny_model(tiny_judge_dir: Path) -> Path:
    """The session's tiny random judge (tests/conftest.py), served by the llm and openai backends."""
    return tiny_judge_dir


def _start(name: str, section: dict, nats: NatsServer, where: Path) -> ServiceProcess:
    port = free_port()
    section.setdefault("server", {})["grpc_port"] = port
    path = where / f"{name}-{port}.yaml"
    path.write_text(yaml.safe_dump({"nats": {"url": nats.url}, name: section}))
    return ServiceProcess(name, path, f"127.0.0.1:{port}").start()


def _stop(*procs: ServiceProcess) -> None:
    for p in procs:
        if p.proc is not None and p.proc.poll() is None:
            p.stop()


def _reward(backend: str, nats: NatsServer, where: Path, model: dict) -> ServiceProcess:
    section = {"role": "judge", "backend": backend, "votes": VOTES, "max_new_tokens": 8, "prompt_chars": 200,
               "field_chars": 120, "model": model}
    return _start("reward", section, nats, where)


@pytest.fixture(scope="module", params=["llm", "oracle", "openai"])
def reward_model(request: pytest.FixtureRequest, contract_nats: NatsServer, contract_dir: Path
                 ) -> Iterator[RewardModelUnderTest]:
    """One running RewardModel implementation per parameter."""
    backend = request.param
    procs: list[ServiceProcess] = []
    try:
        if backend == "llm":
            procs.append(_reward("llm", contract_nats, contract_dir, {"source": str(request.getfixturevalue(
                "tiny_model"))}))
        elif backend == "oracle":
            procs.append(_reward("oracle", contract_nats, contract_dir, {}))
        else:
            http = free_port()
            model = str(request.getfixturevalue("tiny_model"))
            procs.append(_start("policy", {"role": "rollout", "openai_port": http, "model": {"source": model},
                                           "checkpoint_dir": str(contract_dir / "ckpt")}, contract_nats, contract_dir))
            procs.append(_reward("openai", contract_nats, contract_dir,
                                 {"openai_base_url": f"http://127.0.0.1:{http}/v1", "openai_model": "policy"}))
        yield RewardModelUnderTest(procs[-1].address, VOTES, deterministic_oracle=backend == "oracle")
    finally:
        _stop(*reversed(procs))
