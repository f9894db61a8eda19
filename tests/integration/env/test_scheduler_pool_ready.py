"""The scheduler releases no round before the task pool is complete (in process, real NATS)."""

from __future__ import annotations

import asyncio

import pytest

from rlanything.v1.env_pb2 import SchedulerState, TaskSlot
from rlanything.v1.events_pb2 import ModelVersion, RolloutJob
from services.common.config import EnvServiceConfig
from services.common.kv import ProtoBucket
from services.common.streams import Subjects
from services.env.families.registry import build_family
from services.env.pool import TaskPool
from services.env.scheduler import Scheduler
from tests.support import events

pytestmark = pytest.mark.integration


async def test_no_round_is_released_from_a_partial_pool(bus, tmp_path) -> None:
    cfg = EnvServiceConfig.model_validate({
        "cache_dir": str(tmp_path), "families": [{"type": "gym_text", "knobs": {"size": 4, "hole_prob": 0.2},
                                                  "train_slots": 3, "heldout_slots": 2, "ood_slots": 0}],
        "scheduler": {"tasks_per_round": 3, "group_size": 2, "eval_every": 1, "eval_group_size": 2}})
    families = {f.type: build_family(f, cfg.cache_dir) for f in cfg.families}
    ready = asyncio.Event()
    pool = TaskPool(await ProtoBucket.open(bus.js, "pool", TaskSlot), families)
    scheduler = Scheduler(pool, bus, await ProtoBucket.open(bus.js, "pool_state", SchedulerState),
                          await ProtoBucket.open(bus.js, "pool_models", ModelVersion), cfg.scheduler, seed=0, pool_ready=ready)
    assert await scheduler.tick() == 0  # models may announce versions while games still compile
    assert await pool.seed(cfg, 0) == 5
    assert await scheduler.tick() == 0  # seeded, but the service has not declared the pool ready
    ready.set()
    assert await scheduler.tick() == 5  # 3 train + 2 held-out jobs, all in round 0
    jobs = await events(bus, Subjects.ROLLOUT_JOBS, "JOBS", 5, RolloutJob)
    assert sorted(j.task.slot_id for j in jobs) == [f"gym_text/heldout-{i:04d}" for i in range(2)] + [
        f"gym_text/train-{i:04d}" for i in range(3)]
    assert {j.round for j in jobs} == {0} and {j.jobs_in_round for j in jobs} == {5}
