"""gym_text's same-task knobs: ``slip`` (the same map with slippery moves, Gymnasium's
``is_slippery`` with ``success_rate = 1 − slip``) and ``head_start`` (the agent starts along the
shortest path), which the proposer moves first with ``same_task_first``."""

from __future__ import annotations

import pytest

from rlanything.v1.events_pb2 import DIRECTION_EASIER, DIRECTION_HARDER, TaskReport
from services.common.errors import InvalidArgumentError
from services.env.families.base import TaskSpec
from services.env.families.frozenlake import FrozenLakeFamily
from services.env.proposer import ParametricProposer, check_same_task_knobs

PARENT = TaskSpec("gym_text", {"size": 4.0, "hole_prob": 0.2}, 5)


def oracle_success(family: FrozenLakeFamily, spec: TaskSpec, episodes: int = 200) -> float:
    """Share of episodes the oracle (shortest path from wherever it stands) wins."""
    wins = 0
    for seed in range(episodes):
        episode = family.make_episode(spec, seed)
        for _ in range(family.max_steps):
            plan = episode.oracle_plan()
            if not plan:
                break
            result = episode.step(plan[0])
            if result.terminated:
                wins += result.won
                break
    return wins / episodes


def test_slip_is_optional_and_moves_difficulty_by_small_steps_on_the_same_map() -> None:
    family = FrozenLakeFamily(view="window")
    family.validate(PARENT)  # a task without the knob: slip 0, as before
    with pytest.raises(InvalidArgumentError, match="slip=0.7 outside"):
        family.validate(TaskSpec("gym_text", {**PARENT.knobs, "slip": 0.7}, 5))
    rates = [oracle_success(family, TaskSpec("gym_text", {**PARENT.knobs, "slip": s}, 5)) for s in (0.0, 0.1, 0.2, 0.3)]
    assert rates[0] == 1.0 and rates[0] > rates[1] > rates[2] > rates[3] > 0.2, rates
    assert family.map_for(TaskSpec("gym_text", {**PARENT.knobs, "slip": 0.3}, 5)) == family.map_for(PARENT)


def test_a_slip_is_told_as_such() -> None:
    family = FrozenLakeFamily(view="window")
    texts = []
    for seed in range(40):
        episode = family.make_episode(TaskSpec("gym_text", {**PARENT.knobs, "slip": 0.5}, 5), seed)
        for _ in range(4):
            plan = episode.oracle_plan()
            if not plan:
                break
            result = episode.step(plan[0])
            texts.append(result.observation.splitlines()[0])
            if result.terminated:
                break
    assert any(t.startswith("You slipped: you tried to move") for t in texts)
    assert any(t.startswith("You moved") for t in texts)


def test_same_task_first_moves_slip_on_the_same_seed_then_the_other_knobs() -> None:
    family, proposer = FrozenLakeFamily(view="window"), ParametricProposer(same_task_first=True)
    harder = proposer.propose(family, PARENT, DIRECTION_HARDER, TaskReport(), plan_length=6, attempt=3, try_index=0)
    assert harder.same_task and harder.spec.seed == PARENT.seed and harder.spec.knobs["slip"] == 0.1
    assert "slip 0 -> 0.1 on the same task" in harder.note
    slippery = TaskSpec("gym_text", {**PARENT.knobs, "slip": 0.2}, 5)
    easier = proposer.propose(family, slippery, DIRECTION_EASIER, TaskReport(), plan_length=6, attempt=3)
    assert easier.same_task and easier.spec.knobs["slip"] == 0.1
    # at the bounds of both same-task knobs an easier variant is a new map of another size or hole density
    ahead = TaskSpec("gym_text", {**PARENT.knobs, "head_start": 8.0}, 5)
    new_map = proposer.propose(family, ahead, DIRECTION_EASIER, TaskReport(), plan_length=1, attempt=3)
    assert not new_map.same_task and new_map.spec.seed != PARENT.seed and "slip" not in new_map.spec.knobs
    # without the option slip never moves (the default run is unchanged)
    plain = ParametricProposer().propose(family, PARENT, DIRECTION_HARDER, TaskReport(), plan_length=6, attempt=3)
    assert not plain.same_task and "slip" not in plain.spec.knobs


def test_head_start_starts_the_agent_along_the_shortest_path_on_the_same_map() -> None:
    family = FrozenLakeFamily(view="window")
    lengths = [family.oracle_plan_length(TaskSpec("gym_text", {**PARENT.knobs, "head_start": k}, 5)) for k in range(9)]
    assert lengths[:6] == [6, 5, 4, 3, 2, 1] and lengths[6:] == [1, 1, 1]  # at least one step is left
    episode = family.make_episode(TaskSpec("gym_text", {**PARENT.knobs, "head_start": 5}, 5), 0)
    assert episode.step(episode.oracle_plan()[0]).won


def test_an_earlier_same_task_move_is_undone_first_and_a_rejection_takes_a_larger_step() -> None:
    family, proposer = FrozenLakeFamily(view="window"), ParametricProposer(same_task_first=True)
    started = TaskSpec("gym_text", {**PARENT.knobs, "head_start": 2.0}, 5)
    harder = proposer.propose(family, started, DIRECTION_HARDER, TaskReport(), plan_length=4, attempt=0)
    assert harder.same_task and harder.spec.knobs == {**started.knobs, "head_start": 1.0}  # not more slip
    easier = proposer.propose(family, PARENT, DIRECTION_EASIER, TaskReport(), plan_length=6, attempt=0)
    assert easier.same_task and easier.spec.knobs["head_start"] == 1.0  # slip is at 0: a head start
    steps = [proposer.propose(family, PARENT, DIRECTION_HARDER, TaskReport(), plan_length=6, attempt=0,
                              rejected=r).spec.knobs["slip"] for r in range(4)]
    assert steps == [0.1, 0.2, 0.3, 0.1]


def test_same_task_knobs_limits_the_small_steps_to_the_named_knob() -> None:
    """head_start only: a harder variant of a map at head start 0 is a new map, never a slippery one."""
    family = FrozenLakeFamily(view="window")
    proposer = ParametricProposer(same_task_first=True, same_task_knobs=["head_start"])
    harder = proposer.propose(family, PARENT, DIRECTION_HARDER, TaskReport(), plan_length=6, attempt=3)
    assert not harder.same_task and "slip" not in harder.spec.knobs and harder.spec.seed != PARENT.seed
    easier = proposer.propose(family, PARENT, DIRECTION_EASIER, TaskReport(), plan_length=6, attempt=3)
    assert easier.same_task and easier.spec.knobs == {**PARENT.knobs, "head_start": 1.0}


def test_an_unknown_same_task_knob_fails_at_start_up_naming_it() -> None:
    check_same_task_knobs([FrozenLakeFamily()], ["head_start", "slip"])
    with pytest.raises(ValueError, match=r"same_task_knobs: \['size'\] are not same-task knobs .*'head_start', 'slip'"):
        check_same_task_knobs([FrozenLakeFamily()], ["size"])
