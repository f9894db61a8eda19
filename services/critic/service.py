"""The critic service process (a thin shell over the pure modules of this package).

Flow per judged trajectory (`rla.traj.judged`, durable consumer ``critic-judged``):
validate → store it in the groups bucket under its job and rollout index → ack. When the job's G
rollouts are in, or ``group_timeout_s`` after its first one was stored (partial), the group closes:
`evaluate_group` computes everything, then the critic publishes the policy batch, the RM batch
and the task report (stable msg ids ``<job>/policy``, ``<job>/reward``, ``<job>``), stores the
report and the group's statistics, publishes the round's updated `RoundMetrics` (msg id
``critic/<round>/<groups closed in the round>``) and deletes the group's keys. Every step is
idempotent, so a crash anywhere is repaired by the restart: open groups are read back from KV,
and a group found both stored and reported is finished (its metrics published again under the same
id, its keys deleted) without being evaluated again: its keys may be partly deleted.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable

import grpc
from rlanything.v1 import critic_pb2_grpc
from rlanything.v1.ingest_pb2 import EpisodesErased
from rlanything.v1.events_pb2 import JudgedTrajectory, ModelVersion, RoundMetrics

from services.common.bus import CONNECTION_ERRORS, Consumer, Delivery, EventBus
from services.common.kv import open_bucket
from services.common.config import CriticServiceConfig, RunConfig
from services.common.config.env import CODE_FAMILIES
from services.common.runtime import Service
from services.common.sandbox import Sandbox
from services.common.sandbox.selftest import require_containment
from services.common.streams import Subjects
from services.common.topology import Consumers
from services.critic.group_eval import evaluate_group
from services.critic.unit_test_eval import TaskChecks, score_tests
from services.critic.grpc_service import SERVICE_NAME, CriticServicer
from services.critic.ledger import Ledger
from services.critic.live import LiveCritic
from services.critic.store import GroupStore, OpenGroup, StatsStore
from services.critic.telemetry import GROUPS_CLOSED, GROUPS_OPEN, SAMPLES_EMITTED, TRAJECTORIES, export_round
from services.critic.validation import check_judged, check_same_group

__all__ = ["CriticService"]

_TIMEOUT_FAILURES_BUDGET = 5
"""Consecutive failed timeout sweeps before the process gives up (failures because NATS is slow or
away are not counted: the service's link watch decides when the process gives up on NATS)."""


class CriticService(Service):
    """Critic service: task groups, integrated advantages, consistency rewards, task reports, metrics."""

    name = "critic"

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self.cfg: CriticServiceConfig = config.critic
        self.ledger = Ledger()
        self.open: dict[str, OpenGroup] = {}
        self.latest_policy_version: int | None = None
        self.sweep_period_s = min(1.0, self.cfg.group_timeout_s / 4)
        """Derived: how often open groups are checked for the partial timeout."""
        self._lock = asyncio.Lock()  # one group change at a time (consumer vs timeout sweep)
        self.sandbox: Sandbox | None = Sandbox(self.cfg.sandbox) if self.cfg.unit_tests else None
        """Runs the programs on the generated unit tests (critic.unit_tests); its self-test runs before the
        service serves (under bwrap a failed check stops the start)."""
        if self.sandbox is not None:
            try:
                require_containment(self.sandbox, [os.getcwd()] if os.getcwd() != "/" else [])
            except BaseException:
                self.sandbox.close()
                raise

    async def on_start(self, bus: EventBus) -> None:
        self.bus = bus
        self.groups = await GroupStore.open(bus.js, self.cfg.groups_bucket, replicas=bus.nats_cfg.stream_replicas)
        self.stats = await StatsStore.open(bus.js, self.cfg.stats_bucket, replicas=bus.nats_cfg.stream_replicas)
        policy = await self.stats.load(self.ledger)
        self.latest_policy_version = None if policy is None else int(policy.version)
        self.open = await self.groups.load()
        for group in list(self.open.values()):
            if self.ledger.is_closed(group.job_id):  # reported, then crashed before (or while) deleting its keys
                await self._finish_close(group)
            elif group.is_complete():  # all G stored, then crashed before closing
                await self._close(group, partial=False)
            else:
                self.ledger.mark_open(group.job_id, group.round)
        GROUPS_OPEN.set(len(self.open))
        self.log.info("critic state loaded", extra={"closed_groups": len(self.ledger.reports),
                                                    "open_groups": len(self.open)})
        self.background.append(asyncio.create_task(self._sweep_timeouts(), name="group-timeouts"))
        self.live = LiveCritic(await open_bucket(bus.js, self.cfg.live.baselines_bucket,
                                                     replicas=bus.nats_cfg.stream_replicas), self.cfg, bus)
        self.live.latest_policy_version = self.latest_policy_version or 0

    def grpc_services(self) -> list[tuple[str, Callable[[grpc.aio.Server], None]]]:
        servicer = CriticServicer(self.ledger)
        return [(SERVICE_NAME, lambda s: critic_pb2_grpc.add_CriticServicer_to_server(servicer, s))]

    async def consumers(self, bus: EventBus) -> list[Consumer]:
        return [
            bus.consumer(**Consumers.CRITIC_JUDGED.binding(), message_type=JudgedTrajectory, handler=self._on_judged),
            bus.consumer(**Consumers.CRITIC_POLICY_VERSIONS.binding(), message_type=ModelVersion,
                         handler=self._on_policy_version),
            bus.consumer(**Consumers.CRITIC_LIVE.binding(), message_type=JudgedTrajectory, handler=self._on_live),
            bus.consumer(**Consumers.CRITIC_ERASURES.binding(), message_type=EpisodesErased, handler=self._on_erased),
        ]

    async def _on_erased(self, erased: EpisodesErased, delivery: Delivery) -> None:
        """Consumer handler for `rla.ingest.erased.<tenant>`: the live critic forgets the erased
        trajectories' ids (its seen-lists), so an episode posted again is evaluated again."""
        await self.live.forget(erased.tenant, list(erased.trajectory_ids))

    async def _on_live(self, judged: JudgedTrajectory, delivery: Delivery) -> None:
        """Consumer handler for `rla.traj.live.judged.<tenant>` (`live.LiveCritic`)."""
        await self.live.on_judged(judged, delivery)

    async def _on_judged(self, judged: JudgedTrajectory, delivery: Delivery) -> None:
        """Consumer handler for `rla.traj.judged`: store the rollout; close its group when full."""
        check_judged(judged)
        t = judged.trajectory
        async with self._lock:
            if self.ledger.is_closed(t.job_id):
                TRAJECTORIES.labels("late").inc()
                self.log.info("trajectory after its group was reported; dropped",
                              extra={"trajectory_id": t.trajectory_id, "deliveries": delivery.num_delivered})
                return
            group = self.open.get(t.job_id)
            if group is not None:
                check_same_group(group.first, judged)
            await self.groups.put(judged)
            if group is None:
                group = OpenGroup(t.job_id, int(t.round), int(t.group_size), time.time())
                self.open[t.job_id] = group
                self.ledger.mark_open(t.job_id, group.round)
                GROUPS_OPEN.set(len(self.open))
            TRAJECTORIES.labels("repeated" if t.rollout_index in group.records else "stored").inc()
            group.records[int(t.rollout_index)] = judged
            complete = group.is_complete()
            if complete and not self._tested(group):
                await self._close(group, partial=False)
                return
        if complete:  # the group's programs run on its generated tests outside the lock: other groups go on
            scored = await self._score(group)
            async with self._lock:
                if self.open.get(group.job_id) is group:  # not closed meanwhile (the timeout sweep)
                    await self._close(group, partial=False, scored=scored)

    def _tested(self, group: OpenGroup) -> bool:
        """Does this group's RM write unit tests that the critic runs (a code task, critic.unit_tests)?"""
        return self.sandbox is not None and group.first.trajectory.task.family in CODE_FAMILIES

    async def _score(self, group: OpenGroup) -> tuple[list[list[bool]], TaskChecks]:
        """passes_NK of the group's programs on its generated tests and the task's own checks of them
        (`unit_test_eval.score_tests`)."""
        assert self.sandbox is not None
        recs = sorted(group.records.values(), key=lambda r: r.trajectory.rollout_index)
        start = time.perf_counter()
        passes, checks = await score_tests(self.sandbox, recs)
        self.log.info("unit tests scored", extra={"job_id": group.job_id, "programs": len(passes),
                                                  "tests": len(passes[0]) if passes else 0,
                                                  "invalid_inputs": sum(checks.invalid_inputs),
                                                  "seconds": round(time.perf_counter() - start, 3)})
        return passes, checks

    async def _on_policy_version(self, event: ModelVersion, delivery: Delivery) -> None:
        """Consumer handler for `rla.models.policy`: remember the newest version (staleness metric)."""
        if self.latest_policy_version is None or event.version > self.latest_policy_version:
            await self.stats.put_policy_version(event)
            self.latest_policy_version = int(event.version)
            self.live.latest_policy_version = int(event.version)

    async def _close(self, group: OpenGroup, partial: bool,
                     scored: tuple[list[list[bool]], TaskChecks] | None = None) -> None:
        """Publish a group's outputs, store its report, update its round, delete its keys (a group whose
        generated tests were not scored yet, partial or reloaded after a restart, is scored here).
        A group already reported (its keys left by a crash or a failed delete) is only finished
        (`_finish_close`): its stored statistics stand."""
        if self.ledger.is_closed(group.job_id):
            await self._finish_close(group)
            return
        if scored is None and self._tested(group):
            scored = await self._score(group)
        out = evaluate_group(list(group.records.values()), self.cfg, partial=partial,
                             latest_policy_version=self.latest_policy_version,
                             unit_test_passes=None if scored is None else scored[0],
                             unit_test_checks=TaskChecks() if scored is None else scored[1])
        report = out.report
        await self.bus.publish(Subjects.SAMPLES_POLICY, out.policy, msg_id=out.policy.batch_id)
        await self.bus.publish(Subjects.SAMPLES_REWARD, out.reward, msg_id=out.reward.batch_id)
        await self.bus.publish(Subjects.CRITIC_TASK, report, msg_id=report.job_id)
        stats = RoundMetrics(round=report.round, values=out.stats, published_unix_s=time.time())
        await self.stats.put_closed(report, stats)
        self.ledger.close(report, stats)
        await self._finish_close(group)
        GROUPS_CLOSED.labels("partial" if partial else "complete").inc()
        SAMPLES_EMITTED.labels("policy").inc(len(out.policy.samples))
        SAMPLES_EMITTED.labels("reward").inc(len(out.reward.samples))
        self.log.info("group closed", extra={"job_id": report.job_id, "round": report.round, "acc": report.acc,
                                             "rollouts": report.rollouts, "partial": partial,
                                             "policy_samples": len(out.policy.samples),
                                             "reward_samples": len(out.reward.samples)})

    async def _finish_close(self, group: OpenGroup) -> None:
        """The steps of a close after its report is stored: publish the round's metrics (msg id
        ``critic/<round>/<groups closed in the round>``, so a repeat is de-duplicated), delete the
        group's keys, forget it. A group found reported with keys left (a kill -9 between or during
        the deletes, a NATS outage) comes here without being evaluated again: the rollouts still
        stored may be fewer than those it was reported with."""
        round_ = group.round
        metrics = self.ledger.round_metrics(round_)
        await self.bus.publish(Subjects.METRICS_ROUND, metrics,
                               msg_id=f"critic/{round_}/{self.ledger.closed_in_round(round_)}")
        export_round(round_, metrics.values)
        await self.groups.delete(group.job_id, sorted(group.records))
        self.open.pop(group.job_id, None)
        GROUPS_OPEN.set(len(self.open))

    async def _sweep_timeouts(self) -> None:
        """Close, as partial, every open group older than ``group_timeout_s`` (background task)."""
        failures = 0
        while True:
            await asyncio.sleep(self.sweep_period_s)
            try:
                async with self._lock:
                    now = time.time()
                    for group in list(self.open.values()):
                        if now - group.first_stored_unix_s >= self.cfg.group_timeout_s:
                            await self._close(group, partial=True)
                failures = 0
            except CONNECTION_ERRORS as exc:
                self.log.warning("timeout sweep failed; NATS slow or away, retrying", extra={"error": repr(exc)})
            except Exception as exc:  # noqa: BLE001 - retried next sweep; re-raised once the budget is spent
                failures += 1
                self.log.warning("timeout sweep failed", extra={"failures": failures, "error": repr(exc)})
                if failures >= _TIMEOUT_FAILURES_BUDGET:
                    raise

    async def on_stop(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
