"""Model-written rewrites of coding problems (the environment model E of the coding setting: a new
statement and its tests, CURE arXiv 2506.03136 / RLAnything arXiv 2602.02488 §3.3): the request to
the model, parsing its JSON answer (pure), and the acceptance check, which runs the rewritten
problem's reference solution on its own tests through the family's sandbox runner.

The model is shown the problem (statement, reference solution, two of its tests), the direction and
the policy's pass rate, and answers one JSON object
``{"statement": ..., "reference": ..., "tests": [{"input": ..., "output": ...}, ...]}``. A rewrite is
refused, with the reason, when it is no JSON object, lacks a field, has fewer than `MIN_TESTS` or more
than `MAX_TESTS` tests, is its parent again, or when its reference does not pass every one of its
tests in the sandbox (a crash, a timeout or a wrong output on any of them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rlanything.v1.events_pb2 import DIRECTION_HARDER

from services.common.sandbox import Checker, RunResult
from services.env.families.code_problems import CodeProblem
from services.env.text_variants import VariantError, json_object

__all__ = ["code_variant_messages", "parse_code_variant", "check_code_variant", "solved_heldout", "MIN_TESTS",
           "MAX_TESTS",
           "MAX_STATEMENT_CHARS", "MAX_REFERENCE_CHARS", "MAX_TEST_CHARS", "CODE_VARIANT_SYSTEM"]

MIN_TESTS = 3
MAX_TESTS = 16
MAX_STATEMENT_CHARS = 4000
MAX_REFERENCE_CHARS = 4000
MAX_TEST_CHARS = 1000
CODE_VARIANT_SYSTEM = ("You write programming problems for an AI coder. Each problem is a statement, a reference "
                       "Python 3 solution that reads standard input and prints its answer, and unit tests "
                       "(an input and the exact expected output). Reply with one JSON object and nothing else.")


def code_variant_messages(parent: CodeProblem, direction: int, acc: float,
                          failed_answers: Sequence[str] = (), answer_chars: int = 400) -> list[dict[str, str]]:
    """The chat sent to the model (OpenAI message dicts): the problem, what to change, failed programs.

    ``acc`` is the policy's success rate on ``parent`` in [0, 1]; ``failed_answers`` are programs of
    failed rollouts, each cut to ``answer_chars``.
    """
    ask = ("It is too easy: write a HARDER problem of the same kind (one more step, a larger constant)."
           if direction == DIRECTION_HARDER else
           "It is too hard: write an EASIER problem of the same kind (fewer steps, smaller constants).")
    lines = [f"The coder solved this problem in {acc:.0%} of its attempts.", "", "[statement]", parent.statement,
             "", "[reference solution]", parent.reference.rstrip(), "", "[two of its tests]"]
    lines += [f"input: {stdin!r} -> output: {out!r}" for stdin, out in parent.tests[:2]]
    if failed_answers:
        lines += ["", "[wrong programs the coder wrote]"] + [f"- {a[:answer_chars]!r}" for a in failed_answers]
    lines += ["", ask, 'Reply with exactly: {"statement": "...", "reference": "...", "tests": '
              f'[{{"input": "...", "output": "..."}}, ...]}} with {MIN_TESTS} to {MAX_TESTS} tests.']
    return [{"role": "system", "content": CODE_VARIANT_SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


def _text(data: dict, name: str, limit: int) -> str:
    value = data.get(name)
    if value is None:
        raise VariantError(f"the model's problem has no {name!r} (keys: {sorted(data)})")
    if not isinstance(value, str):
        raise VariantError(f"the model's problem field {name!r} is a {type(value).__name__}, not a string")
    if not value.strip():
        raise VariantError(f"the model's problem field {name!r} is empty")
    if len(value) > limit:
        raise VariantError(f"the model's problem field {name!r} has {len(value)} characters (at most {limit})")
    return value


def parse_code_variant(text: str) -> CodeProblem:
    """The model's answer as a `CodeProblem` (key ``written``; inputs and outputs get a final newline).

    Raises:
        VariantError: not JSON, not an object, a field missing, empty, of the wrong type or too long,
            or a test count outside [`MIN_TESTS`, `MAX_TESTS`].
    """
    data = json_object(text)
    statement = _text(data, "statement", MAX_STATEMENT_CHARS).strip()
    reference = _text(data, "reference", MAX_REFERENCE_CHARS)
    tests = data.get("tests")
    if not isinstance(tests, list) or not MIN_TESTS <= len(tests) <= MAX_TESTS:
        count = len(tests) if isinstance(tests, list) else type(tests).__name__
        raise VariantError(f"the model's problem field 'tests' must list {MIN_TESTS} to {MAX_TESTS} tests, got {count}")
    pairs = []
    for i, test in enumerate(tests):
        if not isinstance(test, dict) or not all(isinstance(test.get(k), str | int) for k in ("input", "output")):
            raise VariantError(f"the model's test {i} is not an object with string fields 'input' and 'output'")
        stdin, out = str(test["input"]), str(test["output"])
        if len(stdin) > MAX_TEST_CHARS or len(out) > MAX_TEST_CHARS:
            raise VariantError(f"the model's test {i} is longer than {MAX_TEST_CHARS} characters")
        pairs.append((stdin if stdin.endswith("\n") else stdin + "\n", out if out.endswith("\n") else out + "\n"))
    return CodeProblem(statement, reference if reference.endswith("\n") else reference + "\n", tuple(pairs), "written")


def check_code_variant(parent: CodeProblem, variant: CodeProblem,
                       run_tests: Callable[[str, Sequence[tuple[str, str]]], list[RunResult]]) -> None:
    """May ``variant`` become a candidate? It must differ from its parent, and its reference must pass
    every one of its tests when ``run_tests`` (the family's sandbox runner) runs it.

    Raises:
        VariantError: the parent's statement again, or the reference failing a test (the reason names
            the test, the verdict and what it printed).
        SandboxError: the sandbox itself failed.
    """
    if " ".join(variant.statement.split()) == " ".join(parent.statement.split()):
        raise VariantError("the variant is its parent problem again (same statement)")
    results = run_tests(variant.reference, variant.tests)
    for i, (result, (stdin, expected)) in enumerate(zip(results, variant.tests, strict=True)):
        if not result.ok:
            raise VariantError(f"rejected: its reference fails its own test {i} (input {stdin!r}): "
                               f"{result.verdict.value} ({result.detail})")
        if not Checker.parse(variant.checker).matches(result.stdout, expected):
            raise VariantError(f"rejected: its reference fails its own test {i} (input {stdin!r}): printed "
                               f"{result.stdout[:80]!r}, the test expects {expected[:80]!r}")


def solved_heldout(variant: CodeProblem, heldout: Sequence[tuple[str, CodeProblem]],
                   run_tests: Callable[[str, Sequence[tuple[str, str]]], list[RunResult]]) -> str | None:
    """The instance key of the first held-out or OOD problem (``heldout``: key and problem) whose every
    ground-truth test ``variant``'s reference passes (under that problem's checker), or None. A rewrite
    that solves a held-out problem asks for the same function, whatever its wording, variable names
    or test inputs: training on it would train on that held-out problem. One sandbox batch per
    held-out problem (`run_tests`).

    Raises:
        SandboxError: the sandbox itself failed.
    """
    for key, problem in heldout:
        results = run_tests(variant.reference, problem.tests)
        checker = Checker.parse(problem.checker)
        if results and all(r.ok and checker.matches(r.stdout, expected)
                           for r, (_, expected) in zip(results, problem.tests, strict=True)):
            return key
    return None
