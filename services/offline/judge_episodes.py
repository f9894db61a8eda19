"""Labelled trajectories played in-process, for the judge's cold start and offline benchmarks.

An "ε-expert" (`services.offline.expert.ExpertAgent`) plays each episode through the rollout
loop: at every step it takes the oracle plan's first action with probability ``expert_prob``,
otherwise a uniformly random admissible action. Steps are the policy's own step chats, answered
as the cold-started policy answers (``\\boxed{i}``), and every step carries the env's oracle
label (good iff it shortens the winning plan). The result is a real
`Trajectory` message, so the judge, the critic's formulas and the trainer consume it unchanged.

Only multi-step families with an oracle give labels (gym_text, textworld); single-turn tasks end
after one unlabelled step.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from rlanything.v1.events_pb2 import TaskRef, Trajectory

from services.common.rounds import trajectory_id
from services.env.families.base import TaskFamily, TaskSpec
from services.offline.expert import play_expert_episode, run_sync

__all__ = ["record_group", "record_group_async", "record_groups"]


async def record_group_async(family: TaskFamily, spec: TaskSpec, group_size: int, expert_prob: float,
                             rng: random.Random, job_id: str, round_: int = 0, history_steps: int = 2) -> list[Trajectory]:
    """``group_size`` ε-expert rollouts of one task, as the trajectories of job ``job_id``.

    Rollout j is the episode with seed j, played to its end before rollout j+1 (one ``rng``
    stream, so a data set is reproducible from its seed). Trajectory ids are ``<job_id>/<j>``;
    split "train", not a candidate, one job in the round.
    """
    ref = TaskRef(slot_id=spec.key(), version=0, family=family.name)
    out = []
    for j in range(group_size):
        t = await play_expert_episode(family, spec, expert_prob, rng, history_steps, j)
        out.append(Trajectory(trajectory_id=trajectory_id(job_id, j), job_id=job_id, round=round_, task=ref, rollout_index=j,
                              group_size=group_size, task_text=t.task_text, steps=t.steps, outcome=t.outcome,
                              truncated=t.truncated, split="train", source="rollout", jobs_in_round=1))
    return out


def record_group(family: TaskFamily, spec: TaskSpec, group_size: int, expert_prob: float, rng: random.Random,
                 job_id: str, round_: int = 0, history_steps: int = 2) -> list[Trajectory]:
    """`record_group_async` from synchronous code."""
    return run_sync(record_group_async(family, spec, group_size, expert_prob, rng, job_id, round_, history_steps))


def record_groups(family: TaskFamily, specs: Sequence[TaskSpec], group_size: int, expert_prob: float,
                  seed: int = 0, history_steps: int = 2, prefix: str = "rec") -> list[Trajectory]:
    """`record_group` for each spec (job ids ``<prefix>/<i>``), reproducible from ``seed``."""
    rng = random.Random(seed)

    async def play() -> list[Trajectory]:
        out: list[Trajectory] = []
        for i, spec in enumerate(specs):
            out += await record_group_async(family, spec, group_size, expert_prob, rng, f"{prefix}/{i}", 0,
                                            history_steps)
        return out

    return run_sync(play())
