"""Offline judging and accuracy measurement, with the oracle and a scripted judge (no model)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from rlanything.v1.events_pb2 import STEP_LABEL_BAD, STEP_LABEL_GOOD, StepJudgement, Trajectory, TrajectoryStep, Vote
from rlanything.v1.reward_pb2 import StepToJudge
from services.common.config import PPOConfig
from services.reward.judges import Judge, LLMJudge, OracleJudge
from services.offline.judge_eval import consistency_round, judge_accuracy, judge_trajectories

G, B = STEP_LABEL_GOOD, STEP_LABEL_BAD


def traj(tid: str, labels: list[int]) -> Trajectory:
    return Trajectory(trajectory_id=tid, job_id="j", steps=[
        TrajectoryStep(index=k, prompt=f"p{k}", response="\\boxed{1}", next_observation="o", oracle_label=label)
        for k, label in enumerate(labels)])


class FixedVotes(Judge):
    """Casts the given vote lists, step after step."""

    def __init__(self, votes_N: list[list[int]]) -> None:
        self.votes_N = votes_N

    def judge(self, steps: Sequence[StepToJudge], votes: int, temperature: float) -> list[StepJudgement]:
        return [StepJudgement(step_index=k, votes=[Vote(value=v) for v in self.votes_N[k]]) for k in range(len(steps))]


def test_judge_trajectories_keeps_order_and_step_indices() -> None:
    records = judge_trajectories(OracleJudge(), [traj("a", [G, B]), traj("b", [B])], 3, 0.8)
    assert [r.trajectory.trajectory_id for r in records] == ["a", "b"]
    assert [[j.step_index for j in r.judgements] for r in records] == [[0, 1], [0]]
    assert [[j.mean_vote for j in r.judgements] for r in records] == [[1.0, -1.0], [-1.0]]
    a = judge_accuracy(records)
    assert (a.step_accuracy, a.vote_accuracy, a.invalid_vote_rate, a.labelled_steps) == (1.0, 1.0, 0.0, 3)
    assert a.good_share == pytest.approx(1 / 3)


def test_accuracy_is_the_sign_of_the_mean_and_ties_are_wrong() -> None:
    votes = [[1, 1, -1], [1, -1, 0], [-1, -1, 0], [1, 0, 0]]  # labels G, G, B, B
    a = judge_accuracy(judge_trajectories(FixedVotes(votes), [traj("a", [G, G, B, B])], 3, 0.8))
    assert a.step_accuracy == 0.5  # right, tie, right, wrong
    assert a.vote_accuracy == pytest.approx(5 / 12) and a.invalid_vote_rate == pytest.approx(4 / 12)
    assert a.good_share == 0.5
    empty = judge_accuracy([])
    assert math.isnan(empty.step_accuracy) and empty.labelled_steps == 0


def test_consistency_round_needs_local_weights() -> None:
    from services.common.models.generation import OpenAIGenerator

    judge = LLMJudge(OpenAIGenerator("http://127.0.0.1:9/v1", "m"), trainable=False)
    with pytest.raises(TypeError, match="trains an HFGenerator judge"):
        consistency_round(judge, None, [], 3, 0.8, PPOConfig())  # type: ignore[arg-type]
