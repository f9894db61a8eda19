"""Procedural coding problems for family ``code`` (pure): short integer functions a tiny model can learn.

A problem is a chain of ``ops`` integer steps applied to the input x ("multiply by 3, then add 1"),
drawn from the task seed. The policy writes a Python program that reads x from standard input and
prints the result. Each problem carries its reference solution (the chain as one Python expression),
``examples`` input/output pairs shown in the statement, and `TESTS` ground-truth tests on other inputs
(hidden from the policy: a program that only prints the examples' outputs fails them). Expected outputs
are computed here from the chain itself, in plain integer arithmetic, never by running code.

Every step is ``add c``, ``subtract c`` or ``multiply by c``, so a chain computes ``a·x + b``; two
statements that compute the same function are the same instance (`function_key`).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from services.common.errors import InvalidArgumentError
from services.common.unit_tests import extract_program

__all__ = ["written_key", "Step", "CodeProblem", "INTEGER_VALIDATOR", "TESTS", "INPUT_RANGE", "TASK_TEXT", "MAX_CONSTANT", "MAX_FACTOR", "draw_steps", "apply_steps", "render_steps",
           "reference_program", "function_key", "make_problem", "extract_program"]

TESTS = 8
"""Ground-truth tests per procedural problem."""
INPUT_RANGE = (-99, 99)
"""Inputs of examples and tests are drawn from this closed range."""
TASK_TEXT = ("Write a Python 3 program that reads its input from standard input and prints its answer. "
             "Only the Python standard library can be imported.")
INTEGER_VALIDATOR = ("import sys\ntokens = sys.stdin.read().split()\n"
                     "if len(tokens) != 1:\n    raise SystemExit(1)\nint(tokens[0])\n")
"""The input validator of procedural problems: the input is one integer (the statement's x)."""
MAX_CONSTANT = 9
"""Default largest constant of an ``add``/``subtract`` step (knob ``max_constant``)."""
MAX_FACTOR = 5
"""Default largest constant of a ``multiply`` step (knob ``max_factor``; the smallest is 2)."""


@dataclass(frozen=True)
class Step:
    """One step of a chain: ``op`` is ``add``, ``sub`` or ``mul``; ``value`` its integer constant."""

    op: str
    value: int


@dataclass(frozen=True)
class CodeProblem:
    """One coding problem: the statement shown to the policy, the reference solution, and the
    ground-truth tests as (standard input, expected standard output) pairs."""

    statement: str
    reference: str
    tests: tuple[tuple[str, str], ...]
    key: str
    """What makes two problems the same instance (`function_key` for procedural problems)."""
    checker: str = "exact"
    """How an output is compared with a test's expected one (`services.common.sandbox.Checker.parse`:
    ``exact``, ``token``, ``float:rel=R,abs=A``); the statement says so when it is not exact."""
    input_validator: str = ""
    """A Python program that exits 0 when its standard input is a valid input of the problem ("": none);
    the critic rejects a generated unit test whose input it refuses (run in the sandbox)."""


def draw_steps(ops: int, rng: random.Random, max_constant: int = MAX_CONSTANT,
               max_factor: int = MAX_FACTOR) -> list[Step]:
    """``ops`` random steps (add 1..``max_constant``, subtract 1..``max_constant``, multiply by
    2..``max_factor``), each of the three kinds equally likely.

    Raises:
        InvalidArgumentError: ``ops`` < 1, ``max_constant`` < 1 or ``max_factor`` < 2.
    """
    if ops < 1:
        raise InvalidArgumentError(f"code: knob ops={ops} must be at least 1")
    if max_constant < 1:
        raise InvalidArgumentError(f"code: knob max_constant={max_constant} must be at least 1")
    if max_factor < 2:
        raise InvalidArgumentError(f"code: knob max_factor={max_factor} must be at least 2")
    steps = []
    for _ in range(ops):
        op = rng.choice(("add", "sub", "mul"))
        steps.append(Step(op, rng.choice(range(2, max_factor + 1) if op == "mul" else range(1, max_constant + 1))))
    return steps


def apply_steps(steps: list[Step], x: int) -> int:
    """The chain's value at ``x`` (integer arithmetic)."""
    for step in steps:
        x = x + step.value if step.op == "add" else x - step.value if step.op == "sub" else x * step.value
    return x


def render_steps(steps: list[Step]) -> str:
    """The chain in words: ``"multiply by 3, then add 1"``."""
    words = {"add": "add {}", "sub": "subtract {}", "mul": "multiply by {}"}
    return ", then ".join(words[s.op].format(s.value) for s in steps)


def reference_program(steps: list[Step]) -> str:
    """The reference solution: reads x, prints the chain as one Python expression, e.g.
    ``x = int(input())\\nprint((x + 2) * 3)``."""
    expr, additive = "x", False
    for step in steps:
        if step.op == "mul":
            expr, additive = (f"({expr}) * {step.value}" if additive else f"{expr} * {step.value}"), False
        else:
            expr, additive = f"{expr} {'+' if step.op == 'add' else '-'} {step.value}", True
    return f"x = int(input())\nprint({expr})\n"


def function_key(steps: list[Step]) -> str:
    """``a*x+b`` of the linear function the chain computes (two chains with the same one are one instance)."""
    b = apply_steps(steps, 0)
    return f"{apply_steps(steps, 1) - b}*x{b:+d}"


def _int(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None


def written_key(problem: CodeProblem) -> str:
    """The instance key of a written (model-rewritten) problem, from its content (pure): ``a*x+b``
    (`function_key`'s form) when every test maps one integer to one integer on one line a*x + b
    (2 points fix a and b, the others must agree), so a rewording of a procedural problem is that
    problem; else ``written:<hash>`` of the statement lower-cased with its whitespace collapsed (a
    copy with other spacing is the same instance). Paraphrases and renamings of non-linear problems
    are caught by running the reference on the held-out problems' tests instead
    (`services.env.code_variants.solved_heldout`)."""
    parsed = [(_int(i), _int(o)) for i, o in problem.tests]
    points = [(x, y) for x, y in parsed if x is not None and y is not None]
    if len(points) == len(parsed) >= 2 and len({x for x, _ in points}) == len(points):
        (x0, y0), (x1, y1) = points[0], points[1]
        if (y1 - y0) % (x1 - x0) == 0:
            a = (y1 - y0) // (x1 - x0)
            b = y0 - a * x0
            if all(y == a * x + b for x, y in points):
                return f"{a}*x{b:+d}"
    text = " ".join(problem.statement.lower().split())
    return "written:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def make_problem(ops: int, examples: int, seed: int, max_constant: int = MAX_CONSTANT,
                 max_factor: int = MAX_FACTOR) -> CodeProblem:
    """The procedural problem of a task seed: its chain (add/subtract constants up to
    ``max_constant``, factors up to ``max_factor``), ``examples`` shown input/output pairs and `TESTS` hidden ground-truth tests on
    other inputs, all drawn from ``seed``.

    Raises:
        InvalidArgumentError: ``ops`` < 1, ``examples`` < 0, ``max_constant`` < 1 or ``max_factor`` < 2.
    """
    if examples < 0:
        raise InvalidArgumentError(f"code: knob examples={examples} must be at least 0")
    rng = random.Random(f"code-{seed}")
    steps = draw_steps(ops, rng, max_constant, max_factor)
    inputs = rng.sample(range(INPUT_RANGE[0], INPUT_RANGE[1] + 1), examples + TESTS)
    shown = "".join(f"\ninput {x} -> output {apply_steps(steps, x)}" for x in inputs[:examples])
    statement = ("Read one integer x from standard input and print one integer: the result of these steps "
                 f"applied to x: {render_steps(steps)}." + (f"\nExamples:{shown}" if shown else ""))
    tests = tuple((f"{x}\n", f"{apply_steps(steps, x)}\n") for x in inputs[examples:])
    return CodeProblem(statement, reference_program(steps), tests, function_key(steps),
                       input_validator=INTEGER_VALIDATOR)
