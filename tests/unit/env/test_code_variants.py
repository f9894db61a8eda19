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


def test_a_written_problem_s_key_is_its_function_or_its_normalised_statement():
    """A written rewording of a held-out procedural problem has the held-out key (code:a*x+b), whatever
    its wording, variable names or test inputs; other problems have their statement's key, the same
    for a copy with other case or spacing."""
    from services.env.families.code_problems import CodeProblem, written_key

    heldout = make_problem(2, 2, seed=11)
    x0, y0 = int(heldout.tests[0][0]), int(heldout.tests[0][1])
    x1 = int(heldout.tests[1][0])
    a = (int(heldout.tests[1][1]) - y0) // (x1 - x0)
    b = y0 - a * x0
    copy = CodeProblem("  " + heldout.statement.replace(" ", "   ") + "\n", heldout.reference, heldout.tests, "written")
    renamed = CodeProblem(heldout.statement, heldout.reference.replace("x", "value"), heldout.tests, "written")
    paraphrase = CodeProblem("Given an integer n, output the result of the same operations.", "n = int(input())\n",
                             tuple((f"{x}\n", f"{a * x + b}\n") for x in (100, -7, 3)), "written")
    paraphrase2 = CodeProblem("Compute f(n) for the number n on standard input.", "",
                              tuple((f" {x} \n", f"{a * x + b}\n") for x in (0, 41)), "written")
    assert {written_key(p) for p in (copy, renamed, paraphrase, paraphrase2)} == {heldout.key}
    other = CodeProblem("Double it.", "", (("1\n", "2\n"), ("2\n", "4\n"), ("3\n", "6\n")), "written")
    assert written_key(other) == "2*x+0" != heldout.key
    square = CodeProblem("Print the square of N.", "", (("1\n", "1\n"), ("2\n", "4\n"), ("3\n", "9\n")), "written")
    spaced = CodeProblem("print  the SQUARE of n.\n", "", (("4\n", "16\n"),), "written")
    assert written_key(square).startswith("written:") and written_key(square) == written_key(spaced)


def test_a_rewrite_that_solves_a_held_out_problem_is_found_by_running_its_reference():
    from services.env.code_variants import solved_heldout
    from services.env.families.code_problems import CodeProblem

    heldout = [("code:first", make_problem(1, 0, seed=1)), ("code:second", make_problem(2, 0, seed=2))]
    ran: list[str] = []

    def runner(program: str, tests):  # a fake sandbox: "runs" the program by its name, for the pure rule
        ran.append(program)
        solves = program == "solves-second" and tuple(tests) == heldout[1][1].tests
        return [result(o if solves else "0\n") for _, o in tests]

    variant = CodeProblem("Anything", "solves-second", (("1\n", "1\n"),), "written")
    assert solved_heldout(variant, heldout, runner) == "code:second" and ran == ["solves-second"] * 2
    assert solved_heldout(CodeProblem("x", "solves-nothing", (("1\n", "1\n"),), "written"), heldout, runner) is None
