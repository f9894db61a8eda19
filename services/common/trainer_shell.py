"""The trainer loop shared by the policy and reward-model services (sample batches → versions).

Sample batches are stored in a KV bucket (so a restart loses nothing) before they are acked.
Synchronous mode: when all ``jobs_in_round`` batches of round r are in, the round is trained
with π_old recomputed, a checkpoint is saved and version N+1 "trained on round r" is announced
(also when the round had no samples, so the scheduler can go on). Asynchronous mode: train
whenever ``min_samples_async`` samples are stored, with behaviour log-probs as π_old.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from pathlib import Path

import torch
from google.protobuf.message import Message
from prometheus_client import Gauge

from services.common.algo.batching import Sample
from services.common.bus import Delivery
from services.common.checkpoints import VersionStore, save_checkpoint
from services.common.config import PPOConfig
from services.common.errors import InvalidEventError
from services.common.kv import ProtoBucket
from services.common.models.generation import HFGenerator
from services.common.training import ppo_update

__all__ = ["Trainer", "TRAINER_METRICS"]

log = logging.getLogger("rlanything.trainer")
TRAINER_METRICS = Gauge("rla_trainer_metric", "Last training step's metrics, by role and key.", ["role", "key"])


def _key(round_: int, batch_id: str) -> str:
    return f"r{round_}." + "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in batch_id)


class Trainer:
    """Trains one role's model on its sample batches (PolicySampleBatch or RewardSampleBatch)."""

    def __init__(self, role: str, generator: HFGenerator, versions: VersionStore, store: ProtoBucket,
                 ppo: PPOConfig, checkpoint_dir: str | Path, mode: str = "sync", frozen: bool = False) -> None:
        self.role = role
        self.generator = generator
        self.versions = versions
        self.store = store
        self.ppo = ppo
        self.checkpoint_dir = Path(checkpoint_dir)
        self.mode = mode
        self.frozen = frozen
        """Announce a version per round without changing the weights (the "fixed judge" ablation)."""
        self.optimizer = torch.optim.AdamW(generator.model.parameters(), lr=ppo.lr)
        self.reference = copy.deepcopy(generator.model).eval() if ppo.ref_beta else None
        """Frozen starting weights for the KL anchor (``ppo.ref_beta``)."""
        self._lock = asyncio.Lock()
        self.last_metrics: dict[str, float] = {}

    async def ensure_initial_version(self, source_uri: str) -> None:
        """Announce version 0 (the starting weights, "trained on round -1") if nothing was announced."""
        if await self.versions.latest(self.role) is None:
            path = save_checkpoint(self.generator.model, self.generator.tokenizer, self.checkpoint_dir, self.role, 0)
            await self.versions.announce(self.role, 0, path, trained_on_round=-1)
            log.info("announced initial version", extra={"role": self.role, "source": source_uri})

    async def on_batch(self, batch: Message, delivery: Delivery) -> None:
        """Consumer handler: store the batch, train when the round (or the async quota) is complete."""
        if not batch.batch_id or batch.jobs_in_round <= 0:  # type: ignore[attr-defined]
            raise InvalidEventError(f"{type(batch).__name__} needs batch_id and jobs_in_round > 0, got "
                                    f"{batch.batch_id!r}, {batch.jobs_in_round}")  # type: ignore[attr-defined]
        async with self._lock:
            latest = await self.versions.latest(self.role)
            trained_round = latest.trained_on_round if latest else -1
            if self.mode == "sync" and batch.round <= trained_round:  # type: ignore[attr-defined]
                return  # redelivered after its round was trained
            await self.store.put(_key(batch.round, batch.batch_id), batch)  # type: ignore[attr-defined]
            keys = await self.store.keys()
            if self.mode == "sync":
                mine = [k for k in keys if k.startswith(f"r{batch.round}.")]  # type: ignore[attr-defined]
                if len(mine) >= batch.jobs_in_round:  # type: ignore[attr-defined]
                    await self._train(mine, int(batch.round), recompute_old=True)  # type: ignore[attr-defined]
            else:
                batches = [await self.store.get(k) for k in keys]
                if sum(len(b.samples) for b, _ in batches if b is not None) >= self.ppo.min_samples_async:
                    await self._train(keys, int(batch.round), recompute_old=False)  # type: ignore[attr-defined]

    async def _train(self, keys: list[str], round_: int, recompute_old: bool) -> None:
        samples: list[Sample] = []
        for key in sorted(keys):
            b, _ = await self.store.get(key)
            if b is None:
                continue
            samples += [Sample(s.sample_id, tuple(s.prompt_token_ids), tuple(s.response_token_ids), s.advantage,
                               tuple(s.behaviour_logprobs)) for s in b.samples if s.response_token_ids]
        latest = await self.versions.latest(self.role)
        version = (latest.version + 1) if latest else 1
        pad = self.generator.tokenizer.pad_token_id
        started = time.perf_counter()
        if self.frozen:
            samples, metrics = [], {"ppo/samples": 0.0, "ppo/frozen": 1.0}
        else:
            metrics = await asyncio.to_thread(ppo_update, self.generator.model, self.optimizer, samples, self.ppo,
                                              pad, recompute_old, self.reference)
        trained = time.perf_counter()
        if samples or latest is None:
            path = await asyncio.to_thread(save_checkpoint, self.generator.model, self.generator.tokenizer,
                                           self.checkpoint_dir, self.role, version)
        else:
            path = Path(latest.uri)  # nothing to learn this round: same weights, new version number
        metrics["time/train_s"] = trained - started
        metrics["time/save_s"] = time.perf_counter() - trained
        self.last_metrics = {**metrics, "version": float(version), "round": float(round_)}
        await self.versions.announce(self.role, version, path, trained_on_round=round_, metrics=self.last_metrics)
        for key in keys:
            await self.store.kv.delete(key)
        for k, v in self.last_metrics.items():
            TRAINER_METRICS.labels(self.role, k).set(v)
        log.info("trained", extra={"role": self.role, "round": round_, "version": version, **metrics})
