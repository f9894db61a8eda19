"""The critic as a real process against a real nats-server: crash safety, metrics, gRPC, timeouts."""

from __future__ import annotations

import math

import asyncio
import signal
import time
import urllib.request

import grpc
import pytest
from google.protobuf import text_format
from nats.js.api import ConsumerConfig as JsConsumerConfig
from nats.js.errors import NoKeysError

from rlanything.v1 import critic_pb2, critic_pb2_grpc
from rlanything.v1.events_pb2 import (MODEL_ROLE_POLICY, STEP_LABEL_BAD, STEP_LABEL_GOOD, JudgedTrajectory,
                                      ModelVersion, PolicySampleBatch, RewardSampleBatch, RoundMetrics, TaskReport)
from services.common.bus import EventBus
from services.common.streams import Subjects
from services.critic.keys import group_key
from tests.unit.critic.critic_builders import judged

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CONFIG = """
consumer: {{ack_wait_s: 5, max_deliveries: 3, backoff_s: [0.1], fetch_batch: 8, fetch_timeout_s: 0.3}}
critic: {{group_timeout_s: {timeout}}}
"""
G, B = STEP_LABEL_GOOD, STEP_LABEL_BAD


def train_group(job: str, **kw) -> list[JudgedTrajectory]:
    """G = 4, acc = 0.5: 6 policy samples and 9 RM samples (see tests/unit/critic)."""
    return [
        judged(job, 0, +1, [[1, 1, 1], [1, 1, -1]], labels=[G, G], **kw),
        judged(job, 1, +1, [[1, 1, 1]], **kw),
        judged(job, 2, -1, [[-1, -1, -1], [1, -1, -1], [-1, -1, -1]], labels=[B, G, B], **kw),
        judged(job, 3, -1, [[1, 0, -1]], labels=[B], **kw),
    ]


async def publish(bus: EventBus, trajectories: list[JudgedTrajectory], msg_prefix: str = "") -> None:
    for j in trajectories:
        await bus.publish(Subjects.TRAJ_JUDGED, j, msg_id=msg_prefix + j.trajectory.trajectory_id)


async def read(bus: EventBus, subject: str, stream: str, message_type, count: int, timeout_s: float = 30.0,
               settle_s: float = 1.0) -> list:
    """Read ``count`` messages, then keep listening ``settle_s`` more to catch any extra one."""
    durable = f"test-{subject.replace('.', '-')}" if stream == "SAMPLES" else None  # one reader per work queue
    sub = await bus.js.pull_subscribe(subject, durable=durable, stream=stream,
                                      config=JsConsumerConfig(filter_subject=subject))
    got: list = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    settle_until = None
    while loop.time() < (settle_until or deadline):
        try:
            msgs = await sub.fetch(8, timeout=0.5)
        except Exception:  # noqa: BLE001 - fetch timeout: keep waiting
            msgs = []
        for m in msgs:
            got.append(message_type.FromString(m.data))
            await m.ack_sync()
        if len(got) >= count and settle_until is None:
            settle_until = loop.time() + settle_s
    await sub.unsubscribe()
    return got


async def group_keys(bus: EventBus) -> set[str]:
    kv = await bus.js.key_value("critic_groups")
    try:
        return set(await kv.keys())
    except NoKeysError:
        return set()


async def wait_for(predicate, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.1)


def normalized(message, old: str, new: str) -> str:
    return text_format.MessageToString(message).replace(old, new)


async def test_sigkill_mid_group_loses_nothing_and_counts_nothing_twice(spawn_service, bus: EventBus) -> None:
    svc = spawn_service("critic", CONFIG.format(timeout=120))
    base, crash = "r0/gym_text/train-0000/v0-base", "r0/gym_text/train-0000/v0-crash"
    await publish(bus, train_group(base, jobs_in_round=2))
    crash_group = train_group(crash, jobs_in_round=2)
    await publish(bus, crash_group[:2])
    await wait_for(lambda: _equals(group_keys(bus), {"r0=2Fgym_text=2Ftrain-0000=2Fv0-crash.0",
                                                     "r0=2Fgym_text=2Ftrain-0000=2Fv0-crash.1"}))
    assert svc.stop(signal.SIGKILL) == -signal.SIGKILL
    svc.start()
    await publish(bus, crash_group[:1], msg_prefix="redelivered/")  # an already-stored rollout, again
    await publish(bus, crash_group[2:])

    reports = {r.job_id: r for r in await read(bus, Subjects.CRITIC_TASK, "REPORTS", TaskReport, 2)}
    policy = {b.batch_id: b for b in await read(bus, Subjects.SAMPLES_POLICY, "SAMPLES", PolicySampleBatch, 2)}
    reward = {b.batch_id: b for b in await read(bus, Subjects.SAMPLES_REWARD, "SAMPLES", RewardSampleBatch, 2)}
    assert sorted(reports) == [base, crash] and len(policy) == 2 and len(reward) == 2
    assert (reports[crash].rollouts, reports[crash].wins, reports[crash].acc) == (4, 2, 0.5)
    assert len(policy[f"{base}/policy"].samples) == 6 and len(reward[f"{base}/reward"].samples) == 9
    assert normalized(reports[crash], crash, base) == text_format.MessageToString(reports[base])
    assert normalized(policy[f"{crash}/policy"], crash, base) == text_format.MessageToString(policy[f"{base}/policy"])
    assert normalized(reward[f"{crash}/reward"], crash, base) == text_format.MessageToString(reward[f"{base}/reward"])
    assert await group_keys(bus) == set()
    text = prometheus_text(svc)  # the restarted process saw the repeat and absorbed it
    assert 'rla_critic_trajectories_total{outcome="repeated"} 1.0' in text
    assert 'rla_critic_trajectories_total{outcome="stored"} 2.0' in text

    async with grpc.aio.insecure_channel(svc.address) as channel:
        rep = await critic_pb2_grpc.CriticStub(channel).GetRoundReport(critic_pb2.RoundReportRequest(round=0), timeout=5)
    assert (rep.groups_complete, rep.groups_partial, rep.groups_open) == (2, 0, 0)
    assert rep.metrics.values["critic/trajectories"] == 8.0
    assert rep.metrics.values["critic/policy_samples"] == 12.0


async def test_a_crash_between_deleting_a_reported_groups_keys_changes_none_of_its_counts(spawn_service,
                                                                                          bus: EventBus) -> None:
    """A kill -9 can land while the critic deletes a reported group's keys one by one (a CI chaos run
    recorded a round with 23 of its 24 trajectories counted). The restart finishes that close: it must
    not re-evaluate the group from the rollouts still stored."""
    svc = spawn_service("critic", CONFIG.format(timeout=120))
    job = "r0/gym_text/train-0000/v0"
    group = train_group(job)
    await publish(bus, group)
    [report] = await read(bus, Subjects.CRITIC_TASK, "REPORTS", TaskReport, 1, settle_s=0.1)
    await wait_for(lambda: _equals(group_keys(bus), set()))
    assert svc.stop(signal.SIGKILL) == -signal.SIGKILL
    kv = await bus.js.key_value("critic_groups")
    for j in group[1:]:  # the state of a crash after the first of the 4 deletes
        await kv.put(group_key(job, j.trajectory.rollout_index), j.SerializeToString())
    svc.start()
    await wait_for(lambda: _equals(group_keys(bus), set()))  # the restart finished the close

    async with grpc.aio.insecure_channel(svc.address) as channel:
        stub = critic_pb2_grpc.CriticStub(channel)
        rep = await stub.GetRoundReport(critic_pb2.RoundReportRequest(round=0), timeout=5)
        stats = (await stub.GetTaskStats(critic_pb2.TaskStatsRequest(), timeout=5)).stats
    assert (rep.groups_complete, rep.groups_partial, rep.groups_open) == (1, 0, 0)
    assert rep.metrics.values["critic/trajectories"] == 4.0 and rep.metrics.values["critic/policy_samples"] == 6.0
    assert [(s.rollouts, s.wins) for s in stats] == [(report.rollouts, report.wins)] == [(4, 2)]
    published = await read(bus, Subjects.METRICS_ROUND, "METRICS", RoundMetrics, 1, settle_s=1.0)
    assert [m.values["critic/trajectories"] for m in published] == [4.0]


async def _equals(coro, expected) -> bool:
    return await coro == expected


def prometheus_text(svc) -> str:
    """The /metrics page of the service's latest process (its port is in the "serving" log line)."""
    serving = [m for m in svc.log_messages() if m["msg"] == "serving"][-1]
    return urllib.request.urlopen(f"http://127.0.0.1:{serving['metrics_port']}/metrics", timeout=5).read().decode()


async def test_round_metrics_published_and_served(spawn_service, bus: EventBus) -> None:
    svc = spawn_service("critic", CONFIG.format(timeout=120))
    await bus.publish(Subjects.MODELS_POLICY, ModelVersion(role=MODEL_ROLE_POLICY, version=5), msg_id="policy/5")
    stats_kv = await bus.js.key_value("critic_stats")

    async def version_seen() -> bool:
        try:
            return "model.policy" in await stats_kv.keys()
        except NoKeysError:
            return False

    await wait_for(version_seen)
    heldout = [judged("r0/gym_text/heldout-0000/v0", 0, +1, [[1, 1, 1]], labels=[G], group_size=2, split="heldout",
                      slot_id="gym_text/heldout-0000"),
               judged("r0/gym_text/heldout-0000/v0", 1, -1, [[-1, -1, 1]], labels=[B], group_size=2, split="heldout",
                      slot_id="gym_text/heldout-0000")]
    await publish(bus, train_group("r0/gym_text/train-0000/v0") + heldout)

    published = await read(bus, Subjects.METRICS_ROUND, "METRICS", RoundMetrics, 2)
    assert [m.round for m in published] == [0, 0] and len(published) == 2  # one update per closed group
    expected = {
        "policy/success_train": 0.5, "policy/success_heldout": 0.5,
        "reward/step_accuracy": 6 / 8,        # 4 of 6 labelled train steps, 2 of 2 held-out steps
        "reward/labelled_steps": 8.0,
        "reward/outcome_accuracy": 5 / 6,     # one train rollout has mean vote 0
        "reward/invalid_vote_rate": 1 / 27, "reward/split_vote_share": 4 / 9,
        "env/in_band_share": 1.0, "policy/zero_advantage_share": 1 / 7, "policy/response_tokens_mean": 3.0,
        "policy/advantage_oracle_agreement": (5.25 / math.sqrt(3.1875)) / (5.25 / math.sqrt(3.1875) + 2.0),
        "policy/invalid_answer_rate": 0.0, "policy/truncated_response_rate": 0.0, "time/generate_s": 0.0, "time/env_s": 0.0, "time/judge_s": 0.0,
        "policy/staleness": 2.0,              # trajectories from version 3, latest announced 5
        "critic/groups_complete": 2.0, "critic/groups_partial": 0.0, "critic/groups_candidate": 0.0,
        "critic/groups_candidate_trained": 0.0,
        "critic/trajectories": 6.0, "critic/policy_samples": 6.0, "critic/reward_samples": 9.0, "critic/jobs_in_round": 1.0,
    }
    assert dict(published[-1].values) == pytest.approx(expected)

    async with grpc.aio.insecure_channel(svc.address) as channel:
        stub = critic_pb2_grpc.CriticStub(channel)
        for round_ in (0, -1):
            rep = await stub.GetRoundReport(critic_pb2.RoundReportRequest(round=round_), timeout=5)
            assert rep.metrics.round == 0 and dict(rep.metrics.values) == pytest.approx(expected)
            assert (rep.groups_complete, rep.groups_partial, rep.groups_open) == (2, 0, 0)
        stats = (await stub.GetTaskStats(critic_pb2.TaskStatsRequest(), timeout=5)).stats
        assert [(s.task.slot_id, s.rollouts, s.wins, s.acc, s.last_round) for s in stats] == [
            ("gym_text/heldout-0000", 2, 1, 0.5, 0), ("gym_text/train-0000", 4, 2, 0.5, 0)]
        one = (await stub.GetTaskStats(critic_pb2.TaskStatsRequest(slot_id="gym_text/train-0000"), timeout=5)).stats
        assert [s.task.slot_id for s in one] == ["gym_text/train-0000"]
        for request, call, code in [(critic_pb2.RoundReportRequest(round=7), stub.GetRoundReport, "NOT_FOUND"),
                                    (critic_pb2.RoundReportRequest(round=-2), stub.GetRoundReport, "INVALID_ARGUMENT"),
                                    (critic_pb2.TaskStatsRequest(slot_id="nope"), stub.GetTaskStats, "NOT_FOUND")]:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await call(request, timeout=5)
            assert err.value.code().name == code

    text = prometheus_text(svc)
    assert 'rla_critic_round_metric{key="reward/step_accuracy"} 0.75' in text
    assert "rla_critic_metrics_round 0.0" in text

    svc.stop(signal.SIGKILL)  # metrics and stats are recomputed from KV after a restart
    svc.start()
    async with grpc.aio.insecure_channel(svc.address) as channel:
        rep = await critic_pb2_grpc.CriticStub(channel).GetRoundReport(critic_pb2.RoundReportRequest(round=-1), timeout=5)
    assert dict(rep.metrics.values) == pytest.approx(expected) and rep.groups_complete == 2


async def test_partial_group_is_reported_after_the_timeout_even_across_a_restart(spawn_service, bus: EventBus) -> None:
    svc = spawn_service("critic", CONFIG.format(timeout=4))
    job = "r2/gym_text/train-0001/v1"
    group = train_group(job, round_=2, slot_id="gym_text/train-0001", version=1)
    started = time.monotonic()
    await publish(bus, group[1:3])   # one win, one loss of G = 4
    await wait_for(lambda: _equals(group_keys(bus), {"r2=2Fgym_text=2Ftrain-0001=2Fv1.1",
                                                     "r2=2Fgym_text=2Ftrain-0001=2Fv1.2"}))
    svc.stop(signal.SIGKILL)
    svc.start()                      # the timeout counts from when the rollouts were stored

    [report] = await read(bus, Subjects.CRITIC_TASK, "REPORTS", TaskReport, 1, settle_s=0.1)
    assert time.monotonic() - started >= 4.0
    assert (report.job_id, report.partial, report.rollouts, report.group_size, report.wins) == (job, True, 2, 4, 1)
    assert report.task.version == 1 and report.round == 2
    [batch] = await read(bus, Subjects.SAMPLES_POLICY, "SAMPLES", PolicySampleBatch, 1, settle_s=0.1)
    assert batch.batch_id == f"{job}/policy" and len(batch.samples) > 0   # 1 win + 1 loss: in the policy band

    await publish(bus, group[3:])    # too late: the group was reported
    assert await read(bus, Subjects.CRITIC_TASK, "REPORTS", TaskReport, 2, timeout_s=3) == [report]
    async with grpc.aio.insecure_channel(svc.address) as channel:
        stub = critic_pb2_grpc.CriticStub(channel)
        rep = await stub.GetRoundReport(critic_pb2.RoundReportRequest(round=2), timeout=5)
        stats = (await stub.GetTaskStats(critic_pb2.TaskStatsRequest(slot_id="gym_text/train-0001"), timeout=5)).stats
    assert (rep.groups_complete, rep.groups_partial, rep.groups_open) == (0, 1, 0)
    assert rep.metrics.values["critic/groups_partial"] == 1.0
    assert [(s.rollouts, s.wins) for s in stats] == [(2, 1)]
    assert await group_keys(bus) == set()

    async def late_counted() -> bool:  # the late rollout may still be in flight on a loaded machine
        return 'rla_critic_trajectories_total{outcome="late"} 1.0' in prometheus_text(svc)

    await wait_for(late_counted)
