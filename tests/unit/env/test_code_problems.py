"""The procedural coding problems (pure): chains, statements, references, tests and instance keys."""

from __future__ import annotations

import random

import pytest

from services.common.errors import InvalidArgumentError
from services.env.families.code_problems import (TESTS, Step, apply_steps, extract_program, function_key,
                                                 make_problem, reference_program, render_steps)


def test_a_chain_is_applied_in_order_and_rendered_in_words_and_python():
    steps = [Step("mul", 3), Step("add", 1)]
    assert apply_steps(steps, 2) == 7 and apply_steps(steps, -1) == -2
    assert render_steps(steps) == "multiply by 3, then add 1"
    assert reference_program(steps) == "x = int(input())\nprint(x * 3 + 1)\n"
    assert reference_program([Step("add", 2), Step("mul", 3), Step("sub", 4)]) == \
        "x = int(input())\nprint((x + 2) * 3 - 4)\n"


def test_the_reference_expression_computes_the_chain_for_every_input():
    rng = random.Random(0)
    for _ in range(200):
        from services.env.families.code_problems import draw_steps

        steps = draw_steps(rng.randint(1, 6), rng)
        expr = reference_program(steps).splitlines()[1].removeprefix("print(")[:-1]
        for x in (-99, -3, 0, 5, 99):
            assert eval(expr, {"x": x}) == apply_steps(steps, x)  # noqa: S307 - our own generated expression


def test_a_problem_shows_its_examples_and_hides_its_tests_on_other_inputs():
    problem = make_problem(2, 3, seed=11)
    assert problem == make_problem(2, 3, seed=11)  # the seed builds the same problem anywhere
    shown = [line for line in problem.statement.splitlines() if line.startswith("input ")]
    assert len(shown) == 3 and len(problem.tests) == TESTS
    shown_inputs = {line.split()[1] for line in shown}
    assert not shown_inputs & {stdin.strip() for stdin, _ in problem.tests}
    assert all(stdin.endswith("\n") and expected.endswith("\n") for stdin, expected in problem.tests)
    assert "Examples:" not in make_problem(2, 0, seed=11).statement


def test_the_instance_key_is_the_function_not_the_wording():
    assert function_key([Step("mul", 3), Step("add", 1)]) == "3*x+1"
    assert function_key([Step("add", 2), Step("add", 3)]) == function_key([Step("add", 5)]) == "1*x+5"
    assert function_key([Step("add", 1), Step("mul", 2)]) == function_key([Step("mul", 2), Step("add", 2)])
    assert make_problem(2, 0, seed=5).key == make_problem(2, 4, seed=5).key  # examples shown: same function


def test_max_constant_widens_the_add_and_subtract_constants_and_keeps_the_default_draws():
    assert make_problem(1, 2, seed=3) == make_problem(1, 2, seed=3, max_constant=9)  # the default: 1-9
    wide = {make_problem(1, 0, seed, max_constant=99).key for seed in range(600)}
    narrow = {make_problem(1, 0, seed).key for seed in range(600)}
    assert len(narrow) == 22 and len(wide) > 150  # 1*x±1..9 and 2..5*x+0; 1*x±1..99
    assert max(abs(int(k.split("x")[1])) for k in wide) > 50
    assert all(abs(int(k.split("x")[1])) <= 9 for k in narrow)


def test_max_factor_widens_the_multipliers_and_keeps_the_default_draws():
    assert make_problem(1, 2, seed=3) == make_problem(1, 2, seed=3, max_factor=5)  # the default: 2-5
    def factors(**knobs):  # the a of every a*x+b drawn, less the add/subtract steps' a = 1
        return {int(make_problem(1, 0, seed, **knobs).key.split("*")[0]) for seed in range(900)} - {1}

    assert factors() == {2, 3, 4, 5}
    wide = factors(max_constant=99, max_factor=99)
    assert len(wide) > 60 and max(wide) > 90 and min(wide) == 2  # multiply by 2-99: as many as add/subtract
    with pytest.raises(InvalidArgumentError, match="max_factor=1"):
        make_problem(1, 2, seed=1, max_factor=1)


@pytest.mark.parametrize(("ops", "examples", "constant", "field"),
                         [(0, 2, 9, "ops=0"), (2, -1, 9, "examples=-1"), (1, 2, 0, "max_constant=0")])
def test_bad_knobs_are_refused_naming_the_knob(ops, examples, constant, field):
    with pytest.raises(InvalidArgumentError, match=field):
        make_problem(ops, examples, seed=1, max_constant=constant)


def test_the_program_is_the_first_fenced_block_else_the_whole_answer():
    assert extract_program("Here:\n```python\nprint(1)\n```\nand ```python\nprint(2)\n```") == "print(1)\n"
    assert extract_program("```\nprint(3)\n```") == "print(3)\n"
    assert extract_program("```py\nprint(4)") == "print(4)"  # cut before the closing fence
    assert extract_program("print(5)") == "print(5)"


def test_the_parametric_proposer_moves_ops_and_examples_never_max_constant():
    from services.env.families.code_family import CodeFamily

    family = CodeFamily()  # the sandbox starts at the first run, not here
    assert family.knob_preference(True, 0.0) == family.knob_preference(False, 1.0) == ["ops", "examples"]
    spec_knobs = {"ops": 1.0, "examples": 2.0, "max_constant": 99.0}
    assert family.move_knob(spec_knobs, "ops", True) == {**spec_knobs, "ops": 2.0}
