"""reasoning-gym single-turn tasks, the parametric proposer, sessions."""

from __future__ import annotations

import pytest

from rlanything.v1.events_pb2 import DIRECTION_EASIER, DIRECTION_HARDER, BadSteps, TaskRef, TaskReport
from services.common.errors import InvalidArgumentError, NotFoundError
from services.env.families.base import TaskSpec
from services.env.families.frozenlake import FrozenLakeFamily
from services.env.families.reasoning_gym_family import ReasoningGymFamily
from services.env.proposer import ParametricProposer, bad_step_share, moves_difficulty
from services.env.sessions import SessionStore


def test_reasoning_gym_gold_answer_wins_and_wrong_loses() -> None:
    family = ReasoningGymFamily("basic_arithmetic")
    task = TaskSpec("reasoning_gym", {"level": 1}, 11)
    episode = family.make_episode(task, 0)
    gold = episode.oracle_plan()
    assert episode.single_turn and episode.admissible_actions == () and len(gold) == 1
    result = episode.step(gold[0])
    assert result.won and result.reward == 1.0 and result.terminated
    wrong = family.make_episode(task, 0).step("not a number")
    assert not wrong.won and wrong.reward == 0.0 and wrong.terminated
    assert family.oracle_plan_length(task) == 1


def test_reasoning_gym_unknown_dataset() -> None:
    with pytest.raises(InvalidArgumentError, match="'nope' is not registered"):
        ReasoningGymFamily("nope")


def report(acc: float, bad: list[list[int]]) -> TaskReport:
    return TaskReport(job_id="r0/x/v0", acc=acc, rollouts=8, task=TaskRef(slot_id="x"),
                      bad_steps=[BadSteps(trajectory_id=f"t{i}", step_indices=b) for i, b in enumerate(bad)])


def test_bad_step_share() -> None:
    assert bad_step_share(report(1.0, []), 6) == 0.0
    assert bad_step_share(report(0.5, [[0, 1, 2], [3]]), 4) == 0.5
    assert bad_step_share(report(0.0, [[0, 1, 2, 3, 4, 5]]), 2) == 1.0


def test_parametric_proposer_moves_one_knob() -> None:
    family = FrozenLakeFamily()
    parent = TaskSpec("gym_text", {"size": 4.0, "hole_prob": 0.2}, 5)
    harder = ParametricProposer().propose(family, parent, DIRECTION_HARDER, report(1.0, []), 6, attempt=1)
    assert harder.spec.knobs == {"size": 4.0, "hole_prob": 0.25} and harder.spec.seed != parent.seed
    easier = ParametricProposer().propose(family, parent, DIRECTION_EASIER, report(0.0, [[0, 1, 2, 3]] * 8), 6, 1)
    assert easier.spec.knobs == {"size": 4.0, "hole_prob": 0.15}
    other = ParametricProposer().propose(family, parent, DIRECTION_HARDER, report(1.0, []), 6, attempt=2)
    assert other.spec.seed != harder.spec.seed  # a new attempt is a new task
    at_bounds = TaskSpec("gym_text", {"size": 3.0, "hole_prob": 0.0}, 5)
    assert ParametricProposer().propose(family, at_bounds, DIRECTION_EASIER, report(0.0, []), 4, 1) is None


def test_sessions_expire_when_idle() -> None:
    now = [0.0]
    store = SessionStore(idle_timeout_s=10, max_sessions=2, clock=lambda: now[0])
    family = FrozenLakeFamily()
    task = TaskSpec("gym_text", {"size": 4.0, "hole_prob": 0.2}, 5)
    a = store.add(TaskRef(slot_id="a"), family.make_episode(task, 0), 20, 6)
    now[0] = 8.0
    b = store.add(TaskRef(slot_id="b"), family.make_episode(task, 0), 20, 6)
    now[0] = 12.0
    assert store.get(b.session_id) is b
    with pytest.raises(NotFoundError, match="unknown, closed or expired"):
        store.get(a.session_id)
    store.add(TaskRef(slot_id="c"), family.make_episode(task, 0), 20, 6)
    store.add(TaskRef(slot_id="d"), family.make_episode(task, 0), 20, 6)  # full: least recently used goes
    assert len(store) == 2
    with pytest.raises(NotFoundError):
        store.get(b.session_id)


@pytest.mark.parametrize(("direction", "parent", "plan", "moves"), [
    (DIRECTION_HARDER, 6, 8, True), (DIRECTION_HARDER, 6, 6, False), (DIRECTION_HARDER, 8, 6, False),
    (DIRECTION_EASIER, 8, 6, True), (DIRECTION_EASIER, 6, 6, True), (DIRECTION_EASIER, 6, 8, False),
    (DIRECTION_HARDER, 0, 3, True)])
def test_candidate_must_move_difficulty_the_asked_way(direction: int, parent: int, plan: int, moves: bool) -> None:
    assert moves_difficulty(direction, parent, plan) is moves


def test_a_unicode_minus_answer_is_the_gold_negative_answer() -> None:
    """Regression (field bugs, 6): "−1" (U+2212) scored 0 against the gold "-1"."""
    from services.env.families.reasoning_gym_family import ReasoningGymFamily, normalise_answer

    assert normalise_answer(" \u22127 ") == "-7" and normalise_answer("\uff0b3") == "+3"
    family = ReasoningGymFamily()
    for seed in range(300):
        spec = TaskSpec("reasoning_gym", {"level": 0}, seed)
        (gold,) = family.make_episode(spec, 0).oracle_plan() or [""]
        if gold.startswith("-"):
            break
    else:
        raise AssertionError("no negative gold answer in 300 questions")
    assert family.make_episode(spec, 0).step("\u2212" + gold[1:]).won
    assert not family.make_episode(spec, 0).step("\u2212" + gold[1:] + "1").won
