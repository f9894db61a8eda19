"""The judge's prompt: rubric, the step's three texts, compact truncation."""

from __future__ import annotations

import pytest

from services.reward.judge_prompt import BAD_VERDICT, GOOD_VERDICT, JUDGE_SYSTEM, defang, judge_chat, keep_head, keep_tail
from services.reward.votes import parse_vote

TASK = "Walk on the frozen lake from S to the goal G without falling into a hole H."
PROMPT = (f"Task: {TASK}\nHistory:\nStep 1: You are at the start.\nA F\nF G\nAction: down\n"
          "Now: You moved down.\nS F\nA G\nActions:\n1. left\n2. down\n3. right\n4. up\n"
          "Answer with the number of your action as \\boxed{i}.")


def test_rubric_and_the_three_texts() -> None:
    system, user = judge_chat(TASK, PROMPT, "I go right. \\boxed{3}", "You reached the goal!\nS F\nF A")
    assert system["role"] == "system" and user["role"] == "user"
    rubric = system["content"]
    for phrase in ("action suits the observation and the goal", "reasoning is relevant", "invents nothing",
                   "next observation agrees with the action", "Reason briefly", "\\boxed{1}", "\\boxed{-1}"):
        assert phrase in rubric, phrase
    text = user["content"]
    assert f"Agent saw:\n{defang(PROMPT)}" in text  # agent boxes are shown defanged
    assert "Agent answered: I go right. boxed{3}" in text and "\\boxed{" not in text
    assert "Next observation: You reached the goal!\nS F\nF A" in text
    assert text.endswith("Was this step good?")
    assert "Task: " + TASK in text and text.count(TASK) == 1  # already inside the prompt: not repeated


def test_long_texts_are_cut_where_the_information_is() -> None:
    long_prompt = "x" * 1000 + PROMPT
    _, user = judge_chat(TASK, long_prompt, "r" * 500 + " \\boxed{2}", "You fell into a hole." + "y" * 500,
                         prompt_chars=120, field_chars=40)
    text = user["content"]
    assert "xxx" not in text and "Answer with the number of your action as boxed{i}." in text  # prompt's end kept
    assert text.startswith(f"Task: {TASK[:39]}")  # cut from the prompt, so shown on its own (head, cut too)
    assert "Agent answered: …" in text and text.count("r") < 60 and " boxed{2}" in text  # response's end kept
    assert "Next observation: You fell into a hole." in text and "y" * 41 not in text  # observation's start kept
    assert len(text) < 120 + 2 * 40 + len(TASK) + 120


def test_keep_head_and_tail() -> None:
    assert keep_tail("  abc  ", 5) == "abc"
    assert keep_tail("abcdef", 3) == "…def"
    assert keep_head("abcdef", 3) == "abc…"
    assert keep_head("", 3) == ""


def test_empty_fields_and_bad_sizes() -> None:
    _, user = judge_chat("", "Now: here", "", "")
    assert "Agent answered: (nothing)" in user["content"] and "Next observation: (none)" in user["content"]
    assert "Task:" not in user["content"]
    with pytest.raises(ValueError, match="prompt_chars and field_chars must be >= 1"):
        judge_chat(TASK, PROMPT, "r", "o", prompt_chars=0)


def test_verdict_targets_parse_as_votes() -> None:
    assert parse_vote(GOOD_VERDICT) == 1 and parse_vote(BAD_VERDICT) == -1
    assert "\\boxed{1}" in JUDGE_SYSTEM
