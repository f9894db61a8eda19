"""The cold start's demonstrations skip the run's held-out and OOD instances (`services.env.disjoint`)."""

from __future__ import annotations

from services.common.config import FamilyConfig
from services.env.disjoint import disjoint_specs
from services.env.families.base import TaskSpec
from services.env.families.frozenlake import FrozenLakeFamily
from services.offline.expert import expert_demonstrations
from services.offline.policy_sft import TRAIN_SEED_BASE, demonstrations

FAMILY = FrozenLakeFamily(view="map")  # the whole map in every chat: the demonstrations name their maps
CFG = FamilyConfig(type="gym_text", knobs={"size": 4, "hole_prob": 0.2})


def _maps(demos) -> set[str]:
    """The start maps of the demonstrations' first steps (the agent 'A' on the start tile 'S')."""
    firsts = [d.chat[-1]["content"] for d in demos if "You are at the start." in d.chat[-1]["content"]]
    return {"/".join(line.replace(" ", "") for line in text.split("You are at the start.\n", 1)[1].splitlines()[:4])
            .replace("A", "S") for text in firsts}


def test_demonstrations_play_no_excluded_map_and_as_many_tasks() -> None:
    plain = demonstrations(FAMILY, CFG, 12, 0)
    first = [FAMILY.instance_key(TaskSpec("gym_text", dict(CFG.knobs), TRAIN_SEED_BASE + i)) for i in range(12)]
    excluded = frozenset(first[::2])  # every other one of the plain tasks is "held out"
    kept = demonstrations(FAMILY, CFG, 12, 0, excluded)
    specs = disjoint_specs(FAMILY, CFG.knobs, 12, TRAIN_SEED_BASE, excluded)
    assert len(specs) == 12 and [d.response for d in kept] == [
        d.response for s in specs for d in expert_demonstrations(FAMILY, s, 0)]
    held = {k.removeprefix("gym_text:") for k in excluded}
    assert held <= _maps(plain) and not held & _maps(kept)


def test_skip_train_tasks_adds_exactly_the_seeded_train_slots_to_what_the_cold_start_skips() -> None:
    from services.common.config import RunConfig
    from services.env.disjoint import disjoint_instance, slot_seed
    from services.env.families.code_family import CodeFamily
    from services.run.coldstart import _coldstart_excluded, held_out_keys, policy_coldstart_dir, train_keys

    family = CodeFamily()  # instance keys need no sandbox
    fam = {"type": "code", "knobs": {"ops": 1, "examples": 2, "max_constant": 99}, "train_slots": 12,
           "heldout_slots": 8, "ood_knobs": {"ops": 2}, "ood_slots": 4}
    plain = RunConfig.model_validate({"seed": 3, "env": {"families": [fam]}})
    skip = RunConfig.model_validate({"seed": 3, "env": {"families": [fam]}, "policy": {"sft": {"skip_train_tasks": True}}})
    held = held_out_keys(plain, family)
    train = train_keys(plain, family, held)
    pool_draws = {family.instance_key(disjoint_instance(family, TaskSpec("code", {"ops": 1.0, "examples": 2.0,
                  "max_constant": 99.0}, slot_seed(3, "train", i)), held)[0]) for i in range(12)}
    assert train == pool_draws and 8 <= len(train) <= 12 and not train & held
    assert _coldstart_excluded(plain, family) == held and _coldstart_excluded(skip, family) == held | train
    assert policy_coldstart_dir(plain) != policy_coldstart_dir(skip)  # never the other's cached model


def test_the_cold_start_that_skips_train_tasks_is_cached_per_train_slot_count() -> None:
    """Skipping the train slots' instances makes the number of train slots part of what the cold start
    learns from; without the switch the pool's size stays out of the key (one cold start shared)."""
    from services.common.config import RunConfig
    from services.run.coldstart import policy_coldstart_dir

    def cold_dir(train_slots: int, skip: bool):
        fam = {"type": "code", "knobs": {"ops": 1, "examples": 2}, "train_slots": train_slots, "heldout_slots": 8}
        return policy_coldstart_dir(RunConfig.model_validate(
            {"env": {"families": [fam]}, "policy": {"sft": {"skip_train_tasks": skip}}}))

    assert cold_dir(32, skip=True) != cold_dir(128, skip=True)
    assert cold_dir(32, skip=False) == cold_dir(128, skip=False)
