"""The round bookkeeping of judges that never train.

`VersionOnlyTrainer` keeps the synchronous scheduler moving when the judge has no local weights
(backends ``oracle`` and ``openai``): it counts each round's RM batches exactly like the RM trainer
(it *is* the shared `Trainer`'s batch handling) and announces a new RM version number per round.
(An ``llm`` judge that should not learn — the fixed-judge ablation — is ``reward.frozen: true``,
the shared `Trainer(frozen=True)`, which has weights to checkpoint.)
"""

from __future__ import annotations

import asyncio

from services.common.checkpoints import VersionStore
from services.common.config import PPOConfig
from services.common.kv import ProtoBucket
from services.common.trainer_shell import TRAINER_METRICS, Trainer

__all__ = ["VersionOnlyTrainer"]


class VersionOnlyTrainer(Trainer):
    """The RM "trainer" of a judge without local weights: one new version number per round."""

    def __init__(self, versions: VersionStore, store: ProtoBucket, uri: str, mode: str = "sync") -> None:
        # Trainer.__init__ is skipped on purpose: there are no weights, optimizer or checkpoints;
        # everything `Trainer.on_batch` uses is set here.
        self.role = "reward"
        self.versions = versions
        self.store = store
        self.ppo = PPOConfig()
        self.mode = mode
        self.frozen = True
        self.uri = uri
        self._lock = asyncio.Lock()
        self.last_metrics: dict[str, float] = {}

    async def ensure_initial_version(self, source_uri: str = "") -> None:
        """Announce version 0 ("trained on round -1") if nothing was announced."""
        if await self.versions.latest(self.role) is None:
            await self.versions.announce(self.role, 0, self.uri, trained_on_round=-1)

    async def _train(self, keys: list[str], round_: int, recompute_old: bool) -> None:
        latest = await self.versions.latest(self.role)
        version = (latest.version + 1) if latest else 1
        self.last_metrics = {"version": float(version), "round": float(round_)}
        await self.versions.announce(self.role, version, self.uri, trained_on_round=round_,
                                     metrics={"ppo/samples": 0.0, "ppo/frozen": 1.0, **self.last_metrics})
        for key in keys:
            await self.store.kv.delete(key)
        for k, v in self.last_metrics.items():
            TRAINER_METRICS.labels(self.role, k).set(v)
