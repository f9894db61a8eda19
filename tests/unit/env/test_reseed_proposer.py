"""Reseed moves of the parametric proposer: the first tries keep the knobs and draw another task,
which must move its oracle plan strictly; then the knob moves as before."""

from __future__ import annotations

from rlanything.v1.events_pb2 import DIRECTION_EASIER, DIRECTION_HARDER, TaskReport

from services.env.families.base import TaskSpec
from services.env.families.frozenlake import FrozenLakeFamily
from services.env.proposer import ParametricProposer

PARENT = TaskSpec("gym_text", {"size": 4.0, "hole_prob": 0.2}, 11)


def test_first_tries_reseed_then_knobs_move() -> None:
    family, proposer = FrozenLakeFamily(view="window"), ParametricProposer(reseed_tries=2)
    tries = [proposer.propose(family, PARENT, DIRECTION_HARDER, TaskReport(), plan_length=4, attempt=a, try_index=a)
             for a in range(4)]
    assert [t.reseed for t in tries] == [True, True, False, False]
    assert [t.spec.knobs for t in tries[:2]] == [PARENT.knobs, PARENT.knobs]
    assert len({t.spec.seed for t in tries}) == 4  # each try another task
    assert "same knobs, another task" in tries[0].note and "longer plan" in tries[0].note
    assert tries[2].spec.knobs != PARENT.knobs and tries[3].spec.knobs != PARENT.knobs
    assert tries[2].spec.knobs != tries[3].spec.knobs  # the second knob try starts from the next knob
    easier = proposer.propose(family, PARENT, DIRECTION_EASIER, TaskReport(), plan_length=4, attempt=0)
    assert easier.reseed and "shorter plan" in easier.note


def test_without_a_known_plan_there_is_nothing_to_compare_so_knobs_move_at_once() -> None:
    proposal = ParametricProposer(reseed_tries=2).propose(FrozenLakeFamily(), PARENT, DIRECTION_HARDER, TaskReport(),
                                                          plan_length=0, attempt=0, try_index=0)
    assert not proposal.reseed and proposal.spec.knobs != PARENT.knobs


def test_default_is_knob_moves_only() -> None:
    proposal = ParametricProposer().propose(FrozenLakeFamily(), PARENT, DIRECTION_HARDER, TaskReport(), plan_length=4,
                                            attempt=0, try_index=0)
    assert not proposal.reseed
