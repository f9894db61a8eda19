"""The critic runs each program of a code group on each generated unit test in the real sandbox; a
hostile program or test is contained and just fails; with the runner made to fail nothing is scored."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest

from services.common.config import SandboxConfig
from services.common.sandbox import Sandbox, SandboxError
from rlanything.v1.events_pb2 import CodeCheck

from services.critic.group_eval import evaluate_group
from services.common.config import CriticServiceConfig
from services.critic.unit_test_eval import TaskChecks, score_tests
from services.env.families.code_problems import INTEGER_VALIDATOR
from tests.unit.critic.test_critic_unit_tests import code_group

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs root (namespaces, per-run uids)")

PROGRAMS = ["x = int(input())\nprint(3 * x + 1)\n",       # correct
            "```python\nprint(int(input()) * 3)\n```",     # wrong, fenced
            "while True:\n    pass\n",                     # loops
            "import os\nos.kill(os.getppid(), 9)\n"]       # hostile
TESTS = [["\\boxed{2 => 7}", "\\boxed{0 => 0}"], ["\\boxed{-1 => -2}", "no test"], ["\\boxed{1 => 4}", ""],
         ["\\boxed{x => 1}", "\\boxed{3 => 10}"]]


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig(workers=2, timeout_s=1.0)) as box:
        yield box


def group():
    recs = code_group([True, False, False, False], TESTS)
    for rec, program in zip(recs, PROGRAMS):
        rec.trajectory.steps[0].action = program
    return recs


def test_every_program_runs_on_every_parseable_test(sandbox):
    passes, checks = asyncio.run(score_tests(sandbox, group()))
    assert checks == TaskChecks()   # the group's trajectories carry no CodeCheck: nothing more is run
    # parseable tests: 2=>7, 0=>0, -1=>-2, 1=>4, x=>1 (crashes every int(input())), 3=>10
    assert passes == [[True, False, True, True, False, True],
                      [False, True, False, False, False, False],
                      [False] * 6,
                      [False] * 6]


def test_no_generated_test_runs_outside_the_sandbox(sandbox, monkeypatch):
    async def refuse(self, jobs):
        raise SandboxError("runner disabled by the test")

    monkeypatch.setattr(Sandbox, "run_many_async", refuse)
    with pytest.raises(SandboxError, match="runner disabled"):
        asyncio.run(score_tests(sandbox, group()))


def test_the_task_s_validator_rejects_inputs_outside_the_problem_and_its_reference_marks_wrong_tests(sandbox):
    """With the env's CodeCheck (the procedural problem's validator, its reference 3x + 1): the test
    "x => 1" is refused as an invalid input (no program runs on it, it gets the format penalty), and
    "0 => 0", which the reference fails, is a wrong test (CURE's reference row)."""
    recs = group()
    for rec in recs:
        rec.trajectory.code_check.CopyFrom(CodeCheck(input_validator=INTEGER_VALIDATOR,
                                                     reference="x = int(input())\nprint(3 * x + 1)\n", checker="exact"))
    passes, checks = asyncio.run(score_tests(sandbox, recs))
    assert checks.invalid_inputs == (False, False, False, False, True, False)
    assert checks.reference_K == (True, False, True, True, True)   # 2=>7, 0=>0, -1=>-2, 1=>4, 3=>10
    assert passes[0] == [True, False, True, True, True]
    out = evaluate_group(recs, CriticServiceConfig(unit_tests=True), partial=False, unit_test_passes=passes,
                         unit_test_checks=checks)
    assert out.stats["sum/unit_tests_rejected_invalid_input"] == 1
    assert out.stats["sum/unit_tests_correct"] == 4
