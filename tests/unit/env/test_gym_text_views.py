"""gym_text's observation views: the whole map, or the 5×5 window around the agent + the goal's offset."""

from __future__ import annotations

import pytest

from services.common.config import FamilyConfig
from services.env.families.base import TaskSpec
from services.env.families.frozenlake import FrozenLakeFamily, goal_offset, render_window
from services.env.families.registry import build_family

DESC = ["SFFH", "FHFF", "FFFH", "HFFG"]


def test_window_marks_the_agent_and_off_map_tiles() -> None:
    assert render_window(DESC, 0, 0).splitlines() == [
        "# # # # #",
        "# # # # #",
        "# # A F F",
        "# # F H F",
        "# # F F F",
    ]
    assert render_window(DESC, 2, 2).splitlines() == [
        "S F F H #",
        "F H F F #",
        "F F A H #",
        "H F F G #",
        "# # # # #",
    ]


@pytest.mark.parametrize(("row", "col", "expected"), [
    (0, 0, "3 down, 3 right"), (3, 1, "2 right"), (2, 3, "1 down"), (3, 3, "here")])
def test_goal_offset(row: int, col: int, expected: str) -> None:
    assert goal_offset(DESC, row, col) == expected


def test_goal_offset_without_goal_is_an_error() -> None:
    with pytest.raises(ValueError, match="no goal"):
        goal_offset(["SF", "FF"], 0, 0)


def test_window_episode_observes_window_and_offset_after_each_move() -> None:
    family = FrozenLakeFamily(view="window")
    episode = family.make_episode(TaskSpec("gym_text", {"size": 4, "hole_prob": 0.2}, 3), 0)
    desc = family.map_for(TaskSpec("gym_text", {"size": 4, "hole_prob": 0.2}, 3))
    assert episode.observation.splitlines()[1:] == render_window(desc, 0, 0).splitlines() + [
        f"Goal: {goal_offset(desc, 0, 0)}."]
    plan = episode.oracle_plan()
    assert plan
    result = episode.step(plan[0])
    row, col = divmod(episode.state, len(desc))
    assert result.observation.endswith(f"Goal: {goal_offset(desc, row, col)}.")
    assert render_window(desc, row, col) in result.observation
    assert "row" not in result.observation  # the window view never gives absolute coordinates


def test_map_view_is_the_default_and_unchanged() -> None:
    episode = FrozenLakeFamily().make_episode(TaskSpec("gym_text", {"size": 4, "hole_prob": 0.2}, 3), 0)
    assert "You are at row 1, column 1." in episode.observation


def test_config_selects_the_view_and_rejects_unknown_ones() -> None:
    family = build_family(FamilyConfig(type="gym_text", knobs={"size": 4, "hole_prob": 0.2}, observation="window"),
                          ".cache/env")
    assert isinstance(family, FrozenLakeFamily) and family.view == "window"
    with pytest.raises(ValueError, match="observation"):
        FrozenLakeFamily(view="pixels")
    with pytest.raises(Exception, match="observation"):
        FamilyConfig(type="gym_text", knobs={"size": 4}, observation="pixels")  # type: ignore[arg-type]
