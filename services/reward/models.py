"""Which weights the judge starts from, and the round bookkeeping of judges that never train.

``reward.model.source`` names the judge's weights (a Hugging Face directory, a hub id, or
``smollm2``); '' builds a tiny judge once into the cache: random weights with a tokenizer trained
on judge chats of the first family's own episodes (cold-start it with `run_judge_sft` for a
competent-but-imperfect judge).

`VersionOnlyTrainer` keeps the synchronous scheduler moving when the judge has no local weights
(backends ``oracle`` and ``openai``): it counts each round's RM batches exactly like the RM trainer
(it *is* the shared `Trainer`'s batch handling) and announces a new RM version number per round.
(An ``llm`` judge that should not learn — the fixed-judge ablation — is ``reward.frozen: true``,
the shared `Trainer(frozen=True)`, which has weights to checkpoint.)
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from services.common.checkpoints import VersionStore
from services.common.config import FamilyConfig, PPOConfig, RewardServiceConfig
from services.common.kv import ProtoBucket
from services.common.trainer_shell import TRAINER_METRICS, Trainer
from services.reward.judges import JudgeSettings

__all__ = ["judge_source", "VersionOnlyTrainer"]

_TOKENIZER_EPISODES = 20
"""Episodes whose judge chats train the tiny judge's tokenizer."""


def judge_source(cfg: RewardServiceConfig, family: FamilyConfig, history_steps: int = 2) -> str:
    """``cfg.model.source``, or a tiny judge for ``family`` built once into the cache (random weights).

    Raises:
        ValueError: the family gives no labelled steps (single-turn tasks) and no source is set.
    """
    if cfg.model.source:
        return cfg.model.source
    from services.env.families.registry import build_family
    from services.reward.episodes import record_groups
    from services.reward.sft import TRAIN_SEED_BASE, build_tiny_judge, judge_specs

    t = cfg.model.tiny
    out = (Path(cfg.model.cache_dir) / f"tiny-judge-{family.type}-h{t.hidden_size}-l{t.layers}-v{t.vocab_size}"
           f"-p{cfg.prompt_chars}-f{cfg.field_chars}")
    if not (out / "config.json").exists():
        fam = build_family(family, Path(cfg.model.cache_dir) / "env")
        specs = judge_specs(family, _TOKENIZER_EPISODES, TRAIN_SEED_BASE)
        trajectories = record_groups(fam, specs, 1, cfg.sft.expert_prob, 0, history_steps, prefix="tok")
        tmp = out.with_name(out.name + ".tmp")
        build_tiny_judge(trajectories, tmp, t, JudgeSettings.of(cfg))
        tmp.rename(out)
    return str(out)


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
