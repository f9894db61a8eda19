"""Real failures become environment tasks: the env service as a real process consumes task
candidates from the INGEST stream, stores each failure once, serves it over gRPC, and admits or
drops it from its own rollouts' acc with the reason on rla.env.pool."""

from __future__ import annotations

import time

import grpc
import pytest

from rlanything.v1 import env_pb2, env_pb2_grpc
from rlanything.v1.events_pb2 import TaskPoolEvent, TaskReport
from rlanything.v1.ingest_pb2 import LiveTaskCandidate
from services.common.streams import Subjects
from services.ingest.candidates import candidate_id
from tests.support import events

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CONFIG = """
env:
  cache_dir: {cache}
  families:
    - {{type: gym_text, knobs: {{size: 4, hole_prob: 0.2}}, train_slots: 1}}
    - {{type: live, knobs: {{hint: 0}}, train_slots: 0}}
  scheduler: {{enabled: false}}
"""


def candidate(prompt: str, hint: str = "") -> LiveTaskCandidate:
    return LiveTaskCandidate(tenant="acme", candidate_id=candidate_id("acme", "math", prompt), task_type="math",
                             prompt=prompt, reference="42", hint=hint, source_trajectory_id="live/acme/e1")


def live_tasks(env: env_pb2_grpc.EnvironmentStub, count: int, timeout_s: float = 20.0) -> list[env_pb2.TaskInfo]:
    deadline = time.monotonic() + timeout_s
    while True:
        tasks = [t for t in env.ListTasks(env_pb2.ListTasksRequest(family="live")).tasks]
        if len(tasks) >= count or time.monotonic() > deadline:
            return tasks
        time.sleep(0.1)


def report(task, acc: float, job: str) -> TaskReport:
    return TaskReport(job_id=job, round=0, task=task, group_size=8, rollouts=8, wins=int(acc * 8), acc=acc,
                      is_candidate=True)


async def test_a_real_failure_becomes_one_task_that_its_own_rollouts_admit(spawn_service, tmp_path, bus) -> None:
    svc = spawn_service("env", CONFIG.format(cache=tmp_path / "cache"))
    env = env_pb2_grpc.EnvironmentStub(grpc.insecure_channel(svc.address))
    first = candidate("[user]\n<<<\nWhat is 17+25?\n>>>", hint="it is 42")
    await bus.publish(f"{Subjects.INGEST_CANDIDATE}.acme", first, msg_id="a")
    await bus.publish(f"{Subjects.INGEST_CANDIDATE}.acme", first, msg_id="b")  # the same failure again, later
    await bus.publish(f"{Subjects.INGEST_CANDIDATE}.acme", LiveTaskCandidate(candidate_id="nope"), msg_id="c")
    (task,) = live_tasks(env, 1)
    time.sleep(1.0)
    assert len(live_tasks(env, 2, timeout_s=0.5)) == 1  # stored once
    assert task.split == "live_pending" and task.knobs["hint"] == 0 and task.metadata["tenant"] == "acme"
    assert (await bus.js.stream_info("DLQ")).state.messages == 1  # the malformed one, with its reason

    reset = env.Reset(env_pb2.ResetRequest(task=task.ref, seed=0))
    assert reset.single_turn and "What is 17+25?" in reset.observation and "it is 42" not in reset.observation
    assert env.Step(env_pb2.StepRequest(session_id=reset.session_id, action="\\boxed{42}")).won

    # Its own G rollouts: none solves it -> retried with the user's correction as a hint.
    await bus.publish(Subjects.CRITIC_TASK, report(task.ref, 0.0, "r0/live/v0"), msg_id="r0/live/v0")
    (retry,) = [e for e in await events(bus, Subjects.ENV_POOL, "REPORTS", 1, TaskPoolEvent)]
    assert TaskPoolEvent.Kind.Name(retry.kind) == "KIND_PROPOSED" and "hint" in retry.reason
    (hinted,) = live_tasks(env, 1)
    assert hinted.ref.version == 1 and hinted.knobs["hint"] == 1 and hinted.split == "live_pending"
    reset = env.Reset(env_pb2.ResetRequest(task=hinted.ref, seed=0))
    assert "it is 42" in reset.observation
    # With the hint some rollouts win: admitted.
    await bus.publish(Subjects.CRITIC_TASK, report(hinted.ref, 0.5, "r1/live/v1"), msg_id="r1/live/v1")
    decided = await events(bus, Subjects.ENV_POOL, "REPORTS", 2, TaskPoolEvent)
    assert TaskPoolEvent.Kind.Name(decided[1].kind) == "KIND_ACCEPTED"
    (admitted,) = live_tasks(env, 1)
    assert admitted.split in ("train", "live_heldout") and decided[1].reason.endswith(admitted.split)

    # A restarted env serves it (the content is in the live_tasks bucket, not only in memory).
    svc.stop()
    svc.start()
    env = env_pb2_grpc.EnvironmentStub(grpc.insecure_channel(svc.address))
    reset = env.Reset(env_pb2.ResetRequest(task=admitted.ref, seed=0))
    assert env.Step(env_pb2.StepRequest(session_id=reset.session_id, action="The answer is 42")).won
