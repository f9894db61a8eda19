"""Step prompts and \\boxed{} parsing edge cases."""

from __future__ import annotations

import pytest

from services.common.answers import last_boxed
from services.policy.prompting import HistoryItem, parse_action_index, single_turn_chat, step_chat


@pytest.mark.parametrize(("text", "expected"), [
    ("I go down. \\boxed{2}", "2"),
    ("\\boxed{1} no wait \\boxed{3}", "3"),          # several boxes: the last
    ("\\boxed{ 4 }", "4"),
    ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),       # nested braces
    ("no box here", None),
    ("\\boxed{2", None),                              # unterminated
    ("\\boxed{}", ""),
])
def test_last_boxed(text: str, expected: str | None) -> None:
    assert last_boxed(text) == expected


@pytest.mark.parametrize(("text", "n", "expected"), [
    ("\\boxed{1}", 4, 0),
    ("\\boxed{4}", 4, 3),
    ("\\boxed{5}", 4, None),      # out of range
    ("\\boxed{0}", 4, None),      # numbering starts at 1
    ("\\boxed{-1}", 4, None),
    ("\\boxed{2.0}", 4, None),    # not a plain integer
    ("\\boxed{down}", 4, None),   # the action text, not its number
    ("2", 4, None),               # no box
    ("", 4, None),
])
def test_parse_action_index(text: str, n: int, expected: int | None) -> None:
    assert parse_action_index(text, n) == expected


def test_step_chat_numbers_actions_and_trims_history() -> None:
    history = [HistoryItem(f"obs {i}", f"act {i}") for i in range(5)]
    chat = step_chat("Reach G.", history, "obs 5", ["left", "down"], history_steps=2)
    user = chat[-1]["content"]
    assert user.startswith("Task: Reach G.")
    assert "History (last 2 of 5 steps):\nStep 4: obs 3\nAction: act 3\nStep 5: obs 4\nAction: act 4" in user
    assert "obs 2" not in user
    assert "Actions:\n1. left\n2. down" in user and user.endswith("as \\boxed{i}.")
    assert "History" not in step_chat("t", [], "o", ["a"])[-1]["content"]


def test_single_turn_chat() -> None:
    assert single_turn_chat("What is 2+2?")[-1]["content"] == "What is 2+2?\nPut your final answer in \\boxed{}."
