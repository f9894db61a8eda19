"""Hand-made judged trajectories for the critic's tests (unit and integration)."""

from __future__ import annotations

from collections.abc import Sequence

from rlanything.v1.events_pb2 import (STEP_LABEL_UNSPECIFIED, CandidateCheck, JudgedTrajectory, StepJudgement, TaskRef, Trajectory,
                                      TrajectoryStep, Vote)


def judged(job_id: str, rollout_index: int, outcome: int, votes_KM: Sequence[Sequence[int]], *,
           group_size: int = 4, round_: int = 0, split: str = "train", is_candidate: bool = False,
           labels: Sequence[int] | None = None, slot_id: str = "gym_text/train-0000", version: int = 0,
           policy_version: int = 3, rm_version: int = 7, jobs_in_round: int = 1,
           candidate_check: CandidateCheck | None = None) -> JudgedTrajectory:
    """Rollout ``rollout_index`` of job ``job_id``: one step per entry of ``votes_KM`` (its m votes).

    Token ids encode (rollout, step, vote) so tests can check which tokens went into a sample.
    """
    steps, judgements = [], []
    for k, votes_M in enumerate(votes_KM):
        steps.append(TrajectoryStep(
            index=k, prompt=f"prompt {rollout_index}/{k}", response=f"\\boxed{{{k}}}",
            prompt_token_ids=[1000 + rollout_index, k], response_token_ids=[10 * k + 1, 10 * k + 2, 10 * k + 3],
            behaviour_logprobs=[-0.5, -0.25, -0.125], action=f"a{rollout_index}.{k}", action_index=k, valid=True,
            oracle_label=labels[k] if labels is not None else STEP_LABEL_UNSPECIFIED))
        judgements.append(StepJudgement(
            step_index=k, judge_prompt=f"judge {rollout_index}/{k}", prompt_token_ids=[2000 + rollout_index, k],
            votes=[Vote(value=v, response=f"\\boxed{{{v}}}", response_token_ids=[3000 + l, k],
                        behaviour_logprobs=[-0.75, -0.5]) for l, v in enumerate(votes_M)],
            mean_vote=sum(votes_M) / len(votes_M) if votes_M else 0.0))
    trajectory = Trajectory(
        trajectory_id=f"{job_id}/{rollout_index}", job_id=job_id, round=round_,
        task=TaskRef(slot_id=slot_id, version=version, family="gym_text"), rollout_index=rollout_index,
        group_size=group_size, task_text="reach the goal", steps=steps, outcome=outcome,
        policy_version=policy_version, is_candidate=is_candidate, split=split, source="rollout",
        jobs_in_round=jobs_in_round, candidate_check=candidate_check)
    return JudgedTrajectory(trajectory=trajectory, judgements=judgements, reward_model_version=rm_version)
