"""The gym_text family (Gymnasium FrozenLake as text), its oracle and labels."""

from __future__ import annotations

import pytest

from rlanything.v1.events_pb2 import STEP_LABEL_BAD, STEP_LABEL_GOOD, STEP_LABEL_UNSPECIFIED
from services.common.errors import InvalidArgumentError
from services.env.families.base import TaskSpec
from services.env.families.frozenlake import FrozenLakeFamily, shortest_path
from services.env.oracle import step_label

FAMILY = FrozenLakeFamily()


def spec(size: float = 4, hole_prob: float = 0.2, seed: int = 3) -> TaskSpec:
    return TaskSpec("gym_text", {"size": size, "hole_prob": hole_prob}, seed)


def test_shortest_path_avoids_holes() -> None:
    desc = ["SFH", "FHF", "FFG"]
    assert shortest_path(desc, 0, 0) == ["down", "down", "right", "right"]
    assert shortest_path(desc, 2, 2) == []
    assert shortest_path(["SH", "HG"], 0, 0) is None


def test_walkthrough_wins_with_good_labels() -> None:
    episode = FAMILY.make_episode(spec(), 0)
    plan = episode.oracle_plan()
    assert plan and "A F H F" in episode.observation
    before = len(plan)
    for i, action in enumerate(plan):
        result = episode.step(action)
        assert step_label(before, result.oracle_plan_length, result.won) == STEP_LABEL_GOOD
        before = result.oracle_plan_length
        assert result.terminated is (i == len(plan) - 1)
    assert result.won and result.reward == 1.0 and result.oracle_plan_length == 0


def test_step_away_from_goal_is_bad_and_unknown_action_does_not_crash() -> None:
    episode = FAMILY.make_episode(spec(), 0)
    start = len(episode.oracle_plan())
    result = episode.step("left")  # into the west edge: no progress
    assert "bumped into the edge" in result.observation
    assert step_label(start, result.oracle_plan_length, result.won) == STEP_LABEL_BAD
    result = episode.step("jump")
    assert "Unknown action 'jump'" in result.observation and not result.terminated
    assert result.oracle_plan_length == start


def test_falling_in_a_hole_is_bad_and_terminal() -> None:
    episode = FAMILY.make_episode(spec(), 0)  # map row 1 is "S F H F"
    episode.step("right")
    result = episode.step("right")
    assert result.terminated and not result.won and result.oracle_plan_length is None
    assert step_label(5, None, False) == STEP_LABEL_BAD
    assert step_label(None, None, False) == STEP_LABEL_UNSPECIFIED


def test_maps_are_deterministic_per_seed_and_differ_across_seeds() -> None:
    assert FAMILY.map_for(spec(seed=1)) == FAMILY.map_for(spec(seed=1))
    assert FAMILY.map_for(spec(seed=1)) != FAMILY.map_for(spec(seed=2))
    assert len(FAMILY.map_for(spec(size=6))) == 6


def test_knobs_validate_and_move() -> None:
    with pytest.raises(InvalidArgumentError, match=r"knob size=9 outside \[3, 8\]"):
        FAMILY.validate(spec(size=9))
    with pytest.raises(InvalidArgumentError, match="unknown knob"):
        FAMILY.validate(TaskSpec("gym_text", {"size": 4, "hole_prob": 0.1, "wind": 1}, 0))
    assert FAMILY.move_knob({"size": 4, "hole_prob": 0.2}, "size", harder=True) == {"size": 5.0, "hole_prob": 0.2}
    assert FAMILY.move_knob({"size": 4, "hole_prob": 0.2}, "hole_prob", harder=False) == {"size": 4, "hole_prob": 0.15}
    assert FAMILY.move_knob({"size": 8, "hole_prob": 0.2}, "size", harder=True) is None


def test_bad_step_feedback_chooses_the_knob() -> None:
    assert FAMILY.knob_preference(harder=False, bad_step_share=0.6)[0] == "hole_prob"
    assert FAMILY.knob_preference(harder=False, bad_step_share=0.0)[0] == "size"
    assert FAMILY.knob_preference(harder=True, bad_step_share=0.0)[0] == "hole_prob"
    assert FAMILY.knob_preference(harder=True, bad_step_share=0.6)[0] == "size"
