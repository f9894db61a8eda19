"""The env service as a real process: gRPC API, Gymnasium client, pool durability, scheduler."""

from __future__ import annotations

import importlib.metadata

import signal

import grpc
import pytest
from gymnasium.utils.env_checker import check_env

from rlanything.v1 import env_pb2, env_pb2_grpc
from rlanything.v1.events_pb2 import (DIRECTION_HARDER, MODEL_ROLE_POLICY, MODEL_ROLE_REWARD_MODEL,
                                      STEP_LABEL_BAD, STEP_LABEL_GOOD, ModelVersion, RolloutJob, TaskPoolEvent,
                                      TaskRef, TaskReport)
from services.common.streams import Subjects
from services.env.gym_client import RemoteTaskEnv
from tests.support import events, wait_for_tasks

pytestmark = [pytest.mark.integration, pytest.mark.slow]

GYM_ONLY = """
env:
  cache_dir: {cache}
  families:
    - {{type: gym_text, knobs: {{size: 4, hole_prob: 0.2}}, train_slots: 3, heldout_slots: 1,
       ood_knobs: {{size: 5, hole_prob: 0.25}}, ood_slots: 1}}
  scheduler: {{enabled: {scheduler}, tasks_per_round: 2, group_size: 4, eval_every: 0}}
"""


def stub(address: str) -> env_pb2_grpc.EnvironmentStub:
    return env_pb2_grpc.EnvironmentStub(grpc.insecure_channel(address))


def test_gym_text_over_grpc(spawn_service, tmp_path) -> None:
    svc = spawn_service("env", GYM_ONLY.format(cache=tmp_path / "cache", scheduler="false"))
    env = stub(svc.address)
    tasks = wait_for_tasks(env, 5)
    assert sorted(t.split for t in tasks) == ["heldout", "ood", "train", "train", "train"]
    assert all(t.status == "active" and t.oracle_plan_length > 0 for t in tasks)
    assert {(t.metadata["library"], t.metadata["library_version"]) for t in tasks} == {
        ("gymnasium", importlib.metadata.version("gymnasium"))}
    train = [t for t in tasks if t.split == "train"]
    assert len(env.ListTasks(env_pb2.ListTasksRequest(split="train", limit=2)).tasks) == 2

    reset = env.Reset(env_pb2.ResetRequest(task=train[0].ref, seed=1))
    assert reset.admissible_actions == ["left", "down", "right", "up"] and reset.max_steps == 20
    # Walk a path found only through the service's labels: every step good, the last one wins.
    labels, won = [], False
    plan_length = train[0].oracle_plan_length
    for _ in range(plan_length):
        best = None
        for action in ["left", "down", "right", "up"]:  # find the good move by probing a twin session
            twin = env.Reset(env_pb2.ResetRequest(task=train[0].ref, seed=1))
            for past in labels:
                env.Step(env_pb2.StepRequest(session_id=twin.session_id, action=past))
            r = env.Step(env_pb2.StepRequest(session_id=twin.session_id, action=action))
            env.Close(env_pb2.CloseRequest(session_id=twin.session_id))
            if r.oracle_label == STEP_LABEL_GOOD:
                best = action
                break
        assert best is not None
        step = env.Step(env_pb2.StepRequest(session_id=reset.session_id, action=best))
        assert step.oracle_label == STEP_LABEL_GOOD
        labels.append(best)
        won = step.won
    assert won and step.terminated and step.reward == 1.0 and len(labels) == plan_length

    with pytest.raises(grpc.RpcError) as err:
        env.Step(env_pb2.StepRequest(session_id=reset.session_id, action="up"))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "has ended" in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        env.Step(env_pb2.StepRequest(session_id="no-such-session", action="up"))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as err:
        env.Reset(env_pb2.ResetRequest(task=TaskRef()))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "task.slot_id is required" in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        env.Reset(env_pb2.ResetRequest(task=TaskRef(slot_id="gym_text/train-0000", version=9)))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND and "no version 9" in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        env.ListTasks(env_pb2.ListTasksRequest(split="test"))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    bad = env.Reset(env_pb2.ResetRequest(task=train[0].ref, seed=1))
    step = env.Step(env_pb2.StepRequest(session_id=bad.session_id, action="left"))
    assert step.oracle_label == STEP_LABEL_BAD  # into the edge: no progress


def test_gymnasium_checker_passes_on_the_client(spawn_service, tmp_path) -> None:
    svc = spawn_service("env", GYM_ONLY.format(cache=tmp_path / "cache", scheduler="false"))
    tasks = wait_for_tasks(stub(svc.address), 5)
    client = RemoteTaskEnv(svc.address, tasks[0].ref)
    check_env(client, skip_render_check=True)
    obs, info = client.reset(seed=3)
    assert "You are at row 1, column 1." in obs and info["admissible_actions"][0] == "left"
    obs, reward, terminated, truncated, info = client.step("left")
    assert info["oracle_label"] == "STEP_LABEL_BAD" and reward == 0.0 and not terminated
    client.close()


async def test_pool_survives_restart_and_scheduler_follows_model_versions(spawn_service, tmp_path, bus) -> None:
    svc = spawn_service("env", GYM_ONLY.format(cache=tmp_path / "cache", scheduler="true"))
    env = stub(svc.address)
    tasks = wait_for_tasks(env, 5)
    jobs = await events(bus, Subjects.ROLLOUT_JOBS, "JOBS", 2, RolloutJob)
    assert [j.round for j in jobs] == [0, 0] and all(len(j.seeds) == 4 and j.group_size == 4 for j in jobs)
    assert all(j.task.slot_id.startswith("gym_text/train-") for j in jobs)

    # The critic says every train task is too easy: each gets exactly one pending harder candidate.
    train = [t for t in tasks if t.split == "train"]
    for t in train:
        for attempt in range(2):  # the second report must not add a second pending candidate
            # the first names the round-0 job of that task (sync: round 1 waits for each job's report)
            report = TaskReport(job_id=f"r0/{t.ref.slot_id}/v0" + ("/again" if attempt else ""), round=0,
                                task=t.ref, group_size=4,
                                rollouts=4, wins=4, acc=1.0, direction=DIRECTION_HARDER)
            await bus.publish(Subjects.CRITIC_TASK, report, msg_id=report.job_id)
    proposed = await events(bus, Subjects.ENV_POOL, "REPORTS", 6, TaskPoolEvent)
    kinds = sorted(TaskPoolEvent.Kind.Name(e.kind) for e in proposed)
    assert kinds == ["KIND_PROPOSED"] * 3 + ["KIND_REQUESTED"] * 3
    before = {(t.ref.slot_id, t.ref.version, t.status): dict(t.knobs)
              for t in env.ListTasks(env_pb2.ListTasksRequest()).tasks}
    assert sum(1 for k in before if k[2] == "pending") == 3

    assert svc.stop(signal.SIGKILL) == -signal.SIGKILL
    svc.start()
    after = {(t.ref.slot_id, t.ref.version, t.status): dict(t.knobs)
             for t in env.ListTasks(env_pb2.ListTasksRequest()).tasks}
    assert after == before

    # Round 1 waits for both models trained on round 0, then includes every pending candidate.
    await bus.publish(Subjects.MODELS_POLICY, ModelVersion(role=MODEL_ROLE_POLICY, version=1, trained_on_round=0),
                      msg_id="policy/1")
    assert await events(bus, Subjects.ROLLOUT_JOBS, "JOBS", 1, RolloutJob, timeout_s=2) == []  # RM not trained yet
    await bus.publish(Subjects.MODELS_REWARD,
                      ModelVersion(role=MODEL_ROLE_REWARD_MODEL, version=1, trained_on_round=0), msg_id="reward/1")
    round1 = await events(bus, Subjects.ROLLOUT_JOBS, "JOBS", 5, RolloutJob)
    assert {j.round for j in round1} == {1}
    assert len(round1) == 5 and sum(j.is_candidate for j in round1) == 3
    # each candidate's job carries what the critic needs to apply the acceptance rule to its rollouts
    assert [(j.candidate_check.direction, j.candidate_check.parent_acc, round(j.candidate_check.band_low, 3),
             round(j.candidate_check.band_high, 3)) for j in round1 if j.is_candidate] == [(DIRECTION_HARDER, 1.0, 0.2, 0.8)] * 3
    assert not any(j.HasField("candidate_check") for j in round1 if not j.is_candidate)
    assert all(j.min_policy_version == 1 for j in round1)


RETRY = GYM_ONLY + """  adaptation: {{retry_rejected: 1}}
"""


async def test_a_rejected_candidate_is_followed_by_one_retry_at_once(spawn_service, tmp_path, bus) -> None:
    svc = spawn_service("env", RETRY.format(cache=tmp_path / "cache", scheduler="false"))
    env = stub(svc.address)
    slot = next(t for t in wait_for_tasks(env, 5) if t.split == "train")
    ref = slot.ref

    async def report(job_id: str, version: int, acc: float, is_candidate: bool) -> None:
        r = TaskReport(job_id=job_id, round=0, task=TaskRef(slot_id=ref.slot_id, version=version, family=ref.family),
                       group_size=4, rollouts=4, wins=int(acc * 4), acc=acc, is_candidate=is_candidate)
        await bus.publish(Subjects.CRITIC_TASK, r, msg_id=job_id)

    def kinds(evs) -> list[tuple[str, int]]:
        return [(TaskPoolEvent.Kind.Name(e.kind).removeprefix("KIND_"), e.candidate.version) for e in evs]

    await report(f"r0/{ref.slot_id}/v0", 0, 1.0, False)  # too easy: a harder candidate (v1)
    first = await events(bus, Subjects.ENV_POOL, "REPORTS", 2, TaskPoolEvent)
    assert kinds(first) == [("REQUESTED", 0), ("PROPOSED", 1)]
    await report(f"r1/{ref.slot_id}/v1", 1, 0.0, True)  # rejected: the next candidate (v2) comes at once
    second = await events(bus, Subjects.ENV_POOL, "REPORTS", 5, TaskPoolEvent)
    assert kinds(second[2:]) == [("REJECTED", 1), ("REQUESTED", 0), ("PROPOSED", 2)]
    assert second[3].acc_prev == 1.0 and second[3].direction == DIRECTION_HARDER  # the parent's request again
    pending = [t for t in env.ListTasks(env_pb2.ListTasksRequest()).tasks
               if t.ref.slot_id == ref.slot_id and t.status == "pending"]
    assert [(t.ref.version, t.metadata["retry"]) for t in pending] == [(2, "1")]
    await report(f"r2/{ref.slot_id}/v2", 2, 0.0, True)  # rejected again: retry_rejected = 1 is spent
    third = await events(bus, Subjects.ENV_POOL, "REPORTS", 7, TaskPoolEvent, timeout_s=5)
    assert kinds(third[5:]) == [("REJECTED", 2)]
    assert not [t for t in env.ListTasks(env_pb2.ListTasksRequest()).tasks
                if t.ref.slot_id == ref.slot_id and t.status == "pending"]
