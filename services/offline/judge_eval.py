"""The judge without the bus: judge recorded trajectories, measure it, run loop 2 in-process.

Used by the cold start (`sft.py`), the benchmark `scripts/bench_judge_consistency.py` and tests.
Everything reuses the service's parts: the judge (`judges.LLMJudge`), the critic's pure group
evaluation (`services.critic.group_eval.evaluate_group`: RM band, consistency rewards, sample ids)
and the trainers' PPO step (`services.common.ppo_update.ppo_update`), so one offline round is
exactly one synchronous round of loop 2 (arXiv 2602.02488) on fixed trajectories.

Step accuracy is the run metric ``reward/step_accuracy`` of the critic: sign(S̄) of the m votes
sampled at the vote temperature against the oracle label (GOOD = +1, BAD = −1) over labelled
steps; a tie (S̄ = 0) counts as wrong.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from rlanything.v1.events_pb2 import JudgedTrajectory, Trajectory

from services.common.algo.batching import Sample
from services.common.config import CriticServiceConfig, PPOConfig
from services.common.models.generation import HFGenerator
from services.common.ppo_update import ppo_update
from services.critic.group_eval import evaluate_group
from services.critic.round_stats import judge_stats
from services.reward.judges import Judge, LLMJudge, steps_of
from services.reward.votes import label_vote

__all__ = ["JudgeAccuracy", "judge_trajectories", "judge_accuracy", "ConsistencyRound", "consistency_round"]


@dataclass(frozen=True)
class JudgeAccuracy:
    """How well the judge's votes match the oracle's step labels."""

    step_accuracy: float
    """sign(S̄) == label over labelled steps (ties wrong); NaN without labelled steps."""
    vote_accuracy: float
    """Single votes equal to the label's sign, over all votes of labelled steps."""
    invalid_vote_rate: float
    """Votes with value 0 over all votes."""
    good_share: float
    """Labelled steps that are GOOD: the accuracy of a judge that always votes +1."""
    labelled_steps: int


def judge_trajectories(judge: Judge, trajectories: Sequence[Trajectory], votes: int,
                       temperature: float) -> list[JudgedTrajectory]:
    """Judge every step of ``trajectories`` (one merged request) into `JudgedTrajectory` records."""
    steps = [s for t in trajectories for s in steps_of(t)]
    version = judge.model_version
    judgements = judge.judge(steps, votes, temperature)
    out, start = [], 0
    for t in trajectories:
        mine = judgements[start: start + len(t.steps)]
        for step, j in zip(t.steps, mine):
            j.step_index = step.index
        start += len(t.steps)
        out.append(JudgedTrajectory(trajectory=t, judgements=mine, reward_model_version=version))
    return out


def judge_accuracy(records: Sequence[JudgedTrajectory]) -> JudgeAccuracy:
    """`JudgeAccuracy` of judged trajectories (the critic's `judge_stats` sums, plus vote level)."""
    s = judge_stats(records)
    labelled = int(s["sum/steps_labelled"])
    signs = [(label_vote(step.oracle_label), [v.value for v in j.votes])
             for r in records for step, j in zip(r.trajectory.steps, r.judgements) if label_vote(step.oracle_label)]
    n_votes = sum(len(values) for _, values in signs)
    nan = float("nan")
    return JudgeAccuracy(
        step_accuracy=s["sum/steps_correct"] / labelled if labelled else nan,
        vote_accuracy=sum(v == sign for sign, values in signs for v in values) / n_votes if n_votes else nan,
        invalid_vote_rate=s["sum/votes_invalid"] / s["sum/votes"] if s["sum/votes"] else nan,
        good_share=sum(sign == 1 for sign, _ in signs) / labelled if labelled else nan,
        labelled_steps=labelled)


@dataclass(frozen=True)
class ConsistencyRound:
    """One offline round of loop 2: the votes it judged with, and what training did."""

    accuracy: JudgeAccuracy
    """Of the votes cast this round (by the weights before the update)."""
    samples: int
    """RM samples the critic's rules produced (split votes of in-band tasks)."""
    metrics: dict[str, float]
    """`ppo_update` metrics (``ppo/...``)."""


def consistency_round(judge: LLMJudge, optimizer: torch.optim.Optimizer, trajectories: Sequence[Trajectory],
                      votes: int, temperature: float, ppo: PPOConfig,
                      critic: CriticServiceConfig | None = None) -> ConsistencyRound:
    """Judge ``trajectories`` with m votes, turn them into consistency-reward samples with the
    critic's group evaluation (grouped by job), and run one PPO update of the judge in place.

    Raises:
        TypeError: the judge does not run on an `HFGenerator` (no weights to train here).
    """
    if not isinstance(judge.generator, HFGenerator):
        raise TypeError(f"consistency_round trains an HFGenerator judge, got {type(judge.generator).__name__}")
    records = judge_trajectories(judge, trajectories, votes, temperature)
    groups: dict[str, list[JudgedTrajectory]] = defaultdict(list)
    for r in records:
        groups[r.trajectory.job_id].append(r)
    cfg = critic or CriticServiceConfig()
    samples = [Sample(s.sample_id, tuple(s.prompt_token_ids), tuple(s.response_token_ids), s.advantage,
                      tuple(s.behaviour_logprobs))
               for group in groups.values()
               for s in evaluate_group(group, cfg, partial=False).reward.samples if s.response_token_ids]
    gen = judge.generator
    metrics = ppo_update(gen.model, optimizer, samples, ppo, gen.tokenizer.pad_token_id, recompute_old=True)
    return ConsistencyRound(judge_accuracy(records), len(samples), metrics)
