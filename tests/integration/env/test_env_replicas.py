"""Two env processes on one NATS server: one releases rounds (it holds the scheduler lease); after a
``kill -9`` of that one the other takes the lease once it expires and releases the next round, and
every job is published once. A rollout worker's client spreads Resets over both and sends each
session's Step and Close to the replica that opened it. And the fence behind the lease: a release of a round that another
scheduler stored meanwhile changes nothing."""

from __future__ import annotations

import asyncio
import signal
import time

import pytest
import yaml

from rlanything.v1.env_pb2 import SchedulerState, TaskSlot
from rlanything.v1.events_pb2 import MODEL_ROLE_POLICY, MODEL_ROLE_REWARD_MODEL, ModelVersion, RolloutJob, TaskRef
from services.common.config import EnvServiceConfig
from services.common.kv import ProtoBucket
from services.common.session_ids import replica_of
from services.common.streams import Subjects
from services.env.families.registry import build_family
from services.env.pool import TaskPool
from services.env.scheduler import Scheduler
from services.policy.env_clients import GrpcEnvClient
from tests.support import events

pytestmark = pytest.mark.integration

ENV = {"env": {"scheduler": {"tasks_per_round": 2, "group_size": 2, "eval_every": 0, "sync_report_wait_s": 0,
                             "lease_ttl_s": 2},
               "families": [{"type": "gym_text", "knobs": {"size": 4, "hole_prob": 0.2}, "train_slots": 3,
                             "heldout_slots": 0, "ood_slots": 0}]},
       "loop": {"rounds": 3}}


def _replica(spawn_service, tmp_path):
    """An env process advertising its own address (as the launcher starts ``launcher.replicas.env``)."""
    svc = spawn_service("env", yaml.safe_dump({**ENV, "env": {**ENV["env"], "cache_dir": str(tmp_path / "cache")}}),
                        start=False)
    data = yaml.safe_load(svc.config_path.read_text())
    data["env"]["advertise_address"] = svc.address
    svc.config_path.write_text(yaml.safe_dump(data))
    return svc.start()


def _released(svc) -> list[int]:
    return [m["round"] for m in svc.log_messages() if m.get("msg") == "round released"]


async def _until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"{what} not within {timeout_s} s"
        await asyncio.sleep(0.2)


async def _announce(bus, trained_on_round: int) -> None:
    for role, subject in ((MODEL_ROLE_POLICY, Subjects.MODELS_POLICY), (MODEL_ROLE_REWARD_MODEL, Subjects.MODELS_REWARD)):
        await bus.publish(subject, ModelVersion(role=role, version=trained_on_round + 1, trained_on_round=trained_on_round),
                          msg_id=f"{subject}/{trained_on_round}")


async def test_the_other_env_replica_takes_over_scheduling_when_the_leader_is_killed(spawn_service, tmp_path, bus) -> None:
    a, b = _replica(spawn_service, tmp_path), _replica(spawn_service, tmp_path)
    await _until(lambda: _released(a) + _released(b) == [0], 30, "round 0 released by one replica")
    leader, other = (a, b) if _released(a) else (b, a)
    assert [m["msg"] for m in other.log_messages()].count("scheduler lease taken") == 0
    leader.stop(signal.SIGKILL)  # no clean stop: its lease is left to expire (lease_ttl_s 2)
    await _announce(bus, 0)     # both models trained on round 0: round 1 may start
    await _until(lambda: _released(other) == [1], 30, "round 1 released by the other replica")
    assert [m["msg"] for m in other.log_messages()].count("scheduler lease taken") == 1
    jobs = await events(bus, Subjects.ROLLOUT_JOBS, "JOBS", 10, RolloutJob, timeout_s=3)
    ids = [j.job_id for j in jobs]
    assert len(ids) == len(set(ids)) == 4, ids  # 2 tasks a round, each job published once
    assert sorted(j.round for j in jobs) == [0, 0, 1, 1]
    assert other.stop() == 0
    stopped = [m for m in other.log_messages() if m.get("msg") == "env replica stopped"]
    assert stopped and stopped[0]["scheduler_leases_taken"] == 1


async def test_a_release_of_a_round_another_scheduler_stored_meanwhile_changes_nothing(bus, tmp_path) -> None:
    """The fence behind the lease: scheduler B reads round 0 as next, A releases and stores round 0
    before B publishes (B's ``before_release`` runs A's whole tick), then B's publishes are duplicates
    and its state update leaves A's state as it was."""
    cfg = EnvServiceConfig.model_validate({**ENV["env"], "cache_dir": str(tmp_path)})
    families = {f.type: build_family(f, cfg.cache_dir) for f in cfg.families}
    ready = asyncio.Event()
    ready.set()
    pool = TaskPool(await ProtoBucket.open(bus.js, "pool", TaskSlot), families)
    await pool.seed(cfg, 0)
    state = await ProtoBucket.open(bus.js, "pool_state", SchedulerState)
    models = await ProtoBucket.open(bus.js, "pool_models", ModelVersion)
    a = Scheduler(pool, bus, state, models, cfg.scheduler, seed=0, pool_ready=ready)
    released_by_a: list[int] = []

    async def a_releases_first() -> None:
        released_by_a.append(await a.tick())

    b = Scheduler(pool, bus, state, models, cfg.scheduler, seed=0, pool_ready=ready, before_release=a_releases_first)
    assert await b.tick() == 0  # fenced: round 0 was stored by a meanwhile
    assert released_by_a == [2]
    stored, _ = await state.get("scheduler")
    assert stored.next_round == 1 and stored.jobs_published == 2 and len(stored.open_jobs) == 2
    jobs = await events(bus, Subjects.ROLLOUT_JOBS, "JOBS", 4, RolloutJob, timeout_s=3)
    assert sorted(j.job_id for j in jobs) == sorted(stored.open_jobs)  # b's publishes were duplicates


async def test_a_rollout_client_spreads_resets_over_both_replicas_and_steps_each_session_where_it_was_opened(
        spawn_service, tmp_path) -> None:
    a, b = _replica(spawn_service, tmp_path), _replica(spawn_service, tmp_path)
    client = GrpcEnvClient(f"ipv4:{a.address},{b.address}")
    try:
        sessions: list[str] = []
        while {replica_of(s) for s in sessions} != {a.address, b.address}:  # round-robin over both
            assert len(sessions) < 64, [replica_of(s) for s in sessions]
            reset = await client.reset(TaskRef(slot_id="gym_text/train-0000", version=0), seed=len(sessions))
            sessions.append(reset.session_id)
        for session_id in sessions:
            step = await client.step(session_id, "left")
            assert step.observation
            await client.close(session_id)
    finally:
        await client.aclose()
    opened = {svc.address: sum(replica_of(s) == svc.address for s in sessions) for svc in (a, b)}
    assert a.stop() == 0 and b.stop() == 0
    for svc in (a, b):
        (stopped,) = [m for m in svc.log_messages() if m.get("msg") == "env replica stopped"]
        calls = stopped["calls"]
        assert calls["Reset"]["ok"] == calls["Step"]["ok"] == calls["Close"]["ok"] == opened[svc.address], calls
        assert all(calls[m]["not_found"] == 0 for m in calls), calls
