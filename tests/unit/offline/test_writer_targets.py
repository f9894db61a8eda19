"""The unit-test writer's cold-start targets (pure): the boxed test format and the shown inputs."""

from __future__ import annotations

from services.common.unit_tests import parse_unit_test
from services.env.families.code_problems import make_problem
from services.offline.writer_sft import shown_inputs, writer_target


def test_a_target_is_the_boxed_test_the_critic_parses_back():
    assert writer_target("3\n", "10\n") == "\\boxed{3 => 10}"
    assert parse_unit_test(writer_target("3\n", "10\n")) == ("3\n", "10\n")
    assert parse_unit_test(writer_target("1 2\n3\n", "4\n")) == ("1 2\n3\n", "4\n")  # line breaks as \\n


def test_the_shown_inputs_are_those_of_the_statement_s_examples():
    problem = make_problem(1, 3, seed=4)
    shown = shown_inputs(problem.statement)
    assert len(shown) == 3 and all(f"input {x} -> output" in problem.statement for x in shown)
    assert shown_inputs(make_problem(1, 0, seed=4).statement) == set()
