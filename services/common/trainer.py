"""The trainer loop shared by the policy and reward-model services (sample batches → versions).

A `Trainer` is composed of two parts:

* the collector (this class): stores each sample batch in a KV bucket (so a restart loses
  nothing) before it is acked, and decides when to train (`rounds.round_batches`, `async_quota_met`):
  synchronous mode trains round r once all its ``jobs_in_round`` batches are in, with π_old
  recomputed, and announces version N+1 "trained on round r" (also when the round had no
  samples, so the scheduler can go on); asynchronous mode trains whenever ``min_samples_async``
  samples are stored, with behaviour log-probs as π_old. Live batches (``live``: samples from a
  product's traffic, not part of any round) are stored under ``live.`` and trained with the next
  round (sync) or the next quota (async); the metric ``live_samples`` counts them. Each batch is
  trained in exactly one version, across restarts: the announcement lists the batch keys it was
  trained on, and only then are they marked trained (bucket ``<role>_trained``, key → version) and
  deleted; a trainer started after a crash in between finishes that first, and a redelivered batch
  whose key is marked is acked without being stored again;
* a learner, which does the training and says where the new version lives: `PPOLearner`
  (PPO on local weights; ``frozen`` keeps the weights, the fixed-judge ablation) or
  `VersionOnlyLearner` (a judge without local weights: a new version number per round).
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Protocol

import torch
from google.protobuf.message import Message
from prometheus_client import Counter, Gauge
from transformers import PreTrainedModel

from services.common.algo.batching import Sample
from services.common.algo.staleness import count_within, cut_stale
from services.common.allocator import fix_mmap_threshold
from services.common.checkpoints import VersionStore, save_checkpoint
from services.common.config import PPOConfig, RunConfig
from services.common.data_parallel import Shard, full_state_dict, shard_model
from services.common.errors import InvalidEventError, ResumeError
from rlanything.v1.events_pb2 import ModelVersion
from services.common.bus import Delivery, EventBus
from services.common.kv import ProtoBucket
from services.common.rounds import LIVE_PREFIX, batch_key, round_batches
from services.common.topology import Buckets
from services.common.models.generation import HFGenerator
from services.common.models.loading import load_model, resolve_model_path
from services.common.models.canary import probe_ids, probe_logprobs, write_canary
from services.common.models.lora import adapter_disabled, check_adapter_tensors, with_lora
from services.common.ppo_update import ppo_update
from services.common.seeding import derive_seed
from services.common.trainer_state import keep_state, load_state, save_state, state_root, weights_sha256

__all__ = ["Trainer", "Learner", "PPOLearner", "VersionOnlyLearner", "async_quota_met", "TRAINER_METRICS",
           "staleness_bounds"]

log = logging.getLogger("rlanything.trainer")
TRAINER_METRICS = Gauge("rla_trainer_metric", "Last training step's metrics, by role and key.", ["role", "key"])
STALE_DROPPED = Counter("rla_trainer_stale_samples_dropped_total",
                        "Samples a trainer dropped at its optimizer step for lagging the latest version by more than "
                        "the staleness bound, by role and task family.", ["role", "family"])


def staleness_bounds(config: RunConfig) -> dict[str, int]:
    """The policy trainer's staleness bounds from the run's config (keyword arguments of `Trainer.open`):
    in async mode the scheduler's ``env.scheduler.max_staleness`` for rollout samples and the critic's
    ``critic.live.max_staleness`` for live ones; none in sync mode (a round trains on its own version)."""
    if config.loop.mode != "async":
        return {}
    return {"max_staleness": config.env.scheduler.max_staleness,
            "live_max_staleness": config.critic.live.max_staleness}


def async_quota_met(sample_counts: Sequence[int], min_samples: int) -> bool:
    """Asynchronous mode (pure): do the stored batches hold at least ``min_samples`` samples?

    ``sample_counts``: per stored batch, its samples within the staleness bound
    (`services.common.algo.staleness.count_within`); stale batches wait for the next step."""
    return sum(sample_counts) >= min_samples


class Learner(Protocol):
    """What a trainer trains with: starting weights, and one update per trained round."""

    @property
    def lineage(self) -> tuple[str, str]:
        """(start, end): `services.common.trainer_state.weights_sha256` of the trainable weights the last
        version started from and of the weights it ended with ('' when the learner has no weights)."""
        ...

    async def initial_uri(self, role: str) -> str:
        """Where version 0 lives (saving the starting weights if needed)."""
        ...

    async def resume(self, role: str, version: int) -> None:
        """Go on from announced version ``version``: its weights and optimizer state (a restart)."""
        ...

    async def learn(self, role: str, samples: list[Sample], recompute_old: bool, version: int,
                    latest_uri: str | None) -> tuple[dict[str, float], str]:
        """Train on ``samples``; returns the metrics and where version ``version`` lives."""
        ...


@contextmanager
def _loaded(source: str, cache_dir: str | Path) -> Iterator[torch.nn.Module]:
    """The model at ``source``, loaded for the ``with`` block and dropped after it."""
    model = load_model(source, cache_dir)[0]
    try:
        yield model
    finally:
        del model


class PPOLearner:
    """PPO on a local HF model (`services.common.ppo_update.ppo_update`), checkpointed per version.

    ``frozen``: announce a version per round without changing the weights (the fixed-judge
    ablation). With ``ppo.ref_beta`` the starting weights are the KL anchor (see ``reference``).
    With ``ppo.lora.rank`` only LoRA adapters are trained and each checkpoint is the adapter alone
    (`services.common.models.lora`); ``reference_source`` is the base model's source.

    Each version also saves the trainer's state (trainable weights, AdamW state and step counts:
    `services.common.trainer_state`); `resume` loads the state of an announced version, so a restarted
    trainer goes on where it stopped, on any number of ranks.

    Raises:
        ValueError: ``ppo.lora`` or ``ppo.reference`` reload without a ``reference_source``.
    Version v's minibatch split is seeded from ``seed`` (the run's), the role and v.
    """

    def __init__(self, generator: HFGenerator, ppo: PPOConfig, checkpoint_dir: str | Path, frozen: bool = False,
                 seed: int = 0, reference_source: str = "", shard: Shard | None = None) -> None:
        self.generator = generator
        self.seed = seed
        self.ppo = ppo
        self.checkpoint_dir = Path(checkpoint_dir)
        self.frozen = frozen
        if not frozen:
            fix_mmap_threshold(ppo.malloc_mmap_threshold)
        self.model: PreTrainedModel = generator.model
        """What is trained: the generator's model, or (``ppo.lora.rank``) that model wrapped with LoRA adapters."""
        if ppo.lora.rank:
            if not reference_source:
                raise ValueError("ppo.lora needs the base model's source (reference_source)")
            self.model = with_lora(generator.model, ppo.lora, resolve_model_path(reference_source, generator.cache_dir),
                                   seed=derive_seed("lora", seed))
        if ppo.gradient_checkpointing:
            self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            if ppo.lora.rank:  # the frozen embeddings' output must carry a gradient into the checkpointed layers
                self.model.enable_input_require_grads()
        self.reference: torch.nn.Module | Callable[[], AbstractContextManager[torch.nn.Module]] | None = None
        """The KL anchor (``ppo.ref_beta``): under LoRA the base (adapter disabled); else a frozen copy of
        the starting weights (``ppo.reference`` resident) or ``reference_source`` loaded for each update's
        reference pass (reload)."""
        if ppo.ref_beta and not frozen:
            if ppo.lora.rank:
                self.reference = lambda: adapter_disabled(self.model)
            elif ppo.reference == "reload":
                if not reference_source:
                    raise ValueError("ppo.reference=reload needs the starting model's source (reference_source)")
                self.reference = lambda: _loaded(reference_source, generator.cache_dir)
            else:
                self.reference = copy.deepcopy(generator.model).eval()
        self.shard = shard or Shard(0, 1)
        """This process's rank among the trainer's data-parallel processes (torchrun); on several, the
        model is sharded with FSDP2 (`services.common.data_parallel`)."""
        if self.shard.world > 1:
            shard_model(self.model)
        self.optimizer = torch.optim.AdamW([p for p in self.model.parameters() if p.requires_grad], lr=ppo.lr)
        self.lineage: tuple[str, str] = ("", "")
        self.weights_sha256 = ""
        """`weights_sha256` of the trainable weights now held (set on rank 0 by each save and by `resume`)."""

    async def initial_uri(self, role: str) -> str:
        return await asyncio.to_thread(self.save, role, 0)

    async def resume(self, role: str, version: int) -> None:
        await asyncio.to_thread(self.resume_now, role, version)

    def resume_now(self, role: str, version: int) -> None:
        """Load the saved state of announced ``version`` (every rank calls it). Version 0 without a saved
        state is the starting weights themselves (a run of an earlier release).

        Raises:
            ResumeError: no saved state covers ``version``, or it does not fit the model
                (`services.common.trainer_state.load_state`).
        """
        root = state_root(self.checkpoint_dir, role)
        if version > 0 or root.exists():
            meta = load_state(self.model, self.optimizer, root, version, role, self.shard)
            log.info("resumed the trainer", extra={"role": role, "version": version, "state_of": meta.version,
                                                   "fresh": meta.fresh, "world_saved": meta.world,
                                                   "optimizer_steps": self.steps_done()})
        self.weights_sha256 = self._digest()
        self.lineage = ("", self.weights_sha256)

    def steps_done(self) -> int:
        """Optimizer steps taken so far (AdamW's ``step`` of its first parameter; 0 before any)."""
        for state in self.optimizer.state.values():
            return int(state["step"])
        return 0

    def _trainable(self, weights: dict[str, torch.Tensor] | None) -> list[tuple[str, torch.Tensor]]:
        trainable = [n for n, p in self.model.named_parameters() if p.requires_grad]
        if weights is None:
            params = dict(self.model.named_parameters())
            return [(n, params[n]) for n in trainable]
        return [(n, weights[n]) for n in trainable if n in weights]

    def _digest(self, weights: dict[str, torch.Tensor] | None = None) -> str:
        """`weights_sha256` of the trainable weights (``weights``: already gathered); on several ranks a
        collective when not given, '' off rank 0."""
        if weights is None and self.shard.world > 1:
            weights = full_state_dict(self.model, self.shard)
        return weights_sha256(self._trainable(weights)) if self.shard.rank == 0 else ""

    async def learn(self, role: str, samples: list[Sample], recompute_old: bool, version: int,
                    latest_uri: str | None) -> tuple[dict[str, float], str]:
        return await asyncio.to_thread(self.learn_now, role, samples, recompute_old, version, latest_uri)

    def save(self, role: str, version: int) -> str:
        """Checkpoint the current weights as ``version`` (the adapter alone under LoRA) with the trainer's
        state and the sync canary (`services.common.models.canary`); its path.

        On several ranks every rank must call it (the shards are gathered); rank 0 writes and the
        others return ''.
        """
        weights = full_state_dict(self.model, self.shard) if self.shard.world > 1 else None
        probe, scored = probe_ids(self.generator.tokenizer)
        canary = probe_logprobs(self.model, probe, scored)  # every rank: a forward pass of a sharded model
        self.weights_sha256 = self._digest(weights)
        if version == 0:
            self.lineage = ("", self.weights_sha256)
        save_state(self.model, self.optimizer, state_root(self.checkpoint_dir, role), version, self.shard,
                   self.weights_sha256)
        if self.shard.rank != 0:
            return ""
        out = save_checkpoint(self.model, self.generator.tokenizer, self.checkpoint_dir, role, version, weights)
        write_canary(out, probe, canary)
        if self.ppo.lora.rank:  # refused here, before any announcement, not at a worker's load
            from safetensors.torch import load_file

            check_adapter_tensors(load_file(out / "adapter_model.safetensors"), self.ppo.lora.rank)
        return str(out)

    def learn_now(self, role: str, samples: list[Sample], recompute_old: bool, version: int,
                  latest_uri: str | None) -> tuple[dict[str, float], str]:
        """`learn` in the calling thread (what every rank of a sharded trainer runs)."""
        started = time.perf_counter()
        start = self.weights_sha256
        if self.frozen:
            samples, metrics = [], {"ppo/samples": 0.0, "ppo/frozen": 1.0}
        else:
            metrics = ppo_update(self.model, self.optimizer, samples, self.ppo, self.generator.tokenizer.pad_token_id,
                                 recompute_old, self.reference, derive_seed("ppo", self.seed, role, version))
        trained = time.perf_counter()
        if samples or latest_uri is None:
            uri = self.save(role, version)
        else:
            uri = latest_uri  # nothing to learn this round: same weights, new version number
            keep_state(state_root(self.checkpoint_dir, role), version, self.shard)
        self.lineage = (start, self.weights_sha256)
        metrics["time/train_s"] = trained - started
        metrics["time/save_s"] = time.perf_counter() - trained
        return metrics, uri


class VersionOnlyLearner:
    """A judge without local weights (backends ``oracle``, ``openai``): the same ``uri`` for every
    version, so the synchronous scheduler still sees one RM version per round."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.lineage = ("", "")

    async def initial_uri(self, role: str) -> str:
        return self.uri

    async def resume(self, role: str, version: int) -> None:
        """Nothing to load: the judge's weights live elsewhere."""

    async def learn(self, role: str, samples: list[Sample], recompute_old: bool, version: int,
                    latest_uri: str | None) -> tuple[dict[str, float], str]:
        return {"ppo/samples": 0.0, "ppo/frozen": 1.0}, self.uri


class Trainer:
    """Collects one role's sample batches (PolicySampleBatch or RewardSampleBatch) and trains
    them with ``learner`` when a round (sync) or the sample quota (async) is complete."""

    def __init__(self, role: str, learner: Learner, versions: VersionStore, store: ProtoBucket,
                 trained: ProtoBucket, mode: str = "sync", min_samples_async: int = 64,
                 max_staleness: int | None = None, live_max_staleness: int | None = None) -> None:
        self.role = role
        self.learner = learner
        self.versions = versions
        self.store = store
        self.trained = trained
        """Batch key → the version (a `ModelVersion` with ``version`` set) that trained it."""
        self.mode = mode
        self.min_samples_async = min_samples_async
        self.max_staleness = max_staleness
        """Versions a trained sample may lag the latest announced version of this role at the optimizer
        step (`services.common.algo.staleness`); older samples are dropped and counted. None = no bound."""
        self.live_max_staleness = live_max_staleness
        """The same bound for samples of live product traffic (their served version); None = no bound."""
        self._lock = asyncio.Lock()
        self._recovered = False
        self._keys: list[str] = []
        """The stored batch keys, in store order: listed from the store once at recovery, then kept
        here (one trainer per role writes the store). Listing the bucket on every batch cost ~60 ms,
        ~20 s per evaluation round of 300 (empty) evaluation batches."""
        self.last_metrics: dict[str, float] = {}

    @classmethod
    async def open(cls, bus: EventBus, role: str, learner: Learner, versions: VersionStore, store: ProtoBucket,
                   mode: str = "sync", min_samples_async: int = 64, max_staleness: int | None = None,
                   live_max_staleness: int | None = None) -> "Trainer":
        """A trainer over ``store`` with its trained-batch bucket ``<role>_trained`` (created if missing)."""
        trained = await ProtoBucket.open(bus.js, Buckets.TRAINED.name(role=role), ModelVersion,
                                         replicas=bus.nats_cfg.stream_replicas)
        return cls(role, learner, versions, store, trained, mode, min_samples_async, max_staleness, live_max_staleness)

    async def ensure_initial_version(self, source_uri: str = "") -> None:
        """Announce version 0 (the starting weights, "trained on round -1") if nothing was announced;
        else resume the learner from the latest announced version (its weights and optimizer state).

        Raises:
            ResumeError: the learner cannot resume (`PPOLearner.resume_now`), or the weights it resumed
                differ from the ones the version announced (``weights_sha256``).
        """
        latest = await self.versions.latest(self.role)
        if latest is None:
            uri = await self.learner.initial_uri(self.role)
            await self.versions.announce(self.role, 0, uri, trained_on_round=-1, lineage=self.learner.lineage)
            log.info("announced initial version", extra={"role": self.role, "source": source_uri})
            return
        await self.learner.resume(self.role, int(latest.version))
        held = self.learner.lineage[1]
        if latest.weights_sha256 and held and held != latest.weights_sha256:
            raise ResumeError(f"{self.role} trainer: the state it resumed holds weights {held[:12]}… but the announced "
                              f"version v{latest.version} ({latest.uri}) has {latest.weights_sha256[:12]}…")
        log.info("resumed from the announced version", extra={"role": self.role, "version": int(latest.version),
                                                             "weights_sha256": held})

    async def on_batch(self, batch: Message, delivery: Delivery) -> None:
        """Consumer handler: store the batch, train when the round (or the async quota) is complete."""
        batch_id, round_, jobs, live = batch.batch_id, int(batch.round), batch.jobs_in_round, batch.live
        if not batch_id or (jobs <= 0 and not live):
            raise InvalidEventError(f"{type(batch).__name__} needs batch_id and jobs_in_round > 0 (or live), got "
                                    f"{batch_id!r}, {jobs}")
        async with self._lock:
            latest = await self.versions.latest(self.role)
            if not self._recovered:
                if latest is not None:
                    await self._forget(latest.batch_keys, int(latest.version))
                self._keys = await self.store.keys()
                self._recovered = True
            if (await self.trained.get(batch_key(round_, batch_id, live)))[0] is not None:
                return  # redelivered after a version was trained on it
            trained_round = latest.trained_on_round if latest else -1
            if live:  # kept until the next training, whatever round that is; it names no round itself
                await self._put(batch_key(round_, batch_id, live=True), batch)
                if self.mode == "sync":
                    return
                round_ = max(trained_round, 0)
            elif self.mode == "sync" and round_ <= trained_round:
                return  # redelivered after its round was trained
            else:
                await self._put(batch_key(round_, batch_id), batch)
            keys = list(self._keys)
            if self.mode == "sync":
                mine = round_batches(keys, round_, jobs)
                if mine is not None:
                    await self._train(mine, round_, recompute_old=True)
            else:
                now = int(latest.version) if latest else 0
                fresh = [count_within([int(s.model_version) for s in b.samples if s.response_token_ids], now,
                                      self.live_max_staleness if b.live else self.max_staleness)
                         for b, _ in [await self.store.get(k) for k in keys] if b is not None]
                if async_quota_met(fresh, self.min_samples_async):
                    await self._train(keys, round_, recompute_old=False)

    async def _train(self, keys: list[str], round_: int, recompute_old: bool) -> None:
        latest = await self.versions.latest(self.role)
        items: dict[bool, list[tuple[Sample, int, str]]] = {False: [], True: []}  # live? → (sample, version, family)
        for key in sorted(keys):
            b, _ = await self.store.get(key)
            if b is None:
                continue
            items[key.startswith(LIVE_PREFIX)] += [
                (Sample(s.sample_id, tuple(s.prompt_token_ids), tuple(s.response_token_ids), s.advantage,
                        tuple(s.behaviour_logprobs)), int(s.model_version), b.task.family)
                for s in b.samples if s.response_token_ids]
        now = int(latest.version) if latest else 0
        rollout, live = cut_stale(items[False], now, self.max_staleness), cut_stale(items[True], now,
                                                                                   self.live_max_staleness)
        samples, live_samples = rollout.kept + live.kept, len(live.kept)
        stale = {f"stale/dropped/{family}": float(n) for family, n in sorted((rollout.dropped + live.dropped).items())}
        if stale:  # a version is announced even when nothing is left: its lineage lists every batch it consumed
            log.warning("dropped stale samples", extra={"role": self.role, "bound": self.max_staleness, **stale})
        version = (latest.version + 1) if latest else 1
        metrics, uri = await self.learner.learn(self.role, samples, recompute_old, version,
                                                latest.uri if latest else None)
        self.last_metrics = {**metrics, "version": float(version), "round": float(round_),
                             "batches": float(len(keys)), "samples": float(len(samples)),
                             "live_samples": float(live_samples), "staleness/max": float(max(rollout.max_kept, live.max_kept)), **stale}
        await self.versions.announce(self.role, version, uri, trained_on_round=round_, metrics=self.last_metrics,
                                     batch_keys=sorted(keys), lineage=self.learner.lineage)
        await self._forget(keys, version)
        self._export(self.last_metrics)
        log.info("trained", extra={"role": self.role, "round": round_, "version": version, **metrics})

    def _export(self, metrics: dict[str, float]) -> None:
        for k, v in metrics.items():
            TRAINER_METRICS.labels(self.role, k).set(v)
        for k, v in metrics.items():
            if k.startswith("stale/dropped/"):
                STALE_DROPPED.labels(self.role, k.removeprefix("stale/dropped/")).inc(v)

    async def forget_live(self, batch_ids: Sequence[str]) -> int:
        """Purge the stored live batches ``batch_ids`` (an erased user's samples, not trained yet);
        returns how many were stored. A batch trained already lives on only in the weights."""
        gone = 0
        async with self._lock:
            for batch_id in batch_ids:
                key = batch_key(0, batch_id, live=True)
                if (await self.store.get(key))[0] is not None:
                    gone += 1
                await self.store.kv.purge(key)
                self._keys = [k for k in self._keys if k != key]
        return gone

    async def _put(self, key: str, batch: Message) -> None:
        await self.store.put(key, batch)
        if key not in self._keys:
            self._keys.append(key)

    async def _forget(self, keys: Sequence[str], version: int) -> None:
        """Mark ``keys`` trained by ``version``, then delete the stored batches (idempotent)."""
        for key in keys:
            await self.trained.put(key, ModelVersion(version=version))
            await self.store.kv.delete(key)
        gone = set(keys)
        self._keys = [k for k in self._keys if k not in gone]
