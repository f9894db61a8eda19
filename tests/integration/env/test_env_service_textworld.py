"""The env service with TextWorld games: walkthrough over gRPC, labels, Gymnasium checker,
and a harder variant accepted by the rule with a longer oracle plan."""

from __future__ import annotations

import importlib.metadata

import grpc
import pytest
from gymnasium.utils.env_checker import check_env

from rlanything.v1 import env_pb2, env_pb2_grpc
from rlanything.v1.events_pb2 import (DIRECTION_HARDER, STEP_LABEL_BAD, STEP_LABEL_GOOD, TaskPoolEvent,
                                      TaskRef, TaskReport)
from services.common.streams import Subjects
from services.env.families.base import TaskSpec
from services.env.families.textworld_family import TextWorldFamily
from services.env.gym_client import RemoteTaskEnv

from tests.support import events, wait_for_tasks

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TEXTWORLD = """
env:
  cache_dir: {cache}
  families:
    - {{type: textworld, knobs: {{world_size: 2, nb_objects: 3, quest_length: 2}}, train_slots: 1}}
  scheduler: {{enabled: false}}
"""


def replay(env, ref: TaskRef, actions: list[str]) -> tuple[str, env_pb2.StepResponse | None]:
    session = env.Reset(env_pb2.ResetRequest(task=ref, seed=0)).session_id
    last = None
    for a in actions:
        last = env.Step(env_pb2.StepRequest(session_id=session, action=a))
    return session, last


async def test_textworld_through_the_service(spawn_service, tmp_path, bus) -> None:
    cache = tmp_path / "cache"
    svc = spawn_service("env", TEXTWORLD.format(cache=cache))
    env = env_pb2_grpc.EnvironmentStub(grpc.insecure_channel(svc.address))
    (task,) = wait_for_tasks(env, 1, timeout_s=120)
    assert task.ref.family == "textworld" and task.oracle_plan_length >= 1

    # The walkthrough, from the game the service generated (same cache), wins over gRPC.
    spec = TaskSpec("textworld", dict(task.knobs), task.seed)
    walkthrough = TextWorldFamily(cache / "textworld").make_episode(spec, 0).oracle_plan()
    assert len(walkthrough) == task.oracle_plan_length
    session = env.Reset(env_pb2.ResetRequest(task=task.ref, seed=0)).session_id
    for action in walkthrough:
        step = env.Step(env_pb2.StepRequest(session_id=session, action=action))
        assert step.oracle_label == STEP_LABEL_GOOD, action
    assert step.won and step.terminated and step.oracle_plan_length == 0

    # After the first good step, every action that lengthens the plan (undoes progress) is bad.
    _, first = replay(env, task.ref, walkthrough[:1])
    undoers = []
    for action in first.admissible_actions:
        _, after = replay(env, task.ref, [walkthrough[0], action])
        if after.oracle_plan_length > first.oracle_plan_length:
            undoers.append(action)
            assert after.oracle_label == STEP_LABEL_BAD, action
    assert undoers, f"no admissible action undoes progress among {list(first.admissible_actions)}"

    # Gymnasium's checker on the remote TextWorld task.
    client = RemoteTaskEnv(svc.address, task.ref)
    check_env(client, skip_render_check=True)
    client.close()

    # Too easy -> a harder candidate; its own rollouts land in the band -> accepted.
    report = TaskReport(job_id="r0/tw/v0", round=0, task=task.ref, group_size=8, rollouts=8, wins=8, acc=1.0,
                        direction=DIRECTION_HARDER)
    await bus.publish(Subjects.CRITIC_TASK, report, msg_id=report.job_id)
    proposed = [e for e in await events(bus, Subjects.ENV_POOL, "REPORTS", 2, TaskPoolEvent, timeout_s=120)]
    assert [TaskPoolEvent.Kind.Name(e.kind) for e in proposed] == ["KIND_REQUESTED", "KIND_PROPOSED"]
    candidate = proposed[1].candidate
    pending = [t for t in env.ListTasks(env_pb2.ListTasksRequest()).tasks if t.status == "pending"]
    assert [t.ref.version for t in pending] == [candidate.version] == [1]
    assert dict(pending[0].metadata) == {"library": "textworld", "library_version": importlib.metadata.version("textworld")}
    cand_report = TaskReport(job_id="r1/tw/v1", round=1, task=candidate, group_size=8, rollouts=8, wins=4,
                             acc=0.5, is_candidate=True)
    await bus.publish(Subjects.CRITIC_TASK, cand_report, msg_id=cand_report.job_id)
    decided = await events(bus, Subjects.ENV_POOL, "REPORTS", 3, TaskPoolEvent, timeout_s=60)
    assert TaskPoolEvent.Kind.Name(decided[2].kind) == "KIND_ACCEPTED"
    assert decided[2].reason == "harder: 0.2 <= acc_new=0.500 < acc_prev=1.000"
    (active,) = env.ListTasks(env_pb2.ListTasksRequest()).tasks
    assert active.ref.version == 1 and active.parent_version == 0
    assert active.knobs["quest_length"] == task.knobs["quest_length"] + 1
    assert active.oracle_plan_length > task.oracle_plan_length
