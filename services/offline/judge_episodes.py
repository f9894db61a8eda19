"""Labelled trajectories played in-process, for the judge's cold start and offline benchmarks.

An "ε-expert" plays each episode: at every step it takes the oracle plan's first action with
probability ``expert_prob``, otherwise a uniformly random admissible action. Steps are rendered
exactly as the policy sees them (`services.policy.prompting.step_chat`) and answered as the
cold-started policy answers (``\\boxed{i}``), and every step carries the oracle's label
(`services.env.oracle.step_label`: good iff it shortens the winning plan). The result is a real
`Trajectory` message, so the judge, the critic's formulas and the trainer consume it unchanged.

Only multi-step families with an oracle give labels (gym_text, textworld); single-turn tasks end
after one unlabelled step.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from rlanything.v1.events_pb2 import TaskRef, Trajectory, TrajectoryStep

from services.env.families.base import TaskFamily, TaskSpec
from services.env.oracle import step_label
from services.policy.prompting import HistoryItem, single_turn_chat, step_chat

__all__ = ["play_episode", "record_group", "record_groups"]


def play_episode(family: TaskFamily, spec: TaskSpec, expert_prob: float, rng: random.Random,
                 history_steps: int = 2, episode_seed: int = 0) -> tuple[list[TrajectoryStep], str, bool, bool]:
    """Play one ε-expert episode of ``spec``.

    Returns:
        ``(steps, task_text, won, truncated)``; each step has prompt, response, action,
        action_index, observation, next_observation and oracle_label set (no token ids).
    """
    episode = family.make_episode(spec, episode_seed)
    steps: list[TrajectoryStep] = []
    history: list[HistoryItem] = []
    won = terminated = False
    try:
        task_text = episode.task_text
        plan = episode.oracle_plan()
        while len(steps) < family.max_steps:
            observation = episode.observation
            if episode.single_turn:
                answer = (plan or ["?"])[0] if rng.random() < expert_prob else str(rng.randint(0, 99))
                prompt, action, index = single_turn_chat(task_text)[-1]["content"], answer, -1
            else:
                actions = list(episode.admissible_actions)
                expert = plan[0] if plan and plan[0] in actions and rng.random() < expert_prob else None
                action = expert if expert is not None else rng.choice(actions)
                index = actions.index(action)
                prompt = step_chat(task_text, history, observation, actions, history_steps)[-1]["content"]
            result = episode.step(action)
            label = step_label(None if plan is None else len(plan), result.oracle_plan_length, result.won,
                               episode.single_turn)
            steps.append(TrajectoryStep(
                index=len(steps), prompt=prompt, response=f"\\boxed{{{index + 1 if index >= 0 else action}}}",
                action=action, action_index=index, valid=True, observation=observation,
                next_observation=result.observation, oracle_label=label, env_reward=result.reward))  # type: ignore[arg-type]  # protobuf enum fields take their int values
            history.append(HistoryItem(observation, action))
            plan = episode.oracle_plan()
            won, terminated = result.won, result.terminated
            if terminated:
                break
    finally:
        episode.close()
    return steps, task_text, won, not terminated


def record_group(family: TaskFamily, spec: TaskSpec, group_size: int, expert_prob: float, rng: random.Random,
                 job_id: str, round_: int = 0, history_steps: int = 2) -> list[Trajectory]:
    """``group_size`` ε-expert rollouts of one task, as the trajectories of job ``job_id``.

    Trajectory ids are ``<job_id>/<j>``; split "train", not a candidate, one job in the round.
    """
    ref = TaskRef(slot_id=spec.key(), version=0, family=family.name)
    out = []
    for j in range(group_size):
        steps, task_text, won, truncated = play_episode(family, spec, expert_prob, rng, history_steps, j)
        out.append(Trajectory(trajectory_id=f"{job_id}/{j}", job_id=job_id, round=round_, task=ref, rollout_index=j,
                              group_size=group_size, task_text=task_text, steps=steps, outcome=1 if won else -1,
                              truncated=truncated, split="train", source="rollout", jobs_in_round=1))
    return out


def record_groups(family: TaskFamily, specs: Sequence[TaskSpec], group_size: int, expert_prob: float,
                  seed: int = 0, history_steps: int = 2, prefix: str = "rec") -> list[Trajectory]:
    """`record_group` for each spec (job ids ``<prefix>/<i>``), reproducible from ``seed``."""
    rng = random.Random(seed)
    out: list[Trajectory] = []
    for i, spec in enumerate(specs):
        out += record_group(family, spec, group_size, expert_prob, rng, f"{prefix}/{i}", 0, history_steps)
    return out
