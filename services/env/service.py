"""The env service process: gRPC `Environment`, the task pool, adaptation and the scheduler."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Callable

import grpc
from rlanything.v1 import env_pb2_grpc
from rlanything.v1.env_pb2 import SchedulerState, TaskSlot
from rlanything.v1.events_pb2 import ModelVersion, TaskReport
from rlanything.v1.ingest_pb2 import LiveTaskCandidate

from services.common.bus import CONNECTION_ERRORS, Consumer, Delivery, EventBus
from services.common.config import EnvServiceConfig, RunConfig
from services.common.kv import ProtoBucket, check_key, open_bucket
from services.common.runtime import Service
from services.common.topology import Buckets, Consumers
from services.env.adaptation import Adaptation
from services.env.code_tasks import CodeTasks
from services.env.decisions import check_report
from services.env.families.base import TaskFamily
from services.env.families.code_family import CodeFamily
from services.env.families.registry import build_family
from services.env.families.live import LiveFamily
from services.env.held_reports import HeldReports
from services.env.grpc_service import SERVICE_NAME, EnvironmentServicer
from services.env.lease import LeaderLease
from services.env.live_tasks import LiveTasks
from services.env.pool import TaskPool
from services.env.model_proposer import ModelProposer
from services.env.proposer import ParametricProposer, check_same_task_knobs
from services.env.scheduler import Scheduler
from services.env.sessions import SessionStore


_HELD = Delivery(subject="rla.critic.task", stream_seq=0, num_delivered=1, msg_id=None)
"""The delivery a held report is applied with (its own was acked when it was held)."""


class EnvService(Service):
    """Environment service: task families, episode sessions, the task pool and the round scheduler."""

    name = "env"

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self.cfg: EnvServiceConfig = config.env
        self.families: dict[str, TaskFamily] = {f.type: build_family(f, self.cfg.cache_dir, self.cfg.sandbox)
                                                 for f in self.cfg.families}
        for family in self.families.values():  # the code family's sandbox: no isolation, no service
            family.start()
        check_same_task_knobs(self.families.values(), self.cfg.adaptation.same_task_knobs)
        self.per_rollout = frozenset(f.type for f in self.cfg.families if f.train_instances == "rollout")
        """Families whose train rollouts each play their own instance (`FamilyConfig.train_instances`)."""
        self.sessions = SessionStore(self.cfg.session_idle_timeout_s, self.cfg.max_sessions,
                                     address=self.cfg.advertise_address)
        self.servicer: EnvironmentServicer | None = None
        self.pool_ready = asyncio.Event()

    async def on_start(self, bus: EventBus) -> None:
        self.bus = bus
        self.pool = TaskPool(await ProtoBucket.open(bus.js, self.cfg.pool_bucket, TaskSlot, replicas=bus.nats_cfg.stream_replicas), self.families)
        state = await ProtoBucket.open(bus.js, Buckets.ENV_SCHEDULER.name(pool_bucket=self.cfg.pool_bucket),
                                       SchedulerState, replicas=bus.nats_cfg.stream_replicas)
        models = await ProtoBucket.open(bus.js, Buckets.ENV_MODELS.name(pool_bucket=self.cfg.pool_bucket), ModelVersion,
                                        replicas=bus.nats_cfg.stream_replicas)
        ttl_s = self.cfg.scheduler.lease_ttl_s
        self.lease = LeaderLease(await open_bucket(bus.js, Buckets.ENV_LEADER.name(pool_bucket=self.cfg.pool_bucket),
                                                   ttl_s=ttl_s, replicas=bus.nats_cfg.stream_replicas),
                                 check_key("scheduler"),
                                 self.cfg.advertise_address or f"{socket.gethostname()}:{os.getpid()}", ttl_s)
        self.scheduler = Scheduler(self.pool, bus, state, models, self.cfg.scheduler, self.config.seed,
                                   self.pool_ready, self.config.loop,
                                   accept_band=(self.cfg.adaptation.band_low, self.cfg.adaptation.band_high),
                                   per_rollout=self.per_rollout,
                                   before_release=self._apply_held if self.config.loop.reproducible else None,
                                   lease=self.lease)
        self.held: HeldReports | None = None
        """``loop.reproducible``: the open round's reports, applied in one order once all are in."""
        if self.config.loop.reproducible:
            self.held = HeldReports(await ProtoBucket.open(
                bus.js, Buckets.ENV_HELD.name(pool_bucket=self.cfg.pool_bucket), TaskReport,
                replicas=bus.nats_cfg.stream_replicas))
        self.live: LiveTasks | None = None
        live_family = self.families.get("live")
        if isinstance(live_family, LiveFamily):  # tasks from a product's real failures (ingest)
            self.live = LiveTasks(await open_bucket(bus.js, Buckets.LIVE_TASKS.name(), replicas=bus.nats_cfg.stream_replicas), live_family, self.pool,
                                  self.cfg.live_heldout_every)
            loaded = await self.live.load()
            self.background.append(asyncio.create_task(self.live.refresh_loop(), name="live-tasks"))
            self.log.info("live tasks loaded", extra={"tasks": loaded})
        self.code_tasks: CodeTasks | None = None
        code_family = self.families.get("code")
        if isinstance(code_family, CodeFamily) and any(f.type == "code" and f.proposer == "model"
                                                       for f in self.cfg.families):  # written problems
            self.code_tasks = CodeTasks(await open_bucket(bus.js, Buckets.CODE_PROBLEMS.name(),
                                                       replicas=bus.nats_cfg.stream_replicas), code_family)
            loaded = await self.code_tasks.load()
            self.background.append(asyncio.create_task(self.code_tasks.refresh_loop(), name="code-problems"))
            self.log.info("written code problems loaded", extra={"problems": loaded})
        written = any(f.proposer == "model" for f in self.cfg.families)  # only text families (config checks)
        writer = ModelProposer(self.cfg.adaptation.model_proposer) if written else None
        self.adaptation = Adaptation(self.pool, bus, ParametricProposer(self.cfg.adaptation.bad_step_threshold,
                                                                        self.cfg.adaptation.reseed_tries,
                                                                        self.cfg.adaptation.same_task_first,
                                                                        self.cfg.adaptation.same_task_knobs),
                                     self.cfg.adaptation, self.live, writer, self.per_rollout,
                                     frozenset(f.type for f in self.cfg.families if f.proposer == "model"),
                                     self.code_tasks)
        self.background += [asyncio.create_task(self._seed_then_schedule(), name="pool-seed"),
                            asyncio.create_task(self._expire_sessions(), name="session-expiry"),
                            asyncio.create_task(self._lead(), name="scheduler-lease")]

    async def _lead(self) -> None:
        """Take or keep the scheduler lease every ``lease_ttl_s / 4`` and, while holding it, tick the
        scheduler every second: a task report or model version that another replica handled (the
        replicas share the consumers) reaches the round release this way. A renewal or tick that
        fails because NATS is away is retried on the next period; the lease is then no longer held
        once ``lease_ttl_s`` passed without a renewal."""
        renew_at = 0.0
        while True:
            was = self.lease.held()
            try:
                if time.monotonic() >= renew_at:
                    renew_at = time.monotonic() + self.lease.period_s
                    await self.lease.renew()
                if self.lease.held():
                    await self.scheduler.tick()
            except CONNECTION_ERRORS as exc:
                self.log.warning("scheduler lease or tick failed; retrying",
                                 extra={"error": f"{type(exc).__name__}: {exc}"})
            now = self.lease.held()
            if now != was:
                self.log.info("scheduler lease taken" if now else "scheduler lease lost",
                              extra={"holder": self.lease.holder, "ttl_s": self.lease.ttl_s})
            await asyncio.sleep(min(1.0, self.lease.period_s))

    async def _seed_then_schedule(self) -> None:
        """Seed the pool (idempotent) and release the first jobs; a step that fails because NATS is slow,
        hung or away is retried every second (the link watch decides when the process gives up on NATS)."""
        while not self.pool_ready.is_set():
            try:
                created = await self.pool.seed(self.cfg, self.config.seed)
            except CONNECTION_ERRORS as exc:
                self.log.warning("pool seeding failed; retrying", extra={"error": f"{type(exc).__name__}: {exc}"})
                await asyncio.sleep(1.0)
                continue
            self.log.info("task pool ready", extra={"slots_created": created})
            self.pool_ready.set()
        while True:
            try:
                await self.scheduler.tick()
                return
            except CONNECTION_ERRORS as exc:
                self.log.warning("first scheduler tick failed; retrying", extra={"error": f"{type(exc).__name__}: {exc}"})
                await asyncio.sleep(1.0)

    async def _expire_sessions(self) -> None:
        while True:
            await asyncio.sleep(min(30.0, self.cfg.session_idle_timeout_s / 2))
            self.sessions.expire()

    def grpc_services(self) -> list[tuple[str, Callable[[grpc.aio.Server], None]]]:
        servicer = self.servicer = EnvironmentServicer(self.pool, self.sessions, self.per_rollout)
        return [(SERVICE_NAME, lambda s: env_pb2_grpc.add_EnvironmentServicer_to_server(servicer, s))]

    async def consumers(self, bus: EventBus) -> list[Consumer]:
        live = [] if self.live is None else [
            bus.consumer(**Consumers.ENV_LIVE_CANDIDATES.binding(), message_type=LiveTaskCandidate,
                         handler=self._on_candidate)]
        return live + [
            bus.consumer(**Consumers.ENV_TASK_REPORTS.binding(), message_type=TaskReport, handler=self._on_report),
            bus.consumer(**Consumers.ENV_MODEL_VERSIONS.binding(), message_type=ModelVersion,
                         handler=self.scheduler.on_model_version),
        ]

    async def _on_candidate(self, candidate: LiveTaskCandidate, delivery: Delivery) -> None:
        await self.pool_ready.wait()
        assert self.live is not None
        await self.live.on_candidate(candidate, delivery)

    async def _on_report(self, report: TaskReport, delivery: Delivery) -> None:
        await self.pool_ready.wait()
        check_report(report)
        awaited = await self.scheduler.open_jobs() if self.held is not None else []
        if self.held is not None and report.job_id in awaited:  # loop.reproducible: decide in one order
            await self.held.hold(report)
            if set(awaited) == {report.job_id}:  # the round's last awaited report
                await self._apply_held()
        else:
            await self.adaptation.on_report(report, delivery)
        await self.scheduler.on_report(report)

    async def _apply_held(self) -> None:
        """Apply the held reports of the open round (`services.env.held_reports.apply_order`)."""
        if self.held is not None:
            await self.held.apply(lambda r: self.adaptation.on_report(r, _HELD))

    async def on_stop(self) -> None:
        if hasattr(self, "scheduler"):  # on_start may have failed before making it
            self.scheduler.close()
        leases = self.lease.acquired_total if hasattr(self, "lease") else 0
        self.log.info("env replica stopped", extra={"address": self.cfg.advertise_address, "calls": self.servicer.calls if self.servicer else {},
                                                    "scheduler_leases_taken": leases})
        self.sessions.close_all()
        for family in self.families.values():
            family.close()
