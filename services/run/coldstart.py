"""Cold start for `rlanything run`: SFT the tiny policy and judge once, cached by config hash.

The cache key leaves out the run's seed: every seed of an experiment starts from the same
cold-started models (as every run of the paper starts from the same instruct model).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from services.common.build_once import build_once
from services.common.config import FamilyConfig, RunConfig
from services.reward.judge_prompt import PROMPT_FORMAT

__all__ = ["coldstart_policy", "coldstart_judge", "config_hash"]


def config_hash(*parts: object) -> str:
    """A short stable hash of JSON-able config parts (what a cached model depends on)."""
    blob = json.dumps([p.model_dump(mode="json") if hasattr(p, "model_dump") else p for p in parts], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


_POOL_ONLY = {"train_slots", "heldout_slots", "ood_slots", "ood_knobs", "proposer", "train_instances"}
"""Family fields that size the task pool or pick its proposer but never change what the cold start
learns from."""


def _family_key(fam_cfg: FamilyConfig) -> dict:
    return fam_cfg.model_dump(mode="json", exclude=_POOL_ONLY)


def coldstart_policy(config: RunConfig, log: Callable[[str], None]) -> str:
    """The cold-started policy's directory (trained now unless cached)."""
    from services.env.families.registry import build_family
    from services.offline.policy_sft import run_sft

    pcfg = config.policy
    fam_cfg = config.env.families[0]
    key = config_hash(_family_key(fam_cfg), pcfg.sft, pcfg.model.tiny, pcfg.rollout.history_steps)  # seed-free: shared by seeds
    out = Path(config.launcher.coldstart_dir) / f"policy-{fam_cfg.type}-{key}"

    def build(tmp: Path) -> None:
        log(f"cold start: SFT of the tiny policy on {fam_cfg.type} expert trajectories ({pcfg.sft.steps} steps)")
        result = run_sft(build_family(fam_cfg, config.env.cache_dir), fam_cfg, pcfg.sft, pcfg.model.tiny,
                         tmp, pcfg.rollout.history_steps, seed=0)
        log(f"cold-started policy: success {result.success_before:.2f} -> {result.success_after:.2f} on "
            f"{pcfg.sft.eval_episodes} held-out tasks ({result.seconds:.0f} s)")

    if build_once(out, build, on_wait=lambda: log(f"cold start: waiting for another run building {out}")):
        log(f"cold-started policy: cached {out}")
    return str(out)


def coldstart_judge(config: RunConfig, log: Callable[[str], None]) -> str:
    """The cold-started (noisy) judge's directory (trained now unless cached)."""
    from services.env.families.registry import build_family
    from services.reward.judges import JudgeSettings
    from services.offline.judge_sft import run_judge_sft

    rcfg = config.reward
    fam_cfg = config.env.families[0]
    settings = JudgeSettings.of(rcfg)
    key = config_hash(_family_key(fam_cfg), rcfg.sft, rcfg.model.tiny, rcfg.votes, rcfg.temperature, rcfg.prompt_chars,
                      rcfg.field_chars, rcfg.max_new_tokens, config.policy.rollout.history_steps,
                      PROMPT_FORMAT)  # a new prompt layout needs a newly trained judge
    out = Path(config.launcher.coldstart_dir) / f"judge-{fam_cfg.type}-{key}"

    def build(tmp: Path) -> None:
        log(f"cold start: SFT of the tiny judge on oracle step labels with {rcfg.sft.label_noise:.0%} label noise "
            f"({rcfg.sft.steps} steps)")
        result = run_judge_sft(build_family(fam_cfg, config.env.cache_dir), fam_cfg, rcfg.sft, rcfg.model.tiny, tmp,
                               settings, rcfg.votes, rcfg.temperature, "", 0,
                               config.policy.rollout.history_steps)
        log(f"cold-started judge: step accuracy {result.before.step_accuracy:.2f} -> "
            f"{result.after.step_accuracy:.2f} vs oracle labels ({result.after.labelled_steps} held-out steps)")

    if build_once(out, build, on_wait=lambda: log(f"cold start: waiting for another run building {out}")):
        log(f"cold-started judge: cached {out}")
    return str(out)
