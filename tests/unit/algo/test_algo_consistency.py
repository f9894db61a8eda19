"""Loop 2 formula on hand-made steps: the RM's consistency rewards, and the bad-step list."""

from __future__ import annotations

import math

import pytest

from services.common.algo.bad_steps import bad_step_indices
from services.common.algo.consistency_reward import consistency_rewards, raw_vote_rewards

R2 = math.sqrt(2)


@pytest.mark.parametrize("outcome", [1, -1])
@pytest.mark.parametrize("votes_M", [[1, 1, -1], [1, -1, -1], [-1, 1, 1, -1, 1]])
def test_split_votes_reinforce_the_votes_that_agree_with_the_outcome(outcome: int, votes_M: list[int]) -> None:
    rewards_M = consistency_rewards(outcome, votes_M, lam=1.0)
    assert rewards_M is not None
    for vote, r in zip(votes_M, rewards_M):
        assert (r > 0) == (vote == outcome), (vote, r)
    assert sum(rewards_M) == pytest.approx(0.0)


def test_split_vote_values_exactly() -> None:
    # O = +1, votes (+1, +1, -1): S̄ = 1/3, raw = 4/3 · S = (4/3, 4/3, -4/3)
    assert raw_vote_rewards(1, [1, 1, -1], lam=1.0) == pytest.approx([4 / 3, 4 / 3, -4 / 3])
    assert consistency_rewards(1, [1, 1, -1], lam=1.0) == pytest.approx([1 / R2, 1 / R2, -R2])
    # O = -1, same votes: raw = -2/3 · S; the lone -1 vote agrees with the outcome
    assert raw_vote_rewards(-1, [1, 1, -1], lam=1.0) == pytest.approx([-2 / 3, -2 / 3, 2 / 3])
    assert consistency_rewards(-1, [1, 1, -1], lam=1.0) == pytest.approx([-1 / R2, -1 / R2, R2])


@pytest.mark.parametrize("votes_M", [[1, 1, 1], [-1, -1, -1], [0, 0, 0], [1]])
@pytest.mark.parametrize("outcome", [1, -1])
def test_unanimous_steps_never_train_the_rm(outcome: int, votes_M: list[int]) -> None:
    assert consistency_rewards(outcome, votes_M, lam=1.0) is None


def test_invalid_votes_get_the_format_penalty_before_z_scoring() -> None:
    # O = +1, votes (+1, 0, -1): S̄ = 0, raw = (1, -2, -1)
    assert raw_vote_rewards(1, [1, 0, -1], lam=1.0) == [1.0, -2.0, -1.0]
    assert consistency_rewards(1, [1, 0, -1], lam=1.0) == pytest.approx([1.3363062, -1.0690450, -0.2672612])
    # a unanimous-but-one-invalid step trains the RM: the invalid vote is the worst one
    rewards_M = consistency_rewards(1, [1, 1, 0], lam=1.0)
    assert rewards_M is not None and rewards_M[2] < 0 < rewards_M[0] == rewards_M[1]
    assert raw_vote_rewards(-1, [0, -1], lam=1.0, invalid_penalty=-5.0) == [-5.0, 1.5]


def test_lambda_zero_rewards_agreement_with_the_outcome_only() -> None:
    assert raw_vote_rewards(-1, [1, -1, 0], lam=0.0) == [-1.0, 1.0, -2.0]


def test_bad_steps_are_the_steps_every_vote_called_bad() -> None:
    assert bad_step_indices([[-1, -1, -1], [-1, 0, -1], [1, -1, -1], [], [-1], [-1, -1]]) == [0, 4, 5]
    assert bad_step_indices([]) == []
