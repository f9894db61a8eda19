"""Input validators of code problems (our own programs, run here on the host): each accepts every input
of its problem's ground-truth tests and refuses inputs outside the problem."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from services.env.families.code_problems import INTEGER_VALIDATOR, make_problem
from services.env.families.codeio_problems import json_validator


def accepts(validator: str, stdin: str) -> bool:
    return subprocess.run([sys.executable, "-I", "-c", validator], input=stdin, capture_output=True, text=True,
                          timeout=30).returncode == 0


def test_procedural_problems_take_one_integer():
    problem = make_problem(2, 2, seed=7)
    assert problem.input_validator == INTEGER_VALIDATOR
    assert all(accepts(problem.input_validator, stdin) for stdin, _ in problem.tests)
    for bad in ("x\n", "1 2\n", "", "1.5\n"):
        assert not accepts(problem.input_validator, bad), bad


INPUTS = [json.dumps({"n": 3, "rate": 0.5, "name": "a", "xs": [1, 2]}),
          json.dumps({"n": 10, "rate": 2.25, "name": "bc", "xs": []})]


@pytest.mark.parametrize(("stdin", "ok"), [
    (INPUTS[0], True), (INPUTS[1], True),
    (json.dumps({"n": 4, "rate": 1, "name": "z", "xs": [3]}), True),      # an int where a float was seen
    (json.dumps({"n": 4, "rate": 1.0, "name": "z"}), False),              # a key missing
    (json.dumps({"n": 4, "rate": 1.0, "name": "z", "xs": [], "y": 1}), False),   # a key too many
    (json.dumps({"n": "4", "rate": 1.0, "name": "z", "xs": []}), False),  # a string for an int
    (json.dumps([1, 2]), False), ("not json", False),
])
def test_codeio_validators_take_the_keys_and_types_of_the_generated_inputs(stdin, ok):
    assert accepts(json_validator(INPUTS), stdin) is ok


def test_no_validator_when_the_inputs_are_not_objects_of_one_shape():
    assert json_validator(["[1, 2]"]) == ""
    assert json_validator([json.dumps({"a": 1}), json.dumps({"b": 1})]) == ""
