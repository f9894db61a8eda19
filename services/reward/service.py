"""The reward service process: judge workers, gRPC JudgeSteps, the RM trainer, version watching.

Roles (``reward.role``): ``judge`` runs the judge workers (durable ``reward-judges`` on
``rla.traj.completed``) and gRPC `RewardModel.JudgeSteps`, both over one `JudgeBatcher`, and
swaps in each new RM version announced in the ``models`` bucket without a restart; ``trainer``
runs the shared `Trainer` on ``rla.samples.reward`` (durable ``reward-trainer``), which saves
checkpoints and announces versions on ``rla.models.reward``; ``all`` runs both.

Shadow mode (``reward.shadow``: a name, role ``judge``): a second judge beside the running one. It
consumes every completed trajectory on its own durables (``reward-shadow-<name>``, ``…-live``),
keeps its own marks bucket (``<judged_bucket>_shadow_<name>``), serves the model it was configured
with (it does not follow the running RM's versions) and publishes on its own subjects
(`services.reward.worker.judged_subject`), which no trainer reads.

Backends (``reward.backend``): ``llm`` is trained (unless ``reward.frozen``: the fixed-judge
ablation, versions advance and weights do not); ``oracle`` and ``openai`` have no local weights,
so their trainer (with a `VersionOnlyLearner`) only announces one version number per round and the
judges keep voting with the same model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc
from rlanything.v1 import reward_pb2_grpc
from rlanything.v1.events_pb2 import RewardSampleBatch, Trajectory
from rlanything.v1.ingest_pb2 import EpisodesErased

from services.common.bus import Consumer, Delivery, EventBus
from services.common.checkpoints import VersionStore
from services.common.config import RewardServiceConfig, RunConfig
from services.common.kv import ProtoBucket
from services.common.models.generation import HFGenerator
from services.common.models.source import require_source
from services.common.runtime import Service
from services.common.topology import Binding, Buckets, Consumers
from services.common.data_parallel import join_process_group
from services.common.rank_group import lead_or_follow, require_trainer_role, stop_followers
from services.common.trainer import Learner, PPOLearner, Trainer, VersionOnlyLearner
from services.common.version_follower import SERVED_VERSION, VersionFollower
from services.reward.batcher import JudgeBatcher
from services.reward.grpc_service import SERVICE_NAME, RewardModelServicer
from services.reward.judges import Judge, build_judge
from services.reward.worker import JudgedMarks, TrajectoryJudger

__all__ = ["RewardService"]



class RewardService(Service):
    """Reward-model service: the generative step judge, the RM trainer and its checkpoints."""

    name = "reward"

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self.cfg: RewardServiceConfig = config.reward
        require_trainer_role("reward", self.cfg.role, trains_weights=self.cfg.backend == "llm")  # before any model loads
        self.learner: object = None
        """The trainer's learner once started (on rank 0 of several, the one that releases the others)."""
        self.judges = self.cfg.role in ("all", "judge")
        self.trains = self.cfg.role in ("all", "trainer")
        self.source = require_source("reward", self.cfg.model) if self.cfg.backend == "llm" else ""
        self.judge: Judge | None = build_judge(self.cfg, self.source, config.seed) if self.judges else None

    async def on_start(self, bus: EventBus) -> None:
        self.bus = bus
        self.versions = await VersionStore.open(bus)
        if self.trains:
            learner: Learner | None
            if self.cfg.backend == "llm":
                generator = HFGenerator(self.source, self.cfg.model.cache_dir, device=self.cfg.model.device)
                ppo = PPOLearner(generator, self.cfg.ppo, self.cfg.checkpoint_dir, frozen=self.cfg.frozen,
                                 seed=self.config.seed, reference_source=self.source,
                                 shard=join_process_group(self.cfg.ppo.collective_timeout_s))
                learner = self.learner = lead_or_follow(self, ppo)
            else:
                learner = VersionOnlyLearner("oracle:" if self.cfg.backend == "oracle"
                                             else f"openai:{self.cfg.model.openai_base_url}")
            if learner is None:  # a following rank: rank 0 consumes the events
                self.trains = False
            else:
                store = await ProtoBucket.open(bus.js, Buckets.REWARD_SAMPLES.name(), RewardSampleBatch,
                                               replicas=bus.nats_cfg.stream_replicas)
                self.trainer = await Trainer.open(bus, "reward", learner, self.versions, store,
                                                  mode=self.config.loop.mode,
                                                  min_samples_async=self.cfg.ppo.min_samples_async)
                await self.trainer.ensure_initial_version(self.source)
        if self.judge is not None:
            self.batcher = JudgeBatcher(self.judge, self.cfg.batch_wait_s)
            shadow = self.cfg.shadow
            bucket = (Buckets.REWARD_SHADOW_JUDGED.name(judged_bucket=self.cfg.judged_bucket, shadow=shadow) if shadow
                      else self.cfg.judged_bucket)
            self.marks = await JudgedMarks.open(bus.js, bucket, replicas=bus.nats_cfg.stream_replicas)
            self.handler = TrajectoryJudger(bus, self.batcher, self.marks, self.cfg.votes, self.cfg.temperature,
                                            judge_eval=self.cfg.judge_eval, shadow=shadow)
            if self.judge.trainable and not shadow:  # a shadow keeps the model it was given
                self.follower = VersionFollower(self.versions, "reward", self.judge, self.log)
                await self.follower.load_latest()
                self.background.append(asyncio.create_task(self.follower.run(), name="version-watch"))
            SERVED_VERSION.labels("reward").set(self.judge.model_version)
            self.log.info("judge ready", extra={"backend": self.cfg.backend, "source": self.source, "shadow": shadow,
                                                "version": self.judge.model_version, "votes": self.cfg.votes})

    async def on_stop(self) -> None:
        await stop_followers(self.learner)
        if self.judge is not None:  # the process ends with os._exit: a vLLM engine core is stopped here or never
            await asyncio.to_thread(self.judge.close)

    def grpc_services(self) -> list[tuple[str, Callable[[grpc.aio.Server], None]]]:
        if self.judge is None:
            return []
        servicer = RewardModelServicer(self.batcher, self.cfg.votes, self.cfg.temperature)
        return [(SERVICE_NAME, lambda s: reward_pb2_grpc.add_RewardModelServicer_to_server(servicer, s))]

    def _judges(self, bus: EventBus, binding: Binding) -> Consumer:
        return bus.consumer(**binding, message_type=Trajectory, handler=self.handler.on_trajectory, concurrent=True)

    async def consumers(self, bus: EventBus) -> list[Consumer]:
        out: list[Consumer] = []
        if self.judge is not None:
            if self.cfg.shadow:  # its own durables: it sees every trajectory the running judges see
                out += [self._judges(bus, Consumers.REWARD_SHADOW.binding(shadow=self.cfg.shadow)),
                        self._judges(bus, Consumers.REWARD_SHADOW_LIVE.binding(shadow=self.cfg.shadow))]
            else:
                out += [self._judges(bus, Consumers.REWARD_JUDGES.binding()),
                        self._judges(bus, Consumers.REWARD_JUDGES_LIVE.binding())]
        if self.trains:
            out.append(bus.consumer(**Consumers.REWARD_TRAINER.binding(), message_type=RewardSampleBatch,
                                    handler=self.trainer.on_batch))
        if self.judge is not None or self.trains:  # what it keeps of erased episodes: marks, live batches
            binding = (Consumers.REWARD_SHADOW_ERASURES.binding(shadow=self.cfg.shadow) if self.cfg.shadow
                       else Consumers.REWARD_ERASURES.binding(role=self.cfg.role))
            out.append(bus.consumer(**binding, message_type=EpisodesErased, handler=self._on_erased))
        return out

    async def _on_erased(self, erased: EpisodesErased, delivery: Delivery) -> None:
        """Consumer handler for `rla.ingest.erased.<tenant>`: forget the judge's marks of the erased
        episodes' live trajectories (purged, not only deleted) and the trainer's stored live batches."""
        if self.judge is not None:
            for trajectory_id in erased.trajectory_ids:
                await self.marks.forget(trajectory_id)
        if self.trains:
            await self.trainer.forget_live([f"{t}/reward" for t in erased.trajectory_ids])
