"""Model-written rewrites of coding problems (pure parts): the request, parsing, the acceptance check
(here with a fake runner; the sandbox-backed check is in tests/integration/env/test_code_rewrites.py)."""

from __future__ import annotations

import json

import pytest

from rlanything.v1.events_pb2 import DIRECTION_EASIER, DIRECTION_HARDER
from services.common.sandbox import RunResult, Verdict
from services.env.code_variants import check_code_variant, code_variant_messages, parse_code_variant
from services.env.families.code_problems import make_problem
from services.env.text_variants import VariantError

PARENT = make_problem(2, 2, seed=3)
VALID = {"statement": "Read x and print 2*x+1.", "reference": "print(2*int(input())+1)",
         "tests": [{"input": "1", "output": "3"}, {"input": "0", "output": "1"}, {"input": "-2\n", "output": "-3\n"}]}


def test_the_model_is_shown_the_problem_its_reference_two_tests_and_the_direction():
    system, user = code_variant_messages(PARENT, DIRECTION_HARDER, 0.875, ["print(0)"])
    assert system["role"] == "system" and "JSON" in system["content"]
    text = user["content"]
    assert PARENT.statement in text and PARENT.reference.strip() in text and "88%" in text
    assert repr(PARENT.tests[0][0]) in text and repr(PARENT.tests[2][0]) not in text
    assert "HARDER" in text and "'print(0)'" in text
    assert "EASIER" in code_variant_messages(PARENT, DIRECTION_EASIER, 0.0)[1]["content"]


def test_a_valid_answer_parses_with_newline_terminated_tests():
    problem = parse_code_variant("```json\n" + json.dumps(VALID) + "\n```")
    assert problem.statement == VALID["statement"] and problem.reference == "print(2*int(input())+1)\n"
    assert problem.tests == (("1\n", "3\n"), ("0\n", "1\n"), ("-2\n", "-3\n"))


@pytest.mark.parametrize(("answer", "reason"), [
    ("a harder one: print(x)", "not JSON"),
    ("[1, 2]", "not an object"),
    (json.dumps({**VALID, "reference": None}), "has no 'reference'"),
    (json.dumps({**VALID, "statement": 7}), "'statement' is a int"),
    (json.dumps({**VALID, "statement": "  "}), "'statement' is empty"),
    (json.dumps({**VALID, "tests": VALID["tests"][:2]}), "must list 3 to 16 tests, got 2"),
    (json.dumps({**VALID, "tests": "1 -> 3"}), "got str"),
    (json.dumps({**VALID, "tests": [*VALID["tests"], {"input": "5"}]}), "test 3 is not an object"),
])
def test_a_broken_answer_is_refused_with_its_reason(answer, reason):
    with pytest.raises(VariantError, match=reason):
        parse_code_variant(answer)


def fake_runner(outputs: dict[str, RunResult]):
    def run(program, tests):
        return [outputs[stdin] for stdin, _ in tests]
    return run


def result(stdout: str, verdict: Verdict = Verdict.OK) -> RunResult:
    return RunResult(stdout, "", 0 if verdict is Verdict.OK else 1, None, verdict, "detail", 0.01, 0.01)


def test_a_rewrite_is_accepted_only_when_its_reference_passes_every_own_test():
    variant = parse_code_variant(json.dumps(VALID))
    good = {"1\n": result("3\n"), "0\n": result("1"), "-2\n": result("-3  \n")}
    check_code_variant(PARENT, variant, fake_runner(good))  # normalised output matches: accepted
    with pytest.raises(VariantError, match=r"fails its own test 2 \(input '-2\\n'\): printed '-4\\n'"):
        check_code_variant(PARENT, variant, fake_runner({**good, "-2\n": result("-4\n")}))
    with pytest.raises(VariantError, match="fails its own test 1 .*: TLE"):
        check_code_variant(PARENT, variant, fake_runner({**good, "0\n": result("", Verdict.TLE)}))
    again = parse_code_variant(json.dumps({**VALID, "statement": PARENT.statement}))
    with pytest.raises(VariantError, match="its parent problem again"):
        check_code_variant(PARENT, again, fake_runner(good))


def test_a_written_problem_round_trips_through_its_bucket_entry_with_the_same_seed():
    from services.env.code_tasks import problem_json, problem_of_json
    from services.env.families.code_family import WRITTEN_BIT, written_seed

    variant = parse_code_variant(json.dumps(VALID))
    again = problem_of_json(problem_json(variant))
    assert again == variant and written_seed(again) == written_seed(variant) >= WRITTEN_BIT
    with pytest.raises(ValueError, match="not a stored problem"):
        problem_of_json(b'{"statement": "x"}')
