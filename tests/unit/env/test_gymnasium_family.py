"""Any Gymnasium id as a task family: text observations, named actions, reproducible episodes,
the two winning rules, and clear errors for ids that cannot be one."""

from __future__ import annotations

import pytest

from services.common.errors import InvalidArgumentError
from services.env.families.base import TaskSpec
from services.env.families.gymnasium_family import GymnasiumFamily


def test_taxi_renders_text_names_its_actions_and_repeats_an_episode_by_seed() -> None:
    family = GymnasiumFamily("Taxi-v4")
    assert family.actions == ("south", "north", "east", "west", "pickup", "dropoff")
    assert family.max_steps == 200  # the id's own max_episode_steps
    spec = TaskSpec("gymnasium", {}, 3)
    a, b = (family.make_episode(spec, s) for s in (1, 1))
    assert "+---------+" in a.observation and "\x1b[" not in a.observation  # ansi map, colours removed
    assert a.observation == b.observation
    result = a.step("dropoff")  # dropping off with no passenger: -10, goes on
    assert result.reward == -10.0 and not result.terminated and not result.won
    assert a.step("fly").observation.startswith("Unknown action 'fly'")
    assert a.step("2").reward == -1.0  # an index works too
    assert family.oracle_plan_length(spec) == 0 and a.oracle_plan() is None


def test_cliffwalking_is_won_by_ending_and_blackjack_by_a_positive_reward() -> None:
    cliff = GymnasiumFamily("CliffWalking-v1", won_when="terminated")
    episode = cliff.make_episode(TaskSpec("gymnasium", {}, 0), 0)
    for action in ["up"] + ["right"] * 11 + ["down"]:
        result = episode.step(action)
    assert result.terminated and result.won and result.admissible_actions == ()
    blackjack = GymnasiumFamily("Blackjack-v1")
    assert blackjack.actions == ("stick", "hit")
    outcomes = set()
    for seed in range(30):
        result = blackjack.make_episode(TaskSpec("gymnasium", {}, seed), 0).step("stick")
        assert result.terminated and result.won == (result.reward > 0)
        assert result.observation.splitlines()[1].startswith("Observation: ")  # no ansi rendering: the value
        outcomes.add(result.won)
    assert outcomes == {True, False}


@pytest.mark.parametrize("env_id, message", [("NoSuchEnv-v0", "is not a registered Gymnasium environment"),
                                             ("MountainCarContinuous-v0", "a discrete one is needed")])
def test_ids_that_cannot_be_a_family_are_refused_by_name(env_id: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        GymnasiumFamily(env_id)
