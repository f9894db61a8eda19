"""Step prompts and answer parsing for the policy (pure; arXiv 2602.02488 §3, docs/algorithm.md).

Multi-step tasks: the prompt holds the task text, the recent history of observations and
actions, the current observation and the admissible actions numbered from 1; the agent ends
with ``\\boxed{i}``. Single-turn tasks: the question, answered in ``\\boxed{...}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from services.common.answers import last_boxed

__all__ = ["HistoryItem", "step_chat", "single_turn_chat", "parse_action_index",
           "SYSTEM_PROMPT"]

SYSTEM_PROMPT = "You are an agent solving a task step by step. Think briefly, then answer."


@dataclass(frozen=True)
class HistoryItem:
    """One past step: what the agent saw and what it did."""

    observation: str
    action: str


def step_chat(task_text: str, history: Sequence[HistoryItem], observation: str,
              admissible_actions: Sequence[str], history_steps: int = 2) -> list[dict[str, str]]:
    """The chat for one agent step; only the last ``history_steps`` steps of history are shown."""
    lines = [f"Task: {task_text}"]
    shown = list(history)[-history_steps:] if history_steps > 0 else []
    if shown:
        skipped = len(history) - len(shown)
        lines.append("History" + (f" (last {len(shown)} of {len(history)} steps)" if skipped else "") + ":")
        for i, item in enumerate(shown, start=skipped + 1):
            lines.append(f"Step {i}: {item.observation.strip()}\nAction: {item.action}")
    lines.append(f"Now: {observation.strip()}")
    lines.append("Actions:\n" + "\n".join(f"{i}. {a}" for i, a in enumerate(admissible_actions, start=1)))
    lines.append("Answer with the number of your action as \\boxed{i}.")
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n".join(lines)}]


def single_turn_chat(question: str) -> list[dict[str, str]]:
    """The chat for a single-turn task: the question, answer in ``\\boxed{}``."""
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": f"{question.strip()}\nPut your final answer in \\boxed{{}}."}]


def parse_action_index(text: str, n_actions: int) -> int | None:
    """0-based action index from the last ``\\boxed{i}`` (i is 1-based, a plain integer in
    1..n_actions); None when missing, not an integer, or out of range."""
    content = last_boxed(text)
    if content is None or not content.isdigit():
        return None
    index = int(content)
    return index - 1 if 1 <= index <= n_actions else None
