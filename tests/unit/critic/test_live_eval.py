"""What a judged live trajectory may train (services/critic/live_eval.py)."""

from __future__ import annotations

import math

import pytest

from rlanything.v1.events_pb2 import (STEP_LABEL_BAD, STEP_LABEL_GOOD, JudgedTrajectory, StepJudgement, Trajectory,
                                      TrajectoryStep, Vote)
from services.critic.live_eval import Baseline, LiveSettings, evaluate_live, live_advantage, update_baseline

S = LiveSettings(min_count=2, alpha=0.5)


def judged(outcome: int, source: str, votes: list[list[int]], served: list[bool], versions: list[int] | None = None,
           labels: list[int] | None = None) -> JudgedTrajectory:
    steps, judgements = [], []
    for k, (vs, sv) in enumerate(zip(votes, served)):
        steps.append(TrajectoryStep(index=k, served_by_policy=sv, response_token_ids=[5] if sv else [],
                                    prompt_token_ids=[1], served_version=(versions or [3] * len(votes))[k],
                                    oracle_label=(labels or [0] * len(votes))[k]))
        judgements.append(StepJudgement(step_index=k, prompt_token_ids=[2],
                                        votes=[Vote(value=v, response_token_ids=[9]) for v in vs]))
    t = Trajectory(trajectory_id="live/acme/e1", source="ingest", outcome=outcome, outcome_source=source, steps=steps)
    return JudgedTrajectory(trajectory=t, judgements=judgements, reward_model_version=4)


def test_baseline_is_an_exponentially_weighted_mean_and_variance() -> None:
    b = update_baseline(Baseline(), 1.0, 0.5)
    assert (b.n, b.mean, b.var) == (1, 1.0, 0.0)
    b = update_baseline(b, 3.0, 0.5)  # δ = 2: μ = 2, σ² = 0.5·(0 + 0.5·4) = 1
    assert (b.n, b.mean, b.var) == (2, 2.0, 1.0)
    assert live_advantage(3.0, b, S) == 1.0
    assert live_advantage(100.0, b, S) == S.adv_max and live_advantage(3.0, Baseline(1, 0, 0), S) == 0.0  # warm-up
    assert live_advantage(2.05, Baseline(5, 2.0, 0.0), S) == pytest.approx(0.5)  # σ floor 0.1


def test_only_served_fresh_turns_with_an_external_outcome_train_the_policy() -> None:
    warm = Baseline(10, 0.0, 1.0)
    out = evaluate_live(judged(1, "user", [[1, 1], [1, -1], [-1, -1], [1, 1]], [True, False, True, True],
                               versions=[3, 3, 3, 1]), warm, latest_policy_version=3, lam=1.0,
                        invalid_vote_penalty=-2.0, s=S)
    assert [x.sample_id for x in out.policy] == ["live/acme/e1/0", "live/acme/e1/2"]
    assert out.skipped == {"not_served": 1, "stale": 1}
    first, second = out.policy
    assert first.advantage == pytest.approx(2.0)  # r = 1 + 1·1 against μ 0, σ 1
    assert second.advantage < first.advantage and out.baseline.n == 12
    assert first.model_version == 3
    none = evaluate_live(judged(0, "", [[1, 1]], [True]), warm, 3, 1.0, -2.0, S)
    assert none.policy == [] and none.reward == [] and none.skipped == {"no_outcome": 1, "rm_no_outcome": 1}


def test_a_sample_is_never_normalised_by_itself() -> None:
    out = evaluate_live(judged(1, "user", [[1, 1]], [True]), Baseline(), 3, 1.0, -2.0, LiveSettings(min_count=0))
    # With an empty baseline the first reward meets μ = 0, σ floor: A = 2 / 0.1 clipped to 3, not 0.
    assert [x.advantage for x in out.policy] == [3.0] and out.baseline.mean == 2.0


def test_the_judge_trains_only_on_external_outcomes_and_agreement_is_counted() -> None:
    rec = judged(-1, "product", [[1, -1, -1], [1, 1, 1]], [False, False], labels=[STEP_LABEL_BAD, STEP_LABEL_BAD])
    out = evaluate_live(rec, Baseline(), 3, 1.0, -2.0, S)
    assert len(out.reward) == 3 and all(x.model_version == 4 for x in out.reward)  # step 1's votes agree: no spread
    assert math.isclose(sum(x.advantage for x in out.reward), 0.0, abs_tol=1e-9)  # z-scored over m
    assert out.outcome_agrees is False  # mean vote over turns is positive, the product said failure
    assert (out.thumbs_agree, out.thumbs_disagree) == (1, 1)
    thumbs_only = evaluate_live(judged(0, "", [[1]], [False], labels=[STEP_LABEL_GOOD]), Baseline(), 3, 1.0, -2.0, S)
    assert thumbs_only.reward == [] and thumbs_only.thumbs_agree == 1 and thumbs_only.outcome_agrees is None


def test_the_judge_trains_on_won_and_lost_episodes_in_balance() -> None:
    won = judged(1, "user", [[1, -1, -1]], [False])
    s = LiveSettings(rm_slack=1)
    first = evaluate_live(won, Baseline(), 3, 1.0, -2.0, s, rm_wins=1, rm_losses=0)
    assert first.reward and (first.rm_wins, first.rm_losses) == (2, 0)
    skipped = evaluate_live(won, Baseline(), 3, 1.0, -2.0, s, rm_wins=2, rm_losses=0)
    assert skipped.reward == [] and skipped.skipped == {"not_served": 1, "rm_unbalanced": 1}
    lost = evaluate_live(judged(-1, "user", [[1, -1, -1]], [False]), Baseline(), 3, 1.0, -2.0, s, 2, 0)
    assert lost.reward and (lost.rm_wins, lost.rm_losses) == (2, 1)
