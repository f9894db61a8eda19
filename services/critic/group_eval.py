"""Everything the critic derives from one closed group of rollouts (pure, no I/O).

One job = one task version rolled out G times. From its judged trajectories this computes, with
the formulas of `services.common.algo` (arXiv 2602.02488):

* the task report: acc, wins, direction, and the bad steps of every failed rollout (loop 3);
* the policy batch: per-step-index z-scored advantages of r = O + λ·S̄, non-zero ones only, for
  tasks in the policy band (loop 1); for family ``code`` (``critic.code_rewards``) CURE's program
  reward instead (share of ground-truth tests passed, z-scored in the group, arXiv 2506.03136) for
  tasks whose pass-all rate is in [code_keep_low, code_keep_high] (`algo.coding_rewards`);
* the RM batch: z-scored consistency rewards of every vote of every judged step, non-zero ones
  only, for tasks in the RM band [0.2, 0.8] (loop 2);
* the group's round statistics (see `round_stats`).

Only ``split == "train"`` groups produce samples; held-out and OOD groups are evaluation only. A
candidate variant's rollouts train the models when the acceptance rule admits it (the paper: "its
rollouts train the models"), with ``critic.candidate_samples``: the env decides after this report,
so the critic applies the same pure rule to the numbers the job carries (`CandidateCheck`). Every group still gets both batches
(possibly empty): trainers count one batch per job of the round (``jobs_in_round``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rlanything.v1.events_pb2 import (BadSteps, CandidateCheck, JudgedTrajectory, PolicySampleBatch,
                                      RewardSampleBatch, TaskReport, TrainingSample)

from services.common.algo.bad_steps import bad_step_indices
from services.common.algo.coding_rewards import keep_task, program_rewards_of
from services.common.algo.consistency_reward import consistency_rewards
from services.common.algo.direction import direction_for
from services.common.algo.integrated_reward import mean_vote, step_rewards
from services.common.algo.policy_band import in_policy_band
from services.common.algo.rm_band import in_rm_band
from services.common.algo.step_advantage import step_advantages
from services.common.algo.task_acc import count_wins
from services.common.algo.variant_gate import variant_verdict
from services.common.config import CriticServiceConfig
from services.common.config.env import CODE_FAMILIES
from services.common.rounds import batch_id, sample_id
from services.critic.round_stats import LABEL_SIGN, judge_stats
from services.critic.unit_test_eval import TaskChecks, generated_tests, unit_test_samples

__all__ = ["GroupOutputs", "evaluate_group", "trains_models", "ZERO_ADVANTAGE"]

ZERO_ADVANTAGE = 1e-9
"""|A| at or below which a sample counts as zero-advantage and is not emitted (float rounding)."""


@dataclass(frozen=True)
class GroupOutputs:
    """What a closed group publishes and stores."""

    policy: PolicySampleBatch
    """Policy samples (empty unless the group trains the policy)."""
    reward: RewardSampleBatch
    """RM samples (empty unless the group trains the RM)."""
    report: TaskReport
    """The task's statistics for the env (loop 3)."""
    stats: dict[str, float]
    """The group's contribution to its round's metrics (`round_stats`)."""


def trains_models(report: TaskReport, candidate_samples: str = "accepted",
                  check: CandidateCheck | None = None) -> bool:
    """Do this group's rollouts train the policy and the RM? Train groups only: a drawn task always;
    a candidate variant with ``candidate_samples`` ``"mixed"``, or ``"accepted"`` when the
    acceptance rule (`variant_verdict`) admits it by ``check`` (None or no direction: it does not)."""
    if report.split != "train":
        return False
    if not report.is_candidate or candidate_samples == "mixed":
        return True
    if candidate_samples != "accepted" or check is None or not check.direction:
        return False
    return variant_verdict(check.direction, check.parent_acc, report.acc, check.band_low, check.band_high).accepted


def _policy_samples(recs: Sequence[JudgedTrajectory], cfg: CriticServiceConfig
                    ) -> tuple[list[TrainingSample], int, tuple[float, float]]:
    """The group's non-zero-advantage samples, the count of zero-advantage steps, and (Σ A·label,
    Σ abs(A)) over its steps with an oracle label (how far the advantages agree with the oracle)."""
    rewards_GK = [step_rewards(r.trajectory.outcome, [mean_vote([v.value for v in j.votes]) for j in r.judgements],
                               cfg.lam, [not step.valid for step in r.trajectory.steps],
                               cfg.invalid_answer_penalty) for r in recs]
    advantages_GK = step_advantages(rewards_GK, cfg.lone_rollout_advantage, scale=cfg.advantage_scale)
    samples, zero, signed, labelled = [], 0, 0.0, 0.0
    for rec, adv_K in zip(recs, advantages_GK):
        t = rec.trajectory
        for step, a in zip(t.steps, adv_K):
            if step.oracle_label in LABEL_SIGN:
                signed += a * LABEL_SIGN[step.oracle_label]
                labelled += abs(a)
            if abs(a) <= ZERO_ADVANTAGE:
                zero += 1
                continue
            samples.append(TrainingSample(sample_id=sample_id(t.trajectory_id, step.index),
                                          prompt_token_ids=step.prompt_token_ids,
                                          response_token_ids=step.response_token_ids,
                                          behaviour_logprobs=step.behaviour_logprobs, advantage=a,
                                          model_version=step.served_version or t.policy_version))
    return samples, zero, (signed, labelled)


def _program_samples(recs: Sequence[JudgedTrajectory]) -> tuple[list[TrainingSample], int]:
    """Family code: one sample per program (its answer step), advantage = CURE's program reward, the
    share of ground-truth tests passed (the step's env reward) z-scored over the group; and the count
    of zero-advantage programs."""
    answered = [r.trajectory for r in recs if r.trajectory.steps]
    rewards_N = program_rewards_of([t.steps[-1].env_reward for t in answered])  # in [0, 1]: check_judged
    samples, zero = [], 0
    for t, a in zip(answered, rewards_N):
        step = t.steps[-1]
        if abs(a) <= ZERO_ADVANTAGE:
            zero += 1
            continue
        samples.append(TrainingSample(sample_id=f"{t.trajectory_id}/{step.index}", prompt_token_ids=step.prompt_token_ids,
                                      response_token_ids=step.response_token_ids,
                                      behaviour_logprobs=step.behaviour_logprobs, advantage=a,
                                      model_version=step.served_version or t.policy_version))
    return samples, zero


def _reward_samples(recs: Sequence[JudgedTrajectory], cfg: CriticServiceConfig) -> list[TrainingSample]:
    samples = []
    for rec in recs:
        t = rec.trajectory
        for judgement in rec.judgements:
            r_M = consistency_rewards(t.outcome, [v.value for v in judgement.votes], cfg.lam,
                                      cfg.invalid_vote_penalty)
            if r_M is None:
                continue
            for l, (vote, r) in enumerate(zip(judgement.votes, r_M)):
                if abs(r) <= ZERO_ADVANTAGE:
                    continue
                samples.append(TrainingSample(sample_id=sample_id(t.trajectory_id, judgement.step_index, l),
                                              prompt_token_ids=judgement.prompt_token_ids,
                                              response_token_ids=vote.response_token_ids,
                                              behaviour_logprobs=vote.behaviour_logprobs, advantage=r,
                                              model_version=rec.reward_model_version))
    return samples


def _bad_steps(recs: Sequence[JudgedTrajectory]) -> list[BadSteps]:
    out = []
    for rec in recs:
        t = rec.trajectory
        if t.outcome != -1:
            continue
        ks = bad_step_indices([[v.value for v in j.votes] for j in rec.judgements])
        out.append(BadSteps(trajectory_id=t.trajectory_id, step_indices=ks, actions=[t.steps[k].action for k in ks]))
    return out


def evaluate_group(records: Sequence[JudgedTrajectory], cfg: CriticServiceConfig, *, partial: bool,
                   latest_policy_version: int | None = None,
                   unit_test_passes: Sequence[Sequence[bool]] | None = None,
                   unit_test_checks: TaskChecks = TaskChecks()) -> GroupOutputs:
    """Compute the outputs of one job's group from its judged trajectories.

    Args:
        records: the job's judged trajectories (validated, distinct rollout indices, any order).
        cfg: λ, bands, lone-rollout rule and invalid-vote penalty.
        partial: the group closed on timeout with fewer than G rollouts.
        latest_policy_version: newest announced policy version, for the staleness metric.
        unit_test_passes: a code group whose votes are generated unit tests (``critic.unit_tests``):
            program n (records by rollout index) passes the k-th parseable test
            (`unit_test_eval.score_tests`); the RM samples are then the tests' CURE rewards.
        unit_test_checks: the task's validator verdicts and reference row for those tests (`TaskChecks`).

    Raises:
        ValueError: ``records`` is empty.
    """
    if not records:
        raise ValueError("a group needs at least one judged trajectory")
    recs = sorted(records, key=lambda r: r.trajectory.rollout_index)
    first = recs[0].trajectory
    wins = count_wins([r.trajectory.outcome for r in recs])
    acc = wins / len(recs)
    report = TaskReport(job_id=first.job_id, round=first.round, task=first.task, group_size=first.group_size,
                        rollouts=len(recs), wins=wins, acc=acc, direction=direction_for(acc),  # type: ignore[arg-type]  # protobuf enum fields take their int values
                        bad_steps=_bad_steps(recs), is_candidate=first.is_candidate, partial=partial,
                        split=first.split, jobs_in_round=first.jobs_in_round)
    check = first.candidate_check if first.HasField("candidate_check") else None
    trains = trains_models(report, cfg.candidate_samples, check)
    stats = judge_stats(recs)
    policy_samples: list[TrainingSample] = []
    if trains and cfg.code_rewards and first.task.family in CODE_FAMILIES:  # CURE: program reward, keep rule
        if keep_task(acc, cfg.code_keep_low, cfg.code_keep_high):  # acc = pass-all rate (won = every test passed)
            policy_samples, zero = _program_samples(recs)
            stats["sum/policy_steps"] = float(len(policy_samples) + zero)
            stats["sum/policy_steps_zero"] = float(zero)
    elif trains and (not cfg.policy_band or in_policy_band(acc, first.group_size)):
        policy_samples, zero, (signed, labelled) = _policy_samples(recs, cfg)
        stats["sum/policy_steps"] = float(len(policy_samples) + zero)
        stats["sum/policy_steps_zero"] = float(zero)
        stats["sum/advantage_signed"] = signed
        stats["sum/advantage_labelled"] = labelled
    in_band = in_rm_band(acc, cfg.rm_band_low, cfg.rm_band_high)
    if unit_test_passes is not None:  # the RM wrote tests: CURE's test rewards, the code keep rule
        tests = generated_tests(recs)
        test_samples, test_stats = unit_test_samples(recs, tests, unit_test_passes, cfg.invalid_vote_penalty,
                                                     unit_test_checks)
        stats.update(test_stats)
        in_band = keep_task(acc, cfg.code_keep_low, cfg.code_keep_high)
        reward_samples = test_samples if trains and in_band else []
    else:
        reward_samples = _reward_samples(recs, cfg) if trains and in_band else []
    if trains and not first.is_candidate:  # the in-band share measures the drawn tasks (the pool)
        stats["sum/train_groups"] = 1.0
        stats["sum/train_in_band"] = float(in_band)
    if not first.is_candidate:
        split = first.split or "unspecified"
        stats[f"sum/wins/{split}"] = float(wins)
        stats[f"sum/rollouts/{split}"] = float(len(recs))
    if latest_policy_version is not None:
        stats["max/staleness"] = float(max(max(0, latest_policy_version - r.trajectory.policy_version) for r in recs))
    stats["max/jobs_in_round"] = float(first.jobs_in_round)
    # the G rollouts of a job share one lock-step loop: its generate/env seconds are the same on each
    stats["sum/time/generate_s"] = max(r.trajectory.generate_s for r in recs)
    stats["sum/time/env_s"] = max(r.trajectory.env_s for r in recs)
    stats["sum/time/judge_s"] = sum(r.judge_s for r in recs)
    stats.update({"sum/groups_complete": float(not partial), "sum/groups_partial": float(partial),
                  "sum/groups_candidate": float(first.is_candidate),
                  "sum/groups_candidate_trained": float(first.is_candidate and trains), "sum/trajectories": float(len(recs)),
                  "sum/policy_samples": float(len(policy_samples)), "sum/reward_samples": float(len(reward_samples))})
    batch: dict[str, Any] = {"round": first.round, "task": first.task, "jobs_in_round": first.jobs_in_round}
    return GroupOutputs(policy=PolicySampleBatch(batch_id=batch_id(first.job_id, "policy"), samples=policy_samples, **batch),
                        reward=RewardSampleBatch(batch_id=batch_id(first.job_id, "reward"), samples=reward_samples, **batch),
                        report=report, stats=stats)
