"""The environment model rewriting coding problems, through the env service as a real process: an
OpenAI-compatible server (scripted) answers; broken JSON, a reference that loops forever and a
reference that fails its own test are refused with their reasons on rla.env.pool (the reference ran
in the sandbox), a valid rewrite becomes the pending candidate, is still playable after the env
restarts (stored in the bucket code_problems), and its own rollouts admit it."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator

import grpc
import pytest

from rlanything.v1 import env_pb2, env_pb2_grpc
from rlanything.v1.events_pb2 import TaskPoolEvent
from services.common.streams import Subjects
from tests.integration.env.test_model_proposer import ScriptedModel, kinds, report, too_easy
from tests.support import events

pytestmark = [pytest.mark.integration, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs root (namespaces, per-run uids)")]

CONFIG = """
env:
  cache_dir: {cache}
  families:
    - {{type: code, knobs: {{ops: 1, examples: 2}}, train_slots: 1, proposer: model}}
  scheduler: {{enabled: false}}
  sandbox: {{workers: 1, timeout_s: 1.0}}
  adaptation: {{model_proposer: {{base_url: "{url}", model: "{model}", timeout_s: 120}}}}
"""
TESTS = [{"input": "1", "output": "5"}, {"input": "2", "output": "8"}, {"input": "-1", "output": "-1"}]
STATEMENT = "Read one integer x and print x * 3 + 2."
SCRIPT = [
    "Sure! Here is a harder problem: print x*3+2",                                               # not JSON
    json.dumps({"statement": STATEMENT, "reference": "while True:\n    pass\n", "tests": TESTS}),  # loops forever
    json.dumps({"statement": STATEMENT, "reference": "print(int(input()) * 3)", "tests": TESTS}),  # fails its tests
    json.dumps({"statement": STATEMENT, "reference": "x = int(input())\nprint(x * 3 + 2)", "tests": TESTS}),  # valid
]


def code_tasks(env: env_pb2_grpc.EnvironmentStub, count: int, timeout_s: float = 20.0) -> list[env_pb2.TaskInfo]:
    """The code family's tasks once there are ``count`` (or the timeout passed)."""
    deadline = time.monotonic() + timeout_s
    while True:
        tasks = list(env.ListTasks(env_pb2.ListTasksRequest(family="code")).tasks)
        if len(tasks) >= count or time.monotonic() > deadline:
            return tasks
        time.sleep(0.1)


@pytest.fixture
def scripted() -> Iterator[ScriptedModel]:
    server = ScriptedModel(SCRIPT)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


async def test_a_rewritten_problem_is_accepted_only_when_its_reference_passes_its_tests_in_the_sandbox(
        spawn_service, tmp_path, bus, scripted: ScriptedModel) -> None:
    url = f"http://127.0.0.1:{scripted.server_address[1]}/v1"
    svc = spawn_service("env", CONFIG.format(cache=tmp_path / "cache", url=url, model="scripted"))
    env = env_pb2_grpc.EnvironmentStub(grpc.insecure_channel(svc.address))
    (task,) = code_tasks(env, 1)  # the pool is seeded after the service reports SERVING
    evs = await too_easy(bus, task.ref, 4, "print(0)")  # each report asks the model for a harder problem
    assert kinds(evs) == ["REQUESTED", "REJECTED_UNDEPLOYABLE"] * 3 + ["REQUESTED", "PROPOSED"]
    reasons = [e.reason for e in evs[1::2]]
    assert "not JSON" in reasons[0]
    assert "fails its own test 0" in reasons[1] and "TLE" in reasons[1]
    assert "fails its own test 0" in reasons[2] and "printed '3\\n', the test expects '5\\n'" in reasons[2]
    assert "harder problem, its reference passed its 3 tests in the sandbox" in reasons[3]
    shown = scripted.requests[0]["messages"][1]["content"]
    assert "multiply by" in shown or "add" in shown or "subtract" in shown
    assert "'print(0)'" in shown and "HARDER" in shown

    pending = evs[-1].candidate
    svc.stop()  # the written problem is in the bucket code_problems: a restarted env serves it
    svc.start()
    env = env_pb2_grpc.EnvironmentStub(grpc.insecure_channel(svc.address))
    reset = env.Reset(env_pb2.ResetRequest(task=pending, seed=0))
    assert reset.single_turn and reset.observation == STATEMENT
    win = env.Step(env_pb2.StepRequest(session_id=reset.session_id, action="```python\nprint(int(input())*3+2)\n```"))
    assert win.won and win.reward == 1.0
    reset = env.Reset(env_pb2.ResetRequest(task=pending, seed=1))
    lose = env.Step(env_pb2.StepRequest(session_id=reset.session_id, action="print(5)"))
    assert not lose.won and lose.reward == pytest.approx(1 / 3)
    await bus.publish(Subjects.CRITIC_TASK, report(pending, 0.5, "r9/cand", True), msg_id="r9/cand")
    decided = (await events(bus, Subjects.ENV_POOL, "REPORTS", 9, TaskPoolEvent))[-1]
    assert kinds([decided]) == ["ACCEPTED"]
    (now,) = code_tasks(env, 1)
    assert now.ref.version == pending.version and now.metadata["written_by"] == "model:scripted"
