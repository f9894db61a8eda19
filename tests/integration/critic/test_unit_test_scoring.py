"""The critic runs each program of a code group on each generated unit test in the real sandbox; a
hostile program or test is contained and just fails; with the runner made to fail nothing is scored."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest

from services.common.config import SandboxConfig
from services.common.sandbox import Sandbox, SandboxError
from services.critic.unit_test_eval import score_tests
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
    passes = asyncio.run(score_tests(sandbox, group()))
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
