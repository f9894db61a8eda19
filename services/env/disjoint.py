"""Held out by construction: no training instance is a held-out or OOD instance (pure rules).

An instance is what the agent plays, named by `TaskFamily.instance_key` (FrozenLake: the map's
rows, not its seed: 200 held-out 4×4 slots hold ~150 distinct maps, and most of them were among
the maps a map-per-rollout run trained on). The evaluation keys of a run are a function of its
config and seed (`eval_specs` → `eval_keys`); each process that draws training instances computes
them itself (the env service's pool, the cold start). Then:

* a train slot's task and each per-rollout instance whose key is an evaluation key are drawn
  again with the next derived seed (`disjoint_instance`, deterministic given the seed);
* a candidate variant whose instance is one is refused, with the reason (`eval_clash`);
* cold-start tasks skip them (`disjoint_specs`);
* `round_overlap` counts what a round's train jobs play that is one anyway (the run metric
  ``eval/overlap``, 0 by construction; a pool stored before this rule can hold such slots).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence

from services.common.config import FamilyConfig
from services.common.errors import InvalidArgumentError
from services.common.seeding import derive_seed
from services.env.families.base import TaskFamily, TaskSpec, rollout_instance

__all__ = ["SPLIT_OFFSETS", "MAX_REDRAWS", "EvalInstanceError", "slot_seed", "seed_splits", "eval_specs", "eval_keys",
           "keys_digest", "digest_value", "digest_hex", "redraw_seed", "disjoint_instance", "train_slot_spec", "train_instance", "eval_clash", "disjoint_specs",
           "round_overlap"]

SPLIT_OFFSETS: dict[str, int] = {"train": 0, "heldout": 1_000_000, "ood": 2_000_000}
"""Task seed of slot i of a split: ``base_seed · 10^7 + offset + i`` (`slot_seed`)."""
MAX_REDRAWS = 1000
"""Seeds tried after the first before an instance counts as impossible to draw outside the
evaluation set (at 4×4, hole 0.2 about 46 % of draws are evaluation maps: 0.46^1000 ≈ 0)."""


class EvalInstanceError(InvalidArgumentError):
    """Every instance drawn for a task is an evaluation (held-out or OOD) instance."""


def slot_seed(base_seed: int, split: str, index: int) -> int:
    """The task seed of seeded slot ``index`` of ``split`` ("train", "heldout", "ood") in a run
    with seed ``base_seed`` (a train slot's task may then be redrawn, `disjoint_instance`).

    Raises:
        KeyError: an unknown split.
    """
    return base_seed * 10_000_000 + SPLIT_OFFSETS[split] + index


def seed_splits(cfg: FamilyConfig) -> list[tuple[str, int, dict[str, float]]]:
    """(split, slot count, knobs) of the slots a family config seeds; none for ``live``."""
    if cfg.type == "live":
        return []  # its slots come from the ingest service's task candidates
    knobs = {k: float(v) for k, v in cfg.knobs.items()}
    ood = {k: float(v) for k, v in (cfg.ood_knobs or cfg.knobs).items()}
    return [("train", cfg.train_slots, knobs), ("heldout", cfg.heldout_slots, knobs), ("ood", cfg.ood_slots, ood)]


def eval_specs(families: Sequence[FamilyConfig], base_seed: int) -> list[TaskSpec]:
    """The tasks of every seeded held-out and OOD slot of a run (config and seed alone)."""
    return [TaskSpec(cfg.type, knobs, slot_seed(base_seed, split, i))
            for cfg in families for split, count, knobs in seed_splits(cfg) if split != "train"
            for i in range(count)]


def eval_keys(families: Mapping[str, TaskFamily], specs: Iterable[TaskSpec]) -> frozenset[str]:
    """The instance keys of ``specs`` (builds each task: TextWorld compiles its games).

    Raises:
        InvalidArgumentError: a spec of a family not in ``families``, or knobs out of bounds.
    """
    keys = set()
    for spec in specs:
        if spec.family not in families:
            raise InvalidArgumentError(f"evaluation task {spec.key()}: family {spec.family!r} is not built here "
                                       f"(families: {sorted(families)})")
        keys.add(families[spec.family].instance_key(spec))
    return frozenset(keys)


def keys_digest(keys: Iterable[str]) -> str:
    """A short stable hash of a key set (what a cached cold start was kept apart from; a run's
    evaluation set): 12 hex digits of the SHA-256 of the sorted keys."""
    return hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()[:12]


def digest_value(keys: Iterable[str]) -> float:
    """`keys_digest` as a number, for a metric (48 bits: exact in a float64); `digest_hex` reverses it."""
    return float(int(keys_digest(keys), 16))


def digest_hex(value: float) -> str:
    """The 12 hex digits of a `digest_value`."""
    return f"{int(value):012x}"


def redraw_seed(seed: int, attempt: int) -> int:
    """The task seed of redraw ``attempt`` (≥ 1) of a task first drawn with ``seed``, in [0, 2**31)."""
    return derive_seed("disjoint", int(seed), int(attempt)) % 2**31


def train_slot_spec(family: TaskFamily, family_type: str, knobs: dict[str, float], base_seed: int, index: int,
                    excluded: frozenset[str]) -> tuple[TaskSpec, int]:
    """The task of seeded train slot ``index`` of a family configured as ``family_type`` as the pool first draws it (`slot_seed`, then
    `disjoint_instance` off ``excluded``), and how many redraws that took; the cold start skips
    the same tasks with ``policy.sft.skip_train_tasks``.

    Raises:
        EvalInstanceError: every redraw gave an excluded instance.
    """
    return disjoint_instance(family, TaskSpec(family_type, dict(knobs), slot_seed(base_seed, "train", index)), excluded)


def disjoint_instance(family: TaskFamily, spec: TaskSpec, excluded: frozenset[str],
                      max_redraws: int = MAX_REDRAWS) -> tuple[TaskSpec, int]:
    """``spec``, or when its instance is in ``excluded`` the first of the same knobs with seed
    `redraw_seed` (spec.seed, 1), (…, 2), … that is not; returns it and how many redraws it took.

    Raises:
        EvalInstanceError: ``max_redraws`` redraws all gave excluded instances (the message names the
            family and the knobs).
    """
    if family.instance_key(spec) not in excluded:
        return spec, 0
    for attempt in range(1, max_redraws + 1):
        other = TaskSpec(spec.family, dict(spec.knobs), redraw_seed(spec.seed, attempt))
        if family.instance_key(other) not in excluded:
            return other, attempt
    knobs = ", ".join(f"{k}={v:g}" for k, v in sorted(spec.knobs.items()))
    raise EvalInstanceError(f"{spec.family} with {knobs}: {max_redraws + 1} seeds from {spec.seed} all drew a "
                            "held-out or OOD instance (this knob setting has hardly any other)")


def train_instance(family: TaskFamily, spec: TaskSpec, episode_seed: int, per_rollout: bool,
                   excluded: frozenset[str]) -> tuple[TaskSpec, int]:
    """The instance a train rollout with ``episode_seed`` plays, and its redraws: the task itself,
    or with ``per_rollout`` (`FamilyConfig.train_instances: rollout`) the `rollout_instance`, drawn
    again while it is excluded (`disjoint_instance`).

    Raises:
        EvalInstanceError: no instance outside ``excluded`` was found.
    """
    if not per_rollout:
        return spec, 0
    return disjoint_instance(family, rollout_instance(spec, episode_seed), excluded)


def eval_clash(family: TaskFamily, spec: TaskSpec, per_rollout: bool, excluded: frozenset[str]) -> str | None:
    """Why a candidate variant ``spec`` would train on an evaluation instance, or None when it would not.

    A per-rollout task stands for its knobs: it clashes only when no instance of them lies
    outside ``excluded`` (rollout 0's draw, `train_instance`). Any other task clashes when its
    own instance is excluded.
    """
    if per_rollout:
        try:
            train_instance(family, spec, 0, True, excluded)
        except EvalInstanceError as exc:
            return f"every instance of its knobs is a held-out or OOD instance ({exc})"
        return None
    key = family.instance_key(spec)
    return f"it is a held-out or OOD instance ({key})" if key in excluded else None


def disjoint_specs(family: TaskFamily, knobs: Mapping[str, float], n: int, base: int,
                   excluded: frozenset[str]) -> list[TaskSpec]:
    """The first ``n`` tasks with ``knobs`` and seeds ``base``, ``base + 1``, … whose instances
    are not in ``excluded`` (the cold start's training tasks).

    Raises:
        EvalInstanceError: fewer than ``n`` among the first ``20·n + MAX_REDRAWS`` seeds.
    """
    out: list[TaskSpec] = []
    for i in range(20 * n + MAX_REDRAWS):
        if len(out) == n:
            break
        spec = TaskSpec(family.name, {k: float(v) for k, v in knobs.items()}, base + i)
        if not excluded or family.instance_key(spec) not in excluded:
            out.append(spec)
    if len(out) < n:
        raise EvalInstanceError(f"{family.name}: only {len(out)} of {n} tasks from seed {base} on are not held-out "
                                "or OOD instances")
    return out


def round_overlap(drawn: Iterable[tuple[TaskFamily, TaskSpec, Sequence[int], bool]],
                  excluded: frozenset[str]) -> dict[str, float]:
    """What one round's train jobs play, against the evaluation keys ``excluded`` (pure).

    ``drawn``: (family, task, the job's episode seeds, per-rollout?) for each train job (drawn
    tasks and candidates). Returns ``eval/overlap``: instances that are evaluation instances (a
    per-rollout draw that cannot be redrawn counts too: the env refuses to play it), 0 when the
    rule holds; ``env/train_instances``: instances drawn (a task's one instance, or one per rollout);
    ``env/redrawn_instances``: per-rollout draws that were evaluation instances and were drawn again.
    """
    overlap = instances = redrawn = 0
    for family, spec, seeds, per_rollout in drawn:
        if not per_rollout:
            instances += 1
            overlap += family.instance_key(spec) in excluded
            continue
        for seed in seeds:
            instances += 1
            try:
                _, redraws = train_instance(family, spec, int(seed), True, excluded)
            except EvalInstanceError:
                overlap += 1
                continue
            redrawn += redraws > 0
    return {"eval/overlap": float(overlap), "env/train_instances": float(instances),
            "env/redrawn_instances": float(redrawn)}
