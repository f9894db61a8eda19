"""Tiny-model bootstrap: a starting model directory for a family when no ``model.source`` is set.

The services never build models themselves: whoever starts them (`rlanything up`/`run`, the
Kubernetes bootstrap Job: ``python -m services.offline.bootstrap``) prepares a directory here and
passes it as ``policy.model.source`` / ``reward.model.source``.

A tiny model has random weights and a tokenizer trained on the family's own text (expert
episodes for the policy, judge chats for the judge); cold-start it with SFT (`services.run.coldstart`)
for a competent one. Each is built once into ``model.cache_dir`` and reused.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from services.common.build_once import build_once
from services.common.config import FamilyConfig, ModelConfig, RewardServiceConfig, RunConfig, load_config
from services.common.errors import ConfigError
from services.env.families.registry import build_family
from services.offline.judge_episodes import record_groups
from services.offline.judge_sft import TRAIN_SEED_BASE, build_tiny_judge, judge_specs
from services.offline.policy_sft import build_tiny_for, demonstrations
from services.reward.judges import JudgeSettings

__all__ = ["tiny_policy", "tiny_judge", "bootstrap", "main", "READY_FILE"]

_POLICY_TOKENIZER_EPISODES = 50
"""Expert episodes whose text trains the tiny policy's tokenizer."""
_JUDGE_TOKENIZER_EPISODES = 20
"""Episodes whose judge chats train the tiny judge's tokenizer."""


def _family_name(family: FamilyConfig) -> str:
    """The family's part of a cache name: its type, and a Gymnasium family's id or a remote one's address."""
    detail = family.env_id or family.address.replace(":", "_").replace("/", "_")
    return f"{family.type}-{detail}" if detail else family.type


def tiny_policy(model: ModelConfig, family: FamilyConfig, history_steps: int, role: str = "policy") -> str:
    """``model.source``, or a tiny policy for ``family`` built once into the cache (random weights)."""
    if model.source:
        return model.source
    t = model.tiny
    out = Path(model.cache_dir) / f"tiny-{role}-{_family_name(family)}-h{t.hidden_size}-l{t.layers}-v{t.vocab_size}"

    def build(tmp: Path) -> None:
        fam = build_family(family, Path(model.cache_dir) / "env")
        build_tiny_for(demonstrations(fam, family, _POLICY_TOKENIZER_EPISODES, history_steps), tmp, t)

    build_once(out, build)  # the rollout and trainer processes may ask at once
    return str(out)


def tiny_judge(cfg: RewardServiceConfig, family: FamilyConfig, history_steps: int = 2) -> str:
    """``cfg.model.source``, or a tiny judge for ``family`` built once into the cache (random weights).

    Raises:
        ValueError: the family gives no labelled steps (single-turn tasks) and no source is set.
    """
    if cfg.model.source:
        return cfg.model.source
    t = cfg.model.tiny
    out = (Path(cfg.model.cache_dir) / f"tiny-judge-{_family_name(family)}-h{t.hidden_size}-l{t.layers}-v{t.vocab_size}"
           f"-p{cfg.prompt_chars}-f{cfg.field_chars}")

    def build(tmp: Path) -> None:
        fam = build_family(family, Path(cfg.model.cache_dir) / "env")
        specs = judge_specs(family, _JUDGE_TOKENIZER_EPISODES, TRAIN_SEED_BASE)
        trajectories = record_groups(fam, specs, 1, cfg.sft.expert_prob, 0, history_steps, prefix="tok")
        build_tiny_judge(trajectories, tmp, t, JudgeSettings.of(cfg))

    build_once(out, build)
    return str(out)


READY_FILE = "READY"
"""Written into the output directory last: the models under it are complete."""


def bootstrap(config: RunConfig, out: Path) -> dict[str, str]:
    """Build the tiny policy (``out/policy``) and, for an ``llm`` judge, the tiny judge (``out/judge``)
    for ``env.families[0]``, then write ``out/READY``. Existing complete directories are kept.

    Returns:
        role → model directory.
    """
    out.mkdir(parents=True, exist_ok=True)
    family = config.env.families[0]
    history = config.policy.rollout.history_steps
    built = {"policy": _into(out / "policy", tiny_policy(config.policy.model.model_copy(update={"source": ""}),
                                                         family, history))}
    if config.reward.backend == "llm":
        judge_cfg = config.reward.model_copy(update={"model": config.reward.model.model_copy(update={"source": ""})})
        built["judge"] = _into(out / "judge", tiny_judge(judge_cfg, family, history))
    (out / READY_FILE).write_text("".join(f"{role}: {path}\n" for role, path in built.items()))
    return built


def _into(target: Path, built: str) -> str:
    """Copy the cached model directory ``built`` to ``target`` (atomically: copy, then rename)."""
    build_once(target, lambda tmp: shutil.copytree(built, tmp))
    return str(target)


def main(argv: list[str] | None = None) -> int:
    """``python -m services.offline.bootstrap --config run.yaml --out DIR`` (the Kubernetes bootstrap Job)."""
    parser = argparse.ArgumentParser(description="Write the starting models of a run (version 0) into DIR.")
    parser.add_argument("--config", type=Path, required=True, help="Run config YAML.")
    parser.add_argument("--out", type=Path, required=True, help="Directory for policy/, judge/ and READY.")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config, [])
    except ConfigError as exc:
        print(f"bootstrap: config error: {exc}", file=sys.stderr)
        return 2
    for role, path in bootstrap(config, args.out).items():
        print(f"bootstrap: {role} model ready at {path}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
