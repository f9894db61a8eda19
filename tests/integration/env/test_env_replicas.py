"""Two env processes on one NATS server: one releases rounds (it holds the scheduler lease); after a
``kill -9`` of that one the other takes the lease once it expires and releases the next round, and
every job is published once."""

from __future__ import annotations

import asyncio
import signal
import time

import pytest
import yaml

from rlanything.v1.events_pb2 import MODEL_ROLE_POLICY, MODEL_ROLE_REWARD_MODEL, ModelVersion, RolloutJob
from services.common.streams import Subjects
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
