"""Held out by construction (`services.env.disjoint`): instance identity by content, redraws,
refused variants, cold-start tasks and the round's ``eval/overlap`` count."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.common.config import load_config
from services.env.disjoint import (EvalInstanceError, disjoint_instance, disjoint_specs, eval_clash, eval_keys,
                                   eval_specs, redraw_seed, round_overlap, slot_seed, train_instance)
from services.env.families.base import TaskSpec, rollout_instance
from services.env.families.frozenlake import FrozenLakeFamily
from services.env.families.live import LiveFamily
from services.env.families.reasoning_gym_family import ReasoningGymFamily
from services.env.families.textworld_family import game_identity

ROOT = Path(__file__).resolve().parents[3]
LAKE = FrozenLakeFamily()
K4 = {"size": 4.0, "hole_prob": 0.2}
EMPTY_4X4 = "gym_text:SFFF/FFFF/FFFF/FFFG"


def _default_eval() -> tuple[list[TaskSpec], frozenset[str]]:
    config = load_config(ROOT / "configs" / "default.yaml", [])
    specs = eval_specs(config.env.families, config.seed)
    return specs, eval_keys({"gym_text": LAKE}, specs)


def test_a_frozenlake_instance_is_its_map_not_its_seed() -> None:
    assert LAKE.instance_key(TaskSpec("gym_text", K4, 2)) == LAKE.instance_key(TaskSpec("gym_text", K4, 3)) == \
        "gym_text:SFHF/FFFF/FFFF/FFFG"  # two seeds, one map
    assert LAKE.instance_key(TaskSpec("gym_text", K4, 8)) != LAKE.instance_key(TaskSpec("gym_text", K4, 2))
    same_map = TaskSpec("gym_text", {**K4, "slip": 0.3, "head_start": 2.0}, 2)  # other dynamics, the same map
    assert LAKE.instance_key(same_map) == LAKE.instance_key(TaskSpec("gym_text", K4, 2))
    assert LAKE.instance_key(TaskSpec("gym_text", {"size": 4.0, "hole_prob": 0.0}, 99)) == EMPTY_4X4


def test_other_families_name_their_instances_by_content() -> None:
    rg = ReasoningGymFamily("basic_arithmetic")
    level0 = {"level": 0.0}
    assert rg.instance_key(TaskSpec("reasoning_gym", level0, 0)) == rg.instance_key(TaskSpec("reasoning_gym", level0, 153))
    assert rg.make_episode(TaskSpec("reasoning_gym", level0, 153), 0).task_text == "Calculate -1 / 1."
    assert rg.instance_key(TaskSpec("reasoning_gym", level0, 1)) != rg.instance_key(TaskSpec("reasoning_gym", level0, 0))
    live = LiveFamily()
    assert live.instance_key(TaskSpec("live", {"hint": 1.0}, 7)) == live.instance_key(TaskSpec("live", {"hint": 0.0}, 7))
    game = {"world": [{"name": "at", "arguments": ["P", "r_0"]}], "quests": [{"commands": ["close box"], "desc": "a"}],
            "infos": [["P", {"id": "P", "type": "P", "name": None, "desc": "x"}]], "objective": "Close the box!",
            "metadata": {"uuid": "tw-seed-5"}}
    reworded = {**game, "objective": "Please close it.", "metadata": {"uuid": "tw-seed-6"},
                "quests": [{"commands": ["close box"], "desc": "b"}],
                "infos": [["P", {"id": "P", "type": "P", "name": None, "desc": "y"}]]}
    assert game_identity(reworded) == game_identity(game)  # another seed, the same game in other words
    assert game_identity({**game, "quests": [{"commands": ["open box"]}]}) != game_identity(game)


def test_the_default_configs_eval_set_and_how_much_of_a_plain_draw_falls_in_it() -> None:
    specs, keys = _default_eval()
    assert len(specs) == 300 and specs[0].seed == slot_seed(0, "heldout", 0) == 1_000_000
    assert sum(k.count("/") == 3 for k in keys) == 152  # 200 held-out slots, 152 distinct 4x4 maps
    assert sum(k.count("/") == 4 for k in keys) == 100  # 100 OOD 5x5 maps, all distinct
    plain = [rollout_instance(TaskSpec("gym_text", K4, slot_seed(0, "train", i)), seed)
             for i in range(64) for seed in range(8)]
    assert sum(LAKE.instance_key(s) in keys for s in plain) > len(plain) // 3  # without the rule: ~46 %
    drawn = [train_instance(LAKE, TaskSpec("gym_text", K4, slot_seed(0, "train", i)), seed, True, keys)[0]
             for i in range(64) for seed in range(8)]
    assert not any(LAKE.instance_key(s) in keys for s in drawn)
    assert [s for s, p in zip(drawn, plain) if LAKE.instance_key(p) not in keys] == \
        [p for p in plain if LAKE.instance_key(p) not in keys]  # a draw outside the set is kept as it is


def test_a_redraw_is_the_next_derived_seed_and_deterministic() -> None:
    spec = TaskSpec("gym_text", K4, 2)
    assert disjoint_instance(LAKE, spec, frozenset()) == (spec, 0)
    excluded = frozenset({LAKE.instance_key(spec)})
    other, redraws = disjoint_instance(LAKE, spec, excluded)
    assert redraws >= 1 and other.seed == redraw_seed(2, redraws) and dict(other.knobs) == K4
    assert LAKE.instance_key(other) not in excluded
    assert disjoint_instance(LAKE, spec, excluded) == (other, redraws)
    assert train_instance(LAKE, spec, 5, False, excluded) == (spec, 0)  # one instance per task: kept, not redrawn


def test_knobs_with_nothing_outside_the_eval_set_are_refused_by_name() -> None:
    empty = TaskSpec("gym_text", {"size": 4.0, "hole_prob": 0.0}, 1)  # hole 0: one map only
    excluded = frozenset({EMPTY_4X4})
    with pytest.raises(EvalInstanceError, match=r"gym_text with hole_prob=0, size=4: 11 seeds from 1"):
        disjoint_instance(LAKE, empty, excluded, max_redraws=10)
    assert "every instance of its knobs is a held-out or OOD instance" in eval_clash(LAKE, empty, True, excluded)
    assert eval_clash(LAKE, empty, False, excluded) == f"it is a held-out or OOD instance ({EMPTY_4X4})"
    assert eval_clash(LAKE, TaskSpec("gym_text", K4, 8), False, excluded) is None
    assert eval_clash(LAKE, TaskSpec("gym_text", K4, 8), True, excluded) is None
    with pytest.raises(EvalInstanceError, match="only 0 of 3 tasks"):
        disjoint_specs(LAKE, empty.knobs, 3, 0, excluded)


def test_cold_start_tasks_skip_eval_instances_and_keep_their_count() -> None:
    _, keys = _default_eval()
    plain = disjoint_specs(LAKE, K4, 400, 50_000_000, frozenset())
    assert [s.seed for s in plain] == list(range(50_000_000, 50_000_400))
    kept = disjoint_specs(LAKE, K4, 400, 50_000_000, keys)
    assert len(kept) == 400 and not any(LAKE.instance_key(s) in keys for s in kept)
    assert [s for s in plain if LAKE.instance_key(s) not in keys] == kept[:sum(LAKE.instance_key(s) not in keys
                                                                              for s in plain)]


def test_round_overlap_counts_what_slipped_through() -> None:
    _, keys = _default_eval()
    per_rollout = [(LAKE, TaskSpec("gym_text", K4, slot_seed(0, "train", i)), list(range(8)), True) for i in range(12)]
    counts = round_overlap(per_rollout, keys)
    assert counts["eval/overlap"] == 0 and counts["env/train_instances"] == 96
    assert 20 <= counts["env/redrawn_instances"] <= 70  # ~46 % of plain draws are eval maps
    held = TaskSpec("gym_text", K4, slot_seed(0, "heldout", 0))  # a train task that is a held-out one
    fresh, _ = disjoint_instance(LAKE, TaskSpec("gym_text", K4, 8), keys)
    forced = round_overlap([(LAKE, held, [1, 2], False), (LAKE, fresh, [1], False)], keys)
    assert forced == {"eval/overlap": 1.0, "env/train_instances": 2.0, "env/redrawn_instances": 0.0}
    impossible = round_overlap([(LAKE, TaskSpec("gym_text", {"size": 4.0, "hole_prob": 0.0}, 1), [0, 1], True)],
                               frozenset({EMPTY_4X4}))
    assert impossible["eval/overlap"] == 2.0  # cannot be redrawn: counted (and refused at Reset)
