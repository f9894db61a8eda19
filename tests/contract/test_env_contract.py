"""The Environment contract (`services/contract/env_contract.py`) against every implementation the
project ships — the env service with its FrozenLake, reasoning-gym, Gymnasium-id, code, codeio and
remote families, and the bring-your-own template `examples/env_server.py` — and against a broken server,
which must fail with a clause a person can read."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from rlanything.v1 import env_pb2, env_pb2_grpc

from services.common.nats_server import NatsServer
from services.contract.env_contract import check_environment
from services.env.families.web_browser import BrowserMissingError, find_browser
from tests.contract.conftest import _start, _stop
from tests.launch import RLANYTHING

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
FAMILIES = {
    "gym_text": {"type": "gym_text", "knobs": {"size": 4, "hole_prob": 0.2}, "train_slots": 2, "heldout_slots": 1,
                 "ood_slots": 0},
    "reasoning_gym": {"type": "reasoning_gym", "dataset": "basic_arithmetic", "knobs": {"level": 1},
                      "train_slots": 2, "heldout_slots": 1, "ood_slots": 0},
    "gymnasium": {"type": "gymnasium", "env_id": "CliffWalking-v1", "won_when": "terminated", "knobs": {},
                  "train_slots": 2, "heldout_slots": 1, "ood_slots": 0, "max_steps": 15},
    "web": {"type": "web", "knobs": {"task": 3, "distractors": 1}, "train_slots": 2, "heldout_slots": 1,
            "ood_slots": 0, "browsers": 2},
    "code": {"type": "code", "knobs": {"ops": 2}, "train_slots": 2, "heldout_slots": 1, "ood_slots": 0},
    "codeio": {"type": "codeio", "knobs": {"examples": 1}, "train_slots": 2, "heldout_slots": 1, "ood_slots": 0},
}


def wait_for_tasks(address: str, family: str, timeout_s: float = 90.0) -> None:
    """Wait until the env at ``address`` lists a task of ``family`` (its pool is seeded)."""
    with grpc.insecure_channel(address) as channel:
        stub = env_pb2_grpc.EnvironmentStub(channel)
        deadline = time.monotonic() + timeout_s
        while not stub.ListTasks(env_pb2.ListTasksRequest(family=family), timeout=10).tasks:
            assert time.monotonic() < deadline, f"no {family} task listed within {timeout_s:g} s"
            time.sleep(0.5)


def example_module():
    spec = importlib.util.spec_from_file_location("env_server_example", ROOT / "examples" / "env_server.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module", params=["gym_text", "reasoning_gym", "gymnasium", "web", "code", "codeio", "example",
                                                       "remote"])
def environment(request: pytest.FixtureRequest, contract_nats: NatsServer, contract_dir: Path) -> Iterator[str]:
    """The address of one shipped Environment implementation ("remote": the env service playing
    the example server's tasks through `type: remote`; "web": MiniWoB++ pages in headless Chromium,
    skipped where Chromium or chromedriver is missing)."""
    if request.param == "web":
        try:
            find_browser()
        except BrowserMissingError as exc:
            pytest.skip(str(exc))
    server = example_module().serve(0) if request.param in ("example", "remote") else None
    if request.param == "example":
        yield f"127.0.0.1:{server.port}"
        server.stop(None)
        return
    family = FAMILIES.get(request.param) or {"type": "remote", "address": f"127.0.0.1:{server.port}", "knobs": {},
                                             "train_slots": 2, "heldout_slots": 1, "ood_slots": 0, "max_steps": 10}
    section = {"cache_dir": str(contract_dir / "cache"), "families": [family], "scheduler": {"enabled": False}}
    if request.param in ("code", "codeio"):  # answers (and codeio's test builds) run in the sandbox (root)
        if os.geteuid() != 0:
            pytest.skip(f"the {request.param} family's sandbox needs root")
        section["sandbox"] = {"workers": 1, "timeout_s": 2.0}
    proc = _start("env", section, contract_nats, contract_dir)  # the families share one pool bucket
    # every family's pool seeds in the background after SERVING (web: pages in a browser, codeio: tests
    # built, the others in well under a second, which a busy machine can still stretch past the first ask)
    wait_for_tasks(proc.address, request.param)
    yield proc.address
    _stop(proc)
    if server is not None:
        server.stop(None)


def test_every_clause_holds(environment: str) -> None:
    failed = [r for r in check_environment(environment) if not r.passed]
    assert not failed, "\n".join(f"{r.clause}: sent {r.sent}; got {r.got}; required {r.required}" for r in failed)


@pytest.fixture(scope="module")
def broken() -> Iterator[str]:
    """The template with one bug: Reset answers a session id it never stored."""
    module = example_module()

    class ForgetsSessions(module.CountingEnv):
        def Reset(self, request, context):  # noqa: N802 - the gRPC method's name
            response = super().Reset(request, context)
            self.sessions.pop(response.session_id, None)
            return response

    server = module.serve(0, ForgetsSessions())
    yield f"127.0.0.1:{server.port}"
    server.stop(None)


def test_a_session_id_that_does_not_work_fails_with_a_readable_clause(broken: str) -> None:
    results = {r.clause.split(".")[0]: r for r in check_environment(broken)}
    assert results["1"].passed and results["2"].passed  # listing and resetting look fine
    step = results["3"]
    assert not step.passed
    assert step.sent.startswith("StepRequest {session_id: ")
    assert step.got.startswith("NOT_FOUND: unknown session")
    assert step.required == "an answer (status OK)"
    assert not results["4"].passed  # Close of the id Reset gave is NOT_FOUND too


def test_the_command_prints_each_clause_and_exits_by_the_result(broken: str) -> None:
    server = example_module().serve(0)
    try:
        good = subprocess.run([RLANYTHING, "contract", "env", f"127.0.0.1:{server.port}"],
                              capture_output=True, text=True, timeout=120)
    finally:
        server.stop(None)
    assert good.returncode == 0, good.stdout + good.stderr
    assert good.stdout.count("PASS  ") == 5 and good.stdout.rstrip().endswith(f"5 of 5 clauses hold for 127.0.0.1:{server.port}")
    bad = subprocess.run([RLANYTHING, "contract", "env", broken], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1
    assert "FAIL  3. Step plays an episode to its end, then refuses" in bad.stdout
    assert "required: an answer (status OK)" in bad.stdout
    unreachable = check_environment("127.0.0.1:1", timeout_s=2)
    assert not unreachable[0].passed and unreachable[0].got.startswith("UNAVAILABLE")
