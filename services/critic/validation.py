"""Checks on judged trajectories before the critic stores them (pure).

A message that fails a check can never succeed, so it raises `InvalidEventError` and goes to the
dead-letter stream at once; each message says what is wrong and what the producer must send.
"""

from __future__ import annotations

import math

from rlanything.v1.events_pb2 import JudgedTrajectory

from services.common.config.env import CODE_FAMILIES
from services.common.errors import InvalidEventError

__all__ = ["check_judged", "check_same_group"]


def check_judged(judged: JudgedTrajectory) -> None:
    """Raise `InvalidEventError` unless ``judged`` is a well-formed rollout of a group.

    Rules: job_id, trajectory_id and task.slot_id are set; 1 ≤ group_size; 0 ≤ rollout_index
    < group_size; outcome is ±1; one judgement per step in order (step_index == steps[i].index
    == i); every vote value is +1, −1 or 0; every step's env reward is finite, and for a code family
    (a share of tests passed) in [0, 1]. A reward outside these is refused, never clamped into training.
    """
    t = judged.trajectory
    who = f"judged trajectory {t.trajectory_id or '<no id>'}"
    if not t.job_id or not t.trajectory_id:
        raise InvalidEventError(f"{who}: trajectory.job_id and trajectory.trajectory_id are required")
    if not t.task.slot_id:
        raise InvalidEventError(f"{who}: trajectory.task.slot_id is required (the task report names the slot)")
    if t.group_size < 1:
        raise InvalidEventError(f"{who}: group_size must be >= 1, got {t.group_size}")
    if not 0 <= t.rollout_index < t.group_size:
        raise InvalidEventError(f"{who}: rollout_index must be in [0, {t.group_size}), got {t.rollout_index}")
    if t.outcome not in (1, -1):
        raise InvalidEventError(f"{who}: outcome must be +1 (won) or -1 (lost), got {t.outcome}")
    if len(judged.judgements) != len(t.steps):
        raise InvalidEventError(f"{who}: {len(t.steps)} steps but {len(judged.judgements)} judgements; "
                                "the reward service must judge every step, in order")
    for i, (step, judgement) in enumerate(zip(t.steps, judged.judgements)):
        if step.index != i or judgement.step_index != i:
            raise InvalidEventError(f"{who}: position {i} holds step {step.index} judged as step "
                                    f"{judgement.step_index}; both must be {i} (0-based, in order)")
        bad = sorted({v.value for v in judgement.votes if v.value not in (1, -1, 0)})
        if bad:
            raise InvalidEventError(f"{who}: step {i} has vote values {bad}; allowed are +1, -1 and 0 (invalid)")
        if not math.isfinite(step.env_reward):
            raise InvalidEventError(f"{who}: step {i} has env_reward {step.env_reward!r}; it must be finite")
        if t.task.family in CODE_FAMILIES and not 0.0 <= step.env_reward <= 1.0:
            raise InvalidEventError(f"{who}: step {i} of a {t.task.family} task has env_reward {step.env_reward!r}; "
                                    "a share of tests passed is in [0, 1]")


def check_same_group(first: JudgedTrajectory, judged: JudgedTrajectory) -> None:
    """Raise `InvalidEventError` when ``judged`` disagrees with the group's first rollout on
    what the job is (round, task, G, candidate flag, split)."""
    a, b = first.trajectory, judged.trajectory
    fields = ("round", "group_size", "is_candidate", "split")
    diffs = [f"{f}: {getattr(a, f)!r} vs {getattr(b, f)!r}" for f in fields if getattr(a, f) != getattr(b, f)]
    if a.task != b.task:
        diffs.append(f"task: {a.task.slot_id}@v{a.task.version} vs {b.task.slot_id}@v{b.task.version}")
    if diffs:
        raise InvalidEventError(f"judged trajectory {b.trajectory_id}: job {b.job_id} was stored with different "
                                f"settings ({'; '.join(diffs)}); one job must keep one task, round and G")
