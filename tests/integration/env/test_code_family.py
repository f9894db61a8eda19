"""Family ``code`` against the real sandbox: references pass, wrong and hostile programs are scored as
the tests say and contained, and no program the model wrote runs anywhere but in the sandbox."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from services.common.config import FamilyConfig, SandboxConfig
from services.common.sandbox import Sandbox, SandboxError, SandboxStartError
from services.env.disjoint import disjoint_specs, eval_keys, eval_specs
from services.env.families.base import TaskSpec
from services.env.families.code_family import CodeFamily
from services.env.families.registry import build_family

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs root (namespaces, per-run uids)")


def answer(code_family: CodeFamily, spec: TaskSpec, program: str):
    episode = code_family.make_episode(spec, 0)
    return episode, episode.step(program)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_reference_passes_every_ground_truth_test_in_the_sandbox(code_family, seed):
    spec = TaskSpec("code", {"ops": 3.0, "examples": 2.0}, seed)
    episode = code_family.make_episode(spec, 0)
    (reference,) = episode.oracle_plan()
    result = episode.step(f"Here is my program:\n```python\n{reference}```")
    assert (result.reward, result.won, result.terminated, result.oracle_plan_length) == (1.0, True, True, 0)
    assert result.observation == "Passed 8 of 8 tests."
    assert code_family.oracle_plan_length(spec) == 3  # the chain's length: the proposer's difficulty


def test_a_wrong_program_scores_the_share_of_tests_it_passes(code_family):
    spec = TaskSpec("code", {"ops": 1.0, "examples": 2.0}, 4)
    problem = code_family.problem(spec)
    first_in, first_out = problem.tests[0]
    program = f"x = int(input())\nprint({first_out.strip()} if x == {first_in.strip()} else 0)\n"
    right = sum(1 for _, out in problem.tests if out.strip() == "0") + (first_out.strip() != "0")
    episode, result = answer(code_family, spec, program)
    assert result.reward == right / 8 and not result.won
    assert episode.passed[0] is True


@pytest.mark.parametrize(("name", "program", "verdict"), [
    ("exit(0) without output", "import sys\nsys.exit(0)\n", "WA (wrong output)"),
    ("printing the shown examples' outputs", None, "WA (wrong output)"),
    ("an infinite loop", "while True:\n    pass\n", "TLE"),
    ("a 10 GB allocation", "x = bytearray(10 * 1024 ** 3)\n", "MLE"),
    ("a syntax error", "print(\n", "RE"),
    ("a fork bomb", "import os\nwhile True:\n    os.fork()\n", None),
    ("opening a socket", "import socket\nsocket.create_connection(('127.0.0.1', 22), timeout=1)\n", "RE"),
    ("os.kill of its parent", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint(0)\n", None),
])
def test_hostile_and_cheating_programs_score_zero_and_the_family_goes_on(code_family, name, program, verdict):
    spec = TaskSpec("code", {"ops": 2.0, "examples": 3.0}, 9)
    if program is None:  # hard-codes the visible examples; the ground-truth tests are on other inputs
        lines = [line.split() for line in code_family.problem(spec).statement.splitlines() if line.startswith("input ")]
        table = {int(parts[1]): int(parts[4]) for parts in lines}
        program = f"print({table!r}.get(int(input()), 0))\n"
    episode, result = answer(code_family, spec, program)
    assert result.reward == 0.0 and not result.won, name
    assert f"First failure: {verdict or ''}" in result.observation, result.observation
    _, after = answer(code_family, spec, code_family.problem(spec).reference)
    assert after.won  # the sandbox serves on


def test_a_program_cannot_write_outside_its_scratch_directory(code_family, tmp_path: Path):
    os.chmod(tmp_path, 0o777)
    marker = tmp_path / "escaped"
    spec = TaskSpec("code", {"ops": 1.0}, 3)
    _, result = answer(code_family, spec, f"open({str(marker)!r}, 'w').write('x')\nprint(0)\n")
    assert result.reward == 0.0 and not marker.exists()


def test_no_program_runs_outside_the_sandbox(code_family, monkeypatch):
    """With the sandbox's runner made to fail, an answer cannot be scored at all: no other path runs it."""
    def refuse(self, jobs):
        raise SandboxError("runner disabled by the test")

    monkeypatch.setattr(Sandbox, "run_many", refuse)
    monkeypatch.setattr(Sandbox, "run", lambda self, *a, **k: refuse(self, []))
    episode = code_family.make_episode(TaskSpec("code", {"ops": 1.0}, 3), 0)
    with pytest.raises(SandboxError, match="runner disabled"):
        episode.step(episode.oracle_plan()[0])


def test_a_sandbox_that_cannot_start_stops_the_family_from_starting():
    code_family = build_family(FamilyConfig(type="code", knobs={"ops": 1}), "/tmp",
                          SandboxConfig(isolation="bwrap", bwrap_path="/nonexistent/bwrap", workers=1))
    with pytest.raises(SandboxStartError):
        code_family.start()


def test_held_out_functions_are_never_trained_on():
    code_family = CodeFamily()  # instance keys need no sandbox
    cfg = FamilyConfig(type="code", knobs={"ops": 1}, train_slots=20, heldout_slots=6, ood_knobs={"ops": 2},
                       ood_slots=4)
    excluded = eval_keys({"code": code_family}, eval_specs([cfg], base_seed=0))
    assert all(key.startswith("code:") and "*x" in key for key in excluded)
    train = disjoint_specs(code_family, {"ops": 1.0}, 20, base=0, excluded=excluded)
    assert not {code_family.instance_key(s) for s in train} & excluded
    assert code_family._sandbox is None


def test_a_rewritten_problem_s_reference_runs_only_in_the_sandbox(code_family, monkeypatch):
    """The rewrite check runs the model-written reference through the code_family's sandbox runner: with the
    runner made to fail, the check cannot pass."""
    from services.env.code_variants import check_code_variant
    from services.env.families.code_problems import CodeProblem

    parent = code_family.problem(TaskSpec("code", {"ops": 1.0}, 3))
    variant = CodeProblem("Print x + 1.", "print(int(input()) + 1)\n", (("1\n", "2\n"), ("5\n", "6\n")), "written")
    check_code_variant(parent, variant, code_family.run_tests)  # the real sandbox: the reference passes

    def refuse(self, jobs):
        raise SandboxError("runner disabled by the test")

    monkeypatch.setattr(Sandbox, "run_many", refuse)
    with pytest.raises(SandboxError, match="runner disabled"):
        check_code_variant(parent, variant, code_family.run_tests)
