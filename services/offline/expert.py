"""Expert demonstrations from the environment's own oracle (pure data; for the cold start).

At every state of an episode the oracle plan's first action is the expert action: a Gymnasium
shortest path, a TextWorld walkthrough, a reasoning-gym gold answer. Each state becomes one
(chat, response) pair in exactly the format the policy is prompted with during RL.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from services.env.families.base import TaskFamily, TaskSpec
from services.policy.prompting import HistoryItem, single_turn_chat, step_chat

__all__ = ["Demonstration", "expert_demonstrations"]


@dataclass(frozen=True)
class Demonstration:
    """One supervised example: the step chat and the expert's answer text."""

    chat: list[dict[str, str]]
    response: str


def expert_demonstrations(family: TaskFamily, spec: TaskSpec, history_steps: int = 2) -> Iterator[Demonstration]:
    """The expert's steps through ``spec`` (nothing when the oracle has no plan)."""
    episode = family.make_episode(spec, 0)
    history: list[HistoryItem] = []
    try:
        for _ in range(family.max_steps):
            plan = episode.oracle_plan()
            if not plan:
                return
            if episode.single_turn:
                yield Demonstration(single_turn_chat(episode.task_text), f"\\boxed{{{plan[0]}}}")
                return
            actions = list(episode.admissible_actions)
            if plan[0] not in actions:
                return
            yield Demonstration(step_chat(episode.task_text, history, episode.observation, actions, history_steps),
                                f"\\boxed{{{actions.index(plan[0]) + 1}}}")
            observation = episode.observation
            result = episode.step(plan[0])
            history.append(HistoryItem(observation, plan[0]))
            if result.terminated:
                return
    finally:
        episode.close()
