"""`env.scheduler.skip_pending`: a slot whose candidate variant is pending is not drawn again (real NATS)."""

from __future__ import annotations

import asyncio

import pytest

from rlanything.v1.env_pb2 import SchedulerState, TaskSlot, TaskVersion
from rlanything.v1.events_pb2 import DIRECTION_EASIER, ModelVersion, RolloutJob
from services.common.config import EnvServiceConfig
from services.common.kv import ProtoBucket
from services.common.streams import Subjects
from services.env.families.registry import build_family
from services.env.pool import TaskPool
from services.env.scheduler import Scheduler
from tests.support import events

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("skip_pending", [True, False])
async def test_a_slot_with_a_pending_candidate_is_drawn_only_as_the_candidate(bus, tmp_path, skip_pending) -> None:
    cfg = EnvServiceConfig.model_validate({
        "cache_dir": str(tmp_path), "families": [{"type": "gym_text", "knobs": {"size": 4, "hole_prob": 0.2},
                                                  "train_slots": 3, "heldout_slots": 0, "ood_slots": 0}],
        "scheduler": {"tasks_per_round": 3, "group_size": 2, "eval_every": 0, "skip_pending": skip_pending}})
    families = {f.type: build_family(f, cfg.cache_dir) for f in cfg.families}
    ready = asyncio.Event()
    pool = TaskPool(await ProtoBucket.open(bus.js, "pool", TaskSlot), families)
    scheduler = Scheduler(pool, bus, await ProtoBucket.open(bus.js, "pool_state", SchedulerState),
                          await ProtoBucket.open(bus.js, "pool_models", ModelVersion), cfg.scheduler, seed=0,
                          pool_ready=ready)
    assert await pool.seed(cfg, 0) == 3
    parent = await pool.slot("gym_text/train-0001")
    await pool.add_candidate(parent.slot_id, TaskVersion(knobs={"size": 3.0, "hole_prob": 0.2}, seed=7,
                                                         parent_version=parent.active.version, parent_acc=0.0,
                                                         direction=DIRECTION_EASIER))
    ready.set()
    released = await scheduler.tick()
    jobs = await events(bus, Subjects.ROLLOUT_JOBS, "JOBS", released, RolloutJob)
    drawn = sorted((j.task.slot_id, j.is_candidate) for j in jobs)
    expected = [("gym_text/train-0000", False)] + ([] if skip_pending else [("gym_text/train-0001", False)]) + [
        ("gym_text/train-0001", True), ("gym_text/train-0002", False)]
    assert drawn == expected
