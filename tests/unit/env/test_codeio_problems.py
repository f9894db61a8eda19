"""The pure part of family ``codeio``: which data-file entries are used, the programs built from an
entry, and the problem made from the sandbox's runs."""

from __future__ import annotations

import json

import pytest

from services.common.errors import InvalidArgumentError
from services.env.families.codeio_problems import (IO_TEXT, MAX_EXAMPLES, TESTS, CodeIOEntry, generator_program,
                                                   imported_modules, load_entries, problem_from_runs,
                                                   reference_program, stdlib_only)

ENTRY = CodeIOEntry("ab" * 8, "Add two numbers.", "Input: a, b (int). Output: their sum (int).",
                    "import math\n\ndef main_solution(a, b):\n    return a + b\n",
                    "def generate_inputs(rng: Random) -> dict:\n    return {'a': rng.randint(0, 9), 'b': 1}\n")


def test_imports_are_read_from_import_lines():
    source = "import numpy as np, os.path\nfrom collections import deque\n  from . import y\nimport  math # c\n"
    assert imported_modules(source) == {"numpy", "os", "collections", "", "math"}
    assert not stdlib_only(source)  # numpy; a relative import is no standard-library module either
    assert stdlib_only("import math\nfrom itertools import chain\n")


def test_the_data_file_holds_standard_library_problems_with_distinct_ids():
    entries = load_entries()
    assert 2000 < len(entries) < 3002  # reasoning-gym 0.1.25: 2,209 of 3,002
    assert len({e.problem_id for e in entries}) == len(entries)
    assert all(stdlib_only(e.code) and stdlib_only(e.generator) for e in entries)
    assert all(len(e.problem_id) == 16 and "def main_solution" in e.code for e in entries)


def test_the_programs_wrap_the_dataset_s_code():
    gen = generator_program(ENTRY, 11, seed=3)
    assert gen.startswith("from random import Random\n") and "_rng = Random(3)" in gen and "range(11)" in gen
    ref = reference_program(ENTRY)
    assert ref.startswith(ENTRY.code.rstrip()) and "main_solution(**_json.loads(_sys.stdin.read()))" in ref


def test_a_problem_shows_its_examples_and_hides_its_tests():
    inputs = [json.dumps({"a": i, "b": 1}) for i in range(MAX_EXAMPLES + TESTS)]
    outputs = [str(i + 1) for i in range(MAX_EXAMPLES + TESTS)]
    problem = problem_from_runs(ENTRY, inputs, outputs, examples=2)
    assert problem.key == ENTRY.problem_id and problem.reference == reference_program(ENTRY)
    assert problem.statement == (f"Add two numbers.\n\nInput: a, b (int). Output: their sum (int).\n\n{IO_TEXT}\n"
                                 'Examples:\ninput {"a": 0, "b": 1} -> output 1\ninput {"a": 1, "b": 1} -> output 2')
    assert problem.tests == tuple((f'{{"a": {i}, "b": 1}}\n', f"{i + 1}\n") for i in range(MAX_EXAMPLES, 11))
    assert "Examples" not in problem_from_runs(ENTRY, inputs, outputs, examples=0).statement


@pytest.mark.parametrize(("inputs", "examples", "message"), [
    (11, 4, "examples=4 outside"),
    (10, 1, "10 inputs and 11 outputs"),
])
def test_bad_runs_or_knobs_are_refused(inputs, examples, message):
    with pytest.raises(InvalidArgumentError, match=message):
        problem_from_runs(ENTRY, ["{}"] * inputs, ["1"] * 11, examples)
