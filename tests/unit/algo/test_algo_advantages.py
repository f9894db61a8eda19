"""Loop 1 formulas on hand-made groups: z-score, task acc, r = O + λ·S̄, per-step-index advantages."""

from __future__ import annotations

import math

import pytest

from services.common.algo.integrated_reward import mean_vote, step_rewards
from services.common.algo.step_advantage import step_advantages
from services.common.algo.task_acc import count_wins, task_acc
from services.common.algo.zscore import centred, has_spread, population_std, zscore

S = math.sqrt(1.5)  # 1.2247...: z of ±1 around 0 in a group {x, 0, -x}


def test_zscore_uses_population_std_and_zero_spread_gives_zeros() -> None:
    assert population_std([1.0, 2.0, 3.0]) == pytest.approx(math.sqrt(2 / 3))
    assert zscore([1.0, 2.0, 3.0]) == pytest.approx([-S, 0.0, S])
    assert zscore([5.0, 5.0, 5.0]) == [0.0, 0.0, 0.0]
    assert zscore([4.0]) == [0.0]
    assert zscore([]) == []
    assert not has_spread([2.0, 2.0 + 1e-9]) and has_spread([0.0, 1.0])
    assert centred([1.0, 2.0, 6.0]) == pytest.approx([-2.0, -1.0, 3.0])
    assert centred([5.0, 5.0]) == [0.0, 0.0] and centred([]) == []


def test_task_acc_and_wins() -> None:
    assert task_acc([1, -1, -1, 1]) == 0.5 and count_wins([1, -1, -1, 1]) == 2
    assert task_acc([-1] * 5) == 0.0 and task_acc([1]) == 1.0
    with pytest.raises(ValueError, match="at least one rollout"):
        task_acc([])
    with pytest.raises(ValueError, match=r"\+1 \(won\) or -1 \(lost\), got \[0\]"):
        task_acc([1, 0])


def test_step_reward_is_outcome_plus_lambda_mean_vote() -> None:
    assert mean_vote([1, 1, -1]) == pytest.approx(1 / 3)
    assert mean_vote([1, 0, 0]) == pytest.approx(1 / 3)  # invalid votes count as 0
    assert mean_vote([]) == 0.0
    assert step_rewards(1, [1 / 3, -1.0, 0.0], lam=1.0) == pytest.approx([4 / 3, 0.0, 1.0])
    assert step_rewards(-1, [1 / 3, -1.0], lam=0.5) == pytest.approx([-5 / 6, -1.5])
    assert step_rewards(-1, [1.0, -1.0], lam=0.0) == [-1.0, -1.0]
    with pytest.raises(ValueError, match="vote values"):
        mean_vote([2])
    with pytest.raises(ValueError, match="outcome"):
        step_rewards(0, [0.0], lam=1.0)


def test_invalid_answer_penalty_is_subtracted_from_invalid_steps_only() -> None:
    assert step_rewards(1, [0.0, 1.0], lam=1.0, invalid_K=[True, False], invalid_penalty=1.5) == [-0.5, 2.0]
    assert step_rewards(-1, [0.0], lam=1.0, invalid_K=[True]) == [-1.0]  # penalty 0: the paper's formula
    with pytest.raises(ValueError, match="invalid_K"):
        step_rewards(1, [0.0, 0.0], lam=1.0, invalid_K=[True], invalid_penalty=1.0)
    with pytest.raises(ValueError, match="invalid_penalty"):
        step_rewards(1, [0.0], lam=1.0, invalid_K=[True], invalid_penalty=-1.0)


def test_advantages_z_score_each_step_index_over_the_rollouts_that_reach_it() -> None:
    rewards_GK = [[2.0, 2.0],                      # won, S̄ = [1, 1]
                  [0.0, -2.0],                     # lost, S̄ = [1, -1]
                  [-2.0, -2 / 3, -4 / 3, -2.0]]    # lost, S̄ = [-1, 1/3, -1/3, -1]
    a_GK = step_advantages(rewards_GK)
    assert a_GK[0] == pytest.approx([S, 1.3363062])
    assert a_GK[1] == pytest.approx([0.0, -1.0690450])
    # steps 2 and 3 are reached by rollout 2 only: advantage 0 by default (our fix)
    assert a_GK[2] == pytest.approx([-S, -0.2672612, 0.0, 0.0])
    assert [len(a) for a in a_GK] == [2, 2, 4]


def test_lone_rollout_knob_restores_the_reference_raw_reward() -> None:
    rewards_GK = [[2.0, 2.0], [0.0, -2.0], [-2.0, -2 / 3, -4 / 3, -2.0]]
    a_GK = step_advantages(rewards_GK, lone_rollout="raw")
    assert a_GK[2][2:] == pytest.approx([-4 / 3, -2.0])
    assert a_GK[0] == pytest.approx(step_advantages(rewards_GK)[0])  # shared step indices unchanged
    assert step_advantages([[0.5]], lone_rollout="raw") == [[0.5]]
    assert step_advantages([[0.5]]) == [[0.0]]
    with pytest.raises(ValueError, match="lone_rollout"):
        step_advantages([[1.0]], lone_rollout="mean")  # type: ignore[arg-type]


def test_all_equal_rewards_give_all_zero_advantages() -> None:
    assert step_advantages([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0, 3.0]]) == [[0.0, 0.0], [0.0, 0.0], [0.0, 0.0, 0.0]]
    assert step_advantages([]) == []


def test_outcome_only_and_integrated_rewards_give_different_advantages() -> None:
    outcomes_G, s_bar_G = [1, 1, -1], [1.0, -1.0, 0.0]   # one step each
    outcome_only = step_advantages([step_rewards(o, [s], lam=0.0) for o, s in zip(outcomes_G, s_bar_G)])
    integrated = step_advantages([step_rewards(o, [s], lam=1.0) for o, s in zip(outcomes_G, s_bar_G)])
    # λ = 0: r = [1, 1, -1] → both winners share the credit
    assert [a[0] for a in outcome_only] == pytest.approx([1 / math.sqrt(2), 1 / math.sqrt(2), -math.sqrt(2)])
    # λ = 1: r = [2, 0, -1] → the winner whose step the RM disliked gets a negative advantage
    assert [a[0] for a in integrated] == pytest.approx([1.3363062, -0.2672612, -1.0690450])


def test_unscaled_advantages_keep_the_judges_share_lambda_sized() -> None:
    """scale="none" (Dr. GRPO): A = r − mean, no division by the std. Where only winners reach a
    step index, their rewards differ by λ·S̄ alone: the z-score turns a lone dissenting vote into
    a −2.2 advantage whatever λ is; unscaled, it stays proportional to λ."""
    winners = [[1.0 + 1.0, 1.0 + s] for s in (1.0, 1.0, 1.0, 1.0, 1.0, -1 / 3)]  # step 1: one split vote
    z = step_advantages(winners)
    assert z[5][1] == pytest.approx(-math.sqrt(5)) and z[0][0] == 0.0
    for lam in (1.0, 0.25):
        rows = [[1.0 + lam * 1.0, 1.0 + lam * s] for s in (1.0, 1.0, 1.0, 1.0, 1.0, -1 / 3)]
        none = step_advantages(rows, scale="none")
        mean = 1.0 + lam * (5 - 1 / 3) / 6
        assert none[5][1] == pytest.approx(1.0 - lam / 3 - mean)
        assert none[0][1] == pytest.approx(1.0 + lam - mean)
        assert step_advantages(rows)[5][1] == pytest.approx(-math.sqrt(5))  # z-score: the same for every λ
    # wins against losses: the outcome's difference is kept, the degenerate cases are as with the z-score
    mixed = step_advantages([[1.0, 1.0], [-1.0]], scale="none")
    assert mixed == [[1.0, 0.0], [-1.0]]
    assert step_advantages([[2.0, 2.0], [2.0, 2.0]], scale="none") == [[0.0, 0.0], [0.0, 0.0]]
    with pytest.raises(ValueError, match="scale"):
        step_advantages([[1.0]], scale="max")  # type: ignore[arg-type]
