"""The round scheduler: publishes rollout jobs for N sampled active tasks plus every pending
candidate (arXiv 2602.02488, "one round").

* sync (faithful to the paper): round r+1 is released only when both the policy and the reward
  model have announced a version trained on round r, and the env has handled the task report of
  every job of round r (bounded by ``sync_report_wait_s``): the next draw's weights and its pending
  candidates then come from all of round r, whatever the timing, so a seed repeats its run.
* async: keeps at most ``max_jobs_in_flight`` jobs published and not yet reported, each asking
  for a policy at most ``max_staleness`` versions behind the latest.

Progress (next round, open jobs) is stored in KV so a restart neither repeats nor skips a round;
job ids are stable (``r<round>/<slot>/v<version>``, `services.common.rounds.job_id`) so a re-publish after a crash is de-duplicated.
Several env replicas: only the holder of the scheduler lease releases rounds (`services.env.lease`);
it re-checks the lease just before publishing, and a release whose round another replica stored
meanwhile leaves the state as that one wrote it (the jobs' ids and ``Nats-Msg-Id`` make a repeated
publish of the same draw a duplicate). Task reports and model versions may be handled by any replica.
A report handled for such a job before the re-publish is remembered (``reported_early``), so the
job is not opened again to wait for a report that already came (unless the re-publish came after
the duplicate window and was stored: then the job runs again and its new report is awaited).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from rlanything.v1.env_pb2 import SchedulerState, TaskSlot
from prometheus_client import Counter
from rlanything.v1.events_pb2 import CandidateCheck, ModelVersion, RolloutJob, RoundMetrics, SamplingParams, TaskReport

from services.common.bus import Delivery, EventBus
from services.common.config import LoopConfig, SchedulerConfig
from services.common.kv import ProtoBucket
from services.common.rounds import candidate_key, job_id, role_name, round_ready
from services.common.streams import EVAL_SPLITS, Subjects
from services.env.disjoint import digest_value, round_overlap
from services.env.lease import LeaderLease
from services.env.pool import TaskPool, spec_of
from services.env.slots import find_version, ref_of

__all__ = ["Scheduler", "band_weights", "drawable", "weighted_sample", "candidate_released"]

log = logging.getLogger("rlanything.env.scheduler")
EVAL_OVERLAP = Counter("rla_env_eval_overlap_total",
                       "Train instances released that are held-out or OOD instances (0 by construction).")
REDRAWN = Counter("rla_env_instances_redrawn_total",
                  "Per-rollout train instances drawn again because they were held-out or OOD instances.")
T = TypeVar("T")


def candidate_released(released: Sequence[str], slot_id: str, version: int) -> bool:
    """Has a rollout job for this pending candidate been published already (sync or async)?

    One job decides a candidate. A second one, released while the first was in flight, could
    find the candidate already rejected and dropped (measured: NOT_FOUND five times, the job
    dead-lettered and its round never completed).
    """
    return candidate_key(slot_id, version) in released


def band_weights(slots: Sequence[TaskSlot], low: float, high: float, out_of_band: float) -> list[float]:
    """Sampling weight of each train slot: 1 when its last acc lies in [low, high] or is not
    known yet, ``out_of_band`` otherwise (1 = uniform sampling, the paper's scheduler).

    A curriculum in the spirit of DAPO's dynamic sampling and prime-rl's difficulty filter: a task
    whose G rollouts all win or all lose gives no advantage and no RM sample; under a sharpening
    policy most FrozenLake tasks are all-or-nothing. Out-of-band tasks are still drawn now and
    then, so their reports keep asking the environment loop for harder/easier variants.
    """
    return [1.0 if (not s.has_acc or low <= s.last_acc <= high) else out_of_band for s in slots]


def drawable(slots: Sequence[TaskSlot], skip_pending: bool) -> list[TaskSlot]:
    """The train slots a round may draw its N tasks from: all of them, or (``skip_pending``) those
    without a pending candidate variant.

    A slot gets a candidate only after a report out of band, and the candidate's own G rollouts
    (released every round until it is decided) both test the variant and, with
    ``critic.candidate_samples``, train the models; drawing the parent again meanwhile mostly repeats
    an all-win or all-lose group, which trains nothing.
    """
    return [s for s in slots if not (skip_pending and s.HasField("pending"))]


def weighted_sample(rng: random.Random, items: Sequence[T], weights: Sequence[float], n: int) -> list[T]:
    """``min(n, len(items))`` distinct items drawn with probability ∝ weight, without replacement
    (Efraimidis & Spirakis 2006: the n largest keys u^(1/w)); weights must be > 0.

    Raises:
        ValueError: lengths differ or a weight is not positive.
    """
    if len(items) != len(weights):
        raise ValueError(f"{len(items)} items but {len(weights)} weights")
    if any(w <= 0 for w in weights):
        raise ValueError(f"weights must be > 0, got {min(weights)}")
    keys = [rng.random() ** (1.0 / w) for w in weights]
    order = sorted(range(len(items)), key=lambda i: keys[i], reverse=True)
    return [items[i] for i in order[: min(n, len(items))]]


class Scheduler:
    """Publishes `RolloutJob` events; call `tick()` whenever something may have unblocked it."""

    def __init__(self, pool: TaskPool, bus: EventBus, state: ProtoBucket, models: ProtoBucket,
                 cfg: SchedulerConfig, seed: int, pool_ready: asyncio.Event, loop: LoopConfig | None = None,
                 accept_band: tuple[float, float] = (0.2, 0.8), per_rollout: frozenset[str] = frozenset(),
                 before_release: Callable[[], Awaitable[object]] | None = None,
                 lease: LeaderLease | None = None) -> None:
        self.lease = lease
        """Several env replicas: only the holder of this lease releases rounds (`services.env.lease`);
        None = this process alone schedules."""
        self.before_release = before_release
        """Sync: awaited just before a round is released (``loop.reproducible``: apply the held reports
        of the last round, `services.env.held_reports`, when some never came within the wait)."""
        self.per_rollout = per_rollout
        """Families whose train rollouts each play their own instance (counted per rollout in ``eval/overlap``)."""
        self.pool_ready = pool_ready
        """Set once every configured slot exists: no round is released from a partial pool (TextWorld
        games compile for minutes while model versions already arrive)."""
        self.pool = pool
        self.bus = bus
        self.state = state
        self.models = models
        self.cfg = cfg
        self.loop = loop or LoopConfig()
        """The shared loop section: ``mode`` (sync/async) and ``rounds``."""
        self.seed = seed
        self.accept_band = accept_band
        """The env's acceptance band (``env.adaptation.band_low/high``), sent with each candidate job."""
        self._lock = asyncio.Lock()
        self._waiting: tuple[int, float] | None = None
        """Sync: (round, monotonic s) since which that round has waited for reports of the last one."""
        self._wake: set[asyncio.Task] = set()

    async def _model_round(self, role: str) -> tuple[int, int]:
        version, _ = await self.models.get(role)
        return (-1, 0) if version is None else (int(version.trained_on_round), int(version.version))

    async def on_model_version(self, event: ModelVersion, delivery: Delivery) -> None:
        """Consumer handler for `rla.models.>`: remember the latest version per role, then tick."""
        role = role_name(event.role)
        if role is None:
            return

        def newer(current: ModelVersion | None) -> ModelVersion:
            return event if current is None or event.version >= current.version else current

        await self.models.update(role, newer)
        await self.tick()

    async def open_jobs(self) -> list[str]:
        """The jobs released and not yet reported (sync: those of the last round)."""
        state, _ = await self.state.get("scheduler")
        return list(state.open_jobs) if state is not None else []

    async def on_report(self, report: TaskReport) -> None:
        """A job was reported by the critic and its report handled: it is no longer open (async: in
        flight; sync: awaited before the next round)."""
        def drop(s: SchedulerState | None) -> SchedulerState:
            new = SchedulerState()
            if s is not None:
                new.CopyFrom(s)
            if report.job_id in new.open_jobs:
                new.open_jobs.remove(report.job_id)
            elif report.round >= new.next_round and report.job_id not in new.reported_early:
                new.reported_early.append(report.job_id)  # its release was published, then not stored
            return new

        async with self._lock:  # after the release that opened it has stored it
            await self.state.update("scheduler", drop)
        await self.tick()

    def _reports_pending(self, state: SchedulerState) -> bool:
        """Sync: must round ``state.next_round`` still wait for reports of the last round? Arms a
        wake-up at the end of ``sync_report_wait_s``; after it, logs what is missing and says no."""
        if not state.open_jobs:
            self._waiting = None
            return False
        round_ = int(state.next_round)
        if self._waiting is None or self._waiting[0] != round_:
            self._waiting = (round_, time.monotonic())
            task = asyncio.get_running_loop().create_task(self._tick_after(self.cfg.sync_report_wait_s))
            self._wake.add(task)
            task.add_done_callback(self._wake.discard)
        if time.monotonic() - self._waiting[1] < self.cfg.sync_report_wait_s:
            return True
        log.warning("round released without every report of the last round",
                    extra={"round": round_, "missing": len(state.open_jobs), "first_missing": state.open_jobs[0],
                           "waited_s": self.cfg.sync_report_wait_s})
        return False

    async def _tick_after(self, delay_s: float) -> None:
        """Tick once ``delay_s`` has passed; a tick that fails (NATS restarting) is retried every
        second, since no other event may come to release the round."""
        await asyncio.sleep(delay_s)
        while True:
            try:
                await self.tick()
                return
            except Exception:  # noqa: BLE001 - logged; the round must still be released
                log.exception("tick after the report wait failed; retrying in 1 s")
                await asyncio.sleep(1.0)

    def close(self) -> None:
        """Cancel the pending wake-ups (service stop)."""
        for task in list(self._wake):
            task.cancel()

    async def tick(self) -> int:
        """Release what may be released now; returns the number of jobs published (0 on a replica
        that does not hold the scheduler lease)."""
        if not self.cfg.enabled or not self.pool_ready.is_set() or not self.leads():
            return 0
        async with self._lock:
            state, _ = await self.state.get("scheduler")
            state = state or SchedulerState()
            if self.loop.rounds and state.next_round >= self.loop.rounds:
                return 0
            policy_round, policy_version = await self._model_round("policy")
            reward_round, _ = await self._model_round("reward")
            if self.loop.mode == "sync":
                if not round_ready(state.next_round, policy_round, reward_round) or self._reports_pending(state):
                    return 0
                if self.before_release is not None:  # loop.reproducible: the held reports decide first
                    await self.before_release()
                return await self._release_round(state, min_policy_version=policy_version)
            if len(state.open_jobs) + self.cfg.tasks_per_round > self.cfg.max_jobs_in_flight and state.open_jobs:
                return 0
            return await self._release_round(state, min_policy_version=max(0, policy_version - self.cfg.max_staleness))

    def leads(self) -> bool:
        """May this process release rounds: it holds the lease, or there is none (one env process)."""
        return self.lease is None or self.lease.held()

    async def _release_round(self, state: SchedulerState, min_policy_version: int) -> int:
        round_ = int(state.next_round)
        every = await self.pool.slots()
        slots = [s for s in every if s.split == "train"]
        rng = random.Random(f"{self.seed}/{round_}")
        eligible = drawable(slots, self.cfg.skip_pending)
        weights = band_weights(eligible, self.cfg.band_low, self.cfg.band_high, self.cfg.out_of_band_weight)
        chosen = weighted_sample(rng, eligible, weights, self.cfg.tasks_per_round)
        jobs = []
        for slot in chosen:
            jobs.append(self._job(round_, slot, slot.active, False, min_policy_version, rng))
        for slot in slots:
            if slot.HasField("pending") and not candidate_released(state.candidate_jobs, slot.slot_id,
                                                                   slot.pending.version):
                jobs.append(self._job(round_, slot, slot.pending, True, min_policy_version, rng))
        for slot in every:  # a live task waiting for admission: its own G rollouts decide (acceptance.live_verdict)
            if slot.split == "live_pending" and not candidate_released(state.candidate_jobs, slot.slot_id,
                                                                       slot.active.version):
                jobs.append(self._job(round_, slot, slot.active, True, min_policy_version, rng))
        if self.is_eval_round(round_):
            for slot in every:
                if slot.split in EVAL_SPLITS:
                    jobs.append(self._job(round_, slot, slot.active, False, min_policy_version, rng,
                                          self.cfg.eval_group_size))
        if self.lease is not None and not await self.lease.renew():  # lost while choosing: the new holder releases it
            log.warning("scheduler lease lost before publishing; round left to its new holder", extra={"round": round_})
            return 0
        await self._publish_overlap(round_, every, jobs)
        stored = set()  # not a duplicate of a publish before a crash: these jobs run (again) and report
        for job in jobs:
            job.jobs_in_round = len(jobs)
            ack = await self.bus.publish(Subjects.ROLLOUT_JOBS, job, msg_id=job.job_id)
            if not getattr(ack, "duplicate", False):
                stored.add(job.job_id)

        fenced = []

        def advance(s: SchedulerState | None) -> SchedulerState:
            new = SchedulerState()
            if s is not None:
                new.CopyFrom(s)
            if new.next_round != round_:  # another replica released this round (its lease outlived ours)
                fenced.append(int(new.next_round))
                return new
            new.next_round = round_ + 1
            new.jobs_published += len(jobs)
            # one job decides a candidate: a second one (released before the first one's report was
            # handled) could find it rejected and dropped — NOT_FOUND, dead-lettered, a round that never ends
            new.candidate_jobs.extend(candidate_key(j.task.slot_id, j.task.version) for j in jobs if j.is_candidate)
            if self.loop.mode == "sync":  # what was still missing was waited for (sync_report_wait_s)
                del new.open_jobs[:]
            early = set(new.reported_early) - stored  # reported, and not run again (de-duplicated)
            new.open_jobs.extend(j.job_id for j in jobs if j.job_id not in early)
            del new.reported_early[:]
            return new

        await self.state.update("scheduler", advance)
        if fenced:
            log.warning("round released by another scheduler meanwhile; state left as it stored it",
                        extra={"round": round_, "next_round": fenced[-1]})
            return 0
        log.info("round released", extra={"round": round_, "jobs": len(jobs),
                                          "candidates": sum(j.is_candidate for j in jobs)})
        return len(jobs)

    async def _publish_overlap(self, round_: int, slots: Sequence[TaskSlot], jobs: Sequence[RolloutJob]) -> None:
        """Publish what the round's train jobs play against the evaluation instances
        (`disjoint.round_overlap`: ``eval/overlap``, 0 by construction) on ``rla.metrics.env``, with the
        evaluation set's identity: ``eval/set_digest`` (`disjoint.digest_value` of its instance keys)
        and ``eval/set_instances``."""
        by_id = {s.slot_id: s for s in slots}
        drawn = []
        for job in jobs:
            if job.split != "train":
                continue
            slot = by_id[job.task.slot_id]
            version = find_version(slot, job.task.version)
            drawn.append((self.pool.family(slot.family), spec_of(slot.family, version), list(job.seeds),
                          slot.family in self.per_rollout))
        held_out = await self.pool.held_out_keys()
        values = await asyncio.to_thread(round_overlap, drawn, held_out)
        values.update({"eval/set_digest": digest_value(held_out), "eval/set_instances": float(len(held_out))})
        EVAL_OVERLAP.inc(values["eval/overlap"])
        REDRAWN.inc(values["env/redrawn_instances"])
        if values["eval/overlap"]:
            log.warning("train jobs play held-out or OOD instances", extra={"round": round_, **values})
        await self.bus.publish(Subjects.METRICS_ENV, RoundMetrics(round=round_, values=values,
                                                                  published_unix_s=time.time()),
                               msg_id=f"env/{round_}")

    def is_eval_round(self, round_: int) -> bool:
        """Held-out and OOD slots are rolled out every ``eval_every`` rounds and in the last one."""
        if not self.cfg.eval_every:
            return False
        return round_ % self.cfg.eval_every == 0 or (self.loop.rounds > 0 and round_ == self.loop.rounds - 1)

    def _job(self, round_: int, slot, version, is_candidate: bool, min_policy_version: int,
             rng: random.Random, group_size: int | None = None) -> RolloutJob:
        family = self.pool.family(slot.family)
        g = group_size or self.cfg.group_size
        check = None
        if is_candidate and version.direction:  # a variant (a live task awaiting admission has no direction)
            check = CandidateCheck(direction=version.direction, parent_acc=version.parent_acc,
                                   band_low=self.accept_band[0], band_high=self.accept_band[1])
        return RolloutJob(
            job_id=job_id(round_, slot.slot_id, version.version), round=round_, task=ref_of(slot, version),
            group_size=g,
            sampling=SamplingParams(temperature=self.cfg.temperature, top_p=self.cfg.top_p,
                                    max_new_tokens=self.cfg.max_new_tokens),
            min_policy_version=min_policy_version, max_steps=family.max_steps,
            seeds=[rng.randrange(2**31) for _ in range(g)],
            is_candidate=is_candidate, split=slot.split, candidate_check=check)
