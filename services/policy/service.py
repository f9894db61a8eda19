"""The policy service process: rollout workers, the trainer, gRPC Generate, OpenAI endpoint."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import grpc
from rlanything.v1 import policy_pb2_grpc
from rlanything.v1.ingest_pb2 import EpisodesErased
from rlanything.v1.events_pb2 import PolicySampleBatch, RolloutJob

from services.common.bus import Consumer, Delivery, EventBus
from services.common.checkpoints import VersionStore
from services.common.config import PolicyServiceConfig, RunConfig
from services.common.errors import InvalidEventError, TransientError
from services.common.kv import ProtoBucket
from services.common.models.factory import build_generator
from services.common.models.generation import Generator, HFGenerator
from services.common.models.merging import MergingGenerator
from services.common.models.source import require_source
from services.common.request_limit import RequestLimit
from services.common.nats_server import free_port
from services.common.runtime import Service
from services.common.streams import Subjects
from services.common.topology import Buckets, Consumers
from services.common.data_parallel import join_process_group
from services.common.rank_group import lead_or_follow, require_trainer_role, stop_followers
from services.common.trainer import PPOLearner, Trainer, staleness_bounds
from services.common.version_follower import VersionFollower
from services.policy.env_clients import GrpcEnvClient
from services.policy.grpc_service import SERVICE_NAME, PolicyServicer
from services.common.http_server import embedded_server
from services.common.redaction import RegexRedactor
from services.policy.capture import Capturer
from services.policy.openai_api import build_app
from services.policy.rollout import MergedAgent, run_group, unreachable_version



class PolicyService(Service):
    """Policy service: generation backends, rollout workers, the policy trainer and its checkpoints."""

    name = "policy"

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self.cfg: PolicyServiceConfig = config.policy
        require_trainer_role("policy", self.cfg.role)  # before any model loads
        self.source = require_source("policy", self.cfg.model)
        self.generator: Generator = build_generator(self.cfg.model, self.source)
        self.learner: object = None
        """The trainer's learner once started (on rank 0 of several, the one that releases the others)."""
        self.serves = self.cfg.role in ("all", "rollout")
        self.trains = self.cfg.role in ("all", "trainer")
        self.admission = RequestLimit(self.cfg.max_pending_requests, "policy.max_pending_requests")
        """One bound for the OpenAI endpoint and gRPC Generate together."""
        self.merger = MergingGenerator(self.generator, self.cfg.max_batch)
        """Rollout jobs played at once share generate calls (``rollout.concurrent_jobs``)."""

    async def on_start(self, bus: EventBus) -> None:
        self.bus = bus
        self.versions = await VersionStore.open(bus)
        if self.trains:
            shard = join_process_group(self.cfg.ppo.collective_timeout_s)  # rank 0 of 1 without torchrun
            ppo = PPOLearner(HFGenerator(self.source, self.cfg.model.cache_dir, device=self.cfg.model.device),
                             self.cfg.ppo, self.cfg.checkpoint_dir, seed=self.config.seed, reference_source=self.source,
                             shard=shard)
            learner = self.learner = lead_or_follow(self, ppo)
            if learner is None:  # a following rank: rank 0 consumes the events
                self.trains = False
            else:
                store = await ProtoBucket.open(bus.js, Buckets.POLICY_SAMPLES.name(), PolicySampleBatch,
                                               replicas=bus.nats_cfg.stream_replicas)
                self.trainer = await Trainer.open(bus, "policy", learner, self.versions, store,
                                                  mode=self.config.loop.mode,
                                                  min_samples_async=self.cfg.ppo.min_samples_async,
                                                  **staleness_bounds(self.config))
                await self.trainer.ensure_initial_version(self.source)
        if self.serves:
            self.env = GrpcEnvClient(self.cfg.rollout.env_address,
                                     max_message_bytes=self.config.limits.max_message_bytes)
            self.follower = VersionFollower(self.versions, "policy", self.generator, self.log)
            await self.follower.load_latest()
            self.background.append(asyncio.create_task(self.follower.run(), name="version-watch"))
            port = self.cfg.openai_port or free_port()
            capturer, keys = None, {}
            if self.cfg.capture.enabled:  # tenants and redaction rules are the run's `ingest:` ones
                live = self.config.ingest
                capturer = Capturer(RegexRedactor(live.redaction.patterns, live.redaction.deny,
                                                   live.redaction.phone_regions), self.cfg.capture.queue_size)
                keys = live.tenant_keys()
                self.background.append(asyncio.create_task(capturer.run(bus), name="capture"))
            http = embedded_server(build_app(self.generator, self.source, capturer, keys, self.admission,
                                             self.cfg.openai_model_names),
                                   self.cfg.server.host, port, setting="policy.openai_port")
            self.http = http
            self.background.append(asyncio.create_task(http.serve(), name="openai-http"))
            self.log.info("openai endpoint", extra={"url": f"http://{self.cfg.server.host}:{port}/v1"})

    def grpc_services(self) -> list[tuple[str, Callable[[grpc.aio.Server], None]]]:
        if not self.serves:
            return []
        servicer = PolicyServicer(self.generator, self.cfg.max_batch, self.admission)
        return [(SERVICE_NAME, lambda s: policy_pb2_grpc.add_PolicyServicer_to_server(servicer, s))]

    async def consumers(self, bus: EventBus) -> list[Consumer]:
        out: list[Consumer] = []
        if self.serves:
            out.append(bus.consumer(**Consumers.POLICY_ROLLOUT.binding(), message_type=RolloutJob, handler=self.on_job, concurrent=True,
                                    # a fetch's jobs are played together; idle replicas take the next fetch
                                    fetch_batch=self.cfg.rollout.concurrent_jobs))
        if self.trains:
            out.append(bus.consumer(**Consumers.POLICY_TRAINER.binding(), message_type=PolicySampleBatch,
                                    handler=self.trainer.on_batch))
            out.append(bus.consumer(**Consumers.POLICY_ERASURES.binding(), message_type=EpisodesErased,
                                    handler=self._on_erased))
        return out

    async def _on_erased(self, erased: EpisodesErased, delivery: Delivery) -> None:
        """Consumer handler for `rla.ingest.erased.<tenant>`: purge the stored live batches of the erased
        episodes' trajectories that were not trained yet."""
        await self.trainer.forget_live([f"{t}/policy" for t in erased.trajectory_ids])

    async def on_job(self, job: RolloutJob, delivery: Delivery) -> None:
        """Roll the job's task out G times and publish the trajectories (then the job is acked)."""
        if not job.job_id or not job.task.slot_id or job.group_size < 1 or len(job.seeds) < job.group_size:
            raise InvalidEventError(f"rollout job {job.job_id!r}: needs job_id, task.slot_id, group_size >= 1 and "
                                    f"group_size seeds (got group_size={job.group_size}, {len(job.seeds)} seeds)")
        if job.min_policy_version > self.generator.model_version:
            latest = await self.versions.latest("policy")
            why = unreachable_version(job.min_policy_version, latest.version if latest else None)
            if why:
                raise InvalidEventError(f"rollout job {job.job_id[:200]!r} {why}")
        deadline = time.monotonic() + self.cfg.rollout.version_wait_s
        while self.generator.model_version < job.min_policy_version:
            if not await self.follower.load_latest():
                if time.monotonic() > deadline:
                    raise TransientError(f"policy version {job.min_policy_version} not available "
                                         f"(serving {self.generator.model_version})")
                await asyncio.sleep(0.5)
        trajectories = await run_group(job, self.env, MergedAgent(self.merger), self.cfg.rollout.history_steps,
                                       self.cfg.rollout.invalid_action, self.cfg.max_batch)
        for t in trajectories:
            await self.bus.publish(Subjects.TRAJ_COMPLETED, t, msg_id=t.trajectory_id)

    async def on_stop(self) -> None:
        await stop_followers(self.learner)
        if self.serves:
            self.http.should_exit = True
            await self.env.aclose()
        # the process ends with os._exit (no interpreter finalizers): a backend's own processes are
        # stopped here or never (vLLM's engine core outlived a stopped server: bench/streaming.md)
        await asyncio.to_thread(self.generator.close)
