"""Sync mode: round r+1 waits, once both models trained on round r, until the env has handled the
task report of every job of round r, so the next draw's weights and candidates never depend on
whether a report was late (in process, real NATS). The wait is bounded (``sync_report_wait_s``)."""

from __future__ import annotations

import asyncio

import pytest

from rlanything.v1.env_pb2 import SchedulerState, TaskSlot
from rlanything.v1.events_pb2 import MODEL_ROLE_POLICY, MODEL_ROLE_REWARD_MODEL, ModelVersion, RolloutJob, TaskReport
from services.common.config import EnvServiceConfig
from services.common.kv import ProtoBucket
from services.common.streams import Subjects
from services.env.families.registry import build_family
from services.env.pool import TaskPool
from services.env.scheduler import Scheduler
from tests.support import events

pytestmark = pytest.mark.integration


async def _scheduler(bus, tmp_path, wait_s: float) -> Scheduler:
    cfg = EnvServiceConfig.model_validate({
        "cache_dir": str(tmp_path), "families": [{"type": "gym_text", "knobs": {"size": 4, "hole_prob": 0.2},
                                                  "train_slots": 3, "heldout_slots": 0, "ood_slots": 0}],
        "scheduler": {"tasks_per_round": 3, "group_size": 2, "eval_every": 0, "sync_report_wait_s": wait_s}})
    families = {f.type: build_family(f, cfg.cache_dir) for f in cfg.families}
    ready = asyncio.Event()
    pool = TaskPool(await ProtoBucket.open(bus.js, "pool", TaskSlot), families)
    assert await pool.seed(cfg, 0) == 3
    ready.set()
    return Scheduler(pool, bus, await ProtoBucket.open(bus.js, "pool_state", SchedulerState),
                     await ProtoBucket.open(bus.js, "pool_models", ModelVersion), cfg.scheduler, seed=0,
                     pool_ready=ready)


async def _trained_on(scheduler: Scheduler, round_: int) -> None:
    for role in (MODEL_ROLE_POLICY, MODEL_ROLE_REWARD_MODEL):
        await scheduler.on_model_version(ModelVersion(role=role, version=round_ + 1, trained_on_round=round_), None)


async def test_next_round_waits_for_every_report_of_the_last(bus, tmp_path) -> None:
    scheduler = await _scheduler(bus, tmp_path, wait_s=60.0)
    assert await scheduler.tick() == 3
    jobs = await events(bus, Subjects.ROLLOUT_JOBS, "JOBS", 3, RolloutJob)
    await _trained_on(scheduler, 0)
    assert await scheduler.tick() == 0  # both models trained on round 0, but no report handled yet
    for job in jobs[:2]:
        await scheduler.on_report(TaskReport(job_id=job.job_id, round=0))
    assert await scheduler.tick() == 0  # one report still missing
    state, _ = await scheduler.state.get("scheduler")
    assert list(state.open_jobs) == [jobs[2].job_id] and state.next_round == 1
    await scheduler.on_report(TaskReport(job_id=jobs[2].job_id, round=0))  # handling it releases round 1
    state, _ = await scheduler.state.get("scheduler")
    assert state.next_round == 2 and len(state.open_jobs) == 3
    assert {j.round for j in await events(bus, Subjects.ROLLOUT_JOBS, "JOBS", 3, RolloutJob)} == {1}


async def test_a_report_that_never_comes_delays_the_round_by_the_bound_only(bus, tmp_path) -> None:
    scheduler = await _scheduler(bus, tmp_path, wait_s=0.5)
    assert await scheduler.tick() == 3
    jobs = await events(bus, Subjects.ROLLOUT_JOBS, "JOBS", 3, RolloutJob)
    for job in jobs[1:]:
        await scheduler.on_report(TaskReport(job_id=job.job_id, round=0))
    await _trained_on(scheduler, 0)
    state, _ = await scheduler.state.get("scheduler")
    assert state.next_round == 1  # waiting for jobs[0]'s report
    late = await events(bus, Subjects.ROLLOUT_JOBS, "JOBS", 3, RolloutJob, timeout_s=10.0)  # no tick from the test
    assert {j.round for j in late} == {1}
    state, _ = await scheduler.state.get("scheduler")
    assert jobs[0].job_id not in state.open_jobs and len(state.open_jobs) == 3  # the missing one is let go


async def test_stopping_cancels_the_pending_wake_up(bus, tmp_path) -> None:
    scheduler = await _scheduler(bus, tmp_path, wait_s=60.0)
    assert await scheduler.tick() == 3
    await _trained_on(scheduler, 0)  # waits for the three reports: a wake-up in 60 s is armed
    (wake,) = scheduler._wake
    scheduler.close()
    await asyncio.sleep(0)
    assert wake.cancelled()


async def test_a_failed_wake_up_tick_is_retried(bus, tmp_path) -> None:
    scheduler = await _scheduler(bus, tmp_path, wait_s=0.2)
    assert await scheduler.tick() == 3
    await _trained_on(scheduler, 0)  # no report comes: only the wake-up can release round 1
    tick, failures = scheduler.tick, []

    async def flaky_tick() -> int:
        if not failures:
            failures.append(1)
            raise ConnectionError("NATS restarting")
        return await tick()

    scheduler.tick = flaky_tick  # type: ignore[method-assign]
    jobs = await events(bus, Subjects.ROLLOUT_JOBS, "JOBS", 6, RolloutJob, timeout_s=10.0)
    assert failures == [1] and sorted(j.round for j in jobs) == [0, 0, 0, 1, 1, 1]


async def _crashed_after_publishing(bus, tmp_path) -> tuple[Scheduler, list[RolloutJob]]:
    """The env dies after publishing round 0's jobs, before storing that it did; returns the
    restarted scheduler (same buckets) and the jobs published."""
    scheduler = await _scheduler(bus, tmp_path, wait_s=60.0)
    update = scheduler.state.update

    async def crash_on_store(key, fn):
        raise ConnectionError("killed")

    scheduler.state.update = crash_on_store  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        await scheduler.tick()
    jobs = await events(bus, Subjects.ROLLOUT_JOBS, "JOBS", 3, RolloutJob)
    scheduler.state.update = update  # type: ignore[method-assign]
    return Scheduler(scheduler.pool, bus, scheduler.state, scheduler.models, scheduler.cfg, seed=0,
                     pool_ready=scheduler.pool_ready), jobs


async def test_a_release_published_but_not_stored_before_a_crash_does_not_wait_for_reports_that_came(
        bus, tmp_path) -> None:
    restarted, jobs = await _crashed_after_publishing(bus, tmp_path)
    # the first report is handled before the restarted env re-releases round 0 (on that report's tick):
    # the same draw, the same job ids, de-duplicated by the stream, so no job runs twice
    for job in jobs:
        await restarted.on_report(TaskReport(job_id=job.job_id, round=0))
    state, _ = await restarted.state.get("scheduler")
    assert state.next_round == 1 and list(state.open_jobs) == [] and list(state.reported_early) == []
    await _trained_on(restarted, 0)
    state, _ = await restarted.state.get("scheduler")
    assert state.next_round == 2  # round 1 released at once, not after the 60 s bound
    assert {j.round for j in await events(bus, Subjects.ROLLOUT_JOBS, "JOBS", 3, RolloutJob)} == {1}


async def test_a_re_release_after_the_duplicate_window_runs_again_and_is_awaited(bus, tmp_path) -> None:
    restarted, jobs = await _crashed_after_publishing(bus, tmp_path)
    publish = bus.publish

    async def past_the_window(subject, message, msg_id, headers=None):  # the stream no longer knows the ids
        return await publish(subject, message, f"{msg_id}/later", headers)

    bus.publish = past_the_window  # type: ignore[method-assign]
    try:
        await restarted.on_report(TaskReport(job_id=jobs[0].job_id, round=0))  # re-releases round 0
    finally:
        bus.publish = publish  # type: ignore[method-assign]
    assert {j.job_id for j in await events(bus, Subjects.ROLLOUT_JOBS, "JOBS", 3, RolloutJob)} == {
        j.job_id for j in jobs}  # stored again: every job runs a second time
    state, _ = await restarted.state.get("scheduler")
    assert jobs[0].job_id in state.open_jobs  # so its second report is awaited like the others
    for job in jobs[1:]:
        await restarted.on_report(TaskReport(job_id=job.job_id, round=0))
    await _trained_on(restarted, 0)
    state, _ = await restarted.state.get("scheduler")
    assert state.next_round == 1 and list(state.open_jobs) == [jobs[0].job_id]
    await restarted.on_report(TaskReport(job_id=jobs[0].job_id, round=0))
    state, _ = await restarted.state.get("scheduler")
    assert state.next_round == 2
