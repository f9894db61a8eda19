"""The unit-test writer's format: the chat that asks for a test, and parsing its answer."""

from __future__ import annotations

import pytest

from services.common.unit_tests import parse_unit_test, unit_test_chat


def test_the_chat_shows_the_problem_and_the_answer_format():
    system, user = unit_test_chat("Read x and print x + 1.")
    assert system["role"] == "system" and "unit tests" in system["content"]
    assert user["content"].startswith("Read x and print x + 1.") and "\\boxed{INPUT => OUTPUT}" in user["content"]
    assert unit_test_chat("a" * 50 + "END", problem_chars=10)[1]["content"].startswith("aaaaaaaEND")


@pytest.mark.parametrize(("answer", "test"), [
    ("\\boxed{3 => 10}", ("3\n", "10\n")),
    ("some words \\boxed{1 => 2} then \\boxed{ -4 =>  -11 }", ("-4\n", "-11\n")),
    ("\\boxed{1\\n2 => 3\\n}", ("1\n2\n", "3\n")),
    ("\\boxed{ => 0}", ("\n", "0\n")),  # a program without input
    ("\\boxed{a => b => c}", ("a\n", "b => c\n")),
])
def test_a_boxed_test_parses(answer, test):
    assert parse_unit_test(answer) == test


@pytest.mark.parametrize("answer", ["no box", "\\boxed{3 -> 10}", "\\boxed{3 =>  }", "\\boxed{3 => 4"])
def test_an_answer_without_a_test_is_none(answer):
    assert parse_unit_test(answer) is None
