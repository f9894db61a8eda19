"""Family ``codeio`` served by the env service as a real process (gRPC, NATS): its seed tasks' tests are
built in the service's sandbox at seeding, and an answer sent through Reset/Step is run there and scored
by the share of tests it passes; the held-out task is another problem than every train task."""

from __future__ import annotations

import os
import time

import grpc
import pytest

from rlanything.v1 import env_pb2, env_pb2_grpc
from services.env.families.base import TaskSpec
from services.env.families.codeio_family import CodeIOFamily
from services.env.families.code_problems import TASK_TEXT

pytestmark = [pytest.mark.integration, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs root (namespaces, per-run uids)")]

CONFIG = """
env:
  cache_dir: {cache}
  families:
    - {{type: codeio, knobs: {{examples: 1}}, train_slots: 3, heldout_slots: 1, ood_slots: 0}}
  scheduler: {{enabled: false}}
  sandbox: {{workers: 2, timeout_s: 2.0}}
"""


def listed(env: env_pb2_grpc.EnvironmentStub, count: int, timeout_s: float = 60.0) -> list[env_pb2.TaskInfo]:
    """The codeio tasks once there are ``count`` (the pool is seeded after SERVING)."""
    deadline = time.monotonic() + timeout_s
    while len(tasks := list(env.ListTasks(env_pb2.ListTasksRequest(family="codeio")).tasks)) < count:
        assert time.monotonic() < deadline, f"{len(tasks)} of {count} codeio tasks listed after {timeout_s:g} s"
        time.sleep(0.2)
    return tasks


def test_the_env_service_serves_codeio_tasks_scored_in_its_sandbox(spawn_service, tmp_path) -> None:
    svc = spawn_service("env", CONFIG.format(cache=tmp_path / "cache"))
    env = env_pb2_grpc.EnvironmentStub(grpc.insecure_channel(svc.address))
    tasks = listed(env, 4)
    assert sorted(t.split for t in tasks) == ["heldout", "train", "train", "train"]
    assert all(t.metadata["library"] == "reasoning-gym" and t.oracle_plan_length == 1 for t in tasks)
    local = CodeIOFamily(cache_dir=tmp_path / "cache" / "codeio")  # reads the service's cache: runs nothing
    problems = {t.ref.slot_id: local.problem(TaskSpec("codeio", dict(t.knobs), t.seed)) for t in tasks}
    assert local._sandbox is None
    heldout = next(problems[t.ref.slot_id].key for t in tasks if t.split == "heldout")
    assert heldout not in {problems[t.ref.slot_id].key for t in tasks if t.split == "train"}
    for task in tasks:
        problem = problems[task.ref.slot_id]
        reset = env.Reset(env_pb2.ResetRequest(task=task.ref, seed=0))
        assert reset.single_turn and reset.task_text == f"{TASK_TEXT}\n{problem.statement}"
        win = env.Step(env_pb2.StepRequest(session_id=reset.session_id, action=f"```python\n{problem.reference}```"))
        assert (win.won, win.reward, win.observation) == (True, 1.0, "Passed 8 of 8 tests.")
        reset = env.Reset(env_pb2.ResetRequest(task=task.ref, seed=1))
        lose = env.Step(env_pb2.StepRequest(session_id=reset.session_id, action="import sys\nsys.exit(3)\n"))
        assert not lose.won and lose.reward == 0.0 and "crashed (exit status 3)" in lose.observation
