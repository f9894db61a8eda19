"""Cold start for `rlanything run`: SFT the policy and the tiny judge once, cached by config hash.

The policy is the tiny model built from the family, or the pretrained model named by
``policy.sft.source`` (e.g. ``smollm2``), fine-tuned in full or through LoRA adapters merged back
(``policy.sft.lora_rank``). Their training tasks skip the run's held-out and OOD instances
(`services.env.disjoint`), which depend on the run's seed: with such slots the cache key holds the
seed, so each seed of an experiment has its own cold start, shared by every run of that seed (the
rows of a comparison); without them the key leaves the seed out and all seeds share one.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict

from services.common.build_once import build_once
from services.common.config import FamilyConfig, LoraSettings, RunConfig
from services.common.config.policy import PolicySFTConfig
from services.env.families.base import TaskFamily
from services.reward.judge_prompt import PROMPT_FORMAT

__all__ = ["coldstart_policy", "coldstart_judge", "coldstart_writer", "config_hash", "coldstart_errors", "policy_needs_coldstart",
           "policy_coldstart_dir", "sft_lora", "held_out_keys", "train_keys"]


def config_hash(*parts: object) -> str:
    """A short stable hash of JSON-able config parts (what a cached model depends on)."""
    blob = json.dumps([p.model_dump(mode="json") if hasattr(p, "model_dump") else p for p in parts], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


_POOL_ONLY = {"train_slots", "heldout_slots", "ood_slots", "ood_knobs", "proposer", "train_instances", "screenshots"}
"""Family fields that size the task pool, pick its proposer or add what the text-only cold start does
not read (web screenshots), and never change what the cold start learns from."""


_KEYED_WHEN_SET = {"distractor_ends_episode"}
"""Family fields added after cold starts were cached: part of the key only away from their default,
so the cold starts cached before they existed keep their keys."""


def _family_key(fam_cfg: FamilyConfig) -> dict:
    key = fam_cfg.model_dump(mode="json", exclude=_POOL_ONLY)
    for name in _KEYED_WHEN_SET:
        if key[name] == FamilyConfig.model_fields[name].default:
            del key[name]
    return key


def _eval_families(config: RunConfig, kind: str = "") -> list[FamilyConfig]:
    """The family entries of type ``kind`` (default: the cold start's, ``env.families[0]``) that seed
    held-out or OOD slots."""
    kind = kind or config.env.families[0].type
    return [f for f in config.env.families if f.type == kind and (f.heldout_slots or f.ood_slots)]


def _held_out_part(config: RunConfig) -> list[dict]:
    """What the cold start's training tasks are kept apart from, for the cache key: the held-out and
    OOD slots of its family and the run's seed (they pick those tasks). Empty without such slots,
    so those configs keep their keys (and share one cold start across seeds)."""
    families = _eval_families(config)
    if not families:
        return []
    return [{"disjoint_from": [f.model_dump(mode="json", include={"knobs", "heldout_slots", "ood_slots", "ood_knobs"})
                               for f in families], "seed": config.seed}]


def held_out_keys(config: RunConfig, family: TaskFamily) -> frozenset[str]:
    """The instance keys of the run's held-out and OOD tasks of ``family`` (every ``env.families``
    entry of its type), which the cold start's training tasks skip (`services.env.disjoint`);
    builds those tasks (TextWorld: compiles the games, cached in ``env.cache_dir``)."""
    from services.env.disjoint import eval_keys, eval_specs

    return eval_keys({family.name: family}, eval_specs(_eval_families(config, family.name), config.seed))


def train_keys(config: RunConfig, family: TaskFamily, held_out: frozenset[str]) -> frozenset[str]:
    """The instance keys of the run's seeded train slots of ``family``, each as the pool first draws
    it off the ``held_out`` instances (`held_out_keys`; `disjoint.train_slot_spec`).

    Raises:
        EvalInstanceError: a slot's redraws all gave held-out or OOD instances.
    """
    from services.env.disjoint import seed_splits, train_slot_spec

    return frozenset(family.instance_key(train_slot_spec(family, cfg.type, knobs, config.seed, i, held_out)[0])
                     for cfg in config.env.families if cfg.type == family.name
                     for split, count, knobs in seed_splits(cfg) if split == "train" for i in range(count))


def _coldstart_excluded(config: RunConfig, family: TaskFamily) -> frozenset[str]:
    """What the policy's cold start skips: the held-out and OOD instances, and with
    ``policy.sft.skip_train_tasks`` the seeded train slots' too."""
    held = held_out_keys(config, family)
    return held | train_keys(config, family, held) if config.policy.sft.skip_train_tasks else held


def _skipped_train_part(config: RunConfig) -> list[dict]:
    """With ``policy.sft.skip_train_tasks``, what picks the skipped train slots, for the cache key: every
    entry of the cold start's family type (knobs, train slot count) and the seed. Empty without it."""
    if not config.policy.sft.skip_train_tasks:
        return []
    kind = config.env.families[0].type
    return [{"skipped_train": [f.model_dump(mode="json", include={"knobs", "train_slots"})
                               for f in config.env.families if f.type == kind], "seed": config.seed}]


_PRETRAINED_ONLY = {"source", "lora_rank"}
"""`policy.sft` fields that only a pretrained source uses: left out of the tiny model's key, so its cache
entries stay those of the configs written before these fields existed."""


def _unset(sft: PolicySFTConfig) -> set[str]:
    """`policy.sft` switches left at their default: out of the key, so cache entries stay those of the
    configs written before the switch existed."""
    unset = set() if sft.skip_train_tasks else {"skip_train_tasks"}
    return unset if sft.target_success else unset | {"target_success", "max_steps", "check_every"}


class SFTTarget(TypedDict):
    """`run_sft`'s stopping arguments."""

    target_success: float
    max_steps: int
    check_every: int


def sft_target(sft: PolicySFTConfig) -> SFTTarget:
    """`run_sft`'s stopping arguments from ``policy.sft`` (a success target, or none)."""
    return SFTTarget(target_success=sft.target_success, max_steps=sft.max_steps, check_every=sft.check_every)


def coldstart_errors(config: RunConfig) -> list[str]:
    """Why ``config``'s policy cannot be cold-started as written (empty when it can); pure.

    A pretrained ``policy.sft.source`` needs ``launcher.coldstart: true``, an empty
    ``policy.model.source`` (the cold start fills it) and a backend with weights (not ``openai``);
    ``policy.sft.lora_rank`` applies to a pretrained source only.
    """
    sft, model = config.policy.sft, config.policy.model
    if not sft.source:
        return ([f"policy.sft.lora_rank={sft.lora_rank} applies to a pretrained policy.sft.source only (the tiny "
                 "model is fine-tuned in full); set policy.sft.source or leave lora_rank 0"] if sft.lora_rank else [])
    errors = []
    if model.source:
        errors.append(f"policy.sft.source={sft.source!r} and policy.model.source={model.source!r} both name the "
                      "policy: give sft.source to cold-start a pretrained model by SFT, or model.source to serve "
                      "one as it is")
    if not config.launcher.coldstart:
        errors.append(f"policy.sft.source={sft.source!r} needs launcher.coldstart: true (it names what the cold "
                      "start fine-tunes)")
    if model.backend == "openai":
        errors.append(f"policy.sft.source={sft.source!r} needs policy.model.backend 'hf' or 'vllm': the 'openai' "
                      "backend serves a remote model and cannot load the fine-tuned weights")
    return errors


def policy_needs_coldstart(config: RunConfig) -> bool:
    """Does `rlanything run` cold-start the policy: a pretrained ``policy.sft.source``, or an empty
    ``policy.model.source`` on the ``hf`` backend (the tiny model)? ``launcher.coldstart`` is the caller's."""
    from services.run.sources import needs_policy_source

    if config.policy.sft.source:
        return True
    return needs_policy_source(config) and config.policy.model.backend == "hf"


def _slug(source: str) -> str:
    """A directory-name-safe short form of a model source ('smollm2', 'HuggingFaceTB--SmolLM2-360M')."""
    name = source.rstrip("/").split("/")[-1] if Path(source).is_dir() else source.replace("/", "--")
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name)[:48] or "model"


def policy_coldstart_dir(config: RunConfig) -> Path:
    """Where the cold-started policy of ``config`` is cached: the family, the source (pretrained) and a
    hash of what the model depends on (family knobs, SFT settings with the source and LoRA rank, the
    prompt's history, the tiny model's shape or the SFT adapters' target modules) and, when the family
    has held-out or OOD slots, those slots and the seed: its demonstrations skip that seed's
    evaluation instances (`_held_out_part`); with ``policy.sft.skip_train_tasks`` also the train slots
    that pick the skipped train instances (`_skipped_train_part`)."""
    pcfg = config.policy
    fam_cfg = config.env.families[0]
    if not pcfg.sft.source:
        key = config_hash(_family_key(fam_cfg), pcfg.sft.model_dump(mode="json", exclude=_PRETRAINED_ONLY | _unset(pcfg.sft)),
                          pcfg.model.tiny, pcfg.rollout.history_steps, *_held_out_part(config),
                          *_skipped_train_part(config))
        return Path(config.launcher.coldstart_dir) / f"policy-{fam_cfg.type}-{key}"
    targets = pcfg.ppo.lora.target_modules if pcfg.sft.lora_rank else []
    key = config_hash(_family_key(fam_cfg), pcfg.sft.model_dump(mode="json", exclude=_unset(pcfg.sft)), targets,
                      pcfg.rollout.history_steps, *_held_out_part(config), *_skipped_train_part(config))
    return Path(config.launcher.coldstart_dir) / f"policy-{fam_cfg.type}-{_slug(pcfg.sft.source)}-{key}"


def sft_lora(config: RunConfig) -> LoraSettings | None:
    """The adapters of a LoRA SFT (alpha = 2·rank, no dropout, ppo.lora's target modules), or None."""
    rank = config.policy.sft.lora_rank
    if not rank:
        return None
    return LoraSettings(rank=rank, alpha=2.0 * rank, target_modules=list(config.policy.ppo.lora.target_modules))


def coldstart_policy(config: RunConfig, log: Callable[[str], None]) -> str:
    """The cold-started policy's directory (trained now unless cached): the tiny model, or
    ``policy.sft.source`` fine-tuned.

    Raises:
        ValueError: `coldstart_errors` finds the config inconsistent, or the family has no expert
            demonstrations.
        OSError: the pretrained source cannot be loaded.
    """
    from services.env.families.registry import build_family
    from services.offline.policy_sft import run_sft

    problems = coldstart_errors(config)
    if problems:
        raise ValueError("; ".join(problems))
    pcfg = config.policy
    fam_cfg = config.env.families[0]
    out = policy_coldstart_dir(config)
    what = f"{pcfg.sft.source} ({'LoRA r=%d, merged' % pcfg.sft.lora_rank if pcfg.sft.lora_rank else 'full fine-tune'})" \
        if pcfg.sft.source else "the tiny policy"

    def build(tmp: Path) -> None:
        steps = (f"{pcfg.sft.steps} steps, then on to success {pcfg.sft.target_success:g} within {pcfg.sft.max_steps}"
                 if pcfg.sft.target_success else f"{pcfg.sft.steps} steps")
        log(f"cold start: SFT of {what} on {fam_cfg.type} expert trajectories ({steps})")
        family = build_family(fam_cfg, config.env.cache_dir, config.env.sandbox)
        try:
            result = run_sft(family, fam_cfg, pcfg.sft, pcfg.model.tiny,
                             tmp, pcfg.rollout.history_steps, seed=0, source=pcfg.sft.source, lora=sft_lora(config),
                             cache_dir=pcfg.model.cache_dir, eval_tokens=config.env.scheduler.max_new_tokens,
                             excluded=_coldstart_excluded(config, family), **sft_target(pcfg.sft))
        finally:
            family.close()  # the code family's sandbox workers
        log(f"cold-started policy: success {result.success_before:.2f} -> {result.success_after:.2f} on "
            f"{pcfg.sft.eval_episodes} held-out tasks after {result.steps} steps ({result.seconds:.0f} s)")

    if build_once(out, build, on_wait=lambda: log(f"cold start: waiting for another run building {out}")):
        log(f"cold-started policy: cached {out}")
    return str(out)


def coldstart_judge(config: RunConfig, log: Callable[[str], None]) -> str:
    """The cold-started (noisy) judge's directory (trained now unless cached); with ``reward.kind:
    unit_tests`` the cold-started unit-test writer's (`coldstart_writer`)."""
    from services.env.families.registry import build_family
    from services.reward.judges import JudgeSettings
    from services.offline.judge_sft import run_judge_sft

    rcfg = config.reward
    if rcfg.kind == "unit_tests":
        return coldstart_writer(config, log)
    fam_cfg = config.env.families[0]
    settings = JudgeSettings.of(rcfg)
    key = config_hash(_family_key(fam_cfg), rcfg.sft, rcfg.model.tiny, rcfg.votes, rcfg.temperature, rcfg.prompt_chars,
                      rcfg.field_chars, rcfg.max_new_tokens, config.policy.rollout.history_steps,
                      PROMPT_FORMAT, *_held_out_part(config))  # a new prompt layout needs a newly trained judge
    out = Path(config.launcher.coldstart_dir) / f"judge-{fam_cfg.type}-{key}"

    def build(tmp: Path) -> None:
        log(f"cold start: SFT of the tiny judge on oracle step labels with {rcfg.sft.label_noise:.0%} label noise "
            f"({rcfg.sft.steps} steps)")
        family = build_family(fam_cfg, config.env.cache_dir, config.env.sandbox)
        try:
            result = run_judge_sft(family, fam_cfg, rcfg.sft, rcfg.model.tiny, tmp,
                                   settings, rcfg.votes, rcfg.temperature, "", 0,
                                   config.policy.rollout.history_steps, excluded=held_out_keys(config, family))
        finally:
            family.close()
        log(f"cold-started judge: step accuracy {result.before.step_accuracy:.2f} -> "
            f"{result.after.step_accuracy:.2f} vs oracle labels ({result.after.labelled_steps} held-out steps)")

    if build_once(out, build, on_wait=lambda: log(f"cold start: waiting for another run building {out}")):
        log(f"cold-started judge: cached {out}")
    return str(out)


def coldstart_writer(config: RunConfig, log: Callable[[str], None]) -> str:
    """The cold-started tiny unit-test writer's directory (trained now unless cached): SFT on tests
    built from the reference programs of ``env.families[0]`` (`offline.writer_sft`)."""
    from services.env.families.registry import build_family
    from services.offline.writer_sft import run_writer_sft

    rcfg = config.reward
    fam_cfg = config.env.families[0]
    key = config_hash(_family_key(fam_cfg), rcfg.sft, rcfg.model.tiny, rcfg.votes, rcfg.temperature,
                      rcfg.max_new_tokens, *_held_out_part(config))
    out = Path(config.launcher.coldstart_dir) / f"writer-{fam_cfg.type}-{key}"

    def build(tmp: Path) -> None:
        log(f"cold start: SFT of the tiny unit-test writer on tests of reference programs ({rcfg.sft.steps} steps)")
        family = build_family(fam_cfg, config.env.cache_dir, config.env.sandbox)
        try:
            result = run_writer_sft(family, fam_cfg, rcfg.sft, rcfg.model.tiny, tmp, rcfg.votes,  # type: ignore[arg-type]  # a code family (RunConfig checks)
                                    rcfg.temperature, rcfg.max_new_tokens, excluded=held_out_keys(config, family))
        finally:
            family.close()
        log(f"cold-started writer: test accuracy {result.accuracy_before:.2f} -> {result.accuracy_after:.2f} "
            f"({result.eval_tests} tests of other problems, {result.seconds:.0f} s)")

    if build_once(out, build, on_wait=lambda: log(f"cold start: waiting for another run building {out}")):
        log(f"cold-started writer: cached {out}")
    return str(out)
